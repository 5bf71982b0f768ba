//! Workers of real devices that the monitor arbitrates (`opencl<N>`,
//! `cuda<N>` of a daemon with `device_units`). This process runs the
//! calls on its own handle of the device, but each run of calls first
//! waits for the unit's agent to grant a slot under the unit's policy, and
//! reports the device time it measured when the run ends. The agent thus
//! sees every process's work on the device: shares hold, and the views
//! every placement reads describe the device's real load.
//!
//! One grant covers a *batch*: the calls queued on the unit, up to
//! [`BATCH_NS`] of predicted work, so short kernels pay one round trip to
//! the monitor per batch instead of one each. While nobody else waits for
//! the unit, a grant is kept like the interposers' lease: batch after
//! batch, up to [`GRANT_HOLD`], with no round trip between them; a caller
//! that waits for each result before its next call is served the same
//! way, the grant kept a moment ([`LINGER`]) for each next call.
#![cfg_attr(not(feature = "opencl"), allow(dead_code))]

use super::device_exec::{fail, spawn_failover};
use super::worker::{Ran, run_placed};
use super::{Placed, Scheduler, finite_or_zero};
use crate::job::Job;
use hetsched_core::ids::UnitId;
use hetsched_protocol::{ClientError, Grant, TaskEvent, TaskReply};
use std::collections::VecDeque;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// Predicted work one grant may cover, ns. Well under the agents' 10 ms
/// accounting tick, so a batch does not skew shares.
pub(crate) const BATCH_NS: f64 = 2e6;
/// Calls one grant may cover.
pub(crate) const MAX_BATCH: usize = 64;
/// How long one grant may be kept for calls that arrive after it, and for
/// batch after batch, while nobody else waits: the daemon's default lease
/// (`lease_us`), the slice an intercepted program gets.
const GRANT_HOLD: Duration = Duration::from_millis(5);
/// How long a worker keeps a grant after its last call for the next one.
/// Others wait at most [`GRANT_HOLD`] in all for it; the time is charged
/// to this client like the rest of the grant.
const LINGER: Duration = Duration::from_micros(100);
/// See [`patience`].
const PATIENCE_FACTOR: f64 = 4.0;
const PATIENCE_MIN: Duration = Duration::from_millis(20);
/// What a call whose time is not known yet asks the agent for, ns.
const UNKNOWN_NS: f64 = 1e6;
/// How long a worker waits between looks at a link that is failing over.
const FAILOVER_POLL: Duration = Duration::from_millis(20);

/// Whether a gated unit holding `placed` calls of `pending_ns` predicted
/// work may take another beyond the usual short queue: up to two batches,
/// so the next batch is ready when a grant ends.
pub(crate) fn has_batch_room(placed: u32, pending_ns: f64) -> bool {
    (placed as usize) < 2 * MAX_BATCH && pending_ns > 0.0 && pending_ns < 2.0 * BATCH_NS
}

/// Runs calls of unit `u`, a batch per grant, until the runtime shuts
/// down. While a batch runs and more calls wait, the request for the next
/// grant is already at the agent: when this batch ends, the agent then
/// chooses between this process and the others by the unit's policy
/// (asking only after completing would hand the device to whoever else
/// waits, every time, whatever the shares), and the device does not idle
/// for a round trip between batches.
pub(crate) fn run_loop(
    sched: &Arc<Scheduler>,
    u: usize,
    mut run: impl FnMut(&mut dyn Job, &str, f64) -> Ran,
) {
    let mut ahead: Option<Pending> = None;
    while let Some(expected) = next_work(sched, u) {
        let pending = match ahead.take() {
            Some(p) => p,
            None => ask(sched, u, expected),
        };
        let grant = match pending.wait(sched, u) {
            Ok(g) => g,
            Err(Denied::Link) => {
                wait_for_link(sched, u);
                if let Some(why) = sched.link.gave_up() {
                    fail_head(sched, u, &why);
                }
                continue;
            }
            Err(Denied::Refused(why)) => {
                fail_head(sched, u, &why);
                continue;
            }
        };
        sched.lock().units[u].grants += 1;
        let granted_at = Instant::now();
        let (mut batch, mut next) = take_batch(sched, u);
        let mut device_ns = 0u64;
        loop {
            // With calls left beyond this batch, the next grant is asked
            // for now, so that it is at the agent when this one ends;
            // unless this grant may carry on with them.
            if next.is_some() && !may_keep(sched, u, granted_at) {
                ahead = next.map(|e| ask(sched, u, e));
            }
            for placed in batch {
                device_ns =
                    device_ns.saturating_add(run_placed(sched, u, placed, &mut run).device_ns);
            }
            // The next batch under the same grant, or (for a caller that
            // waits for each result before its next call) the next call
            // within a moment: no round trip for either while the grant
            // may be kept.
            if ahead.is_some() || !may_keep(sched, u, granted_at) {
                // Calls that arrived while the batch ran ask before the
                // slot is given back, so the agent weighs them against
                // the others by the policy.
                if ahead.is_none() {
                    ahead = queued_expected(sched, u).map(|ns| ask(sched, u, ns));
                }
                break;
            }
            match more_work(sched, u) {
                Some((b, n)) => (batch, next) = (b, n),
                None => break,
            }
        }
        report_done(sched, grant, device_ns);
    }
}

/// Tells the agent the grant's work is done and how long it held the
/// device; a grant that died with its connection was freed by the monitor
/// already, and the link fails over.
fn report_done(sched: &Arc<Scheduler>, grant: Grant, device_ns: u64) {
    let client = sched.link.client();
    if let Err(e) = client.task_completed(grant, device_ns) {
        if e.is_disconnect() || !client.is_connected() {
            spawn_failover(sched);
        }
    }
}

/// Runs one call of this process's own, outside the runtime's queues (a
/// pipeline's OpenCL stage), on gated unit `u` under its agent: asks for a
/// slot for `expected_ns`, runs `call` once granted, and reports the wall
/// time it held the device. When no slot comes (the monitor refused, or
/// its link is down) `call` does not run and the reason comes back.
pub(crate) fn run_granted<R>(
    sched: &Arc<Scheduler>,
    u: usize,
    expected_ns: f64,
    call: impl FnOnce() -> R,
) -> Result<R, String> {
    let grant = ask(sched, u, expected_ns)
        .wait(sched, u)
        .map_err(|denied| match denied {
            Denied::Refused(why) => why,
            Denied::Link => format!(
                "no slot on {}: the link to the monitor is down",
                sched.units[u].name
            ),
        })?;
    sched.lock().units[u].grants += 1;
    let started = Instant::now();
    let out = call();
    let ran_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    report_done(sched, grant, ran_ns);
    Ok(out)
}

/// Whether a grant taken at `granted_at` may be kept for more calls: held
/// less than [`GRANT_HOLD`], and nobody else waits for unit `u`.
fn may_keep(sched: &Scheduler, u: usize, granted_at: Instant) -> bool {
    granted_at.elapsed() < GRANT_HOLD && !others_wait(sched, u)
}

/// Whether other clients' requests wait at the unit's agent (its page on
/// the global view, up to a tick old).
fn others_wait(sched: &Scheduler, u: usize) -> bool {
    sched
        .link
        .client()
        .global_view()
        .and_then(|g| g.unit(u))
        .is_none_or(|unit| unit.view.queued > 0)
}

/// The next batch of unit `u` if a call arrives within [`LINGER`].
fn more_work(sched: &Scheduler, u: usize) -> Option<(Vec<Placed>, Option<f64>)> {
    let deadline = Instant::now() + LINGER;
    let mut q = sched.lock();
    while q.units[u].waiting.is_empty() {
        let left = deadline.checked_duration_since(Instant::now())?;
        if q.shutdown {
            return None;
        }
        q.units[u].idle_workers += 1;
        q = sched.wake[u]
            .wait_timeout(q, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
        q.units[u].idle_workers -= 1;
    }
    drop(q);
    Some(take_batch(sched, u))
}

/// Waits until calls wait on unit `u` and returns what the next batch
/// asks the agent for, ns; `None` at shutdown.
fn next_work(sched: &Scheduler, u: usize) -> Option<f64> {
    let mut q = sched.lock();
    loop {
        if let Some(expected) = batch_expected(&q.units[u].waiting) {
            return Some(expected);
        }
        if q.shutdown {
            return None;
        }
        q.units[u].idle_workers += 1;
        q = sched.wake[u].wait(q).unwrap_or_else(|p| p.into_inner());
        q.units[u].idle_workers -= 1;
    }
}

/// What the next batch of unit `u` would ask the agent for, if calls wait.
fn queued_expected(sched: &Scheduler, u: usize) -> Option<f64> {
    batch_expected(&sched.lock().units[u].waiting)
}

/// How many of the calls at the front of `waiting` one grant covers: up
/// to [`BATCH_NS`] of predicted work and [`MAX_BATCH`] calls; a call
/// whose time is unknown (a profiling call) alone.
fn batch_len(waiting: &VecDeque<Placed>) -> usize {
    let mut total = 0.0;
    let mut n = 0;
    for p in waiting.iter().take(MAX_BATCH) {
        if !p.exec_ns.is_finite() {
            // Alone if first, else the batch ends before it.
            return n.max(1);
        }
        if n > 0 && total + p.exec_ns > BATCH_NS {
            break;
        }
        total += p.exec_ns;
        n += 1;
    }
    n
}

/// What the batch at the front of `waiting` asks the agent for, ns.
fn batch_expected(waiting: &VecDeque<Placed>) -> Option<f64> {
    let n = batch_len(waiting);
    (n > 0).then(|| {
        waiting
            .iter()
            .take(n)
            .map(|p| {
                if p.exec_ns.is_finite() {
                    p.exec_ns
                } else {
                    UNKNOWN_NS
                }
            })
            .sum()
    })
}

/// Takes the batch at the front of unit `u`'s queue, counted as running,
/// and what the batch after it would ask for, if calls are left.
fn take_batch(sched: &Scheduler, u: usize) -> (Vec<Placed>, Option<f64>) {
    let mut q = sched.lock();
    let unit = &mut q.units[u];
    let n = batch_len(&unit.waiting);
    let batch: Vec<Placed> = unit.waiting.drain(..n).collect();
    unit.running += batch.len() as u32;
    (batch, batch_expected(&unit.waiting))
}

/// Fails the batch at the front of unit `u`'s queue with `why`.
fn fail_head(sched: &Arc<Scheduler>, u: usize, why: &str) {
    let (batch, _) = take_batch(sched, u);
    for placed in batch {
        fail(sched, u, placed, why.to_string());
    }
}

enum Denied {
    /// The monitor is gone; a failover is under way.
    Link,
    /// The monitor refused; the calls fail with this reason.
    Refused(String),
}

/// A request for a slot on the way to the agent, or why it could not go.
enum Pending {
    Sent(mpsc::Receiver<TaskReply>),
    Failed(ClientError),
}

/// Asks the agent of unit `u` for a slot for `expected_ns`, without
/// waiting for the answer.
fn ask(sched: &Scheduler, u: usize, expected_ns: f64) -> Pending {
    if sched.link.is_failing_over() {
        return Pending::Failed(ClientError::Io(std::io::ErrorKind::NotConnected.into()));
    }
    let (tx, rx) = mpsc::channel();
    let expected = finite_or_zero(expected_ns).max(1.0) as u64;
    let sent = sched.link.client().request_dispatch_with(
        UnitId(u as u16),
        expected,
        Box::new(move |reply| {
            let _ = tx.send(reply);
        }),
    );
    match sent {
        Ok(_) => Pending::Sent(rx),
        Err(e) => Pending::Failed(e),
    }
}

impl Pending {
    /// Waits for the grant. Calls that wait far longer than predicted go
    /// back to be placed again ([`patience`]); the grant, when it comes,
    /// serves whatever is still queued here.
    fn wait(self, sched: &Arc<Scheduler>, u: usize) -> Result<Grant, Denied> {
        let reply = match self {
            Pending::Sent(rx) => loop {
                match rx.recv_timeout(patience(sched, u)) {
                    Ok(reply) => break reply,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        let mut q = sched.lock();
                        sched.replace_waiting(&mut q, u);
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        break Err(ClientError::Io(std::io::ErrorKind::UnexpectedEof.into()));
                    }
                }
            },
            Pending::Failed(e) => Err(e),
        };
        match reply {
            Ok(TaskEvent::Granted(grant)) => Ok(grant),
            Ok(other) => Err(Denied::Refused(format!(
                "the monitor answered {other:?} to a request for a slot on {}",
                sched.units[u].name
            ))),
            Err(e) if e.is_disconnect() || !sched.link.client().is_connected() => {
                spawn_failover(sched);
                Err(Denied::Link)
            }
            Err(e) => Err(Denied::Refused(format!(
                "the monitor refused a slot on {}: {e}",
                sched.units[u].name
            ))),
        }
    }
}

/// How long the calls at the front of unit `u` may wait for a grant
/// before they go back to be placed again: [`PATIENCE_FACTOR`] times the
/// turnaround predicted for the first of them, at least [`PATIENCE_MIN`].
/// Placement saw the unit's page when it chose; when the agent keeps the
/// call far longer (another process took the unit since, and this one's
/// share is used up), fresh views choose again.
fn patience(sched: &Scheduler, u: usize) -> Duration {
    let q = sched.lock();
    let predicted_ns = q.units[u]
        .waiting
        .front()
        .map(|p| p.predicted_ns)
        .filter(|ns| ns.is_finite() && *ns > 0.0)
        .unwrap_or(0.0);
    Duration::from_nanos((predicted_ns * PATIENCE_FACTOR) as u64).max(PATIENCE_MIN)
}

/// Returns once the link is no longer failing over (or at shutdown).
fn wait_for_link(sched: &Scheduler, u: usize) {
    let mut q = sched.lock();
    while sched.link.is_failing_over() && sched.link.gave_up().is_none() && !q.shutdown {
        q = sched.wake[u]
            .wait_timeout(q, FAILOVER_POLL)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_room_is_bounded_by_time_and_count() {
        assert!(has_batch_room(3, 1e5));
        assert!(!has_batch_room(3, 0.0), "unknown work takes no extra room");
        assert!(!has_batch_room(3, 2.0 * BATCH_NS));
        assert!(!has_batch_room(2 * MAX_BATCH as u32, 1e3));
    }
}
