//! `hetsched.Runtime` and `hetsched.Future`: tasks placed by the Rust
//! runtime's predicted turnaround under contention.

use crate::closable::Closable;
use crate::errors::{HetschedError, runtime_error, task_error};
use crate::task::{Out, PyTask};
use crate::units::Unit;
use hetsched_runtime::{Handle, Mode, MonitorMode, Runtime, RuntimeOptions, TaskError};
use pyo3::exceptions::{PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The runtime of this Python program.
///
/// `Runtime(name="python", *, monitor="auto", socket=None, config=None,
/// model_dir=None, persist_models=True, opencl=True)`: with `monitor="auto"`
/// it is a client of the daemon when one answers and runs an embedded
/// monitor otherwise (`"daemon"`: raise `DaemonUnavailable` instead;
/// `"embedded"`: never use the daemon). Task models load at start and are
/// saved at `close()` (under `model_dir`, by default
/// `$XDG_CACHE_HOME/hetsched/models`).
#[pyclass(module = "hetsched", name = "Runtime")]
pub struct PyRuntime {
    rt: Closable<Runtime>,
}

impl PyRuntime {
    pub(crate) fn runtime(&self) -> PyResult<Arc<Runtime>> {
        self.rt.get()
    }
}

fn monitor_mode(s: &str) -> PyResult<MonitorMode> {
    match s {
        "auto" => Ok(MonitorMode::Auto),
        "daemon" => Ok(MonitorMode::Daemon),
        "embedded" => Ok(MonitorMode::Embedded),
        other => Err(PyValueError::new_err(format!(
            "monitor must be \"auto\", \"daemon\" or \"embedded\", got {other:?}"
        ))),
    }
}

#[pymethods]
impl PyRuntime {
    #[new]
    #[pyo3(signature = (name = "python", *, monitor = "auto", socket = None, config = None,
                        model_dir = None, persist_models = true, opencl = true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        name: &str,
        monitor: &str,
        socket: Option<std::path::PathBuf>,
        config: Option<std::path::PathBuf>,
        model_dir: Option<std::path::PathBuf>,
        persist_models: bool,
        opencl: bool,
    ) -> PyResult<Self> {
        let mut opts = RuntimeOptions::new(name)
            .map_err(HetschedError::new_err)?
            .monitor(monitor_mode(monitor)?)
            .persist_models(persist_models)
            .opencl(opencl);
        if let Some(s) = socket {
            opts = opts.socket(s);
        }
        if let Some(c) = config {
            opts = opts.config(c);
        }
        if let Some(d) = model_dir {
            opts = opts.model_dir(d);
        }
        let rt = py
            .detach(|| Runtime::with_options(opts))
            .map_err(runtime_error)?;
        Ok(PyRuntime {
            rt: Closable::new(rt, "hetsched.Runtime"),
        })
    }

    /// Runs `task(*args)` where it is predicted to finish soonest; returns
    /// at once with a `Future`. The arguments are passed as they are (a
    /// numpy array is not copied).
    #[pyo3(signature = (task, *args))]
    fn submit(&self, py: Python<'_>, task: &PyTask, args: Bound<'_, PyTuple>) -> PyResult<Future> {
        let rt = self.runtime()?;
        let args = task.prepare(py, args)?;
        let handle = py
            .detach(|| rt.accelerate(&task.inner, args, Mode::Async))
            .map_err(runtime_error)?;
        Ok(Future::new(handle, task.name()))
    }

    /// `submit(task, *args).result()`: the result, or the exception the
    /// implementation raised.
    #[pyo3(signature = (task, *args))]
    fn run(&self, py: Python<'_>, task: &PyTask, args: Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        let rt = self.runtime()?;
        let args = task.prepare(py, args)?;
        let outcome = py.detach(|| {
            rt.accelerate(&task.inner, args, Mode::Sync)
                .map(|h| h.wait())
        });
        match outcome.map_err(runtime_error)? {
            Ok(out) => out,
            Err(e) => Err(task_error(e)),
        }
    }

    /// The units this runtime places on.
    fn units(&self) -> PyResult<Vec<Unit>> {
        Ok(self.runtime()?.units().iter().map(Unit::from).collect())
    }

    /// `"daemon"` or `"embedded"`: where the monitor is now.
    #[getter]
    fn monitor(&self) -> PyResult<&'static str> {
        Ok(if self.runtime()?.monitor_is_daemon() {
            "daemon"
        } else {
            "embedded"
        })
    }

    /// What the runtime did so far: `{"monitor", "failovers", "outstanding",
    /// "units": [{"name", "kind", "completed", "exec_ns"}]}`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.runtime()?.stats();
        let out = PyDict::new(py);
        out.set_item("monitor", s.monitor)?;
        out.set_item("failovers", s.failovers)?;
        out.set_item("outstanding", s.outstanding)?;
        let mut units = Vec::with_capacity(s.units.len());
        for u in s.units {
            let d = PyDict::new(py);
            d.set_item("name", u.name)?;
            d.set_item("kind", u.kind)?;
            d.set_item("completed", u.completed)?;
            d.set_item("exec_ns", u.exec_ns)?;
            units.push(d);
        }
        out.set_item("units", units)?;
        Ok(out)
    }

    /// What the learned model of task `task` predicts one call with
    /// `bytes_in` input bytes takes on each unit kind, in seconds of
    /// execution alone (no queueing): `{kind: seconds}`, `None` for a kind
    /// the task has not run on yet. Empty for a task this runtime has not
    /// run and has no saved model of.
    #[pyo3(signature = (task, bytes_in = 0))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        task: &str,
        bytes_in: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let rt = self.runtime()?;
        let out = PyDict::new(py);
        if let Some(model) = rt.model_of(task) {
            for (i, kind) in rt.kinds().iter().enumerate() {
                let id = hetsched_core::ids::KindId(i as u16);
                let secs = model
                    .kind(id)
                    .and_then(|k| k.predict(bytes_in))
                    .map(|ns| ns / 1e9);
                out.set_item(kind, secs)?;
            }
        }
        Ok(out)
    }

    /// Blocks (without the GIL) until every submitted call has finished.
    fn wait_all(&self, py: Python<'_>) -> PyResult<()> {
        let rt = self.runtime()?;
        py.detach(|| rt.wait_all());
        Ok(())
    }

    /// Writes the task models now (they are also saved at `close()`).
    fn save_models(&self, py: Python<'_>) -> PyResult<()> {
        let rt = self.runtime()?;
        py.detach(|| rt.save_models())
            .map_err(|e| HetschedError::new_err(format!("saving the task models: {e}")))
    }

    /// Waits for every submitted call, stops the workers and saves the
    /// models. Later calls raise `HetschedError`.
    fn close(&self, py: Python<'_>) {
        let rt = self.rt.take();
        // The last reference joins the workers, which may need the GIL to
        // finish the calls they run.
        py.detach(|| drop(rt));
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) {
        self.close(py);
    }
}

/// The outcome of a finished call, kept once taken from the handle.
enum Done {
    Ran {
        out: Out,
        unit: String,
        turnaround: Duration,
    },
    Failed(TaskError),
}

/// The pending result of `Runtime.submit`.
#[pyclass(frozen, module = "hetsched")]
pub struct Future {
    task: String,
    handle: Handle<Out>,
    /// The outcome, once a waiter took it from the handle.
    done: Mutex<Option<Done>>,
}

impl Future {
    fn new(handle: Handle<Out>, task: &str) -> Self {
        Future {
            task: task.to_string(),
            handle,
            done: Mutex::new(None),
        }
    }

    /// Waits up to `timeout` (for ever with `None`) for the outcome,
    /// without the GIL; whether it is there. Any number of threads may wait.
    fn settle(&self, py: Python<'_>, timeout: Option<Duration>) -> bool {
        if self
            .done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            return true;
        }
        let ready = py.detach(|| match timeout {
            Some(t) => self.handle.wait_timeout(t),
            None => {
                while !self.handle.wait_timeout(Duration::from_secs(3600)) {}
                true
            }
        });
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        if ready && done.is_none() {
            *done = self.handle.try_take().map(|outcome| match outcome {
                Ok((out, info)) => Done::Ran {
                    out,
                    unit: info.unit_name.to_string(),
                    turnaround: info.turnaround,
                },
                Err(e) => Done::Failed(e),
            });
        }
        done.is_some()
    }

    fn with_done<T>(&self, f: impl FnOnce(&Done) -> T) -> Option<T> {
        self.done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(f)
    }
}

#[pymethods]
impl Future {
    /// The call's result, waiting for it without the GIL (at most `timeout`
    /// seconds; `TimeoutError` after that). Raises what the implementation
    /// raised, or `TaskFailed` when the call could not run.
    #[pyo3(signature = (timeout = None))]
    fn result(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        let timeout = timeout
            .map(|t| {
                Duration::try_from_secs_f64(t).map_err(|_| {
                    PyValueError::new_err(format!("timeout must be seconds ≥ 0, got {t}"))
                })
            })
            .transpose()?;
        if !self.settle(py, timeout) {
            return Err(PyTimeoutError::new_err(format!(
                "task {} has not finished",
                self.task
            )));
        }
        self.with_done(|d| match d {
            Done::Ran { out: Ok(v), .. } => Ok(v.clone_ref(py)),
            Done::Ran { out: Err(e), .. } => Err(e.clone_ref(py)),
            Done::Failed(e) => Err(task_error(e.clone())),
        })
        .unwrap_or_else(|| Err(HetschedError::new_err("future lost its outcome")))
    }

    /// Whether the call has finished (`result()` would not wait).
    fn done(&self) -> bool {
        self.done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
            || self.handle.is_done()
    }

    /// The unit the call ran on (waits for it).
    #[getter]
    fn unit(&self, py: Python<'_>) -> Option<String> {
        self.settle(py, None);
        self.with_done(|d| match d {
            Done::Ran { unit, .. } => Some(unit.clone()),
            Done::Failed(_) => None,
        })
        .flatten()
    }

    /// Seconds from `submit` to the result (waits for it).
    #[getter]
    fn turnaround(&self, py: Python<'_>) -> Option<f64> {
        self.settle(py, None);
        self.with_done(|d| match d {
            Done::Ran { turnaround, .. } => Some(turnaround.as_secs_f64()),
            Done::Failed(_) => None,
        })
        .flatten()
    }

    fn __repr__(&self) -> String {
        format!("Future(task={:?}, done={})", self.task, self.done())
    }
}
