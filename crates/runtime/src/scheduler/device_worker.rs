//! Worker threads for devices this process drives itself (OpenCL, CUDA):
//! one per device, running the unit's calls through the plain worker loop,
//! or through the dispatch gate when the monitor arbitrates the unit.

use super::{Scheduler, gate_exec, worker};
use crate::job::Job;
use std::sync::Arc;
use worker::Ran;

/// A device of a kind this process drives itself (OpenCL, CUDA), and the
/// unit whose calls it runs.
pub(crate) struct DeviceWorker<D> {
    pub unit: usize,
    pub device: D,
    /// The unit is the monitor's: every run of calls waits for its
    /// agent's grant ([`gate_exec`]).
    pub gated: bool,
}

/// Starts one worker thread per device; `run(device, job, unit)` runs one
/// call.
#[cfg_attr(not(any(feature = "opencl", feature = "cuda")), allow(dead_code))]
pub(crate) fn spawn_device_workers<D: Send + 'static>(
    sched: &Arc<Scheduler>,
    devices: Vec<DeviceWorker<D>>,
    run: impl Fn(&D, &mut dyn Job, &str) -> Ran + Clone + Send + 'static,
) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    let mut handles = Vec::new();
    for w in devices {
        let u = w.unit;
        let sched = Arc::clone(sched);
        let run = run.clone();
        let name = format!("hetsched-{}", sched.units[u].name);
        handles.push(std::thread::Builder::new().name(name).spawn(move || {
            let device = w.device;
            let run = |job: &mut dyn Job, unit: &str, _: f64| run(&device, job, unit);
            if w.gated {
                gate_exec::run_loop(&sched, u, run);
            } else {
                worker::run_loop(&sched, u, run);
            }
        })?);
    }
    Ok(handles)
}
