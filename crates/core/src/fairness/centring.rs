//! The centring of the plain log-barrier method: minimise
//! `τ f₀ − Σ ln(slack)` by damped Newton steps for a growing `τ`, until
//! the caller accepts a centred point (its prices certify the gap). Every
//! iterate is strictly feasible, and `1 / (τ · slack)` are the rows'
//! prices.
//!
//! [`super::barrier`] finishes the proportional-fair program with it: the
//! primal-dual iteration ([`super::mehrotra`]) gets there in fewer steps,
//! but its Newton systems lose their precision first near the optimum
//! (its iterates are less central), and its dual residual, which its
//! certificate pays for, then stops falling. The centred points of this
//! method give prices that certify the gap without a dual residual.

use super::FairError;
use super::newton::{Border, Coupling, RankOne, factor};
use super::scaled::{Goal, Layout, Point, Slacks, slacks};

/// Factor by which `τ` grows between centrings at first.
const TAU_GROWTH: f64 = 10.0;
/// The least growth of `τ` tried after a centring failed.
const MIN_GROWTH: f64 = 3.0;
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
/// growing `τ` from `first_tau` until `enough` accepts a centred point
/// (given its slacks and `τ`). Returns that point and its `τ`. Where a
/// centring fails (rounding, near the optimum), it retries from the last
/// centred point with the square root of the growth, down to
/// [`MIN_GROWTH`]; then the last centred point is the answer, for the
/// caller's certificate to judge.
pub(super) fn run(
    l: &Layout,
    goal: Goal<'_>,
    start: Point,
    first_tau: f64,
    enough: &dyn Fn(&Point, &Slacks, f64) -> bool,
    steps: &mut u32,
) -> Result<(Point, f64), FairError> {
    let mut at = start;
    let mut tau = first_tau;
    let mut growth = TAU_GROWTH;
    let mut last: Option<(Point, f64)> = None;
    loop {
        let r = centre(l, goal, tau, &mut at, steps);
        match r {
            Ok(()) => {
                let s = slacks(l, goal, &at)
                    .ok_or_else(|| FairError::SolverFailed("barrier: left the interior".into()))?;
                if enough(&at, &s, tau) {
                    return Ok((at, tau));
                }
                last = Some((at.clone(), tau));
                tau *= growth;
            }
            Err(e) => {
                let Some((point, centred_tau)) = &last else {
                    return Err(e);
                };
                if growth <= MIN_GROWTH {
                    return Ok((point.clone(), *centred_tau));
                }
                growth = growth.sqrt();
                at = point.clone();
                tau = centred_tau * growth;
            }
        }
    }
}
