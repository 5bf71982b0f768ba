//! The loop every worker thread runs (CPU cores, OpenCL and CUDA devices):
//! take the next call placed on its unit, run it with the queues
//! unlocked, teach the model what it cost, free the slot, place more work,
//! and only then hand the result to the caller (so a caller that has its
//! result also finds the call in the model and the queues).

use super::{Finished, Placed, Scheduler, elapsed_ns};
use crate::job::{Job, Where};
use std::sync::Arc;

pub use crate::device_backend::Ran;

/// Runs calls of unit `u` until the runtime shuts down. `run` executes one
/// call (given the unit's name and the call's predicted execution time,
/// NaN when unknown).
pub(crate) fn run_loop(
    sched: &Arc<Scheduler>,
    u: usize,
    mut run: impl FnMut(&mut dyn Job, &str, f64) -> Ran,
) {
    let mut q = sched.lock();
    loop {
        let Some(placed) = q.units[u].waiting.pop_front() else {
            if q.shutdown {
                return;
            }
            q.units[u].idle_workers += 1;
            q = sched.wake[u].wait(q).unwrap_or_else(|p| p.into_inner());
            q.units[u].idle_workers -= 1;
            continue;
        };
        q.units[u].running += 1;
        drop(q);
        run_placed(sched, u, placed, &mut run);
        q = sched.lock();
    }
}

/// Runs one call placed on unit `u` and already counted as running there
/// (with the queues unlocked), then learns from it, frees its place and
/// completes it.
pub(crate) fn run_placed(
    sched: &Arc<Scheduler>,
    u: usize,
    placed: Placed,
    run: &mut impl FnMut(&mut dyn Job, &str, f64) -> Ran,
) -> Ran {
    let unit_id = sched.units[u].id;
    let unit_name = &sched.unit_names[u];
    let mut job = placed.job;
    let (bytes, _) = placed.bytes;
    let buffer = job.buffer();
    if let Some(b) = &buffer {
        sched.fetch_to_host(b);
    }
    let ran = run(job.as_mut(), unit_name, placed.exec_ns);
    if let Some(b) = &buffer {
        // Host memory is where this unit computes (a CPU, or a device
        // implementation that copies back what it changed).
        b.set_location(hetsched_core::placement::DataLocation::Host);
    }
    let finished = Finished {
        unit: unit_id,
        bytes,
        exec_ns: if ran.exec_ns.is_nan() {
            f64::NAN
        } else {
            ran.exec_ns.max(1.0)
        },
        predicted_ns: placed.predicted_ns,
        exec_predicted_ns: placed.exec_ns,
        turnaround_ns: elapsed_ns(placed.placed_at),
        profiling: placed.profiling,
    };
    sched.learn(job.slot(), &finished);
    let mut q = sched.lock();
    sched.release(&mut q, &finished);
    drop(q);
    sched.outstanding.finish(|| {
        job.complete(Where {
            unit: unit_id,
            unit_name: Arc::clone(unit_name),
            accepted_at: placed.accepted_at,
        })
    });
    ran
}
