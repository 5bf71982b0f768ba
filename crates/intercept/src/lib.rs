//! The part of hetsched's interposers that knows nothing of any device
//! API: a program's [`Governor`].
//!
//! An unmodified program (PyTorch, a pyopencl script, clpeak, any CUDA
//! binary) drives its device itself. The OpenCL layer
//! (`hetsched-opencl-layer`, loaded by the ICD loader through
//! `OPENCL_LAYERS`) and the CUDA interposer (`LD_PRELOAD`) sit on its
//! driver API and ask the governor before each launch, copy and
//! allocation:
//!
//! - **Leases.** The first launch on a device asks the device's agent in
//!   the daemon for a time-slice lease (`RequestLease`). While it lasts,
//!   a launch costs two atomic operations, a clock read and a store. When
//!   it ends the program's launches wait; a program still busy on the
//!   device (in a launch, waiting for its work, or active within a lease
//!   length) asks for its next lease first (so the policy chooses by
//!   shares); what it
//!   queued drains (the API's own finish), and the lease goes back
//!   (`TaskCompleted`): the agent charges
//!   the wall time from grant to release, so a kernel that runs past the
//!   lease is charged and delays the next one. Kernels are never
//!   preempted. Unless the daemon said that someone waits (`LeaseDue`,
//!   sent once another request queues for the device), the lease is
//!   extended instead, with no round trip.
//! - **Device memory.** Allocations are counted per device; one that
//!   would pass the cap (`hetsched run --device-memory`, or the daemon's
//!   `[device_memory]` for the program's class) is refused, and the
//!   interposer answers with its API's out-of-memory code.
//! - **No daemon.** Every call passes through, one line says so, and the
//!   governor tries again once a second, so a restarted daemon governs
//!   the program again.

mod clock;
mod env;
mod fork;
mod governor;
mod handle_map;
mod lease;
mod link;
mod memory;
mod notice;

pub use clock::now_ns;
pub use env::{DEVICE_MEMORY_ENV, InterceptEnv};
pub use governor::{Governor, GovernorSetup, LaunchGuard};
pub use handle_map::HandleMap;
pub use hetsched_protocol::InterceptApi;
pub use memory::MemoryAccount;
