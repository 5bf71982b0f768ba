//! Pegasus's backend policies as a unit policy: each client is a domain
//! with its own call queue, and [`BackendScheduler`] decides whose queue
//! the unit serves and for how many ticks. The daemon's agents (for the
//! devices it serves) and the simulator's units drive it like any other
//! policy.
//!
//! Settings map onto Pegasus's terms: a client's shares are its credits
//! (NORMAL and CUSTOM alike; BACKGROUND has the minimum, 1), and a CUSTOM
//! client's shares, being a percentage of the unit, are also its SLO for
//! SLAF. CPU credits (for XC) default to the same value until the CPU side
//! reports them through [`CreditPolicy::set_cpu_credits`].

use super::accounting::{ClientLedger, LedgerConfig};
use super::{ClientSettings, PolicyError, PolicyKind, Request, ShareClass, UnitPolicy};
use crate::backend_policy::{BackendPolicy, BackendScheduler, CpuSchedule, DomainConfig, DomainId};
use crate::ids::{ClientId, Ns};
use crate::view::{ClientUnitView, UnitView};
use std::collections::{BTreeMap, VecDeque};

/// Length of one scheduling tick (the CPU scheduler's 10 ms, as in Pegasus).
pub const CREDIT_TICK_NS: Ns = 10_000_000;

#[derive(Debug)]
pub struct CreditPolicy {
    backend: BackendPolicy,
    sched: BackendScheduler,
    ledger: ClientLedger,
    queues: BTreeMap<ClientId, VecDeque<Request>>,
    /// The domain being served and until when.
    slot: Option<(ClientId, Ns)>,
    /// Slot time each domain could not use last turn, added to its next.
    carry: BTreeMap<ClientId, Ns>,
    cpu_credits: BTreeMap<ClientId, u32>,
    queued: usize,
}

fn domain(c: ClientId) -> DomainId {
    DomainId(c.0)
}

/// Pegasus credits and SLO of a client's settings.
pub fn domain_config(settings: &ClientSettings, cpu_credits: Option<u32>) -> DomainConfig {
    let (credits, slo) = match settings.class {
        ShareClass::Custom { shares } => {
            (shares.max(1), Some(f64::from(shares.clamp(1, 100)) / 100.0))
        }
        ShareClass::Normal { shares } => (shares.max(1), None),
        ShareClass::Background => (1, None),
    };
    DomainConfig {
        acc_credits: credits,
        cpu_credits: cpu_credits.unwrap_or(credits).max(1),
        slo,
    }
}

impl CreditPolicy {
    pub fn new(backend: BackendPolicy, slots: u32) -> CreditPolicy {
        CreditPolicy {
            backend,
            sched: BackendScheduler::new(backend, CREDIT_TICK_NS),
            ledger: ClientLedger::new(slots, LedgerConfig::default()),
            queues: BTreeMap::new(),
            slot: None,
            carry: BTreeMap::new(),
            cpu_credits: BTreeMap::new(),
            queued: 0,
        }
    }

    pub fn scheduler(&self) -> &BackendScheduler {
        &self.sched
    }

    /// The CPU side's weight of a client (XC schedules by it).
    pub fn set_cpu_credits(&mut self, client: ClientId, credits: u32) {
        self.cpu_credits.insert(client, credits.max(1));
        if let Some(c) = self.ledger.get(client) {
            let cfg = domain_config(&c.settings(), Some(credits));
            let _ = self.sched.add(domain(client), cfg);
        }
    }

    fn register(&mut self, client: ClientId, now: Ns) {
        let idx = self.ledger.ensure(client, now);
        let settings = self.ledger.clients()[idx].settings();
        let cfg = domain_config(&settings, self.cpu_credits.get(&client).copied());
        self.sched
            .add(domain(client), cfg)
            .expect("credits derived from settings are at least 1");
        self.queues.entry(client).or_default();
    }

    /// Tells the scheduler which queues have calls and starts a new slot.
    fn decide(&mut self, now: Ns) -> Option<ClientId> {
        for (&c, q) in &self.queues {
            // A domain that has run here holds state on the unit (Pegasus's
            // ContextEstablished) while it stays active.
            let context = self
                .ledger
                .get(c)
                .is_some_and(|r| r.last_activity().is_some() && self.ledger.is_active(r, now));
            let _ = self.sched.update(
                domain(c),
                !q.is_empty(),
                context,
                q.front().map(|r| r.submitted_at),
            );
        }
        let d = self.sched.next(now)?;
        let client = ClientId(d.domain.0);
        let carried = self.carry.remove(&client).unwrap_or(0);
        self.slot = Some((client, now + u64::from(d.ticks) * CREDIT_TICK_NS + carried));
        Some(client)
    }
}

impl UnitPolicy for CreditPolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::from_backend(self.backend)
    }

    fn set_client(
        &mut self,
        client: ClientId,
        settings: ClientSettings,
        now: Ns,
    ) -> Result<(), PolicyError> {
        if matches!(
            settings.class,
            ShareClass::Custom { shares: 0 } | ShareClass::Normal { shares: 0 }
        ) {
            return Err(PolicyError::ZeroShares);
        }
        self.ledger.set_settings(client, settings, now);
        self.register(client, now);
        Ok(())
    }

    fn remove_client(&mut self, client: ClientId, now: Ns) -> Vec<Request> {
        let dropped: Vec<Request> = self.queues.remove(&client).unwrap_or_default().into();
        self.queued -= dropped.len();
        self.sched.remove(domain(client));
        self.cpu_credits.remove(&client);
        if self.slot.is_some_and(|(c, _)| c == client) {
            self.slot = None;
        }
        self.carry.remove(&client);
        self.ledger.remove(client, now);
        dropped
    }

    fn submit(&mut self, request: Request, now: Ns) {
        if !self.queues.contains_key(&request.client) {
            self.register(request.client, now);
        }
        let idx = self.ledger.ensure(request.client, now);
        self.ledger.record_submit(idx, request.expected_ns, now);
        self.queues
            .entry(request.client)
            .or_default()
            .push_back(request);
        self.queued += 1;
    }

    fn pick_next(&mut self, now: Ns) -> Option<Request> {
        if self.queued == 0 {
            return None;
        }
        // The slot's owner keeps the unit while its next call fits in its
        // ticks (calls are not preempted, so one that would run past the
        // slot's end starts the next decision instead) and while it has
        // calls at all (work-conserving: nobody waits on an idle owner).
        let fits = |q: &VecDeque<Request>, until: Ns| {
            q.front()
                .is_some_and(|r| now + r.expected_ns.max(0.0) as Ns <= until)
        };
        let owner = match self.slot {
            Some((c, until))
                if now < until && self.queues.get(&c).is_some_and(|q| fits(q, until)) =>
            {
                c
            }
            ended => {
                // Time an owner with calls left could not use (its next
                // call did not fit) carries to its next turn, as in
                // deficit round robin: otherwise calls that do not divide
                // a slot evenly would skew shares against domains with few
                // ticks. Up to half a tick only, so a slot never grows by
                // a whole extra call of a tick's length, which would undo
                // what ticks do for others' latency.
                if let Some((c, until)) = ended {
                    let waiting = self.queues.get(&c).is_some_and(|q| !q.is_empty());
                    let left = if waiting {
                        until.saturating_sub(now).min(CREDIT_TICK_NS / 2)
                    } else {
                        0
                    };
                    self.carry.insert(c, left);
                }
                self.decide(now)?
            }
        };
        let request = self.queues.get_mut(&owner)?.pop_front()?;
        self.queued -= 1;
        let idx = self.ledger.ensure(owner, now);
        self.ledger.record_dispatch(idx, now);
        if self.backend == BackendPolicy::None {
            // First come, first served: every call is its own decision.
            self.slot = None;
        }
        Some(request)
    }

    fn complete(&mut self, client: ClientId, ran_ns: Ns, now: Ns) {
        self.ledger.record_complete(client, ran_ns, now);
        self.sched.charge(domain(client), ran_ns);
    }

    fn tick(&mut self, now: Ns) {
        self.ledger.tick(now);
    }

    /// Calls of others wait for the current slot to end.
    fn retry_at(&self, now: Ns) -> Option<Ns> {
        if self.queued == 0 {
            return None;
        }
        self.slot.map(|(_, until)| until.max(now))
    }

    fn backend_state(&self, client: ClientId) -> Option<crate::backend_policy::DomainState> {
        self.sched.domain_state(domain(client))
    }

    fn client_view(&self, client: ClientId, now: Ns) -> ClientUnitView {
        let total: f64 = self
            .sched
            .domains()
            .filter(|(id, _)| {
                self.ledger
                    .get(ClientId(id.0))
                    .is_some_and(|r| self.ledger.is_active(r, now) || id.0 == client.0)
            })
            .map(|(_, cfg)| f64::from(cfg.acc_credits))
            .sum();
        let mine = self
            .sched
            .domains()
            .find(|(id, _)| id.0 == client.0)
            .map_or(0.0, |(_, cfg)| f64::from(cfg.acc_credits));
        let guaranteed = if total > 0.0 { mine / total } else { 1.0 };
        let current_utilisation = self
            .ledger
            .get(client)
            .map_or(0.0, |c| self.ledger.utilisation(c, now));
        ClientUnitView {
            guaranteed,
            wait_ns: self.ledger.backlog_ahead_ns(client, now, |_| true),
            current_utilisation,
            throttled: false,
            max_utilisation: 1.0,
        }
    }

    fn unit_view(&self, now: Ns) -> UnitView {
        self.ledger.unit_view(now)
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn set_cpu_schedule(&mut self, scheduled: &[(ClientId, u32)]) {
        self.sched.set_cpu_schedule(CpuSchedule {
            scheduled: scheduled.iter().map(|&(c, r)| (domain(c), r)).collect(),
        });
    }

    fn set_cpu_credits(&mut self, client: ClientId, credits: u32) {
        CreditPolicy::set_cpu_credits(self, client, credits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TaskId;

    fn req(client: u32, task: u64, now: Ns) -> Request {
        Request {
            client: ClientId(client),
            task: TaskId(task),
            expected_ns: 1e6,
            submitted_at: now,
        }
    }

    /// Four always-busy clients with credits 256/512/1024/256 (Pegasus
    /// Fig. 5) on a one-slot unit running 1 ms calls: device time follows
    /// credits under AccC.
    #[test]
    fn accc_splits_device_time_by_credits() {
        let mut p = CreditPolicy::new(BackendPolicy::AccC, 1);
        let credits = [256, 512, 1024, 256];
        for (i, &c) in credits.iter().enumerate() {
            let s = ClientSettings {
                class: ShareClass::Normal { shares: c },
                priority: 0,
            };
            p.set_client(ClientId(i as u32), s, 0).unwrap();
        }
        let mut now = 0;
        let mut task = 0;
        let mut served = [0u64; 4];
        while now < 10_000_000_000 {
            for c in 0..4 {
                while p.queues[&ClientId(c)].len() < 2 {
                    p.submit(req(c, task, now), now);
                    task += 1;
                }
            }
            let r = p.pick_next(now).expect("work-conserving");
            now += 1_000_000;
            p.complete(r.client, 1_000_000, now);
            served[r.client.0 as usize] += 1;
        }
        let total: u64 = served.iter().sum();
        for (i, &c) in credits.iter().enumerate() {
            let want = f64::from(c) / 2048.0;
            let got = served[i] as f64 / total as f64;
            assert!((got - want).abs() < 0.03, "{served:?}");
        }
    }

    #[test]
    fn cosched_serves_the_client_whose_cpu_side_runs_next() {
        let mut p = CreditPolicy::new(BackendPolicy::CoSched, 1);
        for (c, shares) in [(1, 1024), (2, 256)] {
            let s = ClientSettings {
                class: ShareClass::Normal { shares },
                priority: 0,
            };
            p.set_client(ClientId(c), s, 0).unwrap();
            p.submit(req(c, u64::from(c), 0), 0);
        }
        p.set_cpu_schedule(&[(ClientId(2), 100)]);
        assert_eq!(p.pick_next(0).unwrap().client, ClientId(2));
        p.set_cpu_schedule(&[]);
        assert_eq!(p.pick_next(CREDIT_TICK_NS).unwrap().client, ClientId(1));
    }

    #[test]
    fn removing_a_client_drops_its_calls_and_zero_shares_are_refused() {
        let mut p = CreditPolicy::new(BackendPolicy::Rr, 1);
        p.submit(req(1, 0, 0), 0);
        p.submit(req(1, 1, 0), 0);
        p.submit(req(2, 2, 0), 0);
        assert_eq!(p.remove_client(ClientId(1), 0).len(), 2);
        assert_eq!(p.queued(), 1);
        assert_eq!(p.pick_next(0).unwrap().client, ClientId(2));
        let zero = ClientSettings {
            class: ShareClass::Normal { shares: 0 },
            priority: 0,
        };
        assert_eq!(
            p.set_client(ClientId(3), zero, 0),
            Err(PolicyError::ZeroShares)
        );
    }
}
