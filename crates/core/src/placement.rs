//! Placement: Rinnegan's `Accelerate` decision.
//!
//! For every unit that has an implementation of the task, predict
//! `turnaround = dispatch + copy + exec / utilisation` from the task model
//! and the unit's view, then pick by the application's goal. On top of the
//! bare prediction sit the three stabilisers of Rinnegan §3.2:
//!
//! * the *speedup threshold*: leave the unit that holds the data only when
//!   the move is faster by a clear margin, copy included;
//! * *task aggregation*: one decision covers a group of tasks whose size
//!   grows with the cost of moving the data;
//! * *ping-pong damping*: when a unit's actual turnaround departs from the
//!   prediction (the view was stale and everybody went there), correct that
//!   unit's predictions by the observed ratio for the next few decisions.
//!
//! The same [`Placer`] serves the runtime, the StarPU policy and the
//! simulator; only where the views come from differs.

use crate::ids::{UnitId, ns_as_f64};
use crate::task_model::PerformanceModel;
use crate::turnaround::view_turnaround;
use crate::unit::Unit;
use crate::view::ClientUnitView;
use scan::{Choice, Pick, Scan};
use serde::{Deserialize, Serialize};

#[cfg(test)]
mod oracle;
mod scan;
#[cfg(test)]
mod tests;

/// What an application optimises when it places a task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "goal", rename_all = "kebab-case")]
pub enum Goal {
    /// Shortest predicted turnaround (the default).
    #[default]
    MinLatency,
    /// Most tasks per second when the application keeps several in flight:
    /// fixed latencies (dispatch, copy latency) overlap with other tasks, so
    /// only the unit time and copy bandwidth a task costs count.
    MaxThroughput,
    /// Meet `deadline_ns` with the least energy; if no unit can, the fastest.
    Deadline { deadline_ns: f64 },
    /// Least energy per task (busy power × execution time).
    MinEnergy,
}

/// Where a task's input data lives now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DataLocation {
    /// In host memory (the usual case for fresh input).
    #[default]
    Host,
    /// Only valid on this (non-coherent) unit, e.g. a grid a GPU keeps updating.
    Unit(UnitId),
}

/// Set of units, by index, that have an implementation of a task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImplSet(pub u64);

impl ImplSet {
    /// Most units one machine may have (bits of the set).
    pub const MAX_UNITS: usize = 64;

    pub fn with(self, unit: UnitId) -> Self {
        ImplSet(self.0 | (1u64 << unit.0))
    }

    #[inline]
    pub fn contains(self, unit: UnitId) -> bool {
        (unit.0 as usize) < Self::MAX_UNITS && self.0 & (1u64 << unit.0) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// The stabilisers, each of which can be switched off (the simulator
/// measures what each one is worth).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlacementConfig {
    /// The speedup threshold for persistent data: leave the unit holding
    /// the data only if another unit is at least this many times faster per
    /// task (1.2 = 20 %) *and* the gain repays the copy within
    /// `amortise_tasks` tasks. Near break-even, stale views and noisy
    /// predictions would otherwise move the data back and forth, paying a
    /// copy each way; and a clearly better unit is worth a copy that one
    /// task alone would not repay. `None` disables it: each task then simply
    /// takes the best turnaround, copy included.
    pub speedup_threshold: Option<f64>,
    /// Horizon, in tasks, over which a move must repay its copy.
    pub amortise_tasks: f64,
    /// Decide once per group of tasks; the group covers this many times the
    /// ratio of data-movement cost to task turnaround. `None` disables it.
    pub aggregation_factor: Option<f64>,
    /// Largest group one decision may cover.
    pub max_group: u32,
    /// How far off a prediction must be to trigger damping, as a factor
    /// minus one (1.0: actual twice or half the prediction). `None`
    /// disables damping.
    pub damping_tolerance: Option<f64>,
    /// How many decisions use the actual turnaround after a departure.
    pub damping_decisions: u32,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            speedup_threshold: Some(1.2),
            amortise_tasks: 8.0,
            aggregation_factor: Some(2.0),
            max_group: 32,
            damping_tolerance: Some(0.5),
            damping_decisions: 4,
        }
    }
}

impl PlacementConfig {
    /// Bare prediction, no stabilisers.
    pub fn bare() -> Self {
        PlacementConfig {
            speedup_threshold: None,
            aggregation_factor: None,
            damping_tolerance: None,
            ..Self::default()
        }
    }
}

/// One task to place.
#[derive(Clone, Copy, Debug)]
pub struct TaskRequest {
    /// Input bytes (the task model's variable).
    pub bytes: u64,
    /// Bytes to bring back to the host when the task runs on a non-coherent unit.
    pub out_bytes: u64,
    pub data_at: DataLocation,
    /// The data stays where the task ran and the next task reuses it (a
    /// grid a stencil keeps updating), so moving it is a one-off cost that
    /// the speedup threshold and aggregation weigh. Fresh input per task
    /// (`false`) is copied every time wherever it runs.
    pub persistent: bool,
    pub implemented: ImplSet,
    pub goal: Goal,
}

/// Predicted cost of running one task on one unit.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub unit: UnitId,
    pub exec_ns: f64,
    pub copy_ns: f64,
    pub dispatch_ns: f64,
    /// Wall time on the unit: `exec / utilisation`.
    pub stretched_ns: f64,
    /// `dispatch + copy + exec / utilisation`.
    pub turnaround_ns: f64,
}

impl Prediction {
    /// Expected utilisation of the unit for this task.
    pub fn utilisation(&self) -> f64 {
        self.exec_ns / self.stretched_ns.max(f64::MIN_POSITIVE)
    }
}

/// Why a unit was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reason {
    /// The model has too few samples on this unit's kind: run there to learn it.
    Profiling,
    /// An earlier decision covered this task (task aggregation).
    Aggregated,
    /// Best score under the goal.
    Best,
    /// A better unit existed, but not by enough to pay for moving the data.
    Threshold,
}

/// The outcome of one placement.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub unit: UnitId,
    pub reason: Reason,
    /// Predicted turnaround on the chosen unit (NaN while profiling).
    pub predicted_ns: f64,
}

/// Why no unit could be chosen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("the task has no implementation for any of the machine's {units} units")]
    NoImplementation { units: usize },
    #[error("views cover {views} units but the machine has {units}")]
    ViewMismatch { views: usize, units: usize },
}

/// Time to make the task's data available on `unit`.
#[inline]
pub fn copy_to_unit_ns(units: &[Unit], unit: &Unit, bytes: u64, data_at: DataLocation) -> f64 {
    match data_at {
        DataLocation::Unit(at) if at == unit.id => 0.0,
        DataLocation::Unit(at) => {
            // Back to the host first, then on to the target if it needs a copy.
            units[at.index()].copy_out_ns(bytes) + unit.copy_in_ns(bytes)
        }
        DataLocation::Host => unit.copy_in_ns(bytes),
    }
}

/// Whether `unit` can run a task on data at `data_at` without a copy.
#[inline]
pub fn holds_data(unit: &Unit, data_at: DataLocation) -> bool {
    match data_at {
        DataLocation::Unit(at) => at == unit.id,
        DataLocation::Host => unit.coherent,
    }
}

/// Predicts one task on one unit from the model and the unit's view, by
/// the one placement formula, [`turnaround`](crate::turnaround::turnaround).
/// `None` when the model knows nothing yet about the unit's kind.
#[inline(always)]
pub fn predict<M: PerformanceModel + ?Sized>(
    units: &[Unit],
    unit: &Unit,
    view: &ClientUnitView,
    model: &M,
    task: &TaskRequest,
) -> Option<Prediction> {
    let exec_ns = model.predict_ns(unit.kind, task.bytes)?;
    let copy_ns =
        copy_to_unit_ns(units, unit, task.bytes, task.data_at) + unit.copy_out_ns(task.out_bytes);
    let dispatch_ns = ns_as_f64(unit.dispatch_ns);
    // The one placement formula, crate::turnaround::turnaround, as the
    // placer reads it.
    let t = view_turnaround(exec_ns, dispatch_ns, copy_ns, view)?;
    Some(Prediction {
        unit: unit.id,
        exec_ns,
        copy_ns,
        dispatch_ns,
        stretched_ns: t.stretched_ns,
        turnaround_ns: t.turnaround_ns,
    })
}

/// Score of a prediction under a goal: lower is better, and any unit that
/// misses a deadline ranks after every unit that meets it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Score {
    missed: bool,
    value: f64,
}

impl Score {
    #[inline]
    fn better_than(self, other: Score) -> bool {
        if self.missed == other.missed {
            self.value < other.value
        } else {
            other.missed
        }
    }
}

#[inline]
fn score(p: &Prediction, unit: &Unit, goal: Goal, turnaround_ns: f64) -> Score {
    let value = match goal {
        Goal::MinLatency => turnaround_ns,
        Goal::MaxThroughput => {
            // Pipelined tasks hide latencies; what limits throughput is the
            // unit time a task costs and the link bandwidth it uses.
            p.stretched_ns + (p.copy_ns - ns_as_f64(unit.copy_in.latency_ns)).max(0.0)
        }
        Goal::Deadline { deadline_ns } if turnaround_ns > deadline_ns => {
            // Nobody may meet it: then the least late wins.
            return Score {
                missed: true,
                value: turnaround_ns,
            };
        }
        Goal::Deadline { .. } => unit.busy_watts * p.exec_ns,
        Goal::MinEnergy => unit.busy_watts * p.exec_ns,
    };
    Score {
        missed: false,
        value,
    }
}

/// Damping state for one unit: how far off the last prediction there was.
/// Kept as a ratio so it carries over to tasks of other sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Damping {
    actual_ns: f64,
    /// Damping applies while the placer's decision count is below this.
    until_decision: u64,
    /// Moving average of |ln(actual / predicted)| on this unit.
    usual_miss: f64,
}

/// Weight of one observation in [`Damping::usual_miss`].
const USUAL_MISS_WEIGHT: f64 = 0.1;
/// How many times the usual miss a prediction must be off to count as a surprise.
const SURPRISE_OVER_USUAL: f64 = 3.0;

/// [`Placer::damped_until`] of a state saved without it: damping may be on
/// for any unit until further notice.
fn damping_maybe_on() -> u64 {
    u64::MAX
}

/// Placement state of one task type of one client.
///
/// Allocation happens only in [`Placer::new`]; `decide` and `observe` are
/// allocation-free (they sit on every task's path).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Placer {
    config: PlacementConfig,
    damping: Vec<Damping>,
    /// No unit is damped once `decisions` reaches this: the latest
    /// [`Damping::until_decision`] set so far, kept so that a decision can
    /// tell in one comparison that it may skip damping altogether. A state
    /// saved without it reads as `u64::MAX` (look at every unit), which is
    /// slower but never wrong.
    #[serde(default = "damping_maybe_on")]
    damped_until: u64,
    current: Option<UnitId>,
    group_left: u32,
    /// Decisions taken on predictions so far (the clock of damping).
    decisions: u64,
    /// Mean |predicted − actual| / actual over observed turnarounds.
    error_sum: f64,
    error_count: u64,
}

impl Placer {
    pub fn new(config: PlacementConfig, units: usize) -> Self {
        Placer {
            config,
            damping: vec![Damping::default(); units],
            damped_until: 0,
            current: None,
            group_left: 0,
            decisions: 0,
            error_sum: 0.0,
            error_count: 0,
        }
    }

    pub fn config(&self) -> &PlacementConfig {
        &self.config
    }

    /// Mean relative turnaround prediction error so far, if any were observed.
    pub fn mean_error(&self) -> Option<f64> {
        (self.error_count > 0).then(|| self.error_sum / self.error_count as f64)
    }

    /// Chooses the unit for one task. `views[i]` is this client's view of unit `i`.
    pub fn decide<M: PerformanceModel + ?Sized>(
        &mut self,
        units: &[Unit],
        views: &[ClientUnitView],
        model: &M,
        task: &TaskRequest,
    ) -> Result<Decision, PlacementError> {
        if views.len() != units.len() {
            return Err(PlacementError::ViewMismatch {
                views: views.len(),
                units: units.len(),
            });
        }
        if let Some(current) = self.current
            && self.group_left > 0
            && task.implemented.contains(current)
        {
            // Learn every implemented kind before trusting predictions,
            // even within a group (the loop below checks the same, in the
            // same order, when there is no group to continue).
            if let Some(unit) = units.iter().find(|u| {
                task.implemented.contains(u.id) && model.predict_ns(u.kind, task.bytes).is_none()
            }) {
                return Ok(self.commit(unit.id, Reason::Profiling, f64::NAN, 1));
            }
            self.group_left -= 1;
            return Ok(Decision {
                unit: current,
                reason: Reason::Aggregated,
                predicted_ns: f64::NAN,
            });
        }

        let (best, resident) = match self.scan(units, views, model, task) {
            // Learn every implemented kind before trusting predictions.
            Scan::Profile(unit) => return Ok(self.commit(unit, Reason::Profiling, f64::NAN, 1)),
            Scan::Predicted { best, resident } => (best, resident),
        };
        self.decisions += 1;
        let Some(best) = best else {
            return Err(PlacementError::NoImplementation { units: units.len() });
        };
        let (chosen, reason) = match (resident, self.config.speedup_threshold) {
            (Some(stay), Some(threshold)) => {
                self.apply_threshold(units, views, model, task, stay, threshold)
            }
            _ => (best.choice, Reason::Best),
        };
        let group = self.group_size(units, chosen, task);
        Ok(self.commit(chosen.unit, reason, chosen.turnaround_ns, group))
    }

    /// The speedup threshold: compares units per task *without* the one-off
    /// copy of the data, and moves only for a clear, quickly repaid gain.
    fn apply_threshold<M: PerformanceModel + ?Sized>(
        &self,
        units: &[Unit],
        views: &[ClientUnitView],
        model: &M,
        task: &TaskRequest,
        stay: Pick,
        threshold: f64,
    ) -> (Choice, Reason) {
        let Pick {
            score: stay_score,
            choice: stay_choice,
        } = stay;
        let mut best: Option<(Score, Prediction)> = None;
        for (unit, view) in units.iter().zip(views) {
            if unit.id == stay_choice.unit || !task.implemented.contains(unit.id) {
                continue;
            }
            let Some(p) = predict(units, unit, view, model, task) else {
                continue;
            };
            let move_copy = copy_to_unit_ns(units, unit, task.bytes, task.data_at);
            let steady = p.turnaround_ns - move_copy;
            let s = score(&p, unit, task.goal, self.damped_turnaround(unit.id, steady));
            if best.is_none_or(|(b, _)| s.better_than(b)) {
                best = Some((
                    s,
                    Prediction {
                        turnaround_ns: steady,
                        copy_ns: move_copy,
                        ..p
                    },
                ));
            }
        }
        let Some((other_score, other_p)) = best else {
            return (stay_choice, Reason::Best);
        };
        if !other_score.better_than(stay_score) {
            return (stay_choice, Reason::Best);
        }
        let gain = stay_score.value - other_score.value;
        let clear = stay_score.missed
            || (stay_score.value >= threshold * other_score.value
                && gain * self.config.amortise_tasks >= other_p.copy_ns);
        if clear {
            let choice = Choice {
                unit: other_p.unit,
                turnaround_ns: other_p.turnaround_ns + other_p.copy_ns,
            };
            (choice, Reason::Best)
        } else {
            (stay_choice, Reason::Threshold)
        }
    }

    /// Reports the measured turnaround of a task placed on `unit` that was
    /// predicted to take `predicted_ns` (NaN when it was not predicted).
    pub fn observe(&mut self, unit: UnitId, predicted_ns: f64, actual_ns: f64) {
        if !(predicted_ns.is_finite() && actual_ns.is_finite() && actual_ns > 0.0) {
            return;
        }
        let error = (predicted_ns - actual_ns).abs() / actual_ns;
        self.error_sum += error;
        self.error_count += 1;
        // A surprise is a prediction off by more than the tolerance *and*
        // by more than this unit's predictions usually miss: a client whose
        // predictions are always rough (small tasks behind a stale queue)
        // would otherwise be pushed around by ordinary noise.
        let miss = (actual_ns / predicted_ns.max(1.0)).ln().abs();
        if let (Some(tolerance), Some(d)) = (
            self.config.damping_tolerance,
            self.damping.get_mut(unit.index()),
        ) {
            let usual = d.usual_miss;
            d.usual_miss += USUAL_MISS_WEIGHT * (miss - d.usual_miss);
            if miss > tolerance.ln_1p().max(SURPRISE_OVER_USUAL * usual) {
                d.actual_ns = actual_ns;
                d.until_decision = self.decisions + u64::from(self.config.damping_decisions);
                self.damped_until = self.damped_until.max(d.until_decision);
            }
        }
    }

    /// Whether damping may be on for some unit in this decision; when not,
    /// [`Self::damped_turnaround`] is the prediction for every unit.
    #[inline]
    fn damping_may_apply(&self) -> bool {
        self.decisions < self.damped_until
    }

    /// The prediction, corrected by what the unit actually delivered last
    /// time while damping is on for it.
    fn damped_turnaround(&self, unit: UnitId, predicted_ns: f64) -> f64 {
        match self.damping.get(unit.index()) {
            Some(d) if self.decisions < d.until_decision => predicted_ns.max(d.actual_ns),
            _ => predicted_ns,
        }
    }

    /// Task aggregation: how many tasks this decision covers. Moving data
    /// that stays on a unit costs a copy out and a copy in; the dearer that
    /// is relative to a task, the longer one decision holds. Fresh input
    /// (or aggregation off) is one task per decision, answered inline: it
    /// is every decision's path.
    #[inline]
    fn group_size(&self, units: &[Unit], chosen: Choice, task: &TaskRequest) -> u32 {
        match self.config.aggregation_factor {
            Some(factor) if task.persistent => {
                self.persistent_group_size(units, chosen, task, factor)
            }
            _ => 1,
        }
    }

    /// [`Self::group_size`] for data that stays where the task runs.
    fn persistent_group_size(
        &self,
        units: &[Unit],
        chosen: Choice,
        task: &TaskRequest,
        factor: f64,
    ) -> u32 {
        let unit = &units[chosen.unit.index()];
        let data_after = if unit.coherent {
            DataLocation::Host
        } else {
            DataLocation::Unit(unit.id)
        };
        let move_cost = units
            .iter()
            .filter(|u| task.implemented.contains(u.id))
            .map(|u| copy_to_unit_ns(units, u, task.bytes, data_after))
            .fold(0.0, f64::max);
        let ratio = move_cost / chosen.turnaround_ns.max(1.0);
        ((ratio * factor).ceil() as u32).clamp(1, self.config.max_group.max(1))
    }

    fn commit(&mut self, unit: UnitId, reason: Reason, predicted_ns: f64, group: u32) -> Decision {
        self.current = Some(unit);
        self.group_left = group.saturating_sub(1);
        Decision {
            unit,
            reason,
            predicted_ns,
        }
    }
}
