//! The Rust side of the Python overhead benchmark (`python -m
//! hetsched.bench`): the same work done from Rust in the same process, so
//! the Python figure has its anchor measured in the same run.

use crate::client::Client;
use crate::errors::{client_error, runtime_error, task_error};
use crate::runtime::PyRuntime;
use hetsched_runtime::{Mode, Task};
use pyo3::prelude::*;
use std::time::Instant;

/// Mean ns per call of `calls` empty CPU tasks run one at a time from Rust
/// on `runtime` (the GIL released throughout).
#[pyfunction]
pub fn rust_empty_task_ns(py: Python<'_>, runtime: &PyRuntime, calls: u32) -> PyResult<f64> {
    let rt = runtime.runtime()?;
    let task: Task<(), ()> = Task::new("hetsched-bench-empty-rust").cpu(|_: &()| ());
    py.detach(|| {
        let start = Instant::now();
        for _ in 0..calls {
            rt.accelerate(&task, (), Mode::Sync)
                .map_err(runtime_error)?
                .wait()
                .map_err(task_error)?;
        }
        Ok(start.elapsed().as_nanos() as f64 / f64::from(calls.max(1)))
    })
}

/// Mean ns per grant of `calls` empty runs through `unit`'s gate from Rust
/// (`request_dispatch` then `task_completed`, the GIL released).
#[pyfunction]
pub fn rust_gate_ns(py: Python<'_>, client: &Client, unit: &str, calls: u32) -> PyResult<f64> {
    let conn = client.shared()?;
    let id = Client::unit_id(&conn, unit)?;
    py.detach(|| {
        let start = Instant::now();
        for _ in 0..calls {
            let g = conn.request_dispatch(id, 0).map_err(client_error)?;
            conn.task_completed(g, 0).map_err(client_error)?;
        }
        Ok(start.elapsed().as_nanos() as f64 / f64::from(calls.max(1)))
    })
}
