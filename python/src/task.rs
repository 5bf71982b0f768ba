//! `hetsched.Task`: one computation with a Python implementation per kind
//! of unit, turned into the Rust runtime's [`Task`].
//!
//! Python runs only where the runtime would run the implementation anyway:
//! the implementations on the runtime's worker threads (each call takes the
//! GIL for as long as the callable runs). `sizes` and the emulated cost
//! functions are called on the submitting thread, before the call enters
//! the runtime, and travel with the arguments: the runtime's scheduler
//! reads them under its own lock, where taking the GIL could deadlock.

use hetsched_runtime::Task;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::time::Duration;

/// What an implementation returns, or the exception it raised.
pub(crate) type Out = PyResult<Py<PyAny>>;

/// One call's arguments, with what was worked out from them at submission.
pub(crate) struct Args {
    pub args: Py<PyTuple>,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Modelled execution time per emulated kind, in the task's order.
    pub emulated_cost: Vec<Duration>,
}

/// An emulated implementation: `cost(*args)` in seconds, `kernel(*args)` the result.
struct Emulated {
    kind: String,
    cost: Py<PyAny>,
}

/// A task: implementations per kind of unit, placed by the runtime.
///
/// `Task(name, *, cpu=None, opencl=None, cuda=None, emulated=None, sizes=None)`:
/// `cpu(*args)` runs on CPU cores; `opencl(device, *args)` and
/// `cuda(device, *args)` on a device, given a `hetsched.Device` (its
/// pyopencl queue, its CuPy or PyTorch device); `emulated` maps an emulated
/// unit kind to `(cost, kernel)`, where `cost(*args)` is the device's
/// execution time in seconds and `kernel(*args)` computes the result.
/// `sizes(*args)` gives the input and output bytes of a call (or a fixed
/// `(bytes_in, bytes_out)`); without it both are 0. The name keys the
/// task's learned model (persisted across runs).
#[pyclass(frozen, name = "Task", module = "hetsched")]
pub struct PyTask {
    pub(crate) inner: Task<Args, Out>,
    name: String,
    sizes: Option<Sizes>,
    emulated: Vec<Emulated>,
    kinds: Vec<String>,
}

enum Sizes {
    Fixed(u64, u64),
    Call(Py<PyAny>),
}

fn callable(what: &str, f: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    if f.is_callable() {
        Ok(f.clone().unbind())
    } else {
        Err(PyTypeError::new_err(format!(
            "{what} must be callable, got {}",
            f.get_type().name()?
        )))
    }
}

/// Calls `f(*prefix, *args)` with the GIL.
fn call_impl(f: &Py<PyAny>, prefix: Option<Py<PyAny>>, args: &Py<PyTuple>) -> Out {
    crate::thread_state::keep();
    Python::attach(|py| {
        let args = args.bind(py);
        match prefix {
            None => f.call1(py, args.clone()),
            Some(first) => {
                let mut all = Vec::with_capacity(args.len() + 1);
                all.push(first.into_bound(py));
                all.extend(args.iter());
                let all = PyTuple::new(py, all)?;
                f.call1(py, all)
            }
        }
    })
}

/// The `hetsched.Device` handed to a device implementation (the Python
/// half builds it and caches its queues).
fn device(py: Python<'_>, api: &str, index: usize, name: &str) -> PyResult<Py<PyAny>> {
    Ok(py
        .import("hetsched._devices")?
        .call_method1("device", (api, index, name))?
        .unbind())
}

impl PyTask {
    /// Works out `args`' sizes and emulated costs on the caller's thread.
    pub(crate) fn prepare(&self, py: Python<'_>, args: Bound<'_, PyTuple>) -> PyResult<Args> {
        let (bytes_in, bytes_out) = match &self.sizes {
            None => (0, 0),
            Some(Sizes::Fixed(i, o)) => (*i, *o),
            Some(Sizes::Call(f)) => f
                .call1(py, args.clone())?
                .extract::<(u64, u64)>(py)
                .map_err(|e| {
                    PyValueError::new_err(format!(
                        "task {}: sizes(*args) must return (bytes_in, bytes_out) as two ints ≥ 0: {e}",
                        self.name
                    ))
                })?,
        };
        let mut emulated_cost = Vec::with_capacity(self.emulated.len());
        for e in &self.emulated {
            let secs: f64 = e.cost.call1(py, args.clone())?.extract(py)?;
            let cost = Duration::try_from_secs_f64(secs).map_err(|_| {
                PyValueError::new_err(format!(
                    "task {}: the {} cost must be a finite number of seconds ≥ 0, got {secs}",
                    self.name, e.kind
                ))
            })?;
            emulated_cost.push(cost);
        }
        Ok(Args {
            args: args.unbind(),
            bytes_in,
            bytes_out,
            emulated_cost,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }
}

#[pymethods]
impl PyTask {
    #[new]
    #[pyo3(signature = (name, *, cpu = None, opencl = None, cuda = None, emulated = None, sizes = None))]
    fn new(
        name: &str,
        cpu: Option<&Bound<'_, PyAny>>,
        opencl: Option<&Bound<'_, PyAny>>,
        cuda: Option<&Bound<'_, PyAny>>,
        emulated: Option<&Bound<'_, PyDict>>,
        sizes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        if name.is_empty() {
            return Err(PyValueError::new_err(
                "a task needs a name (it keys the model)",
            ));
        }
        let mut task: Task<Args, Out> = Task::new(name);
        let mut kinds = Vec::new();
        if let Some(f) = cpu {
            let f = callable("cpu", f)?;
            task = task.cpu(move |a: &Args| call_impl(&f, None, &a.args));
            kinds.push("cpu".to_string());
        }
        if let Some(f) = opencl {
            let f = callable("opencl", f)?;
            task = task.opencl(move |dev, a: &Args| {
                let info = dev.info();
                crate::thread_state::keep();
                let out = Python::attach(|py| device(py, "opencl", info.index, &info.name))
                    .and_then(|d| call_impl(&f, Some(d), &a.args));
                Ok(out)
            });
            kinds.push("opencl".to_string());
        }
        if let Some(f) = cuda {
            let f = callable("cuda", f)?;
            task = task.cuda(move |dev, a: &Args| {
                let info = dev.info();
                crate::thread_state::keep();
                let out = Python::attach(|py| device(py, "cuda", info.ordinal, &info.name))
                    .and_then(|d| call_impl(&f, Some(d), &a.args));
                Ok(out)
            });
            kinds.push("cuda".to_string());
        }
        let mut emulated_impls = Vec::new();
        if let Some(map) = emulated {
            for (kind, pair) in map.iter() {
                let kind: String = kind
                    .extract()
                    .map_err(|_| PyTypeError::new_err("emulated: keys are unit kinds (str)"))?;
                let (cost, kernel): (Bound<'_, PyAny>, Bound<'_, PyAny>) =
                    pair.extract().map_err(|_| {
                        PyTypeError::new_err(format!(
                            "emulated[{kind:?}] must be a pair (cost, kernel) of callables"
                        ))
                    })?;
                let cost = callable(&format!("emulated[{kind:?}] cost"), &cost)?;
                let kernel = callable(&format!("emulated[{kind:?}] kernel"), &kernel)?;
                let at = emulated_impls.len();
                task = task.emulated(
                    kind.clone(),
                    move |a: &Args| a.emulated_cost.get(at).copied().unwrap_or_default(),
                    move |a: &Args| call_impl(&kernel, None, &a.args),
                );
                kinds.push(kind.clone());
                emulated_impls.push(Emulated { kind, cost });
            }
        }
        if kinds.is_empty() {
            return Err(PyValueError::new_err(format!(
                "task {name:?} has no implementation: give cpu=, opencl=, cuda= or emulated="
            )));
        }
        let sizes = match sizes {
            None => None,
            Some(s) if s.is_callable() => Some(Sizes::Call(s.clone().unbind())),
            Some(s) => {
                let (i, o): (u64, u64) = s.extract().map_err(|_| {
                    PyTypeError::new_err(
                        "sizes must be a callable or a pair (bytes_in, bytes_out) of ints ≥ 0",
                    )
                })?;
                Some(Sizes::Fixed(i, o))
            }
        };
        if sizes.is_some() {
            task = task.sizes(|a: &Args| (a.bytes_in, a.bytes_out));
        }
        Ok(PyTask {
            inner: task,
            name: name.to_string(),
            sizes,
            emulated: emulated_impls,
            kinds,
        })
    }

    /// The task's name (it keys the model).
    #[getter(name)]
    fn py_name(&self) -> &str {
        &self.name
    }

    /// The kinds it has implementations for (`cpu`, `opencl`, `cuda`, emulated kinds).
    #[getter]
    fn implementations(&self) -> Vec<String> {
        self.kinds.clone()
    }

    fn __repr__(&self) -> String {
        format!("Task({:?}, implementations={:?})", self.name, self.kinds)
    }
}
