//! The replay-judged pick on a saved 128-application input.

use hetsched_core::coordination::{AppDemand, JudgeBudget, UnitSupply, solve_targets_replayed};
use serde::Deserialize;

/// A pick's input as the coordinator held it when the pick began.
#[derive(Deserialize)]
struct SavedPick {
    why: String,
    apps: Vec<AppDemand>,
    units: Vec<UnitSupply>,
}

/// Every candidate of this pick replays with one or two apps at 0.93–0.97
/// of native and a sum of ln rᵢ near 180; the walk in groups from the
/// native plan runs out of budget at a sum of 20. The best candidate,
/// repaired, holds the floor at a sum above 180.
#[test]
fn a_pick_whose_candidates_all_miss_the_floor_keeps_most_of_their_gain() {
    let text = include_str!("fixtures/pick-128x5-every-candidate-below-the-floor.json");
    let saved: SavedPick = serde_json::from_str(text).expect("a saved pick");
    assert_eq!(saved.apps.len(), 128, "{}", saved.why);
    let t = solve_targets_replayed(
        &saved.apps,
        &saved.units,
        1.05,
        3,
        true,
        None,
        // The budget the generated 128-application scenarios give a pick.
        JudgeBudget {
            replay_events: 8_000_000,
        },
    )
    .expect("targets");
    let lowest = t
        .predicted_relative
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min);
    let log_sum: f64 = t.predicted_relative.iter().map(|r| r.ln()).sum();
    assert!(lowest >= 0.98, "lowest r {lowest}");
    assert!(log_sum > 150.0, "Σ ln r {log_sum}");
}
