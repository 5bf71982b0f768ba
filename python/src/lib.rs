//! hetsched for Python: the native half of the `hetsched` package.
//!
//! The pure-Python half (`python/hetsched/`) re-exports these classes and adds
//! what is easier written in Python: the dispatch context manager and its
//! device timing, the device helpers handed to implementations, and Ray.

mod bench;
mod capability;
mod client;
mod closable;
mod errors;
mod runtime;
mod task;
mod thread_state;
mod turnaround;
mod units;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // The runtime's warnings reach stderr (RUST_LOG for more).
    hetsched_runtime::logging::init("warn");
    m.add_class::<client::Client>()?;
    m.add_class::<client::Grant>()?;
    m.add_class::<units::Unit>()?;
    m.add_class::<runtime::PyRuntime>()?;
    m.add_class::<runtime::Future>()?;
    m.add_class::<task::PyTask>()?;
    m.add("HetschedError", py.get_type::<errors::HetschedError>())?;
    m.add(
        "DaemonUnavailable",
        py.get_type::<errors::DaemonUnavailable>(),
    )?;
    m.add("DaemonError", py.get_type::<errors::DaemonError>())?;
    m.add("UnknownUnit", errors::unknown_unit_type(py)?)?;
    m.add("TaskFailed", py.get_type::<errors::TaskFailed>())?;
    m.add_function(wrap_pyfunction!(capability::report_capability_fallback, m)?)?;
    m.add_function(wrap_pyfunction!(bench::rust_empty_task_ns, m)?)?;
    m.add_function(wrap_pyfunction!(bench::rust_gate_ns, m)?)?;
    m.add_function(wrap_pyfunction!(turnaround::turnaround, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
