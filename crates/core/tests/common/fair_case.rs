//! Random no-loser problems for the barrier solver's properties
//! (`fairness_barrier.rs`, `fairness_warm.rs`).

use hetsched_core::fairness::FairProblem;
use proptest::prelude::*;

/// A random problem: some pairs unimplemented (rate 0), overheads
/// (occupancy ≥ 1), fractional in-flight counts, capacities from a
/// fraction of a slot to several. Each app has at least one usable pair.
#[derive(Clone, Debug)]
pub struct Case {
    pub problem: FairProblem,
    pub weights: Vec<f64>,
    pub goal: f64,
}

pub fn case() -> impl Strategy<Value = Case> {
    (2usize..=24, 1usize..=6).prop_flat_map(|(n, m)| {
        (
            prop::collection::vec(prop::collection::vec((0.1f64..1e4, 0.0f64..1.0), m), n),
            prop::collection::vec(prop::collection::vec(1.0f64..4.0, m), n),
            prop::collection::vec(0.2f64..4.0, m),
            prop::collection::vec(0.5f64..4.0, n),
            prop::collection::vec(0.05f64..2.0, n),
            prop::collection::vec(0.25f64..4.0, n),
            0.0f64..1.6,
        )
            .prop_map(
                move |(pairs, occupancy, capacity, in_flight, native_share, weights, goal)| {
                    let rate: Vec<Vec<f64>> = pairs
                        .iter()
                        .enumerate()
                        .map(|(i, row)| {
                            row.iter()
                                .enumerate()
                                // A third of the pairs have no implementation,
                                // but never the app's own unit `i % m`.
                                .map(
                                    |(u, (r, keep))| {
                                        if u == i % m || *keep > 0.33 { *r } else { 0.0 }
                                    },
                                )
                                .collect()
                        })
                        .collect();
                    // Native: a share of what the app could do alone on its
                    // best unit, so floors are sometimes feasible and
                    // sometimes not.
                    let native = (0..n)
                        .map(|i| {
                            let best = (0..m)
                                .map(|u| {
                                    rate[i][u] * capacity[u].min(in_flight[i] / occupancy[i][u])
                                })
                                .fold(0.0, f64::max);
                            best * native_share[i] / n as f64 * 2.0
                        })
                        .collect();
                    Case {
                        problem: FairProblem {
                            rate,
                            occupancy,
                            capacity,
                            in_flight,
                            native,
                        },
                        weights,
                        goal,
                    }
                },
            )
    })
}
