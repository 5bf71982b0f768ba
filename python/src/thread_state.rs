//! Keeps a Python thread state on each runtime worker thread that runs
//! Python code.
//!
//! `Python::attach` on a thread Python did not start creates a thread
//! state and, when it returns, destroys it again (`PyGILState_Ensure` /
//! `PyGILState_Release` with the count back at zero): several µs per call,
//! most of an empty task's cost. A worker that first takes one count it
//! never gives back keeps its thread state, and each later `attach` only
//! takes and releases the GIL. Interpreter shutdown clears thread states
//! that are left.
//!
//! The one unsafe module of the Python bindings.
#![allow(unsafe_code)]

use pyo3::ffi;
use std::cell::Cell;

thread_local! {
    static KEPT: Cell<bool> = const { Cell::new(false) };
}

/// Gives the calling thread a lasting Python thread state (once per thread).
/// Call it without holding the GIL, before `Python::attach`.
pub(crate) fn keep() {
    KEPT.with(|kept| {
        if kept.get() {
            return;
        }
        // SAFETY: the interpreter is initialised (this module was imported
        // by it, and the runtime's workers run only while a `Runtime`
        // object lives). The caller does not hold the GIL, so
        // `PyGILState_Ensure` takes it and creates this thread's state with
        // a count of one; `PyEval_SaveThread` releases the GIL and keeps the
        // state (the count stays at one, so no later `PyGILState_Release`
        // destroys it). The returned state pointer is not needed: later
        // `PyGILState_Ensure` calls find it through the thread.
        unsafe {
            ffi::PyGILState_Ensure();
            ffi::PyEval_SaveThread();
        }
        kept.set(true);
    });
}
