//! The seam between the daemon and one API of real devices (OpenCL,
//! CUDA): how it lists the API's devices for gated units
//! ([`crate::devices`]), opens them to serve kernels
//! ([`crate::launch`]), and how a kernel executor process opens one for
//! registered kernels ([`super::executor_main`]). Each API is one
//! [`DeviceApi`] and one line of [`super::apis::all`]; what runs a call
//! on an opened device is its [`KernelBackend`].

use super::KernelBackend;
use hetsched_core::unit::UnitClass;

/// One API of real devices, as the daemon drives it.
pub trait DeviceApi: Sync {
    /// Its name in units and kinds: gated units are `<name><N>`, served
    /// ones `served-<name><N>`, and kinds `<name>:<device name>` (the
    /// runtime names the same device the same way).
    fn name(&self) -> &'static str;

    /// Its name in messages (`OpenCL`).
    fn label(&self) -> &'static str;

    /// The configuration key that asks the daemon to serve its devices
    /// (`opencl_units`; [`crate::config::DaemonConfig::serves`]).
    fn config_key(&self) -> &'static str;

    /// Its devices, without opening a context (listing a device must not
    /// take its memory or its driver threads); why there are none where
    /// the driver is absent.
    fn list(&self) -> Result<Vec<ListedDevice>, String>;

    /// Opens every device that opens, each with the backend that runs its
    /// built-in kernels (a device that does not open is logged and left
    /// out); why there are none where the driver is absent. A client may
    /// keep up to `max_kept_bytes` on each between calls of its
    /// registered kernels.
    fn open_served(&self, max_kept_bytes: u64) -> Result<Vec<ServedDevice>, String>;

    /// Opens device `index` in a kernel executor process, for clients'
    /// registered kernels only, letting a client keep `max_kept_bytes` on
    /// it between calls.
    fn open_for_executor(
        &self,
        index: usize,
        max_kept_bytes: u64,
    ) -> Result<ExecutorDevice, String>;
}

/// A device an API lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedDevice {
    /// Its index in the API's own enumeration (what a runtime opening it
    /// uses too).
    pub index: usize,
    /// The device's name, as the driver gives it.
    pub name: String,
    pub class: UnitClass,
}

/// A device opened to serve kernels.
pub struct ServedDevice {
    pub listed: ListedDevice,
    pub backend: Box<dyn KernelBackend>,
}

/// A device a kernel executor process opened.
pub struct ExecutorDevice {
    /// The device's name, for the daemon's log.
    pub name: String,
    pub backend: Box<dyn KernelBackend>,
}
