//! The placement formula for Python: `hetsched._native.turnaround`, the
//! core's [`hetsched_core::turnaround::turnaround`] over figures the caller
//! gives. `hetsched.ray` rates nodes with it, so that Ray places by the
//! same formula as the runtime, the C API and the StarPU policy.

use hetsched_core::turnaround::{TurnaroundInput, UnitLoad, turnaround as formula};
use hetsched_core::view::ClientUnitView;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A view's fields from a dict (`Client.view`'s keys; missing ones are an
/// open, uncapped unit's).
fn view_of(d: &Bound<'_, PyDict>) -> PyResult<ClientUnitView> {
    let field = |key: &str, default: f64| -> PyResult<f64> {
        match d.get_item(key)? {
            Some(v) => v.extract(),
            None => Ok(default),
        }
    };
    let open = ClientUnitView::OPEN;
    Ok(ClientUnitView {
        guaranteed: field("guaranteed", open.guaranteed)?,
        wait_ns: field("wait_ns", open.wait_ns)?,
        current_utilisation: field("current_utilisation", open.current_utilisation)?,
        max_utilisation: field("max_utilisation", open.max_utilisation)?,
        throttled: match d.get_item("throttled")? {
            Some(v) => v.extract()?,
            None => open.throttled,
        },
    })
}

/// The load, from exactly one of the three ways to give it.
fn load_of(
    runnable_threads: Option<f64>,
    backlog: Option<f64>,
    view: Option<&Bound<'_, PyDict>>,
) -> PyResult<UnitLoad> {
    match (runnable_threads, backlog, view) {
        (Some(n), None, None) => Ok(UnitLoad::RunnableThreads(n)),
        (None, Some(n), None) => Ok(UnitLoad::Backlog(n)),
        (None, None, Some(v)) => Ok(UnitLoad::View(view_of(v)?)),
        _ => Err(PyValueError::new_err(
            "give exactly one of runnable_threads, backlog and view",
        )),
    }
}

/// hetsched's placement formula for one task on one unit:
/// ``turnaround = dispatch + copy + (ahead + exec) × stretch`` and
/// ``rate = slots / (exec × stretch)``, the stretch from the unit's load:
/// ``runnable_threads`` on a CPU kind, ``backlog`` (tasks queued and
/// running) on a device, or ``view`` (a dict such as ``Client.view``'s).
/// Returns a dict with ``stretch``, ``stretched_ns``, ``ahead_ns``,
/// ``turnaround_ns`` and ``rate_per_s``, or ``None`` when ``exec_ns`` is
/// not a finite number ≥ 0 (a kind never run: try it).
#[pyfunction]
#[pyo3(signature = (exec_ns, slots, *, runnable_threads=None, backlog=None, view=None,
                    dispatch_ns=0.0, copy_ns=0.0, ahead_ns=0.0))]
#[allow(clippy::too_many_arguments)] // keyword arguments from Python
pub fn turnaround<'py>(
    py: Python<'py>,
    exec_ns: f64,
    slots: u32,
    runnable_threads: Option<f64>,
    backlog: Option<f64>,
    view: Option<&Bound<'py, PyDict>>,
    dispatch_ns: f64,
    copy_ns: f64,
    ahead_ns: f64,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let load = load_of(runnable_threads, backlog, view)?;
    // The one placement formula: hetsched_core::turnaround::turnaround.
    let Some(t) = formula(&TurnaroundInput {
        exec_ns,
        dispatch_ns,
        copy_ns,
        ahead_ns,
        slots,
        load,
    }) else {
        return Ok(None);
    };
    let d = PyDict::new(py);
    d.set_item("stretch", t.stretch)?;
    d.set_item("stretched_ns", t.stretched_ns)?;
    d.set_item("ahead_ns", t.ahead_ns)?;
    d.set_item("turnaround_ns", t.turnaround_ns)?;
    d.set_item("rate_per_s", t.rate_per_s)?;
    Ok(Some(d))
}
