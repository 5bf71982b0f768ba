//! hetsched's CUDA driver-API interposer, for unmodified programs:
//! `LD_PRELOAD=libhetsched_cuda_intercept.so program`.
//!
//! It exports the driver entry points that launch, copy, allocate, free
//! and synchronise, and forwards each to the real driver
//! (`libcuda.so.1`, or `$HETSCHED_REAL_LIBCUDA`) after asking the
//! program's [`hetsched_intercept::Governor`]: launches and copies wait
//! for the device's time-slice lease, allocations count against the
//! device-memory cap. Programs that find the driver's functions
//! themselves are caught too: through `cuGetProcAddress`
//! ([`proc_address`]) and through `dlsym` on a handle of the driver
//! ([`dlsym`]). Without a daemon every call passes through.

// A driver interposer is foreign-function code through and through: it
// exports C functions under the driver's names, calls the real driver
// through pointers found with dlsym, and writes through the pointers the
// program hands it. Every unsafe block says why it holds (`SAFETY:`).
#![allow(unsafe_code)]
// The exported functions carry the driver's names and signatures.
#![allow(non_snake_case)]
#![allow(clippy::too_many_arguments)]
// The exported functions' contract is the CUDA driver API's, documented
// by NVIDIA; they are called by C programs, not by Rust.
#![allow(clippy::missing_safety_doc)]

pub mod devices;
pub mod dlsym;
pub mod hooks_launch;
pub mod hooks_memory;
pub mod proc_address;
pub mod real;
pub mod types;
