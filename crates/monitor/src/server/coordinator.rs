//! Proportional-fair coordination (`coordination = "pf"`, issue 10): the
//! daemon's side of `hetsched-pf`, the same [`Coordinator`] the simulator
//! runs.
//!
//! Every tick this thread gathers what each application did: the monitor's
//! own timing of the units it serves (slot time at completion) and the
//! application's `ReportDemand` for the CPU kinds it runs itself, checked
//! against the CPU time its process consumed (`/proc/PID/stat`). It feeds
//! one [`DemandMeter`] per application, lets the [`Coordinator`] re-solve
//! when apps come or go or their figures drift, and stores per-client
//! targets that the timer thread publishes in the private pages.
//!
//! Coordinated are the applications that follow targets (they send
//! `ReportDemand`: hetsched-runtime does), whatever their class and
//! shares, at the default priority. Class and shares are their weights in
//! Σ wᵢ ln rᵢ (`hetsched_core::coordination::coordination_weights`: a
//! CUSTOM percentage weighs against the others, BACKGROUND the least):
//! above the floor, an app with twice the shares gets twice the weight.
//! On a unit whose agent runs the share policy the native estimate splits
//! the unit's time by those weights ([`splits_by_entitlement`]), as the
//! agent does natively, and an app whose targets use only such units is
//! not paced ([`published_rate`] says why). An app at another priority
//! is ordered strictly by its agents and left out; it places as it
//! likes, as do applications that do not follow targets, and what they
//! use of each unit is taken out of the supply the others share. So is every application's host side on the
//! CPU units ([`HostLoad`]: its process's CPU time beyond
//! the CPU tasks it reports), which shares the cores with their tasks.
//! And so is everything else that keeps the CPU units' cores busy: other
//! programs, the monitor, clients that never report
//! ([`crate::outside_load`], four times a second), with hysteresis
//! (`Coordinator::set_outside_load`).
//!
//! The solve (an exponential-cone program, ~0.3 ms for 6 apps × 3 units)
//! runs outside the state lock, so the dispatch gate never waits for it.

use crate::coordination_results::CoordinationResults;
use crate::demand_report::DemandReport;
use crate::metrics::snapshot::CpuSupply;
use crate::outside_load::OutsideLoadMeter;
use crate::server::Shared;
use hetsched_core::coordination::{
    Coordinator, UnitSupply, coordination_weights, published_rate, supply_left,
};
use hetsched_core::demand_meter::{DemandMeter, HostLoad, Source, UnitUse};
use hetsched_core::ids::{ClientId, Ns, UnitId};
use hetsched_core::policy::{ClientSettings, PolicyKind};
use hetsched_core::unit::UnitClass;
use hetsched_protocol::{CoordinatedApp, CoordinationStatus, Role};
use hetsched_views::Targets;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What one tick copies out of the state under the lock.
struct Gathered {
    /// The daemon's clock at the gathering.
    at: Ns,
    apps: Vec<GatheredApp>,
}

/// One application's figures at one tick.
struct GatheredApp {
    id: ClientId,
    pid: u32,
    /// Cumulative (calls, busy ns) per unit, as the monitor measured them.
    measured: Vec<(u64, f64)>,
    /// Its report, if a new one came.
    report: Option<DemandReport>,
    /// Its weight if its standing lets it be coordinated
    /// (`hetsched_core::coordination::coordination_weights`).
    weight: Option<f64>,
    /// Root or the admin group: its declared native unit stands as
    /// declared (`AppDemand::native_trusted`).
    trusted: bool,
}

/// Per application, what the thread keeps between ticks.
struct Tracked {
    meter: DemandMeter,
    /// It has sent `ReportDemand`, so it follows targets.
    follows: bool,
    /// It took part in the last tick's coordination.
    coordinated: bool,
    usage: UnitUse,
    /// Cores its process keeps busy outside its CPU tasks.
    host: HostLoad,
    /// The native unit it declared (believed within the core's slack
    /// unless `trusted`).
    native: Option<usize>,
    trusted: bool,
}

impl Tracked {
    fn new(sources: &[Source]) -> Self {
        Tracked {
            meter: DemandMeter::new(sources.to_vec()),
            follows: false,
            coordinated: false,
            usage: UnitUse::default(),
            host: HostLoad::default(),
            native: None,
            trusted: false,
        }
    }

    fn takes_part(&self, weight: Option<f64>) -> bool {
        self.follows && weight.is_some()
    }
}

pub(crate) fn run(shared: Arc<Shared>) {
    let sources: Vec<Source> = shared
        .setup
        .units
        .iter()
        .map(|u| match u.unit.class {
            UnitClass::Cpu => Source::Reported,
            _ => Source::Measured,
        })
        .collect();
    let supply: Vec<UnitSupply> = shared
        .setup
        .units
        .iter()
        .map(|u| UnitSupply {
            slots: u.unit.slots.max(1) as f64,
            time_shared: u.unit.class == UnitClass::Cpu,
            short_first: u.policy == PolicyKind::ShortFirst,
            // Its agent gives each app its entitlement natively.
            splits_by_weight: splits_by_entitlement(u.policy),
        })
        .collect();
    let max_in_flight = shared.setup.monitor.max_outstanding as f64;
    let mut coordinator = Coordinator::new(shared.setup.coordinator, supply.clone());
    let mut tracked: BTreeMap<ClientId, Tracked> = BTreeMap::new();
    // The CPU units, in CPU kind order (the CPU agent's `cpu_unit_slots`).
    let cpu_units: Vec<usize> = (0..supply.len())
        .filter(|&u| supply[u].time_shared)
        .collect();
    let cpu_slots: Vec<f64> = cpu_units.iter().map(|&u| supply[u].slots).collect();
    let mut outside = OutsideLoadMeter::new(&cpu_slots);
    let mut computed = std::time::Duration::ZERO;
    loop {
        if !shared.stop.pause(shared.setup.tick) {
            return;
        }
        let gathered = gather(&shared);
        let now = gathered.at;
        let pids: Vec<(ClientId, u32)> = gathered.apps.iter().map(|a| (a.id, a.pid)).collect();
        // Each process's CPU time is read from /proc once per tick, for the
        // meters and the outside load alike.
        let cpu_times = std::cell::RefCell::new(BTreeMap::new());
        let cpu_time = |pid: u32| {
            *cpu_times
                .borrow_mut()
                .entry(pid)
                .or_insert_with(|| crate::procfs::cpu_time_ns(pid))
        };
        step(
            &mut coordinator,
            &mut tracked,
            &sources,
            &supply,
            max_in_flight,
            gathered,
            cpu_time,
        );
        if outside.due(now) {
            // The apps whose CPU use the model already has: those that
            // report (demand and host load).
            let modelled: Vec<(u32, f64)> = pids
                .iter()
                .filter(|(id, _)| tracked.get(id).is_some_and(|t| t.follows))
                .filter_map(|&(_, pid)| Some((pid, cpu_time(pid)?)))
                .collect();
            let busy = crate::outside_load::read_busy(&shared.setup.kind_of_cpu, cpu_units.len());
            if let Some(load) = busy.and_then(|b| outside.sample(now, b, &modelled)) {
                for (&u, &cores) in cpu_units.iter().zip(load) {
                    if coordinator.set_outside_load(u, cores) {
                        tracing::info!(
                            "coordination: outside CPU load on {} now {cores:.2} cores; \
                             it offers the coordinated apps {:.2} of {} slots",
                            shared.setup.units[u].unit.name,
                            coordinator.supply()[u].slots,
                            supply[u].slots
                        );
                    }
                }
            }
        }
        let (solves, slices) = (coordinator.solves(), coordinator.slices());
        let started = std::time::Instant::now();
        coordinator.update(now);
        if coordinator.slices() != slices {
            computed += started.elapsed();
        }
        // A pick in slices publishes at its last: what it took is every
        // update's computing since the solve before.
        let solved_in = (coordinator.solves() != solves).then(|| std::mem::take(&mut computed));
        if let Some(took) = solved_in {
            log_solve(&coordinator, &pids, &shared, took);
        }
        store(&shared, &coordinator, &tracked, solved_in);
    }
}

fn gather(shared: &Shared) -> Gathered {
    let admin_gid = shared.setup.monitor.admin_gid;
    // Taken before the clients are read: a report that comes meanwhile
    // waits for the next tick rather than being dropped.
    let mut reports = shared.demand_reports.take();
    let state = shared.lock();
    let st = &*state;
    // Quiet applications (nothing outstanding, idle for seconds) have no
    // demand to coordinate: leaving them out keeps a step O(busy
    // applications), whatever number sit connected. One that wakes up is
    // tracked afresh.
    let clients: Vec<_> = st
        .pages
        .busy_clients()
        .into_iter()
        .filter_map(|id| st.monitor.client(id))
        .filter(|c| c.role == Role::Application)
        .collect();
    // Weighed together (a CUSTOM percentage weighs against the others),
    // read afresh at every tick (`hetsched shares set` moves a weight).
    // Apps at a non-default priority get no weight: their agents order
    // them strictly.
    let settings: Vec<&[ClientSettings]> = clients.iter().map(|c| c.settings.as_slice()).collect();
    let weights: Vec<Option<f64>> = coordination_weights(&settings);
    let apps = clients
        .into_iter()
        .zip(weights)
        .map(|(c, weight)| {
            let measured = st
                .monitor
                .agents()
                .iter()
                .map(|a| {
                    let u = a.use_of(c.id);
                    (u.completed, u.busy_ns as f64)
                })
                .collect();
            GatheredApp {
                id: c.id,
                pid: c.peer.pid,
                measured,
                report: None,
                weight,
                trusted: c.peer.is_admin(admin_gid),
            }
        })
        .collect::<Vec<_>>();
    drop(state);
    // Reports of clients that left (or went quiet) are dropped.
    let mut apps = apps;
    for app in &mut apps {
        app.report = reports.remove(&app.id);
    }
    Gathered {
        at: shared.now(),
        apps,
    }
}

/// Whether a unit's agent running `policy` splits the unit's time among
/// its applications by their classes and shares, as
/// `coordination_weights` weighs them. Only the share policy does: FIFO,
/// short-first and the time-shared CPUs serve in turn, priority orders
/// strictly, and Pegasus's credit policies weigh raw shares as credits
/// (NORMAL and CUSTOM alike), not as the share policy's entitlements.
fn splits_by_entitlement(policy: PolicyKind) -> bool {
    policy == PolicyKind::Share
}

/// Feeds one tick's figures to the meters and the coordinator. `cpu_time`
/// reads a process's consumed CPU time (ns), `/proc` in the daemon.
#[allow(clippy::too_many_arguments)]
fn step(
    coordinator: &mut Coordinator,
    tracked: &mut BTreeMap<ClientId, Tracked>,
    sources: &[Source],
    supply: &[UnitSupply],
    max_in_flight: f64,
    gathered: Gathered,
    cpu_time: impl Fn(u32) -> Option<f64>,
) {
    let present: BTreeSet<ClientId> = gathered.apps.iter().map(|a| a.id).collect();
    tracked.retain(|id, _| {
        let keep = present.contains(id);
        if !keep {
            coordinator.remove_app(*id);
        }
        keep
    });
    let mut reserved = vec![0.0; supply.len()];
    for GatheredApp {
        id,
        pid,
        measured,
        report,
        weight,
        trusted,
    } in gathered.apps
    {
        let t = tracked.entry(id).or_insert_with(|| Tracked::new(sources));
        for (u, &(calls, busy)) in measured.iter().enumerate() {
            t.meter.measured(u, calls, busy);
        }
        // Busy time per unit: the daemon's own for the units it serves,
        // the app's reported execution time for the CPU kinds.
        let mut busy: Vec<f64> = measured.iter().map(|m| m.1).collect();
        if let Some(r) = &report {
            t.follows = true;
            for d in &r.units {
                if let Some(b) = busy.get_mut(d.unit.index()) {
                    *b = d.exec_ns;
                }
            }
        }
        t.usage.observe(gathered.at, busy);
        if let Some(r) = report {
            let entries: Vec<(usize, u64, f64)> = r
                .units
                .iter()
                .map(|d| (d.unit.index(), d.calls, d.exec_ns))
                .collect();
            let process_cpu = cpu_time(pid);
            t.meter
                .reported(&entries, r.in_flight, process_cpu, max_in_flight);
            if let Some(cpu) = process_cpu {
                let cpu_tasks: f64 = entries
                    .iter()
                    .filter(|(u, _, _)| sources.get(*u) == Some(&Source::Reported))
                    .map(|e| e.2)
                    .sum();
                t.host.observe(gathered.at, cpu, cpu_tasks);
            }
            t.meter
                .set_implemented(r.implemented.iter().map(|u| u.index()).collect());
            t.native = r.native.map(|u| u.index());
        }
        t.trusted = trusted;
        // Solving before every unit the app implements has figures would
        // leave the others out of its targets for good: an app that
        // follows its targets is never measured where they do not send it.
        t.coordinated = t.takes_part(weight);
        match weight {
            Some(w) if t.coordinated && t.meter.is_complete() => {
                let mut demand = t.meter.demand();
                demand.weight = w;
                demand.declared_native = t.native;
                demand.native_trusted = t.trusted;
                coordinator.set_app(id, demand);
            }
            Some(_) if t.coordinated => {}
            _ => {
                coordinator.remove_app(id);
                for (r, used) in reserved.iter_mut().zip(t.usage.slots()) {
                    *r += used;
                }
            }
        }
    }
    // Every app's host side runs on the same cores as the CPU units' tasks.
    let host: f64 = tracked.values().map(|t| t.host.slots()).sum();
    coordinator.set_supply(supply_left(supply, &reserved, host));
}

/// One debug line per coordinated app after each solve: what it was
/// given and what the solve expects of it, so that an operator (or `hetsched
/// demo --daemon-logs`) can follow why an app ends up where it does.
fn log_solve(
    coordinator: &Coordinator,
    pids: &[(ClientId, u32)],
    shared: &Shared,
    took: std::time::Duration,
) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let names: Vec<&str> = shared
        .setup
        .units
        .iter()
        .map(|u| u.unit.name.as_str())
        .collect();
    tracing::debug!(
        "coordination: solve {} took {:.1} ms ({}{}) over {} update(s), floor {:?}",
        coordinator.solves(),
        took.as_secs_f64() * 1e3,
        if coordinator.last_solve_warm() {
            "warm"
        } else {
            "full"
        },
        coordinator
            .last_cause()
            .map(|c| format!(": {c}"))
            .unwrap_or_default(),
        coordinator.last_pick_slices(),
        coordinator.floor()
    );
    for &(id, pid) in pids {
        let (Some(fractions), Some(rate)) = (coordinator.target(id), coordinator.rate(id)) else {
            continue;
        };
        let split: Vec<String> = names
            .iter()
            .zip(fractions)
            .filter(|(_, f)| **f > 0.0)
            .map(|(n, f)| format!("{n} {f:.3}"))
            .collect();
        let (native, predicted) = coordinator.estimate(id).unwrap_or((f64::NAN, f64::NAN));
        tracing::debug!(
            "coordination: client {} (pid {pid}) native {native:.1}/s predicted {predicted:.3}x \
             rate {rate:.1}/s on {}",
            id.0,
            split.join(", ")
        );
    }
}

/// Tells the monitor which clients are coordinated and which units run
/// short jobs first (under the state lock), then stores the targets for
/// the timer's next publication and the status summary (under their own).
fn store(
    shared: &Shared,
    coordinator: &Coordinator,
    tracked: &BTreeMap<ClientId, Tracked>,
    solved_in: Option<std::time::Duration>,
) {
    let targets: BTreeMap<ClientId, (&[f64], f64)> = tracked
        .keys()
        .filter_map(|id| Some((*id, coordinator.target(*id).zip(coordinator.rate(*id))?)))
        .collect();
    let (n_units, pids) = {
        let mut state = shared.lock();
        let st = &mut *state;
        for u in 0..st.monitor.agents().len() {
            st.monitor.set_short_first(u, coordinator.short_first(u));
        }
        let mut pids = BTreeMap::new();
        for (id, t) in tracked {
            st.monitor
                .set_coordinated(*id, t.coordinated && targets.contains_key(id));
            pids.insert(*id, st.monitor.client(*id).map_or(0, |c| c.peer.pid));
        }
        (st.monitor.agents().len(), pids)
    };
    let apps = tracked
        .iter()
        .map(|(id, t)| {
            let target = targets.get(id);
            let estimate = coordinator.estimate(*id);
            CoordinatedApp {
                client: *id,
                pid: pids.get(id).copied().unwrap_or(0),
                rate: target.map(|t| t.1),
                fractions: target.map(|t| t.0.to_vec()).unwrap_or_default(),
                native: estimate.map(|e| e.0),
                predicted_relative: estimate.map(|e| e.1),
                over_reported: t.meter.caught_over_reporting(),
                coordinated: t.coordinated,
            }
        })
        .collect();
    let floor = coordinator.floor();
    let status = CoordinationStatus {
        solves: coordinator.solves(),
        floor: floor.map(|f| f.0),
        // The coordinator asks for a margin above native; what status
        // promises is native itself.
        floor_feasible: floor.map(|(f, goal_met)| goal_met || f >= 1.0 - 1e-6),
        apps,
        short_first: (0..n_units)
            .filter(|&u| coordinator.short_first(u))
            .filter_map(|u| u16::try_from(u).ok().map(UnitId))
            .collect(),
    };
    let last_solve_ns = match solved_in {
        Some(d) => Some(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        None => shared.coordination.get().last_solve_ns,
    };
    // The timer has the pages whose targets changed rewritten.
    shared.coordination.set(CoordinationResults {
        targets: targets
            .into_iter()
            .map(|(id, (fractions, rate))| {
                let rate = published_rate(rate, fractions, coordinator.supply());
                let fractions = fractions.to_vec();
                (id, Targets { rate, fractions })
            })
            .collect(),
        status: Some(status),
        last_solve_ns,
        warm_solves: coordinator.warm_solves(),
        cpu_supply: coordinator
            .supply()
            .iter()
            .enumerate()
            .filter(|(_, s)| s.time_shared)
            .map(|(unit, s)| CpuSupply {
                unit,
                outside_cores: coordinator.outside_load(unit),
                offered_slots: s.slots,
            })
            .collect(),
    });
}

#[cfg(test)]
mod tests;
