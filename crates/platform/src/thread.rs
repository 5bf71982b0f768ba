//! The calling thread: pin it to a PU, read its CPU time. Shared by the
//! calibration, the runtime's workers and pipeline lanes, and the demo.

use rustix::time::{ClockId, clock_gettime};
use std::time::Duration;

/// Pins the calling thread to PU `pu` (an OS CPU number). Best effort: a
/// cpuset that excludes the PU leaves the thread where it was; the result
/// says whether pinning took.
pub fn pin_current(pu: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: pu })
}

/// CPU time the calling thread has used. A system call (not vDSO), about
/// 0.4 µs in a VM: keep it off paths that run per tiny task.
pub fn cpu_time() -> Duration {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}
