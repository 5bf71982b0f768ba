//! hetsched-runtime: what applications link against (Rinnegan's libadept).
//!
//! Write a task once per kind of unit, call [`Runtime::accelerate`], and the
//! runtime runs it where it is predicted to finish soonest *given everyone
//! else on the machine*: the prediction is hetsched-core's placement
//! (`dispatch + copy + exec / expected utilisation`, with the speedup
//! threshold, aggregation and ping-pong damping) over the views the
//! monitor publishes in shared memory.
//!
//! ```no_run
//! use hetsched_runtime::{Mode, Runtime, Task};
//! use std::time::Duration;
//!
//! let rt = Runtime::connect("checksum")?;
//! let task = Task::new("checksum")
//!     .cpu(|data: &Vec<u8>| data.iter().map(|&b| u64::from(b)).sum::<u64>())
//!     .emulated(
//!         "emu-gpu",
//!         |data: &Vec<u8>| Duration::from_nanos(data.len() as u64 / 8),
//!         |data: &Vec<u8>| data.iter().map(|&b| u64::from(b)).sum::<u64>(),
//!     )
//!     .sizes(|data| (data.len() as u64, 8));
//! let sum = rt.accelerate(&task, vec![1u8; 1 << 20], Mode::Sync)?.wait()?;
//! assert_eq!(sum, 1 << 20);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Where the monitor lives: with a daemon running, the runtime is one of its
//! clients; with none, it starts an *embedded* monitor in-process (the
//! daemon's own server on a private socket), so a lone application needs no
//! set-up. If the daemon goes away mid-run, device work in flight is
//! re-queued and the runtime carries on with the restarted daemon or, failing
//! that, an embedded monitor: no task is lost.
//!
//! Modules, by concern:
//! * [`task`] — tasks and their implementations per unit kind;
//! * `handle` — the handle a call returns, and completion counting;
//! * `scheduler` — the central queue, short per-unit queues, placement;
//! * `slot` — one task's model and placer in this runtime, as placement
//!   reads them;
//! * `cpu_exec` — pinned CPU workers per kind, on the scheduler's worker
//!   loop (`scheduler/worker.rs`);
//! * [`device_backend`] — what a kind of device this process drives
//!   itself implements ([`DeviceBackend`]); `device_backends` lists the
//!   built-in ones: OpenCL (`opencl_exec`, feature `opencl`) and CUDA
//!   (`cuda/exec.rs`, feature `cuda`, with [`cuda`] its device layer and
//!   kernels); `device_units` gives each device its unit; emulated devices
//!   served by the monitor and devices behind the dispatch gate are the
//!   scheduler's own (`scheduler/device_exec.rs`, `scheduler/gate_exec.rs`);
//! * `link` — the connection to the monitor and failover (the embedded
//!   monitor itself is `hetsched_monitor::embedded`);
//! * [`model_store`] — task models persisted across runs;
//! * [`pipeline`] — streaming pipelines driven by a controller thread from
//!   hetsched-core's pipelining table (APC);
//! * `optimizer` — the goal optimizer thread (the ladder itself is
//!   hetsched-core's `optimizer`).

mod buffer;
mod cpu_exec;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device_backend;
mod device_backends;
mod device_units;
mod handle;
mod job;
mod link;
pub mod logging;
pub mod model_store;
// What the built-in device backends say once per process.
#[cfg_attr(not(feature = "opencl"), allow(dead_code))]
mod notes;
#[cfg(feature = "opencl")]
mod opencl_exec;
mod optimizer;
mod options;
pub mod pipeline;
mod runtime;
mod scheduler;
mod slot;
pub mod task;

pub use buffer::Buffer;
pub use device_backend::{DeviceBackend, DeviceCall, DeviceRunner, OpenedDevice, Ran};
pub use handle::{Handle, TaskError};
pub use optimizer::{Adjustment, GoalStatus, PerformanceGoal};
pub use options::{MonitorMode, RuntimeOptions};
pub use pipeline::{Pipeline, PipelineBuilder, PipelineError, PipelineStats, Stage};
pub use runtime::{Mode, Runtime, RuntimeError, RuntimeStats, UnitStats};
pub use task::{CpuCtx, Task};

#[cfg(feature = "opencl")]
pub use hetsched_opencl as opencl;

/// Whether this build of the runtime drives OpenCL devices (its feature
/// `opencl`, which Cargo may have turned on for another crate of the same
/// build): programs ask this rather than their own features.
pub const OPENCL: bool = cfg!(feature = "opencl");

/// How many OpenCL devices this build of the runtime finds, or why none
/// (no OpenCL in this build, no ICD, no device).
pub fn opencl_devices() -> Result<usize, String> {
    #[cfg(feature = "opencl")]
    {
        match hetsched_opencl::devices() {
            Ok(d) if !d.is_empty() => Ok(d.len()),
            Ok(_) => Err("OpenCL has no device here".into()),
            Err(e) => Err(format!("no OpenCL here: {e}")),
        }
    }
    #[cfg(not(feature = "opencl"))]
    {
        Err("this build of hetsched-runtime has no OpenCL (its feature `opencl`)".into())
    }
}

pub use hetsched_core::balance::Category;
pub use hetsched_core::optimizer::{Direction, OptimizerConfig};
pub use hetsched_core::placement::{Goal, PlacementConfig};
/// Counts one capability fallback of the calling thread (a software path
/// taken because the core lacks an instruction set extension) for the
/// thread balancer's functional kinship; see `docs/balance.md`.
pub use hetsched_platform::fault_ledger::report_fallback as report_capability_fallback;
pub use hetsched_protocol::UnitInfo;
