//! FIFO: one queue in arrival order, what GPU drivers do natively. It
//! guarantees nothing, so a client's view is only the work queued ahead.
//!
//! The same queue can run short-first instead ([`FifoPolicy::short_first`],
//! kind `short-first`; the order is explained in [`super::short_first`]),
//! and be switched between the two orders at run time by the coordinator
//! ([`UnitPolicy::set_short_first`]).

use super::accounting::{ClientLedger, LedgerConfig};
use super::records;
use super::short_first::short_first_key;
use super::{ClientSettings, PolicyError, PolicyKind, Request, UnitPolicy};
use crate::ids::{ClientId, Ns};
use crate::view::{ClientUnitView, UnitView};
use std::collections::VecDeque;

#[derive(Debug)]
pub struct FifoPolicy {
    ledger: ClientLedger,
    /// Waiting requests in arrival order, with their submit times.
    queue: VecDeque<(Ns, Request)>,
    /// `None`: a FIFO unit. `Some(on)`: a short-first unit, passing short
    /// requests when `on` (the coordinator may turn it off). Short-first
    /// keys are computed at dispatch, from the lengths measured by then and
    /// the order in force; queues are short (a few requests per client), so
    /// a scan costs less than keeping a heap.
    short_first: Option<bool>,
}

impl FifoPolicy {
    pub fn new(slots: u32) -> Self {
        Self::with_config(slots, LedgerConfig::default())
    }

    pub fn with_config(slots: u32, config: LedgerConfig) -> Self {
        FifoPolicy {
            ledger: ClientLedger::new(slots, config),
            queue: VecDeque::new(),
            short_first: None,
        }
    }

    /// A queue that lets short requests pass long ones, within a bound.
    pub fn short_first(slots: u32) -> Self {
        FifoPolicy {
            short_first: Some(true),
            ..Self::new(slots)
        }
    }

    pub fn ledger(&self) -> &ClientLedger {
        &self.ledger
    }

    fn passing(&self) -> bool {
        self.short_first == Some(true)
    }

    /// The client's average task on this unit: measured, or its claim
    /// until something completed.
    fn expected_ns(&self, client: ClientId) -> f64 {
        self.ledger
            .get(client)
            .map_or(0.0, |c| self.ledger.avg_task_ns(c))
    }

    /// The short-first key of a request of `client` submitted at `submitted`.
    fn key(&self, submitted: Ns, client: ClientId) -> f64 {
        short_first_key(submitted as f64, self.expected_ns(client))
    }

    /// Where the next request to run is: the head in arrival order, else
    /// the smallest key (the earliest arrival among equals: `min_by` keeps
    /// the first).
    fn next_index(&self) -> Option<usize> {
        if !self.passing() {
            return (!self.queue.is_empty()).then_some(0);
        }
        self.queue
            .iter()
            .enumerate()
            .map(|(i, (at, r))| (i, self.key(*at, r.client)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    }

    /// Short-first: the rest of what runs, and the queued requests whose
    /// keys are no larger than a request submitted now would get (on a tie
    /// the earlier request goes first).
    fn short_first_wait_ns(&self, client: ClientId, now: Ns) -> f64 {
        let mine = self.key(now, client);
        let queued_ahead: f64 = self
            .queue
            .iter()
            .filter(|(at, r)| r.client != client && self.key(*at, r.client) <= mine)
            .map(|(_, r)| self.expected_ns(r.client))
            .sum();
        self.ledger.running_left_ns(client, now)
            + queued_ahead / f64::from(self.ledger.slots().max(1))
    }
}

impl UnitPolicy for FifoPolicy {
    fn kind(&self) -> PolicyKind {
        if self.short_first.is_some() {
            PolicyKind::ShortFirst
        } else {
            PolicyKind::Fifo
        }
    }

    /// The order ignores classes and priorities, so every setting is
    /// accepted.
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
        self.queue.retain(|(_, r)| {
            let keep = r.client != client;
            if !keep {
                dropped.push(*r);
            }
            keep
        });
        self.ledger.remove(client, now);
        dropped
    }

    fn submit(&mut self, request: Request, now: Ns) {
        records::record_submitted(&mut self.ledger, &request, now);
        self.queue.push_back((now, request));
    }

    fn pick_next(&mut self, now: Ns) -> Option<Request> {
        // `remove`: the queue stays in arrival order.
        let (_, request) = self.queue.remove(self.next_index()?)?;
        records::record_dispatched(&mut self.ledger, request.client, now);
        Some(request)
    }

    fn complete(&mut self, client: ClientId, ran_ns: Ns, now: Ns) {
        self.ledger.record_complete(client, ran_ns, now);
    }

    fn charge(&mut self, client: ClientId, ran_ns: Ns, now: Ns) {
        self.ledger.record_charge(client, ran_ns, now);
    }

    fn tick(&mut self, now: Ns) {
        self.ledger.tick(now);
    }

    /// Nothing is ever held back.
    fn retry_at(&self, _now: Ns) -> Option<Ns> {
        None
    }

    /// In FIFO order the backlog is summed once for the round and each
    /// client's own part taken out; passing short-first order depends on
    /// each client's key, so each is computed on its own.
    fn client_views(&self, clients: &[ClientId], now: Ns) -> Vec<ClientUnitView> {
        let ledger = &self.ledger;
        let slots = f64::from(ledger.slots());
        let backlog: f64 = if self.passing() {
            0.0
        } else {
            ledger
                .clients()
                .iter()
                .map(|c| ledger.backlog_ns(c, now))
                .sum()
        };
        clients
            .iter()
            .map(|&client| {
                let me = ledger.get(client);
                let wait_ns = if self.passing() {
                    self.short_first_wait_ns(client, now)
                } else {
                    // The backlog right now, not a count of active clients:
                    // a task arriving mid-way through another's long task
                    // waits only for its remainder (this closed most of the
                    // gap to c-sched's exact queues).
                    let mine = me.map_or(0.0, |c| ledger.backlog_ns(c, now));
                    (backlog - mine).max(0.0) / slots
                };
                ClientUnitView {
                    guaranteed: 0.0,
                    wait_ns,
                    current_utilisation: me.map_or(0.0, |c| ledger.utilisation(c, now)),
                    ..ClientUnitView::OPEN
                }
            })
            .collect()
    }

    fn unit_view(&self, now: Ns) -> UnitView {
        self.ledger.unit_view(now)
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn set_short_first(&mut self, on: bool) {
        if let Some(order) = self.short_first.as_mut() {
            *order = on;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TaskId;

    const MS: Ns = 1_000_000;

    fn req(client: u32, task: u64, now: Ns) -> Request {
        Request {
            client: ClientId(client),
            task: TaskId(task),
            expected_ns: 2e6,
            submitted_at: now,
        }
    }

    #[test]
    fn dispatches_in_arrival_order_across_clients() {
        let mut p = FifoPolicy::new(1);
        let order = [(3, 0), (1, 1), (3, 2), (2, 3), (1, 4)];
        for (i, &(c, t)) in order.iter().enumerate() {
            p.submit(req(c, t, i as Ns), i as Ns);
        }
        assert_eq!(p.queued(), 5);
        let got: Vec<_> = std::iter::from_fn(|| p.pick_next(10))
            .map(|r| r.task.0)
            .collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert_eq!(p.pick_next(10), None);
    }

    #[test]
    fn wait_grows_with_others_outstanding_work() {
        let mut p = FifoPolicy::new(1);
        p.submit(req(1, 0, 0), 0);
        let alone = p.client_view(ClientId(1), 0);
        assert_eq!(alone.wait_ns, 0.0);
        assert_eq!(alone.expected_utilisation(2e6), 1.0);

        p.submit(req(2, 0, 0), 0);
        let one = p.client_view(ClientId(1), 0).wait_ns;
        p.submit(req(2, 1, 0), 0);
        p.submit(req(2, 2, 0), 0);
        let three = p.client_view(ClientId(1), 0).wait_ns;
        assert_eq!(one, 2e6);
        assert_eq!(three, 6e6);
        // The client's own queue does not count against it.
        assert_eq!(p.client_view(ClientId(2), 0).wait_ns, 2e6);
    }

    #[test]
    fn wait_counts_the_expected_remainder_of_running_work() {
        let mut p = FifoPolicy::new(2);
        p.submit(req(2, 0, 0), 0);
        p.pick_next(0);
        p.complete(ClientId(2), 8 * MS, 8 * MS);
        // Client 2 is idle: nothing of it is ahead of a new task.
        assert_eq!(p.client_view(ClientId(1), 9 * MS).wait_ns, 0.0);
        // Its next task runs from 10 ms; its measured size (8 ms, not the
        // claimed 2 ms) minus the 2 ms already run is left, over two slots.
        p.submit(req(2, 1, 10 * MS), 10 * MS);
        p.pick_next(10 * MS);
        assert_eq!(p.client_view(ClientId(1), 12 * MS).wait_ns, 3e6);
        // A queued task counts whole.
        p.submit(req(2, 2, 12 * MS), 12 * MS);
        assert_eq!(p.client_view(ClientId(1), 12 * MS).wait_ns, 7e6);
    }

    #[test]
    fn remove_returns_queued_requests_in_order() {
        let mut p = FifoPolicy::new(1);
        p.submit(req(1, 0, 0), 0);
        p.submit(req(2, 1, 0), 0);
        p.submit(req(1, 2, 0), 0);
        let dropped = p.remove_client(ClientId(1), 1);
        assert_eq!(
            dropped.iter().map(|r| r.task.0).collect::<Vec<_>>(),
            vec![0, 2]
        );
        assert_eq!(p.queued(), 1);
        assert_eq!(p.unit_view(1).queued, 1);
        assert_eq!(p.pick_next(1).map(|r| r.client), Some(ClientId(2)));
    }

    #[test]
    fn unknown_clients_are_registered_or_ignored() {
        let mut p = FifoPolicy::new(1);
        p.complete(ClientId(9), 5, 5); // ignored, no panic
        assert_eq!(p.unit_view(5).running, 0);
        p.submit(req(9, 0, 6), 6);
        assert!(p.ledger().get(ClientId(9)).is_some());
        assert_eq!(p.retry_at(6), None);
    }
}
