//! The OpenCL executor (feature `opencl`): every OpenCL device is a unit
//! this process drives itself, with one worker thread owning the device
//! (an in-order queue), so calls on it run one at a time.
//!
//! The model learns a call's wall time, copies included: an OpenCL
//! implementation issues its own copies, so the unit is given no separate
//! copy cost and placement does not count them twice.

use crate::scheduler::{Backend, Scheduler};
use hetsched_core::ids::UnitId;
use hetsched_core::policy::PolicyKind;
use hetsched_core::unit::{Capabilities, LinkCost, UnitClass};
use hetsched_opencl::{DeviceKind, OpenClDevice};
use hetsched_protocol::UnitInfo;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// Opens every OpenCL device; none (with one log line saying why) where
/// OpenCL is absent.
pub(crate) fn discover() -> Vec<(UnitInfo, Backend, OpenClDevice)> {
    let infos = match hetsched_opencl::devices() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("hetsched runtime: no OpenCL units: {e}");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for info in infos {
        let device = match OpenClDevice::open(info.index) {
            Ok(d) => d,
            Err(e) => {
                eprintln!(
                    "hetsched runtime: cannot open OpenCL device {}: {e}",
                    info.name
                );
                continue;
            }
        };
        let on_cpu = info.kind == DeviceKind::Cpu;
        let unit = UnitInfo {
            // Renumbered after the monitor's units by the scheduler.
            id: UnitId(0),
            name: unit_name(info.index),
            kind: format!("opencl:{}", info.name.trim()),
            class: if info.kind == DeviceKind::Gpu {
                UnitClass::Gpu
            } else {
                UnitClass::Accelerator
            },
            policy: PolicyKind::Fifo,
            slots: 1,
            relative_speed: 1.0,
            caps: Capabilities::empty(),
            coherent: true,
            copy_in: LinkCost::FREE,
            copy_out: LinkCost::FREE,
            dispatch_ns: 0,
            emulated: false,
            kernels: Vec::new(),
            pus: Vec::new(),
            throttle: None,
        };
        let backend = Backend::OpenCl {
            // The first CPU kind: PoCL spreads its work over all host cores.
            cpu_kind: on_cpu.then_some(0),
            cores: info.compute_units.max(1),
        };
        out.push((unit, backend, device));
    }
    out
}

/// The unit name of OpenCL device `index` of [`hetsched_opencl::devices`].
fn unit_name(index: usize) -> String {
    format!("opencl{index}")
}

/// The device index behind an OpenCL unit's name (for the pipeline
/// controller, which opens its own handle on the device).
pub(crate) fn device_index(unit: &str) -> Option<usize> {
    let index = unit.strip_prefix("opencl")?.parse().ok()?;
    (unit_name(index) == unit).then_some(index)
}

/// Starts one worker per device; `devices[i]` drives unit `first_unit + i`.
pub(crate) fn spawn_workers(
    sched: &Arc<Scheduler>,
    first_unit: usize,
    devices: Vec<OpenClDevice>,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    crate::worker::spawn_device_workers(sched, first_unit, devices, |device, job, unit| {
        let start = Instant::now();
        job.run_opencl(device, unit);
        start.elapsed().as_nanos() as f64
    })
}
