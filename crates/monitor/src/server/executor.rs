//! The executor thread of a served unit ([`crate::kernel_exec`]): runs
//! the calls its policy started, one at a time, and reports each to the
//! monitor under the state lock.

use crate::kernel_exec::{ExecJob, KernelBackend, Sandboxes, run_job, run_user_job};
use crate::outbox::Outbox;
use crate::server::Shared;
use hetsched_core::ids::UnitId;
use std::sync::mpsc::Receiver;
use std::time::Instant;

/// The executor thread of `unit`: runs the calls its policy started, one
/// at a time, and reports each to the monitor. Registered kernels go to
/// their user's executor process in `sandboxes`, which this thread owns
/// and ends when it stops.
pub(crate) fn run(
    shared: &Shared,
    unit: UnitId,
    mut backend: Box<dyn KernelBackend>,
    mut sandboxes: Sandboxes,
    jobs: Receiver<ExecJob>,
) {
    let mut out = Outbox::default();
    let mut input = Vec::new();
    for job in jobs {
        match job {
            ExecJob::Call(job) => {
                let (ran_ns, result, lost) = if job.call.user.is_some() {
                    let (ns, o) = run_user_job(&mut sandboxes, &job);
                    (ns, o.result, o.lost)
                } else {
                    let (ns, r) = run_job(backend.as_mut(), &job, &mut input);
                    (ns, r, Vec::new())
                };
                let mut state = shared.lock();
                let now = shared.now();
                state
                    .monitor
                    .kernel_done(unit, job.client, &job.call, ran_ns, result, now, &mut out);
                state.monitor.kernel_executor_lost(unit, &lost);
                shared.deliver(&mut state, &mut out);
                drop(state);
                // What finished may let the policy start more, and move
                // deadlines.
                shared.wake();
            }
            ExecJob::Register {
                owner,
                source,
                entry,
            } => {
                let started = Instant::now();
                let o = sandboxes.register(owner, &source, &entry);
                let build_ns = started.elapsed().as_nanos() as u64;
                let mut state = shared.lock();
                let now = shared.now();
                state.monitor.kernel_executor_lost(unit, &o.lost);
                state.monitor.kernel_registered(
                    unit,
                    owner.client,
                    &entry,
                    o.result,
                    build_ns,
                    now,
                    &mut out,
                );
                shared.deliver(&mut state, &mut out);
                drop(state);
                shared.wake();
            }
            ExecJob::Forget(client) => {
                backend.forget_client(client);
                let lost = sandboxes.forget(client);
                if !lost.is_empty() {
                    shared.lock().monitor.kernel_executor_lost(unit, &lost);
                }
            }
            ExecJob::Stop => break,
        }
    }
    sandboxes.stop();
}
