//! Launches, copies, fills and migrations: each waits for a live lease on
//! its queue's device, then goes to the driver while the lease cannot be
//! given back.

use crate::cl::*;
use crate::devices;
use crate::dispatch as d;
use crate::governed::governor;
use crate::layer::next;
use std::ffi::c_void;

/// Defines `$name`, a replacement for dispatch entry `$index` whose first
/// parameter is the command queue: it holds a launch guard of the queue's
/// device while the next layer runs the call.
macro_rules! gated {
    ($name:ident, $index:expr, ($queue:ident $(, $arg:ident: $ty:ty)* $(,)?)) => {
        unsafe extern "C" fn $name($queue: Handle $(, $arg: $ty)*) -> ClInt {
            type Next = unsafe extern "C" fn(Handle $(, $ty)*) -> ClInt;
            let _guard = devices::queue_device($queue).map(|i| governor().launch(i));
            next!($index, Next, CL_INVALID_VALUE, ($queue $(, $arg)*))
        }
    };
}

type Events = *const Handle;
type EventOut = *mut Handle;
type Sizes = *const usize;

gated!(enqueue_nd_range_kernel, d::ENQUEUE_ND_RANGE_KERNEL, (q, kernel: Handle, dims: ClUint, offset: Sizes, global: Sizes, local: Sizes, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_task, d::ENQUEUE_TASK, (q, kernel: Handle, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_read_buffer, d::ENQUEUE_READ_BUFFER, (q, buf: Handle, blocking: ClUint, offset: usize, size: usize, ptr: *mut c_void, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_write_buffer, d::ENQUEUE_WRITE_BUFFER, (q, buf: Handle, blocking: ClUint, offset: usize, size: usize, ptr: *const c_void, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_copy_buffer, d::ENQUEUE_COPY_BUFFER, (q, src: Handle, dst: Handle, src_off: usize, dst_off: usize, size: usize, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_read_image, d::ENQUEUE_READ_IMAGE, (q, img: Handle, blocking: ClUint, origin: Sizes, region: Sizes, row: usize, slice: usize, ptr: *mut c_void, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_write_image, d::ENQUEUE_WRITE_IMAGE, (q, img: Handle, blocking: ClUint, origin: Sizes, region: Sizes, row: usize, slice: usize, ptr: *const c_void, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_copy_image, d::ENQUEUE_COPY_IMAGE, (q, src: Handle, dst: Handle, src_origin: Sizes, dst_origin: Sizes, region: Sizes, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_copy_image_to_buffer, d::ENQUEUE_COPY_IMAGE_TO_BUFFER, (q, src: Handle, dst: Handle, origin: Sizes, region: Sizes, dst_off: usize, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_copy_buffer_to_image, d::ENQUEUE_COPY_BUFFER_TO_IMAGE, (q, src: Handle, dst: Handle, src_off: usize, origin: Sizes, region: Sizes, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_read_buffer_rect, d::ENQUEUE_READ_BUFFER_RECT, (q, buf: Handle, blocking: ClUint, buf_origin: Sizes, host_origin: Sizes, region: Sizes, buf_row: usize, buf_slice: usize, host_row: usize, host_slice: usize, ptr: *mut c_void, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_write_buffer_rect, d::ENQUEUE_WRITE_BUFFER_RECT, (q, buf: Handle, blocking: ClUint, buf_origin: Sizes, host_origin: Sizes, region: Sizes, buf_row: usize, buf_slice: usize, host_row: usize, host_slice: usize, ptr: *const c_void, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_copy_buffer_rect, d::ENQUEUE_COPY_BUFFER_RECT, (q, src: Handle, dst: Handle, src_origin: Sizes, dst_origin: Sizes, region: Sizes, src_row: usize, src_slice: usize, dst_row: usize, dst_slice: usize, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_fill_buffer, d::ENQUEUE_FILL_BUFFER, (q, buf: Handle, pattern: *const c_void, pattern_size: usize, offset: usize, size: usize, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_fill_image, d::ENQUEUE_FILL_IMAGE, (q, img: Handle, color: *const c_void, origin: Sizes, region: Sizes, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_migrate_mem_objects, d::ENQUEUE_MIGRATE_MEM_OBJECTS, (q, count: ClUint, objects: *const Handle, flags: u64, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_svm_memcpy, d::ENQUEUE_SVM_MEMCPY, (q, blocking: ClUint, dst: *mut c_void, src: *const c_void, size: usize, n: ClUint, wait: Events, ev: EventOut));
gated!(enqueue_svm_mem_fill, d::ENQUEUE_SVM_MEM_FILL, (q, ptr: *mut c_void, pattern: *const c_void, pattern_size: usize, size: usize, n: ClUint, wait: Events, ev: EventOut));

pub fn replacements() -> Vec<(usize, usize)> {
    vec![
        (
            d::ENQUEUE_ND_RANGE_KERNEL,
            enqueue_nd_range_kernel as *const () as usize,
        ),
        (d::ENQUEUE_TASK, enqueue_task as *const () as usize),
        (
            d::ENQUEUE_READ_BUFFER,
            enqueue_read_buffer as *const () as usize,
        ),
        (
            d::ENQUEUE_WRITE_BUFFER,
            enqueue_write_buffer as *const () as usize,
        ),
        (
            d::ENQUEUE_COPY_BUFFER,
            enqueue_copy_buffer as *const () as usize,
        ),
        (
            d::ENQUEUE_READ_IMAGE,
            enqueue_read_image as *const () as usize,
        ),
        (
            d::ENQUEUE_WRITE_IMAGE,
            enqueue_write_image as *const () as usize,
        ),
        (
            d::ENQUEUE_COPY_IMAGE,
            enqueue_copy_image as *const () as usize,
        ),
        (
            d::ENQUEUE_COPY_IMAGE_TO_BUFFER,
            enqueue_copy_image_to_buffer as *const () as usize,
        ),
        (
            d::ENQUEUE_COPY_BUFFER_TO_IMAGE,
            enqueue_copy_buffer_to_image as *const () as usize,
        ),
        (
            d::ENQUEUE_READ_BUFFER_RECT,
            enqueue_read_buffer_rect as *const () as usize,
        ),
        (
            d::ENQUEUE_WRITE_BUFFER_RECT,
            enqueue_write_buffer_rect as *const () as usize,
        ),
        (
            d::ENQUEUE_COPY_BUFFER_RECT,
            enqueue_copy_buffer_rect as *const () as usize,
        ),
        (
            d::ENQUEUE_FILL_BUFFER,
            enqueue_fill_buffer as *const () as usize,
        ),
        (
            d::ENQUEUE_FILL_IMAGE,
            enqueue_fill_image as *const () as usize,
        ),
        (
            d::ENQUEUE_MIGRATE_MEM_OBJECTS,
            enqueue_migrate_mem_objects as *const () as usize,
        ),
        (
            d::ENQUEUE_SVM_MEMCPY,
            enqueue_svm_memcpy as *const () as usize,
        ),
        (
            d::ENQUEUE_SVM_MEM_FILL,
            enqueue_svm_mem_fill as *const () as usize,
        ),
    ]
}
