//! Discovery and calibration of processing units.
//!
//! `hetsched-core` is pure; this crate does the Linux I/O that feeds it:
//! CPU kinds from hwloc (completed from sysfs, or from sysfs alone when hwloc
//! fails), ISA capability bits from cpuid, emulated units from configuration,
//! and per-kind dispatch overhead and copy bandwidth from a short calibration
//! cached on disk. The result is a [`Platform`] holding the core
//! [`Machine`](hetsched_core::unit::Machine) plus the PU lists executors pin to.

pub mod calibrate;
pub mod cpu;
pub mod emulated;
pub mod error;
pub mod fault_ledger;
#[cfg(feature = "cuda")]
pub mod gpu;
mod hwloc_probe;
pub mod isa;
pub mod platform;
mod probed;
pub mod slow_cores;
pub mod stop;
mod summary;
pub mod sysfs;
#[doc(hidden)]
pub mod test_support;
pub mod thread;

pub use calibrate::{Calibration, CalibrationOptions, Fingerprint, KindCalibration};
pub use cpu::{CacheSizes, CpuInfo, CpuKind, CpuTopology, SpeedBasis};
pub use emulated::EmulatedUnitConfig;
pub use error::{ConfigError, PlatformError};
pub use platform::{
    CalibrationOrigin, Platform, PlatformConfig, calibrate, calibrate_with, discover,
};
pub use slow_cores::SlowCoreConfig;
