//! The two functions the ICD loader looks for in a layer, and the table of
//! the next layer's entry points.

use crate::cl::*;
use crate::dispatch;
use crate::hooks;
use std::ffi::c_void;
use std::sync::OnceLock;

/// The next layer's (or the driver's) dispatch table, as addresses.
static TARGET: OnceLock<Box<[usize]>> = OnceLock::new();
/// This layer's table: the target's with the governed entries replaced.
static OURS: OnceLock<Box<[usize]>> = OnceLock::new();

/// The address of the next layer's entry `index` (0 if it has none).
#[inline]
pub(crate) fn target(index: usize) -> usize {
    TARGET
        .get()
        .and_then(|t| t.get(index).copied())
        .unwrap_or(0)
}

/// Calls the next layer's entry `$index` as a function of type `$ty`
/// with the arguments given; evaluates to `$missing` when the target has
/// no such entry.
macro_rules! next {
    ($index:expr, $ty:ty, $missing:expr, ($($arg:expr),* $(,)?)) => {{
        let address = $crate::layer::target($index);
        if address == 0 {
            $missing
        } else {
            // SAFETY: `address` is the loader's entry `$index` of the
            // dispatch table, whose C type `$ty` mirrors (the ICD ABI
            // fixes both); the arguments are what the program passed, or
            // handles the driver gave.
            let f: $ty = unsafe { std::mem::transmute::<usize, $ty>(address) };
            unsafe { f($($arg),*) }
        }
    }};
}
pub(crate) use next;

/// `clGetLayerInfo`: the layer's API version and name.
///
/// # Safety
/// Called by the ICD loader with OpenCL's contract for info queries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clGetLayerInfo(
    param_name: ClUint,
    param_value_size: usize,
    param_value: *mut c_void,
    param_value_size_ret: *mut usize,
) -> ClInt {
    let version = CL_LAYER_API_VERSION_100.to_ne_bytes();
    let name = b"hetsched\0";
    let bytes: &[u8] = match param_name {
        CL_LAYER_API_VERSION => &version,
        CL_LAYER_NAME => name,
        _ => return CL_INVALID_VALUE,
    };
    if !param_value.is_null() {
        if param_value_size < bytes.len() {
            return CL_INVALID_VALUE;
        }
        // SAFETY: the caller gave `param_value_size` writable bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), param_value.cast(), bytes.len());
        }
    }
    if !param_value_size_ret.is_null() {
        // SAFETY: the caller asked for the size here.
        unsafe { *param_value_size_ret = bytes.len() };
    }
    CL_SUCCESS
}

/// `clInitLayer`: takes the next layer's table and gives the loader this
/// layer's.
///
/// # Safety
/// Called by the ICD loader: `target_dispatch` points at `num_entries`
/// function pointers; the two out-pointers are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clInitLayer(
    num_entries: ClUint,
    target_dispatch: *const c_void,
    num_entries_ret: *mut ClUint,
    layer_dispatch_ret: *mut *const c_void,
) -> ClInt {
    let n = num_entries as usize;
    if target_dispatch.is_null() || num_entries_ret.is_null() || layer_dispatch_ret.is_null() {
        return CL_INVALID_VALUE;
    }
    if n < dispatch::MIN_ENTRIES {
        return CL_INVALID_VALUE;
    }
    // SAFETY: the loader's table has `num_entries` pointer-sized entries.
    let table: &[usize] = unsafe { std::slice::from_raw_parts(target_dispatch.cast(), n) };
    let target = TARGET.get_or_init(|| table.into());
    let ours = OURS.get_or_init(|| {
        let mut ours: Box<[usize]> = target.clone();
        for &(index, address) in hooks::replacements().iter() {
            if index < ours.len() && ours[index] != 0 {
                ours[index] = address;
            }
        }
        ours
    });
    // SAFETY: both out-pointers were checked non-null; the table lives
    // for the rest of the process (a static).
    unsafe {
        *num_entries_ret = ours.len() as ClUint;
        *layer_dispatch_ret = ours.as_ptr().cast();
    }
    CL_SUCCESS
}
