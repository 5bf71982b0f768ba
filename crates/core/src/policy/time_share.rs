//! A time-shared CPU: the kernel (CFS) interleaves every runnable task, so
//! the agent admits everything at once and only reports. There is no queue to
//! wait in; what a client can expect is its fair slice of the cores.

use super::accounting::{ClientLedger, LedgerConfig};
use super::{ClientSettings, FifoPolicy, PolicyError, PolicyKind, Request, UnitPolicy};
use crate::ids::{ClientId, Ns};
use crate::view::{ClientUnitView, UnitView};

/// Admission and accounting are FIFO's (arrival order, nothing held back:
/// the caller runs every admitted task at once, sharing the cores); only
/// what a client is told differs.
#[derive(Debug)]
pub struct TimeSharePolicy {
    admission: FifoPolicy,
}

impl TimeSharePolicy {
    pub fn new(slots: u32) -> Self {
        Self::with_config(slots, LedgerConfig::default())
    }

    pub fn with_config(slots: u32, config: LedgerConfig) -> Self {
        TimeSharePolicy {
            admission: FifoPolicy::with_config(slots, config),
        }
    }

    pub fn ledger(&self) -> &ClientLedger {
        self.admission.ledger()
    }
}

impl UnitPolicy for TimeSharePolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::TimeShare
    }

    /// The kernel does the sharing; settings are recorded but not enforced.
    fn set_client(
        &mut self,
        client: ClientId,
        settings: ClientSettings,
        now: Ns,
    ) -> Result<(), PolicyError> {
        self.admission.set_client(client, settings, now)
    }

    fn remove_client(&mut self, client: ClientId, now: Ns) -> Vec<Request> {
        self.admission.remove_client(client, now)
    }

    fn submit(&mut self, request: Request, now: Ns) {
        self.admission.submit(request, now);
    }

    /// Every request is admitted, whatever the number of running tasks.
    fn pick_next(&mut self, now: Ns) -> Option<Request> {
        self.admission.pick_next(now)
    }

    fn complete(&mut self, client: ClientId, ran_ns: Ns, now: Ns) {
        self.admission.complete(client, ran_ns, now);
    }

    /// The ledger counts `min(running, slots)` busy slots, which is the
    /// busy fraction of a time-shared CPU.
    fn tick(&mut self, now: Ns) {
        self.admission.tick(now);
    }

    fn retry_at(&self, now: Ns) -> Option<Ns> {
        self.admission.retry_at(now)
    }

    /// Each client's fair slice counts the others' tasks: summed once for
    /// the round, each client's own taken out.
    fn client_views(&self, clients: &[ClientId], now: Ns) -> Vec<ClientUnitView> {
        let ledger = self.ledger();
        let all_tasks: u64 = ledger
            .clients()
            .iter()
            .map(|c| u64::from(c.outstanding()))
            .sum();
        let slots = f64::from(ledger.slots());
        clients
            .iter()
            .map(|&client| {
                let me = ledger.get(client);
                let tasks_of_others = all_tasks - me.map_or(0, |c| u64::from(c.outstanding()));
                ClientUnitView {
                    guaranteed: (slots / (tasks_of_others as f64 + 1.0)).min(1.0),
                    // No queue, only sharing: the fair slice is the utilisation.
                    wait_ns: f64::INFINITY,
                    current_utilisation: me.map_or(0.0, |c| ledger.utilisation(c, now)),
                    ..ClientUnitView::OPEN
                }
            })
            .collect()
    }

    fn unit_view(&self, now: Ns) -> UnitView {
        self.admission.unit_view(now)
    }

    fn queued(&self) -> usize {
        self.admission.queued()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TaskId;

    fn req(client: u32, task: u64) -> Request {
        Request {
            client: ClientId(client),
            task: TaskId(task),
            expected_ns: 1e6,
            submitted_at: 0,
        }
    }

    #[test]
    fn admits_everything_in_order_beyond_slots() {
        let mut p = TimeSharePolicy::new(2);
        for t in 0..5 {
            p.submit(req(t as u32 % 2, t), 0);
        }
        let got: Vec<_> = std::iter::from_fn(|| p.pick_next(0))
            .map(|r| r.task.0)
            .collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        assert_eq!(p.unit_view(0).running, 5);
        assert_eq!(p.retry_at(0), None);
    }

    #[test]
    fn guarantee_is_the_fair_slice() {
        let mut p = TimeSharePolicy::new(4);
        assert_eq!(p.client_view(ClientId(0), 0).guaranteed, 1.0);
        for t in 0..7 {
            p.submit(req(1 + t as u32, t), 0);
            p.pick_next(0);
        }
        // Seven tasks of others plus ours share four cores.
        let v = p.client_view(ClientId(0), 0);
        assert_eq!(v.guaranteed, 4.0 / 8.0);
        assert_eq!(v.wait_ns, f64::INFINITY);
        assert_eq!(v.expected_utilisation(1e6), 0.5);
        // A client's own tasks are not "others".
        assert_eq!(p.client_view(ClientId(1), 0).guaranteed, 4.0 / 7.0);
    }

    #[test]
    fn busy_fraction_saturates_at_one() {
        let mut p = TimeSharePolicy::new(2);
        for t in 0..6 {
            p.submit(req(t as u32, t), 0);
            p.pick_next(0);
        }
        for k in 1..=300 {
            p.tick(k * 10_000_000);
        }
        let busy = p.unit_view(3_000_000_000).busy_fraction;
        assert!(busy > 0.99 && busy <= 1.0, "{busy}");
    }
}
