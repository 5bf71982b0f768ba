//! The package's exceptions, and how Rust errors become them.
//!
//! Every error keeps the daemon's or the runtime's own message: the
//! exception says what went wrong in the words `hetsched` uses elsewhere.

use hetsched_protocol::ClientError;
use hetsched_runtime::{RuntimeError, TaskError};
use pyo3::exceptions::{PyException, PyLookupError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

pyo3::create_exception!(
    hetsched,
    HetschedError,
    PyException,
    "Base class of every error hetsched raises."
);
pyo3::create_exception!(
    hetsched,
    DaemonUnavailable,
    HetschedError,
    "No hetsched daemon answers on the socket (not started, wrong socket, or untrusted)."
);
pyo3::create_exception!(
    hetsched,
    DaemonError,
    HetschedError,
    "The daemon refused a request or broke the protocol; the message says why."
);
/// `UnknownUnit(HetschedError, LookupError)`, made once: `create_exception!`
/// takes one base, and a caller may catch either.
static UNKNOWN_UNIT: PyOnceLock<Py<PyType>> = PyOnceLock::new();

pub(crate) fn unknown_unit_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    UNKNOWN_UNIT
        .get_or_try_init(py, || {
            let bases = PyTuple::new(
                py,
                [
                    py.get_type::<HetschedError>().into_any(),
                    py.get_type::<PyLookupError>().into_any(),
                ],
            )?;
            let body = PyDict::new(py);
            body.set_item("__module__", "hetsched")?;
            body.set_item(
                "__doc__",
                "No unit of that name (the message lists the units there are).",
            )?;
            let made = py
                .get_type::<PyType>()
                .call1(("UnknownUnit", bases, body))?
                .cast_into::<PyType>()
                .map_err(PyErr::from)?;
            Ok::<_, PyErr>(made.unbind())
        })
        .map(|t| t.bind(py))
}
pyo3::create_exception!(
    hetsched,
    TaskFailed,
    HetschedError,
    "A task could not run, or its implementation panicked or failed on its device."
);

/// A daemon client error as the exception a Python caller expects.
pub(crate) fn client_error(e: ClientError) -> PyErr {
    match &e {
        ClientError::Connect { .. }
        | ClientError::SocketDir(_)
        | ClientError::UntrustedDaemon { .. } => DaemonUnavailable::new_err(e.to_string()),
        ClientError::Environment(_) => HetschedError::new_err(e.to_string()),
        _ if e.is_disconnect() => DaemonUnavailable::new_err(e.to_string()),
        _ => DaemonError::new_err(e.to_string()),
    }
}

pub(crate) fn runtime_error(e: RuntimeError) -> PyErr {
    match e {
        RuntimeError::Link(l) => DaemonUnavailable::new_err(l.to_string()),
        RuntimeError::Task(t) => task_error(t),
        RuntimeError::NoImplementation { .. } => TaskFailed::new_err(e.to_string()),
        RuntimeError::Environment(_) | RuntimeError::Threads(_) => {
            HetschedError::new_err(e.to_string())
        }
    }
}

pub(crate) fn task_error(e: TaskError) -> PyErr {
    TaskFailed::new_err(e.to_string())
}

/// `unit` is not among `names`.
pub(crate) fn unknown_unit<'a>(unit: &str, names: impl Iterator<Item = &'a str>) -> PyErr {
    let names: Vec<&str> = names.collect();
    let message = format!("no unit named {unit:?} (units: {})", names.join(", "));
    Python::attach(|py| match unknown_unit_type(py) {
        Ok(t) => PyErr::from_type(t.clone(), message),
        Err(e) => e,
    })
}
