//! Proportional-fair coordination of decentralised placement (`hetsched-pf`).
//!
//! Selfish placement (every app sends each task where *it* finishes
//! soonest) settles at an equilibrium that can be far below what the machine
//! could give everyone, and can leave an app below its native throughput.
//! This module closes that gap without a central dispatcher:
//!
//! * the monitor keeps a [`Coordinator`]: each app's *measured* task
//!   durations per unit (the monitor times tasks at completion, so a client
//!   that lies about its task times changes nothing), its copy/dispatch
//!   overhead and its tasks in flight. When the set of apps changes, or
//!   (at most once per `resolve_period_ns`) when a model moved by more than
//!   `model_change`, it solves the proportional-fair allocation subject to
//!   a floor (nobody below `floor_goal` × native, or the largest common floor
//!   when that is infeasible, [`crate::fairness::solve_no_loser_with_goal`])
//!   and publishes per-app *target fractions*: the share of the app's tasks
//!   each unit should run;
//! * each client follows its targets with a [`DeficitFollower`] (smooth
//!   weighted round robin: every unit accrues its target as credit on each
//!   task, the unit with most credit takes the task). The achieved mix
//!   tracks the target within one task at any time, with no randomness, and
//!   follows a new target at once. Apps the monitor has no target for yet
//!   (still profiling) use plain placement.
//!
//! Stale views only delay when a client sees new targets; targets change
//! only when apps come or go or models move, so a 10 ms delay costs a few
//! tasks in the old mix. Pure: no I/O, clocks or threads; `now` is passed in.

use crate::fairness::{
    FairError, FairProblem, LinearLimit, NoLoserSolution, solve_no_loser_weighted,
};
use crate::ids::{ClientId, Ns};
use crate::policy::{ClientSettings, DEFAULT_NORMAL_SHARES, ShareClass};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod replayed;
pub use replayed::{
    INCUMBENT_MARGIN, Plan, REPLAY_FLOOR_CAP, REPLAY_FLOOR_TIE, SHORT_FIRST_MARGIN,
    solve_targets_replayed,
};

/// What one unit offers.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitSupply {
    /// Parallel slots.
    pub slots: f64,
    /// Processor sharing (a CPU group) rather than a queue (a device).
    pub time_shared: bool,
    /// A queue that runs short tasks first within a bound
    /// ([`crate::policy::short_first`]) rather than in arrival order.
    #[serde(default)]
    pub short_first: bool,
}

impl UnitSupply {
    /// A device: a queue on `slots` servers, in arrival order.
    pub fn queue(slots: f64) -> Self {
        UnitSupply {
            slots,
            time_shared: false,
            short_first: false,
        }
    }

    /// A CPU group of `slots` cores under processor sharing.
    pub fn processor_shared(slots: f64) -> Self {
        UnitSupply {
            slots,
            time_shared: true,
            short_first: false,
        }
    }

    /// The same queue, able to run short-first.
    pub fn with_short_first(self) -> Self {
        UnitSupply {
            short_first: !self.time_shared,
            ..self
        }
    }
}

/// What of `supply` is left to the coordinated apps: each unit less
/// `reserved` (slots used there by apps the coordinator does not place),
/// and the processor-shared units less `host_slots` (cores the apps' host
/// sides keep busy, which share those units' cores), split by their slots.
/// Never below zero.
pub fn supply_left(supply: &[UnitSupply], reserved: &[f64], host_slots: f64) -> Vec<UnitSupply> {
    let cpu_slots: f64 = supply
        .iter()
        .filter(|s| s.time_shared)
        .map(|s| s.slots)
        .sum();
    supply
        .iter()
        .enumerate()
        .map(|(u, s)| {
            let mut taken = reserved.get(u).copied().unwrap_or(0.0);
            if s.time_shared && cpu_slots > 0.0 {
                taken += host_slots * s.slots / cpu_slots;
            }
            UnitSupply {
                slots: (s.slots - taken).max(0.0),
                ..*s
            }
        })
        .collect()
}

/// What the monitor knows about one app.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppDemand {
    /// Measured execution time of the app's typical task per unit, ns;
    /// `None` where it has no implementation or nothing was measured yet.
    pub exec_ns: Vec<Option<f64>>,
    /// Dispatch and copy time per task per unit, ns (holds the app's task,
    /// not the unit).
    pub overhead_ns: Vec<f64>,
    /// Tasks the app keeps in flight.
    pub in_flight: f64,
    /// The app's weight `w_i` in `Σ w_i ln r_i` (e.g. its share; 1 for
    /// all: plain proportional fairness). Above the common floor, a unit's
    /// time is split in proportion to the weights.
    #[serde(default = "unit_weight")]
    pub weight: f64,
    /// The unit the app runs on when nobody coordinates it, as it
    /// declares it (its default device); see [`AppDemand::native_unit`].
    #[serde(default)]
    pub declared_native: Option<usize>,
    /// The declaration comes from a client the operator trusts (root or the
    /// admin group, who may set anyone's shares anyway): it stands on any
    /// unit the app was measured on, not only near its fastest.
    #[serde(default)]
    pub native_trusted: bool,
    /// Tasks the app would keep in flight natively, if it differs from
    /// `in_flight`: a closed-loop app with k places has fewer than k
    /// outstanding on average (its host side holds one between calls), and
    /// fewer still where coordination shortens its calls, while natively
    /// its calls wait longer and it is nearer k. The native estimates use
    /// the larger of the two.
    #[serde(default)]
    pub native_in_flight: Option<f64>,
}

/// A declared native unit is believed when the app's measured execution
/// there is within this fraction of its fastest measured unit (unless the
/// declaration is trusted).
pub const NATIVE_CLAIM_SLACK: f64 = 0.10;

fn unit_weight() -> f64 {
    1.0
}

impl AppDemand {
    fn usable(&self, u: usize) -> Option<f64> {
        self.exec_ns
            .get(u)
            .copied()
            .flatten()
            .filter(|e| e.is_finite() && *e > 0.0)
    }

    /// Tasks in flight the native estimates assume (see
    /// [`AppDemand::native_in_flight`]).
    pub fn native_places(&self) -> f64 {
        self.native_in_flight
            .filter(|n| n.is_finite())
            .map_or(self.in_flight, |n| n.max(self.in_flight))
    }

    /// The app as it would run natively: [`AppDemand::native_places`] in flight.
    pub fn as_native(&self) -> AppDemand {
        AppDemand {
            in_flight: self.native_places(),
            ..self.clone()
        }
    }

    /// The unit with the shortest measured execution (the app's native unit).
    pub fn fastest_unit(&self) -> Option<usize> {
        (0..self.exec_ns.len())
            .filter_map(|u| self.usable(u).map(|e| (u, e)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(u, _)| u)
    }

    /// The unit the app's native throughput is estimated on: the one it
    /// declares, if measured there within [`NATIVE_CLAIM_SLACK`] of its
    /// fastest unit or trusted ([`AppDemand::native_trusted`]), else the
    /// fastest measured. Measurements of two units within a few percent of
    /// each other flip with noise, and which one the app natively shares
    /// decides the other apps' native estimates there; a declaration
    /// settles it. An app whose default device is not its fastest one (the
    /// demo's LBM natively runs on a GPU 1.8× slower than its CPU code)
    /// needs the declaration to stand beyond the slack, or its native, and
    /// the others' on the units it shares, are estimated for a placement
    /// it never runs. What a false declaration can do: lower its own
    /// native estimate (its loss), and the others' on the unit it names
    /// (their floor), which is why only a trusted client's stands beyond
    /// the slack.
    pub fn native_unit(&self) -> Option<usize> {
        let fastest = self.fastest_unit()?;
        let best = self.usable(fastest)?;
        match self
            .declared_native
            .and_then(|u| self.usable(u).map(|e| (u, e)))
        {
            Some((u, e)) if self.native_trusted || e <= best * (1.0 + NATIVE_CLAIM_SLACK) => {
                Some(u)
            }
            _ => Some(fastest),
        }
    }
}

/// An application's weight in the coordination, from its settings on
/// every unit: NORMAL shares, the same everywhere, at the default
/// priority, weigh `shares / DEFAULT_NORMAL_SHARES` (the default client
/// weighs 1). Any other standing is the agents' to enforce: `None`.
pub fn coordination_weight(settings: &[ClientSettings]) -> Option<f64> {
    let first = settings.first()?;
    let default = ClientSettings::default();
    match first.class {
        ShareClass::Normal { shares }
            if shares > 0
                && first.priority == default.priority
                && settings.iter().all(|s| s == first) =>
        {
            Some(f64::from(shares) / f64::from(DEFAULT_NORMAL_SHARES))
        }
        _ => None,
    }
}

/// Fluid estimate of each app's *native* throughput (tasks/s): every app on
/// its fastest unit. On a queue (FIFO turns) an app's share of a saturated
/// unit is proportional to `in_flight × exec`; under processor sharing to
/// `in_flight`. No app gets more than it could use alone
/// (`in_flight / occupancy` slots); what it leaves is water-filled to the rest.
pub fn native_estimate(apps: &[AppDemand], units: &[UnitSupply]) -> Vec<f64> {
    let apps: Vec<AppDemand> = apps.iter().map(AppDemand::as_native).collect();
    let apps = &apps[..];
    let mut thr = vec![0.0; apps.len()];
    for (u, unit) in units.iter().enumerate() {
        let on: Vec<usize> = (0..apps.len())
            .filter(|&i| apps[i].native_unit() == Some(u))
            .collect();
        let mut left = unit.slots;
        let mut open = on.clone();
        let mut x = vec![0.0; apps.len()];
        while !open.is_empty() && left > 0.0 {
            let weight = |i: usize| {
                let e = apps[i].usable(u).unwrap_or(1.0);
                if unit.time_shared {
                    apps[i].in_flight
                } else {
                    apps[i].in_flight * e
                }
            };
            let total: f64 = open.iter().map(|&i| weight(i)).sum();
            let mut capped = Vec::new();
            for &i in &open {
                let e = apps[i].usable(u).unwrap_or(1.0);
                let occ = (e + apps[i].overhead_ns[u].max(0.0)) / e;
                let alone = (apps[i].in_flight / occ).min(unit.slots);
                if left * weight(i) / total >= alone {
                    capped.push((i, alone));
                }
            }
            if capped.is_empty() {
                for &i in &open {
                    x[i] = left * weight(i) / total;
                }
                break;
            }
            for (i, alone) in capped {
                x[i] = alone;
                left -= alone;
                open.retain(|&j| j != i);
            }
        }
        for &i in &on {
            let e = apps[i].usable(u).unwrap_or(1.0);
            thr[i] = x[i] * 1e9 / e;
        }
    }
    thr
}

/// [`native_estimate`] by replay ([`crate::replay::replay_native`]): the
/// apps' task loops played out on their fastest units, which sees FIFO
/// turns and idle gaps while the app at a queue's head copies. The fluid
/// estimate stands in for an app the replay could not measure.
pub fn native_estimate_replayed(apps: &[AppDemand], units: &[UnitSupply]) -> Vec<f64> {
    let fluid = native_estimate(apps, units);
    crate::replay::replay_native(apps, units, crate::replay::ReplayBudget::default())
        .into_iter()
        .zip(fluid)
        .map(|(r, f)| r.unwrap_or(f))
        .collect()
}

/// The fluid problem of a set of apps, with `native` as baseline.
pub fn problem(apps: &[AppDemand], units: &[UnitSupply], native: &[f64]) -> FairProblem {
    let mut rate = Vec::with_capacity(apps.len());
    let mut occupancy = Vec::with_capacity(apps.len());
    for app in apps {
        let mut r = vec![0.0; units.len()];
        let mut o = vec![1.0; units.len()];
        for u in 0..units.len() {
            if let Some(e) = app.usable(u) {
                r[u] = 1e9 / e;
                o[u] = (e + app.overhead_ns.get(u).copied().unwrap_or(0.0).max(0.0)) / e;
            }
        }
        rate.push(r);
        occupancy.push(o);
    }
    FairProblem {
        rate,
        occupancy,
        capacity: units.iter().map(|u| u.slots).collect(),
        in_flight: apps.iter().map(|a| a.in_flight).collect(),
        native: native.iter().map(|n| n.max(1e-9)).collect(),
    }
}

/// Targets for a set of apps: per app, the fraction of its tasks each unit
/// should run (rows sum to 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Targets {
    pub fraction: Vec<Vec<f64>>,
    /// Per app, the tasks per second the allocation gives it: what its
    /// [`Pacer`] lets it issue. The optimum often leaves an app's places in
    /// flight partly idle (its fair share of a contended unit is less than
    /// it would take); a closed-loop app would take it anyway, so the client
    /// paces itself to this rate.
    pub rate: Vec<f64>,
    /// The floor the allocation was held to (× native estimate).
    pub floor: f64,
    /// Whether `floor_goal` was feasible (else `floor` is the largest
    /// common floor, and status should say so).
    pub floor_feasible: bool,
    /// Predicted `r_i` (fluid model, against the native estimate).
    pub predicted_relative: Vec<f64>,
    /// [`native_estimate`] of each app (tasks/s).
    pub native: Vec<f64>,
    /// Per unit, whether its queue should run short-first
    /// ([`crate::policy::short_first`]); only the replay-judged pick
    /// chooses, the others leave each unit as it is
    /// ([`UnitSupply::short_first`]).
    pub short_first: Vec<bool>,
}

/// Fractions below this are dropped (and the rest renormalised): a unit the
/// optimum barely uses is not worth a task now and then.
pub const MIN_FRACTION: f64 = 0.005;

/// The factor by which the others' use of unit `u` stretches app `i`'s
/// time there. The fluid model lets an app slot its tasks into any idle
/// moment; on a real unit a task that arrives while others' tasks hold it
/// waits (a queue) or runs slower (processor sharing), and that time holds
/// one of the app's places in flight. To first order the app runs only in
/// the part of the unit the others leave, `1 / (1 − blocked)` (at most 20).
/// Under processor sharing every other app's share counts. On a queue, an
/// app with short tasks is blocked for as long as a long task of another
/// app runs, but an app with long tasks waits only for the short residue of
/// the others', so app `j` counts `x_ju · min(1, exec_ju / exec_iu)`.
fn stretch(p: &FairProblem, units: &[UnitSupply], x: &[Vec<f64>], i: usize, u: usize) -> f64 {
    let blocked: f64 = (0..p.apps())
        .filter(|&j| j != i && p.rate[j][u] > 0.0)
        .map(|j| {
            let weight = if units[u].time_shared {
                1.0
            } else {
                (p.rate[i][u] / p.rate[j][u]).min(1.0)
            };
            x[j][u] * weight
        })
        .sum::<f64>()
        / p.capacity[u].max(1e-9);
    1.0 / (1.0 - blocked).max(0.05)
}

/// Head-of-line blocking on queues, as linear limits. A queue runs one task
/// per slot to completion, so an app whose task arrives while another app's
/// longer task runs waits for it: an app can only use the part of the unit
/// the others' longer tasks leave. For every queued unit `u` and app `i`
/// that can run there:
/// `occ_iu · x_iu / in_flight_i + Σ_{j≠i} w_ij · x_ju / slots_u ≤ 1`, with
/// `w_ij = min(1, exec_ju / (occ_iu · exec_iu))`: another app's task blocks
/// `i` in proportion to how long it is against `i`'s own cycle (an app
/// with long tasks barely waits for short ones). The fluid bound has no such
/// rows, so it stays an upper bound; the targets respect them.
pub fn blocking_limits(p: &FairProblem, units: &[UnitSupply]) -> Vec<LinearLimit> {
    let mut limits = Vec::new();
    for (u, unit) in units.iter().enumerate() {
        if unit.time_shared {
            continue;
        }
        for i in 0..p.apps() {
            if p.rate[i][u] <= 0.0 {
                continue;
            }
            let cycle = p.occupancy[i][u] / p.rate[i][u];
            let mut terms = vec![(i, u, p.occupancy[i][u] / p.in_flight[i])];
            for j in (0..p.apps()).filter(|&j| j != i && p.rate[j][u] > 0.0) {
                let w = (1.0 / p.rate[j][u] / cycle).min(1.0);
                terms.push((j, u, w / p.capacity[u].max(1e-9)));
            }
            limits.push(LinearLimit { terms });
        }
    }
    limits
}

/// Limits every schedule obeys on a single-slot, non-preemptive queue, so
/// adding them to the fluid program still gives an upper bound (unlike
/// [`blocking_limits`], a model). For queue `u` (one slot) and app `i`
/// that can run there, with `c_iu` the copy and dispatch time of its task
/// (`(occ_iu − 1) · e_iu`):
/// `occ_iu · x_iu / in_flight_i + Σ_{j≠i} (1 − c_iu / e_ju)⁺ · x_ju ≤ 1`.
///
/// Why: while another app's task runs on `u`, each of `i`'s places in
/// flight is copying a task of its own for `u`, running one elsewhere, or
/// idle; it cannot run on `u`. So over a second, `i`'s places spend
/// `occ_iu · x_iu` on `u`'s tasks and at least `in_flight_i · Σ_j x_ju`
/// minus the overlap with their copies elsewhere or idle. A place's copies
/// overlap one task of `j` by at most one copy-out (the task it just ran,
/// as `j`'s starts) and one copy-in (of the task that runs when `j`'s ends),
/// so by at most `min(c_iu, e_ju)`, that is `n_j · min(c_iu, e_ju)` over
/// the `n_j = x_ju / e_ju` tasks of `j`. Hence
/// `occ_iu · x_iu + in_flight_i · Σ_j x_ju (1 − min(c_iu, e_ju) / e_ju) ≤ in_flight_i`.
/// Multi-slot queues and processor-shared units get no rows (another app's
/// task does not hold them whole).
pub fn nonpreemptive_limits(p: &FairProblem, units: &[UnitSupply]) -> Vec<LinearLimit> {
    let mut limits = Vec::new();
    for (u, unit) in units.iter().enumerate() {
        if unit.time_shared || unit.slots > 1.0 || p.capacity[u] <= 0.0 {
            continue;
        }
        for i in (0..p.apps()).filter(|&i| p.rate[i][u] > 0.0) {
            let copy_ns = (p.occupancy[i][u] - 1.0).max(0.0) * 1e9 / p.rate[i][u];
            let mut terms = vec![(i, u, p.occupancy[i][u] / p.in_flight[i])];
            for j in (0..p.apps()).filter(|&j| j != i && p.rate[j][u] > 0.0) {
                let exec_j = 1e9 / p.rate[j][u];
                let w = (1.0 - copy_ns / exec_j).max(0.0);
                if w > 0.0 {
                    terms.push((j, u, w));
                }
            }
            if terms.len() > 1 {
                limits.push(LinearLimit { terms });
            }
        }
    }
    limits
}

/// Per app, the fraction of its tasks each unit runs under allocation `x`
/// (entries below [`MIN_FRACTION`] dropped, rows renormalised).
fn fractions(p: &FairProblem, x: &[Vec<f64>]) -> Vec<Vec<f64>> {
    (0..p.apps())
        .map(|i| {
            let tasks: Vec<f64> = (0..p.units()).map(|u| p.rate[i][u] * x[i][u]).collect();
            let total: f64 = tasks.iter().sum();
            let mut f: Vec<f64> = tasks
                .iter()
                .map(|t| if total > 0.0 { t / total } else { 0.0 })
                .map(|f| if f < MIN_FRACTION { 0.0 } else { f })
                .collect();
            let kept: f64 = f.iter().sum();
            if kept > 0.0 {
                f.iter_mut().for_each(|v| *v /= kept);
            }
            f
        })
        .collect()
}

/// Expected time, ns, a task of app `i` spends at unit `u` on top of its own
/// execution when the others use the unit as `x` says. The fluid model
/// lets an app slot its tasks into any idle moment; a real unit makes it
/// wait, and the wait holds the app's place in flight but not the unit, so
/// it is charged as overhead.
///
/// On a queue, a task that arrives while app `j`'s task runs (a fraction
/// `ρ_j = x_ju / slots` of the time) waits for the rest of it, `e_ju / 2` on
/// average. But a closed-loop app `j` runs one task at a time, so it blocks
/// a frequent visitor at most once per task of its own: over a second `i`
/// loses at most `ρ_j` of its time, i.e. `ρ_j / n_iu` per task where `n_iu`
/// is `i`'s task rate there. Per task: `Σ_j min(ρ_j e_ju / 2, ρ_j / n_iu)`,
/// over the slots.
///
/// Under processor sharing, each other app is present for about
/// `ρ_j / (1 − ρ)` of the time (`ρ` the others' load; at most always), and
/// every one present slows the task once the slots are taken.
pub fn expected_wait_ns(
    p: &FairProblem,
    units: &[UnitSupply],
    x: &[Vec<f64>],
    i: usize,
    u: usize,
) -> f64 {
    if p.rate[i][u] <= 0.0 {
        return 0.0;
    }
    let cap = p.capacity[u].max(1e-9);
    let exec = 1e9 / p.rate[i][u];
    let others: Vec<usize> = (0..p.apps())
        .filter(|&j| j != i && p.rate[j][u] > 0.0 && x[j][u] > 0.0)
        .collect();
    if units[u].time_shared {
        let load: f64 = others.iter().map(|&j| x[j][u]).sum::<f64>() / cap;
        let free = (1.0 - load).max(0.1);
        let present: f64 = others
            .iter()
            .map(|&j| (x[j][u] / cap / free).min(1.0))
            .sum();
        exec * ((1.0 + present) / cap - 1.0).max(0.0)
    } else {
        // Tasks per ns `i` sends here: as allocated, or (not using the unit
        // yet) as fast as its places in flight allow.
        let visits = if x[i][u] > 0.0 {
            x[i][u] * p.rate[i][u] / 1e9
        } else {
            p.in_flight[i] / (exec * p.occupancy[i][u])
        };
        others
            .iter()
            .map(|&j| {
                let rho = x[j][u] / cap;
                (rho * 0.5e9 / p.rate[j][u]).min(rho / visits.max(1e-18))
            })
            .sum::<f64>()
            / cap
    }
}

/// Each app's in-flight row with the waits on the queues it uses written
/// as a function of the *others'* allocation there, so the program sees
/// that moving a long-task app off a queue frees a short-task app that
/// depends on it. App `i`, visiting queue `u` `n_iu` times per ns under
/// `x_ref`, loses `min(1, n_iu · e_ju / 2) · x_ju / slots_u` of a place in
/// flight to app `j` (the closed-loop cap of [`expected_wait_ns`]: at most
/// `j`'s busy share, a frequent visitor being blocked by nearly every task
/// of `j`). `p`'s occupancies are the app's own (with any processor-sharing
/// slowdown); queues `i` does not use under `x_ref` add nothing.
pub fn coupled_wait_limits(
    p: &FairProblem,
    units: &[UnitSupply],
    x_ref: &[Vec<f64>],
) -> Vec<LinearLimit> {
    (0..p.apps())
        .map(|i| {
            let k = p.in_flight[i].max(1e-9);
            let mut terms: Vec<(usize, usize, f64)> = (0..p.units())
                .filter(|&v| p.rate[i][v] > 0.0)
                .map(|v| (i, v, p.occupancy[i][v] / k))
                .collect();
            for (u, unit) in units.iter().enumerate() {
                if unit.time_shared || p.rate[i][u] <= 0.0 || x_ref[i][u] <= 0.0 {
                    continue;
                }
                let visits = x_ref[i][u] * p.rate[i][u] / 1e9;
                let cap = p.capacity[u].max(1e-9);
                for j in (0..p.apps()).filter(|&j| j != i && p.rate[j][u] > 0.0) {
                    let c = (visits * 0.5e9 / p.rate[j][u]).min(1.0) / cap;
                    terms.push((j, u, c / k));
                }
            }
            LinearLimit { terms }
        })
        .collect()
}

/// What an allocation is predicted to really give each app (tasks/s): its
/// fluid throughput, scaled down where the waits [`expected_wait_ns`]
/// predicts would need more places in flight than the app has.
fn predicted_throughput(p: &FairProblem, units: &[UnitSupply], x: &[Vec<f64>]) -> Vec<f64> {
    (0..p.apps())
        .map(|i| {
            let mut thr = 0.0;
            let mut held = 0.0;
            for u in 0..p.units() {
                if p.rate[i][u] <= 0.0 || x[i][u] <= 0.0 {
                    continue;
                }
                let w = expected_wait_ns(p, units, x, i, u);
                thr += p.rate[i][u] * x[i][u];
                held += x[i][u] * (p.occupancy[i][u] + w * p.rate[i][u] / 1e9);
            }
            if held > p.in_flight[i] {
                thr * p.in_flight[i] / held
            } else {
                thr
            }
        })
        .collect()
}

/// [`solve_targets`] for real units: the allocation is re-solved `rounds`
/// times with each pair's overhead raised by the wait the previous
/// allocation implies ([`expected_wait_ns`], averaged with the previous
/// estimate so it settles), and of all the allocations seen the one whose
/// *predicted* outcome ([`predicted_throughput`]) is best is kept: a round
/// replaces the best so far only when its lowest predicted `r_i` (counted
/// up to `floor_goal`) is no lower and its predicted `Σ ln r_i` is larger.
/// Round 0 is the plain fluid optimum, so the pick is never predicted worse
/// than it.
/// Apps with short tasks thus move off queues that long tasks hold, and
/// long-task apps off the queues short-task apps depend on, when another
/// allocation nearly as good in the fluid model avoids the mix.
///
/// With `exclusion`, an exclusion step follows ([`exclusion_step`]): the
/// rounds hold each wait fixed, so they cannot see that moving a long-task
/// app off a queue frees the short-task app that depends on it; the step
/// re-solves on the kept allocation's units with the waits written as a
/// function of the others' allocation ([`coupled_wait_limits`]), once as is
/// and once per (app, shared queue) pair taken away, and keeps a candidate
/// the predictor prefers. A pure function of its inputs, so it cannot make
/// placement oscillate.
pub fn solve_targets_waiting(
    apps: &[AppDemand],
    units: &[UnitSupply],
    floor_goal: f64,
    rounds: usize,
    exclusion: bool,
) -> Result<Targets, FairError> {
    let native = native_estimate(apps, units);
    let base = problem(apps, units, &native);
    let mut p = base.clone();
    let weights = weights_of(apps);
    let mut s = solve_no_loser_weighted(&p, floor_goal, &[], &weights)?;
    let score = |x: &[Vec<f64>]| predicted_score(&base, units, x, floor_goal, &weights);
    // A later round is taken only if it predicts no lower floor *and* a
    // larger Σ ln r: letting a predicted higher floor win on its own
    // (measured) moved rinnegan-contention to allocations that really did
    // worse (3.06× and min 0.95 instead of 3.51× and 1.10), the predictor
    // being too rough to trade the floor against the sum.
    let mut best_score = score(&s.solution.allocation);
    let mut best = (s.clone(), p.clone());
    let mut wait = vec![vec![0.0; units.len()]; apps.len()];
    for _ in 0..rounds {
        for (i, row) in wait.iter_mut().enumerate() {
            for (u, w) in row.iter_mut().enumerate() {
                if base.rate[i][u] > 0.0 {
                    let now = expected_wait_ns(&base, units, &s.solution.allocation, i, u);
                    *w = 0.5 * (*w + now);
                    p.occupancy[i][u] = base.occupancy[i][u] + *w * base.rate[i][u] / 1e9;
                }
            }
        }
        match solve_no_loser_weighted(&p, floor_goal, &[], &weights) {
            Ok(next) => s = next,
            Err(_) => break,
        }
        let sc = score(&s.solution.allocation);
        if better(sc, best_score) {
            best_score = sc;
            best = (s.clone(), p.clone());
        }
    }
    let (mut s, mut p) = best;
    if exclusion
        && let Some((next, q)) = exclusion_step(
            &base,
            &p,
            units,
            &s.solution.allocation,
            floor_goal,
            best_score,
            &weights,
        )
    {
        s = next;
        p = q;
    }
    Ok(Targets {
        fraction: fractions(&p, &s.solution.allocation),
        rate: s.solution.throughput.clone(),
        native,
        floor: s.floor,
        floor_feasible: s.floor_feasible,
        predicted_relative: s.solution.relative,
        short_first: units.iter().map(|u| u.short_first).collect(),
    })
}

/// Each app's weight in `Σ w_i ln r_i` ([`AppDemand::weight`]; anything
/// not finite and positive counts as 1).
fn weights_of(apps: &[AppDemand]) -> Vec<f64> {
    apps.iter()
        .map(|a| {
            if a.weight.is_finite() && a.weight > 0.0 {
                a.weight
            } else {
                1.0
            }
        })
        .collect()
}

/// `(lowest predicted r_i counted up to floor_goal, predicted Σ w_i ln r_i)`
/// of allocation `x` ([`predicted_throughput`] against `p.native`; weights
/// missing from `weights` count as 1).
fn predicted_score(
    p: &FairProblem,
    units: &[UnitSupply],
    x: &[Vec<f64>],
    floor_goal: f64,
    weights: &[f64],
) -> (f64, f64) {
    let thr = predicted_throughput(p, units, x);
    let rel: Vec<f64> = thr.iter().zip(&p.native).map(|(t, n)| t / n).collect();
    let min = rel.iter().copied().fold(f64::INFINITY, f64::min);
    let log: f64 = rel
        .iter()
        .enumerate()
        .map(|(i, r)| weights.get(i).copied().unwrap_or(1.0) * r.max(1e-12).ln())
        .sum();
    (min.min(floor_goal), log)
}

/// Whether predicted score `a` beats `b`: no lower floor and a larger sum.
fn better(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 >= b.0 - 1e-3 && a.1 > b.1
}

/// The exclusion step may trade the predicted sum for the floor only when
/// the kept allocation's predicted floor is below this…
const EXCLUSION_FLOOR_BELOW: f64 = 0.95;
/// …the candidate raises it by more than this…
const EXCLUSION_FLOOR_GAIN: f64 = 0.1;
/// …and loses at most this much predicted `ln r` per app (per unit of
/// weight).
const EXCLUSION_LOG_LOSS_PER_APP: f64 = 0.1;

/// The exclusion step of [`solve_targets_waiting`]. Candidates, all solved
/// on the units the kept allocation `x` uses (other pairs taken away, so
/// the coupled rows, which only charge queues an app uses, cannot be
/// dodged by moving to a queue it did not use) with the queue waits as
/// [`coupled_wait_limits`] of the others' allocation: the kept units as
/// they are, and each (app, queue) pair of a queue two or more apps share
/// taken away. `p` is the kept allocation's problem (its processor-sharing
/// waits are kept; its queue waits give way to the coupled rows).
///
/// A candidate replaces the kept allocation when the predictor scores it
/// [`better`], or, where the kept allocation's predicted floor is below
/// [`EXCLUSION_FLOOR_BELOW`], when it raises the predicted floor by more
/// than [`EXCLUSION_FLOOR_GAIN`] and loses at most
/// [`EXCLUSION_LOG_LOSS_PER_APP`] per app of predicted `Σ ln r` (a clear
/// floor gain at a bounded cost; smaller gains measured worse: the
/// predictor is rough). The best such candidate is returned.
fn exclusion_step(
    base: &FairProblem,
    p: &FairProblem,
    units: &[UnitSupply],
    x: &[Vec<f64>],
    floor_goal: f64,
    kept: (f64, f64),
    weights: &[f64],
) -> Option<(NoLoserSolution, FairProblem)> {
    let mut pick: Option<((f64, f64), NoLoserSolution, FairProblem)> = None;
    for (next, q) in exclusion_candidates(base, p, units, x, floor_goal, weights) {
        let sc = predicted_score(base, units, &next.solution.allocation, floor_goal, weights);
        let current = pick.as_ref().map_or(kept, |c| c.0);
        let floor_gain = kept.0 < EXCLUSION_FLOOR_BELOW
            && sc.0 > current.0 + EXCLUSION_FLOOR_GAIN
            && sc.1 > kept.1 - EXCLUSION_LOG_LOSS_PER_APP * weights.iter().sum::<f64>();
        if better(sc, current) || floor_gain {
            pick = Some((sc, next, q));
        }
    }
    pick.map(|(_, s, q)| (s, q))
}

/// The candidates of the exclusion step (see [`exclusion_step`]), each
/// with the problem it was solved on; those the solver fails on are left
/// out.
fn exclusion_candidates(
    base: &FairProblem,
    p: &FairProblem,
    units: &[UnitSupply],
    x: &[Vec<f64>],
    floor_goal: f64,
    weights: &[f64],
) -> Vec<(NoLoserSolution, FairProblem)> {
    let (n, m) = (p.apps(), p.units());
    let used = |i: usize, u: usize| p.rate[i][u] > 0.0 && x[i][u] > 1e-6;
    let mut on_units = p.clone();
    for i in 0..n {
        for (u, unit) in units.iter().enumerate() {
            if !used(i, u) {
                on_units.rate[i][u] = 0.0;
            }
            if !unit.time_shared {
                on_units.occupancy[i][u] = base.occupancy[i][u];
            }
        }
    }
    let mut moves: Vec<Option<(usize, usize)>> = vec![None];
    for u in (0..m).filter(|&u| !units[u].time_shared) {
        let users: Vec<usize> = (0..n).filter(|&i| used(i, u)).collect();
        if users.len() >= 2 {
            moves.extend(users.into_iter().map(|i| Some((i, u))));
        }
    }
    let mut out = Vec::new();
    for mv in moves {
        let mut q = on_units.clone();
        let mut x_ref = x.to_vec();
        if let Some((i, u)) = mv {
            q.rate[i][u] = 0.0;
            x_ref[i][u] = 0.0;
            if q.rate[i].iter().all(|r| *r <= 0.0) {
                continue;
            }
        }
        let limits = coupled_wait_limits(&q, units, &x_ref);
        if let Ok(next) = solve_no_loser_weighted(&q, floor_goal, &limits, weights) {
            out.push((next, q));
        }
    }
    out
}

/// Solves the floor-constrained proportional-fair allocation for `apps`
/// and turns it into task fractions.
///
/// `rounds` > 0 makes the solve interference-aware: the allocation is
/// re-solved with each pair's occupancy stretched by what the previous
/// allocation implies ([`stretch`], averaged with the previous round's
/// estimate). Apps with short tasks then avoid queues that long
/// tasks hold, which the plain fluid model cannot see. A fixed point of
/// a pure computation: it changes only when the inputs do, so it cannot
/// make placement oscillate.
pub fn solve_targets(
    apps: &[AppDemand],
    units: &[UnitSupply],
    floor_goal: f64,
    rounds: usize,
    blocking: bool,
) -> Result<Targets, FairError> {
    let native = native_estimate(apps, units);
    let base = problem(apps, units, &native);
    let limits = if blocking {
        blocking_limits(&base, units)
    } else {
        Vec::new()
    };
    let mut p = base.clone();
    let weights = weights_of(apps);
    let mut s = solve_no_loser_weighted(&p, floor_goal, &limits, &weights)?;
    let mut factor = vec![vec![1.0; units.len()]; apps.len()];
    for _ in 0..rounds {
        for (i, row) in factor.iter_mut().enumerate() {
            for (u, f) in row.iter_mut().enumerate() {
                if base.rate[i][u] > 0.0 {
                    let w = stretch(&base, units, &s.solution.allocation, i, u);
                    *f = 0.5 * (*f + w);
                    p.occupancy[i][u] = base.occupancy[i][u] * *f;
                }
            }
        }
        match solve_no_loser_weighted(&p, floor_goal, &limits, &weights) {
            Ok(next) => s = next,
            Err(_) => break,
        }
    }
    let fraction = fractions(&p, &s.solution.allocation);
    Ok(Targets {
        fraction,
        rate: s.solution.throughput.clone(),
        native,
        floor: s.floor,
        floor_feasible: s.floor_feasible,
        predicted_relative: s.solution.relative,
        short_first: units.iter().map(|u| u.short_first).collect(),
    })
}

/// How the monitor re-solves.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoordinatorConfig {
    /// Floor asked for, × native estimate (a little above 1 leaves a margin
    /// for what the fluid model does not see: queueing, noise).
    pub floor_goal: f64,
    /// Least time between re-solves caused by model drift, ns. A change in
    /// the set of apps re-solves at the next call whatever this says.
    pub resolve_period_ns: Ns,
    /// Relative change of a measured exec time that counts as drift.
    pub model_change: f64,
    /// Interference-aware rounds of [`solve_targets`] (0: plain fluid model).
    pub interference_rounds: usize,
    /// Add [`blocking_limits`] for queues.
    pub blocking: bool,
    /// Wait-aware rounds of [`solve_targets_waiting`] (0: off). Takes
    /// precedence over `interference_rounds` and `blocking`.
    pub wait_rounds: usize,
    /// The exclusion step of [`solve_targets_waiting`] after the rounds
    /// (only with `wait_rounds` > 0).
    #[serde(default = "default_exclusion")]
    pub exclusion: bool,
    /// Judge the candidates by replaying them
    /// ([`solve_targets_replayed`]) rather than by the fluid predictor
    /// (only with `wait_rounds` > 0).
    #[serde(default = "default_replay")]
    pub replay: bool,
}

fn default_replay() -> bool {
    true
}

fn default_exclusion() -> bool {
    true
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            floor_goal: 1.05,
            resolve_period_ns: 200_000_000,
            model_change: 0.02,
            interference_rounds: 0,
            blocking: false,
            wait_rounds: 3,
            exclusion: true,
            replay: true,
        }
    }
}

/// One client's share of the last solve.
#[derive(Clone, Debug, PartialEq)]
struct ClientTargets {
    fraction: Vec<f64>,
    rate: f64,
    /// Its native estimate (tasks/s) and predicted throughput relative to it.
    estimate: Option<(f64, f64)>,
}

/// The monitor's side: apps' demands in, per-client targets out.
#[derive(Clone, Debug)]
pub struct Coordinator {
    config: CoordinatorConfig,
    units: Vec<UnitSupply>,
    /// The supply the targets were last solved with.
    solved_units: Option<Vec<UnitSupply>>,
    /// Demand each app last reported, and the one the targets were solved with.
    apps: BTreeMap<ClientId, (AppDemand, Option<AppDemand>)>,
    /// What the last solve gave each client.
    targets: BTreeMap<ClientId, ClientTargets>,
    membership_changed: bool,
    last_solve: Option<Ns>,
    solves: u64,
    floor: Option<(f64, bool)>,
    /// Per unit, the queue order of the last solve (short-first or not).
    short_first: Vec<bool>,
}

impl Coordinator {
    pub fn new(config: CoordinatorConfig, units: Vec<UnitSupply>) -> Self {
        // Arrival order until a solve chooses: passing while apps profile
        // changes the models they measure (docs/sim.md, "Short-first
        // queues").
        let short_first = vec![false; units.len()];
        Coordinator {
            config,
            units,
            solved_units: None,
            apps: BTreeMap::new(),
            targets: BTreeMap::new(),
            membership_changed: false,
            last_solve: None,
            solves: 0,
            floor: None,
            short_first,
        }
    }

    /// Records what the monitor measured for `client` (new or updated).
    pub fn set_app(&mut self, client: ClientId, demand: AppDemand) {
        match self.apps.get_mut(&client) {
            Some(entry) => entry.0 = demand,
            None => {
                self.apps.insert(client, (demand, None));
                self.membership_changed = true;
            }
        }
    }

    /// What each unit offers the coordinated apps now
    /// ([`Coordinator::set_supply`]).
    pub fn supply(&self) -> &[UnitSupply] {
        &self.units
    }

    /// What the monitor last recorded for `client`.
    pub fn demand(&self, client: ClientId) -> Option<&AppDemand> {
        self.apps.get(&client).map(|entry| &entry.0)
    }

    /// Sets what each unit offers the coordinated apps (its slots less what
    /// apps outside coordination use). A change beyond `model_change`
    /// counts as drift. Ignored unless it has one entry per unit.
    pub fn set_supply(&mut self, units: Vec<UnitSupply>) {
        if units.len() == self.units.len() {
            self.units = units;
        }
    }

    /// `client` left (or stopped issuing).
    pub fn remove_app(&mut self, client: ClientId) {
        if self.apps.remove(&client).is_some() {
            self.targets.remove(&client);
            self.membership_changed = true;
        }
    }

    fn drifted(&self) -> bool {
        let tol = self.config.model_change;
        let supply_moved = self.solved_units.as_ref().is_some_and(|old| {
            old.iter()
                .zip(&self.units)
                .any(|(a, b)| (a.slots - b.slots).abs() > tol * a.slots.max(b.slots).max(1e-9))
        });
        supply_moved
            || self.apps.values().any(|(now, solved)| match solved {
                None => true,
                Some(old) => now
                    .exec_ns
                    .iter()
                    .zip(&old.exec_ns)
                    .any(|(a, b)| match (a, b) {
                        (Some(a), Some(b)) => (a - b).abs() > tol * b.abs(),
                        (None, None) => false,
                        _ => true,
                    }),
            })
    }

    /// Re-solves if the set of apps changed, or models drifted and the
    /// period has passed. Returns whether targets were recomputed. On a
    /// solver failure the previous targets stay (and apps without one use
    /// plain placement).
    pub fn update(&mut self, now: Ns) -> bool {
        let due = self
            .last_solve
            .is_none_or(|t| now.saturating_sub(t) >= self.config.resolve_period_ns);
        if !(self.membership_changed || (due && self.drifted())) {
            return false;
        }
        self.membership_changed = false;
        self.last_solve = Some(now);
        // Only apps with at least one measured unit take part.
        let ids: Vec<ClientId> = self
            .apps
            .iter()
            .filter(|(_, (d, _))| d.fastest_unit().is_some())
            .map(|(c, _)| *c)
            .collect();
        if ids.is_empty() {
            self.targets.clear();
            return true;
        }
        let demands: Vec<AppDemand> = ids.iter().map(|c| self.apps[c].0.clone()).collect();
        let solved = if self.config.wait_rounds > 0 && self.config.replay {
            // The targets in force, if they cover exactly these apps.
            let incumbent = (ids.len() == self.targets.len()
                && ids.iter().all(|c| self.targets.contains_key(c)))
            .then(|| Plan {
                fraction: ids
                    .iter()
                    .map(|c| self.targets[c].fraction.clone())
                    .collect(),
                rate: ids.iter().map(|c| self.targets[c].rate).collect(),
                short_first: self.short_first.clone(),
            });
            solve_targets_replayed(
                &demands,
                &self.units,
                self.config.floor_goal,
                self.config.wait_rounds,
                self.config.exclusion,
                incumbent.as_ref(),
            )
        } else if self.config.wait_rounds > 0 {
            solve_targets_waiting(
                &demands,
                &self.units,
                self.config.floor_goal,
                self.config.wait_rounds,
                self.config.exclusion,
            )
        } else {
            solve_targets(
                &demands,
                &self.units,
                self.config.floor_goal,
                self.config.interference_rounds,
                self.config.blocking,
            )
        };
        let Ok(t) = solved else {
            return false;
        };
        self.solves += 1;
        self.solved_units = Some(self.units.clone());
        self.floor = Some((t.floor, t.floor_feasible));
        self.short_first = t.short_first;
        self.targets.clear();
        for (i, ((c, fraction), rate)) in ids.iter().zip(t.fraction).zip(t.rate).enumerate() {
            let estimate = t
                .native
                .get(i)
                .copied()
                .zip(t.predicted_relative.get(i).copied());
            self.targets.insert(
                *c,
                ClientTargets {
                    fraction,
                    rate,
                    estimate,
                },
            );
            if let Some(entry) = self.apps.get_mut(c) {
                entry.1 = Some(entry.0.clone());
            }
        }
        true
    }

    /// The fraction of `client`'s tasks each unit should run, if solved.
    pub fn target(&self, client: ClientId) -> Option<&[f64]> {
        self.targets.get(&client).map(|t| t.fraction.as_slice())
    }

    /// The tasks per second `client` should issue at most, if solved.
    pub fn rate(&self, client: ClientId) -> Option<f64> {
        self.targets.get(&client).map(|t| t.rate)
    }

    /// `client`'s native throughput as the last solve estimated it
    /// (tasks/s), and its predicted throughput relative to that: what the
    /// floor is measured against, for status.
    pub fn estimate(&self, client: ClientId) -> Option<(f64, f64)> {
        self.targets.get(&client).and_then(|t| t.estimate)
    }

    /// `(floor, feasible)` of the last solve: what `status` reports.
    pub fn floor(&self) -> Option<(f64, bool)> {
        self.floor
    }

    /// Whether unit `u`'s queue should run short-first (as the last solve
    /// chose; arrival order before any). The unit's agent applies it
    /// ([`crate::policy::UnitPolicy::set_short_first`]).
    pub fn short_first(&self, u: usize) -> bool {
        self.short_first.get(u).copied().unwrap_or(false)
    }

    /// How many times the allocation was solved.
    pub fn solves(&self) -> u64 {
        self.solves
    }
}

/// The client's side: follows target fractions exactly in the long run
/// (smooth weighted round robin).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeficitFollower {
    credit: Vec<f64>,
}

/// Credits are clamped to this, so a target change is followed at once
/// instead of paying off an old debt.
const CREDIT_LIMIT: f64 = 2.0;

impl DeficitFollower {
    pub fn new() -> Self {
        Self::default()
    }

    /// The unit for the next task: every unit with a target accrues its
    /// fraction, the one with most credit (lowest index on ties) runs the
    /// task and pays 1. `allowed(u)` can veto units (no implementation).
    /// `None` when no allowed unit has a positive target.
    pub fn pick(&mut self, target: &[f64], allowed: impl Fn(usize) -> bool) -> Option<usize> {
        if self.credit.len() != target.len() {
            self.credit = vec![0.0; target.len()];
        }
        let usable: Vec<usize> = (0..target.len())
            .filter(|&u| target[u] > 0.0 && target[u].is_finite() && allowed(u))
            .collect();
        let total: f64 = usable.iter().map(|&u| target[u]).sum();
        if usable.is_empty() || total <= 0.0 {
            return None;
        }
        for (u, c) in self.credit.iter_mut().enumerate() {
            if usable.contains(&u) {
                *c = (*c + target[u] / total).min(CREDIT_LIMIT);
            } else {
                *c = 0.0;
            }
        }
        let best = usable
            .iter()
            .copied()
            .max_by(|&a, &b| self.credit[a].total_cmp(&self.credit[b]).then(b.cmp(&a)))?;
        self.credit[best] = (self.credit[best] - 1.0).max(-CREDIT_LIMIT);
        Some(best)
    }
}

/// The client's pacing: a token bucket filled at the target rate (times
/// `1 + headroom`), holding at most `burst` tokens; each task takes one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pacer {
    tokens: f64,
    last: Option<Ns>,
}

impl Pacer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes a token for a task issued at `now` (`Ok`), or says when the
    /// next token will be there (`Err(at)`, `at > now`). A rate that is
    /// not positive and finite does not pace.
    pub fn take(&mut self, now: Ns, rate: f64, burst: f64) -> Result<(), Ns> {
        if !(rate.is_finite() && rate > 0.0) {
            return Ok(());
        }
        let burst = burst.max(1.0);
        let elapsed = self
            .last
            .map_or(burst / rate * 1e9, |t| now.saturating_sub(t) as f64);
        self.tokens = (self.tokens + elapsed * rate / 1e9).min(burst);
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            let wait = ((1.0 - self.tokens) / rate * 1e9).ceil().max(1.0);
            Err(now + wait as Ns)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supply_left_takes_reserved_slots_and_splits_the_host_side_over_the_cpu_units() {
        let supply = [
            UnitSupply::processor_shared(3.0),
            UnitSupply::queue(1.0),
            UnitSupply::processor_shared(1.0),
        ];
        let left = supply_left(&supply, &[0.5, 0.25, 0.0], 2.0);
        let slots: Vec<f64> = left.iter().map(|s| s.slots).collect();
        // 2 host cores split 3:1 over the two CPU groups; the queue only
        // loses what is reserved on it.
        assert_eq!(slots, vec![3.0 - 0.5 - 1.5, 0.75, 0.5]);
        assert!(left[0].time_shared && !left[1].time_shared);
        // Never negative; no CPU units: the host side takes nothing.
        let left = supply_left(&supply, &[9.0, 0.0, 0.0], 0.0);
        assert_eq!(left[0].slots, 0.0);
        let left = supply_left(&[UnitSupply::queue(1.0)], &[], 4.0);
        assert_eq!(left[0].slots, 1.0);
    }

    #[test]
    fn normal_shares_the_same_on_every_unit_are_the_weight() {
        let normal = |shares| crate::policy::ClientSettings {
            class: crate::policy::ShareClass::Normal { shares },
            priority: 0,
        };
        assert_eq!(
            coordination_weight(&[crate::policy::ClientSettings::default(); 3]),
            Some(1.0)
        );
        assert_eq!(coordination_weight(&[normal(30), normal(30)]), Some(3.0));
        // Shares that differ by unit, CUSTOM, BACKGROUND and priorities
        // are the agents' to enforce.
        assert_eq!(coordination_weight(&[normal(30), normal(10)]), None);
        let custom = crate::policy::ClientSettings {
            class: crate::policy::ShareClass::Custom { shares: 50 },
            priority: 0,
        };
        assert_eq!(coordination_weight(&[custom]), None);
        let background = crate::policy::ClientSettings {
            class: crate::policy::ShareClass::Background,
            priority: 0,
        };
        assert_eq!(coordination_weight(&[background]), None);
        let urgent = crate::policy::ClientSettings {
            priority: 5,
            ..crate::policy::ClientSettings::default()
        };
        assert_eq!(coordination_weight(&[urgent]), None);
        assert_eq!(coordination_weight(&[]), None);
    }

    #[test]
    fn a_unit_taken_by_apps_outside_coordination_moves_the_targets() {
        let units = vec![UnitSupply::queue(1.0), UnitSupply::queue(1.0)];
        let app = |a: f64, b: f64| AppDemand {
            exec_ns: vec![Some(a), Some(b)],
            overhead_ns: vec![0.0; 2],
            in_flight: 2.0,
            weight: 1.0,
            declared_native: None,
            native_trusted: false,
            native_in_flight: None,
        };
        let mut c = Coordinator::new(CoordinatorConfig::default(), units.clone());
        c.set_app(ClientId(1), app(1e6, 2e6));
        c.set_app(ClientId(2), app(1e6, 2e6));
        assert!(c.update(0));
        let before = c.target(ClientId(1)).unwrap().to_vec();
        // The same supply again is no drift.
        c.set_supply(units.clone());
        assert!(!c.update(1_000_000_000));
        // Someone outside coordination now holds 90 % of unit 0.
        let mut less = units;
        less[0].slots = 0.1;
        c.set_supply(less);
        assert!(c.update(2_000_000_000));
        let after = c.target(ClientId(1)).unwrap().to_vec();
        assert!(after[0] < before[0], "{before:?} -> {after:?}");
        // A supply of the wrong length is ignored.
        c.set_supply(Vec::new());
        assert!(!c.update(3_000_000_000));
    }

    #[test]
    fn a_declared_native_unit_counts_when_nearly_fastest_or_trusted() {
        let app = |declared| AppDemand {
            exec_ns: vec![Some(1.0e6), Some(1.05e6), Some(2.0e6), None],
            overhead_ns: vec![0.0; 4],
            in_flight: 1.0,
            weight: 1.0,
            declared_native: declared,
            native_trusted: false,
            native_in_flight: None,
        };
        assert_eq!(app(None).native_unit(), Some(0));
        // Within NATIVE_CLAIM_SLACK of the fastest: believed.
        assert_eq!(app(Some(1)).native_unit(), Some(1));
        // Twice as slow, or not implemented, or out of range: the fastest.
        assert_eq!(app(Some(2)).native_unit(), Some(0));
        assert_eq!(app(Some(3)).native_unit(), Some(0));
        assert_eq!(app(Some(9)).native_unit(), Some(0));
        // Trusted: any unit measured for the app, but still not one it
        // cannot run on.
        let trusted = |declared| AppDemand {
            native_trusted: true,
            native_in_flight: None,
            ..app(declared)
        };
        assert_eq!(trusted(Some(2)).native_unit(), Some(2));
        assert_eq!(trusted(Some(3)).native_unit(), Some(0));
        assert_eq!(trusted(Some(9)).native_unit(), Some(0));
        // It decides where the others' native estimates count the app.
        let queue = UnitSupply::queue(1.0);
        let other = AppDemand {
            exec_ns: vec![Some(1.0e6), Some(5.0e6), None, None],
            ..app(None)
        };
        let units = [queue; 4];
        let shared = native_estimate(&[app(None), other.clone()], &units);
        let apart = native_estimate(&[app(Some(1)), other], &units);
        assert!(apart[1] > 1.5 * shared[1], "{shared:?} {apart:?}");
    }

    #[test]
    fn native_estimates_count_the_places_an_app_keeps_natively() {
        let app = |in_flight, native_in_flight| AppDemand {
            exec_ns: vec![Some(1.0e6)],
            overhead_ns: vec![0.0],
            in_flight,
            weight: 1.0,
            declared_native: None,
            native_trusted: false,
            native_in_flight,
        };
        let units = [UnitSupply::queue(1.0)];
        // Two closed loops of 2 places sharing a saturated queue take equal
        // turns natively, whatever one's host side left of its mean
        // outstanding under coordination.
        let fluid = native_estimate(&[app(2.0, None), app(1.5, Some(2.0))], &units);
        assert!((fluid[0] - fluid[1]).abs() < 1e-9, "{fluid:?}");
        let unequal = native_estimate(&[app(2.0, None), app(1.5, None)], &units);
        assert!(unequal[1] < 0.8 * unequal[0], "{unequal:?}");
        let replayed = native_estimate_replayed(&[app(2.0, None), app(1.5, Some(2.0))], &units);
        assert!(
            (replayed[0] - replayed[1]).abs() < 0.05 * replayed[0],
            "{replayed:?}"
        );
        // Never fewer than it keeps now.
        assert_eq!(app(3.0, Some(2.0)).native_places(), 3.0);
        assert_eq!(app(1.5, Some(f64::NAN)).native_places(), 1.5);
    }

    #[test]
    fn follower_matches_fractions() {
        let mut f = DeficitFollower::new();
        let target = [0.25, 0.0, 0.75];
        let mut count = [0; 3];
        for _ in 0..400 {
            count[f.pick(&target, |_| true).unwrap()] += 1;
        }
        assert_eq!(count, [100, 0, 300]);
        assert_eq!(f.pick(&[0.0, 0.0, 0.0], |_| true), None);
        assert_eq!(f.pick(&[1.0, 0.0, 0.0], |u| u != 0), None);
    }

    #[test]
    fn pacer_holds_the_rate() {
        let mut p = Pacer::new();
        let (mut now, mut issued) = (0, 0);
        // 1000 tasks/s for one simulated second, burst 2.
        while now < 1_000_000_000 {
            match p.take(now, 1000.0, 2.0) {
                Ok(()) => issued += 1,
                Err(at) => now = at,
            }
        }
        assert!((1000..=1003).contains(&issued), "{issued}");
        assert_eq!(Pacer::new().take(0, f64::INFINITY, 1.0), Ok(()));
    }

    #[test]
    fn blocking_rows_keep_a_long_task_app_off_a_short_task_apps_queue() {
        // App 0: 0.1 ms tasks, only on the queue (unit 1). App 1: 10 ms
        // tasks, a bit faster on the queue than on the CPU group (unit 0).
        let units = [UnitSupply::processor_shared(1.0), UnitSupply::queue(1.0)];
        let apps = [
            AppDemand {
                exec_ns: vec![None, Some(1e5)],
                overhead_ns: vec![0.0, 1e5],
                in_flight: 1.0,
                weight: 1.0,
                declared_native: None,
                native_trusted: false,
                native_in_flight: None,
            },
            AppDemand {
                exec_ns: vec![Some(1.2e7), Some(1e7)],
                overhead_ns: vec![0.0, 0.0],
                in_flight: 1.0,
                weight: 1.0,
                declared_native: None,
                native_trusted: false,
                native_in_flight: None,
            },
        ];
        let plain = solve_targets(&apps, &units, 0.5, 0, false).unwrap();
        let blocking = solve_targets(&apps, &units, 0.5, 0, true).unwrap();
        let stretched = solve_targets(&apps, &units, 0.5, 3, false).unwrap();
        // The fluid model lets app 1 use the queue's idle half; with the
        // blocking rows it stays on the CPU group.
        assert!(plain.fraction[1][1] > 0.1, "{plain:?}");
        assert!(
            blocking.fraction[1][1] < plain.fraction[1][1],
            "{blocking:?}"
        );
        for t in [&plain, &blocking, &stretched] {
            for row in &t.fraction {
                assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{t:?}");
            }
            assert!(t.rate.iter().all(|r| *r > 0.0), "{t:?}");
        }
    }

    #[test]
    fn waiting_moves_a_short_task_app_off_a_queue_held_by_long_tasks() {
        // Random mix 76 in miniature: app 0 keeps queue 1 busy with 2.5 ms
        // tasks (it has nothing else as fast); app 1's 20 µs tasks are
        // fastest there too, but queue 2 is free and almost as good
        // counting copies. The fluid optimum slots app 1 into queue 1's
        // gaps, where each of its tasks would wait behind app 0's.
        let queue = UnitSupply::queue(1.0);
        let units = [queue, queue, queue];
        let apps = [
            AppDemand {
                exec_ns: vec![Some(1.7e7), Some(2.5e6), Some(3e7)],
                overhead_ns: vec![1e5; 3],
                in_flight: 1.0,
                weight: 1.0,
                declared_native: None,
                native_trusted: false,
                native_in_flight: None,
            },
            AppDemand {
                exec_ns: vec![Some(1.2e5), Some(2e4), Some(3e4)],
                overhead_ns: vec![1e5; 3],
                in_flight: 1.0,
                weight: 1.0,
                declared_native: None,
                native_trusted: false,
                native_in_flight: None,
            },
        ];
        let plain = solve_targets(&apps, &units, 1.0, 0, false).unwrap();
        let waiting = solve_targets_waiting(&apps, &units, 1.0, 3, false).unwrap();
        assert!(plain.fraction[1][1] > 0.1, "{plain:?}");
        assert!(
            waiting.fraction[1][1] < plain.fraction[1][1] / 2.0,
            "{waiting:?}"
        );
        // App 0 keeps its floor either way.
        assert!(waiting.predicted_relative[0] >= 0.999, "{waiting:?}");
        // The wait a queue adds: app 1 visiting queue 1 while app 0 holds it
        // 90 % of the time waits at most app 0's residual task...
        let p = problem(&apps, &units, &native_estimate(&apps, &units));
        let x = vec![vec![0.0, 0.9, 0.0], vec![0.0, 0.05, 0.0]];
        let w = expected_wait_ns(&p, &units, &x, 1, 1);
        assert!(w > 0.0 && w <= 0.9 * 2.5e6 / 2.0 + 1.0, "{w}");
        // ...and app 0 barely waits for app 1's short tasks.
        assert!(expected_wait_ns(&p, &units, &x, 0, 1) <= 0.05 * 2e4 / 2.0 + 1.0);
    }

    #[test]
    fn exclusion_moves_a_long_task_app_off_a_short_task_apps_queue() {
        // Random mix 7: app 3's 80 µs tasks need the queue (unit 1) to reach
        // native; app 2's 28–59 ms tasks run nearly as well on the CPU
        // group (unit 0). The fluid optimum, and the wait-aware rounds,
        // which hold each wait fixed, keep app 2 on the queue, where app 3
        // waits behind it; the exclusion step sees app 3's wait fall as app
        // 2 leaves.
        let units = [UnitSupply::processor_shared(1.0), UnitSupply::queue(1.0)];
        let app = |cpu: f64, queue: Option<f64>, overhead: f64| AppDemand {
            exec_ns: vec![Some(cpu), queue],
            overhead_ns: vec![5e3, overhead],
            in_flight: 1.0,
            weight: 1.0,
            declared_native: None,
            native_trusted: false,
            native_in_flight: None,
        };
        let apps = [
            app(3e4, None, 0.0),
            app(6.1e5, Some(2.24e6), 1.5e5),
            app(2.84e7, Some(5.94e7), 1.5e5),
            app(6.5e5, Some(8e4), 1.15e5),
        ];
        let rounds = solve_targets_waiting(&apps, &units, 1.05, 3, false).unwrap();
        let excluded = solve_targets_waiting(&apps, &units, 1.05, 3, true).unwrap();
        assert!(rounds.fraction[2][1] > 0.3, "{rounds:?}");
        assert!(excluded.fraction[2][1] < 0.01, "{excluded:?}");
        let p = problem(&apps, &units, &native_estimate(&apps, &units));
        let floor = |t: &Targets| {
            let x: Vec<Vec<f64>> = (0..apps.len())
                .map(|i| {
                    (0..units.len())
                        .map(|u| {
                            if p.rate[i][u] > 0.0 {
                                t.fraction[i][u] * t.rate[i] / p.rate[i][u]
                            } else {
                                0.0
                            }
                        })
                        .collect()
                })
                .collect();
            predicted_score(&p, &units, &x, 1.05, &[]).0
        };
        assert!(
            floor(&excluded) > floor(&rounds) + 0.1,
            "{} vs {}",
            floor(&excluded),
            floor(&rounds)
        );
    }

    #[test]
    fn nonpreemptive_rows_charge_long_tasks_less_the_copy_overlap() {
        let queue = UnitSupply::queue(1.0);
        let cpu = UnitSupply::processor_shared(1.0);
        // App 0: 0.1 ms tasks plus 0.4 ms of copies; app 1: 10 ms tasks.
        let apps = [
            AppDemand {
                exec_ns: vec![None, Some(1e5)],
                overhead_ns: vec![0.0, 4e5],
                in_flight: 1.0,
                weight: 1.0,
                declared_native: None,
                native_trusted: false,
                native_in_flight: None,
            },
            AppDemand {
                exec_ns: vec![Some(1.1e7), Some(1e7)],
                overhead_ns: vec![0.0, 0.0],
                in_flight: 1.0,
                weight: 1.0,
                declared_native: None,
                native_trusted: false,
                native_in_flight: None,
            },
        ];
        let units = [cpu, queue];
        let p = problem(&apps, &units, &[1.0, 1.0]);
        let rows = nonpreemptive_limits(&p, &units);
        // One row per app on the queue; none for the CPU group.
        assert_eq!(rows.len(), 2, "{rows:?}");
        let short = &rows[0].terms;
        assert_eq!(short[0], (0, 1, 5.0));
        assert_eq!(short[1].0, 1);
        assert!((short[1].2 - (1.0 - 4e5 / 1e7)).abs() < 1e-12, "{short:?}");
        // App 1 has no copies to overlap app 0's tasks with: weight 1.
        let long = &rows[1].terms;
        assert_eq!(long[0], (1, 1, 1.0));
        assert!((long[1].2 - 1.0).abs() < 1e-12, "{long:?}");
        // A multi-slot queue gets no rows.
        let wide = [cpu, UnitSupply::queue(2.0)];
        assert!(nonpreemptive_limits(&p, &wide).is_empty());
        // The rows only cut: the bound with them is no higher.
        let plain = crate::fairness::solve_no_loser_limited(&p, 1.0, &[]).unwrap();
        let cut = crate::fairness::solve_no_loser_limited(&p, 1.0, &rows).unwrap();
        assert!(
            cut.solution.system_speedup <= plain.solution.system_speedup * (1.0 + 1e-6),
            "{} vs {}",
            cut.solution.system_speedup,
            plain.solution.system_speedup
        );
    }

    #[test]
    fn weights_split_what_is_above_the_floor() {
        let units = [UnitSupply::queue(1.0)];
        let app = |weight: f64| AppDemand {
            exec_ns: vec![Some(1e6)],
            overhead_ns: vec![0.0],
            in_flight: 4.0,
            weight,
            declared_native: None,
            native_trusted: false,
            native_in_flight: None,
        };
        // No floor: the unit is split 1 : 3.
        let t = solve_targets_waiting(&[app(1.0), app(3.0)], &units, 0.0, 0, false).unwrap();
        assert!((t.rate[1] / t.rate[0] - 3.0).abs() < 1e-3, "{t:?}");
        // Equal weights: an even split, as before weights existed.
        let t = solve_targets_waiting(&[app(1.0), app(1.0)], &units, 0.0, 3, true).unwrap();
        assert!((t.rate[1] / t.rate[0] - 1.0).abs() < 1e-3, "{t:?}");
        // A weight that is not positive counts as 1.
        let t = solve_targets_waiting(&[app(0.0), app(f64::NAN)], &units, 0.0, 0, false).unwrap();
        assert!((t.rate[1] / t.rate[0] - 1.0).abs() < 1e-3, "{t:?}");
        // The floor binds whatever the weights: both natives are 500
        // tasks/s (two apps sharing the unit), so a floor of 1 leaves
        // nothing above it to split 1 : 3.
        let t = solve_targets_waiting(&[app(1.0), app(3.0)], &units, 1.0, 0, false).unwrap();
        assert!((t.rate[0] - 500.0).abs() < 1.0, "{t:?}");
        assert!((t.rate[1] - 500.0).abs() < 1.0, "{t:?}");
        let p = problem(&[app(1.0)], &units, &[1.0]);
        assert!(crate::fairness::solve_no_loser_weighted(&p, 0.0, &[], &[-1.0]).is_err());
        assert!(crate::fairness::solve_no_loser_weighted(&p, 0.0, &[], &[1.0, 2.0]).is_err());
    }

    #[test]
    fn native_estimate_splits_a_queue_by_work() {
        let units = [UnitSupply::queue(1.0)];
        let app = |e: f64| AppDemand {
            exec_ns: vec![Some(e)],
            overhead_ns: vec![0.0],
            in_flight: 1.0,
            weight: 1.0,
            declared_native: None,
            native_trusted: false,
            native_in_flight: None,
        };
        let thr = native_estimate(&[app(1e6), app(3e6)], &units);
        // Time shares 1/4 and 3/4: both complete 250 tasks/s.
        assert!((thr[0] - 250.0).abs() < 1e-6, "{thr:?}");
        assert!((thr[1] - 250.0).abs() < 1e-6, "{thr:?}");
    }

    #[test]
    fn the_replayed_pick_runs_a_queue_short_first_where_it_helps() {
        // A device that a 0.03 ms app and two 3 ms apps all need (the CPU
        // is 100-1000× slower). In arrival order the short app
        // waits for both long tasks every time; short-first, only for the
        // one running, and the long apps lose at most one 0.03 ms task per
        // 6 ms cycle, within the floor.
        let units = [
            UnitSupply::processor_shared(1.0),
            UnitSupply::queue(1.0).with_short_first(),
        ];
        let app = |cpu: f64, dev: f64| AppDemand {
            exec_ns: vec![Some(cpu), Some(dev)],
            overhead_ns: vec![0.0, 0.0],
            in_flight: 1.0,
            weight: 1.0,
            declared_native: Some(1),
            native_trusted: false,
            native_in_flight: None,
        };
        let apps = [app(3e7, 3e4), app(3e8, 3e6), app(3e8, 3e6)];
        let t = solve_targets_replayed(&apps, &units, 1.05, 3, true, None).unwrap();
        assert_eq!(t.short_first, vec![false, true]);
        let r = &t.predicted_relative;
        assert!(r[0] > 1.5, "{r:?}");
        assert!(
            r[1] >= REPLAY_FLOOR_CAP && r[2] >= REPLAY_FLOOR_CAP,
            "{r:?}"
        );
        // A device that cannot run short-first stays in arrival order.
        let fifo = [units[0], UnitSupply::queue(1.0)];
        let t = solve_targets_replayed(&apps, &fifo, 1.05, 3, true, None).unwrap();
        assert_eq!(t.short_first, vec![false, false]);
    }

    #[test]
    fn coordinator_resolves_on_membership_only() {
        let units = vec![UnitSupply::queue(1.0); 2];
        let mut c = Coordinator::new(CoordinatorConfig::default(), units);
        let d = AppDemand {
            exec_ns: vec![Some(1e6), Some(2e6)],
            overhead_ns: vec![0.0, 0.0],
            in_flight: 2.0,
            weight: 1.0,
            declared_native: None,
            native_trusted: false,
            native_in_flight: None,
        };
        c.set_app(ClientId(1), d.clone());
        assert!(c.update(0));
        assert!(!c.update(1));
        let t = c.target(ClientId(1)).unwrap();
        assert!(t.iter().all(|f| *f > 0.0), "{t:?}");
        c.set_app(ClientId(2), d);
        assert!(c.update(2));
        c.remove_app(ClientId(1));
        assert!(c.update(3));
        assert!(c.target(ClientId(1)).is_none());
        assert_eq!(c.floor().map(|f| f.1), Some(true));
    }
}
