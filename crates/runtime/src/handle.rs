//! The handle a call returns, and the count of calls still running.

use hetsched_core::ids::UnitId;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Where and how a call ran, for callers that want more than the result.
#[derive(Clone, Debug, PartialEq)]
pub struct RunInfo {
    pub unit: UnitId,
    pub unit_name: Arc<str>,
    /// From `accelerate` to the result, as the caller saw it.
    pub turnaround: Duration,
}

/// Why a task produced no result.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    #[error("task {task} panicked on unit {unit}: {message}")]
    Panicked {
        task: String,
        unit: String,
        message: String,
    },
    #[error("task {task} failed on unit {unit}: {message}")]
    DeviceFailed {
        task: String,
        unit: String,
        message: String,
    },
    #[error("task {task} cannot run: {why}")]
    Unplaceable { task: String, why: String },
    #[error("the runtime shut down before task {task} ran")]
    Cancelled { task: String },
}

enum Outcome<R> {
    /// The call ran (its implementation may still have failed).
    Ran(Result<R, TaskError>, RunInfo),
    /// The call never ran.
    Failed(TaskError),
}

struct Slot<R> {
    result: Mutex<Option<Outcome<R>>>,
    ready: Condvar,
}

/// The pending result of one [`crate::Runtime::accelerate`] call.
pub struct Handle<R> {
    slot: Arc<Slot<R>>,
}

impl<R> std::fmt::Debug for Handle<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("done", &self.is_done())
            .finish()
    }
}

/// The side that fills a [`Handle`].
pub(crate) struct Completer<R> {
    slot: Arc<Slot<R>>,
}

pub(crate) fn pair<R>() -> (Handle<R>, Completer<R>) {
    let slot = Arc::new(Slot {
        result: Mutex::new(None),
        ready: Condvar::new(),
    });
    (
        Handle {
            slot: Arc::clone(&slot),
        },
        Completer { slot },
    )
}

impl<R> Completer<R> {
    pub fn complete(self, result: Result<R, TaskError>, info: RunInfo) {
        self.set(Outcome::Ran(result, info));
    }

    pub fn fail(self, err: TaskError) {
        self.set(Outcome::Failed(err));
    }

    fn set(self, outcome: Outcome<R>) {
        let mut guard = self.slot.result.lock().unwrap_or_else(|p| p.into_inner());
        *guard = Some(outcome);
        drop(guard);
        self.slot.ready.notify_all();
    }
}

impl<R> Handle<R> {
    /// Blocks until the task has run and returns its result.
    pub fn wait(self) -> Result<R, TaskError> {
        match self.wait_outcome() {
            Outcome::Ran(r, _) => r,
            Outcome::Failed(e) => Err(e),
        }
    }

    /// The result and where the call ran (unit, turnaround).
    pub fn wait_with_info(self) -> Result<(R, RunInfo), TaskError> {
        match self.wait_outcome() {
            Outcome::Ran(Ok(r), info) => Ok((r, info)),
            Outcome::Ran(Err(e), _) | Outcome::Failed(e) => Err(e),
        }
    }

    fn wait_outcome(self) -> Outcome<R> {
        let mut guard = self.slot.result.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(r) = guard.take() {
                return r;
            }
            guard = self
                .slot
                .ready
                .wait(guard)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Blocks until the result is there, leaving it in the handle.
    pub(crate) fn block(&self) {
        let mut guard = self.slot.result.lock().unwrap_or_else(|p| p.into_inner());
        while guard.is_none() {
            guard = self
                .slot
                .ready
                .wait(guard)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Blocks until the result is there or `timeout` has passed; whether
    /// it is there. The result stays in the handle.
    pub fn wait_timeout(&self, timeout: std::time::Duration) -> bool {
        let guard = self.slot.result.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = self
            .slot
            .ready
            .wait_timeout_while(guard, timeout, |r| r.is_none())
            .unwrap_or_else(|p| p.into_inner());
        guard.is_some()
    }

    /// Takes the result if it is there (`wait_with_info` without blocking
    /// and without consuming the handle); `None` if it is not there yet or
    /// was taken already.
    pub fn try_take(&self) -> Option<Result<(R, RunInfo), TaskError>> {
        let mut guard = self.slot.result.lock().unwrap_or_else(|p| p.into_inner());
        guard.take().map(|outcome| match outcome {
            Outcome::Ran(Ok(r), info) => Ok((r, info)),
            Outcome::Ran(Err(e), _) | Outcome::Failed(e) => Err(e),
        })
    }

    /// Whether the result is there (a `wait` would not block).
    pub fn is_done(&self) -> bool {
        self.slot
            .result
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }
}

/// Calls accepted and not finished, for `wait_all`, and calls whose
/// result the application does not have yet, for the places it is seen to
/// keep in flight.
#[derive(Default)]
pub(crate) struct Outstanding {
    count: Mutex<Counts>,
    zero: Condvar,
}

#[derive(Default)]
struct Counts {
    /// Accepted and not yet finished with: `wait_all` waits for zero.
    accepted: u64,
    /// Accepted and not yet delivered to the application. A result wakes
    /// the application before the runtime is done with the call, and a
    /// closed-loop application submits its next call at once, so
    /// `accepted` briefly counts one place too many.
    undelivered: u64,
}

impl Outstanding {
    pub fn add(&self) {
        let mut c = self.lock();
        c.accepted += 1;
        c.undelivered += 1;
    }

    /// A call ends: `deliver` hands its result (or error) to the
    /// application, then the call stops counting.
    pub fn finish(&self, deliver: impl FnOnce()) {
        {
            let mut c = self.lock();
            c.undelivered = c.undelivered.saturating_sub(1);
        }
        deliver();
        let mut c = self.lock();
        c.accepted = c.accepted.saturating_sub(1);
        if c.accepted == 0 {
            self.zero.notify_all();
        }
    }

    /// A call ends whose result was delivered already, or never will be.
    pub fn done(&self) {
        self.finish(|| {});
    }

    /// Calls accepted and not finished.
    pub fn get(&self) -> u64 {
        self.lock().accepted
    }

    /// Calls the application is still waiting for.
    pub fn in_flight(&self) -> u64 {
        self.lock().undelivered
    }

    pub fn wait_zero(&self) {
        let mut c = self.lock();
        while c.accepted > 0 {
            c = self.zero.wait(c).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.count.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::ids::UnitId;
    use std::time::Duration;

    fn info() -> RunInfo {
        RunInfo {
            unit: UnitId(1),
            unit_name: Arc::from("emu-gpu0"),
            turnaround: Duration::from_millis(3),
        }
    }

    #[test]
    fn wait_timeout_reports_an_absent_result_then_leaves_a_present_one() {
        let (handle, completer) = pair::<u32>();
        assert!(!handle.wait_timeout(Duration::from_millis(1)));
        assert!(handle.try_take().is_none());
        let filler = std::thread::spawn(move || completer.complete(Ok(7), info()));
        assert!(handle.wait_timeout(Duration::from_secs(30)));
        filler.join().unwrap();
        // Waiting did not take it: twice in a row, then taken once.
        assert!(handle.wait_timeout(Duration::ZERO));
        let (value, got) = handle.try_take().unwrap().unwrap();
        assert_eq!((value, got.unit_name.as_ref()), (7, "emu-gpu0"));
        assert!(handle.try_take().is_none());
    }

    #[test]
    fn try_take_gives_the_error_of_a_call_that_never_ran() {
        let (handle, completer) = pair::<u32>();
        completer.fail(TaskError::Cancelled { task: "t".into() });
        assert_eq!(
            handle.try_take().unwrap().unwrap_err(),
            TaskError::Cancelled { task: "t".into() }
        );
    }

    #[test]
    fn a_call_stops_counting_in_flight_before_its_result_is_delivered() {
        let out = Outstanding::default();
        out.add();
        out.add();
        assert_eq!((out.get(), out.in_flight()), (2, 2));
        // While the result is delivered (and the app may already submit
        // its next call), the call still holds `wait_all` but no place.
        out.finish(|| {
            assert_eq!((out.get(), out.in_flight()), (2, 1));
            out.add();
            assert_eq!((out.get(), out.in_flight()), (3, 2));
        });
        assert_eq!((out.get(), out.in_flight()), (2, 2));
        out.done();
        out.done();
        assert_eq!((out.get(), out.in_flight()), (0, 0));
        out.wait_zero();
    }
}
