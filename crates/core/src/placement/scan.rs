//! The placer's pass over the units: one prediction and one score per
//! implemented unit, keeping the best and the best that holds the data.
//!
//! It runs for every unit of every decision, so it is written for speed
//! while computing exactly what [`super::predict`] and [`super::score`]
//! define: the goal is matched once per decision rather than once per
//! unit (the minimum-latency goal, the common one, gets a loop of its own
//! in which no unit can miss a deadline), and nothing is allocated.

use super::Goal;
use super::{Placer, Prediction, Score, TaskRequest, holds_data, predict, score};
use crate::ids::UnitId;
use crate::task_model::PerformanceModel;
use crate::unit::Unit;
use crate::view::ClientUnitView;

/// A unit's prediction with its score under the task's goal.
#[derive(Clone, Copy, Debug)]
pub(super) struct Scored {
    pub score: Score,
    pub prediction: Prediction,
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
        best: Option<Scored>,
        /// Best score among units that hold a persistent task's data.
        resident: Option<Scored>,
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
        match task.goal {
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
        let mut best: Option<Scored> = None;
        let mut resident: Option<Scored> = None;
        for (unit, view) in units.iter().zip(views) {
            if !task.implemented.contains(unit.id) {
                continue;
            }
            let Some(prediction) = predict(units, unit, view, model, task) else {
                return Scan::Profile(unit.id);
            };
            let turnaround = self.damped_turnaround(unit.id, prediction.turnaround_ns);
            let score = score_of(&prediction, unit, turnaround);
            let scored = Scored { score, prediction };
            if best.is_none_or(|b| score.better_than(b.score)) {
                best = Some(scored);
            }
            if task.persistent
                && holds_data(unit, task.data_at)
                && resident.is_none_or(|r| score.better_than(r.score))
            {
                resident = Some(scored);
            }
        }
        Scan::Predicted { best, resident }
    }
}
