//! The placer's pass over the units: one prediction and one score per
//! implemented unit, keeping the best and the best that holds the data.
//!
//! It runs for every unit of every decision, so it is written for speed
//! while computing exactly what [`super::predict`] and [`super::score`]
//! define: the goal is matched once per decision rather than once per
//! unit (the minimum-latency goal, the common one, gets a loop of its own
//! in which no unit can miss a deadline), the running best is a small
//! [`Pick`] rather than a whole [`Prediction`], and nothing is allocated.

use super::Goal;
use super::{Placer, Prediction, Score, TaskRequest, holds_data, predict, score};
use crate::ids::UnitId;
use crate::task_model::PerformanceModel;
use crate::unit::Unit;
use crate::view::ClientUnitView;

/// A unit a decision may commit to, with its predicted turnaround: all a
/// decision reads of the winner's [`Prediction`].
#[derive(Clone, Copy, Debug)]
pub(super) struct Choice {
    pub unit: UnitId,
    pub turnaround_ns: f64,
}

/// A unit's score under the task's goal and what committing to it needs.
/// The scan replaces its running best on every improvement, so this is
/// kept to three words instead of a score and a seven-word prediction.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pick {
    pub score: Score,
    pub choice: Choice,
}

/// What one pass over the units found.
#[derive(Clone, Copy, Debug)]
pub(super) enum Scan {
    /// The first implemented unit whose kind the model knows nothing of
    /// yet: run the task there to learn it.
    Profile(UnitId),
    /// Every implemented unit was predicted.
    Predicted {
        /// Best score, the earliest unit on a tie (`None`: no unit is implemented).
        best: Option<Pick>,
        /// Best score among units that hold a persistent task's data.
        resident: Option<Pick>,
    },
}

impl Placer {
    /// One pass over the units under the task's goal.
    #[inline]
    pub(super) fn scan<M: PerformanceModel + ?Sized>(
        &self,
        units: &[Unit],
        views: &[ClientUnitView],
        model: &M,
        task: &TaskRequest,
    ) -> Scan {
        // The resident unit matters only to the speedup threshold.
        let resident_counts = task.persistent && self.config.speedup_threshold.is_some();
        match task.goal {
            Goal::MinLatency if !resident_counts && !self.damping_may_apply() => {
                self.scan_plain(units, views, model, task)
            }
            Goal::MinLatency => {
                self.scan_with(units, views, model, task, |_, _, turnaround| Score {
                    missed: false,
                    value: turnaround,
                })
            }
            goal => self.scan_with(units, views, model, task, move |p, unit, turnaround| {
                score(p, unit, goal, turnaround)
            }),
        }
    }

    /// The pass in the common case: the minimum-latency goal, no unit
    /// damped and no resident unit to find. A unit's score is then its
    /// predicted turnaround (no deadline to miss, nothing to correct), so
    /// the running best is a unit and a number, and no register goes to
    /// state the general pass keeps for every unit.
    #[inline(always)]
    fn scan_plain<M: PerformanceModel + ?Sized>(
        &self,
        units: &[Unit],
        views: &[ClientUnitView],
        model: &M,
        task: &TaskRequest,
    ) -> Scan {
        let mut implemented = units
            .iter()
            .zip(views)
            .filter(|(unit, _)| task.implemented.contains(unit.id));
        let turnaround = |unit: &Unit, view| {
            predict(units, unit, view, model, task).map(|p| Choice {
                unit: unit.id,
                turnaround_ns: p.turnaround_ns,
            })
        };
        // The first implemented unit is the best so far by definition, so
        // the loop compares numbers only, with no "none yet" to test.
        let Some((unit, view)) = implemented.next() else {
            return Scan::Predicted {
                best: None,
                resident: None,
            };
        };
        let Some(mut best) = turnaround(unit, view) else {
            return Scan::Profile(unit.id);
        };
        for (unit, view) in implemented {
            let Some(choice) = turnaround(unit, view) else {
                return Scan::Profile(unit.id);
            };
            // `better_than` of two scores that cannot miss.
            if choice.turnaround_ns < best.turnaround_ns {
                best = choice;
            }
        }
        let best = Pick {
            score: Score {
                missed: false,
                value: best.turnaround_ns,
            },
            choice: best,
        };
        Scan::Predicted {
            best: Some(best),
            resident: None,
        }
    }

    /// The pass, with the goal's score function fixed at compile time.
    #[inline(always)]
    fn scan_with<M, S>(
        &self,
        units: &[Unit],
        views: &[ClientUnitView],
        model: &M,
        task: &TaskRequest,
        score_of: S,
    ) -> Scan
    where
        M: PerformanceModel + ?Sized,
        S: Fn(&Prediction, &Unit, f64) -> Score,
    {
        let mut best: Option<Pick> = None;
        let mut resident: Option<Pick> = None;
        for (unit, view) in units.iter().zip(views) {
            if !task.implemented.contains(unit.id) {
                continue;
            }
            let Some(prediction) = predict(units, unit, view, model, task) else {
                return Scan::Profile(unit.id);
            };
            let turnaround = self.damped_turnaround(unit.id, prediction.turnaround_ns);
            let pick = Pick {
                score: score_of(&prediction, unit, turnaround),
                choice: Choice {
                    unit: unit.id,
                    turnaround_ns: prediction.turnaround_ns,
                },
            };
            if best.is_none_or(|b| pick.score.better_than(b.score)) {
                best = Some(pick);
            }
            if task.persistent
                && holds_data(unit, task.data_at)
                && resident.is_none_or(|r| pick.score.better_than(r.score))
            {
                resident = Some(pick);
            }
        }
        Scan::Predicted { best, resident }
    }
}
