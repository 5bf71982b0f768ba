//! Worker threads for devices this process drives itself (those of its
//! device backends, [`crate::device_backend`]): one per device, running
//! the unit's calls through the plain worker loop, or through the
//! dispatch gate when the monitor arbitrates the unit.

use super::{Backend, Scheduler, gate_exec, worker};
use crate::device_backend::{DeviceCall, DeviceRunner};
use crate::job::Job;
use std::sync::Arc;

/// A device this process drives itself, and the unit whose calls it runs.
pub(crate) struct DeviceWorker<D> {
    pub unit: usize,
    pub device: D,
    /// The unit is the monitor's: every run of calls waits for its
    /// agent's grant ([`gate_exec`]).
    pub gated: bool,
}

/// Starts one worker thread per device, running each call through the
/// device's runner.
pub(crate) fn spawn_device_workers(
    sched: &Arc<Scheduler>,
    devices: Vec<DeviceWorker<Box<dyn DeviceRunner>>>,
) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    let mut handles = Vec::new();
    for w in devices {
        let u = w.unit;
        let Backend::Device { api, .. } = sched.backends[u] else {
            unreachable!("a device's unit has a device backend");
        };
        let sched = Arc::clone(sched);
        let name = format!("hetsched-{}", sched.units[u].name);
        handles.push(std::thread::Builder::new().name(name).spawn(move || {
            let mut device = w.device;
            let run = |job: &mut dyn Job, unit: &str, _: f64| {
                device.run(&mut DeviceCall::new(api, unit, job))
            };
            if w.gated {
                gate_exec::run_loop(&sched, u, run);
            } else {
                worker::run_loop(&sched, u, run);
            }
        })?);
    }
    Ok(handles)
}
