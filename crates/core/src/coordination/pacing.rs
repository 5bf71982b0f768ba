//! Which call rate an application is told to pace itself to: the rate
//! its targets give it, or none where its units' agents already hold it
//! to its entitlement ([`published_rate`]).

use super::UnitSupply;

/// A rate that is published (so the client knows it has targets) but
/// never binds its [`super::Pacer`]: the runtime scales it by its
/// headroom, which makes it infinite, and an infinite rate does not pace.
pub const UNPACED_RATE: f64 = f64::MAX;

/// The call rate to publish for an app whose targets are `fractions` (per
/// unit of `supply`) and give it `rate`. Where every unit its targets send
/// it to splits its time by entitlement ([`UnitSupply::splits_by_weight`],
/// the share policy), the agent already holds each app to its entitlement
/// whenever the unit is contended, and pacing to the predicted rate can
/// only hold it *below* that: the daemon predicts the rate from measured
/// call times, and on a real device behind the dispatch gate they read a
/// little long, which held two CUSTOM 70 / 30 programs on PoCL to 66 / 34
/// (`hetsched bench device-shares`; unpaced, 70.4 / 29.6). Such an app is
/// published [`UNPACED_RATE`] and follows only its fractions. Elsewhere
/// (FIFO, short-first, credit policies, the CPUs) the predicted rate
/// stands: no agent there keeps an app to the allocation. The daemon
/// publishes this; the simulator, whose models are exact, paces to `rate`
/// everywhere.
pub fn published_rate(rate: f64, fractions: &[f64], supply: &[UnitSupply]) -> f64 {
    let only_splitting_units = fractions
        .iter()
        .enumerate()
        .filter(|(_, f)| **f > 0.0)
        .all(|(u, _)| supply.get(u).is_some_and(|s| s.splits_by_weight));
    if only_splitting_units && fractions.iter().any(|f| *f > 0.0) {
        UNPACED_RATE
    } else {
        rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordination::Pacer;

    #[test]
    fn apps_on_splitting_units_only_are_not_paced() {
        let split = UnitSupply::queue(1.0).with_weight_split();
        let supply = [split, UnitSupply::queue(1.0), split];
        // Every unit it is sent to splits by entitlement: the agents hold it.
        assert_eq!(
            published_rate(120.0, &[0.7, 0.0, 0.3], &supply),
            UNPACED_RATE
        );
        assert_eq!(
            published_rate(120.0, &[1.0, 0.0, 0.0], &supply),
            UNPACED_RATE
        );
        // A FIFO unit among its targets: the predicted rate stands.
        assert_eq!(published_rate(120.0, &[0.5, 0.5, 0.0], &supply), 120.0);
        // No fractions at all (nothing to follow): the rate as it is.
        assert_eq!(published_rate(120.0, &[0.0, 0.0, 0.0], &supply), 120.0);
        // An unpaced rate is still published (finite) and never binds a
        // pacer scaled by its headroom.
        assert!(UNPACED_RATE.is_finite());
        let mut pacer = Pacer::new();
        for k in 0..1000 {
            assert_eq!(pacer.take(k, UNPACED_RATE * 1.05, 2.0), Ok(()));
        }
    }
}
