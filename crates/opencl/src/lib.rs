//! A small, safe wrapper over OpenCL for hetsched's runtime executor.
//!
//! The executor owns one [`OpenClDevice`] per device, compiles kernels from
//! source ([`OpenClDevice::build`], cached per source), moves data with
//! explicit blocking copies ([`OpenClDevice::write`] / [`OpenClDevice::read`])
//! and launches kernels ([`OpenClDevice::launch`]); every command reports the
//! device's profiled time and the host's wall time ([`Timing`]).
//! [`OpenClDevice::calibrate`] measures the dispatch and copy costs that
//! placement needs.
//!
//! libOpenCL is loaded at run time (opencl3's `dynamic` feature), so a binary
//! built with this crate starts on a machine without OpenCL and [`devices`]
//! answers [`OpenClError::NoPlatform`].
//!
//! [`kernels`] holds ready-made tasks (byte histogram, AES-128-CTR) and
//! [`reference`](mod@reference) their CPU versions, so a task can run on either unit.
//!
//! All `unsafe` lives in one private module, `device::ffi` (`device/ffi.rs`),
//! each block with its reasoning.

mod calibrate;
mod device;
mod error;
pub mod kernels;
pub mod reference;

pub use calibrate::{Calibration, CalibrationOptions};
pub use device::{
    DeviceBuffer, DeviceInfo, DeviceKind, HostMemory, Kernel, KernelArg, OpenClDevice, Param,
    ParamKind, RawHandles, Timing, devices,
};
pub use error::{OpenClError, Result};
