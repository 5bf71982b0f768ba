//! Allocations: buffers, images and SVM, counted on their context's first
//! device against the program's cap. Past the cap the call fails with
//! `CL_MEM_OBJECT_ALLOCATION_FAILURE` (SVM: a null pointer), as a full
//! device would answer, and nothing is allocated. A memory object's count
//! goes when the driver destroys it (a destructor callback: the driver
//! may keep an object past the program's last release while commands
//! that use it are in flight); an SVM pointer's with `clSVMFree`.

use crate::cl::*;
use crate::devices::{self, Allocation};
use crate::dispatch as d;
use crate::governed::governor;
use crate::layer::next;
use std::ffi::c_void;

fn fail(err: *mut ClInt) -> Handle {
    if !err.is_null() {
        // SAFETY: the program passed `err` for the error code.
        unsafe { *err = CL_MEM_OBJECT_ALLOCATION_FAILURE };
    }
    std::ptr::null_mut()
}

/// What an allocation made: a memory object (freed when the driver
/// destroys it) or an SVM pointer (freed by `clSVMFree`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Made {
    MemObject,
    Svm,
}

/// The destructor callback of a counted memory object.
extern "C" fn destroyed(mem: Handle, _user_data: *mut c_void) {
    if let Some(a) = devices::forget_allocation(mem as usize) {
        governor().freed(a.device, a.bytes);
    }
}

/// Keeps the count of `mem` until it is destroyed (or freed, for SVM).
fn remember(mem: Handle, made: Made, a: Allocation) {
    devices::remember_allocation(mem as usize, a);
    if made == Made::MemObject {
        type SetCallback =
            unsafe extern "C" fn(Handle, extern "C" fn(Handle, *mut c_void), *mut c_void) -> ClInt;
        let set = next!(
            d::SET_MEM_OBJECT_DESTRUCTOR_CALLBACK,
            SetCallback,
            CL_INVALID_VALUE,
            (mem, destroyed, std::ptr::null_mut())
        );
        if set != CL_SUCCESS {
            // Without the callback the count could never go: do not keep it.
            devices::forget_allocation(mem as usize);
            governor().freed(a.device, a.bytes);
        }
    }
}

/// An allocation of known size: counted before the driver is asked.
fn counted_before(
    context: Handle,
    bytes: usize,
    err: *mut ClInt,
    made: Made,
    create: impl FnOnce() -> Handle,
) -> Handle {
    let Some(device) = devices::context_device(context) else {
        return create();
    };
    let bytes = bytes as u64;
    if !governor().try_allocate(device, bytes) {
        return fail(err);
    }
    let mem = create();
    if mem.is_null() {
        governor().freed(device, bytes);
    } else {
        remember(mem, made, Allocation { device, bytes });
    }
    mem
}

/// An image: its size is the driver's, so it is counted once made, and
/// released again if it does not fit.
fn counted_after(context: Handle, err: *mut ClInt, create: impl FnOnce() -> Handle) -> Handle {
    let mem = create();
    if mem.is_null() {
        return mem;
    }
    let Some(device) = devices::context_device(context) else {
        return mem;
    };
    // An image made over a buffer shares the buffer's memory.
    let parent =
        devices::info_number::<usize>(d::GET_MEM_OBJECT_INFO, mem, CL_MEM_ASSOCIATED_MEMOBJECT);
    if parent.is_some_and(|p| p != 0) {
        return mem;
    }
    let bytes =
        devices::info_number::<usize>(d::GET_MEM_OBJECT_INFO, mem, CL_MEM_SIZE).unwrap_or(0) as u64;
    if !governor().try_allocate(device, bytes) {
        type Release = unsafe extern "C" fn(Handle) -> ClInt;
        next!(d::RELEASE_MEM_OBJECT, Release, CL_SUCCESS, (mem));
        return fail(err);
    }
    remember(mem, Made::MemObject, Allocation { device, bytes });
    mem
}

/// Defines `$name`, a replacement for the allocating entry `$index` (first
/// parameter the context, last the error out-pointer), whose size is
/// counted by `$count`: `before` with the size argument named, `after`
/// for images.
macro_rules! allocating {
    ($name:ident, $index:expr, before($size:ident), ($context:ident; $($arg:ident: $ty:ty),*; $err:ident)) => {
        unsafe extern "C" fn $name($context: Handle $(, $arg: $ty)*, $err: *mut ClInt) -> Handle {
            type Next = unsafe extern "C" fn(Handle $(, $ty)*, *mut ClInt) -> Handle;
            counted_before($context, $size, $err, Made::MemObject, || {
                next!($index, Next, std::ptr::null_mut(), ($context $(, $arg)*, $err))
            })
        }
    };
    ($name:ident, $index:expr, after, ($context:ident; $($arg:ident: $ty:ty),*; $err:ident)) => {
        unsafe extern "C" fn $name($context: Handle $(, $arg: $ty)*, $err: *mut ClInt) -> Handle {
            type Next = unsafe extern "C" fn(Handle $(, $ty)*, *mut ClInt) -> Handle;
            counted_after($context, $err, || {
                next!($index, Next, std::ptr::null_mut(), ($context $(, $arg)*, $err))
            })
        }
    };
}

type Host = *mut c_void;
type Desc = *const c_void;

allocating!(create_buffer, d::CREATE_BUFFER, before(size), (context; flags: u64, size: usize, host: Host; err));
allocating!(create_buffer_with_properties, d::CREATE_BUFFER_WITH_PROPERTIES, before(size), (context; props: *const u64, flags: u64, size: usize, host: Host; err));
allocating!(create_image, d::CREATE_IMAGE, after, (context; flags: u64, format: Desc, desc: Desc, host: Host; err));
allocating!(create_image_with_properties, d::CREATE_IMAGE_WITH_PROPERTIES, after, (context; props: *const u64, flags: u64, format: Desc, desc: Desc, host: Host; err));
allocating!(create_image_2d, d::CREATE_IMAGE_2D, after, (context; flags: u64, format: Desc, w: usize, h: usize, row: usize, host: Host; err));
allocating!(create_image_3d, d::CREATE_IMAGE_3D, after, (context; flags: u64, format: Desc, w: usize, h: usize, depth: usize, row: usize, slice: usize, host: Host; err));

unsafe extern "C" fn svm_alloc(
    context: Handle,
    flags: u64,
    size: usize,
    alignment: ClUint,
) -> *mut c_void {
    type Next = unsafe extern "C" fn(Handle, u64, usize, ClUint) -> *mut c_void;
    counted_before(context, size, std::ptr::null_mut(), Made::Svm, || {
        next!(
            d::SVM_ALLOC,
            Next,
            std::ptr::null_mut(),
            (context, flags, size, alignment)
        )
    })
}

unsafe extern "C" fn svm_free(context: Handle, ptr: *mut c_void) {
    type Next = unsafe extern "C" fn(Handle, *mut c_void);
    next!(d::SVM_FREE, Next, (), (context, ptr));
    if let Some(a) = devices::forget_allocation(ptr as usize) {
        governor().freed(a.device, a.bytes);
    }
}

pub fn replacements() -> Vec<(usize, usize)> {
    vec![
        (d::CREATE_BUFFER, create_buffer as *const () as usize),
        (
            d::CREATE_BUFFER_WITH_PROPERTIES,
            create_buffer_with_properties as *const () as usize,
        ),
        (d::CREATE_IMAGE, create_image as *const () as usize),
        (
            d::CREATE_IMAGE_WITH_PROPERTIES,
            create_image_with_properties as *const () as usize,
        ),
        (d::CREATE_IMAGE_2D, create_image_2d as *const () as usize),
        (d::CREATE_IMAGE_3D, create_image_3d as *const () as usize),
        (d::SVM_ALLOC, svm_alloc as *const () as usize),
        (d::SVM_FREE, svm_free as *const () as usize),
    ]
}
