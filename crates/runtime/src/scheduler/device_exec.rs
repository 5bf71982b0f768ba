//! The executor for emulated devices: calls go to the monitor, which holds
//! one of the device's streams for the modelled time under the unit's
//! policy, so the device is really shared with every other process.
//!
//! Replies arrive on the connection's reader thread. A call whose
//! connection dropped goes back to the front of its unit's queue and the
//! link fails over; it is submitted again to whichever monitor comes next.

use super::{Finished, Placed, Queues, Scheduler, elapsed_ns};
use crate::handle::TaskError;
use crate::job::Where;
use hetsched_core::ids::UnitId;
use hetsched_core::placement::DataLocation;
use hetsched_protocol::{ClientError, DeviceDone, TaskEvent, TaskReply};
use std::sync::{Arc, Mutex};

/// Submits waiting calls of unit `u` while it has stream capacity left.
/// Called with the queues locked.
pub(crate) fn start(sched: &Arc<Scheduler>, q: &mut Queues, u: usize) {
    if let Some(why) = sched.link.gave_up() {
        fail_waiting(sched, q, u, &why);
        return;
    }
    if sched.link.is_failing_over() {
        return;
    }
    while q.units[u].running < sched.inflight_cap(u) {
        let Some(placed) = q.units[u].waiting.pop_front() else {
            return;
        };
        let info = &sched.infos[u];
        let Some(cost) = placed.job.device_cost(&info.kind) else {
            // Placement only picks units the task implements; this is a
            // bug guard, not a path callers can reach.
            let task = placed.job.slot().name.clone();
            placed.job.fail(TaskError::Unplaceable {
                task,
                why: format!("no implementation for unit kind {}", info.kind),
            });
            sched.outstanding.done();
            continue;
        };
        let t = transfer(sched, u, &placed);
        let exec_ns = u64::try_from(cost.as_nanos())
            .unwrap_or(u64::MAX)
            .saturating_add(t.fetch_ns as u64);
        q.units[u].running += 1;
        // The call is shared with the reply callback so that a request
        // that cannot even be sent hands it back instead of dropping it.
        let holder = Arc::new(Mutex::new(Some(placed)));
        let reply_holder = Arc::clone(&holder);
        let reply_sched = Arc::clone(sched);
        let client = sched.link.client();
        let sent = client.submit_device_with(
            UnitId(u as u16),
            exec_ns,
            t.bytes_in,
            t.bytes_out,
            Box::new(move |reply| {
                let placed = reply_holder
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take();
                if let Some(placed) = placed {
                    on_reply(&reply_sched, u, placed, t, reply);
                }
            }),
        );
        if let Err(e) = sent {
            let placed = holder.lock().unwrap_or_else(|p| p.into_inner()).take();
            q.units[u].running -= 1;
            if let Some(placed) = placed {
                q.units[u].waiting.push_front(placed);
            }
            if e.is_disconnect() || !client.is_connected() {
                spawn_failover(sched);
            } else {
                tracing::warn!("cannot submit to {}: {e}", info.name);
            }
            return;
        }
    }
}

/// What one device call moves: its input (none when its buffer is already
/// here), its output, and the time to fetch its buffer from another device
/// first (held on this device's stream: the call cannot start without it).
#[derive(Clone, Copy, Debug)]
struct Transfer {
    bytes_in: u64,
    bytes_out: u64,
    fetch_ns: f64,
    buffer_moved: bool,
}

fn transfer(sched: &Scheduler, u: usize, placed: &Placed) -> Transfer {
    let (bytes_in, bytes_out) = placed.bytes;
    let plain = Transfer {
        bytes_in,
        bytes_out,
        fetch_ns: 0.0,
        buffer_moved: false,
    };
    let Some(buffer) = placed.job.buffer() else {
        return plain;
    };
    match buffer.location() {
        DataLocation::Unit(at) if at.index() == u => Transfer {
            bytes_in: 0,
            ..plain
        },
        DataLocation::Unit(other) => Transfer {
            fetch_ns: sched.units[other.index()].copy_out_ns(buffer.bytes()),
            buffer_moved: true,
            ..plain
        },
        DataLocation::Host => Transfer {
            buffer_moved: true,
            ..plain
        },
    }
}

fn on_reply(sched: &Arc<Scheduler>, u: usize, placed: Placed, t: Transfer, reply: TaskReply) {
    match reply {
        Ok(TaskEvent::DeviceDone(done)) => finish(sched, u, placed, t, done),
        Ok(other) => fail(
            sched,
            u,
            placed,
            format!("the monitor answered {other:?} to device work"),
        ),
        Err(ClientError::Refused { code, message }) => {
            fail(sched, u, placed, format!("refused ({code:?}): {message}"))
        }
        Err(e) => {
            // Daemon-only and given up on it: the call fails now rather
            // than wait in a queue nothing drains until the daemon is back.
            if let Some(why) = sched.link.gave_up() {
                return fail(sched, u, placed, format!("{why} [{e}]"));
            }
            // The connection is gone: keep the call, move on.
            let mut q = sched.lock();
            q.units[u].running = q.units[u].running.saturating_sub(1);
            q.units[u].waiting.push_front(placed);
            drop(q);
            spawn_failover(sched);
        }
    }
}

fn finish(sched: &Arc<Scheduler>, u: usize, placed: Placed, t: Transfer, done: DeviceDone) {
    let unit = &sched.units[u];
    let (bytes_in, _) = placed.bytes;
    // The monitor held the stream for dispatch + copies + execution; the
    // model predicts execution alone (placement adds the rest itself).
    let overhead = unit.dispatch_ns as f64
        + unit.copy_in_ns(t.bytes_in)
        + unit.copy_out_ns(t.bytes_out)
        + t.fetch_ns;
    if let Some(buffer) = placed.job.buffer() {
        if t.buffer_moved {
            buffer.count_copy();
            if t.fetch_ns > 0.0 {
                buffer.count_copy();
            }
        }
        buffer.set_location(if unit.coherent {
            DataLocation::Host
        } else {
            DataLocation::Unit(unit.id)
        });
    }
    let exec_ns = (done.ran_ns as f64 - overhead).max(1.0);
    let finished = Finished {
        unit: unit.id,
        bytes: bytes_in,
        exec_ns,
        predicted_ns: placed.predicted_ns,
        exec_predicted_ns: placed.exec_ns,
        turnaround_ns: elapsed_ns(placed.placed_at),
        profiling: placed.profiling,
    };
    let mut job = placed.job;
    job.finish_device(&sched.infos[u].kind, &unit.name);
    sched.learn(job.slot(), &finished);
    let mut q = sched.lock();
    sched.release(&mut q, &finished);
    drop(q);
    sched.outstanding.finish(|| {
        job.complete(Where {
            unit: unit.id,
            unit_name: Arc::clone(&sched.unit_names[u]),
            accepted_at: placed.accepted_at,
        })
    });
}

pub(crate) fn fail(sched: &Arc<Scheduler>, u: usize, placed: Placed, why: String) {
    let task = placed.job.slot().name.clone();
    let exec_ns = placed.exec_ns;
    sched
        .outstanding
        .finish(|| placed.job.fail(TaskError::Unplaceable { task, why }));
    let mut q = sched.lock();
    q.units[u].running = q.units[u].running.saturating_sub(1);
    q.units[u].pending_ns = (q.units[u].pending_ns - super::finite_or_zero(exec_ns)).max(0.0);
    sched.pump(&mut q);
}

/// Fails every call waiting on unit `u` with `why` (the link gave up on
/// its daemon). Called with the queues locked.
pub(crate) fn fail_waiting(sched: &Scheduler, q: &mut Queues, u: usize, why: &str) {
    while let Some(placed) = q.units[u].waiting.pop_front() {
        let unit = &mut q.units[u];
        unit.pending_ns = (unit.pending_ns - super::finite_or_zero(placed.exec_ns)).max(0.0);
        let task = placed.job.slot().name.clone();
        placed.job.fail(TaskError::Unplaceable {
            task,
            why: why.to_string(),
        });
        sched.outstanding.done();
    }
}

/// Fails every call placed on the daemon's device units, and every call
/// in the central queue that placement then puts there (each pass frees
/// room for the next), until nothing more moves.
fn fail_daemon_calls(sched: &Arc<Scheduler>, why: &str) {
    let mut q = sched.lock();
    loop {
        let before = (q.central.len(), sched.outstanding.get());
        for u in 0..sched.units.len() {
            if sched.backends[u] == super::Backend::Emulated || sched.backends[u].is_gated() {
                fail_waiting(sched, &mut q, u, why);
            }
        }
        sched.pump(&mut q);
        if (q.central.len(), sched.outstanding.get()) == before {
            break;
        }
    }
}

/// Starts a failover on its own thread (never on the reader thread of the
/// dead connection, nor under the queues lock), then resumes device work.
/// In daemon-only mode, once the daemon has been gone for `give_up_after`,
/// the calls waiting on its devices fail, and so do later ones until a
/// retry finds it back.
pub(crate) fn spawn_failover(sched: &Arc<Scheduler>) {
    if !sched.link.begin_failover() {
        return;
    }
    let sched = Arc::clone(sched);
    let spawned = std::thread::Builder::new()
        .name("hetsched-failover".into())
        .spawn(move || {
            sched.link.mark_gone();
            loop {
                match sched.link.failover() {
                    Ok(_) => {
                        if sched.link.recovered() {
                            tracing::warn!("the daemon is back; device calls run again");
                        }
                        break;
                    }
                    Err(e) => {
                        if let Some(why) = sched.link.give_up(&e) {
                            tracing::warn!("{why}");
                        } else if sched.link.gave_up().is_none() {
                            tracing::warn!(
                                "failover failed ({e}); retrying in {:.2} s",
                                sched.link.retry_every().as_secs_f64()
                            );
                        }
                        // Every retry, not only the first after giving up:
                        // a call that a dropped reply or a failed submit
                        // put back later must not wait for the daemon.
                        if let Some(why) = sched.link.gave_up() {
                            fail_daemon_calls(&sched, &why);
                        }
                        std::thread::sleep(sched.link.retry_every());
                        if !sched.link.begin_failover() {
                            // Another failover thread started meanwhile
                            // and carries on; one is enough.
                            return;
                        }
                    }
                }
            }
            let mut q = sched.lock();
            sched.pump(&mut q);
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot start failover: {e}");
    }
}
