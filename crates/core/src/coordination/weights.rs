//! Applications' weights in the coordination's Σ wᵢ ln rᵢ, from their
//! classes and shares, as the units' share policy weighs them.
//!
//! On each unit, an application is entitled to the fraction of the unit
//! the share policy would give it among the coordinated applications there:
//! CUSTOM shares are percentages of the unit, NORMAL shares split what
//! CUSTOM leaves in proportion, BACKGROUND is entitled to nothing. Under
//! proportional fairness a single contended unit splits in proportion to
//! the weights, so an application's weight on a unit is its entitlement,
//! scaled so that a NORMAL application with the default shares weighs 1
//! (a mix of default NORMAL applications is weighed exactly as before
//! classes counted). Its weight is the mean over the units. An application
//! entitled to nothing keeps [`LEAST_WEIGHT`]: the floor still holds it
//! at its native throughput, and what is left over goes to the others.
//! An application with a priority other than the default is not weighed
//! (`None`): priority is a strict order that the unit's agent enforces.

use crate::policy::{ClassTotals, ClientSettings, DEFAULT_NORMAL_SHARES, ShareClass};

/// The weight of an application entitled to nothing on any unit
/// (BACKGROUND, or NORMAL where CUSTOM shares take the whole unit).
pub const LEAST_WEIGHT: f64 = 0.01;

/// Per application (its settings on every unit, in the units' order), its
/// weight, or `None` for one the coordination leaves to the agents.
pub fn coordination_weights(apps: &[&[ClientSettings]]) -> Vec<Option<f64>> {
    let default_priority = ClientSettings::default().priority;
    let weighed: Vec<bool> = apps
        .iter()
        .map(|s| !s.is_empty() && s.iter().all(|c| c.priority == default_priority))
        .collect();
    let units = apps.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut sum = vec![0.0; apps.len()];
    for u in 0..units {
        let on_unit = || {
            apps.iter()
                .zip(&weighed)
                .filter(|(_, w)| **w)
                .filter_map(|(s, _)| s.get(u))
        };
        let mut totals = ClassTotals::default();
        for s in on_unit() {
            totals.add(s.class);
        }
        let scale = unit_scale(&totals, on_unit().map(|s| s.class));
        for (i, s) in apps.iter().enumerate() {
            if let (true, Some(setting)) = (weighed[i], s.get(u)) {
                sum[i] += totals.entitlement(setting.class) * scale;
            }
        }
    }
    apps.iter()
        .zip(&weighed)
        .zip(sum)
        .map(|((s, w), sum)| w.then(|| (sum / s.len() as f64).max(LEAST_WEIGHT)))
        .collect()
}

/// What turns an entitlement on a unit into a weight there: one over a
/// default NORMAL application's entitlement where NORMAL applications get
/// part of the unit; else (CUSTOM only, or CUSTOM shares taking it all)
/// the number of entitled applications over their total entitlement, so
/// that they weigh 1 on average.
fn unit_scale(totals: &ClassTotals, classes: impl Iterator<Item = ShareClass>) -> f64 {
    let default_normal = totals.entitlement(ShareClass::Normal {
        shares: DEFAULT_NORMAL_SHARES,
    });
    if default_normal > 0.0 {
        return 1.0 / default_normal;
    }
    let (count, total) = classes
        .map(|c| totals.entitlement(c))
        .filter(|e| *e > 0.0)
        .fold((0.0, 0.0), |(n, t), e| (n + 1.0, t + e));
    if total > 0.0 { count / total } else { 1.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn everywhere(class: ShareClass, units: usize) -> Vec<ClientSettings> {
        vec![
            ClientSettings {
                class,
                ..ClientSettings::default()
            };
            units
        ]
    }

    fn weights(apps: &[Vec<ClientSettings>]) -> Vec<Option<f64>> {
        let refs: Vec<&[ClientSettings]> = apps.iter().map(Vec::as_slice).collect();
        coordination_weights(&refs)
    }

    fn normal(shares: u32) -> ShareClass {
        ShareClass::Normal { shares }
    }

    fn custom(shares: u32) -> ShareClass {
        ShareClass::Custom { shares }
    }

    #[test]
    fn custom_shares_weigh_as_the_share_policy_splits_a_unit() {
        // CUSTOM 40 and three default NORMAL apps: 40 % and 20 % each.
        let w = weights(&[
            everywhere(custom(40), 2),
            everywhere(normal(10), 2),
            everywhere(normal(10), 2),
            everywhere(normal(10), 2),
        ]);
        let w: Vec<f64> = w.into_iter().map(Option::unwrap).collect();
        assert!((w[0] - 2.0).abs() < 1e-12, "{w:?}");
        assert!(w[1..].iter().all(|x| (x - 1.0).abs() < 1e-12), "{w:?}");
    }

    #[test]
    fn custom_70_30_with_normal_apps_leaves_them_the_least_weight() {
        let mut apps = vec![everywhere(custom(70), 3), everywhere(custom(30), 3)];
        apps.extend((0..6).map(|_| everywhere(normal(10), 3)));
        let w: Vec<f64> = weights(&apps).into_iter().map(Option::unwrap).collect();
        assert!((w[0] / w[1] - 7.0 / 3.0).abs() < 1e-9, "{w:?}");
        assert!(w[2..].iter().all(|x| *x == LEAST_WEIGHT), "{w:?}");
    }

    #[test]
    fn background_and_priorities() {
        let urgent = vec![
            ClientSettings {
                priority: 5,
                ..ClientSettings::default()
            };
            2
        ];
        let w = weights(&[
            everywhere(ShareClass::Background, 2),
            everywhere(normal(10), 2),
            urgent,
            Vec::new(),
        ]);
        assert_eq!(w, vec![Some(LEAST_WEIGHT), Some(1.0), None, None]);
    }

    #[test]
    fn shares_that_differ_by_unit_weigh_their_mean() {
        // Unit 0: 30 against 10 shares; unit 1: 10 against 10.
        let a = vec![
            ClientSettings {
                class: normal(30),
                ..ClientSettings::default()
            },
            ClientSettings::default(),
        ];
        let w = weights(&[a, everywhere(normal(10), 2)]);
        assert_eq!(w, vec![Some(2.0), Some(1.0)]);
    }

    proptest! {
        /// NORMAL shares alone weigh shares / default, whatever the mix,
        /// as the coordination weighed them before classes counted.
        #[test]
        fn normal_shares_weigh_shares_over_the_default(
            shares in prop::collection::vec(1u32..200, 1..20),
            units in 1usize..5,
        ) {
            let apps: Vec<Vec<ClientSettings>> =
                shares.iter().map(|s| everywhere(normal(*s), units)).collect();
            for (w, s) in weights(&apps).into_iter().zip(&shares) {
                let expected = f64::from(*s) / f64::from(DEFAULT_NORMAL_SHARES);
                prop_assert!((w.unwrap() - expected).abs() < 1e-9 * expected);
            }
        }

        /// Weights are finite and at least the least weight, and a larger
        /// CUSTOM share never weighs less.
        #[test]
        fn custom_weights_are_ordered_by_shares(
            custom_shares in prop::collection::vec(1u32..30, 1..4),
            normals in 0usize..6,
        ) {
            let mut apps: Vec<Vec<ClientSettings>> =
                custom_shares.iter().map(|s| everywhere(custom(*s), 2)).collect();
            apps.extend((0..normals).map(|_| everywhere(normal(10), 2)));
            let w: Vec<f64> = weights(&apps).into_iter().map(Option::unwrap).collect();
            prop_assert!(w.iter().all(|x| x.is_finite() && *x >= LEAST_WEIGHT));
            for i in 0..custom_shares.len() {
                for j in 0..custom_shares.len() {
                    if custom_shares[i] > custom_shares[j] {
                        prop_assert!(w[i] >= w[j]);
                    }
                }
            }
        }
    }
}
