//! OpenCL and CUDA implementations of a task, written in C.
//!
//! The C function gets the device's raw handles (`HsOpenClDevice`,
//! `HsCudaDevice`) and issues its own copies and launches on the runtime's
//! queue or stream. The runtime places such calls like any other: on a
//! device the monitor arbitrates (`opencl<N>` / `cuda<N>` units of a daemon
//! with `device_units`, or of the embedded monitor), each run of calls
//! first waits for the unit's agent, so shares hold between processes.
//!
//! The functions and types exist in every build, and the header is the
//! same; a library built without the `opencl` / `cuda` feature answers
//! `HS_ERR_UNSUPPORTED`.

use crate::error::{HsStatus, err, guard};
use crate::runtime::{HsTask, TASKS, User};
use std::ffi::{c_int, c_void};

/// The OpenCL device an `HsOpenClFn` runs on. The handles are borrowed for
/// the call: do not release them. Calls on one unit get the same handles
/// while the runtime is open, and never run at the same time.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsOpenClDevice {
    /// `cl_device_id`.
    pub device: *mut c_void,
    /// `cl_context`, holding just this device.
    pub context: *mut c_void,
    /// `cl_command_queue`: in-order, created with
    /// `CL_QUEUE_PROFILING_ENABLE`.
    pub queue: *mut c_void,
    /// The device's position in the list of OpenCL devices of every
    /// platform (its unit is `opencl<index>`).
    pub index: u32,
}

/// An OpenCL implementation: enqueues its copies and kernels on
/// `device->queue` and returns once they have finished (`clFinish`, or
/// blocking reads). Returns 0 on success; anything else (an OpenCL error
/// code such as `CL_OUT_OF_RESOURCES`, which the message names) fails this
/// call with `HS_ERR_TASK_FAILED`, and only this call.
pub type HsOpenClFn = Option<
    unsafe extern "C" fn(
        args: *mut c_void,
        user: *mut c_void,
        device: *const HsOpenClDevice,
    ) -> c_int,
>;

/// The CUDA device an `HsCudaFn` runs on. The handles are borrowed for the
/// call: do not destroy them. Calls on one unit get the same handles while
/// the runtime is open, and never run at the same time.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsCudaDevice {
    /// The device's CUDA ordinal (its unit is `cuda<ordinal>`).
    pub ordinal: i32,
    /// `CUcontext`: the device's primary context (the one the CUDA runtime
    /// API uses), current on the calling thread during the call.
    pub context: *mut c_void,
    /// `CUstream` (a `cudaStream_t` to the runtime API): the runtime's own
    /// stream on the device, not the legacy default stream.
    pub stream: *mut c_void,
}

/// A CUDA implementation: issues its copies and kernels on
/// `device->stream` and returns once they have finished
/// (`cuStreamSynchronize`). Returns 0 on success; anything else (a
/// `CUresult` or `cudaError_t`, which the message shows) fails this call
/// with `HS_ERR_TASK_FAILED`, and only this call.
pub type HsCudaFn = Option<
    unsafe extern "C" fn(
        args: *mut c_void,
        user: *mut c_void,
        device: *const HsCudaDevice,
    ) -> c_int,
>;

/// Sets the task's OpenCL implementation: calls placed on an OpenCL device
/// run `f(args, user, device)` on the thread that owns the device. After
/// `f` returns the runtime also waits for the queue (`clFinish`), so no
/// command of one call runs into the next. `HS_ERR_UNSUPPORTED` where the
/// library was built without the `opencl` feature.
#[unsafe(no_mangle)]
pub extern "C" fn hs_task_set_opencl(task: HsTask, f: HsOpenClFn, user: *mut c_void) -> HsStatus {
    guard(|| {
        let Some(f) = f else {
            return err(HsStatus::HsErrNull, "opencl function is NULL");
        };
        // The handle is checked in every build, so bad input gets the same
        // answer with or without the feature.
        TASKS.get(task)?;
        opencl::set(task, f, User(user))
    })
}

/// Sets the task's CUDA implementation: calls placed on a CUDA device run
/// `f(args, user, device)` on the thread that owns the device, with the
/// device's context current. After `f` returns the runtime also waits for
/// the stream. `HS_ERR_UNSUPPORTED` where the library was built without
/// the `cuda` feature.
#[unsafe(no_mangle)]
pub extern "C" fn hs_task_set_cuda(task: HsTask, f: HsCudaFn, user: *mut c_void) -> HsStatus {
    guard(|| {
        let Some(f) = f else {
            return err(HsStatus::HsErrNull, "cuda function is NULL");
        };
        TASKS.get(task)?;
        cuda::set(task, f, User(user))
    })
}

#[cfg(feature = "opencl")]
mod opencl {
    use super::HsOpenClDevice;
    use crate::error::HsResult;
    use crate::runtime::{Args, HsTask, User, edit_task};
    use hetsched_runtime::opencl::{OpenClDevice, OpenClError};
    use std::ffi::{c_int, c_void};

    type CFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *const HsOpenClDevice) -> c_int;

    pub(super) fn set(task: HsTask, f: CFn, user: User) -> HsResult<()> {
        edit_task(task, |t| {
            t.opencl(move |device: &OpenClDevice, a: &Args| {
                let u = user;
                let raw = device.raw_handles();
                let d = HsOpenClDevice {
                    device: raw.device,
                    context: raw.context,
                    queue: raw.queue,
                    index: u32::try_from(device.info().index).unwrap_or(u32::MAX),
                };
                // SAFETY: as in `hs_task_set_cpu` for `args` and `user`;
                // `d` lives on this frame for the whole call, and its
                // handles are the device's, alive while `device` is.
                let status = unsafe { f(a.0, u.0, &d) };
                // Whatever `f` left on the queue finishes here, not in
                // the next call.
                let finished = device.finish();
                if status != 0 {
                    return Err(OpenClError::Api {
                        call: "C implementation",
                        code: status,
                    });
                }
                finished
            })
        })
    }
}

#[cfg(not(feature = "opencl"))]
mod opencl {
    use crate::error::{HsResult, HsStatus, err};
    use crate::runtime::{HsTask, User};

    pub(super) fn set(_task: HsTask, _f: impl Sized, _user: User) -> HsResult<()> {
        err(
            HsStatus::HsErrUnsupported,
            "OpenCL implementations need a libhetsched built with the `opencl` feature \
             (cargo build -p hetsched-capi --features opencl)",
        )
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::HsCudaDevice;
    use crate::error::HsResult;
    use crate::runtime::{Args, HsTask, User, edit_task};
    use hetsched_runtime::cuda::{CudaDevice, CudaError};
    use std::ffi::{c_int, c_void};

    type CFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *const HsCudaDevice) -> c_int;

    pub(super) fn set(task: HsTask, f: CFn, user: User) -> HsResult<()> {
        edit_task(task, |t| {
            t.cuda(move |device: &CudaDevice, a: &Args| {
                let u = user;
                let stream = device.stream();
                let ctx = stream.context();
                // Driver API calls of `f` act on the current context.
                ctx.bind_to_thread().map_err(|source| CudaError::Driver {
                    what: "cuCtxSetCurrent",
                    source,
                })?;
                let d = HsCudaDevice {
                    ordinal: i32::try_from(device.info().ordinal).unwrap_or(i32::MAX),
                    context: ctx.cu_ctx().cast(),
                    stream: stream.cu_stream().cast(),
                };
                // SAFETY: as in `hs_task_set_cpu` for `args` and `user`;
                // `d` lives on this frame for the whole call, and its
                // handles are the device's, alive while `device` is.
                let status = unsafe { f(a.0, u.0, &d) };
                // Whatever `f` left on the stream finishes here, not in
                // the next call.
                let finished = stream.synchronize().map_err(|source| CudaError::Driver {
                    what: "cuStreamSynchronize",
                    source,
                });
                if status != 0 {
                    return Err(CudaError::Implementation(format!(
                        "CUDA C implementation failed with status {status}"
                    )));
                }
                finished
            })
        })
    }
}

#[cfg(not(feature = "cuda"))]
mod cuda {
    use crate::error::{HsResult, HsStatus, err};
    use crate::runtime::{HsTask, User};

    pub(super) fn set(_task: HsTask, _f: impl Sized, _user: User) -> HsResult<()> {
        err(
            HsStatus::HsErrUnsupported,
            "CUDA implementations need a libhetsched built with the `cuda` feature \
             (cargo build -p hetsched-capi --features cuda)",
        )
    }
}
