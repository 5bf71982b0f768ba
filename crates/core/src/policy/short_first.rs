//! Short-first: a device queue that lets short tasks pass long ones, within
//! a bound.
//!
//! A FIFO device makes an app with 0.1 ms tasks wait behind every 5 ms task
//! queued ahead of it, so its turnaround is set by the other apps' tasks,
//! not its own. Shortest-first removes that, but a long task could then be
//! passed forever. Here every request gets a key, its submit time plus
//! [`SHORT_FIRST_STRETCH`] × the client's average task on this unit, and
//! the smallest key runs next. A request is passed only by requests
//! submitted within `STRETCH ×` its own task length after it, so its wait
//! grows by at most that much over FIFO: no starvation, and a long-task
//! app's turnaround grows by a bounded fraction.
//!
//! The length used is the one this unit *measured* for the client (the
//! ledger's average), the client's own claim only until something
//! completed, so a client that claims short tasks gains nothing after its
//! first one. Tasks are not preempted: a request still waits for whatever
//! runs when it arrives.
//!
//! The queue itself is [`super::FifoPolicy`], built by
//! [`FifoPolicy::short_first`](super::FifoPolicy::short_first): the two
//! orders share everything but the pick, and the coordinator switches a
//! short-first unit between them.

/// How much a request's own expected length moves its key: a request may
/// be passed by requests submitted up to this many times its length later.
/// 0 is FIFO; larger approaches shortest-first.
pub const SHORT_FIRST_STRETCH: f64 = 1.0;

/// The order key of a request submitted at `submitted_ns` whose client's
/// tasks take `expected_ns` on the unit (smaller runs first). Shared with
/// [`crate::replay`], which plays the same order.
pub fn short_first_key(submitted_ns: f64, expected_ns: f64) -> f64 {
    submitted_ns + SHORT_FIRST_STRETCH * expected_ns.max(0.0)
}

#[cfg(test)]
mod tests {
    use super::super::{FifoPolicy, Request, UnitPolicy};
    use crate::ids::ClientId;
    use crate::ids::{Ns, TaskId};

    const MS: Ns = 1_000_000;

    fn req(client: u32, task: u64, expected: Ns, now: Ns) -> Request {
        Request {
            client: ClientId(client),
            task: TaskId(task),
            expected_ns: expected as f64,
            submitted_at: now,
        }
    }

    fn drain(p: &mut FifoPolicy, now: Ns) -> Vec<u64> {
        std::iter::from_fn(|| p.pick_next(now))
            .map(|r| r.task.0)
            .collect()
    }

    #[test]
    fn a_short_task_passes_a_long_one_submitted_just_before() {
        let mut p = FifoPolicy::short_first(1);
        p.submit(req(1, 0, 10 * MS, 0), 0);
        p.submit(req(2, 1, MS / 10, MS), MS);
        assert_eq!(drain(&mut p, MS), vec![1, 0]);
    }

    #[test]
    fn a_long_task_is_passed_only_within_its_stretch() {
        // Key of the 10 ms task: 0 + 10 ms. A 0.1 ms task submitted at
        // 9 ms (key 9.1 ms) passes it; one submitted at 11 ms does not.
        let mut p = FifoPolicy::short_first(1);
        p.submit(req(1, 0, 10 * MS, 0), 0);
        p.submit(req(2, 1, MS / 10, 9 * MS), 9 * MS);
        p.submit(req(3, 2, MS / 10, 11 * MS), 11 * MS);
        assert_eq!(drain(&mut p, 11 * MS), vec![1, 0, 2]);
    }

    #[test]
    fn equal_lengths_run_in_arrival_order() {
        let mut p = FifoPolicy::short_first(1);
        for (i, c) in [3, 1, 2, 1].into_iter().enumerate() {
            p.submit(req(c, i as u64, 2 * MS, 0), 0);
        }
        assert_eq!(drain(&mut p, 0), vec![0, 1, 2, 3]);
    }

    #[test]
    fn the_measured_length_outweighs_the_claim() {
        let mut p = FifoPolicy::short_first(1);
        // Client 1 claims 0.1 ms but its first task ran 10 ms.
        p.submit(req(1, 0, MS / 10, 0), 0);
        p.pick_next(0);
        p.complete(ClientId(1), 10 * MS, 10 * MS);
        // Client 2 (1 ms, claimed honestly) submits a little later than
        // client 1's next lie: it runs first all the same.
        p.submit(req(1, 1, MS / 10, 10 * MS), 10 * MS);
        p.submit(req(2, 2, MS, 11 * MS), 11 * MS);
        assert_eq!(drain(&mut p, 11 * MS), vec![2, 1]);
    }

    #[test]
    fn view_counts_the_running_rest_and_the_requests_ahead() {
        let mut p = FifoPolicy::short_first(1);
        p.submit(req(1, 0, 10 * MS, 0), 0);
        p.pick_next(0);
        // 10 ms task running since 0, so 6 ms left at 4 ms.
        p.submit(req(1, 1, 10 * MS, 4 * MS), 4 * MS);
        p.submit(req(2, 2, MS, 4 * MS), 4 * MS);
        // Client 3 (1 ms tasks by its claim) would go after client 2's
        // request (same key, later) but before client 1's queued one.
        p.submit(req(3, 3, MS, 4 * MS), 4 * MS);
        let view = p.client_view(ClientId(3), 4 * MS);
        assert_eq!(view.wait_ns, (6 + 1) as f64 * MS as f64);
        // Client 1's own running task does not count; both 1 ms requests
        // (keys 5 ms) are ahead of its next one (key 14 ms).
        assert_eq!(p.client_view(ClientId(1), 4 * MS).wait_ns, 2.0 * MS as f64);
    }

    #[test]
    fn switched_off_it_runs_in_arrival_order() {
        let mut p = FifoPolicy::short_first(1);
        p.submit(req(1, 0, 10 * MS, 0), 0);
        p.submit(req(2, 1, MS / 10, MS), MS);
        p.set_short_first(false);
        assert_eq!(drain(&mut p, MS), vec![0, 1]);
        // Switching applies to requests already queued.
        p.submit(req(1, 2, 10 * MS, 2 * MS), 2 * MS);
        p.submit(req(2, 3, MS / 10, 3 * MS), 3 * MS);
        p.set_short_first(true);
        assert_eq!(drain(&mut p, 3 * MS), vec![3, 2]);
    }

    #[test]
    fn remove_returns_queued_requests_in_arrival_order() {
        let mut p = FifoPolicy::short_first(1);
        p.submit(req(1, 0, 5 * MS, 0), 0);
        p.submit(req(2, 1, MS, 0), 0);
        p.submit(req(1, 2, MS, 1), 1);
        let dropped = p.remove_client(ClientId(1), 2);
        assert_eq!(
            dropped.iter().map(|r| r.task.0).collect::<Vec<_>>(),
            vec![0, 2]
        );
        assert_eq!(p.queued(), 1);
        assert_eq!(p.pick_next(2).map(|r| r.client), Some(ClientId(2)));
    }
}
