//! CUDA devices: a small safe layer over `cudarc` for the runtime's CUDA
//! executor (feature `cuda` of `hetsched-runtime`, which re-exports this
//! crate as `hetsched_runtime::cuda`), for CUDA implementations of tasks,
//! and for the daemon's CUDA backend (feature `cuda` of `hetsched-daemon`).
//!
//! * [`CudaDevice`] — one device: its context and the one stream every
//!   command goes to, kernels compiled at run time with NVRTC (cached per
//!   source), device buffers, uploads and downloads staged through pinned
//!   host memory and issued asynchronously on the stream, and CUDA events
//!   timing every kernel and copy ([`CudaDevice::take_times`]).
//! * [`kernels`] — ready-made tasks (AES-128-CTR, byte histogram, a D2Q9
//!   lattice-Boltzmann stencil) from the CUDA C sources in
//!   `src/cuda_kernels/`, and [`reference`](mod@reference) their CPU versions, which the
//!   kernels equal exactly.
//! * [`PtxKernel`] — a kernel of a PTX module loaded at run time (what a
//!   client registers with the daemon's CUDA unit), launched with raw
//!   arguments ([`PtxArg`]) checked against its parameters' sizes.
//!
//! The CUDA driver and NVRTC are loaded at run time, so a binary built with
//! this crate starts where they are absent: [`probe`] then says why, and
//! the runtime and the daemon have no CUDA unit.
//!
//! `unsafe` is allowed in `device` and [`kernels`] only (allocating
//! pinned memory and launching kernels are `unsafe fn` in cudarc), each
//! block with its reasoning.

mod device;
pub mod kernels;
pub mod reference;

pub use cudarc;
pub use device::{
    CudaDevice, CudaDeviceInfo, CudaError, DISABLE_ENV, DeviceTimes, MAX_BLOCK, MAX_PENDING_TIMES,
    Pod, PtxArg, PtxKernel, device_names, linear_launch, probe, switched_off,
};
