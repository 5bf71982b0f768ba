//! Priority: higher [`ClientSettings::priority`] first, FIFO within a
//! priority. Tasks are not preemptible (GPUs cannot switch mid-kernel), so a
//! high-priority client still waits for whatever lower-priority task is
//! running when it arrives.

use super::accounting::{ClientLedger, ClientQueue, LedgerConfig};
use super::records::{self, ArrivalSeq};
use super::{ClientSettings, PolicyError, PolicyKind, Request, UnitPolicy};
use crate::ids::{ClientId, Ns};
use crate::view::{ClientUnitView, UnitView};
use std::collections::BTreeMap;

/// The active clients of one priority level, summed for a round of views.
#[derive(Clone, Copy, Debug, Default)]
struct LevelSums {
    /// Average task × outstanding tasks.
    work_ns: f64,
    /// Average tasks of clients with a task running, and their number.
    running_avg_sum: f64,
    running_clients: u32,
}

#[derive(Debug)]
pub struct PriorityPolicy {
    ledger: ClientLedger<ClientQueue>,
    arrivals: ArrivalSeq,
}

impl PriorityPolicy {
    pub fn new(slots: u32) -> Self {
        Self::with_config(slots, LedgerConfig::default())
    }

    pub fn with_config(slots: u32, config: LedgerConfig) -> Self {
        PriorityPolicy {
            ledger: ClientLedger::new(slots, config),
            arrivals: ArrivalSeq::default(),
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
        records::remove_queued(&mut self.ledger, client, now)
    }

    fn submit(&mut self, request: Request, now: Ns) {
        self.arrivals.submit(&mut self.ledger, request, now);
    }

    fn pick_next(&mut self, now: Ns) -> Option<Request> {
        self.ledger.observe(now);
        let idx = self.next_index()?;
        ArrivalSeq::dispatch(&mut self.ledger, idx, now)
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

    /// Priority is work-conserving: nothing is ever held back.
    fn retry_at(&self, _now: Ns) -> Option<Ns> {
        None
    }

    /// Wait = work of other active clients at the same or higher priority
    /// (they run first, or arrived first), plus the expected residual of a
    /// running lower-priority task (half its average: it cannot be preempted).
    /// The active clients' work is summed once per priority level; each
    /// client then adds up the levels at or above its own (minus its own
    /// work) and the running tasks below it.
    fn client_views(&self, clients: &[ClientId], now: Ns) -> Vec<ClientUnitView> {
        let ledger = &self.ledger;
        let mut levels: BTreeMap<_, LevelSums> = BTreeMap::new();
        for c in ledger.clients().iter().filter(|c| ledger.is_active(c, now)) {
            let avg = ledger.avg_task_ns(c);
            let level = levels.entry(c.settings().priority).or_default();
            level.work_ns += avg * f64::from(c.outstanding());
            if c.running() > 0 {
                level.running_avg_sum += avg;
                level.running_clients += 1;
            }
        }
        let slots = f64::from(ledger.slots());
        clients
            .iter()
            .map(|&client| {
                let me = ledger.get(client);
                let my_priority = me.map_or(0, |c| c.settings().priority);
                let my_work = me
                    .filter(|c| ledger.is_active(c, now))
                    .map_or(0.0, |c| ledger.avg_task_ns(c) * f64::from(c.outstanding()));
                let ahead_ns: f64 = levels
                    .range(my_priority..)
                    .map(|(_, l)| l.work_ns)
                    .sum::<f64>()
                    - my_work;
                let (blocking_sum, blocking_count) = levels
                    .range(..my_priority)
                    .fold((0.0, 0u32), |(s, n), (_, l)| {
                        (s + l.running_avg_sum, n + l.running_clients)
                    });
                let residual_ns = if blocking_count > 0 {
                    blocking_sum / f64::from(blocking_count) / 2.0
                } else {
                    0.0
                };
                ClientUnitView {
                    guaranteed: 0.0,
                    wait_ns: (ahead_ns.max(0.0) + residual_ns) / slots,
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
