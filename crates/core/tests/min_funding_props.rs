//! Properties of the min-funding core allocation.

use hetsched_core::min_funding::{CoreClaim, min_funding};
use proptest::prelude::*;

fn claims() -> impl Strategy<Value = Vec<CoreClaim>> {
    prop::collection::vec(
        (prop_oneof![Just(0.0), 0.5f64..100.0], 0u32..40)
            .prop_map(|(weight, demand)| CoreClaim { weight, demand }),
        0..12,
    )
}

proptest! {
    #[test]
    fn never_over_demand_and_work_conserving(cores in 0u32..256, claims in claims()) {
        let got = min_funding(cores, &claims);
        prop_assert_eq!(got.len(), claims.len());
        let total_demand: u64 = claims.iter().map(|c| u64::from(c.demand)).sum();
        let sum: u64 = got.iter().map(|&g| u64::from(g)).sum();
        prop_assert_eq!(sum, total_demand.min(u64::from(cores)));
        for (g, c) in got.iter().zip(&claims) {
            prop_assert!(*g <= c.demand);
        }
    }

    #[test]
    fn unmet_claimants_split_by_weight(cores in 1u32..256, claims in claims()) {
        // Among weighted claimants that did not get their whole demand,
        // cores per unit of weight agree up to rounding one core each way.
        let got = min_funding(cores, &claims);
        let unmet: Vec<usize> = (0..claims.len())
            .filter(|&i| claims[i].weight > 0.0 && got[i] < claims[i].demand)
            .collect();
        for &a in &unmet {
            for &b in &unmet {
                let per_a = (f64::from(got[a]) - 1.0) / claims[a].weight;
                let per_b = (f64::from(got[b]) + 1.0) / claims[b].weight;
                prop_assert!(per_a <= per_b + 1e-9, "{:?} {:?}", claims, got);
            }
        }
    }

    #[test]
    fn zero_weight_only_when_weighted_are_satisfied(cores in 0u32..64, claims in claims()) {
        let got = min_funding(cores, &claims);
        let weighted_unmet = claims.iter().zip(&got).any(|(c, g)| c.weight > 0.0 && *g < c.demand);
        if weighted_unmet {
            for (c, g) in claims.iter().zip(&got) {
                if c.weight == 0.0 {
                    prop_assert_eq!(*g, 0);
                }
            }
        }
    }
}
