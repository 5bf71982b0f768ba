//! Properties of the goal optimizer's ladder over arbitrary measurement
//! sequences.

use hetsched_core::optimizer::{Action, Direction, Optimizer, OptimizerConfig};
use proptest::prelude::*;

fn config() -> impl Strategy<Value = OptimizerConfig> {
    (0.0..0.3f64, 0u32..4, 1u32..60, 1u32..=100).prop_map(|(tolerance, patience, step, max)| {
        OptimizerConfig {
            tolerance,
            patience,
            share_step: step,
            max_shares: max,
        }
    })
}

proptest! {
    /// Shares stay within the configured maximum, and actions are spaced
    /// by at least `patience` holding periods.
    #[test]
    fn shares_bounded_and_actions_spaced(
        cfg in config(),
        rates in prop::collection::vec(0.0..300.0f64, 1..200),
    ) {
        let mut o = Optimizer::new(cfg);
        let mut last_action: Option<usize> = None;
        for (i, r) in rates.iter().enumerate() {
            let a = o.step(*r, 100.0);
            prop_assert!(o.shares() <= cfg.max_shares);
            if let Action::SetShares(Some(s)) = a {
                prop_assert!(s > 0 && s <= cfg.max_shares);
            }
            if a != Action::Hold {
                if let Some(prev) = last_action {
                    prop_assert!(i - prev > cfg.patience as usize);
                }
                last_action = Some(i);
            }
        }
    }

    /// Persistently under the goal, the optimizer reaches the application's
    /// callback after at most spread + every share step.
    #[test]
    fn sustained_shortfall_reaches_the_callback(cfg in config(), rate in 0.0..50.0f64) {
        let mut o = Optimizer::new(cfg);
        let rungs = 1 + cfg.max_shares.div_ceil(cfg.share_step) as usize + 1;
        let periods = rungs * (cfg.patience as usize + 1);
        let reached = (0..periods).any(|_| o.step(rate, 100.0) == Action::Notify(Direction::Reduce));
        prop_assert!(reached);
    }

    /// Whatever happened before, persistently above the goal it gives
    /// everything back: no spreading, no extra shares, no reductions.
    #[test]
    fn sustained_surplus_releases_everything(
        cfg in config(),
        history in prop::collection::vec(0.0..300.0f64, 0..100),
    ) {
        let mut o = Optimizer::new(cfg);
        for r in history {
            o.step(r, 100.0);
        }
        for _ in 0..(400 * (cfg.patience as usize + 1)) {
            o.step(1000.0, 100.0);
        }
        prop_assert!(!o.spreading());
        prop_assert_eq!(o.shares(), 0);
        prop_assert_eq!(o.reductions(), 0);
    }
}
