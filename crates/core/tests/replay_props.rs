//! Properties of the replay and of targets judged by it
//! (`hetsched_core::replay`, `coordination::solve_targets_replayed`).

use hetsched_core::coordination::{
    AppDemand, JudgeBudget, REPLAY_FLOOR_CAP, REPLAY_FLOOR_TIE, UnitSupply,
    native_estimate_replayed, solve_targets_replayed,
};
use hetsched_core::replay::{ReplayBudget, replay_throughput};
use proptest::prelude::*;

#[path = "common/small_machine.rs"]
mod small_machine;
use small_machine::machine;

/// A small budget: the properties hold at any budget, and proptest runs
/// many cases.
const BUDGET: ReplayBudget = ReplayBudget {
    events: 6_000,
    min_tasks: 10,
};

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Replay is deterministic and a paced app never runs faster than its
    /// rate plus the runtime's headroom (and a burst).
    #[test]
    fn replay_is_deterministic_and_pacing_caps((units, apps) in machine(2..=3, 2..=4)) {
        let fraction: Vec<Vec<f64>> = apps
            .iter()
            .map(|a| a.exec_ns.iter().map(|e| if e.is_some() { 1.0 } else { 0.0 }).collect())
            .collect();
        let rate: Vec<f64> = vec![50.0; apps.len()];
        let a = replay_throughput(&apps, &units, &fraction, Some(&rate), BUDGET);
        let b = replay_throughput(&apps, &units, &fraction, Some(&rate), BUDGET);
        prop_assert_eq!(&a, &b);
        for t in a {
            prop_assert!(t <= 50.0 * 1.05 * 1.2 + 1.0, "{t}");
        }
    }

    /// The published targets replay no worse on the floor than everyone on
    /// their native unit (always a candidate), and are well formed: rows
    /// sum to 1 over units the app implements. So whatever the budget of
    /// replayed events: none (only the plans every solve judges), a few
    /// replays' worth, or the default.
    #[test]
    fn replayed_targets_keep_the_native_floor(
        (units, apps) in machine(2..=3, 2..=4),
        budget in prop::sample::select(vec![0u64, 100_000, 1_000_000, JudgeBudget::default().replay_events]),
    ) {
        let native = native_estimate_replayed(&apps, &units);
        let budget = JudgeBudget { replay_events: budget };
        let t = solve_targets_replayed(&apps, &units, 1.05, 1, true, None, budget).unwrap();
        prop_assert_eq!(&t.native, &native);
        let floor = t.predicted_relative.iter().copied().fold(f64::INFINITY, f64::min);
        // The native plan replays at the native estimate (its own replay),
        // so at the cap; the pick is at least as good, within the tie.
        prop_assert!(floor >= REPLAY_FLOOR_CAP - REPLAY_FLOOR_TIE - 1e-9, "{floor}");
        for (row, app) in t.fraction.iter().zip(&apps) {
            let sum: f64 = row.iter().sum();
            prop_assert!((sum - 1.0).abs() < 1e-9, "{row:?}");
            for (f, e) in row.iter().zip(&app.exec_ns) {
                prop_assert!(*f == 0.0 || e.is_some(), "{row:?} on {:?}", app.exec_ns);
            }
        }
        prop_assert!(t.rate.iter().all(|r| r.is_finite() && *r > 0.0));
        // Short-first only where a queue can run it.
        prop_assert_eq!(t.short_first.len(), units.len());
        for (on, unit) in t.short_first.iter().zip(&units) {
            prop_assert!(!on || (unit.short_first && !unit.time_shared));
        }
    }
}

/// A case proptest found on a fresh CI machine (floor 0.976): three units,
/// two apps, one of which cannot use unit 1.
#[test]
fn replayed_targets_keep_the_native_floor_found_case() {
    let units = vec![
        UnitSupply {
            slots: 2.0,
            time_shared: true,
            short_first: false,
            splits_by_weight: false,
        },
        UnitSupply {
            slots: 1.0,
            time_shared: false,
            short_first: false,
            splits_by_weight: false,
        },
        UnitSupply {
            slots: 1.0,
            time_shared: false,
            short_first: false,
            splits_by_weight: false,
        },
    ];
    let app = |exec_ns: Vec<Option<f64>>, overhead: f64, in_flight: f64| AppDemand {
        overhead_ns: vec![overhead; exec_ns.len()],
        exec_ns,
        in_flight,
        weight: 1.0,
        declared_native: None,
        native_trusted: false,
        native_in_flight: None,
        exec_samples: Vec::new(),
    };
    let apps = vec![
        app(
            vec![
                Some(4320696.711411651),
                Some(1849314.929451226),
                Some(724353.7043829717),
            ],
            163907.9122958399,
            2.0,
        ),
        app(
            vec![Some(2152186.8967412985), None, Some(535351.6242218688)],
            0.0,
            1.0,
        ),
    ];
    let t =
        solve_targets_replayed(&apps, &units, 1.05, 1, true, None, JudgeBudget::default()).unwrap();
    let floor = t
        .predicted_relative
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min);
    assert!(
        floor >= REPLAY_FLOOR_CAP - REPLAY_FLOOR_TIE - 1e-9,
        "{floor}"
    );
}
