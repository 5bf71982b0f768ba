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
//! `1 / (τ · slack)` certify the answer ([`certified_gap`]). Where the
//! centring fails from there, it starts again from earlier iterates. The
//! plain barrier method took about 125 Newton steps at 128 apps × 9
//! units; this takes about 50.
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
use std::cell::Cell;

/// The floor program stops once its duals bound `t*` within this of `t`
/// (relative); where rounding stops it first, within the second.
const FLOOR_GAP: f64 = 1e-5;
const FLOOR_GAP_USABLE: f64 = 1e-4;
/// The floor program also stops at a usable gap that has not halved in
/// this many steps: on programs of 128 apps × 9 units whose waits the
/// replay measured, the iteration went on for 40–60 steps more with `t`
/// moving by 1e-6 and the gap bouncing between 1e-5 and 1e-2, its duals
/// short of precision (a third of a solve's time, in the slowest solves
/// of a pick in slices).
const FLOOR_STALL_STEPS: u32 = 4;

/// Steps since the floor program's gap last halved.
#[derive(Default)]
struct FloorStall {
    best: Cell<Option<f64>>,
    since: Cell<u32>,
}

impl FloorStall {
    /// Counts one more iterate with gap `gap`; whether the gap has not
    /// halved in [`FLOOR_STALL_STEPS`].
    fn stalled(&self, gap: f64) -> bool {
        if self.best.get().is_none_or(|best| gap <= 0.5 * best) {
            self.best.set(Some(gap));
            self.since.set(0);
        } else {
            self.since.set(self.since.get() + 1);
        }
        self.since.get() >= FLOOR_STALL_STEPS
    }
}

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

/// The gaps [`certified_gap`] must show for an answer to be taken, per
/// unit of weight: the centring goes on until its prices certify `wanted`;
/// where rounding stops it first, its point is taken if they certify
/// `usable`. Otherwise the next start is tried, and past the last the
/// caller solves the problem another way.
#[derive(Clone, Copy, Debug)]
struct Certificate {
    wanted: f64,
    usable: f64,
}

/// A cold solve's certificate. The centring stopped short of 1e-6 on 2 of
/// the 16 programs of a replay-judged pick at 128 apps × 9 units
/// (1.4e-6 and 2.8e-6 per app): a mean `ln r_i` within 1e-5 of the
/// optimum is a rate within 0.001 %, what a warm solve is held to.
const CERTIFIED_GAP: Certificate = Certificate {
    wanted: 1e-6,
    usable: 1e-5,
};
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
    // How far the duals' bound on `t*` lies above `t`; `t` may be
    // negative on the way, where no gap is within a tolerance.
    let excess = |it: &Iterate| floor_bound(l, &it.duals) - it.point.t;
    let within = |it: &Iterate, tolerance: f64| excess(it) <= tolerance * it.point.t;
    let stall = FloorStall::default();
    let done = |it: &Iterate, _: &Slacks| {
        within(it, FLOOR_GAP)
            || (within(it, FLOOR_GAP_USABLE) && stall.stalled(excess(it) / it.point.t))
    };
    let usable = |it: &Iterate, _: &Slacks| within(it, FLOOR_GAP_USABLE);
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
/// times what a cold solve aims at ([`CERTIFIED_GAP`]). A warm solve
/// re-solves the coordinator's targets from models known to a few
/// percent, where a mean `ln r_i` within 1e-5 of the optimum is a rate
/// within 0.001 %. Held to 1e-6, the centring stalled short of it
/// (rounding) on 3 of 18 warm starts of the benchmark's mixes (96 and 128
/// apps × 9 units, models drifted by ±5–10 %), and each then cost a cold
/// solve, 33–51 ms where the cold barrier stalled too and Clarabel solved
/// it.
const WARM_CERTIFIED_GAP: Certificate = Certificate {
    wanted: 1e-5,
    usable: 1e-5,
};

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
/// centring until the prices certify `certified` ([`CERTIFIED_GAP`]
/// cold), from each of [`towards_optimum`]'s points in turn until one
/// gets there.
fn fair_from(
    p: &FairProblem,
    l: &Layout,
    weights: &[f64],
    held: f64,
    start: Point,
    certified: Certificate,
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
    let enough = |_: &Point, s: &Slacks, tau: f64| {
        let duals = barrier_prices(l, tau, s);
        certified_gap(l, weights, held, &duals, s) <= certified.wanted * total_weight
    };
    let centred = |from: Point, tau: f64, steps: &mut u32| {
        let (at, tau) = centring::run(l, goal_fair, from, tau, &enough, steps)?;
        let s = slacks(l, goal_fair, &at).ok_or_else(|| failed("left the interior"))?;
        let duals = barrier_prices(l, tau, &s);
        let gap = certified_gap(l, weights, held, &duals, &s);
        if gap.is_nan() || gap > certified.usable * total_weight {
            return Err(FairError::SolverFailed(format!(
                "barrier: the prices certify a gap of only {gap:e}"
            )));
        }
        Ok((at, duals))
    };
    let mut last_error = None;
    let mut found = None;
    for (from, tau) in towards_optimum(l, goal_fair, start, first_tau, steps) {
        match centred(from, tau, steps) {
            Ok(answer) => {
                found = Some(answer);
                break;
            }
            Err(e) => last_error = Some(e),
        }
    }
    let (at, duals) = found.ok_or_else(|| last_error.unwrap_or_else(|| failed("no start")))?;
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

/// Each hand-over point after the first that fails lies this many times
/// further back along the primal-dual path, in `μ`.
const HANDOVER_BACKOFF: f64 = 100.0;

/// The proportional-fair program's first stretch by the primal-dual
/// iteration, from `start` (central for `first_tau`) until its `μ` is
/// [`HANDOVER_MU`]: the points the centring may go on from, each with its
/// `τ = 1 / μ`, best first. The last iterate comes first. Its centring can
/// fail, where the iterate is far from central (a unit's slack of 3e-10
/// at `τ` = 6e6 left a Newton system unsolvable in double precision on
/// programs of 128 apps × 9 units), so earlier iterates follow, each
/// [`HANDOVER_BACKOFF`] times further back in `μ`, and `start` itself at
/// `first_tau` last. Where the iteration fails first, its iterates so far
/// serve the same way.
fn towards_optimum(
    l: &Layout,
    goal: Goal<'_>,
    start: Point,
    first_tau: f64,
    steps: &mut u32,
) -> Vec<(Point, f64)> {
    let Some(iterate) = central_duals(l, goal, &start, 1.0 / first_tau) else {
        return vec![(start, first_tau)];
    };
    let done = |it: &Iterate, s: &Slacks| mean_complementarity(l, it, s) <= HANDOVER_MU;
    let any = |_: &Iterate, _: &Slacks| true;
    let stop = Stop {
        done: &done,
        usable: &any,
    };
    let path = mehrotra::solve(l, goal, iterate, &stop, steps).unwrap_or_default();
    let mut points = Vec::new();
    let mut next_tau = f64::INFINITY;
    for (back, it) in path.into_iter().rev().enumerate() {
        let tau = slacks(l, goal, &it.point)
            .map_or(first_tau, |s| 1.0 / mean_complementarity(l, &it, &s))
            .max(first_tau);
        if back == 0 || (tau <= next_tau && tau > first_tau) {
            next_tau = tau / HANDOVER_BACKOFF;
            points.push((it.point, tau));
        }
    }
    points.push((start, first_tau));
    points
}
