//! Constraints that keep a solved allocation true to the machine: blocking
//! and non-preemptive queueing, expected waits ([`expected_wait_ns`]).

use super::*;

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
pub(super) fn stretch(
    p: &FairProblem,
    units: &[UnitSupply],
    x: &[Vec<f64>],
    i: usize,
    u: usize,
) -> f64 {
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
pub(super) fn fractions(p: &FairProblem, x: &[Vec<f64>]) -> Vec<Vec<f64>> {
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
