//! `cuGetProcAddress` and `cuGetProcAddress_v2`: the CUDA runtime (11.3
//! on) finds every driver entry point through them, by base name and
//! the CUDA version it was built for. Each is forwarded; where the name
//! and version ask for an ABI one of this library's functions has, and
//! the driver answered with exactly the function that one forwards to,
//! the answer is replaced by ours. Asked with
//! `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`, the driver answers
//! with a name's per-thread-default-stream variant (`_ptsz`, `_ptds`)
//! where it has one; those are ours too.

use crate::devices::notice_once;
use crate::real::{address_of, driver};
use crate::types::*;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::atomic::AtomicBool;

/// One base name: from `since` (a `cudaVersion`, 1000 × major + 10 ×
/// minor) up to `until` (excluded) it means the ABI of `export`, the
/// driver symbol this library exports under the same name, or of
/// `per_thread` when asked for the per-thread default stream.
pub struct Mapping {
    pub base: &'static str,
    pub since: c_int,
    pub until: c_int,
    pub export: &'static CStr,
    pub per_thread: Option<&'static CStr>,
}

const ALWAYS: c_int = c_int::MAX;

const fn map(base: &'static str, since: c_int, until: c_int, export: &'static CStr) -> Mapping {
    Mapping {
        base,
        since,
        until,
        export,
        per_thread: None,
    }
}

/// [`map`] for a name with a per-thread-default-stream variant.
const fn map_pt(
    base: &'static str,
    since: c_int,
    export: &'static CStr,
    per_thread: &'static CStr,
) -> Mapping {
    Mapping {
        base,
        since,
        until: ALWAYS,
        export,
        per_thread: Some(per_thread),
    }
}

/// The base names the runtime asks for, and which of our functions has
/// the ABI each version asked for means. The `_v2` functions came with
/// CUDA 3.2 (64-bit sizes and device pointers); before that the names
/// meant the 32-bit ABI, which is not intercepted.
pub const MAPPINGS: &[Mapping] = &[
    map_pt(
        "cuLaunchKernel",
        4000,
        c"cuLaunchKernel",
        c"cuLaunchKernel_ptsz",
    ),
    map_pt(
        "cuLaunchKernelEx",
        11060,
        c"cuLaunchKernelEx",
        c"cuLaunchKernelEx_ptsz",
    ),
    map_pt(
        "cuLaunchCooperativeKernel",
        9000,
        c"cuLaunchCooperativeKernel",
        c"cuLaunchCooperativeKernel_ptsz",
    ),
    map_pt(
        "cuGraphLaunch",
        10000,
        c"cuGraphLaunch",
        c"cuGraphLaunch_ptsz",
    ),
    map("cuMemAlloc", 3020, ALWAYS, c"cuMemAlloc_v2"),
    map("cuMemAllocPitch", 3020, ALWAYS, c"cuMemAllocPitch_v2"),
    map("cuMemAllocManaged", 6000, ALWAYS, c"cuMemAllocManaged"),
    map_pt(
        "cuMemAllocAsync",
        11020,
        c"cuMemAllocAsync",
        c"cuMemAllocAsync_ptsz",
    ),
    map_pt(
        "cuMemAllocFromPoolAsync",
        11020,
        c"cuMemAllocFromPoolAsync",
        c"cuMemAllocFromPoolAsync_ptsz",
    ),
    map("cuMemFree", 3020, ALWAYS, c"cuMemFree_v2"),
    map_pt(
        "cuMemFreeAsync",
        11020,
        c"cuMemFreeAsync",
        c"cuMemFreeAsync_ptsz",
    ),
    map_pt(
        "cuMemcpyHtoD",
        3020,
        c"cuMemcpyHtoD_v2",
        c"cuMemcpyHtoD_v2_ptds",
    ),
    map_pt(
        "cuMemcpyDtoH",
        3020,
        c"cuMemcpyDtoH_v2",
        c"cuMemcpyDtoH_v2_ptds",
    ),
    map_pt(
        "cuMemcpyDtoD",
        3020,
        c"cuMemcpyDtoD_v2",
        c"cuMemcpyDtoD_v2_ptds",
    ),
    map_pt(
        "cuMemcpyHtoDAsync",
        3020,
        c"cuMemcpyHtoDAsync_v2",
        c"cuMemcpyHtoDAsync_v2_ptsz",
    ),
    map_pt(
        "cuMemcpyDtoHAsync",
        3020,
        c"cuMemcpyDtoHAsync_v2",
        c"cuMemcpyDtoHAsync_v2_ptsz",
    ),
    map_pt("cuMemcpy", 4000, c"cuMemcpy", c"cuMemcpy_ptds"),
    map_pt(
        "cuMemcpyAsync",
        4000,
        c"cuMemcpyAsync",
        c"cuMemcpyAsync_ptsz",
    ),
    map_pt("cuMemsetD8", 3020, c"cuMemsetD8_v2", c"cuMemsetD8_v2_ptds"),
    map_pt(
        "cuMemsetD32",
        3020,
        c"cuMemsetD32_v2",
        c"cuMemsetD32_v2_ptds",
    ),
    map("cuCtxSynchronize", 2000, ALWAYS, c"cuCtxSynchronize"),
    map_pt(
        "cuStreamSynchronize",
        2000,
        c"cuStreamSynchronize",
        c"cuStreamSynchronize_ptsz",
    ),
    map("cuEventSynchronize", 2000, ALWAYS, c"cuEventSynchronize"),
    map("cuGetProcAddress", 11030, 12000, c"cuGetProcAddress"),
    map("cuGetProcAddress", 12000, ALWAYS, c"cuGetProcAddress_v2"),
];
/// This library's function exported as `export`, by the driver's exact
/// symbol name; `None` for names it does not govern.
pub fn ours(export: &[u8]) -> Option<*mut c_void> {
    use crate::{hooks_launch as l, hooks_memory as m};
    let p: *mut c_void = match export {
        b"cuLaunchKernel" => l::cuLaunchKernel as *mut c_void,
        b"cuLaunchKernelEx" => l::cuLaunchKernelEx as *mut c_void,
        b"cuLaunchCooperativeKernel" => l::cuLaunchCooperativeKernel as *mut c_void,
        b"cuGraphLaunch" => l::cuGraphLaunch as *mut c_void,
        b"cuMemcpyHtoD_v2" => l::cuMemcpyHtoD_v2 as *mut c_void,
        b"cuMemcpyDtoH_v2" => l::cuMemcpyDtoH_v2 as *mut c_void,
        b"cuMemcpyDtoD_v2" => l::cuMemcpyDtoD_v2 as *mut c_void,
        b"cuMemcpyHtoDAsync_v2" => l::cuMemcpyHtoDAsync_v2 as *mut c_void,
        b"cuMemcpyDtoHAsync_v2" => l::cuMemcpyDtoHAsync_v2 as *mut c_void,
        b"cuMemcpy" => l::cuMemcpy as *mut c_void,
        b"cuMemcpyAsync" => l::cuMemcpyAsync as *mut c_void,
        b"cuMemsetD8_v2" => l::cuMemsetD8_v2 as *mut c_void,
        b"cuMemsetD32_v2" => l::cuMemsetD32_v2 as *mut c_void,
        b"cuCtxSynchronize" => l::cuCtxSynchronize as *mut c_void,
        b"cuStreamSynchronize" => l::cuStreamSynchronize as *mut c_void,
        b"cuEventSynchronize" => l::cuEventSynchronize as *mut c_void,
        b"cuMemAlloc_v2" => m::cuMemAlloc_v2 as *mut c_void,
        b"cuMemAllocPitch_v2" => m::cuMemAllocPitch_v2 as *mut c_void,
        b"cuMemAllocManaged" => m::cuMemAllocManaged as *mut c_void,
        b"cuMemAllocAsync" => m::cuMemAllocAsync as *mut c_void,
        b"cuMemAllocFromPoolAsync" => m::cuMemAllocFromPoolAsync as *mut c_void,
        b"cuMemFree_v2" => m::cuMemFree_v2 as *mut c_void,
        b"cuMemFreeAsync" => m::cuMemFreeAsync as *mut c_void,
        b"cuGetProcAddress" => cuGetProcAddress as *mut c_void,
        b"cuGetProcAddress_v2" => cuGetProcAddress_v2 as *mut c_void,
        b"cuLaunchKernel_ptsz" => l::cuLaunchKernel_ptsz as *mut c_void,
        b"cuLaunchKernelEx_ptsz" => l::cuLaunchKernelEx_ptsz as *mut c_void,
        b"cuLaunchCooperativeKernel_ptsz" => l::cuLaunchCooperativeKernel_ptsz as *mut c_void,
        b"cuGraphLaunch_ptsz" => l::cuGraphLaunch_ptsz as *mut c_void,
        b"cuMemcpyHtoD_v2_ptds" => l::cuMemcpyHtoD_v2_ptds as *mut c_void,
        b"cuMemcpyDtoH_v2_ptds" => l::cuMemcpyDtoH_v2_ptds as *mut c_void,
        b"cuMemcpyDtoD_v2_ptds" => l::cuMemcpyDtoD_v2_ptds as *mut c_void,
        b"cuMemcpyHtoDAsync_v2_ptsz" => l::cuMemcpyHtoDAsync_v2_ptsz as *mut c_void,
        b"cuMemcpyDtoHAsync_v2_ptsz" => l::cuMemcpyDtoHAsync_v2_ptsz as *mut c_void,
        b"cuMemcpy_ptds" => l::cuMemcpy_ptds as *mut c_void,
        b"cuMemcpyAsync_ptsz" => l::cuMemcpyAsync_ptsz as *mut c_void,
        b"cuMemsetD8_v2_ptds" => l::cuMemsetD8_v2_ptds as *mut c_void,
        b"cuMemsetD32_v2_ptds" => l::cuMemsetD32_v2_ptds as *mut c_void,
        b"cuStreamSynchronize_ptsz" => l::cuStreamSynchronize_ptsz as *mut c_void,
        b"cuMemAllocAsync_ptsz" => m::cuMemAllocAsync_ptsz as *mut c_void,
        b"cuMemAllocFromPoolAsync_ptsz" => m::cuMemAllocFromPoolAsync_ptsz as *mut c_void,
        b"cuMemFreeAsync_ptsz" => m::cuMemFreeAsync_ptsz as *mut c_void,
        _ => return None,
    };
    Some(p)
}

/// The export a base name asked for with `version` means, if governed.
pub fn mapping(base: &[u8], version: c_int) -> Option<&'static Mapping> {
    MAPPINGS
        .iter()
        .find(|m| m.base.as_bytes() == base && (m.since..m.until).contains(&version))
}

static MISMATCH: AtomicBool = AtomicBool::new(false);

/// What the program gets for `symbol`, given the driver's answer `found`:
/// our function where it has the ABI asked for, else `found`. Asked for
/// the per-thread default stream, the driver answers with the name's
/// per-thread variant if it has one, else with the plain function: ours
/// stands in for whichever of the two it is.
///
/// # Safety
/// `symbol` must be null or a NUL-terminated string.
unsafe fn substitute(
    symbol: *const c_char,
    found: *mut c_void,
    version: c_int,
    flags: u64,
) -> *mut c_void {
    if symbol.is_null() || found.is_null() {
        return found;
    }
    // SAFETY: the caller vouches for `symbol`.
    let base = unsafe { CStr::from_ptr(symbol) }.to_bytes();
    let Some(m) = mapping(base, version) else {
        return found;
    };
    let per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM != 0)
        .then_some(m.per_thread)
        .flatten();
    // Our function forwards to the driver's export of the same name; the
    // driver's answer must be that very function, or the ABI is not the
    // one we have.
    let export = per_thread
        .into_iter()
        .chain([m.export])
        .find(|e| address_of(e) == found);
    let Some(export) = export else {
        notice_once(&MISMATCH, || {
            format!(
                "cuGetProcAddress({}, {version}) gave another function than the driver's {}; \
                 it passes through ungoverned",
                m.base,
                m.export.to_string_lossy()
            )
        });
        return found;
    };
    ours(export.to_bytes()).unwrap_or(found)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> CUresult {
    let Some(real) = driver().and_then(|d| d.cuGetProcAddress) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the program's arguments, passed on unchanged.
    let r = unsafe { real(symbol, pfn, version, flags) };
    if r == CUDA_SUCCESS && !pfn.is_null() {
        // SAFETY: the driver succeeded, so `*pfn` is written; `symbol` is
        // the program's C string, which the driver accepted.
        unsafe { *pfn = substitute(symbol, *pfn, version, flags) };
    }
    r
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CUresult {
    let Some(real) = driver().and_then(|d| d.cuGetProcAddress_v2) else {
        return CUDA_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the program's arguments, passed on unchanged.
    let r = unsafe { real(symbol, pfn, version, flags, status) };
    if r == CUDA_SUCCESS && !pfn.is_null() {
        // SAFETY: as in `cuGetProcAddress`.
        unsafe { *pfn = substitute(symbol, *pfn, version, flags) };
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mapping_names_one_of_our_functions() {
        for m in MAPPINGS {
            assert!(ours(m.export.to_bytes()).is_some(), "{}", m.base);
            if let Some(pt) = m.per_thread {
                assert!(ours(pt.to_bytes()).is_some(), "{pt:?}");
                assert!(pt.to_bytes().starts_with(m.export.to_bytes()), "{pt:?}");
            }
            assert!(m.since < m.until);
        }
    }

    #[test]
    fn base_names_mean_the_v2_abi_from_cuda_3_2() {
        assert!(mapping(b"cuMemAlloc", 3010).is_none());
        assert_eq!(
            mapping(b"cuMemAlloc", 3020).unwrap().export,
            c"cuMemAlloc_v2"
        );
        assert_eq!(
            mapping(b"cuMemAlloc", 13000).unwrap().export,
            c"cuMemAlloc_v2"
        );
        assert_eq!(
            mapping(b"cuGetProcAddress", 11040).unwrap().export,
            c"cuGetProcAddress"
        );
        assert_eq!(
            mapping(b"cuGetProcAddress", 12000).unwrap().export,
            c"cuGetProcAddress_v2"
        );
        assert!(mapping(b"cuMemAlloc_v2", 12000).is_none());
        assert!(mapping(b"cuDeviceGet", 12000).is_none());
    }
}
