//! Warm starts of the barrier solver (`solve_goal_from`): from the answer
//! to a program whose rates have since drifted, and the allocation that
//! cleared its floor. Where a warm start answers, the answer is feasible,
//! holds every app at the goal and is within the certified tolerance of
//! Clarabel's answer to the drifted program; on the criterion benchmark's
//! mixes it answers, in fewer steps than a cold solve; bad starts are
//! refused with an error, not answered.

use hetsched_core::coordination::{
    AppDemand, Coordinator, CoordinatorConfig, WarmOutcome, native_estimate, pick_targets_waiting,
    problem, solve_targets_warm,
};
use hetsched_core::fairness::{
    FairError, FairProblem, FairSolution, WarmFrom, solve_goal_from, solve_no_loser_barrier,
    solve_no_loser_conic, solve_no_loser_weighted,
};
use hetsched_core::ids::ClientId;
use proptest::prelude::*;

#[path = "../benches/common/mix.rs"]
mod bench_mix;
#[path = "common/fair_case.rs"]
mod fair_case;
use fair_case::case;

/// A warm answer is certified to 1e-5 per unit of weight; Clarabel's to
/// its own tolerance. `|warm − Clarabel| ≤ this · max(1, |Clarabel|)`
/// for the weighted objective (as `fairness_barrier.rs` allows the cold
/// barrier).
const OBJECTIVE_TOLERANCE: f64 = 1e-4;

/// `p` with every app's rates scaled by its own factor.
fn drifted(p: &FairProblem, factors: &[f64]) -> FairProblem {
    let mut q = p.clone();
    for (row, f) in q.rate.iter_mut().zip(factors) {
        row.iter_mut().for_each(|r| *r *= f);
    }
    q
}

fn weighted_objective(s: &FairSolution, weights: &[f64]) -> f64 {
    s.relative
        .iter()
        .zip(weights)
        .map(|(r, w)| w * r.ln())
        .sum()
}

/// Whether `x` is within every row of `p` (to rounding).
fn feasible(p: &FairProblem, x: &[Vec<f64>]) -> bool {
    let units_ok = (0..p.units()).all(|u| {
        let load: f64 = x.iter().map(|row| row[u]).sum();
        load <= p.capacity[u] * (1.0 + 1e-9) + 1e-12
    });
    let apps_ok = x.iter().enumerate().all(|(i, row)| {
        let busy: f64 = row
            .iter()
            .zip(&p.occupancy[i])
            .map(|(x, occ)| x * occ)
            .sum();
        busy <= p.in_flight[i] * (1.0 + 1e-9) + 1e-12
            && row
                .iter()
                .zip(&p.rate[i])
                .all(|(x, r)| *x >= 0.0 && (*r > 0.0 || *x == 0.0))
    });
    units_ok && apps_ok
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Wherever the warm start answers, its answer is feasible, on the
    /// goal, and as good as Clarabel's answer to the drifted program.
    #[test]
    fn a_warm_answer_is_feasible_on_the_goal_and_optimal(
        c in case(),
        drift in prop::collection::vec(0.9f64..1.1, 24),
    ) {
        let (p, weights, goal) = (&c.problem, &c.weights, c.goal);
        let Ok(before) = solve_no_loser_weighted(p, goal, &[], weights) else {
            return Ok(());
        };
        prop_assume!(before.floor_feasible);
        let q = drifted(p, &drift[..p.apps()]);
        let from = WarmFrom {
            solved: &before.solution.allocation,
            clearing: &before.clearing,
        };
        let Ok(warm) = solve_goal_from(&q, goal, weights, from) else {
            return Ok(());
        };
        prop_assert!(feasible(&q, &warm.allocation), "{:?}", warm.allocation);
        for (i, r) in warm.relative.iter().enumerate() {
            prop_assert!(*r >= goal * (1.0 - 1e-9), "app {} at {} below the goal", i, r);
        }
        let reference = solve_no_loser_conic(&q, goal, &[], weights).unwrap();
        prop_assert!(reference.floor_feasible, "Clarabel finds the goal infeasible");
        let (a, b) = (
            weighted_objective(&warm, weights),
            weighted_objective(&reference.solution, weights),
        );
        prop_assert!(
            (a - b).abs() <= OBJECTIVE_TOLERANCE * b.abs().max(1.0),
            "warm {} vs Clarabel {}", a, b
        );
    }
}

/// The criterion benchmark's mixes as fair problems.
fn mix(apps: usize, units: usize, seed: u64) -> FairProblem {
    let (supply, demand) = bench_mix::mix(apps, units, seed);
    let native = native_estimate(&demand, &supply);
    problem(&demand, &supply, &native)
}

/// Per app, a factor between `1 − drift` and `1 + drift`.
fn drift_factors(apps: usize, drift: f64) -> Vec<f64> {
    (0..apps)
        .map(|i| 1.0 - drift + drift * (i % 5) as f64 / 2.0)
        .collect()
}

#[test]
fn warm_starts_answer_the_benchmark_mixes_in_fewer_steps() {
    for (apps, seed, drift) in [(64, 1, 0.05), (128, 1, 0.05), (128, 2, 0.1), (128, 3, 0.1)] {
        let p = mix(apps, 9, seed);
        let weights = vec![1.0; apps];
        let before = solve_no_loser_barrier(&p, 1.05, &weights).unwrap();
        let q = drifted(&p, &drift_factors(apps, drift));
        let from = WarmFrom {
            solved: &before.solution.allocation,
            clearing: &before.clearing,
        };
        let warm = solve_goal_from(&q, 1.05, &weights, from)
            .unwrap_or_else(|e| panic!("{apps} apps, seed {seed}: {e}"));
        let reference = solve_no_loser_conic(&q, 1.05, &[], &weights).unwrap();
        let (a, b) = (warm.objective, reference.solution.objective);
        assert!(
            (a - b).abs() <= OBJECTIVE_TOLERANCE * b.abs().max(1.0),
            "{apps} apps, seed {seed}: warm {a} vs Clarabel {b}"
        );
        assert!(feasible(&q, &warm.allocation));
        // The floor program is skipped: the cold solve of the same
        // program takes more steps.
        let cold = solve_no_loser_barrier(&q, 1.05, &weights);
        if let Ok(cold) = cold {
            assert!(
                warm.iterations < cold.solution.iterations,
                "{apps} apps, seed {seed}: warm {} steps, cold {}",
                warm.iterations,
                cold.solution.iterations
            );
        }
    }
}

#[test]
fn a_start_that_does_not_clear_the_goal_is_refused() {
    let p = mix(64, 9, 1);
    let weights = vec![1.0; 64];
    let zeros = vec![vec![0.0; 9]; 64];
    let from = WarmFrom {
        solved: &zeros,
        clearing: &zeros,
    };
    match solve_goal_from(&p, 1.05, &weights, from) {
        Err(FairError::SolverFailed(why)) => assert!(why.contains("clear"), "{why}"),
        other => panic!("{other:?}"),
    }
    // A goal beyond what the clearing allocation reaches is refused too.
    let before = solve_no_loser_barrier(&p, 1.05, &weights).unwrap();
    let from = WarmFrom {
        solved: &before.solution.allocation,
        clearing: &before.clearing,
    };
    let beyond = before.max_floor * 2.0;
    assert!(matches!(
        solve_goal_from(&p, beyond, &weights, from),
        Err(FairError::SolverFailed(_))
    ));
}

#[test]
fn a_start_of_another_shape_or_bad_input_is_an_error() {
    let p = mix(64, 9, 1);
    let weights = vec![1.0; 64];
    let short = vec![vec![0.1; 9]; 63];
    let narrow = vec![vec![0.1; 8]; 64];
    let fine = vec![vec![0.1; 9]; 64];
    for (solved, clearing) in [(&short, &fine), (&fine, &short), (&fine, &narrow)] {
        let from = WarmFrom { solved, clearing };
        assert!(
            matches!(
                solve_goal_from(&p, 1.05, &weights, from),
                Err(FairError::Shape { .. })
            ),
            "{} x {}",
            clearing.len(),
            clearing[0].len()
        );
    }
    let from = WarmFrom {
        solved: &fine,
        clearing: &fine,
    };
    assert!(matches!(
        solve_goal_from(&p, f64::NAN, &weights, from),
        Err(FairError::BadFloor { .. })
    ));
    assert!(matches!(
        solve_goal_from(&p, 1.05, &[0.0; 64], from),
        Err(FairError::BadWeight { .. })
    ));
    // Not finite entries count as nothing: the start is still judged.
    let nan = vec![vec![f64::NAN; 9]; 64];
    let from = WarmFrom {
        solved: &nan,
        clearing: &nan,
    };
    assert!(solve_goal_from(&p, 1.05, &weights, from).is_err());
}

/// The coordinator's warm re-solve at the barrier's sizes: in the full
/// pick's own shape with the models unchanged it gives the pick's targets
/// again (to the warm certificate's tolerance), and with models drifted
/// it still holds every app at the goal.
#[test]
fn the_coordinators_warm_re_solve_at_the_barriers_sizes() {
    let (supply, demand) = bench_mix::mix(64, 9, 1);
    let (full, shape) = pick_targets_waiting(&demand, &supply, 1.05, 3, true).unwrap();
    assert!(full.floor_feasible);
    let again = match solve_targets_warm(&demand, &supply, 1.05, &shape).unwrap() {
        WarmOutcome::Solved(solved) => solved.0,
        WarmOutcome::Stale => panic!("the pick's own shape is stale"),
    };
    for (a, b) in again.rate.iter().zip(&full.rate) {
        assert!((a - b).abs() <= 1e-3 * b, "rate {a} against the pick's {b}");
    }
    let factors = drift_factors(64, 0.05);
    let drifted: Vec<AppDemand> = demand
        .iter()
        .zip(&factors)
        .map(|(a, f)| AppDemand {
            exec_ns: a.exec_ns.iter().map(|e| e.map(|e| e / f)).collect(),
            ..a.clone()
        })
        .collect();
    match solve_targets_warm(&drifted, &supply, 1.05, &shape).unwrap() {
        WarmOutcome::Solved(solved) => {
            let targets = &solved.0;
            assert!(targets.floor_feasible && targets.floor == 1.05);
            let least = targets
                .predicted_relative
                .iter()
                .fold(f64::INFINITY, |a, b| a.min(*b));
            assert!(least >= 1.05 * (1.0 - 1e-6), "{least}");
        }
        WarmOutcome::Stale => panic!("a 5 % drift made the shape stale"),
    }
}

/// The coordinator at 64 apps (the barrier's sizes) through a drift, a
/// newcomer, the full pick it puts off, and a leaver: every re-solve
/// publishes targets for every app (fractions summing to one over units
/// it can use, a positive rate) with the floor held, and the warm ones
/// are counted.
#[test]
fn the_coordinator_re_solves_warm_at_scale() {
    let (supply, demand) = bench_mix::mix(65, 9, 2);
    let (newcomer, demand) = demand.split_last().unwrap();
    let config = CoordinatorConfig {
        replay: false,
        full_resolve_period_ns: 1_000_000_000,
        ..CoordinatorConfig::default()
    };
    let mut c = Coordinator::new(config, supply.clone());
    for (k, a) in demand.iter().enumerate() {
        c.set_app(ClientId(k as u32), a.clone());
    }
    let check = |c: &Coordinator, apps: &[(ClientId, &AppDemand)]| {
        let (floor, feasible) = c.floor().unwrap();
        assert!(feasible && floor >= 1.05 * (1.0 - 1e-9), "floor {floor}");
        for (id, a) in apps {
            let f = c
                .target(*id)
                .unwrap_or_else(|| panic!("{id:?} has no targets"));
            assert!((f.iter().sum::<f64>() - 1.0).abs() < 1e-6, "{id:?}: {f:?}");
            for (u, x) in f.iter().enumerate() {
                assert!(*x >= 0.0 && (a.exec_ns[u].is_some() || *x == 0.0));
            }
            assert!(c.rate(*id).is_some_and(|r| r > 0.0 && r.is_finite()));
        }
    };
    let ids: Vec<(ClientId, &AppDemand)> = demand
        .iter()
        .enumerate()
        .map(|(k, a)| (ClientId(k as u32), a))
        .collect();
    assert!(c.update(0));
    assert!(!c.last_solve_warm());
    check(&c, &ids);
    // Every app's times drift by up to ±5 %: warm.
    let factors = drift_factors(demand.len(), 0.05);
    for ((id, a), f) in ids.iter().zip(&factors) {
        c.set_app(
            *id,
            AppDemand {
                exec_ns: a.exec_ns.iter().map(|e| e.map(|e| e / f)).collect(),
                ..(*a).clone()
            },
        );
    }
    assert!(c.update(300_000_000));
    assert!(c.last_solve_warm());
    check(&c, &ids);
    // A newcomer: warm at once (its rows empty, the barrier solves cold),
    // then the full pick it put off.
    let mut with_newcomer = ids.clone();
    with_newcomer.push((ClientId(64), newcomer));
    c.set_app(ClientId(64), newcomer.clone());
    assert!(c.update(400_000_000));
    assert!(c.last_solve_warm());
    check(&c, &with_newcomer);
    assert!(c.update(600_000_000));
    assert!(!c.last_solve_warm());
    check(&c, &with_newcomer);
    // A leaver: warm.
    c.remove_app(ClientId(64));
    assert!(c.update(700_000_000));
    assert!(c.last_solve_warm());
    check(&c, &ids);
    assert_eq!(c.warm_solves(), 3);
}
