//! Small random machines for the properties of the replay and of picks
//! judged by it (`replay_props.rs`, `pick_slices.rs`): a processor-shared
//! CPU group of two slots and one-slot queues that may all run
//! short-first, and apps with random task times (some units without an
//! implementation, the CPU group always with one), overheads and one or
//! two tasks in flight.

use hetsched_core::coordination::{AppDemand, UnitSupply};
use proptest::prelude::*;
use std::ops::RangeInclusive;

pub fn machine(
    units: RangeInclusive<usize>,
    apps: RangeInclusive<usize>,
) -> impl Strategy<Value = (Vec<UnitSupply>, Vec<AppDemand>)> {
    (units, apps, any::<bool>()).prop_flat_map(|(units, apps, short_first)| {
        let supply: Vec<UnitSupply> = (0..units)
            .map(|u| UnitSupply {
                slots: if u == 0 { 2.0 } else { 1.0 },
                time_shared: u == 0,
                short_first: short_first && u > 0,
                splits_by_weight: false,
            })
            .collect();
        let app = (
            prop::collection::vec(prop::option::weighted(0.85, 5e4f64..5e6), units),
            0.0f64..3e5,
            1u32..=2,
        )
            .prop_map(|(mut exec, overhead, in_flight)| {
                if exec[0].is_none() {
                    exec[0] = Some(1e6);
                }
                app(exec, overhead, in_flight)
            });
        (Just(supply), prop::collection::vec(app, apps))
    })
}

/// An app of weight 1 with `exec` ns per task on each unit (`None`: no
/// implementation there), `overhead` ns on each, and `in_flight` tasks.
pub fn app(exec: Vec<Option<f64>>, overhead: f64, in_flight: u32) -> AppDemand {
    AppDemand {
        overhead_ns: vec![overhead; exec.len()],
        exec_ns: exec,
        in_flight: f64::from(in_flight),
        weight: 1.0,
        declared_native: None,
        native_trusted: false,
        native_in_flight: None,
        exec_samples: Vec::new(),
    }
}
