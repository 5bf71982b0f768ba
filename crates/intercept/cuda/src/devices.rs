//! Which device a call is on (the calling thread's current context), the
//! program's governor, and the drain it runs when a lease ends.

use crate::real::driver;
use crate::types::*;
use hetsched_intercept::{Governor, GovernorSetup, InterceptApi, LaunchGuard};
use std::ffi::c_void;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicPtr, Ordering};

/// Devices governed; calls on higher ordinals pass through (as the
/// governor does past its own limit).
pub const MAX_DEVICES: usize = 64;

/// The last context seen on each device: the drain makes it current on
/// the releaser thread, which has none of its own.
static LAST_CONTEXT: [AtomicPtr<c_void>; MAX_DEVICES] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_DEVICES];

static GOVERNOR: OnceLock<Governor> = OnceLock::new();

/// The daemon's name of device `ordinal`.
pub fn unit_name(ordinal: usize) -> String {
    format!("cuda{ordinal}")
}

/// The program's governor, made on first use (with the exit handler that
/// stops its releaser thread).
pub fn governor() -> &'static Governor {
    GOVERNOR.get_or_init(|| {
        // SAFETY: `stop_at_exit` is an `extern "C" fn()` that lives as long
        // as the process (this library is never unloaded while in use).
        unsafe { libc::atexit(stop_at_exit) };
        Governor::new(GovernorSetup {
            api: InterceptApi::Cuda,
            unit_name,
            drain: Box::new(drain),
        })
    })
}

extern "C" fn stop_at_exit() {
    if let Some(g) = GOVERNOR.get() {
        g.stop();
    }
}

/// The calling thread's current device ordinal, remembering its context
/// for the drain; `None` without a current context (the driver's call
/// then fails by itself) or without a driver.
pub fn current() -> Option<usize> {
    let d = driver()?;
    let mut ctx: CUcontext = std::ptr::null_mut();
    // SAFETY: `ctx` is a valid out-pointer for the call.
    if unsafe { d.cuCtxGetCurrent?(&mut ctx) } != CUDA_SUCCESS || ctx.is_null() {
        return None;
    }
    let mut dev: CUdevice = -1;
    // SAFETY: `dev` is a valid out-pointer for the call.
    if unsafe { d.cuCtxGetDevice?(&mut dev) } != CUDA_SUCCESS {
        return None;
    }
    let index = usize::try_from(dev).ok().filter(|&i| i < MAX_DEVICES)?;
    LAST_CONTEXT[index].store(ctx, Ordering::Relaxed);
    Some(index)
}

/// Waits for the lease of the current device and returns the guard to
/// hold across the driver call; `None` (pass through) off any device.
pub fn gate() -> Option<LaunchGuard<'static>> {
    let index = current()?;
    Some(governor().launch(index))
}

/// Before the program waits for its work: the device it waits on, if
/// any, counts it as contending until [`synchronized`].
pub fn wait_begins() -> Option<usize> {
    let index = current()?;
    governor().wait_begins(index);
    Some(index)
}

/// After the program waited on device `index` ([`wait_begins`]): a due
/// lease goes back now.
pub fn synchronized(index: Option<usize>) {
    if let Some(index) = index {
        governor().synchronized(index, true);
    }
}

/// Waits for everything queued on device `index`: its last context made
/// current on this thread, synchronised, and popped again.
fn drain(index: usize) {
    let Some(d) = driver() else { return };
    let ctx = LAST_CONTEXT
        .get(index)
        .map_or(std::ptr::null_mut(), |c| c.load(Ordering::Relaxed));
    let (Some(push), Some(sync), Some(pop)) = (
        d.cuCtxPushCurrent_v2,
        d.cuCtxSynchronize,
        d.cuCtxPopCurrent_v2,
    ) else {
        return;
    };
    if ctx.is_null() {
        return;
    }
    // SAFETY: `ctx` is a context the driver handed this process; a
    // destroyed one makes the push fail, and then nothing else is done.
    unsafe {
        if push(ctx) != CUDA_SUCCESS {
            return;
        }
        sync();
        let mut popped: CUcontext = std::ptr::null_mut();
        pop(&mut popped);
    }
}

/// Says `line` once per process on stderr (`hetsched: ...`), unless
/// `HETSCHED_INTERCEPT_QUIET` is set.
pub fn notice_once(said: &std::sync::atomic::AtomicBool, line: impl FnOnce() -> String) {
    if !said.swap(true, Ordering::Relaxed) && std::env::var_os("HETSCHED_INTERCEPT_QUIET").is_none()
    {
        eprintln!("hetsched: {}", line());
    }
}
