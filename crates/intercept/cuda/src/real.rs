//! The real driver: `dlopen("libcuda.so.1")` (or `$HETSCHED_REAL_LIBCUDA`)
//! once, on first use, and its entry points found with the real `dlsym`.
//!
//! This library exports its own `dlsym` ([`crate::dlsym`]), so nothing
//! here may call `libc::dlsym` (it would bind to that one): the real one
//! is found with `dlvsym(RTLD_NEXT, "dlsym", <glibc version>)`.

use crate::types::*;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The environment variable naming the driver to forward to.
pub const REAL_LIBCUDA_ENV: &str = "HETSCHED_REAL_LIBCUDA";
const DEFAULT_LIBCUDA: &str = "libcuda.so.1";

pub type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

/// glibc's `dlsym`, by version: 2.34 moved it into libc proper; before,
/// libdl had it at the architecture's base version.
const DLSYM_VERSIONS: &[&CStr] = &[c"GLIBC_2.34", c"GLIBC_2.2.5", c"GLIBC_2.17"];

static REAL_DLSYM: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// A `dlsym` that finds nothing, if glibc's cannot be found.
unsafe extern "C" fn no_dlsym(_: *mut c_void, _: *const c_char) -> *mut c_void {
    std::ptr::null_mut()
}

/// glibc's `dlsym`. Lock-free and allocation-free: it runs inside every
/// `dlsym` call of the process, Rust's own included.
pub fn real_dlsym() -> DlsymFn {
    let mut p = REAL_DLSYM.load(Ordering::Acquire);
    if p.is_null() {
        for v in DLSYM_VERSIONS {
            // SAFETY: both strings are NUL-terminated literals; dlvsym
            // only reads them.
            p = unsafe { libc::dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), v.as_ptr()) };
            if !p.is_null() {
                break;
            }
        }
        if p.is_null() {
            p = no_dlsym as *mut c_void;
        }
        // Racing threads store the same value.
        REAL_DLSYM.store(p, Ordering::Release);
    }
    // SAFETY: `p` is glibc's dlsym (or `no_dlsym`), whose C signature is
    // `void *dlsym(void *, const char *)`.
    unsafe { std::mem::transmute::<*mut c_void, DlsymFn>(p) }
}

/// Looks `name` up in the object behind `handle` with the real dlsym.
///
/// # Safety
/// `handle` must be a handle from `dlopen` (or a pseudo-handle).
pub unsafe fn lookup(handle: *mut c_void, name: &CStr) -> *mut c_void {
    // SAFETY: the caller vouches for `handle`; `name` is NUL-terminated.
    unsafe { real_dlsym()(handle, name.as_ptr()) }
}

macro_rules! driver {
    ($($name:ident ( $($arg:ty),* );)*) => {
        /// The real driver's entry points this library calls, `None` where
        /// the driver lacks one.
        pub struct Driver {
            pub handle: *mut c_void,
            $(pub $name: Option<unsafe extern "C" fn($($arg),*) -> CUresult>,)*
        }

        impl Driver {
            /// # Safety
            /// `handle` must be a live handle of a CUDA driver, whose
            /// symbols have the C header's signatures.
            unsafe fn resolve(handle: *mut c_void) -> Driver {
                Driver {
                    handle,
                    $($name: {
                        // SAFETY: the caller vouches for `handle`.
                        let p = unsafe {
                            lookup(handle, &CStr::from_bytes_with_nul(
                                concat!(stringify!($name), "\0").as_bytes()).expect("one NUL"))
                        };
                        // SAFETY: a driver symbol of this name has the
                        // header's signature, which the field spells.
                        (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, _>(p) })
                    },)*
                }
            }
        }
    };
}

driver! {
    cuInit(u32);
    cuCtxGetCurrent(*mut CUcontext);
    cuCtxGetDevice(*mut CUdevice);
    cuCtxPushCurrent_v2(CUcontext);
    cuCtxPopCurrent_v2(*mut CUcontext);
    cuCtxSynchronize();
    cuStreamSynchronize(CUstream);
    cuEventSynchronize(CUevent);
    cuLaunchKernel(CUfunction, u32, u32, u32, u32, u32, u32, u32, CUstream, *mut *mut c_void, *mut *mut c_void);
    cuLaunchKernelEx(CUlaunchConfigPtr, CUfunction, *mut *mut c_void, *mut *mut c_void);
    cuLaunchCooperativeKernel(CUfunction, u32, u32, u32, u32, u32, u32, u32, CUstream, *mut *mut c_void);
    cuGraphLaunch(CUgraphExec, CUstream);
    cuMemAlloc_v2(*mut CUdeviceptr, usize);
    cuMemAllocPitch_v2(*mut CUdeviceptr, *mut usize, usize, usize, u32);
    cuMemAllocManaged(*mut CUdeviceptr, usize, u32);
    cuMemAllocAsync(*mut CUdeviceptr, usize, CUstream);
    cuMemAllocFromPoolAsync(*mut CUdeviceptr, usize, CUmemoryPool, CUstream);
    cuMemFree_v2(CUdeviceptr);
    cuMemFreeAsync(CUdeviceptr, CUstream);
    cuMemcpyHtoD_v2(CUdeviceptr, *const c_void, usize);
    cuMemcpyDtoH_v2(*mut c_void, CUdeviceptr, usize);
    cuMemcpyDtoD_v2(CUdeviceptr, CUdeviceptr, usize);
    cuMemcpyHtoDAsync_v2(CUdeviceptr, *const c_void, usize, CUstream);
    cuMemcpyDtoHAsync_v2(*mut c_void, CUdeviceptr, usize, CUstream);
    cuMemcpy(CUdeviceptr, CUdeviceptr, usize);
    cuMemcpyAsync(CUdeviceptr, CUdeviceptr, usize, CUstream);
    cuMemsetD8_v2(CUdeviceptr, u8, usize);
    cuMemsetD32_v2(CUdeviceptr, u32, usize);
    cuGetProcAddress(*const c_char, *mut *mut c_void, c_int, u64);
    cuGetProcAddress_v2(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int);
    // The per-thread-default-stream variants (programs built with
    // `--default-stream per-thread`, or asking cuGetProcAddress for them).
    cuStreamSynchronize_ptsz(CUstream);
    cuLaunchKernel_ptsz(CUfunction, u32, u32, u32, u32, u32, u32, u32, CUstream, *mut *mut c_void, *mut *mut c_void);
    cuLaunchKernelEx_ptsz(CUlaunchConfigPtr, CUfunction, *mut *mut c_void, *mut *mut c_void);
    cuLaunchCooperativeKernel_ptsz(CUfunction, u32, u32, u32, u32, u32, u32, u32, CUstream, *mut *mut c_void);
    cuGraphLaunch_ptsz(CUgraphExec, CUstream);
    cuMemAllocAsync_ptsz(*mut CUdeviceptr, usize, CUstream);
    cuMemAllocFromPoolAsync_ptsz(*mut CUdeviceptr, usize, CUmemoryPool, CUstream);
    cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
    cuMemcpyHtoD_v2_ptds(CUdeviceptr, *const c_void, usize);
    cuMemcpyDtoH_v2_ptds(*mut c_void, CUdeviceptr, usize);
    cuMemcpyDtoD_v2_ptds(CUdeviceptr, CUdeviceptr, usize);
    cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr, *const c_void, usize, CUstream);
    cuMemcpyDtoHAsync_v2_ptsz(*mut c_void, CUdeviceptr, usize, CUstream);
    cuMemcpy_ptds(CUdeviceptr, CUdeviceptr, usize);
    cuMemcpyAsync_ptsz(CUdeviceptr, CUdeviceptr, usize, CUstream);
    cuMemsetD8_v2_ptds(CUdeviceptr, u8, usize);
    cuMemsetD32_v2_ptds(CUdeviceptr, u32, usize);
}

// SAFETY: the handle and the function pointers are process-wide and
// immutable once resolved; the driver's functions are thread-safe.
unsafe impl Send for Driver {}
// SAFETY: as above.
unsafe impl Sync for Driver {}

static DRIVER: OnceLock<Option<Driver>> = OnceLock::new();

/// The real driver, opened on first use; `None` if it cannot be opened
/// (no NVIDIA driver here): the exported functions then answer as a
/// missing driver would.
pub fn driver() -> Option<&'static Driver> {
    DRIVER.get_or_init(open).as_ref()
}

fn open() -> Option<Driver> {
    let path = std::env::var(REAL_LIBCUDA_ENV)
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| DEFAULT_LIBCUDA.into());
    let cpath = CString::new(path).ok()?;
    // SAFETY: `cpath` is NUL-terminated. Opening the driver runs its
    // initialisers, as the program's own dlopen of it would.
    let handle = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: `handle` was just opened; it is a CUDA driver by name.
    Some(unsafe { Driver::resolve(handle) })
}

/// The real driver's address of `name`, null if absent (or no driver).
pub fn address_of(name: &CStr) -> *mut c_void {
    match driver() {
        // SAFETY: the handle is the driver's, open for the process's life.
        Some(d) => unsafe { lookup(d.handle, name) },
        None => std::ptr::null_mut(),
    }
}
