//! Priority: higher [`ClientSettings::priority`] first, FIFO within a
//! priority. Tasks are not preemptible (GPUs cannot switch mid-kernel), so a
//! high-priority client still waits for whatever lower-priority task is
//! running when it arrives.

use super::accounting::{ClientLedger, ClientQueue, LedgerConfig, QueuedRequest};
use super::{ClientSettings, PolicyError, PolicyKind, Request, UnitPolicy};
use crate::ids::{ClientId, Ns};
use crate::view::{ClientUnitView, UnitView};

#[derive(Debug)]
pub struct PriorityPolicy {
    ledger: ClientLedger<ClientQueue>,
    next_seq: u64,
}

impl PriorityPolicy {
    pub fn new(slots: u32) -> Self {
        Self::with_config(slots, LedgerConfig::default())
    }

    pub fn with_config(slots: u32, config: LedgerConfig) -> Self {
        PriorityPolicy {
            ledger: ClientLedger::new(slots, config),
            next_seq: 0,
        }
    }

    pub fn ledger(&self) -> &ClientLedger<ClientQueue> {
        &self.ledger
    }

    /// The client whose head request runs next: highest priority, then
    /// earliest arrival. Scanning clients (not a global heap) keeps priority
    /// changes effective for already-queued requests and allocates nothing.
    fn next_index(&self) -> Option<usize> {
        let mut best: Option<(usize, i32, u64)> = None;
        for (idx, c) in self.ledger.clients().iter().enumerate() {
            let Some(head) = c.queue.front() else {
                continue;
            };
            let prio = c.settings().priority;
            let better = match best {
                None => true,
                Some((_, bp, bs)) => prio > bp || (prio == bp && head.seq < bs),
            };
            if better {
                best = Some((idx, prio, head.seq));
            }
        }
        best.map(|(idx, _, _)| idx)
    }
}

impl UnitPolicy for PriorityPolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Priority
    }

    /// Any priority is valid; share classes are ignored by this policy.
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
        self.ledger
            .remove(client, now)
            .map(|c| c.queue.into_iter().map(|q| q.request).collect())
            .unwrap_or_default()
    }

    fn submit(&mut self, request: Request, now: Ns) {
        let idx = self.ledger.ensure(request.client, now);
        self.ledger.record_submit(idx, request.expected_ns, now);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.ledger.clients_mut()[idx]
            .queue
            .push_back(QueuedRequest { request, seq });
    }

    fn pick_next(&mut self, now: Ns) -> Option<Request> {
        self.ledger.observe(now);
        let idx = self.next_index()?;
        let queued = self.ledger.clients_mut()[idx].queue.pop_front()?;
        self.ledger.record_dispatch(idx, now);
        Some(queued.request)
    }

    fn complete(&mut self, client: ClientId, ran_ns: Ns, now: Ns) {
        self.ledger.record_complete(client, ran_ns, now);
    }

    fn tick(&mut self, now: Ns) {
        self.ledger.tick(now);
    }

    /// Priority is work-conserving: nothing is ever held back.
    fn retry_at(&self, _now: Ns) -> Option<Ns> {
        None
    }

    /// Wait = work of other active clients at the same or higher priority
    /// (they run first, or arrived first), plus the expected residual of a
    /// running lower-priority task (half its average: it cannot be preempted).
    fn client_view(&self, client: ClientId, now: Ns) -> ClientUnitView {
        let me = self.ledger.get(client);
        let my_priority = me.map_or(0, |c| c.settings().priority);
        let mut ahead_ns = 0.0;
        let mut blocking_sum = 0.0;
        let mut blocking_count = 0u32;
        for c in self.ledger.active_others(client, now) {
            let avg = self.ledger.avg_task_ns(c);
            if c.settings().priority >= my_priority {
                ahead_ns += avg * f64::from(c.outstanding());
            } else if c.running() > 0 {
                blocking_sum += avg;
                blocking_count += 1;
            }
        }
        let residual_ns = if blocking_count > 0 {
            blocking_sum / f64::from(blocking_count) / 2.0
        } else {
            0.0
        };
        let slots = f64::from(self.ledger.slots());
        ClientUnitView {
            guaranteed: 0.0,
            wait_ns: (ahead_ns + residual_ns) / slots,
            current_utilisation: me.map_or(0.0, |c| self.ledger.utilisation(c, now)),
            throttled: false,
            max_utilisation: 1.0,
        }
    }

    fn unit_view(&self, now: Ns) -> UnitView {
        self.ledger.unit_view(now)
    }

    fn queued(&self) -> usize {
        self.ledger.queued() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TaskId;

    const MS: Ns = 1_000_000;

    fn req(client: u32, task: u64, expected_ms: f64) -> Request {
        Request {
            client: ClientId(client),
            task: TaskId(task),
            expected_ns: expected_ms * MS as f64,
            submitted_at: 0,
        }
    }

    fn with_priority(p: &mut PriorityPolicy, client: u32, priority: i32) {
        let settings = ClientSettings {
            priority,
            ..Default::default()
        };
        p.set_client(ClientId(client), settings, 0).unwrap();
    }

    #[test]
    fn higher_priority_first_fifo_within_priority() {
        let mut p = PriorityPolicy::new(1);
        with_priority(&mut p, 1, 0);
        with_priority(&mut p, 2, 5);
        with_priority(&mut p, 3, 5);
        p.submit(req(1, 10, 1.0), 0);
        p.submit(req(3, 30, 1.0), 0);
        p.submit(req(2, 20, 1.0), 0);
        p.submit(req(3, 31, 1.0), 0);
        p.submit(req(1, 11, 1.0), 0);
        let got: Vec<_> = std::iter::from_fn(|| p.pick_next(0))
            .map(|r| r.task.0)
            .collect();
        assert_eq!(got, vec![30, 20, 31, 10, 11]);
    }

    #[test]
    fn reorders_but_never_preempts() {
        let mut p = PriorityPolicy::new(1);
        with_priority(&mut p, 1, 0);
        with_priority(&mut p, 2, 9);
        p.submit(req(1, 10, 20.0), 0);
        assert_eq!(p.pick_next(0).map(|r| r.task.0), Some(10));
        // The long low-priority task is running; a high-priority one arrives.
        p.submit(req(1, 11, 20.0), MS);
        p.submit(req(2, 20, 1.0), MS);
        let view = p.client_view(ClientId(2), MS);
        // Nothing of equal or higher priority is ahead, but the running
        // low-priority task still has about half of itself to go.
        assert_eq!(view.wait_ns, 10.0 * MS as f64);
        assert_eq!(p.unit_view(MS).running, 1);
        // The running task stays put until it completes; then the
        // high-priority request jumps the queue.
        p.complete(ClientId(1), 20 * MS, 20 * MS);
        assert_eq!(p.pick_next(20 * MS).map(|r| r.task.0), Some(20));
        assert_eq!(p.pick_next(21 * MS).map(|r| r.task.0), Some(11));
    }

    #[test]
    fn low_priority_wait_counts_higher_and_equal_work() {
        let mut p = PriorityPolicy::new(1);
        with_priority(&mut p, 1, 0);
        with_priority(&mut p, 2, 3);
        with_priority(&mut p, 3, 0);
        p.submit(req(2, 0, 4.0), 0);
        p.submit(req(2, 1, 4.0), 0);
        p.submit(req(3, 2, 2.0), 0);
        // Client 1 (priority 0) waits for both of client 2 and client 3's task.
        assert_eq!(p.client_view(ClientId(1), 0).wait_ns, 10.0 * MS as f64);
        // Client 2 has the highest priority: no one is ahead of it.
        assert_eq!(p.client_view(ClientId(2), 0).wait_ns, 0.0);
    }

    #[test]
    fn priority_change_applies_to_queued_requests() {
        let mut p = PriorityPolicy::new(1);
        p.submit(req(1, 10, 1.0), 0);
        p.submit(req(2, 20, 1.0), 0);
        with_priority(&mut p, 2, 1);
        assert_eq!(p.pick_next(0).map(|r| r.task.0), Some(20));
        let dropped = p.remove_client(ClientId(1), 0);
        assert_eq!(dropped.len(), 1);
        assert_eq!(p.queued(), 0);
        assert_eq!(p.pick_next(0), None);
    }
}
