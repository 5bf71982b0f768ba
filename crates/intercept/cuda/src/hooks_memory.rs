//! Allocations, counted against the device's cap before the driver sees
//! them, and frees, which take the count back.

use crate::devices::{current, governor};
use crate::real::driver;
use crate::types::*;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};

/// What each live allocation was counted as: device index and bytes.
static ALLOCATIONS: LazyLock<Mutex<HashMap<CUdeviceptr, (usize, u64)>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn allocations() -> MutexGuard<'static, HashMap<CUdeviceptr, (usize, u64)>> {
    ALLOCATIONS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Device memory this process holds by the interposer's count, bytes
/// (what the governor counts, summed over devices).
pub fn counted_bytes() -> u64 {
    allocations().values().map(|&(_, b)| b).sum()
}

/// Counts `bytes` on the current device, then allocates with `alloc`
/// (which writes the address to `dptr`): out of memory, without calling
/// the driver, past the cap; the count taken back if the driver fails.
///
/// # Safety
/// `dptr` must be what the program passed to the allocation function.
unsafe fn counted(
    dptr: *mut CUdeviceptr,
    bytes: usize,
    alloc: impl FnOnce() -> CUresult,
) -> CUresult {
    let Some(index) = current() else {
        return alloc();
    };
    let bytes = bytes as u64;
    let g = governor();
    if !g.try_allocate(index, bytes) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    let r = alloc();
    if r != CUDA_SUCCESS || dptr.is_null() {
        g.freed(index, bytes);
        return r;
    }
    // SAFETY: the driver succeeded, so it wrote the address to `dptr`.
    let ptr = unsafe { *dptr };
    if let Some((old_index, old_bytes)) = allocations().insert(ptr, (index, bytes)) {
        // An address the driver reuses was freed behind our back
        // (asynchronously, through a pool): its old count goes.
        g.freed(old_index, old_bytes);
    }
    r
}

/// Takes back the count of `ptr` once `free` succeeded.
fn uncounted(ptr: CUdeviceptr, free: impl FnOnce() -> CUresult) -> CUresult {
    let r = free();
    if r == CUDA_SUCCESS
        && let Some((index, bytes)) = allocations().remove(&ptr)
    {
        governor().freed(index, bytes);
    }
    r
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytes: usize) -> CUresult {
    let Some(real) = driver().and_then(|d| d.cuMemAlloc_v2) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the program's arguments, passed on unchanged.
    unsafe { counted(dptr, bytes, || real(dptr, bytes)) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocManaged(
    dptr: *mut CUdeviceptr,
    bytes: usize,
    flags: u32,
) -> CUresult {
    let Some(real) = driver().and_then(|d| d.cuMemAllocManaged) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the program's arguments, passed on unchanged.
    unsafe { counted(dptr, bytes, || real(dptr, bytes, flags)) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> CUresult {
    let Some(real) = driver().and_then(|d| d.cuMemAllocAsync) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the program's arguments, passed on unchanged.
    unsafe { counted(dptr, bytes, || real(dptr, bytes, stream)) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocFromPoolAsync(
    dptr: *mut CUdeviceptr,
    bytes: usize,
    pool: CUmemoryPool,
    stream: CUstream,
) -> CUresult {
    let Some(real) = driver().and_then(|d| d.cuMemAllocFromPoolAsync) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the program's arguments, passed on unchanged.
    unsafe { counted(dptr, bytes, || real(dptr, bytes, pool, stream)) }
}

/// `cuMemAllocPitch_v2`: the size is the driver's (pitch × height), known
/// only after it allocated, so the count comes after, and an allocation
/// past the cap is freed again and refused.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocPitch_v2(
    dptr: *mut CUdeviceptr,
    pitch: *mut usize,
    width: usize,
    height: usize,
    element: u32,
) -> CUresult {
    let Some(real) = driver().and_then(|d| d.cuMemAllocPitch_v2) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the program's arguments, passed on unchanged.
    let r = unsafe { real(dptr, pitch, width, height, element) };
    if r != CUDA_SUCCESS || dptr.is_null() || pitch.is_null() {
        return r;
    }
    let Some(index) = current() else { return r };
    // SAFETY: the driver succeeded, so it wrote both out-values.
    let (ptr, bytes) = unsafe { (*dptr, (*pitch as u64).saturating_mul(height as u64)) };
    let g = governor();
    if !g.try_allocate(index, bytes) {
        if let Some(free) = driver().and_then(|d| d.cuMemFree_v2) {
            // SAFETY: `ptr` was just allocated by the driver.
            unsafe { free(ptr) };
        }
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if let Some((i, b)) = allocations().insert(ptr, (index, bytes)) {
        g.freed(i, b);
    }
    r
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFree_v2(ptr: CUdeviceptr) -> CUresult {
    let Some(real) = driver().and_then(|d| d.cuMemFree_v2) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the program's argument, passed on unchanged.
    uncounted(ptr, || unsafe { real(ptr) })
}

/// `cuMemFreeAsync`: the count goes when the free is queued.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFreeAsync(ptr: CUdeviceptr, stream: CUstream) -> CUresult {
    let Some(real) = driver().and_then(|d| d.cuMemFreeAsync) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the program's arguments, passed on unchanged.
    uncounted(ptr, || unsafe { real(ptr, stream) })
}

/// `cuMemAllocAsync_ptsz`: as [`cuMemAllocAsync`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocAsync_ptsz(
    dptr: *mut CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> CUresult {
    let Some(real) = driver().and_then(|d| d.cuMemAllocAsync_ptsz) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the program's arguments, passed on unchanged.
    unsafe { counted(dptr, bytes, || real(dptr, bytes, stream)) }
}

/// `cuMemAllocFromPoolAsync_ptsz`: as [`cuMemAllocFromPoolAsync`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocFromPoolAsync_ptsz(
    dptr: *mut CUdeviceptr,
    bytes: usize,
    pool: CUmemoryPool,
    stream: CUstream,
) -> CUresult {
    let Some(real) = driver().and_then(|d| d.cuMemAllocFromPoolAsync_ptsz) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the program's arguments, passed on unchanged.
    unsafe { counted(dptr, bytes, || real(dptr, bytes, pool, stream)) }
}

/// `cuMemFreeAsync_ptsz`: as [`cuMemFreeAsync`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemFreeAsync_ptsz(ptr: CUdeviceptr, stream: CUstream) -> CUresult {
    let Some(real) = driver().and_then(|d| d.cuMemFreeAsync_ptsz) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the program's arguments, passed on unchanged.
    uncounted(ptr, || unsafe { real(ptr, stream) })
}
