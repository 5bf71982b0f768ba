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

use super::{CudaDevice, CudaError};
use crate::device_backend::{DeviceBackend, DeviceCall, DeviceRunner, OpenedDevice, Ran};
use crate::task::Task;
use hetsched_core::unit::{LinkCost, UnitClass};
use hetsched_platform::gpu::{self, GpuCalibrationOptions};
use std::time::Instant;

/// CUDA as a device backend of the runtime: every device the driver
/// reports, calibrated as it opens.
pub(crate) struct CudaBackend;

impl DeviceBackend for CudaBackend {
    fn api(&self) -> &'static str {
        CUDA_API
    }

    fn open(&self) -> Vec<OpenedDevice> {
        discover()
    }
}

/// The name CUDA devices and their implementations go by.
pub(crate) const CUDA_API: &str = "cuda";

/// The unit name of CUDA device `ordinal`.
pub(crate) fn unit_name(ordinal: usize) -> String {
    format!("cuda{ordinal}")
}

/// Opens and calibrates every CUDA device; none, with one log line saying
/// why, where CUDA is unusable.
fn discover() -> Vec<OpenedDevice> {
    if let Some(why) = hetsched_cuda::switched_off() {
        crate::notes::once("no-cuda", || format!("no CUDA units: {why}"));
        return Vec::new();
    }
    let count = match super::probe() {
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
        let kind = format!("cuda:{}", device.info().name.trim());
        let mut opened = OpenedDevice::new(
            unit_name(ordinal),
            kind,
            UnitClass::Gpu,
            Box::new(CudaRunner(device)),
        );
        // Copies and launches are timed apart from kernels here, so the
        // unit carries their calibrated costs.
        opened.info = opened
            .info
            .with_coherent(false)
            .with_costs(dispatch_ns, copy_in, copy_out);
        out.push(opened);
    }
    out
}

/// One CUDA device, owned by its worker. The model learns a call's kernel
/// time (placement adds copies from the calibration); the monitor is told
/// the device time of its kernels and copies, from CUDA events.
struct CudaRunner(CudaDevice);

impl DeviceRunner for CudaRunner {
    fn run(&mut self, call: &mut DeviceCall<'_>) -> Ran {
        let device = &self.0;
        // Times of commands a failed earlier call left behind are not
        // this call's.
        let _ = device.take_times();
        let start = Instant::now();
        call.run_on(device);
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
    }
}

impl<A: Send + 'static, R: Send + 'static> Task<A, R> {
    /// The implementation on CUDA devices (feature `cuda`). It gets the
    /// device and issues its own uploads, launches and downloads (see
    /// [`crate::cuda::kernels`]); the device time of its kernels, from CUDA
    /// events, is what the model learns, while the unit's calibrated launch
    /// and copy costs cover the rest (so give [`Task::sizes`]).
    pub fn cuda(
        self,
        f: impl Fn(&CudaDevice, &A) -> Result<R, CudaError> + Send + Sync + 'static,
    ) -> Self {
        self.on_device(CUDA_API, move |device: &CudaDevice, a: &A| {
            f(device, a).map_err(|e| e.to_string())
        })
    }
}
