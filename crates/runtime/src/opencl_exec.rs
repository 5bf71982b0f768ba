//! The OpenCL executor (feature `opencl`): one worker thread owns each
//! OpenCL device (an in-order queue), so calls on it run one at a time.
//! A device the monitor arbitrates is the monitor's unit and each run of
//! calls waits for its agent ([`crate::scheduler::gate_exec`]); any other is a unit
//! this process drives itself ([`crate::device_units`]).
//!
//! The model learns a call's wall time, copies included: an OpenCL
//! implementation issues its own copies, so the unit is given no separate
//! copy cost and placement does not count them twice.

use crate::device_backend::{
    DeviceBackend, DeviceCall, DeviceRunner, OPENCL_API, OpenedDevice, Ran,
};
use crate::task::Task;
use hetsched_core::unit::UnitClass;
use hetsched_opencl::{DeviceKind, OpenClDevice, OpenClError};
use std::time::Instant;

/// OpenCL as a device backend of the runtime: every device of the ICD
/// loader.
pub(crate) struct OpenClBackend;

impl DeviceBackend for OpenClBackend {
    fn api(&self) -> &'static str {
        OPENCL_API
    }

    fn open(&self) -> Vec<OpenedDevice> {
        discover()
    }
}

/// Opens every OpenCL device; none (with one log line saying why) where
/// OpenCL is absent.
fn discover() -> Vec<OpenedDevice> {
    let infos = match hetsched_opencl::devices() {
        Ok(d) => d,
        Err(e) => {
            crate::notes::once("no-opencl", || format!("no OpenCL units: {e}"));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for info in infos {
        let device = match OpenClDevice::open(info.index) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("cannot open OpenCL device {}: {e}", info.name);
                continue;
            }
        };
        let on_cpu = info.kind == DeviceKind::Cpu;
        let mut opened = OpenedDevice::new(
            unit_name(info.index),
            format!("opencl:{}", info.name.trim()),
            if info.kind == DeviceKind::Gpu {
                UnitClass::Gpu
            } else {
                UnitClass::Accelerator
            },
            Box::new(OpenClRunner(device)),
        );
        // The first CPU kind: PoCL spreads its work over all host cores.
        opened.host_cpu_kind = on_cpu.then_some(0);
        opened.cores = info.compute_units.max(1);
        out.push(opened);
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

/// One OpenCL device, owned by its worker. The model learns a call's
/// wall time (copies included), except for a call that compiled its
/// kernel; the monitor is told the device time of its copies and
/// launches, from the profiling events.
struct OpenClRunner(OpenClDevice);

impl DeviceRunner for OpenClRunner {
    fn run(&mut self, call: &mut DeviceCall<'_>) -> Ran {
        let device = &self.0;
        let device_before = device.device_ns_total();
        let programs_before = device.cached_programs();
        let start = Instant::now();
        call.run_on(device);
        let wall = start.elapsed().as_nanos() as f64;
        // A call that built its program first (a task's first call on the
        // device) took the compiler's time too: the model skips it.
        let compiled = device.cached_programs() > programs_before;
        Ran {
            exec_ns: if compiled { f64::NAN } else { wall },
            device_ns: device.device_ns_total().saturating_sub(device_before),
        }
    }
}

impl<A: Send + 'static, R: Send + 'static> Task<A, R> {
    /// The implementation on OpenCL devices (feature `opencl`). It gets the
    /// device and does its own explicit copies and launches; its wall time,
    /// copies included, is what the model learns for the device.
    pub fn opencl(
        self,
        f: impl Fn(&OpenClDevice, &A) -> Result<R, OpenClError> + Send + Sync + 'static,
    ) -> Self {
        self.on_device(OPENCL_API, move |device: &OpenClDevice, a: &A| {
            f(device, a).map_err(|e| e.to_string())
        })
    }
}
