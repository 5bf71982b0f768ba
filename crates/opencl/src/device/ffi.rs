//! The only place this crate calls `unsafe` OpenCL functions. Each block says
//! why the call cannot break Rust's guarantees; everything outside this module
//! is safe code built on these few functions.
#![allow(unsafe_code)]

use std::ptr::{self, NonNull};
use std::sync::Arc;

use opencl3::command_queue::{
    CL_BLOCKING, CL_NON_BLOCKING, CL_QUEUE_PROFILING_ENABLE, CommandQueue, enqueue_read_buffer,
    enqueue_write_buffer,
};
use opencl3::context::Context;
use opencl3::device::Device;
use opencl3::event::Event;
use opencl3::memory::{Buffer, CL_MAP_READ, CL_MEM_READ_WRITE, CL_MEM_USE_HOST_PTR, ClMem};
use opencl3::types::cl_mem;

use super::{KernelArg, ValidatedLaunch};
use crate::error::{OpenClError, Result};

/// A context holding just `device` and an in-order queue on it that records
/// profiling timestamps.
pub(crate) fn context_and_queue(device: &Device) -> Result<(Context, CommandQueue)> {
    let context = Context::from_device(device).map_err(OpenClError::api("clCreateContext"))?;
    // SAFETY: `CommandQueue::create` is unsafe only because the device must be
    // a member of the context; the context was created from this very device
    // on the line above.
    let queue = unsafe { CommandQueue::create(&context, device.id(), CL_QUEUE_PROFILING_ENABLE) }
        .map_err(OpenClError::api("clCreateCommandQueue"))?;
    Ok((context, queue))
}

/// A device-only buffer of `bytes` bytes (`bytes` > 0).
fn create_buffer(context: &Context, bytes: usize) -> Result<Buffer<u8>> {
    // SAFETY: the only unsafe input of `Buffer::create` is the host pointer.
    // It is null and the flags carry neither CL_MEM_USE_HOST_PTR nor
    // CL_MEM_COPY_HOST_PTR, so OpenCL never reads or keeps any host memory of
    // ours; a bad size is reported as an error (CL_INVALID_BUFFER_SIZE).
    unsafe { Buffer::<u8>::create(context, CL_MEM_READ_WRITE, bytes, ptr::null_mut()) }
        .map_err(OpenClError::api("clCreateBuffer"))
}

/// Host memory that a device sharing the host's memory (a CPU device) may
/// work on in place, with no copy in or out.
///
/// # Safety
///
/// `host_bytes` must name memory that stays mapped, readable and writable,
/// for as long as the value lives, and must always return the same range.
/// The memory may change at any moment (the device writes it, and so may
/// other processes): nobody may hold a Rust reference to it.
pub unsafe trait HostMemory: Send + Sync {
    /// The memory's first byte and its length.
    fn host_bytes(&self) -> (NonNull<u8>, usize);
}

/// Host memory for [`crate::OpenClDevice`]'s coherence probe: words Rust
/// touches only through atomics.
pub(crate) struct ProbeMemory(pub Box<[std::sync::atomic::AtomicU32]>);

// SAFETY: the boxed slice never moves or shrinks while the value lives,
// and Rust reads and writes it only through atomics, so the device's
// writes are no data race in Rust's sense.
unsafe impl HostMemory for ProbeMemory {
    fn host_bytes(&self) -> (NonNull<u8>, usize) {
        let ptr = NonNull::new(self.0.as_ptr().cast_mut().cast::<u8>())
            .expect("a boxed slice is never null");
        (ptr, self.0.len() * 4)
    }
}

/// A device's memory object, with the host memory it works on in place
/// (if any) kept alive behind it.
pub(crate) struct MemObject {
    // Released before `host` (field order), so OpenCL never holds a
    // pointer into memory that has gone.
    buffer: Buffer<u8>,
    host: Option<Arc<dyn HostMemory>>,
}

impl MemObject {
    pub(crate) fn buffer(&self) -> &Buffer<u8> {
        &self.buffer
    }

    pub(crate) fn is_in_place(&self) -> bool {
        self.host.is_some()
    }
}

/// A device-only memory object of `bytes` bytes (`bytes` > 0).
pub(crate) fn create_mem(context: &Context, bytes: usize) -> Result<MemObject> {
    Ok(MemObject {
        buffer: create_buffer(context, bytes)?,
        host: None,
    })
}

/// A memory object over bytes `offset..offset + len` (`len` > 0, inside the
/// memory) of `host`, used in place (`CL_MEM_USE_HOST_PTR`).
pub(crate) fn create_in_place(
    context: &Context,
    host: Arc<dyn HostMemory>,
    offset: usize,
    len: usize,
) -> Result<MemObject> {
    let (base, size) = host.host_bytes();
    assert!(
        len > 0 && offset.checked_add(len).is_some_and(|end| end <= size),
        "in-place range {offset}+{len} outside {size} bytes (the caller checks)"
    );
    // Pointer arithmetic only; nothing is read here.
    let start = base.as_ptr().wrapping_add(offset);
    // SAFETY: `start..start + len` lies inside the memory `host` names (the
    // assertion above), which `HostMemory`'s contract keeps mapped and
    // writable while `host` lives. The returned `MemObject` owns `host` and
    // releases the OpenCL buffer first (field order), and every command on
    // a buffer in this crate is waited for before the borrow that issued it
    // ends, so OpenCL never uses the pointer after the memory could go.
    // OpenCL reads and writes the bytes from device code only; Rust never
    // makes a reference to them, so other writers cause no data race in
    // Rust's sense (they can only spoil the data of whoever owns it).
    let buffer = unsafe {
        Buffer::<u8>::create(
            context,
            CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
            len,
            start.cast(),
        )
    }
    .map_err(OpenClError::api("clCreateBuffer"))?;
    Ok(MemObject {
        buffer,
        host: Some(host),
    })
}

/// Makes what the device wrote into an in-place buffer the host memory's
/// own, as OpenCL requires of `CL_MEM_USE_HOST_PTR` buffers: maps it for
/// reading and unmaps it at once, and returns when the unmap is done. (On
/// a device that works on host memory, both are bookkeeping.)
pub(crate) fn sync_in_place(queue: &CommandQueue, buffer: &Buffer<u8>, len: usize) -> Result<()> {
    let mut mapped: cl_mem = ptr::null_mut();
    // SAFETY: a map of the buffer's own `len` bytes (OpenCL checks the
    // range: CL_INVALID_VALUE); the pointer it returns is used for nothing
    // but the unmap below, never read or written here. The queue is in
    // order, so the unmap runs after the map; waiting for the unmap waits
    // for both.
    let map = unsafe {
        queue.enqueue_map_buffer(
            buffer,
            CL_NON_BLOCKING,
            CL_MAP_READ,
            0,
            len,
            &mut mapped,
            &[],
        )
    }
    .map_err(OpenClError::api("clEnqueueMapBuffer"))?;
    drop(map);
    // SAFETY: `mapped` is the pointer the map above returned for this very
    // buffer, unmapped exactly once; the event is waited for before return.
    let unmap = unsafe { queue.enqueue_unmap_mem_object(buffer.get(), mapped.cast(), &[]) }
        .map_err(OpenClError::api("clEnqueueUnmapMemObject"))?;
    unmap.wait().map_err(OpenClError::api("clWaitForEvents"))?;
    Ok(())
}

/// Copies `data` into the start of `buffer`, returning once the copy is done.
pub(crate) fn write(queue: &CommandQueue, buffer: &Buffer<u8>, data: &[u8]) -> Result<Event> {
    // SAFETY: OpenCL reads exactly `data.len()` bytes from `data.as_ptr()`,
    // which is the borrowed slice. The write is blocking, so by the time the
    // call returns OpenCL has finished with the slice (the spec lets the host
    // reuse the memory at once). The device side is bounds-checked by OpenCL
    // itself: a range past the buffer's end fails with CL_INVALID_VALUE.
    // `buffer.get()` is a live handle because `buffer` is borrowed.
    let event = unsafe {
        enqueue_write_buffer(
            queue.get(),
            buffer.get(),
            CL_BLOCKING,
            0,
            data.len(),
            data.as_ptr().cast(),
            0,
            ptr::null(),
        )
    }
    .map_err(OpenClError::api("clEnqueueWriteBuffer"))?;
    Ok(Event::new(event))
}

/// Copies the start of `buffer` into `out`, returning once the data is there.
pub(crate) fn read(queue: &CommandQueue, buffer: &Buffer<u8>, out: &mut [u8]) -> Result<Event> {
    // SAFETY: OpenCL writes exactly `out.len()` bytes at `out.as_mut_ptr()`,
    // which we borrow mutably, so nothing else can observe the slice while it
    // changes. The read is blocking: the spec says it returns only after the
    // data has been copied, so no write lands after the borrow ends. The
    // device range is bounds-checked by OpenCL (CL_INVALID_VALUE), and every
    // byte pattern is a valid `u8`.
    let event = unsafe {
        enqueue_read_buffer(
            queue.get(),
            buffer.get(),
            CL_BLOCKING,
            0,
            out.len(),
            out.as_mut_ptr().cast(),
            0,
            ptr::null(),
        )
    }
    .map_err(OpenClError::api("clEnqueueReadBuffer"))?;
    Ok(Event::new(event))
}

/// A finished launch: its event, and the host time the enqueue call
/// itself took.
pub(crate) struct Launched {
    pub event: Event,
    pub submit_ns: u64,
}

/// Sets every argument of the kernel and runs it, returning once it has
/// finished (or failed). Takes a [`ValidatedLaunch`], which only
/// `Kernel::validate` can make, so the argument checks cannot be skipped.
pub(crate) fn launch(queue: &CommandQueue, launch: ValidatedLaunch<'_>) -> Result<Launched> {
    let ValidatedLaunch {
        kernel,
        global,
        local,
        args,
    } = launch;
    let raw = kernel.raw();
    for (index, arg) in args.iter().enumerate() {
        let index = index as u32;
        // SAFETY: `validate` matched this argument against the parameter the
        // compiler reported at `index` (address space and scalar type, from
        // CL_KERNEL_ARG_ADDRESS_QUALIFIER / _TYPE_NAME), so the size and
        // meaning of each value agree with the kernel: a buffer parameter gets
        // the handle of a live buffer of this context (`&DeviceBuffer` keeps it
        // alive and `validate` checked it came from this device), a local
        // parameter gets a non-zero size and a null pointer as the spec
        // requires, and a scalar gets a value of the declared width. OpenCL
        // copies the bytes during the call, so the temporaries may go away
        // after it. The kernel object is not `Sync`, so no other thread can
        // set arguments on it between these calls and the enqueue below.
        let set = unsafe {
            match arg {
                KernelArg::Buffer(buffer) => {
                    let mem: cl_mem = buffer.raw().get();
                    raw.set_arg(index, &mem)
                }
                KernelArg::Local(bytes) => raw.set_arg_local_buffer(index, *bytes),
                KernelArg::U32(v) => raw.set_arg(index, v),
                KernelArg::I32(v) => raw.set_arg(index, v),
                KernelArg::U64(v) => raw.set_arg(index, v),
                KernelArg::F32(v) => raw.set_arg(index, v),
            }
        };
        set.map_err(OpenClError::api("clSetKernelArg"))?;
    }

    let global = [global];
    let local = local.map(|l| [l]);
    // SAFETY: the size pointers point at one-element arrays that live across
    // the call and match `work_dim` = 1; a null local size is allowed and lets
    // the implementation choose. Every argument was set just above. The
    // buffers the kernel may touch are borrowed by `args` for the whole of
    // this function, and we wait for the kernel to finish (or, if waiting
    // fails, drain the queue) before returning, so the device never uses a
    // buffer after its owner could free it. What the kernel does inside its
    // buffers is the kernel author's responsibility, as with any code one
    // chooses to run: the source is trusted input (see `OpenClDevice::build`).
    let submitted = std::time::Instant::now();
    let event = unsafe {
        queue.enqueue_nd_range_kernel(
            raw.get(),
            1,
            ptr::null(),
            global.as_ptr(),
            local.as_ref().map_or(ptr::null(), |l| l.as_ptr()),
            &[],
        )
    }
    .map_err(OpenClError::api("clEnqueueNDRangeKernel"))?;
    let submit_ns = super::elapsed_ns(submitted);
    if let Err(e) = event.wait() {
        // The safety argument above needs the kernel finished before the
        // borrows end, whatever went wrong; drain the queue best-effort.
        let _ = queue.finish();
        return Err(OpenClError::api("clWaitForEvents")(e));
    }
    Ok(Launched { event, submit_ns })
}
