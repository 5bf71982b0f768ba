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

use super::accounting::{ClientLedger, LedgerConfig};
use super::{ClientSettings, PolicyError, PolicyKind, Request, UnitPolicy};
use crate::ids::{ClientId, Ns};
use crate::view::{ClientUnitView, UnitView};

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

#[derive(Clone, Copy, Debug)]
struct Queued {
    submitted: Ns,
    request: Request,
}

#[derive(Debug)]
pub struct ShortFirstPolicy {
    ledger: ClientLedger,
    /// Waiting requests in arrival order. Keys are computed at dispatch,
    /// from the lengths measured by then and the order in force; queues are
    /// short (a few requests per client), so a scan costs less than a heap.
    queue: Vec<Queued>,
    /// Off: arrival order (what the coordinator picks where passing would
    /// cost a long-task app its floor).
    on: bool,
}

impl ShortFirstPolicy {
    pub fn new(slots: u32) -> Self {
        Self::with_config(slots, LedgerConfig::default())
    }

    pub fn with_config(slots: u32, config: LedgerConfig) -> Self {
        ShortFirstPolicy {
            ledger: ClientLedger::new(slots, config),
            queue: Vec::new(),
            on: true,
        }
    }

    pub fn ledger(&self) -> &ClientLedger {
        &self.ledger
    }

    fn expected_ns(&self, client: ClientId) -> f64 {
        self.ledger
            .get(client)
            .map_or(0.0, |c| self.ledger.avg_task_ns(c))
    }

    /// The order key of a request of `client` submitted at `submitted`.
    fn key(&self, submitted: Ns, client: ClientId) -> f64 {
        if self.on {
            short_first_key(submitted as f64, self.expected_ns(client))
        } else {
            submitted as f64
        }
    }

    /// The smallest key; the earliest arrival among equals (the queue is in
    /// arrival order and `min_by` keeps the first).
    fn next_index(&self) -> Option<usize> {
        self.queue
            .iter()
            .enumerate()
            .map(|(i, q)| (i, self.key(q.submitted, q.request.client)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    }
}

impl UnitPolicy for ShortFirstPolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::ShortFirst
    }

    /// The order depends on task lengths only, so every setting is accepted.
    fn set_client(
        &mut self,
        client: ClientId,
        settings: ClientSettings,
        now: Ns,
    ) -> Result<(), PolicyError> {
        self.ledger.set_settings(client, settings, now);
        Ok(())
    }

    fn remove_client(&mut self, client: ClientId, now: Ns) -> Vec<Request> {
        let mut dropped = Vec::new();
        self.queue.retain(|q| {
            let keep = q.request.client != client;
            if !keep {
                dropped.push(q.request);
            }
            keep
        });
        self.ledger.remove(client, now);
        dropped
    }

    fn submit(&mut self, request: Request, now: Ns) {
        let idx = self.ledger.ensure(request.client, now);
        self.ledger.record_submit(idx, request.expected_ns, now);
        self.queue.push(Queued {
            submitted: now,
            request,
        });
    }

    fn pick_next(&mut self, now: Ns) -> Option<Request> {
        // `remove`, not `swap_remove`: the queue stays in arrival order.
        let request = self.queue.remove(self.next_index()?).request;
        let idx = self.ledger.ensure(request.client, now);
        self.ledger.record_dispatch(idx, now);
        Some(request)
    }

    fn complete(&mut self, client: ClientId, ran_ns: Ns, now: Ns) {
        self.ledger.record_complete(client, ran_ns, now);
    }

    fn tick(&mut self, now: Ns) {
        self.ledger.tick(now);
    }

    /// Nothing is ever held back.
    fn retry_at(&self, _now: Ns) -> Option<Ns> {
        None
    }

    /// A task submitted now waits for the rest of what runs and for the
    /// queued requests whose keys are no larger than its own would be (on a
    /// tie the earlier request goes first).
    fn client_view(&self, client: ClientId, now: Ns) -> ClientUnitView {
        let current_utilisation = self
            .ledger
            .get(client)
            .map_or(0.0, |c| self.ledger.utilisation(c, now));
        let my_key = self.key(now, client);
        let queued_ahead: f64 = self
            .queue
            .iter()
            .filter(|q| {
                q.request.client != client && self.key(q.submitted, q.request.client) <= my_key
            })
            .map(|q| self.expected_ns(q.request.client))
            .sum();
        ClientUnitView {
            guaranteed: 0.0,
            wait_ns: self.ledger.running_left_ns(client, now)
                + queued_ahead / f64::from(self.ledger.slots().max(1)),
            current_utilisation,
            throttled: false,
            max_utilisation: 1.0,
        }
    }

    fn unit_view(&self, now: Ns) -> UnitView {
        self.ledger.unit_view(now)
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn set_short_first(&mut self, on: bool) {
        self.on = on;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TaskId;

    const MS: Ns = 1_000_000;

    fn req(client: u32, task: u64, expected: Ns, now: Ns) -> Request {
        Request {
            client: ClientId(client),
            task: TaskId(task),
            expected_ns: expected as f64,
            submitted_at: now,
        }
    }

    fn drain(p: &mut ShortFirstPolicy, now: Ns) -> Vec<u64> {
        std::iter::from_fn(|| p.pick_next(now))
            .map(|r| r.task.0)
            .collect()
    }

    #[test]
    fn a_short_task_passes_a_long_one_submitted_just_before() {
        let mut p = ShortFirstPolicy::new(1);
        p.submit(req(1, 0, 10 * MS, 0), 0);
        p.submit(req(2, 1, MS / 10, MS), MS);
        assert_eq!(drain(&mut p, MS), vec![1, 0]);
    }

    #[test]
    fn a_long_task_is_passed_only_within_its_stretch() {
        // Key of the 10 ms task: 0 + 10 ms. A 0.1 ms task submitted at
        // 9 ms (key 9.1 ms) passes it; one submitted at 11 ms does not.
        let mut p = ShortFirstPolicy::new(1);
        p.submit(req(1, 0, 10 * MS, 0), 0);
        p.submit(req(2, 1, MS / 10, 9 * MS), 9 * MS);
        p.submit(req(3, 2, MS / 10, 11 * MS), 11 * MS);
        assert_eq!(drain(&mut p, 11 * MS), vec![1, 0, 2]);
    }

    #[test]
    fn equal_lengths_run_in_arrival_order() {
        let mut p = ShortFirstPolicy::new(1);
        for (i, c) in [3, 1, 2, 1].into_iter().enumerate() {
            p.submit(req(c, i as u64, 2 * MS, 0), 0);
        }
        assert_eq!(drain(&mut p, 0), vec![0, 1, 2, 3]);
    }

    #[test]
    fn the_measured_length_outweighs_the_claim() {
        let mut p = ShortFirstPolicy::new(1);
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
        let mut p = ShortFirstPolicy::new(1);
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
        let mut p = ShortFirstPolicy::new(1);
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
        let mut p = ShortFirstPolicy::new(1);
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
