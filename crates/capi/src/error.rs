//! Status codes every call returns, and the per-thread message behind the
//! last failure (`hs_last_error`).

use std::cell::RefCell;
use std::ffi::{CString, c_char};

/// What a call did. `HS_OK` is 0; every failure also leaves a message for
/// `hs_last_error` on the calling thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HsStatus {
    /// Success.
    HsOk = 0,
    /// A pointer argument that must not be NULL was NULL.
    HsErrNull = 1,
    /// A handle that is not (or no longer) one this library gave out, or
    /// one of another type (a task handle passed as a runtime …).
    HsErrBadHandle = 2,
    /// A string argument was not valid UTF-8.
    HsErrUtf8 = 3,
    /// An argument is out of range (unknown mode, unit index, empty name …).
    HsErrInvalid = 4,
    /// No monitor could be reached or started (see the message).
    HsErrConnect = 5,
    /// The task has no implementation for any unit of this machine.
    HsErrNoImplementation = 6,
    /// The call ran and failed, or was cancelled (see the message).
    HsErrTaskFailed = 7,
    /// The daemon refused the request or the connection to it failed.
    HsErrDaemon = 8,
    /// The call is not finished yet (non-blocking queries only).
    HsErrNotReady = 9,
    /// A Rust panic was caught at the boundary; the library stays usable.
    HsErrInternal = 10,
    /// This build of the library lacks what the call needs (an OpenCL or
    /// CUDA implementation without the `opencl` / `cuda` feature; the
    /// message names the feature).
    HsErrUnsupported = 11,
}

/// Shorthand for the results of the Rust side of every entry point.
pub(crate) type HsResult<T> = Result<T, (HsStatus, String)>;

thread_local! {
    static LAST: RefCell<Option<CString>> = const { RefCell::new(None) };
}

pub(crate) fn set_last(msg: &str) {
    // Interior NULs cannot travel in a C string: show them as spaces.
    let clean = msg.replace('\0', " ");
    let c = CString::new(clean).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = Some(c));
}

/// Runs `f`, turning an error or a panic into a status code and the
/// thread's last error message.
pub(crate) fn guard(f: impl FnOnce() -> HsResult<()>) -> HsStatus {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(())) => HsStatus::HsOk,
        Ok(Err((status, msg))) => {
            set_last(&msg);
            status
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last(&format!("internal error in hetsched: {what}"));
            HsStatus::HsErrInternal
        }
    }
}

pub(crate) fn err<T>(status: HsStatus, msg: impl Into<String>) -> HsResult<T> {
    Err((status, msg.into()))
}

/// The message of the last failed call on this thread, or NULL if none
/// failed yet. The string stays valid until the next failing call on the
/// same thread; copy it to keep it.
#[unsafe(no_mangle)]
pub extern "C" fn hs_last_error() -> *const c_char {
    LAST.with(|l| l.borrow().as_ref().map_or(std::ptr::null(), |c| c.as_ptr()))
}

/// A short, static name for a status code ("HS_ERR_NULL" …); never NULL.
#[unsafe(no_mangle)]
pub extern "C" fn hs_status_name(status: i32) -> *const c_char {
    let s: &'static [u8] = match status {
        0 => b"HS_OK\0",
        1 => b"HS_ERR_NULL\0",
        2 => b"HS_ERR_BAD_HANDLE\0",
        3 => b"HS_ERR_UTF8\0",
        4 => b"HS_ERR_INVALID\0",
        5 => b"HS_ERR_CONNECT\0",
        6 => b"HS_ERR_NO_IMPLEMENTATION\0",
        7 => b"HS_ERR_TASK_FAILED\0",
        8 => b"HS_ERR_DAEMON\0",
        9 => b"HS_ERR_NOT_READY\0",
        10 => b"HS_ERR_INTERNAL\0",
        11 => b"HS_ERR_UNSUPPORTED\0",
        _ => b"HS_UNKNOWN_STATUS\0",
    };
    s.as_ptr().cast()
}
