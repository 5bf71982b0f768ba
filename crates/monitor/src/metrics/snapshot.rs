//! What `/metrics` shows, taken from the monitor under the state lock by
//! the timer thread, at most once a second, and rendered by the HTTP
//! listener's threads with no lock held ([`super::exposition`]).

use super::ledger::UnitServed;
use crate::monitor::Monitor;
use hetsched_core::ids::{ClientId, Ns};
use hetsched_core::policy::ShareClass;
use hetsched_protocol::{CoordinationStatus, Role};
use std::collections::BTreeMap;

/// One unit now.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitMetrics {
    pub name: String,
    pub kind: String,
    pub class: &'static str,
    /// Moving average of the capacity in use, 0..=1.
    pub utilization: f64,
    pub queued: u32,
    pub running: u32,
    /// Requests that finished here since the daemon started.
    pub tasks_total: u64,
    /// Slot time held since the daemon started, ns.
    pub busy_ns_total: u64,
    /// Slots taken back past the unit's hold limit since the daemon
    /// started.
    pub revoked_total: u64,
}

/// What the clients of one name were served on each unit (in unit
/// order), those gone and those connected.
#[derive(Clone, Debug, PartialEq)]
pub struct ServedByName {
    pub client: String,
    pub units: Vec<UnitServed>,
}

/// The connected clients of one name and class on one unit, summed.
#[derive(Clone, Debug, PartialEq)]
pub struct Standing {
    pub client: String,
    pub class: &'static str,
    pub unit: usize,
    /// Connected clients counted here.
    pub clients: u32,
    /// Their shares (CUSTOM: percent; NORMAL: relative; BACKGROUND: 0).
    pub shares: u64,
    /// Fraction of the unit they are guaranteed while it is contended.
    pub guaranteed: f64,
    /// Fraction of the unit they used recently.
    pub achieved: f64,
}

/// Device memory the intercepted clients of one name hold on one unit.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceMemory {
    pub client: String,
    pub unit: usize,
    pub bytes: u64,
}

/// The coordinator's latest solve.
#[derive(Clone, Debug, PartialEq)]
pub struct CoordinationMetrics {
    pub solves: u64,
    pub floor: Option<f64>,
    pub floor_feasible: Option<bool>,
    /// How long the last allocation took to solve, ns.
    pub last_solve_ns: Option<u64>,
    /// Of `solves`, those made warm in the last full pick's shape.
    pub warm_solves: u64,
    /// Per client name and unit, the fraction of its calls the targets
    /// send there (averaged over that name's coordinated clients).
    pub targets: Vec<Target>,
    /// Per CPU unit, the load from work outside coordination and what
    /// is left for the coordinated applications.
    pub cpu_supply: Vec<CpuSupply>,
}

/// A CPU unit's supply as the coordinator last solved with it.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuSupply {
    pub unit: usize,
    /// CPU load from work outside coordination the supply is held at
    /// (cores).
    pub outside_cores: f64,
    /// Cores the coordinated applications are offered.
    pub offered_slots: f64,
}

/// What the coordinator last decided, as the metrics read it.
#[derive(Clone, Copy, Debug)]
pub struct CoordinationInput<'a> {
    pub status: &'a CoordinationStatus,
    /// How long the last allocation took to solve, ns.
    pub last_solve_ns: Option<u64>,
    /// Solves made warm.
    pub warm_solves: u64,
    pub cpu_supply: &'a [CpuSupply],
}

#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub client: String,
    pub unit: usize,
    pub fraction: f64,
}

/// Everything one scrape shows.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricsSnapshot {
    pub version: &'static str,
    pub uptime_ns: u64,
    pub units: Vec<UnitMetrics>,
    pub applications: u32,
    pub observers: u32,
    pub served: Vec<ServedByName>,
    pub standings: Vec<Standing>,
    pub device_memory: Vec<DeviceMemory>,
    pub coordination: Option<CoordinationMetrics>,
}

pub fn class_label(class: ShareClass) -> &'static str {
    match class {
        ShareClass::Custom { .. } => "custom",
        ShareClass::Normal { .. } => "normal",
        ShareClass::Background => "background",
    }
}

fn shares_of(class: ShareClass) -> u64 {
    match class {
        ShareClass::Custom { shares } | ShareClass::Normal { shares } => u64::from(shares),
        ShareClass::Background => 0,
    }
}

impl MetricsSnapshot {
    /// The monitor's figures now (pure: the caller holds the lock and
    /// passes the clock and the coordinator's state).
    pub fn of(
        monitor: &Monitor,
        coordination: Option<CoordinationInput<'_>>,
        uptime_ns: Ns,
        now: Ns,
    ) -> MetricsSnapshot {
        let units = monitor
            .agents()
            .iter()
            .zip(monitor.unit_publications(now))
            .map(|(a, p)| UnitMetrics {
                name: a.setup.unit.name.clone(),
                kind: a.setup.kind_name.clone(),
                class: a.setup.unit.class.name(),
                utilization: p.view.busy_fraction,
                queued: p.view.queued,
                running: p.view.running,
                tasks_total: a.tasks_total(),
                busy_ns_total: p.busy_ns_total,
                revoked_total: a.revoked_total(),
            })
            .collect();
        let ledger = monitor.ledger();
        let mut served: BTreeMap<&str, Vec<UnitServed>> =
            ledger.names().map(|(n, u)| (n, u.to_vec())).collect();
        let mut standings: BTreeMap<(&str, &'static str, usize), Standing> = BTreeMap::new();
        let mut device_memory: BTreeMap<(&str, usize), u64> = BTreeMap::new();
        let (applications, observers);
        let apps: Vec<_> = monitor
            .clients()
            .filter(|c| c.role == Role::Application)
            .collect();
        observers = monitor.clients().count() - apps.len();
        applications = apps.len();
        // Each unit's views of all of them in one round: a view that
        // depends on the other clients scans them once, not per client.
        let ids: Vec<ClientId> = apps.iter().map(|c| c.id).collect();
        let views: Vec<_> = monitor
            .agents()
            .iter()
            .map(|a| a.policy().client_views(&ids, now))
            .collect();
        for (i, c) in apps.iter().enumerate() {
            let label = ledger.label(&c.name);
            for (&u, &bytes) in c.intercept.iter().flat_map(|i| &i.device_memory) {
                *device_memory.entry((label, u)).or_default() += bytes;
            }
            let totals = served
                .entry(label)
                .or_insert_with(|| vec![UnitServed::default(); monitor.agents().len()]);
            for (u, a) in monitor.agents().iter().enumerate() {
                totals[u].add(&a.use_of(c.id).served());
                let Some(settings) = c.settings.get(u) else {
                    continue;
                };
                let view = views[u].get(i).copied().unwrap_or_default();
                let class = class_label(settings.class);
                let s = standings
                    .entry((label, class, u))
                    .or_insert_with(|| Standing {
                        client: label.to_string(),
                        class,
                        unit: u,
                        clients: 0,
                        shares: 0,
                        guaranteed: 0.0,
                        achieved: 0.0,
                    });
                s.clients += 1;
                s.shares += shares_of(settings.class);
                s.guaranteed += view.guaranteed;
                s.achieved += view.current_utilisation;
            }
        }
        MetricsSnapshot {
            version: env!("CARGO_PKG_VERSION"),
            uptime_ns,
            units,
            applications: applications as u32,
            observers: observers as u32,
            served: served
                .into_iter()
                .map(|(client, units)| ServedByName {
                    client: client.to_string(),
                    units,
                })
                .collect(),
            standings: standings.into_values().collect(),
            device_memory: device_memory
                .into_iter()
                .map(|((client, unit), bytes)| DeviceMemory {
                    client: client.to_string(),
                    unit,
                    bytes,
                })
                .collect(),
            coordination: coordination.map(|c| CoordinationMetrics {
                solves: c.status.solves,
                floor: c.status.floor,
                floor_feasible: c.status.floor_feasible,
                last_solve_ns: c.last_solve_ns,
                warm_solves: c.warm_solves,
                targets: targets_by_name(monitor, c.status),
                cpu_supply: c.cpu_supply.to_vec(),
            }),
        }
    }
}

/// The coordinator's unit fractions, averaged per client name.
fn targets_by_name(monitor: &Monitor, c: &CoordinationStatus) -> Vec<Target> {
    let name_of = |id: ClientId| monitor.client(id).map(|e| monitor.ledger().label(&e.name));
    let mut sums: BTreeMap<(&str, usize), (f64, u32)> = BTreeMap::new();
    for app in &c.apps {
        let Some(name) = name_of(app.client) else {
            continue;
        };
        for (u, f) in app.fractions.iter().enumerate() {
            let e = sums.entry((name, u)).or_default();
            e.0 += f;
            e.1 += 1;
        }
    }
    sums.into_iter()
        .map(|((client, unit), (sum, n))| Target {
            client: client.to_string(),
            unit,
            fraction: sum / f64::from(n),
        })
        .collect()
}
