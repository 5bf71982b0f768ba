//! Apps with a throughput goal (Rinnegan §3.2 and §4.3, Fig. 5): every
//! optimizer period the runtime's [`Optimizer`] compares the tasks the app
//! completed with its goal and climbs or descends its ladder: spread calls
//! over more units, ask for CUSTOM shares, ask the app to do less per task.
//! This module keeps one app instance's side of it; the engine carries out
//! the share requests, which need the units' policies.

use crate::scenario::ThroughputGoal;
use hetsched_core::ids::Ns;
use hetsched_core::optimizer::{Action, Direction, Optimizer, OptimizerConfig};

/// How often the optimizer measures (the paper's tracker period).
pub const PERIOD_NS: Ns = 500_000_000;

/// Least fraction of its work an app keeps however often it is asked to
/// do less (a codec at its lowest quality still encodes frames).
const MIN_WORK: f64 = 0.25;

/// One app instance's goal, optimizer and adaptation.
#[derive(Clone, Debug)]
pub struct GoalState {
    goal: ThroughputGoal,
    optimizing: bool,
    optimizer: Optimizer,
    done_in_period: u64,
    /// Place for throughput over more units (the optimizer's first rung).
    pub spreading: bool,
    /// Fraction of a task's full work the app does now (fidelity).
    pub work_factor: f64,
}

/// What one period measured and what the optimizer decided.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeriodEnd {
    /// Tasks per second completed in the period.
    pub achieved: f64,
    /// What the engine must still carry out (shares); spreading and
    /// adaptation are already applied.
    pub action: Action,
}

impl GoalState {
    /// `optimizing`: the app runs on hetsched's runtime, whose optimizer
    /// acts; otherwise the goal is only measured.
    pub fn new(goal: ThroughputGoal, optimizing: bool) -> Self {
        GoalState {
            goal,
            optimizing,
            optimizer: Optimizer::new(OptimizerConfig::default()),
            done_in_period: 0,
            spreading: false,
            work_factor: 1.0,
        }
    }

    pub fn target(&self) -> f64 {
        self.goal.tasks_per_s
    }

    /// CUSTOM shares the optimizer holds now (0: the app's starting class).
    pub fn shares(&self) -> u32 {
        self.optimizer.shares()
    }

    pub fn task_done(&mut self) {
        self.done_in_period += 1;
    }

    /// Closes a period of `period_ns`: measures, steps the optimizer and
    /// applies what concerns the app itself.
    pub fn period_end(&mut self, period_ns: Ns) -> PeriodEnd {
        let achieved = self.done_in_period as f64 / (period_ns as f64 / 1e9);
        self.done_in_period = 0;
        if !self.optimizing {
            return PeriodEnd {
                achieved,
                action: Action::Hold,
            };
        }
        let action = self.optimizer.step(achieved, self.goal.tasks_per_s);
        match action {
            Action::Spread(on) => self.spreading = on,
            Action::Notify(direction) => self.adapt(direction),
            Action::Hold | Action::SetShares(_) => {}
        }
        PeriodEnd { achieved, action }
    }

    /// The monitor refused the shares last asked for: the optimizer falls
    /// back to the level before and goes on to its next rung.
    pub fn shares_refused(&mut self) {
        self.optimizer.shares_refused();
    }

    /// The app does less (or again more) per task, if it can adapt.
    fn adapt(&mut self, direction: Direction) {
        let step = self.goal.adapt_step;
        if step <= 0.0 {
            return;
        }
        self.work_factor = match direction {
            Direction::Reduce => (self.work_factor * (1.0 - step)).max(MIN_WORK),
            Direction::Increase => (self.work_factor / (1.0 - step)).min(1.0),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(adapt_step: f64) -> GoalState {
        GoalState::new(
            ThroughputGoal {
                tasks_per_s: 20.0,
                adapt_step,
            },
            true,
        )
    }

    /// Ends `n` periods of 0.5 s with `tasks` done in each.
    fn periods(s: &mut GoalState, tasks: u64, n: usize) -> Vec<PeriodEnd> {
        (0..n)
            .map(|_| {
                for _ in 0..tasks {
                    s.task_done();
                }
                s.period_end(PERIOD_NS)
            })
            .collect()
    }

    #[test]
    fn below_the_goal_it_spreads_then_asks_for_shares_then_does_less() {
        let mut s = state(0.2);
        // 5 tasks in 0.5 s: 10/s against 20/s.
        let ends = periods(&mut s, 5, 40);
        assert!(ends.iter().all(|e| e.achieved == 10.0));
        assert!(s.spreading);
        let asked: Vec<u32> = ends
            .iter()
            .filter_map(|e| match e.action {
                Action::SetShares(Some(n)) => Some(n),
                _ => None,
            })
            .collect();
        assert_eq!(asked, vec![20, 40, 60, 80, 100]);
        // Then less work per task, down to the floor.
        assert_eq!(s.work_factor, MIN_WORK);
    }

    #[test]
    fn an_app_that_cannot_adapt_keeps_its_work_and_one_above_the_goal_takes_more() {
        let mut s = state(0.0);
        periods(&mut s, 5, 40);
        assert_eq!(s.work_factor, 1.0);

        let mut s = state(0.5);
        periods(&mut s, 5, 40);
        assert_eq!(s.work_factor, MIN_WORK);
        // 30/s against 20/s: back down the ladder, work first (each step
        // waits out the optimizer's patience).
        periods(&mut s, 15, 80);
        assert_eq!(s.work_factor, 1.0);
        assert!(!s.spreading);
        assert_eq!(s.shares(), 0);
    }

    #[test]
    fn without_the_runtime_the_goal_is_only_measured() {
        let mut s = GoalState::new(
            ThroughputGoal {
                tasks_per_s: 20.0,
                adapt_step: 0.5,
            },
            false,
        );
        let ends = periods(&mut s, 5, 10);
        assert!(
            ends.iter()
                .all(|e| e.action == Action::Hold && e.achieved == 10.0)
        );
        assert!(!s.spreading);
        assert_eq!(s.work_factor, 1.0);
    }
}
