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
//! same rows with `y_i ≥ t φ_i`. Both are solved by the log-barrier method:
//! minimise `τ f₀ − Σ ln(slack)` by Newton's method for a growing `τ`,
//! until `(number of inequalities) / τ`, a bound on the objective's gap,
//! is below [`GAP`]. Every iterate is strictly feasible, so the allocation
//! needs no repair, and `1 / (τ · slack)` are the rows' prices.
//!
//! The Newton matrix has one block per app (the identity, in variables
//! scaled by `z`, plus the rank-one terms of its in-flight row, its floor
//! row and its logarithm), coupled only through the unit rows, one rank-one
//! term each: [`super::newton`] solves it in `O(apps · units³)`. The
//! floor program's `t` adds a bordered row, solved by one more Schur
//! complement.

use super::newton::{Border, Coupling, RankOne, Shape, factor};
use super::{
    FairError, FairProblem, FairSolution, FairStatus, NoLoserSolution, Prices, make_feasible,
    throughput_scale,
};

/// Target bound on the objective's gap: `Σ w ln r` per app for the
/// proportional-fair program (Clarabel's tight tolerance is 1e-10 in
/// all), `t` (relative) for the floor program.
const GAP: f64 = 1e-9;
const FLOOR_GAP: f64 = 1e-5;
/// Gap bounds good enough to stop at when rounding stops the centring:
/// per app for the proportional-fair program (1e-5 relative throughput
/// each), relative for the floor.
const GAP_USABLE: f64 = 1e-5;
const FLOOR_GAP_USABLE: f64 = 1e-4;
/// Factor by which `τ` grows between centrings.
const TAU_GROWTH: f64 = 50.0;
/// A centring stops when half the squared Newton decrement is below this.
const CENTRED: f64 = 1e-10;
/// Below this squared Newton decrement the full step is taken unmeasured.
const QUADRATIC_REGION: f64 = 0.25;
/// Below this squared Newton decrement, a step that does not lower the
/// barrier function measurably ends the centring.
const ROUNDING_DECREMENT: f64 = 1e-4;
/// Newton steps one solve may take in all before it gives up.
const MAX_NEWTON: u32 = 600;
/// Newton steps one centring may take.
const MAX_CENTRING: u32 = 25;
/// Fraction of the distance to the nearest boundary a step may go.
const TO_BOUNDARY: f64 = 0.99;
/// The floor is held this much under the largest common floor when that
/// binds, as [`super::solve_no_loser_weighted`] holds it first.
const FLOOR_SLACK: f64 = 1e-6;

/// The problem's rows in the scaled variables.
struct Layout {
    shape: Shape,
    /// Per pair: unit-row, in-flight-row and throughput coefficients.
    unit_coef: Vec<f64>,
    flight_coef: Vec<f64>,
    thr_coef: Vec<f64>,
    /// Per pair, its `bound`; per app, `φ_i`.
    bound: Vec<f64>,
    phi: Vec<f64>,
    /// Whether each unit has a pair (a unit without one has no row).
    unit_used: Vec<bool>,
}

impl Layout {
    fn new(p: &FairProblem) -> Layout {
        let pairs = p.pairs();
        let (log_scale, thr_coef) = throughput_scale(p, &pairs);
        let mut starts = vec![0; p.apps() + 1];
        let mut unit_used = vec![false; p.units()];
        for pair in &pairs {
            starts[pair.app + 1] += 1;
            unit_used[pair.unit] = true;
        }
        for i in 0..p.apps() {
            starts[i + 1] += starts[i];
        }
        Layout {
            shape: Shape {
                starts,
                row_of: pairs.iter().map(|pr| pr.unit).collect(),
                rows: p.units(),
            },
            unit_coef: pairs
                .iter()
                .map(|pr| pr.bound / p.capacity[pr.unit])
                .collect(),
            flight_coef: pairs
                .iter()
                .map(|pr| p.occupancy[pr.app][pr.unit] * pr.bound / p.in_flight[pr.app])
                .collect(),
            thr_coef,
            bound: pairs.iter().map(|pr| pr.bound).collect(),
            phi: (0..p.apps())
                .map(|i| (p.native[i].ln() - log_scale[i]).exp())
                .collect(),
            unit_used,
        }
    }

    fn apps(&self) -> usize {
        self.phi.len()
    }

    fn pairs(&self) -> usize {
        self.bound.len()
    }

    fn app_of(&self, i: usize) -> std::ops::Range<usize> {
        self.shape.starts[i]..self.shape.starts[i + 1]
    }

    /// A strictly feasible point of the rows other than the floor: every
    /// pair at half its even share of the tightest row it is in (every
    /// coefficient is at most 1).
    fn interior(&self) -> Vec<f64> {
        let mut users = vec![0usize; self.shape.rows];
        for &u in &self.shape.row_of {
            users[u] += 1;
        }
        (0..self.apps())
            .flat_map(|i| {
                let own = self.app_of(i).len();
                self.app_of(i)
                    .map(|k| 0.5 / users[self.shape.row_of[k]].max(own) as f64)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// `y_i` per app.
    fn throughput(&self, z: &[f64]) -> Vec<f64> {
        (0..self.apps())
            .map(|i| self.app_of(i).map(|k| self.thr_coef[k] * z[k]).sum())
            .collect()
    }
}

/// What is maximised.
#[derive(Clone, Copy)]
enum Goal<'a> {
    /// `Σ w_i ln y_i` subject to `y_i ≥ floor · φ_i` (`floor` `None`: no
    /// floor row).
    Fair {
        weights: &'a [f64],
        floor: Option<f64>,
    },
    /// `t` subject to `y_i ≥ t · φ_i`.
    Floor,
}

impl Goal<'_> {
    fn weight(&self, i: usize) -> f64 {
        match self {
            Goal::Fair { weights, .. } => weights.get(i).copied().unwrap_or(1.0),
            Goal::Floor => 0.0,
        }
    }

    fn has_floor_row(&self) -> bool {
        !matches!(self, Goal::Fair { floor: None, .. })
    }
}

/// The slacks of every row at a point (all positive at a feasible one).
struct Slacks {
    unit: Vec<f64>,
    flight: Vec<f64>,
    /// `y_i`.
    thr: Vec<f64>,
    /// `y_i − floor · φ_i` (or `− t φ_i`); empty without a floor row.
    floor: Vec<f64>,
}

/// A point: `z`, and `t` (the floor program's variable; unused otherwise).
#[derive(Clone)]
struct Point {
    z: Vec<f64>,
    t: f64,
}

fn slacks(l: &Layout, goal: Goal<'_>, at: &Point) -> Option<Slacks> {
    let mut unit = vec![1.0; l.shape.rows];
    let mut flight = vec![1.0; l.apps()];
    for (k, &z) in at.z.iter().enumerate() {
        if z.is_nan() || z <= 0.0 {
            return None;
        }
        unit[l.shape.row_of[k]] -= l.unit_coef[k] * z;
    }
    for (i, f) in flight.iter_mut().enumerate() {
        *f -= l.app_of(i).map(|k| l.flight_coef[k] * at.z[k]).sum::<f64>();
    }
    let thr = l.throughput(&at.z);
    let floor: Vec<f64> = match goal {
        Goal::Fair { floor: None, .. } => Vec::new(),
        Goal::Fair { floor: Some(f), .. } => {
            thr.iter().zip(&l.phi).map(|(y, phi)| y - f * phi).collect()
        }
        Goal::Floor => thr
            .iter()
            .zip(&l.phi)
            .map(|(y, phi)| y - at.t * phi)
            .collect(),
    };
    let used_units = unit.iter().zip(&l.unit_used).filter(|(_, u)| **u);
    let all_positive = used_units
        .map(|(s, _)| s)
        .chain(&flight)
        .chain(&thr)
        .chain(&floor);
    let mut all_positive = all_positive;
    if all_positive.all(|s| *s > 0.0 && s.is_finite()) {
        Some(Slacks {
            unit,
            flight,
            thr,
            floor,
        })
    } else {
        None
    }
}

/// `F(to) − F(from)` for `F = τ f₀ − Σ ln(slack)`, from ratios so that it
/// keeps its precision when `τ f₀` is large.
fn change(
    l: &Layout,
    goal: Goal<'_>,
    tau: f64,
    from: (&Point, &Slacks),
    to: (&Point, &Slacks),
) -> f64 {
    let ln_ratio =
        |a: &[f64], b: &[f64]| -> f64 { a.iter().zip(b).map(|(x, y)| (y / x).ln()).sum() };
    let objective = match goal {
        Goal::Fair { .. } => -(0..l.apps())
            .map(|i| goal.weight(i) * (to.1.thr[i] / from.1.thr[i]).ln())
            .sum::<f64>(),
        Goal::Floor => -(to.0.t - from.0.t),
    };
    let units: f64 = (0..l.shape.rows)
        .filter(|&u| l.unit_used[u])
        .map(|u| (to.1.unit[u] / from.1.unit[u]).ln())
        .sum();
    tau * objective
        - ln_ratio(&from.0.z, &to.0.z)
        - units
        - ln_ratio(&from.1.flight, &to.1.flight)
        - ln_ratio(&from.1.floor, &to.1.floor)
}

/// The Newton direction at `at` for `τ`, and its squared decrement.
struct Step {
    dz: Vec<f64>,
    dt: f64,
    decrement: f64,
}

fn newton_step(l: &Layout, goal: Goal<'_>, tau: f64, at: &Point, s: &Slacks) -> Option<Step> {
    let n = l.apps();
    let has_floor = goal.has_floor_row();
    // Gradient of F in z, scaled by z (the variables δ = Δz / z).
    let mut grad = vec![0.0; l.pairs()];
    for i in 0..n {
        let w = goal.weight(i);
        for k in l.app_of(i) {
            let mut g = -1.0 / at.z[k]
                + l.unit_coef[k] / s.unit[l.shape.row_of[k]]
                + l.flight_coef[k] / s.flight[i]
                - tau * w * l.thr_coef[k] / s.thr[i];
            if has_floor {
                g -= l.thr_coef[k] / s.floor[i];
            }
            grad[k] = g * at.z[k];
        }
    }
    let scaled =
        |coef: &[f64]| -> Vec<f64> { coef.iter().zip(&at.z).map(|(c, z)| c * z).collect() };
    let flight_v = scaled(&l.flight_coef);
    let thr_v = scaled(&l.thr_coef);
    let unit_v = scaled(&l.unit_coef);
    let flight_w: Vec<f64> = s.flight.iter().map(|f| 1.0 / (f * f)).collect();
    let thr_w: Vec<f64> = (0..n)
        .map(|i| {
            let from_log = tau * goal.weight(i) / (s.thr[i] * s.thr[i]);
            let from_floor = if has_floor {
                1.0 / (s.floor[i] * s.floor[i])
            } else {
                0.0
            };
            from_log + from_floor
        })
        .collect();
    let inverse_weight: Vec<f64> = (0..l.shape.rows)
        .map(|u| {
            if l.unit_used[u] {
                s.unit[u] * s.unit[u]
            } else {
                1.0
            }
        })
        .collect();
    let terms = [
        RankOne {
            weight: &flight_w,
            vector: &flight_v,
        },
        RankOne {
            weight: &thr_w,
            vector: &thr_v,
        },
    ];
    let coupling = Coupling {
        vector: &unit_v,
        inverse_weight: &inverse_weight,
    };
    let m = factor(&l.shape, &terms, &coupling)?;
    let minus_grad: Vec<f64> = grad.iter().map(|g| -g).collect();
    let (delta, dt, decrement) = if let Goal::Floor = goal {
        // The floor rows are the thr term's rows, with `−φ_i` on `t`.
        let g_t = -tau + (0..n).map(|i| l.phi[i] / s.floor[i]).sum::<f64>();
        let alpha: Vec<f64> = l.phi.iter().map(|phi| -phi).collect();
        let border = Border { alpha: &alpha };
        let (delta, dt) = m.solve_bordered(&border, &minus_grad, -g_t)?;
        let dec = -grad.iter().zip(&delta).map(|(g, d)| g * d).sum::<f64>() - g_t * dt;
        (delta, dt, dec)
    } else {
        let delta = m.solve(&minus_grad);
        let dec = -grad.iter().zip(&delta).map(|(g, d)| g * d).sum::<f64>();
        (delta, 0.0, dec)
    };
    let dz: Vec<f64> = delta.iter().zip(&at.z).map(|(d, z)| d * z).collect();
    decrement.is_finite().then_some(Step { dz, dt, decrement })
}

/// The largest step along `step` that keeps every slack positive.
fn step_to_boundary(l: &Layout, goal: Goal<'_>, at: &Point, s: &Slacks, step: &Step) -> f64 {
    let mut most = f64::INFINITY;
    let mut limit = |slack: f64, rate: f64| {
        if rate < 0.0 {
            most = most.min(-slack / rate);
        }
    };
    for (k, dz) in step.dz.iter().enumerate() {
        limit(at.z[k], *dz);
    }
    let mut unit_rate = vec![0.0; l.shape.rows];
    for (k, dz) in step.dz.iter().enumerate() {
        unit_rate[l.shape.row_of[k]] -= l.unit_coef[k] * dz;
    }
    for u in (0..l.shape.rows).filter(|&u| l.unit_used[u]) {
        limit(s.unit[u], unit_rate[u]);
    }
    let thr_rate = l.throughput(&step.dz);
    for (i, rate) in thr_rate.iter().enumerate() {
        let flight_rate: f64 = -l
            .app_of(i)
            .map(|k| l.flight_coef[k] * step.dz[k])
            .sum::<f64>();
        limit(s.flight[i], flight_rate);
        limit(s.thr[i], *rate);
        match goal {
            Goal::Fair { floor: None, .. } => {}
            Goal::Fair { .. } => limit(s.floor[i], *rate),
            Goal::Floor => limit(s.floor[i], rate - step.dt * l.phi[i]),
        }
    }
    most
}

/// Centres `at` for `τ` by damped Newton steps with a backtracking line
/// search; counts the steps in `steps`.
fn centre(
    l: &Layout,
    goal: Goal<'_>,
    tau: f64,
    at: &mut Point,
    steps: &mut u32,
) -> Result<(), FairError> {
    let failed = |why: &str| FairError::SolverFailed(format!("barrier: {why}"));
    let first = *steps;
    loop {
        let s = slacks(l, goal, at).ok_or_else(|| failed("left the interior"))?;
        let step =
            newton_step(l, goal, tau, at, &s).ok_or_else(|| failed("singular Newton system"))?;
        if step.decrement < -CENTRED {
            return Err(failed("rounding: a negative Newton decrement"));
        }
        if step.decrement / 2.0 <= CENTRED {
            return Ok(());
        }
        *steps += 1;
        if *steps > MAX_NEWTON {
            return Err(failed("too many Newton steps"));
        }
        if *steps - first > MAX_CENTRING {
            return Err(failed("a centring stalled"));
        }
        // Self-concordance guarantees progress at 1 / (1 + λ); the line
        // search starts at the full step and stops there at the latest.
        let damped = 1.0 / (1.0 + step.decrement.sqrt());
        let boundary = step_to_boundary(l, goal, at, &s, &step);
        let mut alpha = if boundary > 1.0 / TO_BOUNDARY {
            1.0
        } else {
            TO_BOUNDARY * boundary
        };
        let moved = loop {
            let next = Point {
                z: at
                    .z
                    .iter()
                    .zip(&step.dz)
                    .map(|(z, d)| z + alpha * d)
                    .collect(),
                t: at.t + alpha * step.dt,
            };
            if let Some(ns) = slacks(l, goal, &next) {
                // Within the quadratic region (λ < 1/2) the full Newton
                // step of a self-concordant function stays inside and
                // lowers it: no need to measure.
                if alpha >= 1.0 && step.decrement < QUADRATIC_REGION {
                    break Some(next);
                }
                if change(l, goal, tau, (at, &s), (&next, &ns)) <= -0.25 * alpha * step.decrement {
                    break Some(next);
                }
                // Near the centre a full step that does not lower F
                // measurably means rounding, not distance, is what is left.
                if step.decrement < ROUNDING_DECREMENT {
                    break None;
                }
                if alpha <= damped {
                    break Some(next);
                }
            } else if alpha <= damped {
                break None;
            }
            alpha = (alpha * 0.5).max(damped);
        };
        match moved {
            Some(next) => *at = next,
            // Rounding: the step no longer lowers F measurably.
            None => return Ok(()),
        }
    }
}

/// The barrier method from the strictly feasible `start`: centres for
/// growing `τ` until the gap bound is below [`GAP`]. Returns the centred
/// point of every `τ` (the last is the answer) and the last `τ`. Once the
/// gap bound is below [`GAP_USABLE`], a centring that rounding stops
/// ends the run with the points so far.
fn run(
    l: &Layout,
    goal: Goal<'_>,
    start: Point,
    steps: &mut u32,
) -> Result<(Vec<Point>, f64), FairError> {
    let rows = l.pairs()
        + l.unit_used.iter().filter(|u| **u).count()
        + l.apps() * if goal.has_floor_row() { 2 } else { 1 };
    let mut at = start;
    let mut tau = match goal {
        // −τ w ln y is self-concordant for τ w ≥ 1.
        Goal::Fair { weights, .. } => weights.iter().fold(1.0_f64, |acc, w| acc.max(1.0 / w)),
        Goal::Floor => 1.0 / at.t.abs().max(1e-9),
    };
    let mut centred: Vec<Point> = Vec::new();
    loop {
        let (scale, usable) = match goal {
            Goal::Fair { .. } => (l.apps() as f64, l.apps() as f64),
            Goal::Floor => (
                at.t.abs().max(1e-12) * FLOOR_GAP / GAP,
                at.t.abs().max(1e-12) * FLOOR_GAP_USABLE / GAP_USABLE,
            ),
        };
        match centre(l, goal, tau, &mut at, steps) {
            Ok(()) => {}
            Err(_)
                if !centred.is_empty() && rows as f64 / tau * TAU_GROWTH <= GAP_USABLE * usable =>
            {
                return Ok((centred, tau / TAU_GROWTH));
            }
            Err(e) => return Err(e),
        }
        centred.push(at.clone());
        if rows as f64 / tau <= GAP * scale {
            return Ok((centred, tau));
        }
        tau *= TAU_GROWTH;
    }
}

/// The duality gap the barrier's prices certify for the proportional-fair
/// program at `at`: with `λ_r = 1 / (τ s_r)` on the unit and in-flight
/// rows and `ν_i = 1 / (τ s_i)` on the floor rows, weak duality bounds
/// every feasible `Σ w_i ln y_i` by
/// `Σ_r λ_r − Σ_i ν_i f φ_i + Σ_i (w_i ln(w_i / (π_i − ν_i)) − w_i)`,
/// where `π_i = min_k (λ_u uc_k + λ_i fc_k) / c_k` is the cheapest price
/// of a unit of `y_i` (the supremum over `z ≥ 0` puts app `i` on its
/// cheapest pair). `+∞` where some `π_i ≤ ν_i` (nothing certified).
fn certified_gap(l: &Layout, weights: &[f64], floor: f64, tau: f64, s: &Slacks) -> f64 {
    let unit_price: Vec<f64> = (0..l.shape.rows)
        .map(|u| {
            if l.unit_used[u] {
                1.0 / (tau * s.unit[u])
            } else {
                0.0
            }
        })
        .collect();
    let flight_price: Vec<f64> = s.flight.iter().map(|f| 1.0 / (tau * f)).collect();
    let mut bound: f64 = unit_price.iter().sum::<f64>() + flight_price.iter().sum::<f64>();
    let mut value = 0.0;
    for (i, flight) in flight_price.iter().enumerate() {
        let w = weights.get(i).copied().unwrap_or(1.0);
        let nu = 1.0 / (tau * s.floor[i]);
        let pi = l
            .app_of(i)
            .map(|k| {
                (unit_price[l.shape.row_of[k]] * l.unit_coef[k] + flight * l.flight_coef[k])
                    / l.thr_coef[k]
            })
            .fold(f64::INFINITY, f64::min);
        if pi.is_nan() || pi <= nu {
            return f64::INFINITY;
        }
        bound += w * (w / (pi - nu)).ln() - w - nu * floor * l.phi[i];
        value += w * s.thr[i].ln();
    }
    let gap = bound - value;
    if gap.is_nan() { f64::INFINITY } else { gap }
}

/// The largest gap [`certified_gap`] may show for the barrier's answer to
/// be taken, per unit of weight: otherwise Clarabel solves the problem.
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

/// The largest common floor ([`super::max_common_floor`]) by the barrier
/// method: the floor the last point's allocation reaches, and the
/// centred points of the way there.
fn largest_floor(
    p: &FairProblem,
    l: &Layout,
    steps: &mut u32,
) -> Result<(f64, Vec<Point>), FairError> {
    let z = l.interior();
    let thr = l.throughput(&z);
    let t = 0.5
        * (0..l.apps())
            .map(|i| thr[i] / l.phi[i])
            .fold(f64::INFINITY, f64::min);
    let (points, _) = run(l, Goal::Floor, Point { z, t }, steps)?;
    let last = points
        .last()
        .map_or(f64::NAN, |at| least_relative(p, l, &at.z));
    Ok((last, points))
}

/// [`super::solve_no_loser_weighted`] without extra limits, by the barrier
/// method (see the module's documentation): the largest common floor
/// first, then the weighted proportional-fair program held to
/// `min(goal, t*)` (a hair under `t*` when that binds), started from the
/// floor program's solution. The caller validates `p`, `goal` and
/// `weights`.
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
    let goal_fair = Goal::Fair {
        weights,
        floor: Some(held),
    };
    // Start from the most central of the floor program's points that
    // clears the held floor by half the room there is: the last one is
    // on the boundary, where Newton's method starts badly.
    let wanted = held + 0.5 * (max_floor - held);
    let start = floor_points
        .into_iter()
        .find(|at| least_relative(p, &l, &at.z) >= wanted)
        .map(|at| Point { z: at.z, t: 0.0 })
        .ok_or_else(|| FairError::SolverFailed("barrier: no point clears the floor".into()))?;
    if slacks(&l, goal_fair, &start).is_none() {
        return Err(FairError::SolverFailed(
            "barrier: the floor program's point misses the floor".into(),
        ));
    }
    let (points, tau) = run(&l, goal_fair, start, &mut steps)?;
    let at = points
        .last()
        .cloned()
        .ok_or_else(|| FairError::SolverFailed("barrier: no centred point".into()))?;
    let s = slacks(&l, goal_fair, &at)
        .ok_or_else(|| FairError::SolverFailed("barrier: left the interior".into()))?;
    let total_weight: f64 = (0..p.apps()).map(|i| goal_fair.weight(i)).sum();
    let gap = certified_gap(&l, weights, held, tau, &s);
    if gap.is_nan() || gap > CERTIFIED_GAP * total_weight.max(1.0) {
        return Err(FairError::SolverFailed(format!(
            "barrier: the prices certify a gap of only {gap:e}"
        )));
    }
    let allocation = allocation(p, &l, &at.z);
    let unit_price = (0..p.units())
        .map(|u| {
            if l.unit_used[u] {
                1.0 / (tau * s.unit[u]) / p.capacity[u]
            } else {
                0.0
            }
        })
        .collect();
    let app_price = (0..p.apps())
        .map(|i| 1.0 / (tau * s.flight[i]) / p.in_flight[i])
        .collect();
    Ok(NoLoserSolution {
        solution: FairSolution::of_allocation(
            p,
            allocation,
            Prices {
                unit: unit_price,
                app: app_price,
            },
            FairStatus::Solved,
            steps,
        ),
        floor,
        floor_feasible,
        max_floor,
    })
}
