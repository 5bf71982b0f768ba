//! CPU executors: one worker thread per core of each CPU kind, pinned to
//! that kind's cores, so a call placed on a kind really runs there.
//!
//! A call's execution time for the model is the worker's *thread CPU time*,
//! not its wall time: under contention CFS stretches wall time, and that
//! stretch is what the view predicts separately (`exec / utilisation`);
//! teaching it to the model as well would count contention twice.

use crate::scheduler::{Backend, Scheduler};
use crate::task::CpuCtx;
use hetsched_platform::thread::{cpu_time, pin_current};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// Starts the workers of every CPU unit.
pub(crate) fn spawn_workers(sched: &Arc<Scheduler>) -> std::io::Result<Vec<JoinHandle<()>>> {
    let mut handles = Vec::new();
    for (u, backend) in sched.backends.iter().enumerate() {
        let Backend::Cpu { cores, .. } = *backend else {
            continue;
        };
        let info = &sched.infos[u];
        // The monitor says which PUs the kind has (`UnitInfo::pus`).
        let pus: Vec<usize> = info.pus.iter().map(|&p| p as usize).collect();
        let throttle = info.throttle.clone().map(std::path::PathBuf::from);
        for w in 0..cores as usize {
            let sched = Arc::clone(sched);
            let pin = pus.get(w).copied();
            let throttle = throttle.clone();
            let handle = std::thread::Builder::new()
                .name(format!("hetsched-{}-{w}", info.name))
                .spawn(move || {
                    if let Some(pu) = pin {
                        pin_current(pu);
                    }
                    if let Some(dir) = &throttle {
                        join_throttle(dir, w);
                    }
                    worker_loop(&sched, u);
                })?;
            handles.push(handle);
        }
    }
    Ok(handles)
}

/// Calls predicted shorter than this are timed by the wall clock: reading
/// the thread CPU clock is a system call (≈ 0.4 µs in a VM), too dear for
/// tiny calls, which CFS rarely stretches anyway.
const CPU_CLOCK_FROM_NS: f64 = 50_000.0;

/// Puts this worker in its slow kind's throttling cgroup, so it runs at
/// the kind's speed. Without the privilege it runs at full speed and says
/// so once per kind.
fn join_throttle(dir: &std::path::Path, worker: usize) {
    let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
    if let Err(e) = hetsched_platform::slow_cores::join_throttle(dir, tid)
        && worker == 0
    {
        tracing::warn!(
            "cannot join {} ({e}); this slow kind runs at full speed",
            dir.display()
        );
    }
}

fn worker_loop(sched: &Arc<Scheduler>, u: usize) {
    crate::scheduler::worker::run_loop(sched, u, |job, unit, predicted_ns| {
        let ctx = CpuCtx {
            cores: exclusive_cores(sched, u),
        };
        // Unknown (NaN) predictions are profiling runs: measure them well.
        let exec_ns = if predicted_ns < CPU_CLOCK_FROM_NS {
            let start = Instant::now();
            job.run_cpu(&ctx, unit);
            start.elapsed().as_nanos() as f64
        } else {
            let before = cpu_time();
            job.run_cpu(&ctx, unit);
            (cpu_time() - before).as_nanos() as f64
        };
        crate::scheduler::worker::Ran {
            exec_ns,
            device_ns: 0,
        }
    });
}

/// Cores a parallel call may use: what the private view says this client
/// may hold exclusively on this kind, at least one.
fn exclusive_cores(sched: &Scheduler, u: usize) -> usize {
    let Backend::Cpu { kind, .. } = sched.backends[u] else {
        return 1;
    };
    let client = sched.link.client();
    client
        .private_view()
        .and_then(|p| p.exclusive_cores(kind))
        .map_or(1, |n| n.max(1) as usize)
}
