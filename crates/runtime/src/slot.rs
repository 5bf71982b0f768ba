//! One task as a runtime knows it: its model and its placer, and the model
//! as one placement decision sees it.

use hetsched_core::ids::KindId;
use hetsched_core::placement::{Decision, ImplSet, PlacementError, Placer, Reason, TaskRequest};
use hetsched_core::task_model::{PROFILE_SAMPLES, PerformanceModel, TaskModel};
use hetsched_core::unit::Unit;
use hetsched_core::view::ClientUnitView;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// An application's own model: `(unit kind name, input bytes) → execution time`.
pub type ModelFn = Arc<dyn Fn(&str, u64) -> Option<Duration> + Send + Sync>;

/// Prediction given to a kind that has no samples yet but enough profiling
/// runs in flight: large enough that a known unit wins, so a burst of calls
/// at start-up does not all queue on the first unit being profiled.
const PROFILING_PLACEHOLDER_NS: f64 = 1e12;

/// A task's model: learned online, or the application's own, which the
/// learned one backs up for kinds the application cannot predict.
pub(crate) struct SlotModel {
    pub learned: TaskModel,
    /// The application's model, with the kind names it is asked about.
    pub app: Option<(ModelFn, Vec<String>)>,
}

impl SlotModel {
    pub fn predict(&self, kind: KindId, bytes: u64) -> Option<f64> {
        self.app_prediction(kind, bytes)
            .or_else(|| self.learned.predict_ns(kind, bytes))
    }

    fn app_prediction(&self, kind: KindId, bytes: u64) -> Option<f64> {
        self.app.as_ref().and_then(|(f, kinds)| {
            let name = kinds.get(kind.index())?;
            f(name, bytes)
                .map(|d| d.as_nanos() as f64)
                .filter(|ns| ns.is_finite())
        })
    }
}

/// Placement state of one task in this runtime.
pub(crate) struct SlotState {
    pub placer: Placer,
    pub model: SlotModel,
    /// Profiling runs in flight per kind.
    profiling: Vec<u32>,
}

impl SlotState {
    /// Chooses the unit for one call from the views of every unit, and
    /// counts it as a profiling run of its kind when it is one. The placer
    /// reads this task's model as [`DecisionModel`] sees it.
    pub fn decide(
        &mut self,
        units: &[Unit],
        views: &[ClientUnitView],
        request: &TaskRequest,
    ) -> Result<Decision, PlacementError> {
        let model = DecisionModel {
            model: &self.model,
            profiling: &self.profiling,
        };
        let decision = self.placer.decide(units, views, &model, request)?;
        if decision.reason == Reason::Profiling {
            let kind = units[decision.unit.index()].kind;
            if let Some(n) = self.profiling.get_mut(kind.index()) {
                *n += 1;
            }
        }
        Ok(decision)
    }

    /// A profiling run of `kind` ended, or will not happen.
    pub fn profiling_ended(&mut self, kind: KindId) {
        if let Some(n) = self.profiling.get_mut(kind.index()) {
            *n = n.saturating_sub(1);
        }
    }
}

/// One task as this runtime knows it.
pub(crate) struct TaskSlot {
    pub name: String,
    pub implemented: ImplSet,
    pub state: Mutex<SlotState>,
}

impl TaskSlot {
    pub fn new(name: String, implemented: ImplSet, model: SlotModel, placer: Placer) -> Self {
        let kinds = model.learned.kind_count();
        TaskSlot {
            name,
            implemented,
            state: Mutex::new(SlotState {
                placer,
                model,
                profiling: vec![0; kinds],
            }),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The model as one decision sees it (see [`PROFILING_PLACEHOLDER_NS`]).
struct DecisionModel<'a> {
    model: &'a SlotModel,
    profiling: &'a [u32],
}

impl PerformanceModel for DecisionModel<'_> {
    /// Until a kind has [`PROFILE_SAMPLES`] measurements (and the
    /// application does not predict it), it has no prediction, so the
    /// placer profiles it; with that many profiling calls already in
    /// flight, it gets the placeholder. (A one-sample fit is a bootstrap
    /// guess: trusted, one slow first call would keep a unit unused for
    /// good.)
    fn predict_ns(&self, kind: KindId, bytes: u64) -> Option<f64> {
        if let Some(ns) = self.model.app_prediction(kind, bytes) {
            return Some(ns);
        }
        if !self.model.learned.needs_profiling(kind) {
            return self.model.learned.predict_ns(kind, bytes);
        }
        let in_flight = self.profiling.get(kind.index()).copied().unwrap_or(0);
        (in_flight >= PROFILE_SAMPLES as u32).then_some(PROFILING_PLACEHOLDER_NS)
    }

    fn observe(&mut self, _kind: KindId, _bytes: u64, _actual_ns: f64) {}
}
