//! The driver API's types and result codes, as the C header (`cuda.h`)
//! defines them on 64-bit Linux.

use std::ffi::c_void;

pub type CUresult = i32;
pub type CUdevice = i32;
/// A device address (`unsigned long long`).
pub type CUdeviceptr = u64;
pub type CUcontext = *mut c_void;
pub type CUstream = *mut c_void;
pub type CUevent = *mut c_void;
pub type CUfunction = *mut c_void;
pub type CUgraphExec = *mut c_void;
pub type CUmemoryPool = *mut c_void;
/// `const CUlaunchConfig *`: passed on untouched.
pub type CUlaunchConfigPtr = *const c_void;

pub const CUDA_SUCCESS: CUresult = 0;
pub const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
pub const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;
pub const CUDA_ERROR_NO_DEVICE: CUresult = 100;
pub const CUDA_ERROR_INVALID_VALUE: CUresult = 1;

/// `cuGetProcAddress` flags: the per-thread-default-stream variants
/// (`_ptsz`, `_ptds`).
pub const CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: u64 = 2;
