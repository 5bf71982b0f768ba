//! The floor-constrained proportional-fair bound (issue 10): known cases,
//! and random problems against the unconstrained bound and the max-min floor.

use hetsched_core::fairness::{
    FairError, FairProblem, max_common_floor, solve_no_loser, solve_proportional_fair,
    solve_proportional_fair_with_floor,
};
use proptest::prelude::*;

/// App 0 runs only on unit 0; app 1 (two tasks in flight) is ten times
/// faster there than on unit 1. PF gives app 0 0.55 of unit 0, below the
/// 0.8 it had natively.
fn lopsided() -> FairProblem {
    FairProblem::without_overheads(
        vec![vec![1.0, 0.0], vec![10.0, 1.0]],
        vec![1.0, 1.0],
        vec![1.0, 2.0],
        // App 0 natively got 0.8 of the unit; app 1 natively 1 task/s.
        vec![0.8, 1.0],
    )
}

#[test]
fn floor_lifts_the_loser_to_native() {
    let p = lopsided();
    let free = solve_proportional_fair(&p).unwrap();
    assert!((free.allocation[0][0] - 0.55).abs() < 1e-4, "{free:?}");
    let s = solve_no_loser(&p).unwrap();
    assert!(s.floor_feasible);
    assert_eq!(s.floor, 1.0);
    assert!(s.solution.min_relative >= 1.0 - 1e-6, "{s:?}");
    assert!(s.solution.objective <= free.objective + 1e-6);
    // App 0 gets exactly what it needs (0.8 of unit 0), app 1 the rest.
    assert!((s.solution.allocation[0][0] - 0.8).abs() < 1e-4, "{s:?}");
}

#[test]
fn infeasible_floor_falls_back_to_the_largest_common_floor() {
    // Both apps natively had a whole unit each; now they share one.
    let p = FairProblem::without_overheads(
        vec![vec![1.0], vec![1.0]],
        vec![1.0],
        vec![1.0, 1.0],
        vec![1.0, 1.0],
    );
    let t = max_common_floor(&p).unwrap();
    assert!((t - 0.5).abs() < 1e-6, "{t}");
    let s = solve_no_loser(&p).unwrap();
    assert!(!s.floor_feasible);
    assert!((s.floor - 0.5).abs() < 1e-6);
    assert!(s.solution.min_relative >= 0.5 * (1.0 - 1e-4), "{s:?}");
    assert!(matches!(
        solve_proportional_fair_with_floor(&p, -1.0),
        Err(FairError::BadFloor { .. })
    ));
}

fn problem() -> impl Strategy<Value = FairProblem> {
    (2usize..=6, 1usize..=4).prop_flat_map(|(n, m)| {
        (
            prop::collection::vec(prop::collection::vec(0.1f64..100.0, m), n),
            prop::collection::vec(1.0f64..3.0, m),
            prop::collection::vec(1.0f64..3.0, n),
            prop::collection::vec(0.05f64..50.0, n),
        )
            .prop_map(|(rate, cap, in_flight, native)| {
                FairProblem::without_overheads(rate, cap, in_flight, native)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn no_loser_is_floored_feasible_and_below_pf(p in problem()) {
        let free = solve_proportional_fair(&p).unwrap();
        let s = solve_no_loser(&p).unwrap();
        let (_, rel_violation) = p.violation_of(&s.solution.allocation).unwrap();
        prop_assert!(rel_violation <= 1e-6, "violation {rel_violation}");
        prop_assert_eq!(s.floor_feasible, s.max_floor >= 1.0);
        prop_assert!(s.floor <= 1.0 && s.floor <= s.max_floor);
        // The floor holds (up to the slack the solver is given).
        prop_assert!(s.solution.min_relative >= s.floor * (1.0 - 1e-2) - 1e-9,
            "min {} floor {}", s.solution.min_relative, s.floor);
        // A constrained optimum cannot beat the unconstrained one.
        prop_assert!(s.solution.objective <= free.objective + 1e-6 * p.apps() as f64);
        // Where the unconstrained optimum already meets the floor, so does
        // the constrained one, at (nearly) the same value.
        if free.min_relative >= 1.0 {
            prop_assert!((s.solution.objective - free.objective).abs() <= 1e-4 * p.apps() as f64);
        }
    }
}
