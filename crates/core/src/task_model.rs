//! STUB — replaced by the task-model work (owner: task-model helper).
use crate::ids::KindId;
use serde::{Deserialize, Serialize};

/// A model of how long one task takes on each unit kind.
pub trait PerformanceModel {
    /// Predicted execution time in ns for `bytes` of input on `kind`, or
    /// `None` when the model knows nothing about that kind yet.
    fn predict_ns(&self, kind: KindId, bytes: u64) -> Option<f64>;
    /// Feeds one measured execution.
    fn observe(&mut self, kind: KindId, bytes: u64, actual_ns: f64);
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TaskModel {
    pub name: String,
}

impl TaskModel {
    pub fn new(name: &str, kinds: usize) -> Self {
        let _ = kinds;
        TaskModel { name: name.into() }
    }
}

impl PerformanceModel for TaskModel {
    fn predict_ns(&self, _kind: KindId, _bytes: u64) -> Option<f64> {
        todo!()
    }
    fn observe(&mut self, _kind: KindId, _bytes: u64, _actual_ns: f64) {
        todo!()
    }
}
