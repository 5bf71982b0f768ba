//! The CUDA executor (feature `cuda`): every CUDA device is a unit this
//! process drives itself, with one worker thread owning the device and its
//! stream, so calls on it run one at a time.
//!
//! Unlike the OpenCL executor, the unit carries measured launch and copy
//! costs (hetsched-platform's GPU calibration, run when the device opens)
//! and the model learns only the device time of the call's kernels, from
//! CUDA events: placement then predicts `dispatch + copies + kernel`, each
//! part from where it is measured, and a call's copies are not counted
//! twice.
//!
//! Without the CUDA driver or NVRTC, or with `HETSCHED_CUDA=0`, there are
//! no CUDA units, and one log line says why.

use crate::cuda::CudaDevice;
use crate::device_units::own_device;
use crate::scheduler::device_worker::{DeviceWorker, spawn_device_workers};
use crate::scheduler::worker::Ran;
use crate::scheduler::{Backend, Scheduler};
use hetsched_core::unit::{LinkCost, UnitClass};
use hetsched_platform::gpu::{self, GpuCalibrationOptions};
use hetsched_protocol::UnitInfo;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// Set to `0` to leave CUDA devices out (e.g. to compare with a CPU-only run).
pub(crate) const DISABLE_ENV: &str = "HETSCHED_CUDA";

/// The unit name of CUDA device `ordinal`.
pub(crate) fn unit_name(ordinal: usize) -> String {
    format!("cuda{ordinal}")
}

/// Opens and calibrates every CUDA device; none, with one log line saying
/// why, where CUDA is unusable.
pub(crate) fn discover() -> Vec<(UnitInfo, Backend, CudaDevice)> {
    if std::env::var(DISABLE_ENV).is_ok_and(|v| v == "0") {
        crate::notes::once("no-cuda", || {
            format!("no CUDA units: disabled by {DISABLE_ENV}=0")
        });
        return Vec::new();
    }
    let count = match crate::cuda::probe() {
        Ok(0) => {
            crate::notes::once("no-cuda", || {
                "no CUDA units: the CUDA driver reports no device".into()
            });
            return Vec::new();
        }
        Ok(n) => n,
        Err(e) => {
            crate::notes::once("no-cuda", || format!("no CUDA units: {e}"));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for ordinal in 0..count {
        let device = match CudaDevice::open(ordinal) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("cannot open CUDA device {ordinal}: {e}");
                continue;
            }
        };
        let (dispatch_ns, copy_in, copy_out) =
            match gpu::calibrate(ordinal, &GpuCalibrationOptions::quick()) {
                Ok(c) => (c.launch_round_trip_ns.round() as u64, c.copy_in, c.copy_out),
                Err(e) => {
                    // The model still learns kernel times; placement just
                    // cannot charge copies it has no figures for.
                    tracing::warn!(
                        "CUDA device {ordinal} not calibrated ({e}); \
                         its launch and copy costs count as 0"
                    );
                    (0, LinkCost::FREE, LinkCost::FREE)
                }
            };
        let info = device.info();
        // Copies and launches are timed apart from kernels here, so the
        // unit carries their calibrated costs.
        let unit = UnitInfo {
            coherent: false,
            copy_in,
            copy_out,
            dispatch_ns,
            ..own_device(
                unit_name(ordinal),
                format!("cuda:{}", info.name.trim()),
                UnitClass::Gpu,
            )
        };
        out.push((unit, Backend::Cuda { gated: false }, device));
    }
    out
}

/// Starts one worker per device. The model learns a call's kernel time
/// (placement adds copies from the calibration); the monitor is told the
/// device time of its kernels and copies, from CUDA events.
pub(crate) fn spawn_workers(
    sched: &Arc<Scheduler>,
    devices: Vec<DeviceWorker<CudaDevice>>,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    spawn_device_workers(sched, devices, |device, job, unit| {
        // Times of commands a failed earlier call left behind are not
        // this call's.
        let _ = device.take_times();
        let start = Instant::now();
        job.run_cuda(device, unit);
        let wall = start.elapsed().as_nanos() as f64;
        match device.take_times() {
            Ok(t) if t.kernels > 0 => Ran {
                exec_ns: t.kernel_ns,
                device_ns: (t.kernel_ns + t.copy_in_ns + t.copy_out_ns) as u64,
            },
            // No kernel timed (the implementation launched none, or the
            // device failed): the wall time is all there is.
            _ => Ran {
                exec_ns: wall,
                device_ns: wall as u64,
            },
        }
    })
}
