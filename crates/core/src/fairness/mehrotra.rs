//! The primal-dual interior-point iteration of the barrier solver
//! ([`super::barrier`]): Mehrotra's predictor–corrector on the rows of
//! [`Layout`], for either [`Goal`].
//!
//! The plain barrier method centres for each `τ` of a geometric sequence
//! (ten or more Newton steps per `τ`, about sixty per program at 128 apps).
//! Here the rows' duals are variables of their own, and every step aims at
//! the central path of a `μ` chosen from how far the pure Newton
//! (affine) step would get (`σ = (μ_aff / μ)³`); the complementarity
//! products of the affine step correct the second order. The same
//! factorisation serves both solves; the floor program takes 8–17 steps on
//! the benchmark's mixes. The Newton matrix has the barrier's structure,
//! with `λ_r / s_r` for `1 / s_r²` on every row: the variables are scaled
//! by `d_k = √(z_k / λ_k)` so that the bound rows give the identity of
//! [`super::newton`]'s blocks.
//!
//! The primal iterate stays strictly feasible (every row is linear in `z`
//! and its slack is recomputed from `z`); only the dual residual is
//! driven to zero. Steps are kept in a wide neighbourhood of the central
//! path ([`CENTRALITY`]) and shortened where the dual residual would grow
//! (the objective is not linear). Near the proportional-fair program's
//! optimum the Newton systems lose their precision sooner than the
//! centring's (the weights `λ_r / s_r` spread further), so the caller
//! hands that program over to [`super::centring`] first.

use super::newton::{Border, Bordered, Coupling, Factored, RankOne, factor};
use super::scaled::{Goal, Layout, Point, Slacks, slacks};

/// The factored Newton matrix as a step solves with it: plain, or
/// bordered by the floor program's `t` (its border prepared once for both
/// of the step's solves).
enum Solver<'a> {
    Plain(&'a Factored<'a>),
    Bordered(Bordered<'a>),
}

/// One value per row: the bounds `z_k ≥ 0`, the unit rows (zero for a
/// unit without pairs), the in-flight rows and the floor rows (empty
/// without them).
#[derive(Clone, Debug)]
pub(super) struct Rows {
    pub pair: Vec<f64>,
    pub unit: Vec<f64>,
    pub flight: Vec<f64>,
    pub floor: Vec<f64>,
}

/// A primal point with its rows' duals.
#[derive(Clone)]
pub(super) struct Iterate {
    pub point: Point,
    pub duals: Rows,
}

/// Fraction of the distance to the nearest boundary a step may go.
const TO_BOUNDARY: f64 = 0.99;
/// The least share of the mean complementarity product any row keeps.
const CENTRALITY: f64 = 1e-3;
/// The shortest step taken: below it the iteration has stalled.
const MIN_STEP: f64 = 1e-8;
/// How much a step may raise the dual residual's largest entry (rounding
/// moves it a little even where the step is right).
const RESIDUAL_GROWTH: f64 = 2.0;
/// A dual residual below this times `μ` counts as converged.
const RESIDUAL_FLOOR: f64 = 1.0;
/// Steps one program may take before it gives up.
const MAX_STEPS: u32 = 80;

/// Where a program stops: `done` says, from an iterate and its slacks,
/// whether it is where the caller wants to stop (a certificate tight
/// enough, or a `μ` small enough); `usable`, whether it is good enough to
/// stop at when rounding stops the iteration short of that.
pub(super) struct Stop<'a> {
    pub done: &'a dyn Fn(&Iterate, &Slacks) -> bool,
    pub usable: &'a dyn Fn(&Iterate, &Slacks) -> bool,
}

/// The slack of every row at `at` (`slacks` gives them per kind), in
/// [`Rows`] form, with the pairs' `z` as their slack.
fn row_slacks(at: &Point, s: &Slacks) -> Rows {
    Rows {
        pair: at.z.clone(),
        unit: s.unit.clone(),
        flight: s.flight.clone(),
        floor: s.floor.clone(),
    }
}

/// The mean complementarity product `μ` of an iterate.
pub(super) fn mean_complementarity(l: &Layout, it: &Iterate, s: &Slacks) -> f64 {
    let (sum, count) = it.duals.complementarity(&row_slacks(&it.point, s), l);
    sum / count as f64
}

impl Rows {
    /// `(Σ s_r λ_r, number of rows)` over the rows that exist.
    fn complementarity(&self, slack: &Rows, l: &Layout) -> (f64, usize) {
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let units: f64 = (0..l.shape.rows)
            .filter(|&u| l.unit_used[u])
            .map(|u| self.unit[u] * slack.unit[u])
            .sum();
        let count = self.pair.len()
            + l.unit_used.iter().filter(|u| **u).count()
            + self.flight.len()
            + self.floor.len();
        (
            dot(&self.pair, &slack.pair)
                + units
                + dot(&self.flight, &slack.flight)
                + dot(&self.floor, &slack.floor),
            count,
        )
    }

    fn zip_map(&self, other: &Rows, f: impl Fn(f64, f64) -> f64) -> Rows {
        let map = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| f(*x, *y)).collect();
        Rows {
            pair: map(&self.pair, &other.pair),
            unit: map(&self.unit, &other.unit),
            flight: map(&self.flight, &other.flight),
            floor: map(&self.floor, &other.floor),
        }
    }

    fn all(&self) -> impl Iterator<Item = &f64> {
        self.pair
            .iter()
            .chain(&self.unit)
            .chain(&self.flight)
            .chain(&self.floor)
    }
}

/// A direction: the primal change, the rows' slack changes and the duals'
/// changes.
struct Direction {
    dz: Vec<f64>,
    dt: f64,
    ds: Rows,
    dl: Rows,
}

/// The Newton matrix at an iterate, factored, and what the right-hand
/// sides need.
struct System<'a> {
    l: &'a Layout,
    goal: Goal<'a>,
    slack: Rows,
    /// `d_k = √(z_k / λ_k)`.
    scale: Vec<f64>,
    /// The dual residual `∇f − Σ_r λ_r ∇g_r` in `z`, and in `t`.
    residual: Vec<f64>,
    residual_t: f64,
}

/// The weights and vectors of the Newton matrix, kept alive for the
/// factorisation that borrows them.
struct Terms {
    flight_w: Vec<f64>,
    flight_v: Vec<f64>,
    thr_w: Vec<f64>,
    thr_v: Vec<f64>,
    unit_v: Vec<f64>,
    inverse_weight: Vec<f64>,
    alpha: Vec<f64>,
}

impl System<'_> {
    fn terms(&self, it: &Iterate, s: &Slacks) -> Terms {
        let l = self.l;
        let d = &self.scale;
        let scaled =
            |coef: &[f64]| -> Vec<f64> { coef.iter().zip(d).map(|(c, d)| c * d).collect() };
        let has_floor = self.goal.has_floor_row();
        Terms {
            flight_w: it
                .duals
                .flight
                .iter()
                .zip(&s.flight)
                .map(|(lam, s)| lam / s)
                .collect(),
            flight_v: scaled(&l.flight_coef),
            thr_w: (0..l.apps())
                .map(|i| {
                    let from_log = self.goal.weight(i) / (s.thr[i] * s.thr[i]);
                    let from_floor = if has_floor {
                        it.duals.floor[i] / s.floor[i]
                    } else {
                        0.0
                    };
                    from_log + from_floor
                })
                .collect(),
            thr_v: scaled(&l.thr_coef),
            unit_v: scaled(&l.unit_coef),
            inverse_weight: (0..l.shape.rows)
                .map(|u| {
                    if l.unit_used[u] {
                        s.unit[u] / it.duals.unit[u]
                    } else {
                        1.0
                    }
                })
                .collect(),
            alpha: l.phi.iter().map(|phi| -phi).collect(),
        }
    }

    /// The direction for the complementarity targets `rc`
    /// (`λ_r Δs_r + s_r Δλ_r = rc_r`).
    fn direction(&self, m: &Solver<'_>, it: &Iterate, rc: &Rows) -> Option<Direction> {
        let l = self.l;
        let sl = &self.slack;
        // −r + Σ_r ∇g_r rc_r / s_r, then scaled by d.
        let mut rhs = vec![0.0; l.pairs()];
        for i in 0..l.apps() {
            let floor_term = if sl.floor.is_empty() {
                0.0
            } else {
                rc.floor[i] / sl.floor[i]
            };
            let flight_term = rc.flight[i] / sl.flight[i];
            for k in l.app_of(i) {
                let u = l.shape.row_of[k];
                let g = -self.residual[k] + rc.pair[k] / sl.pair[k]
                    - l.unit_coef[k] * rc.unit[u] / sl.unit[u]
                    - l.flight_coef[k] * flight_term
                    + l.thr_coef[k] * floor_term;
                rhs[k] = g * self.scale[k];
            }
        }
        let (delta, dt) = if let Goal::Floor = self.goal {
            let rhs_t = -self.residual_t
                - (0..l.apps())
                    .map(|i| l.phi[i] * rc.floor[i] / sl.floor[i])
                    .sum::<f64>();
            match m {
                Solver::Bordered(m) => m.solve(&rhs, rhs_t),
                Solver::Plain(_) => return None,
            }
        } else {
            match m {
                Solver::Plain(m) => (m.solve(&rhs), 0.0),
                Solver::Bordered(_) => return None,
            }
        };
        let dz: Vec<f64> = delta.iter().zip(&self.scale).map(|(x, d)| x * d).collect();
        if !(dz.iter().all(|x| x.is_finite()) && dt.is_finite()) {
            return None;
        }
        let mut unit = vec![0.0; l.shape.rows];
        for (k, dz) in dz.iter().enumerate() {
            unit[l.shape.row_of[k]] -= l.unit_coef[k] * dz;
        }
        let flight: Vec<f64> = (0..l.apps())
            .map(|i| -l.app_of(i).map(|k| l.flight_coef[k] * dz[k]).sum::<f64>())
            .collect();
        let floor: Vec<f64> = if sl.floor.is_empty() {
            Vec::new()
        } else {
            let thr = l.throughput(&dz);
            let dt_phi = if let Goal::Floor = self.goal { dt } else { 0.0 };
            thr.iter()
                .zip(&l.phi)
                .map(|(y, phi)| y - dt_phi * phi)
                .collect()
        };
        let ds = Rows {
            pair: dz.clone(),
            unit,
            flight,
            floor,
        };
        // Δλ_r = (rc_r − λ_r Δs_r) / s_r.
        let dl = Rows {
            pair: (0..rc.pair.len())
                .map(|k| (rc.pair[k] - it.duals.pair[k] * ds.pair[k]) / sl.pair[k])
                .collect(),
            unit: (0..rc.unit.len())
                .map(|u| {
                    if l.unit_used[u] {
                        (rc.unit[u] - it.duals.unit[u] * ds.unit[u]) / sl.unit[u]
                    } else {
                        0.0
                    }
                })
                .collect(),
            flight: (0..rc.flight.len())
                .map(|i| (rc.flight[i] - it.duals.flight[i] * ds.flight[i]) / sl.flight[i])
                .collect(),
            floor: (0..rc.floor.len())
                .map(|i| (rc.floor[i] - it.duals.floor[i] * ds.floor[i]) / sl.floor[i])
                .collect(),
        };
        Some(Direction { dz, dt, ds, dl })
    }
}

/// The largest step along `d` that keeps `v + α d` positive (∞ if none
/// limits it).
fn to_boundary(v: &Rows, d: &Rows, l: &Layout) -> f64 {
    let mut most = f64::INFINITY;
    let mut limit = |v: f64, d: f64| {
        if d < 0.0 {
            most = most.min(-v / d);
        }
    };
    for (a, b) in v.pair.iter().zip(&d.pair) {
        limit(*a, *b);
    }
    for u in (0..l.shape.rows).filter(|&u| l.unit_used[u]) {
        limit(v.unit[u], d.unit[u]);
    }
    for (a, b) in v.flight.iter().zip(&d.flight) {
        limit(*a, *b);
    }
    for (a, b) in v.floor.iter().zip(&d.floor) {
        limit(*a, *b);
    }
    most
}

/// The largest step along `dz` that keeps every `y_i` positive (the
/// logarithm's domain; the floor rows, where present, keep it so too).
fn to_zero_throughput(l: &Layout, s: &Slacks, dz: &[f64]) -> f64 {
    l.throughput(dz)
        .iter()
        .zip(&s.thr)
        .filter(|(rate, _)| **rate < 0.0)
        .map(|(rate, y)| -y / rate)
        .fold(f64::INFINITY, f64::min)
}

/// Duals `λ_r = μ / s_r` at `point`: a start on the central path of `μ`
/// as far as complementarity goes.
pub(super) fn central_duals(l: &Layout, goal: Goal<'_>, point: &Point, mu: f64) -> Option<Iterate> {
    let s = slacks(l, goal, point)?;
    let sl = row_slacks(point, &s);
    let duals = Rows {
        pair: sl.pair.iter().map(|s| mu / s).collect(),
        unit: (0..l.shape.rows)
            .map(|u| if l.unit_used[u] { mu / sl.unit[u] } else { 0.0 })
            .collect(),
        flight: sl.flight.iter().map(|s| mu / s).collect(),
        floor: sl.floor.iter().map(|s| mu / s).collect(),
    };
    Some(Iterate {
        point: point.clone(),
        duals,
    })
}

/// Why a program stopped without its certificate.
pub(super) fn failed(why: &str) -> super::FairError {
    super::FairError::SolverFailed(format!("barrier: {why}"))
}

/// Mehrotra's predictor–corrector from `start` until `stop` is satisfied;
/// returns every iterate (the last is the answer) and counts the steps in
/// `steps`. If the iteration fails after an iterate `stop` finds usable,
/// the iterates up to that one are the answer.
pub(super) fn solve(
    l: &Layout,
    goal: Goal<'_>,
    start: Iterate,
    stop: &Stop<'_>,
    steps: &mut u32,
) -> Result<Vec<Iterate>, super::FairError> {
    let mut path = Vec::new();
    match iterate(l, goal, start, stop, steps, &mut path) {
        Ok(()) => Ok(path),
        Err(e) => {
            let usable = path
                .iter()
                .rposition(|it| slacks(l, goal, &it.point).is_some_and(|s| (stop.usable)(it, &s)));
            match usable {
                Some(last) => {
                    path.truncate(last + 1);
                    Ok(path)
                }
                None => Err(e),
            }
        }
    }
}

/// [`solve`]'s loop: pushes every iterate to `path`, the last that
/// `stop` accepts included.
fn iterate(
    l: &Layout,
    goal: Goal<'_>,
    start: Iterate,
    stop: &Stop<'_>,
    steps: &mut u32,
    path: &mut Vec<Iterate>,
) -> Result<(), super::FairError> {
    let mut it = start;
    for _ in 0..MAX_STEPS {
        let s = slacks(l, goal, &it.point).ok_or_else(|| failed("left the interior"))?;
        let done = (stop.done)(&it, &s);
        path.push(it.clone());
        if done {
            return Ok(());
        }
        *steps += 1;
        it = step(l, goal, &it, &s)?;
    }
    Err(failed("too many steps"))
}

/// One predictor–corrector step from `it` (with its slacks `s`).
fn step(l: &Layout, goal: Goal<'_>, it: &Iterate, s: &Slacks) -> Result<Iterate, super::FairError> {
    let sl = row_slacks(&it.point, s);
    let (gap, rows) = it.duals.complementarity(&sl, l);
    let mu = gap / rows as f64;
    let (residual, residual_t) = dual_residual(l, goal, it, s);
    let scale: Vec<f64> = it
        .point
        .z
        .iter()
        .zip(&it.duals.pair)
        .map(|(z, lam)| (z / lam).sqrt())
        .collect();
    let system = System {
        l,
        goal,
        slack: sl,
        scale,
        residual,
        residual_t,
    };
    let terms = system.terms(it, s);
    let rank_one = [
        RankOne {
            weight: &terms.flight_w,
            vector: &terms.flight_v,
        },
        RankOne {
            weight: &terms.thr_w,
            vector: &terms.thr_v,
        },
    ];
    let coupling = Coupling {
        vector: &terms.unit_v,
        inverse_weight: &terms.inverse_weight,
    };
    let m =
        factor(&l.shape, &rank_one, &coupling).ok_or_else(|| failed("singular Newton system"))?;
    let solver = match goal {
        Goal::Floor => Solver::Bordered(
            m.bordered(&Border {
                alpha: &terms.alpha,
            })
            .ok_or_else(|| failed("singular Newton system"))?,
        ),
        Goal::Fair { .. } => Solver::Plain(&m),
    };
    // Predictor: the pure Newton step towards complementarity zero.
    let affine_rc = it.duals.zip_map(&system.slack, |lam, s| -lam * s);
    let affine = system
        .direction(&solver, it, &affine_rc)
        .ok_or_else(|| failed("singular Newton system"))?;
    let primal = to_boundary(&system.slack, &affine.ds, l)
        .min(to_zero_throughput(l, s, &affine.dz))
        .min(1.0);
    let dual = to_boundary(&it.duals, &affine.dl, l).min(1.0);
    let moved_slack = system.slack.zip_map(&affine.ds, |s, d| s + primal * d);
    let moved_duals = it.duals.zip_map(&affine.dl, |lam, d| lam + dual * d);
    let (gap_affine, _) = moved_duals.complementarity(&moved_slack, l);
    let sigma = (gap_affine / gap).clamp(0.0, 1.0).powi(3);
    // Corrector: towards σμ, less the affine step's second-order term.
    let cross = affine.ds.zip_map(&affine.dl, |a, b| a * b);
    let rc = affine_rc.zip_map(&cross, |base, c| base + sigma * mu - c);
    let dir = system
        .direction(&solver, it, &rc)
        .ok_or_else(|| failed("singular Newton system"))?;
    advance(l, goal, it, s, &system, &dir, mu)
}

/// The step along `dir` from `it`: as long as the boundary, the central
/// neighbourhood and the dual residual allow.
fn advance(
    l: &Layout,
    goal: Goal<'_>,
    it: &Iterate,
    s: &Slacks,
    system: &System<'_>,
    dir: &Direction,
    mu: f64,
) -> Result<Iterate, super::FairError> {
    let reach = to_boundary(&system.slack, &dir.ds, l)
        .min(to_zero_throughput(l, s, &dir.dz))
        .min(to_boundary(&it.duals, &dir.dl, l));
    let mut alpha = (TO_BOUNDARY * reach).min(1.0);
    // Stay in a wide neighbourhood of the central path: no row's
    // product below [`CENTRALITY`] of the mean. Far from it the
    // Newton matrix's weights spread over more orders of magnitude
    // than double precision holds near the optimum.
    while alpha > MIN_STEP && !central(&system.slack, &it.duals, dir, alpha, l) {
        alpha *= 0.8;
    }
    let before = largest(&system.residual).max(system.residual_t.abs());
    // The objective is not linear: a step the linearisation got wrong
    // (rounding, near the optimum) raises the dual residual instead of
    // lowering it, and is shortened until it does not.
    loop {
        if alpha < MIN_STEP {
            return Err(failed("the step stalled"));
        }
        let point = Point {
            z: it
                .point
                .z
                .iter()
                .zip(&dir.dz)
                .map(|(z, d)| z + alpha * d)
                .collect(),
            t: it.point.t + alpha * dir.dt,
        };
        let duals = it.duals.zip_map(&dir.dl, |lam, d| lam + alpha * d);
        if let Some(ns) = slacks(l, goal, &point)
            && duals.all().all(|x| *x >= 0.0)
        {
            let candidate = Iterate { point, duals };
            let (r, r_t) = dual_residual(l, goal, &candidate, &ns);
            let after = largest(&r).max(r_t.abs());
            if after <= before.max(RESIDUAL_FLOOR * mu) * RESIDUAL_GROWTH {
                return Ok(candidate);
            }
        }
        alpha *= 0.5;
    }
}

/// `∇f − Σ_r λ_r ∇g_r`: in `z` per pair, and in `t`.
fn dual_residual(l: &Layout, goal: Goal<'_>, it: &Iterate, s: &Slacks) -> (Vec<f64>, f64) {
    let d = &it.duals;
    let mut r = vec![0.0; l.pairs()];
    for i in 0..l.apps() {
        let w = goal.weight(i);
        let nu = if d.floor.is_empty() { 0.0 } else { d.floor[i] };
        for k in l.app_of(i) {
            let u = l.shape.row_of[k];
            r[k] = -w * l.thr_coef[k] / s.thr[i] - d.pair[k]
                + l.unit_coef[k] * d.unit[u]
                + l.flight_coef[k] * d.flight[i]
                - l.thr_coef[k] * nu;
        }
    }
    let r_t = match goal {
        Goal::Floor => -1.0 + l.phi.iter().zip(&d.floor).map(|(p, n)| p * n).sum::<f64>(),
        Goal::Fair { .. } => 0.0,
    };
    (r, r_t)
}

/// Whether every row's `s_r λ_r` after a step `alpha` along `dir` is at
/// least [`CENTRALITY`] times their mean.
fn central(slack: &Rows, duals: &Rows, dir: &Direction, alpha: f64, l: &Layout) -> bool {
    let s = slack.zip_map(&dir.ds, |s, d| s + alpha * d);
    let lam = duals.zip_map(&dir.dl, |x, d| x + alpha * d);
    let products = s.zip_map(&lam, |a, b| a * b);
    let (sum, count) = lam.complementarity(&s, l);
    let floor = CENTRALITY * sum / count as f64;
    let used = |u: usize| l.unit_used[u];
    products.pair.iter().all(|p| *p >= floor)
        && (0..l.shape.rows)
            .filter(|&u| used(u))
            .all(|u| products.unit[u] >= floor)
        && products.flight.iter().all(|p| *p >= floor)
        && products.floor.iter().all(|p| *p >= floor)
}

/// The largest magnitude in `v`.
fn largest(v: &[f64]) -> f64 {
    v.iter().map(|x| x.abs()).fold(0.0, f64::max)
}
