//! The seam between the runtime and one kind of device it drives itself
//! (OpenCL, CUDA, or one a program adds): a [`DeviceBackend`] opens the
//! devices, each an [`OpenedDevice`] whose [`DeviceRunner`] runs calls on
//! it from its own worker thread. A task's implementation for the kind is
//! given with [`crate::Task::on_device`] under the backend's
//! [`DeviceBackend::api`] name.
//!
//! The built-in backends are one line each in `device_backends.rs`; a
//! program adds its own with [`crate::RuntimeOptions::backend`]. Whatever
//! the backend, the runtime gives each device a unit (the monitor's unit
//! for the same device when the monitor arbitrates it, so every run of
//! calls waits for its agent; else one of its own), places calls on it
//! and learns from what the runner measured.

use crate::job::Job;
use hetsched_core::ids::UnitId;
use hetsched_core::unit::UnitClass;
use hetsched_protocol::UnitInfo;
use std::any::Any;
use std::sync::Arc;

/// The name OpenCL devices and their implementations go by.
pub(crate) const OPENCL_API: &str = "opencl";

/// One kind of device the runtime drives itself.
pub trait DeviceBackend: Send + Sync + 'static {
    /// The name its devices' implementations go by (`opencl`, `cuda`):
    /// a task's implementation for it is given under this name. Unit
    /// kinds are `<api>:<device name>` by convention, the kind the daemon
    /// gives the same device, so models carry over.
    fn api(&self) -> &'static str;

    /// Opens every device of this kind; none where the kind is unusable
    /// here (saying why, once).
    fn open(&self) -> Vec<OpenedDevice>;
}

/// What running one call cost, as a device's runner measured it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ran {
    /// What the model learns, ns; NaN when the call's time says nothing
    /// about the next one's (it compiled a kernel first).
    pub exec_ns: f64,
    /// The device's own measure of the work (profiling events), ns; 0 on
    /// a CPU.
    pub device_ns: u64,
}

/// The backends a program added to the built-in ones, in order.
#[derive(Clone, Default)]
pub struct AddedBackends(pub Vec<Arc<dyn DeviceBackend>>);

impl std::fmt::Debug for AddedBackends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|b| b.api()))
            .finish()
    }
}

/// A device a backend opened, before the runtime gives it a unit.
pub struct OpenedDevice {
    /// The unit it asks for: its name, kind and costs (the id is given
    /// later).
    pub info: UnitInfo,
    /// For a device on the host CPU (PoCL) that no monitor arbitrates:
    /// the CPU kind whose cores it shares with everything else, so its
    /// view is that kind's.
    pub host_cpu_kind: Option<usize>,
    /// Its parallelism, for that view and for pipelines.
    pub cores: u32,
    /// What runs its calls; moved to its worker thread.
    pub runner: Box<dyn DeviceRunner>,
}

impl OpenedDevice {
    /// A device named `name` (its unit's name) of kind `kind`: one call at
    /// a time, no copy cost (its implementations issue their own copies,
    /// timed with the call), on no CPU kind's cores; its unit's number is
    /// given later ([`crate::device_units`]).
    pub fn new(
        name: impl Into<String>,
        kind: impl Into<String>,
        class: UnitClass,
        runner: Box<dyn DeviceRunner>,
    ) -> OpenedDevice {
        OpenedDevice {
            info: UnitInfo::new(UnitId(0), name, kind, class),
            host_cpu_kind: None,
            cores: 1,
            runner,
        }
    }
}

/// One opened device, owned by its worker thread.
pub trait DeviceRunner: Send + 'static {
    /// Runs one call on the device ([`DeviceCall::run_on`]) and says what
    /// it cost.
    fn run(&mut self, call: &mut DeviceCall<'_>) -> Ran;
}

/// A call placed on a device's unit, as its runner sees it.
pub struct DeviceCall<'a> {
    api: &'static str,
    unit: &'a str,
    job: &'a mut dyn Job,
}

impl<'a> DeviceCall<'a> {
    pub(crate) fn new(api: &'static str, unit: &'a str, job: &'a mut dyn Job) -> DeviceCall<'a> {
        DeviceCall { api, unit, job }
    }

    /// Runs the task's implementation for this backend on `device`, the
    /// value its implementations take (`&D` for an implementation given
    /// as `Fn(&D, &A)`), and keeps the outcome for the caller.
    pub fn run_on(&mut self, device: &dyn Any) {
        self.job.run_device(self.api, device, self.unit);
    }

    /// The unit's name.
    pub fn unit(&self) -> &str {
        self.unit
    }
}
