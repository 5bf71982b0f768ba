//! How a unit whose agent enforces entitlements (the share policy,
//! [`UnitSupply::splits_by_weight`]) splits its time among the apps that
//! natively run there, for [`native_estimate`].
//!
//! Such an agent gives a CUSTOM 70 app 70 % of the unit and a CUSTOM 30
//! app 30 %, whatever their tasks' lengths, where a queue in arrival order
//! would split it in proportion to in-flight × exec. The apps' weights
//! ([`super::coordination_weights`]) are those entitlements, so the unit's
//! time goes to the apps in proportion to their weights. Apps of equal
//! weight take their part together, in turn among themselves as on a
//! queue: the share policy serves the coordinated NORMAL apps as one pool
//! in arrival order, and a unit whose native apps all weigh the same is
//! estimated exactly as a queue. What an app cannot use (its `alone` cap)
//! is water-filled to the others by the caller.

use super::*;

/// The weight of one app as [`native_estimate`] splits it.
fn weight_of(apps: &[AppDemand], i: usize) -> f64 {
    apps[i].weight.max(0.0)
}

/// Whether the native estimate splits unit `unit` among `on` (the apps
/// natively there) by their weights: the unit's agent enforces
/// entitlements and the apps there do not all weigh the same.
pub fn splits_by_weight(apps: &[AppDemand], unit: &UnitSupply, on: &[usize]) -> bool {
    unit.splits_by_weight
        && on
            .iter()
            .any(|&i| weight_of(apps, i) != weight_of(apps, on[0]))
}

/// App `i`'s part of a share-split unit, relative to the other apps of
/// `open` (those still taking a part): its weight group (the apps of
/// `open` weighing the same) takes weight × members, which the group
/// splits by `turn` (each app's part of a queue in arrival order).
pub fn weighted_part(
    apps: &[AppDemand],
    open: &[usize],
    i: usize,
    turn: impl Fn(usize) -> f64,
) -> f64 {
    let w = weight_of(apps, i);
    let group: Vec<usize> = open
        .iter()
        .copied()
        .filter(|&j| weight_of(apps, j) == w)
        .collect();
    let turns: f64 = group.iter().map(|&j| turn(j)).sum();
    if turns > 0.0 {
        w * group.len() as f64 * turn(i) / turns
    } else {
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An app natively on unit 0 of `units` units (slower everywhere else).
    fn app(exec_ns: f64, in_flight: f64, weight: f64, units: usize) -> AppDemand {
        let mut exec = vec![Some(exec_ns * 10.0); units];
        exec[0] = Some(exec_ns);
        AppDemand {
            exec_ns: exec,
            overhead_ns: vec![0.0; units],
            in_flight,
            weight,
            declared_native: None,
            native_trusted: false,
            native_in_flight: None,
            exec_samples: Vec::new(),
        }
    }

    /// Fraction of unit 0's time each app holds natively.
    fn time_on_unit_0(apps: &[AppDemand], units: &[UnitSupply]) -> Vec<f64> {
        native_estimate(apps, units)
            .iter()
            .zip(apps)
            .map(|(thr, a)| thr * a.exec_ns[0].unwrap_or(0.0) / 1e9)
            .collect()
    }

    fn share_device() -> Vec<UnitSupply> {
        vec![
            UnitSupply::queue(1.0).with_weight_split(),
            UnitSupply::processor_shared(2.0),
        ]
    }

    #[test]
    fn custom_70_30_split_a_share_device_70_30_whatever_their_tasks() {
        // The 30 % app's tasks are 4× longer: in turn it would hold 80 %.
        let apps = [app(1e6, 2.0, 1.4, 2), app(4e6, 2.0, 0.6, 2)];
        let fifo = time_on_unit_0(
            &apps,
            &[UnitSupply::queue(1.0), UnitSupply::processor_shared(2.0)],
        );
        assert!((fifo[0] - 0.2).abs() < 1e-9, "{fifo:?}");
        let split = time_on_unit_0(&apps, &share_device());
        assert!((split[0] - 0.7).abs() < 1e-9, "{split:?}");
        assert!((split[1] - 0.3).abs() < 1e-9, "{split:?}");
    }

    #[test]
    fn what_an_app_cannot_use_goes_to_the_others() {
        // The heavy app keeps a fifth of a task in flight: it can use 0.2
        // of the unit, and the light one gets the remaining 0.8.
        let apps = [app(1e6, 0.2, 1.4, 2), app(1e6, 2.0, 0.6, 2)];
        let split = time_on_unit_0(&apps, &share_device());
        assert!((split[0] - 0.2).abs() < 1e-9, "{split:?}");
        assert!((split[1] - 0.8).abs() < 1e-9, "{split:?}");
    }

    #[test]
    fn apps_of_one_weight_share_their_part_in_turn() {
        // Two NORMAL-like apps at weight 1 against one at 2: the pair holds
        // half the unit, split by work (1:3) as on a queue.
        let apps = [
            app(1e6, 1.0, 1.0, 1),
            app(3e6, 1.0, 1.0, 1),
            app(1e6, 1.0, 2.0, 1),
        ];
        let units = [UnitSupply::queue(1.0).with_weight_split()];
        let split = time_on_unit_0(&apps, &units);
        assert!((split[0] - 0.125).abs() < 1e-9, "{split:?}");
        assert!((split[1] - 0.375).abs() < 1e-9, "{split:?}");
        assert!((split[2] - 0.5).abs() < 1e-9, "{split:?}");
    }

    /// Apps on unit 0 with their execution times, places and weights.
    fn apps_strategy() -> impl Strategy<Value = Vec<(f64, f64, u32)>> {
        prop::collection::vec((1e5f64..1e7, 1.0f64..4.0, 1u32..100), 2..6)
    }

    proptest! {
        /// On a share-split unit every app busy enough to use its part
        /// holds the unit in proportion to its weight (apps of distinct
        /// weights), and the unit is fully used.
        #[test]
        fn a_share_split_unit_goes_by_weight(
            apps in apps_strategy(),
            slots in 1.0f64..3.0,
        ) {
            let mut seen = std::collections::BTreeSet::new();
            let apps: Vec<AppDemand> = apps
                .into_iter()
                .filter(|a| seen.insert(a.2))
                // Enough places to use any part of the unit.
                .map(|(e, _, w)| app(e, slots, f64::from(w), 1))
                .collect();
            prop_assume!(apps.len() >= 2);
            let units = [UnitSupply::queue(slots).with_weight_split()];
            let time = time_on_unit_0(&apps, &units);
            let total_w: f64 = apps.iter().map(|a| a.weight).sum();
            for (t, a) in time.iter().zip(&apps) {
                let expected = slots * a.weight / total_w;
                prop_assert!((t - expected).abs() < 1e-9 * slots, "{time:?}");
            }
        }

        /// A unit that serves in turn (FIFO, short-first or time-shared)
        /// ignores the weights; a share-split unit whose apps weigh the
        /// same is estimated exactly as that unit, to the bit.
        #[test]
        fn units_in_turn_and_equal_weights_are_estimated_as_before(
            apps in apps_strategy(),
            time_shared in any::<bool>(),
            common in 1u32..100,
        ) {
            let weighted: Vec<AppDemand> =
                apps.iter().map(|&(e, k, w)| app(e, k, f64::from(w), 2)).collect();
            let unweighted: Vec<AppDemand> =
                apps.iter().map(|&(e, k, _)| app(e, k, 1.0, 2)).collect();
            let equal: Vec<AppDemand> =
                apps.iter().map(|&(e, k, _)| app(e, k, f64::from(common), 2)).collect();
            let base = if time_shared {
                UnitSupply::processor_shared(2.0)
            } else {
                UnitSupply::queue(1.0)
            };
            let in_turn = [base, UnitSupply::queue(1.0)];
            let split = [base.with_weight_split(), UnitSupply::queue(1.0)];
            let before = native_estimate(&unweighted, &in_turn);
            prop_assert_eq!(&native_estimate(&weighted, &in_turn), &before);
            prop_assert_eq!(&native_estimate(&equal, &split), &before);
        }
    }
}
