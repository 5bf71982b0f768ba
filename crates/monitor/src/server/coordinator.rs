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
//! `ReportDemand`: hetsched-runtime does) and whose standing is one class
//! and shares (NORMAL, CUSTOM or BACKGROUND), the same on every unit, at
//! the default priority. What the share policy entitles them to is their
//! weight in Σ wᵢ ln rᵢ
//! (`hetsched_core::coordination::coordination_weights`): above the
//! floor, an app with twice the shares gets twice the weight, and CUSTOM
//! 70 / 30 weigh 70 / 30. On a unit whose agent runs the share policy the
//! native estimate splits the unit's time by those weights
//! ([`splits_by_entitlement`]), as the agent does, so the floor keeps a
//! CUSTOM app at its percentage there. A class or shares changed while the
//! app runs (`hetsched run`, `hetsched shares set`) changes its weight at
//! the next tick. Priorities and shares that differ by unit are enforced
//! by the units' agents ([`same_class_everywhere`] says why), and
//! proportional fairness must not override them; those applications
//! place as they like, and what they use of each unit is taken out of the
//! supply the others share. So is every application's host side on the
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
use hetsched_core::coordination::{Coordinator, UnitSupply, coordination_weights, supply_left};
use hetsched_core::demand_meter::{DemandMeter, HostLoad, Source, UnitUse};
use hetsched_core::ids::{ClientId, Ns, UnitId};
use hetsched_core::policy::{ClientSettings, PolicyKind, ShareClass};
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
        let solves = coordinator.solves();
        let started = std::time::Instant::now();
        coordinator.update(now);
        let solved_in = (coordinator.solves() != solves).then(|| started.elapsed());
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
    // read afresh at every tick (`hetsched shares set` moves a weight); the
    // apps with one standing everywhere take part: see
    // `same_class_everywhere`.
    let settings: Vec<&[ClientSettings]> = clients.iter().map(|c| c.settings.as_slice()).collect();
    let weights: Vec<Option<f64>> = coordination_weights(&settings)
        .into_iter()
        .zip(&settings)
        .map(|(w, s)| w.filter(|_| same_class_everywhere(s)))
        .collect();
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

/// Whether an application's standing is one class and shares (NORMAL,
/// CUSTOM or BACKGROUND), the same on every unit, at the default priority:
/// only those take part in the daemon's coordination, weighted by what
/// the share policy entitles them to (`coordination_weights`). The native
/// estimate splits a unit whose agent enforces entitlements by those
/// weights ([`splits_by_entitlement`]), so the floor keeps a CUSTOM 70 app
/// at its 70 % there. A priority is a strict order on a unit, and settings
/// that differ by unit weigh one way here and another there: those stay
/// the agents' to enforce.
fn same_class_everywhere(settings: &[ClientSettings]) -> bool {
    let Some(first) = settings.first() else {
        return false;
    };
    let entitled = match first.class {
        ShareClass::Normal { shares } | ShareClass::Custom { shares } => shares > 0,
        ShareClass::Background => true,
    };
    entitled
        && first.priority == ClientSettings::default().priority
        && settings.iter().all(|s| s == first)
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
                let fractions = fractions.to_vec();
                (id, Targets { rate, fractions })
            })
            .collect(),
        status: Some(status),
        last_solve_ns,
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
mod tests {
    use super::*;
    use hetsched_core::coordination::CoordinatorConfig;
    use hetsched_core::ids::UnitId;
    use hetsched_protocol::UnitDemand;

    fn sources() -> Vec<Source> {
        vec![Source::Reported, Source::Measured, Source::Measured]
    }

    fn supply() -> Vec<UnitSupply> {
        vec![
            UnitSupply::processor_shared(2.0),
            UnitSupply::queue(1.0),
            UnitSupply::queue(1.0),
        ]
    }

    fn report(cpu_calls: u64, cpu_ns: f64) -> Option<DemandReport> {
        Some(DemandReport {
            units: vec![UnitDemand {
                unit: UnitId(0),
                calls: cpu_calls,
                exec_ns: cpu_ns,
            }],
            in_flight: 2.0,
            implemented: vec![UnitId(0), UnitId(1), UnitId(2)],
            native: None,
        })
    }

    /// Two apps, both measured on both devices and reporting CPU work;
    /// returns the coordinator after a few ticks.
    fn run_ticks(
        cpu_used: impl Fn(u32) -> Option<f64>,
        claim_factor: f64,
    ) -> (Coordinator, BTreeMap<ClientId, Tracked>) {
        run_ticks_with(cpu_used, claim_factor, None)
    }

    /// [`run_ticks`], plus `extra` (a third app) at every tick.
    fn run_ticks_with(
        cpu_used: impl Fn(u32) -> Option<f64>,
        claim_factor: f64,
        extra: Option<&dyn Fn(u64) -> GatheredApp>,
    ) -> (Coordinator, BTreeMap<ClientId, Tracked>) {
        let mut c = Coordinator::new(CoordinatorConfig::default(), supply());
        let mut tracked = BTreeMap::new();
        for tick in 1..=5u64 {
            let t = tick as f64;
            let mut g = Gathered {
                // 100 ms per tick.
                at: tick * 100_000_000,
                apps: vec![
                    GatheredApp {
                        id: ClientId(1),
                        pid: 100,
                        measured: vec![
                            (0, 0.0),
                            (tick * 10, t * 10.0 * 2e6),
                            (tick * 5, t * 5.0 * 6e6),
                        ],
                        report: report(tick * 4, t * 4.0 * 5e6 * claim_factor),
                        weight: Some(1.0),
                        trusted: false,
                    },
                    GatheredApp {
                        id: ClientId(2),
                        pid: 200,
                        measured: vec![
                            (0, 0.0),
                            (tick * 10, t * 10.0 * 1e6),
                            (tick * 5, t * 5.0 * 3e6),
                        ],
                        report: report(tick * 4, t * 4.0 * 20e6),
                        weight: Some(1.0),
                        trusted: false,
                    },
                ],
            };
            if let Some(extra) = extra {
                g.apps.push(extra(tick));
            }
            step(
                &mut c,
                &mut tracked,
                &sources(),
                &supply(),
                8.0,
                g,
                &cpu_used,
            );
        }
        c.update(0);
        (c, tracked)
    }

    #[test]
    fn a_declared_native_unit_is_kept_for_the_solve() {
        let mut c = Coordinator::new(CoordinatorConfig::default(), supply());
        let mut tracked = BTreeMap::new();
        let mut declared = report(4, 4.0 * 5e6);
        if let Some(r) = declared.as_mut() {
            r.native = Some(UnitId(1));
        }
        // One tick with one app that reports `report`, from a client
        // trusted or not.
        let cpu = cpu_used_honestly();
        let tick =
            |c: &mut Coordinator, report, trusted, tracked: &mut BTreeMap<ClientId, Tracked>| {
                let app = GatheredApp {
                    id: ClientId(1),
                    pid: 100,
                    measured: vec![(0, 0.0), (10, 10.0 * 2e6), (5, 5.0 * 6e6)],
                    report,
                    weight: Some(1.0),
                    trusted,
                };
                let g = Gathered {
                    at: 100_000_000,
                    apps: vec![app],
                };
                step(c, tracked, &sources(), &supply(), 8.0, g, &cpu);
            };
        tick(&mut c, declared.clone(), false, &mut tracked);
        assert_eq!(tracked[&ClientId(1)].native, Some(1));
        assert!(!tracked[&ClientId(1)].trusted);
        // Root's (or the admin group's) declaration is marked trusted for
        // the core.
        let untrusted = c.demand(ClientId(1)).map(|d| d.native_trusted);
        tick(&mut c, declared, true, &mut tracked);
        assert!(tracked[&ClientId(1)].trusted);
        let demand = c.demand(ClientId(1)).expect("recorded");
        assert_eq!((untrusted, demand.native_trusted), (Some(false), true));
        assert_eq!(demand.declared_native, Some(1));
        // A later report without one withdraws it.
        tick(&mut c, report(8, 8.0 * 5e6), true, &mut tracked);
        assert_eq!(tracked[&ClientId(1)].native, None);
    }

    #[test]
    fn measured_and_reported_figures_give_every_app_targets() {
        let (c, tracked) = run_ticks(cpu_used_honestly(), 1.0);
        for id in [ClientId(1), ClientId(2)] {
            let t = c.target(id).expect("solved");
            assert_eq!(t.len(), 3);
            assert!((t.iter().sum::<f64>() - 1.0).abs() < 1e-6, "{t:?}");
            assert!(c.rate(id).unwrap() > 0.0);
        }
        assert_eq!(c.floor().map(|f| f.1), Some(true));
        assert!(
            tracked
                .values()
                .all(|t| t.meter.caught_over_reporting() == 0)
        );
        let cpu = tracked[&ClientId(1)].meter.demand().exec_ns[0].unwrap();
        assert!((cpu - 5e6).abs() < 1.0, "{cpu}");
    }

    /// Cumulative CPU time of each process, `app1` and `app2` ns more
    /// at every read (one read per tick): a clock of its own per test.
    fn cpu_clock(app1: f64, app2: f64) -> impl Fn(u32) -> Option<f64> {
        let reads = std::cell::Cell::new([0u64; 2]);
        move |pid| {
            let mut n = reads.get();
            let i = usize::from(pid != 100);
            n[i] += 1;
            reads.set(n);
            Some(n[i] as f64 * if pid == 100 { app1 } else { app2 })
        }
    }

    /// What the apps of `run_ticks` do on the CPU: 20 ms (app 1) and 80 ms
    /// (app 2) per tick, all of it in their CPU tasks.
    fn cpu_used_honestly() -> impl Fn(u32) -> Option<f64> {
        cpu_clock(20e6, 80e6)
    }

    #[test]
    fn the_apps_host_side_is_taken_out_of_the_cpu_supply() {
        let (honest, tracked) = run_ticks(cpu_used_honestly(), 1.0);
        assert!(tracked.values().all(|t| t.host.slots() == 0.0));
        assert_eq!(honest.supply()[0].slots, 2.0);
        // Each process uses twice that: 0.2 + 0.8 of a core beyond the CPU tasks, smoothed over four
        // report intervals (1 − 0.7⁴ of it): about 0.76 core.
        let (busy, tracked) = run_ticks(cpu_clock(40e6, 160e6), 1.0);
        let host: f64 = tracked.values().map(|t| t.host.slots()).sum();
        assert!((host - 0.76).abs() < 0.01, "{host}");
        let cpu = busy.supply()[0].slots;
        assert!((cpu - (2.0 - host)).abs() < 1e-9, "{cpu}");
        // The devices keep their slots.
        assert_eq!(busy.supply()[1].slots, 1.0);
        assert!(
            tracked
                .values()
                .all(|t| t.meter.caught_over_reporting() == 0)
        );
    }

    #[test]
    fn an_app_claiming_more_cpu_time_than_it_used_is_held_to_what_it_used() {
        // App 1 claims 4x the CPU time its process consumed.
        let (_, tracked) = run_ticks(cpu_used_honestly(), 4.0);
        let liar = &tracked[&ClientId(1)].meter;
        assert!(
            liar.caught_over_reporting() >= 3,
            "{}",
            liar.caught_over_reporting()
        );
        // Every interval was capped to the CPU time the process used.
        let cpu = liar.demand().exec_ns[0].unwrap();
        assert!((cpu - 5e6).abs() < 1.0, "{cpu}");
        assert_eq!(tracked[&ClientId(2)].meter.caught_over_reporting(), 0);
    }

    fn standing(class: ShareClass, priority: i32) -> ClientSettings {
        ClientSettings { class, priority }
    }

    #[test]
    fn one_class_and_shares_everywhere_at_the_default_priority_take_part() {
        let default = ClientSettings::default().priority;
        let custom = standing(ShareClass::Custom { shares: 70 }, default);
        let background = standing(ShareClass::Background, default);
        let normal = standing(ShareClass::Normal { shares: 30 }, default);
        for s in [custom, background, normal] {
            assert!(same_class_everywhere(&[s; 3]), "{s:?}");
        }
        // A priority, settings that differ by unit, no shares, no units.
        let urgent = standing(ShareClass::Normal { shares: 10 }, default + 1);
        assert!(!same_class_everywhere(&[urgent; 2]));
        assert!(!same_class_everywhere(&[custom, normal]));
        let none = standing(ShareClass::Custom { shares: 0 }, default);
        assert!(!same_class_everywhere(&[none]));
        assert!(!same_class_everywhere(&[]));
    }

    #[test]
    fn only_share_policy_units_split_by_entitlement() {
        assert!(splits_by_entitlement(PolicyKind::Share));
        for p in [
            PolicyKind::Fifo,
            PolicyKind::ShortFirst,
            PolicyKind::TimeShare,
            PolicyKind::Priority,
            PolicyKind::BackendAccC,
        ] {
            assert!(!splits_by_entitlement(p), "{p:?}");
        }
    }

    #[test]
    fn an_app_with_a_priority_is_left_out_and_its_use_reserved() {
        let (plain, _) = run_ticks(cpu_used_honestly(), 1.0);
        // An app with a priority (no weight) keeps unit 1 busy 90 % of the
        // time.
        let custom = |tick: u64| GatheredApp {
            id: ClientId(3),
            pid: 300,
            measured: vec![(0, 0.0), (tick * 9, tick as f64 * 90e6), (0, 0.0)],
            report: report(0, 0.0),
            weight: None,
            trusted: false,
        };
        let (c, tracked) = run_ticks_with(cpu_used_honestly(), 1.0, Some(&custom));
        assert!(c.target(ClientId(3)).is_none());
        assert!(tracked[&ClientId(3)].usage.slots()[1] > 0.5);
        let on_unit_1 = |c: &Coordinator| {
            [ClientId(1), ClientId(2)]
                .iter()
                .map(|id| c.target(*id).unwrap()[1] * c.rate(*id).unwrap())
                .sum::<f64>()
        };
        // The coordinated apps send fewer calls per second to the unit
        // the prioritised app holds.
        assert!(
            on_unit_1(&c) < on_unit_1(&plain),
            "{} vs {}",
            on_unit_1(&c),
            on_unit_1(&plain)
        );
    }

    /// Two apps alike in every figure: the one with three times the
    /// NORMAL shares is given the larger rate.
    #[test]
    fn an_app_with_more_shares_gets_more_of_what_is_above_the_floor() {
        let mut c = Coordinator::new(CoordinatorConfig::default(), supply());
        let mut tracked = BTreeMap::new();
        for tick in 1..=5u64 {
            let t = tick as f64;
            let app = |id: u32, weight: f64| GatheredApp {
                id: ClientId(id),
                pid: 100 * id,
                measured: vec![
                    (0, 0.0),
                    (tick * 10, t * 10.0 * 1e6),
                    (tick * 5, t * 5.0 * 3e6),
                ],
                report: report(tick * 4, t * 4.0 * 20e6),
                weight: Some(weight),
                trusted: false,
            };
            let g = Gathered {
                at: tick * 100_000_000,
                apps: vec![app(1, 1.0), app(2, 3.0)],
            };
            step(&mut c, &mut tracked, &sources(), &supply(), 8.0, g, |_| {
                None
            });
        }
        c.update(0);
        let (light, heavy) = (c.rate(ClientId(1)).unwrap(), c.rate(ClientId(2)).unwrap());
        assert!(
            heavy > 1.2 * light,
            "weight 3: {heavy} calls/s, weight 1: {light}"
        );
        assert_eq!(c.floor().map(|f| f.1), Some(true));
    }

    #[test]
    fn an_app_that_never_reports_is_not_coordinated() {
        let silent = |tick: u64| GatheredApp {
            id: ClientId(3),
            pid: 300,
            measured: vec![(0, 0.0), (tick, tick as f64 * 1e6), (0, 0.0)],
            report: None,
            weight: Some(1.0),
            trusted: false,
        };
        let (c, tracked) = run_ticks_with(cpu_used_honestly(), 1.0, Some(&silent));
        assert!(c.target(ClientId(3)).is_none());
        assert!(!tracked[&ClientId(3)].follows);
        assert!(c.target(ClientId(1)).is_some());
    }

    #[test]
    fn an_app_that_leaves_loses_its_targets() {
        let (mut c, _) = run_ticks(|_| None, 1.0);
        let mut tracked = BTreeMap::new();
        // Rebuild tracking with only app 2 present.
        let g = Gathered {
            at: 1_000_000_000,
            apps: vec![GatheredApp {
                id: ClientId(2),
                pid: 200,
                measured: vec![(0, 0.0), (10, 10e6), (5, 15e6)],
                report: report(40, 40.0 * 20e6),
                weight: Some(1.0),
                trusted: false,
            }],
        };
        // App 1 is tracked, then gone.
        tracked.insert(ClientId(1), Tracked::new(&sources()));
        step(&mut c, &mut tracked, &sources(), &supply(), 8.0, g, |_| {
            None
        });
        c.update(1);
        assert!(c.target(ClientId(1)).is_none());
        assert!(c.target(ClientId(2)).is_some());
        assert!(!tracked.contains_key(&ClientId(1)));
    }
}
