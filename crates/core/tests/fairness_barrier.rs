//! The barrier solver of the no-loser proportional-fair problem against
//! Clarabel (the reference) on random problems: where it answers (it
//! declines, and `solve_no_loser_weighted` falls back to Clarabel, when its
//! prices cannot certify the answer), the answer is feasible, on the floor,
//! and within a stated tolerance of Clarabel's objective; and it answers
//! the coordinator's problems of the criterion benchmark's mixes.

use hetsched_core::coordination::{native_estimate, problem};
use hetsched_core::fairness::{
    FairProblem, NoLoserSolution, solve_no_loser_barrier, solve_no_loser_conic,
};
use proptest::prelude::*;

#[path = "../benches/common/mix.rs"]
mod bench_mix;
#[path = "common/fair_case.rs"]
mod fair_case;
use fair_case::case;

/// `|barrier − Clarabel| ≤ OBJECTIVE_TOLERANCE · max(1, |Clarabel|)` for
/// the weighted objective `Σ w_i ln r_i`.
const OBJECTIVE_TOLERANCE: f64 = 1e-4;

fn weighted_objective(s: &NoLoserSolution, weights: &[f64]) -> f64 {
    s.solution
        .relative
        .iter()
        .zip(weights)
        .map(|(r, w)| w * r.ln())
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn barrier_matches_clarabel(c in case()) {
        let p = &c.problem;
        // Clarabel stops on a few random instances (InsufficientProgress):
        // those have no reference to hold the barrier to.
        let Ok(reference) = solve_no_loser_conic(p, c.goal, &[], &c.weights) else {
            return Ok(());
        };
        // Declining is allowed: the caller then solves with Clarabel.
        let Ok(fast) = solve_no_loser_barrier(p, c.goal, &c.weights) else {
            return Ok(());
        };
        let (_, violation) = p.violation_of(&fast.solution.allocation).unwrap();
        prop_assert!(violation <= 1e-9, "violation {violation}");
        // The same largest common floor (the barrier's floor program stops
        // at a 1e-5 relative gap), hence nearly the same floor held.
        prop_assert!(
            (fast.max_floor - reference.max_floor).abs() <= 1e-4 * reference.max_floor,
            "max floor {} vs {}", fast.max_floor, reference.max_floor
        );
        prop_assert!((fast.floor - reference.floor).abs() <= 1e-4 * reference.floor.max(1e-9));
        if (reference.max_floor - c.goal).abs() > 1e-4 * c.goal {
            prop_assert_eq!(fast.floor_feasible, reference.floor_feasible);
        }
        // Every app on the floor (held a hair under t* when t* binds).
        prop_assert!(
            fast.solution.min_relative >= fast.floor * (1.0 - 2e-6),
            "min {} floor {}", fast.solution.min_relative, fast.floor
        );
        let (a, b) = (weighted_objective(&fast, &c.weights), weighted_objective(&reference, &c.weights));
        let tolerance = OBJECTIVE_TOLERANCE * b.abs().max(1.0);
        // Where the largest common floor binds, the objective moves steeply
        // with the floor held, and the two floors may differ by the floor
        // program's gap (a case: floors 1.8e-6 apart, objectives 2e-4):
        // the one held to the lower floor may then come out above by more
        // than the tolerance, never below. The floor held is the least
        // relative speed: Clarabel, where it cannot solve a hair under t*,
        // holds the floor up to 1 % under it (a case: 1e-3 under, and an
        // objective 0.066 above the barrier's, which held t*).
        let floor_binds = reference.floor < c.goal * (1.0 - 1e-4);
        let (held_fast, held_reference) =
            (fast.solution.min_relative, reference.solution.min_relative);
        if !floor_binds || held_fast <= held_reference {
            prop_assert!(a >= b - tolerance, "barrier {a} below Clarabel {b}");
        }
        if !floor_binds || held_fast >= held_reference {
            prop_assert!(a <= b + tolerance, "barrier {a} above Clarabel {b}");
        }
    }
}

/// Two apps share one unit and each has one of its own; no floor. Each
/// gets its own unit whole, and app 0 (weight 3) all of the shared one.
#[test]
fn weighted_split_of_a_shared_unit() {
    let p = FairProblem::without_overheads(
        vec![vec![1.0, 1.0, 0.0], vec![1.0, 0.0, 1.0]],
        vec![1.0, 1.0, 1.0],
        vec![10.0, 10.0],
        vec![1.0, 1.0],
    );
    let s = solve_no_loser_barrier(&p, 0.0, &[3.0, 1.0]).unwrap();
    let x = &s.solution.allocation;
    // max 3 ln(1 + a) + ln(2 − a) over a ≤ 1: the derivative at a = 1 is
    // 3/2 − 1 > 0, so app 0 takes all of the shared unit.
    assert!((x[0][0] - 1.0).abs() < 1e-4, "{x:?}");
    assert!(
        (x[0][1] - 1.0).abs() < 1e-6 && (x[1][2] - 1.0).abs() < 1e-6,
        "{x:?}"
    );
}

/// The criterion benchmark's mixes as fair problems
/// ([`bench_mix::mix`]).
fn mix(apps: usize, units: usize, seed: u64) -> FairProblem {
    let (supply, demand) = bench_mix::mix(apps, units, seed);
    let native = native_estimate(&demand, &supply);
    problem(&demand, &supply, &native)
}

#[test]
fn barrier_answers_the_benchmark_mixes() {
    for (apps, units) in [(8, 5), (32, 5), (64, 9), (128, 9), (256, 16)] {
        let p = mix(apps, units, 1);
        let weights = vec![1.0; apps];
        let fast = solve_no_loser_barrier(&p, 1.05, &weights)
            .unwrap_or_else(|e| panic!("{apps}x{units}: {e}"));
        let reference = solve_no_loser_conic(&p, 1.05, &[], &weights).unwrap();
        let (a, b) = (fast.solution.objective, reference.solution.objective);
        assert!(
            (a - b).abs() <= OBJECTIVE_TOLERANCE * b.abs().max(1.0),
            "{apps}x{units}: barrier {a} vs Clarabel {b}"
        );
        assert_eq!(
            fast.floor_feasible, reference.floor_feasible,
            "{apps}x{units}"
        );
        // The primal-dual floor program and hand-over: the plain barrier
        // method took about 125 Newton steps at 128 x 9.
        assert!(
            apps > 128 || fast.solution.iterations <= MIXES_MOST_STEPS,
            "{apps}x{units}: {} steps",
            fast.solution.iterations
        );
    }
}

/// The most interior-point steps (both programs together) a benchmark mix
/// of up to 128 apps may take: about 50 at 128 x 9 today (73 at 256 x 16).
const MIXES_MOST_STEPS: u32 = 70;

/// A program saved from a replay-judged pick on the benchmark's 128 × 9
/// mix, with why the barrier method once declined it.
#[derive(serde::Deserialize)]
struct Saved {
    why: String,
    goal: f64,
    weights: Vec<f64>,
    problem: FairProblem,
}

/// Programs the barrier method used to decline, each then solved by
/// Clarabel in 12–26 ms: it now answers them, on the floor and within the
/// tolerance of Clarabel's objective.
#[test]
fn barrier_answers_the_programs_it_declined_in_a_pick_at_128x9() {
    for (name, text) in [
        ("round", include_str!("fixtures/barrier-128x9-round.json")),
        (
            "candidate",
            include_str!("fixtures/barrier-128x9-candidate.json"),
        ),
    ] {
        let saved: Saved = serde_json::from_str(text).expect("a saved program");
        let (p, goal, weights) = (&saved.problem, saved.goal, &saved.weights);
        let fast = solve_no_loser_barrier(p, goal, weights)
            .unwrap_or_else(|e| panic!("{name} ({}): {e}", saved.why));
        let reference = solve_no_loser_conic(p, goal, &[], weights).unwrap();
        let (a, b) = (
            weighted_objective(&fast, weights),
            weighted_objective(&reference, weights),
        );
        assert!(
            (a - b).abs() <= OBJECTIVE_TOLERANCE * b.abs().max(1.0),
            "{name}: barrier {a} vs Clarabel {b}"
        );
        let lowest = fast
            .solution
            .relative
            .iter()
            .fold(f64::INFINITY, |m, r| m.min(*r));
        assert!(lowest >= goal * (1.0 - 1e-5), "{name}: lowest r {lowest}");
    }
}
