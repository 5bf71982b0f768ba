//! The loop every worker thread runs (CPU cores, OpenCL devices): take the
//! next call placed on its unit, run it with the queues unlocked, teach
//! the model what it cost, free the slot, place more work, and only then
//! hand the result to the caller (so a caller that has its result also
//! finds the call in the model and the queues).

use crate::job::{Job, Where};
use crate::scheduler::{Finished, Scheduler, elapsed_ns};
use std::sync::Arc;

/// Runs calls of unit `u` until the runtime shuts down. `run` executes one
/// call (given the unit's name and the call's predicted execution time,
/// NaN when unknown) and returns its execution time for the model, ns.
pub(crate) fn run_loop(
    sched: &Arc<Scheduler>,
    u: usize,
    mut run: impl FnMut(&mut dyn Job, &str, f64) -> f64,
) {
    let unit_id = sched.units[u].id;
    let unit_name = Arc::clone(&sched.unit_names[u]);
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

        let mut job = placed.job;
        let (bytes, _) = placed.bytes;
        let buffer = job.buffer();
        if let Some(b) = &buffer {
            sched.fetch_to_host(b);
        }
        let exec_ns = run(job.as_mut(), &unit_name, placed.exec_ns);
        if let Some(b) = &buffer {
            // Host memory is where this unit computes (a CPU, or an OpenCL
            // implementation that copies back what it changed).
            b.set_location(hetsched_core::placement::DataLocation::Host);
        }
        let finished = Finished {
            unit: unit_id,
            bytes,
            exec_ns: exec_ns.max(1.0),
            predicted_ns: placed.predicted_ns,
            exec_predicted_ns: placed.exec_ns,
            turnaround_ns: elapsed_ns(placed.placed_at),
            profiling: placed.profiling,
        };
        sched.learn(job.slot(), &finished);
        q = sched.lock();
        sched.release(&mut q, &finished);
        drop(q);
        job.complete(Where {
            unit: unit_id,
            unit_name: Arc::clone(&unit_name),
            accepted_at: placed.accepted_at,
        });
        sched.outstanding.done();
        q = sched.lock();
    }
}

/// Starts one worker thread per device of a kind this process drives
/// itself (OpenCL, CUDA): `devices[i]` serves unit `first_unit + i`, and
/// `run(device, job, unit)` runs one call and returns its execution time
/// in ns for the model.
#[cfg_attr(not(any(feature = "opencl", feature = "cuda")), allow(dead_code))]
pub(crate) fn spawn_device_workers<D: Send + 'static>(
    sched: &Arc<Scheduler>,
    first_unit: usize,
    devices: Vec<D>,
    run: impl Fn(&D, &mut dyn Job, &str) -> f64 + Clone + Send + 'static,
) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    let mut handles = Vec::new();
    for (i, device) in devices.into_iter().enumerate() {
        let u = first_unit + i;
        let sched = Arc::clone(sched);
        let run = run.clone();
        let name = format!("hetsched-{}", sched.units[u].name);
        handles.push(std::thread::Builder::new().name(name).spawn(move || {
            run_loop(&sched, u, |job, unit, _| run(&device, job, unit));
        })?);
    }
    Ok(handles)
}
