//! A structured interior-point solver for the no-loser proportional-fair
//! problem without extra limits ([`solve_no_loser_barrier`]), the fast path
//! of [`super::solve_no_loser_weighted`].
//!
//! In the scaled variables `z_k = x_k / bound_k` of [`super::Pair`]s, with
//! `y_i = Σ_k c_k z_k = thr_i / scale_i` ([`super::throughput_scale`]) and
//! `φ_i = native_i / scale_i`, the problem is
//!
//! ```text
//! maximise   Σ_i w_i ln y_i
//! subject to z ≥ 0,
//!            Σ_{k on u} (bound_k / cap_u) z_k ≤ 1          (each unit u)
//!            Σ_{k of i} (occ_k bound_k / in_flight_i) z_k ≤ 1   (each app i)
//!            y_i ≥ f φ_i                                      (the floor)
//! ```
//!
//! and the largest common floor is the linear program `maximise t` over the
//! same rows with `y_i ≥ t φ_i`. Every iterate is strictly feasible, so the
//! allocation needs no repair.
//!
//! The floor program is solved by Mehrotra's primal-dual
//! predictor–corrector ([`super::mehrotra`]), to a relative gap its duals
//! certify. The proportional-fair program starts from the first of its
//! iterates that clears the held floor by half the room, runs the same
//! iteration while its Newton systems are accurate (mean complementarity
//! above [`HANDOVER_MU`]), and is finished by the log-barrier centring
//! ([`super::centring`]) from `τ = 1 / μ` there, whose prices
//! `1 / (τ · slack)` certify the answer ([`certified_gap`]). The plain
//! barrier method took about 125 Newton steps at 128 apps × 9 units; this
//! takes about 50.
//!
//! A warm start ([`solve_goal_from`]) skips the floor program: it blends
//! the answer to a program a little different (the same apps before their
//! models drifted, or before one pair was taken away) with an allocation
//! that cleared that program's floor, and starts the proportional-fair
//! iteration there if the blend clears the goal: on the benchmark's
//! mixes of 128 apps × 9 units, models drifted by 5–10 %, 17–28 steps
//! where a cold solve takes 42–65.
//!
//! The Newton matrix has one block per app (the identity, in scaled
//! variables, plus the rank-one terms of its in-flight row, its floor
//! row and its logarithm), coupled only through the unit rows, one rank-one
//! term each: [`super::newton`] solves it in `O(apps · units³)`. The
//! floor program's `t` adds a bordered row, solved by one more Schur
//! complement.

use super::centring;
use super::mehrotra::{self, Iterate, Rows, Stop, central_duals, failed, mean_complementarity};
use super::scaled::{Goal, Layout, Point, Slacks, slacks};
use super::{
    FairError, FairProblem, FairSolution, FairStatus, NoLoserSolution, Prices, WarmFrom,
    make_feasible,
};

/// The floor program stops once its duals bound `t*` within this of `t`
/// (relative); where rounding stops it first, within the second.
const FLOOR_GAP: f64 = 1e-5;
const FLOOR_GAP_USABLE: f64 = 1e-4;
/// The mean complementarity `μ` at which the proportional-fair program
/// passes from the primal-dual iteration to the centring
/// ([`super::centring`]) at `τ = 1 / μ`: below it the primal-dual Newton
/// systems lose their precision (its iterates are less central than the
/// centring's), while the centring's prices certify the gap without a
/// dual residual.
const HANDOVER_MU: f64 = 1e-5;
/// The floor is held this much under the largest common floor when that
/// binds, as [`super::solve_no_loser_weighted`] holds it first.
const FLOOR_SLACK: f64 = 1e-6;

/// The duality gap the duals certify for the proportional-fair program at
/// `at`: with `λ_r` on the unit and in-flight rows and `ν_i` on the floor
/// rows, weak duality bounds every feasible `Σ w_i ln y_i` by
/// `Σ_r λ_r − Σ_i ν_i f φ_i + Σ_i (w_i ln(w_i / (π_i − ν_i)) − w_i)`,
/// where `π_i = min_k (λ_u uc_k + λ_i fc_k) / c_k` is the cheapest price
/// of a unit of `y_i` (the supremum over `z ≥ 0` puts app `i` on its
/// cheapest pair). `+∞` where some `π_i ≤ ν_i` (nothing certified).
fn certified_gap(l: &Layout, weights: &[f64], floor: f64, duals: &Rows, s: &Slacks) -> f64 {
    let unit_price: Vec<f64> = (0..l.shape.rows)
        .map(|u| if l.unit_used[u] { duals.unit[u] } else { 0.0 })
        .collect();
    let mut bound: f64 = unit_price.iter().sum::<f64>() + duals.flight.iter().sum::<f64>();
    let mut value = 0.0;
    for (i, flight) in duals.flight.iter().enumerate() {
        let w = weights.get(i).copied().unwrap_or(1.0);
        let nu = duals.floor[i];
        let pi = cheapest_price(l, i, &unit_price, *flight);
        if pi.is_nan() || pi <= nu {
            return f64::INFINITY;
        }
        bound += w * (w / (pi - nu)).ln() - w - nu * floor * l.phi[i];
        value += w * s.thr[i].ln();
    }
    let gap = bound - value;
    if gap.is_nan() { f64::INFINITY } else { gap }
}

/// `π_i = min_k (λ_u uc_k + λ_i fc_k) / c_k`: what a unit of `y_i` costs
/// at the row prices on app `i`'s cheapest pair.
fn cheapest_price(l: &Layout, i: usize, unit_price: &[f64], flight_price: f64) -> f64 {
    l.app_of(i)
        .map(|k| {
            (unit_price[l.shape.row_of[k]] * l.unit_coef[k] + flight_price * l.flight_coef[k])
                / l.thr_coef[k]
        })
        .fold(f64::INFINITY, f64::min)
}

/// An upper bound on the largest common floor `t*` from the duals of the
/// floor program, by weak duality: with `ν'_i = min(ν_i, π_i)` (so that
/// no pair earns more than it costs), `t* ≤ (Σ_u λ_u + Σ_i λ_i) / Σ_i ν'_i φ_i`.
/// `+∞` where nothing is certified.
fn floor_bound(l: &Layout, duals: &Rows) -> f64 {
    let unit_price: Vec<f64> = (0..l.shape.rows)
        .map(|u| if l.unit_used[u] { duals.unit[u] } else { 0.0 })
        .collect();
    let paid: f64 = unit_price.iter().sum::<f64>() + duals.flight.iter().sum::<f64>();
    let earned: f64 = (0..l.apps())
        .map(|i| {
            let pi = cheapest_price(l, i, &unit_price, duals.flight[i]);
            duals.floor[i].min(pi) * l.phi[i]
        })
        .sum();
    let bound = paid / earned;
    if bound.is_nan() || earned <= 0.0 {
        f64::INFINITY
    } else {
        bound
    }
}

/// The largest gap [`certified_gap`] may show for the answer to be taken,
/// per unit of weight: otherwise Clarabel solves the problem.
const CERTIFIED_GAP: f64 = 1e-6;
/// `x` from `z`, made feasible against rounding.
fn allocation(p: &FairProblem, l: &Layout, z: &[f64]) -> Vec<Vec<f64>> {
    let mut x = vec![vec![0.0; p.units()]; p.apps()];
    for (i, row) in x.iter_mut().enumerate() {
        for k in l.app_of(i) {
            row[l.shape.row_of[k]] = z[k] * l.bound[k];
        }
    }
    make_feasible(p, &mut x);
    x
}

/// The least `r_i` of the allocation a point gives.
fn least_relative(p: &FairProblem, l: &Layout, z: &[f64]) -> f64 {
    let x = allocation(p, l, z);
    p.throughput_unchecked(&x)
        .iter()
        .zip(&p.native)
        .map(|(t, n)| t / n)
        .fold(f64::INFINITY, f64::min)
}

/// The largest common floor ([`super::max_common_floor`]) by the
/// interior-point method: the floor the last iterate's allocation
/// reaches, and the iterates of the way there.
fn largest_floor(
    p: &FairProblem,
    l: &Layout,
    steps: &mut u32,
) -> Result<(f64, Vec<Iterate>), FairError> {
    let z = l.interior();
    let thr = l.throughput(&z);
    let t = 0.5
        * (0..l.apps())
            .map(|i| thr[i] / l.phi[i])
            .fold(f64::INFINITY, f64::min);
    let start = central_duals(l, Goal::Floor, &Point { z, t }, t)
        .ok_or_else(|| failed("the start is not interior"))?;
    let within = |tolerance: f64| {
        move |it: &Iterate, _: &Slacks| {
            floor_bound(l, &it.duals) - it.point.t <= tolerance * it.point.t
        }
    };
    let (done, usable) = (within(FLOOR_GAP), within(FLOOR_GAP_USABLE));
    let stop = Stop {
        done: &done,
        usable: &usable,
    };
    let points = mehrotra::solve(l, Goal::Floor, start, &stop, steps)?;
    let last = points
        .last()
        .map_or(f64::NAN, |it| least_relative(p, l, &it.point.z));
    Ok((last, points))
}

/// [`super::solve_no_loser_weighted`] without extra limits, by the
/// interior-point method (see the module's documentation): the largest
/// common floor first, then the weighted proportional-fair program held to
/// `min(goal, t*)` (a hair under `t*` when that binds), started from the
/// floor program's path. The caller validates `p`, `goal` and `weights`.
pub(super) fn solve_no_loser_barrier(
    p: &FairProblem,
    goal: f64,
    weights: &[f64],
) -> Result<NoLoserSolution, FairError> {
    let l = Layout::new(p);
    let mut steps = 0;
    let (max_floor, floor_points) = largest_floor(p, &l, &mut steps)?;
    let floor_feasible = max_floor >= goal;
    let floor = goal.min(max_floor);
    let held = if floor_feasible && max_floor > goal * (1.0 + FLOOR_SLACK) {
        goal
    } else {
        floor * (1.0 - FLOOR_SLACK)
    };
    // Start from the first of the floor program's iterates that clears
    // the held floor by half the room there is: the last one is on the
    // boundary, where an interior-point method starts badly.
    let wanted = held + 0.5 * (max_floor - held);
    let start = floor_points
        .into_iter()
        .find(|it| least_relative(p, &l, &it.point.z) >= wanted)
        .map(|it| Point {
            z: it.point.z,
            t: 0.0,
        })
        .ok_or_else(|| failed("no point clears the floor"))?;
    let clearing = allocation(p, &l, &start.z);
    let solution = fair_from(p, &l, weights, held, start, CERTIFIED_GAP, &mut steps)?;
    Ok(NoLoserSolution {
        solution,
        floor,
        floor_feasible,
        max_floor,
        clearing,
    })
}

/// A warm start blends the last answer, the allocation that cleared its
/// floor and the interior point in these parts: the second lifts the apps
/// the floor held (whose models may have drifted below it since), the
/// third keeps every pair strictly inside. The second part is the first
/// of these that clears the goal: where the floor has little room, only a
/// start mostly the clearing allocation does. With a tenth, half the warm
/// starts of the benchmark's 128-app mixes with models drifted by ±5–10 %
/// did not clear the goal; with a fifth, all did.
const WARM_CLEARING: [f64; 3] = [0.2, 0.5, 0.9];
const WARM_INTERIOR: f64 = 0.01;
/// A warm start must clear the goal by this much (relative) to skip the
/// floor program.
const WARM_ROOM: f64 = 1e-3;
/// The gap a warm answer's prices must certify, per unit of weight: ten
/// times [`CERTIFIED_GAP`]. A warm solve re-solves the coordinator's
/// targets from models known to a few percent, where a mean `ln r_i`
/// within 1e-5 of the optimum is a rate within 0.001 %. Held to
/// [`CERTIFIED_GAP`], the centring stalled short of it (rounding) on 3 of
/// 18 warm starts of the benchmark's mixes (96 and 128 apps × 9 units,
/// models drifted by ±5–10 %), and each then cost a cold solve, 33–51 ms
/// where the cold barrier stalled too and Clarabel solved it.
const WARM_CERTIFIED_GAP: f64 = 1e-5;

/// The weighted proportional-fair program held to `goal`, started from a
/// blend of `from`'s allocations (each scaled into `p`'s rows) and the
/// interior point instead of from the floor program's path. The blend
/// must clear `goal` by [`WARM_ROOM`]; otherwise, or where the iteration
/// fails, the answer is an error and the caller solves cold. The answer's
/// prices certify it to [`WARM_CERTIFIED_GAP`]. The caller validates `p`,
/// `goal`, `weights` and `from`'s shape.
pub(super) fn solve_goal_from(
    p: &FairProblem,
    goal: f64,
    weights: &[f64],
    from: WarmFrom<'_>,
) -> Result<FairSolution, FairError> {
    let l = Layout::new(p);
    let solved = scaled_into_rows(&l, from.solved);
    let clearing = scaled_into_rows(&l, from.clearing);
    let inside = l.interior();
    let blend = |lift: f64| -> Vec<f64> {
        (0..l.pairs())
            .map(|k| {
                (1.0 - lift - WARM_INTERIOR) * solved[k]
                    + lift * clearing[k]
                    + WARM_INTERIOR * inside[k]
            })
            .collect()
    };
    let clears = |z: &[f64]| least_relative(p, &l, z) >= goal * (1.0 + WARM_ROOM);
    let z = WARM_CLEARING
        .iter()
        .map(|lift| blend(*lift))
        .find(|z| clears(z))
        .ok_or_else(|| failed("the warm start does not clear the goal"))?;
    let start = Point { z, t: 0.0 };
    // `Floor` with `t = 0`: every row but the floor's (already cleared).
    if slacks(&l, Goal::Floor, &start).is_none() {
        return Err(failed("the warm start is not interior"));
    }
    let mut steps = 0;
    fair_from(p, &l, weights, goal, start, WARM_CERTIFIED_GAP, &mut steps)
}

/// `x` (indexed `[app][unit]`) in the scaled variables, scaled down into
/// the in-flight rows (per app) and the unit rows (all together); pairs
/// `l` does not have are dropped, and anything not finite counts as 0.
fn scaled_into_rows(l: &Layout, x: &[Vec<f64>]) -> Vec<f64> {
    let mut z = vec![0.0; l.pairs()];
    for (i, row) in x.iter().enumerate().take(l.apps()) {
        for k in l.app_of(i) {
            let v = row[l.shape.row_of[k]];
            z[k] = if v.is_finite() {
                v.max(0.0) / l.bound[k]
            } else {
                0.0
            };
        }
        let load: f64 = l.app_of(i).map(|k| l.flight_coef[k] * z[k]).sum();
        if load > 1.0 {
            l.app_of(i).for_each(|k| z[k] /= load);
        }
    }
    let mut unit_load = vec![0.0; l.shape.rows];
    for (k, zk) in z.iter().enumerate() {
        unit_load[l.shape.row_of[k]] += l.unit_coef[k] * zk;
    }
    let most = unit_load.iter().fold(1.0_f64, |a, b| a.max(*b));
    z.iter().map(|zk| zk / most).collect()
}

/// The proportional-fair program held to `held`, from `start` (strictly
/// feasible, clearing the floor): the primal-dual iteration, then the
/// centring until the prices certify a gap of `certified` per unit of
/// weight ([`CERTIFIED_GAP`] cold).
fn fair_from(
    p: &FairProblem,
    l: &Layout,
    weights: &[f64],
    held: f64,
    start: Point,
    certified: f64,
    steps: &mut u32,
) -> Result<FairSolution, FairError> {
    // −τ w ln y is self-concordant for τ w ≥ 1: the barrier's first τ.
    let first_tau = weights.iter().fold(1.0_f64, |acc, w| acc.max(1.0 / w));
    let goal_fair = Goal::Fair {
        weights,
        floor: Some(held),
    };
    let total_weight: f64 = (0..p.apps())
        .map(|i| goal_fair.weight(i))
        .sum::<f64>()
        .max(1.0);
    let (start, first_tau) = towards_optimum(l, goal_fair, start, first_tau, steps);
    let enough = |_: &Point, s: &Slacks, tau: f64| {
        let duals = barrier_prices(l, tau, s);
        certified_gap(l, weights, held, &duals, s) <= certified * total_weight
    };
    let (at, tau) = centring::run(l, goal_fair, start, first_tau, &enough, steps)?;
    let s = slacks(l, goal_fair, &at).ok_or_else(|| failed("left the interior"))?;
    let duals = barrier_prices(l, tau, &s);
    let gap = certified_gap(l, weights, held, &duals, &s);
    if gap.is_nan() || gap > certified * total_weight {
        return Err(FairError::SolverFailed(format!(
            "barrier: the prices certify a gap of only {gap:e}"
        )));
    }
    let at = Iterate { point: at, duals };
    let allocation = allocation(p, l, &at.point.z);
    let unit_price = (0..p.units())
        .map(|u| {
            if l.unit_used[u] {
                at.duals.unit[u] / p.capacity[u]
            } else {
                0.0
            }
        })
        .collect();
    let app_price = (0..p.apps())
        .map(|i| at.duals.flight[i] / p.in_flight[i])
        .collect();
    Ok(FairSolution::of_allocation(
        p,
        allocation,
        Prices {
            unit: unit_price,
            app: app_price,
        },
        FairStatus::Solved,
        *steps,
    ))
}

/// The barrier's prices at a point centred for `τ`: `1 / (τ s_r)` on every
/// row but the bounds (which no certificate needs).
fn barrier_prices(l: &Layout, tau: f64, s: &Slacks) -> Rows {
    let price = |v: &[f64]| v.iter().map(|s| 1.0 / (tau * s)).collect();
    Rows {
        pair: Vec::new(),
        unit: (0..l.shape.rows)
            .map(|u| {
                if l.unit_used[u] {
                    1.0 / (tau * s.unit[u])
                } else {
                    0.0
                }
            })
            .collect(),
        flight: price(&s.flight),
        floor: price(&s.floor),
    }
}

/// The proportional-fair program's first stretch by the primal-dual
/// iteration, from `start` (central for `first_tau`) until its `μ` is
/// [`HANDOVER_MU`]: the point reached and `τ = 1 / μ` there, for the
/// centring to go on from. Where the iteration fails first, its last
/// iterate (all are strictly feasible) and its `μ`.
fn towards_optimum(
    l: &Layout,
    goal: Goal<'_>,
    start: Point,
    first_tau: f64,
    steps: &mut u32,
) -> (Point, f64) {
    let Some(iterate) = central_duals(l, goal, &start, 1.0 / first_tau) else {
        return (start, first_tau);
    };
    let done = |it: &Iterate, s: &Slacks| mean_complementarity(l, it, s) <= HANDOVER_MU;
    let any = |_: &Iterate, _: &Slacks| true;
    let stop = Stop {
        done: &done,
        usable: &any,
    };
    match mehrotra::solve(l, goal, iterate, &stop, steps) {
        Ok(path) => match path.into_iter().last() {
            Some(last) => {
                let tau = slacks(l, goal, &last.point)
                    .map_or(first_tau, |s| 1.0 / mean_complementarity(l, &last, &s));
                (last.point, tau.max(first_tau))
            }
            None => (start, first_tau),
        },
        Err(_) => (start, first_tau),
    }
}
