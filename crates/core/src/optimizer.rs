//! Rinnegan's optimizer (§3.2): keep an application at its performance
//! goal by climbing a ladder of remedies, one rung at a time, and climbing
//! back down when performance is comfortably above the goal.
//!
//! The rungs, in order: (1) *spread* calls over more units; (2) raise the
//! application's CUSTOM share of its units step by step (only when the
//! monitor lets it); (3) ask the application to do less work per unit of
//! progress (its callback). Above the goal the same rungs are undone in
//! reverse: first the application may do more, then shares are given back,
//! then spreading stops, so the application holds the fewest resources
//! that meet its goal.
//!
//! Pure: the runtime's optimizer thread feeds one measurement per period
//! and carries out the returned [`Action`].

use serde::{Deserialize, Serialize};

/// Tuning of the ladder.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptimizerConfig {
    /// Below `target × (1 − tolerance)` is under the goal; above
    /// `target × (1 + tolerance)` is over it. In between nothing changes.
    pub tolerance: f64,
    /// Periods an action is given to show its effect before the next one.
    pub patience: u32,
    /// CUSTOM shares added (or given back) per step.
    pub share_step: u32,
    /// Most CUSTOM shares to ask for on a unit.
    pub max_shares: u32,
}

impl Default for OptimizerConfig {
    fn default() -> Self {
        OptimizerConfig {
            tolerance: 0.05,
            patience: 2,
            share_step: 20,
            max_shares: 100,
        }
    }
}

/// What the runtime should do after one measurement.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Action {
    /// Nothing (on goal, or waiting for the last action to take effect).
    Hold,
    /// Turn spreading over more units on or off.
    Spread(bool),
    /// Ask the monitor for this many CUSTOM shares on the units the
    /// application uses; `None`: return to the class it started with.
    SetShares(Option<u32>),
    /// Tell the application it is below (`Reduce`) or above (`Increase`)
    /// its goal and may change its work.
    Notify(Direction),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Direction {
    Reduce,
    Increase,
}

/// The optimizer's position on the ladder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Optimizer {
    config: OptimizerConfig,
    spreading: bool,
    /// CUSTOM shares asked for now (0: the starting class).
    shares: u32,
    /// The monitor refused more shares; stop asking until we go down.
    shares_refused: bool,
    /// Net reductions the application was asked for and has not undone.
    reductions: u32,
    /// Periods since the last action.
    since_action: u32,
}

impl Optimizer {
    pub fn new(config: OptimizerConfig) -> Self {
        Optimizer {
            config,
            spreading: false,
            shares: 0,
            shares_refused: false,
            reductions: 0,
            // The first period may act at once.
            since_action: config.patience,
        }
    }

    pub fn spreading(&self) -> bool {
        self.spreading
    }

    pub fn shares(&self) -> u32 {
        self.shares
    }

    pub fn reductions(&self) -> u32 {
        self.reductions
    }

    /// The monitor refused the last share request (no privilege, or the
    /// unit's CUSTOM total would pass 100): fall back to the level before
    /// (one step down) and go on to the next rung.
    pub fn shares_refused(&mut self) {
        self.shares = self.shares.saturating_sub(self.config.share_step);
        self.shares_refused = true;
    }

    /// One period: `achieved` against `target` (same unit, higher is
    /// better; for a latency goal pass rates, e.g. 1 / latency).
    pub fn step(&mut self, achieved: f64, target: f64) -> Action {
        self.since_action = self.since_action.saturating_add(1);
        if !(achieved.is_finite() && target.is_finite() && target > 0.0) {
            return Action::Hold;
        }
        if self.since_action <= self.config.patience {
            return Action::Hold;
        }
        let action = if achieved < target * (1.0 - self.config.tolerance) {
            self.escalate()
        } else if achieved > target * (1.0 + self.config.tolerance) {
            self.relax()
        } else {
            Action::Hold
        };
        if action != Action::Hold {
            self.since_action = 0;
        }
        action
    }

    fn escalate(&mut self) -> Action {
        if !self.spreading {
            self.spreading = true;
            return Action::Spread(true);
        }
        if !self.shares_refused && self.shares < self.config.max_shares {
            self.shares = (self.shares + self.config.share_step).min(self.config.max_shares);
            return Action::SetShares(Some(self.shares));
        }
        self.reductions = self.reductions.saturating_add(1);
        Action::Notify(Direction::Reduce)
    }

    fn relax(&mut self) -> Action {
        if self.reductions > 0 {
            self.reductions -= 1;
            return Action::Notify(Direction::Increase);
        }
        if self.shares > 0 {
            self.shares_refused = false;
            self.shares = self.shares.saturating_sub(self.config.share_step);
            return Action::SetShares((self.shares > 0).then_some(self.shares));
        }
        if self.spreading {
            self.spreading = false;
            return Action::Spread(false);
        }
        // At the bottom of the ladder and still above the goal: the
        // application may take on more work.
        Action::Notify(Direction::Increase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick() -> Optimizer {
        Optimizer::new(OptimizerConfig {
            patience: 0,
            ..OptimizerConfig::default()
        })
    }

    #[test]
    fn on_goal_holds() {
        let mut o = quick();
        for _ in 0..10 {
            assert_eq!(o.step(100.0, 100.0), Action::Hold);
            assert_eq!(o.step(103.0, 100.0), Action::Hold);
        }
    }

    #[test]
    fn below_goal_climbs_spread_then_shares_then_callback() {
        let mut o = quick();
        assert_eq!(o.step(50.0, 100.0), Action::Spread(true));
        let mut shares = Vec::new();
        loop {
            match o.step(50.0, 100.0) {
                Action::SetShares(Some(s)) => shares.push(s),
                Action::Notify(Direction::Reduce) => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(shares, vec![20, 40, 60, 80, 100]);
        assert_eq!(o.step(50.0, 100.0), Action::Notify(Direction::Reduce));
        assert_eq!(o.reductions(), 2);
    }

    #[test]
    fn refused_shares_go_straight_to_the_callback() {
        let mut o = quick();
        o.step(10.0, 100.0);
        assert_eq!(o.step(10.0, 100.0), Action::SetShares(Some(20)));
        o.shares_refused();
        assert_eq!(o.step(10.0, 100.0), Action::Notify(Direction::Reduce));
        assert_eq!(o.shares(), 0);
    }

    #[test]
    fn above_goal_undoes_in_reverse() {
        let mut o = quick();
        for _ in 0..3 {
            o.step(10.0, 100.0);
        }
        assert_eq!((o.spreading(), o.shares()), (true, 40));
        assert_eq!(o.step(200.0, 100.0), Action::SetShares(Some(20)));
        assert_eq!(o.step(200.0, 100.0), Action::SetShares(None));
        assert_eq!(o.step(200.0, 100.0), Action::Spread(false));
        assert_eq!(o.step(200.0, 100.0), Action::Notify(Direction::Increase));
    }

    #[test]
    fn patience_spaces_actions() {
        let mut o = Optimizer::new(OptimizerConfig {
            patience: 2,
            ..OptimizerConfig::default()
        });
        assert_eq!(o.step(10.0, 100.0), Action::Spread(true));
        assert_eq!(o.step(10.0, 100.0), Action::Hold);
        assert_eq!(o.step(10.0, 100.0), Action::Hold);
        assert_eq!(o.step(10.0, 100.0), Action::SetShares(Some(20)));
    }

    #[test]
    fn nonsense_measurements_change_nothing() {
        let mut o = quick();
        assert_eq!(o.step(f64::NAN, 100.0), Action::Hold);
        assert_eq!(o.step(50.0, 0.0), Action::Hold);
        assert_eq!(o.step(f64::INFINITY, 100.0), Action::Hold);
        assert!(!o.spreading());
    }
}
