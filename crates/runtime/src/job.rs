//! One call of a task, with its arguments, behind a type-erased interface so
//! the queues can hold calls of every task together.

use crate::handle::{Completer, RunInfo, TaskError};
use crate::slot::TaskSlot;
use crate::task::{CpuCtx, TaskDef};
use hetsched_core::ids::UnitId;
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where a call ran, and since when its caller has waited.
pub(crate) struct Where {
    pub unit: UnitId,
    pub unit_name: Arc<str>,
    pub accepted_at: Instant,
}

/// A call runs in two steps: `run_*` computes its outcome and keeps it;
/// `complete` hands it to the caller. The executor learns from the call in
/// between, so a caller that sees its result also sees a model that
/// includes it.
pub(crate) trait Job: Send {
    fn slot(&self) -> &Arc<TaskSlot>;
    /// Input and output bytes of this call.
    fn bytes(&self) -> (u64, u64);
    /// The buffer this call updates in place, if any.
    fn buffer(&self) -> Option<crate::buffer::Buffer>;
    /// Runs the CPU implementation.
    fn run_cpu(&mut self, ctx: &CpuCtx, unit: &str);
    /// Modelled execution time on an emulated unit of kind `kind`.
    fn device_cost(&self, kind: &str) -> Option<Duration>;
    /// The device finished: compute the result with the kind's kernel.
    fn finish_device(&mut self, kind: &str, unit: &str);
    /// Runs the implementation for device backend `api` on `device`.
    fn run_device(&mut self, api: &str, device: &dyn Any, unit: &str);
    /// Hands the outcome of the run to the caller.
    fn complete(self: Box<Self>, at: Where);
    /// The call will not run.
    fn fail(self: Box<Self>, err: TaskError);
}

pub(crate) struct Call<A, R> {
    pub args: A,
    pub def: Arc<TaskDef<A, R>>,
    pub slot: Arc<TaskSlot>,
    pub completer: Completer<R>,
    pub outcome: Option<Result<R, TaskError>>,
}

/// What a caught panic said, for the error that reports it.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic without a message".into())
}

impl<A: Send + 'static, R: Send + 'static> Call<A, R> {
    /// Runs `f` on the arguments and keeps the outcome. `None` from `f`:
    /// the task has no implementation for this unit; `Some(Err)`: the
    /// implementation reported a failure.
    fn run(&mut self, unit: &str, f: impl FnOnce(&A) -> Option<Result<R, String>>) {
        // A panicking implementation fails its own call, not the worker
        // thread that every later call needs.
        let outcome = catch_unwind(AssertUnwindSafe(|| f(&self.args)));
        let task = || self.def.name.clone();
        self.outcome = Some(match outcome {
            Ok(Some(Ok(r))) => Ok(r),
            Ok(Some(Err(message))) => Err(TaskError::DeviceFailed {
                task: task(),
                unit: unit.to_string(),
                message,
            }),
            Ok(None) => Err(TaskError::Unplaceable {
                task: task(),
                why: format!("no implementation for unit {unit}"),
            }),
            Err(p) => Err(TaskError::Panicked {
                task: task(),
                unit: unit.to_string(),
                message: panic_message(&*p),
            }),
        });
    }
}

impl<A: Send + 'static, R: Send + 'static> Job for Call<A, R> {
    fn slot(&self) -> &Arc<TaskSlot> {
        &self.slot
    }

    fn bytes(&self) -> (u64, u64) {
        self.def.sizes.as_ref().map_or((0, 0), |f| f(&self.args))
    }

    fn buffer(&self) -> Option<crate::buffer::Buffer> {
        self.def.data.as_ref().map(|f| f(&self.args))
    }

    fn run_cpu(&mut self, ctx: &CpuCtx, unit: &str) {
        let f = self.def.cpu.clone();
        self.run(unit, |a| f.map(|f| Ok(f(a, ctx))));
    }

    fn device_cost(&self, kind: &str) -> Option<Duration> {
        let imp = self.def.emulated.iter().find(|e| e.kind == kind)?;
        Some((imp.cost)(&self.args))
    }

    fn finish_device(&mut self, kind: &str, unit: &str) {
        let kernel = self
            .def
            .emulated
            .iter()
            .find(|e| e.kind == kind)
            .map(|e| Arc::clone(&e.kernel));
        self.run(unit, |a| kernel.map(|k| Ok(k(a))));
    }

    fn run_device(&mut self, api: &str, device: &dyn Any, unit: &str) {
        let f = self
            .def
            .devices
            .iter()
            .find(|i| i.api == api)
            .map(|i| Arc::clone(&i.run));
        self.run(unit, |a| f.map(|f| f(device, a)));
    }

    fn complete(self: Box<Self>, at: Where) {
        let info = RunInfo {
            unit: at.unit,
            unit_name: at.unit_name,
            turnaround: at.accepted_at.elapsed(),
        };
        let outcome = self.outcome.unwrap_or_else(|| {
            Err(TaskError::Unplaceable {
                task: self.def.name.clone(),
                why: "completed without running (a runtime bug)".into(),
            })
        });
        self.completer.complete(outcome, info);
    }

    fn fail(self: Box<Self>, err: TaskError) {
        self.completer.fail(err);
    }
}
