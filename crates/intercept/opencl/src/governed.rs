//! The program's governor, made on first use, with OpenCL's drain: finish
//! every queue of the device ([`devices::finish_queues`]).

use crate::devices;
use hetsched_intercept::{Governor, GovernorSetup, InterceptApi};
use std::sync::OnceLock;

static GOVERNOR: OnceLock<Governor> = OnceLock::new();

extern "C" fn stop_at_exit() {
    if let Some(g) = GOVERNOR.get() {
        g.stop();
    }
}

pub fn governor() -> &'static Governor {
    GOVERNOR.get_or_init(|| {
        // SAFETY: registers a plain function with no arguments; it only
        // stops and joins the governor's own thread.
        unsafe { libc::atexit(stop_at_exit) };
        Governor::new(GovernorSetup {
            api: InterceptApi::OpenCl,
            unit_name: |i| format!("opencl{i}"),
            drain: Box::new(devices::finish_queues),
        })
    })
}
