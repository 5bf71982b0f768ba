//! Launches and copies, which wait for the device's lease and hold it
//! across the driver call; synchronisation, after which a due lease goes
//! back; and `cuInit`, which answers as a missing driver would.

use crate::devices::{gate, synchronized, wait_begins};
use crate::real::driver;
use crate::types::*;
use std::ffi::c_void;

/// `cuInit`: forwarded; `CUDA_ERROR_NO_DEVICE` without a driver.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuInit(flags: u32) -> CUresult {
    let Some(real) = driver().and_then(|d| d.cuInit) else {
        return CUDA_ERROR_NO_DEVICE;
    };
    // SAFETY: forwarded unchanged to the driver's cuInit.
    unsafe { real(flags) }
}

/// Exports each function under the driver's name: it waits for the lease
/// of the current device, then calls the real one holding it.
macro_rules! gated {
    ($($name:ident ( $($arg:ident : $ty:ty),* );)*) => {$(
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
            let Some(real) = driver().and_then(|d| d.$name) else {
                return CUDA_ERROR_NOT_INITIALIZED;
            };
            let _lease = gate();
            // SAFETY: the program's arguments, passed on unchanged to the
            // driver function of the same name and signature.
            unsafe { real($($arg),*) }
        }
    )*};
}

gated! {
    cuLaunchKernel(f: CUfunction, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32,
        shared: u32, stream: CUstream, params: *mut *mut c_void, extra: *mut *mut c_void);
    cuLaunchKernelEx(config: CUlaunchConfigPtr, f: CUfunction, params: *mut *mut c_void,
        extra: *mut *mut c_void);
    cuLaunchCooperativeKernel(f: CUfunction, gx: u32, gy: u32, gz: u32, bx: u32, by: u32,
        bz: u32, shared: u32, stream: CUstream, params: *mut *mut c_void);
    cuGraphLaunch(exec: CUgraphExec, stream: CUstream);
    cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, bytes: usize);
    cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, bytes: usize);
    cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize);
    cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, bytes: usize, stream: CUstream);
    cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, bytes: usize, stream: CUstream);
    cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize);
    cuMemcpyAsync(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, stream: CUstream);
    cuMemsetD8_v2(dst: CUdeviceptr, value: u8, n: usize);
    cuMemsetD32_v2(dst: CUdeviceptr, value: u32, n: usize);
}

// The per-thread-default-stream variants, governed alike.
gated! {
    cuLaunchKernel_ptsz(f: CUfunction, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32,
        shared: u32, stream: CUstream, params: *mut *mut c_void, extra: *mut *mut c_void);
    cuLaunchKernelEx_ptsz(config: CUlaunchConfigPtr, f: CUfunction, params: *mut *mut c_void,
        extra: *mut *mut c_void);
    cuLaunchCooperativeKernel_ptsz(f: CUfunction, gx: u32, gy: u32, gz: u32, bx: u32, by: u32,
        bz: u32, shared: u32, stream: CUstream, params: *mut *mut c_void);
    cuGraphLaunch_ptsz(exec: CUgraphExec, stream: CUstream);
    cuMemcpyHtoD_v2_ptds(dst: CUdeviceptr, src: *const c_void, bytes: usize);
    cuMemcpyDtoH_v2_ptds(dst: *mut c_void, src: CUdeviceptr, bytes: usize);
    cuMemcpyDtoD_v2_ptds(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize);
    cuMemcpyHtoDAsync_v2_ptsz(dst: CUdeviceptr, src: *const c_void, bytes: usize,
        stream: CUstream);
    cuMemcpyDtoHAsync_v2_ptsz(dst: *mut c_void, src: CUdeviceptr, bytes: usize,
        stream: CUstream);
    cuMemcpy_ptds(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize);
    cuMemcpyAsync_ptsz(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, stream: CUstream);
    cuMemsetD8_v2_ptds(dst: CUdeviceptr, value: u8, n: usize);
    cuMemsetD32_v2_ptds(dst: CUdeviceptr, value: u32, n: usize);
}

/// Exports each function under the driver's name: the real one, then the
/// governor told that the program waited for its work.
macro_rules! synchronizing {
    ($($name:ident ( $($arg:ident : $ty:ty),* );)*) => {$(
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> CUresult {
            let Some(real) = driver().and_then(|d| d.$name) else {
                return CUDA_ERROR_NOT_INITIALIZED;
            };
            let waiting = wait_begins();
            // SAFETY: the program's arguments, passed on unchanged to the
            // driver function of the same name and signature.
            let r = unsafe { real($($arg),*) };
            synchronized(waiting);
            r
        }
    )*};
}

synchronizing! {
    cuCtxSynchronize();
    cuStreamSynchronize(stream: CUstream);
    cuEventSynchronize(event: CUevent);
    cuStreamSynchronize_ptsz(stream: CUstream);
}
