//! `hetsched.Client`: a connection to the daemon for programs that drive
//! their devices themselves: the units, the status report, shares, and the
//! dispatch gate (`request_dispatch` / `task_completed`; the Python half
//! wraps them in the `dispatch()` context manager).

use crate::closable::Closable;
use crate::errors::{HetschedError, client_error, unknown_unit};
use crate::units::Unit;
use hetsched_core::ids::{TaskId, UnitId};
use hetsched_protocol::{
    ClientOptions, Grant as WireGrant, SettingsRequest, SharedClient, parse_class, status_json,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;
use std::time::Duration;

/// A slot the unit's agent granted: the holder may run work on the unit
/// until it gives the grant back with `Client.task_completed`.
#[pyclass(frozen, get_all, module = "hetsched")]
#[derive(Clone, Debug)]
pub struct Grant {
    /// The unit's name.
    pub unit: String,
    /// The request's id on this connection.
    pub task: u64,
    /// How long the agent kept the request waiting, ns.
    pub waited_ns: u64,
    unit_id: u16,
}

#[pymethods]
impl Grant {
    fn __repr__(&self) -> String {
        format!(
            "Grant(unit={:?}, task={}, waited_ns={})",
            self.unit, self.task, self.waited_ns
        )
    }
}

/// A connection to the hetsched daemon.
///
/// `Client(name="python", socket=None, observer=False)`: `socket` defaults
/// to `$HETSCHED_SOCKET`, else the system socket. An observer only looks
/// and administers (it is not listed as a client of any unit). Raises
/// `DaemonUnavailable` when no daemon answers.
#[pyclass(subclass, module = "hetsched")]
pub struct Client {
    conn: Closable<SharedClient>,
}

impl Client {
    pub(crate) fn shared(&self) -> PyResult<Arc<SharedClient>> {
        self.conn.get()
    }

    pub(crate) fn unit_id(conn: &SharedClient, name: &str) -> PyResult<UnitId> {
        conn.unit_by_name(name)
            .map(|u| u.id)
            .ok_or_else(|| unknown_unit(name, conn.units().iter().map(|u| u.name.as_str())))
    }
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (name = "python", socket = None, observer = false))]
    fn new(py: Python<'_>, name: &str, socket: Option<&str>, observer: bool) -> PyResult<Self> {
        let mut opts = if observer {
            ClientOptions::observer(name)
        } else {
            ClientOptions::application(name).map_err(client_error)?
        };
        if let Some(s) = socket {
            opts = opts.socket(s);
        }
        // A Python program decides itself whether to retry.
        opts.reconnect_for = Duration::ZERO;
        let conn = py
            .detach(|| SharedClient::connect(opts))
            .map_err(client_error)?;
        Ok(Client {
            conn: Closable::new(conn, "hetsched.Client"),
        })
    }

    /// The daemon's units.
    fn units(&self) -> PyResult<Vec<Unit>> {
        Ok(self.shared()?.units().iter().map(Unit::from).collect())
    }

    /// This connection's process id as the daemon saw it.
    #[getter]
    fn pid(&self) -> PyResult<u32> {
        Ok(self.shared()?.pid())
    }

    /// The daemon's process id.
    #[getter]
    fn daemon_pid(&self) -> PyResult<u32> {
        Ok(self.shared()?.daemon_pid())
    }

    /// What this process can expect from `unit` now, read from the
    /// daemon's shared pages (no message): `guaranteed` (fraction of the
    /// unit under contention), `wait_ns` (a new task's expected wait),
    /// `current_utilisation`, `max_utilisation`, `throttled`, and unit-wide
    /// `busy_fraction`, `active_clients`, `queued`, `running`,
    /// `runnable_threads` (CPU kinds).
    fn view<'py>(&self, py: Python<'py>, unit: &str) -> PyResult<Bound<'py, PyDict>> {
        let conn = self.shared()?;
        let id = Self::unit_id(&conn, unit)?;
        let v = conn.unit_view(usize::from(id.0)).unwrap_or_default();
        let d = PyDict::new(py);
        d.set_item("guaranteed", v.guaranteed)?;
        d.set_item("wait_ns", v.wait_ns)?;
        d.set_item("current_utilisation", v.current_utilisation)?;
        d.set_item("max_utilisation", v.max_utilisation)?;
        d.set_item("throttled", v.throttled)?;
        d.set_item("busy_fraction", v.busy_fraction)?;
        d.set_item("active_clients", v.active_clients)?;
        d.set_item("queued", v.queued)?;
        d.set_item("running", v.running)?;
        d.set_item("runnable_threads", v.runnable_threads)?;
        Ok(d)
    }

    /// The daemon's status report as a dict: the data `hetsched status
    /// --json` prints (units, clients with their shares and use, domains).
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let conn = self.shared()?;
        let text = py.detach(|| -> Result<String, PyErr> {
            let report = conn.status().map_err(client_error)?;
            let domains = conn.domains().map_err(client_error)?;
            let value = status_json(&report, &domains)
                .map_err(|e| HetschedError::new_err(format!("status as JSON: {e}")))?;
            Ok(value.to_string())
        })?;
        py.import("json")?.call_method1("loads", (text,))
    }

    /// Changes the class, shares or priority of this process (or of `pid`,
    /// which may belong to a process that connects later), on every unit or
    /// on `unit`. `class_` is `"custom"` (shares: percent of the unit),
    /// `"normal"` (shares: a weight) or `"background"`. Returns
    /// `{"pid": …, "units": {name: {"class": "custom:70", "priority": 0}}}`.
    #[pyo3(signature = (class_ = None, shares = None, priority = None, *, pid = None, unit = None))]
    fn set_shares<'py>(
        &self,
        py: Python<'py>,
        class_: Option<&str>,
        shares: Option<u32>,
        priority: Option<i32>,
        pid: Option<u32>,
        unit: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let conn = self.shared()?;
        let class = match (class_, shares) {
            (Some(c), s) => Some(parse_class(c, s).map_err(PyValueError::new_err)?),
            (None, Some(_)) => {
                return Err(PyValueError::new_err(
                    "shares need a class_ (\"custom\" or \"normal\")",
                ));
            }
            (None, None) => None,
        };
        let request = SettingsRequest { class, priority };
        if request.is_empty() {
            return Err(PyValueError::new_err(
                "nothing to change: give class_ (with shares) or priority",
            ));
        }
        let unit = unit.map(|u| Self::unit_id(&conn, u)).transpose()?;
        let (pid, applied) = py
            .detach(|| conn.set_settings(pid, unit, request))
            .map_err(client_error)?;
        let units = PyDict::new(py);
        for (id, s) in applied {
            let name = conn
                .units()
                .iter()
                .find(|u| u.id == id)
                .map_or_else(|| format!("unit{}", id.0), |u| u.name.clone());
            let entry = PyDict::new(py);
            entry.set_item("class", s.class.to_string())?;
            entry.set_item("priority", s.priority)?;
            units.set_item(name, entry)?;
        }
        let out = PyDict::new(py);
        out.set_item("pid", pid)?;
        out.set_item("units", units)?;
        Ok(out)
    }

    /// Waits (without holding the GIL) until `unit`'s agent grants this
    /// process a slot, under the unit's policy. `expected_ns` is how long
    /// the work should take (0: unknown). Give the grant back with
    /// `task_completed`; `dispatch()` does both around a `with` block.
    #[pyo3(signature = (unit, expected_ns = 0))]
    fn request_dispatch(&self, py: Python<'_>, unit: &str, expected_ns: u64) -> PyResult<Grant> {
        let conn = self.shared()?;
        let id = Self::unit_id(&conn, unit)?;
        let g = py
            .detach(|| conn.request_dispatch(id, expected_ns))
            .map_err(client_error)?;
        Ok(Grant {
            unit: unit.to_string(),
            task: g.task.0,
            waited_ns: g.waited_ns,
            unit_id: g.unit.0,
        })
    }

    /// Gives a grant back: the work ran for `ran_ns` of device time (the
    /// agent charges the time the slot was held).
    fn task_completed(&self, py: Python<'_>, grant: &Grant, ran_ns: u64) -> PyResult<()> {
        let conn = self.shared()?;
        let wire = WireGrant {
            unit: UnitId(grant.unit_id),
            task: TaskId(grant.task),
            waited_ns: grant.waited_ns,
        };
        py.detach(|| conn.task_completed(wire, ran_ns))
            .map_err(client_error)
    }

    /// Says goodbye: whatever this connection held is released. Later
    /// calls raise `HetschedError`.
    fn close(&self, py: Python<'_>) {
        let conn = self.conn.take();
        py.detach(|| drop(conn));
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) {
        self.close(py);
    }
}
