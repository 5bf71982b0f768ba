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
use super::records;
use super::{ClientSettings, PolicyError, PolicyKind, Request, ShareClass, UnitPolicy};
use crate::backend_policy::{
    BackendPolicy, BackendScheduler, CpuSchedule, DomainConfig, DomainId, Keep,
    TURN_ANTICIPATION_NS, Turns,
};
use crate::ids::{ClientId, Ns};
use crate::view::{ClientUnitView, UnitView};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Length of one scheduling tick (the CPU scheduler's 10 ms, as in Pegasus).
pub const CREDIT_TICK_NS: Ns = 10_000_000;

/// A domain several clients share, such as a container's cgroup: its
/// members' calls take one turn in the ring, with one set of credits and
/// one count of ticks, so three clients in a 512-credit container get
/// what one 512-credit client would, not three times that.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedDomain {
    /// The caller's number for the domain (the daemon's index in its
    /// `[[domains]]` list); members with one key are one domain.
    pub key: u32,
    /// The domain's accelerator credits, which are also its CPU credits
    /// under XC: the members' own shares do not count.
    pub credits: u32,
}

/// Scheduler id of a shared domain. Clients' own domains use the client
/// id, which the daemon counts up from 1; shared ones count down from the
/// top, so the two cannot meet before two billion clients.
fn shared_id(key: u32) -> DomainId {
    DomainId(u32::MAX - key)
}

#[derive(Debug)]
pub struct CreditPolicy {
    backend: BackendPolicy,
    sched: BackendScheduler,
    ledger: ClientLedger,
    /// Per registered client, its calls in arrival order.
    queues: BTreeMap<ClientId, VecDeque<Request>>,
    /// Clients that belong to a shared domain (the rest are their own).
    shared: BTreeMap<ClientId, SharedDomain>,
    /// The owner's slot, its carry and its anticipation window.
    turns: Turns,
    cpu_credits: BTreeMap<ClientId, u32>,
    queued: usize,
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

/// Pegasus credits of a shared domain.
fn shared_config(d: SharedDomain) -> DomainConfig {
    DomainConfig {
        acc_credits: d.credits.max(1),
        cpu_credits: d.credits.max(1),
        slo: None,
    }
}

impl CreditPolicy {
    pub fn new(backend: BackendPolicy, slots: u32) -> CreditPolicy {
        CreditPolicy {
            backend,
            sched: BackendScheduler::new(backend, CREDIT_TICK_NS),
            ledger: ClientLedger::new(slots, LedgerConfig::default()),
            queues: BTreeMap::new(),
            shared: BTreeMap::new(),
            turns: Turns::new(backend, CREDIT_TICK_NS, TURN_ANTICIPATION_NS),
            cpu_credits: BTreeMap::new(),
            queued: 0,
        }
    }

    pub fn scheduler(&self) -> &BackendScheduler {
        &self.sched
    }

    /// The scheduler's domain for `client`: its shared domain, else its own.
    pub fn domain_of(&self, client: ClientId) -> DomainId {
        match self.shared.get(&client) {
            Some(d) => shared_id(d.key),
            None => DomainId(client.0),
        }
    }

    /// Registered clients in domain `d`.
    fn members(&self, d: DomainId) -> impl Iterator<Item = ClientId> + '_ {
        self.queues
            .keys()
            .copied()
            .filter(move |&c| self.domain_of(c) == d)
    }

    /// Forgets domain `d` in the scheduler if no registered client is in it.
    fn drop_if_empty(&mut self, d: DomainId) {
        if self.members(d).next().is_none() {
            self.sched.remove(d);
            self.turns.forget(d);
        }
    }

    /// The CPU side's weight of a client (XC schedules by it). A member
    /// of a shared domain is weighed by the domain's credits instead.
    pub fn set_cpu_credits(&mut self, client: ClientId, credits: u32) {
        self.cpu_credits.insert(client, credits.max(1));
        if self.shared.contains_key(&client) {
            return;
        }
        if let Some(c) = self.ledger.get(client) {
            let cfg = domain_config(&c.settings(), Some(credits));
            let _ = self.sched.add(DomainId(client.0), cfg);
        }
    }

    /// Puts `client` in a shared domain (`Some`, which also sets the
    /// domain's credits for all its members) or makes it its own domain
    /// again (`None`). Its queued calls move with it.
    pub fn set_client_domain(&mut self, client: ClientId, domain: Option<SharedDomain>, now: Ns) {
        let old = self.domain_of(client);
        match domain {
            Some(d) => {
                self.shared.insert(client, d);
            }
            None => {
                self.shared.remove(&client);
            }
        }
        let new = self.domain_of(client);
        if let Some(d) = domain {
            // New credits reach every member, registered or not yet.
            for s in self.shared.values_mut().filter(|s| s.key == d.key) {
                s.credits = d.credits;
            }
            if self.sched.domains().any(|(id, _)| id == new) {
                let _ = self.sched.add(new, shared_config(d));
            }
        }
        if self.queues.contains_key(&client) {
            self.register(client, now);
            if old != new {
                self.drop_if_empty(old);
            }
        }
    }

    fn register(&mut self, client: ClientId, now: Ns) {
        let idx = self.ledger.ensure(client, now);
        let cfg = match self.shared.get(&client) {
            Some(&d) => shared_config(d),
            None => {
                let settings = self.ledger.clients()[idx].settings();
                domain_config(&settings, self.cpu_credits.get(&client).copied())
            }
        };
        self.sched
            .add(self.domain_of(client), cfg)
            .expect("credits derived from settings are at least 1");
        self.queues.entry(client).or_default();
    }

    /// The member of `d` whose oldest queued call is the oldest (ties to
    /// the lower id): a shared domain serves its members first come,
    /// first served.
    fn front_of(&self, d: DomainId) -> Option<ClientId> {
        self.members(d)
            .filter_map(|c| Some((self.queues[&c].front()?.submitted_at, c)))
            .min()
            .map(|(_, c)| c)
    }

    /// Tells the scheduler which domains have calls and starts a new slot.
    fn decide(&mut self, now: Ns) -> Option<DomainId> {
        // Per domain: ready, context, oldest call.
        let mut state: BTreeMap<DomainId, (bool, bool, Option<Ns>)> = BTreeMap::new();
        for (&c, q) in &self.queues {
            // A domain that has run here holds state on the unit (Pegasus's
            // ContextEstablished) while it stays active.
            let context = self
                .ledger
                .get(c)
                .is_some_and(|r| r.last_activity().is_some() && self.ledger.is_active(r, now));
            let e = state
                .entry(self.domain_of(c))
                .or_insert((false, false, None));
            e.0 |= !q.is_empty();
            e.1 |= context;
            if let Some(t) = q.front().map(|r| r.submitted_at) {
                e.2 = Some(e.2.map_or(t, |o: Ns| o.min(t)));
            }
        }
        for (d, (ready, context, oldest)) in state {
            let _ = self.sched.update(d, ready, context, oldest);
        }
        let d = self.sched.next(now)?;
        self.turns.start(d, now);
        Some(d.domain)
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
        let d = self.domain_of(client);
        let dropped: Vec<Request> = self.queues.remove(&client).unwrap_or_default().into();
        self.queued -= dropped.len();
        self.shared.remove(&client);
        self.cpu_credits.remove(&client);
        self.ledger.remove(client, now);
        if d == DomainId(client.0) {
            self.sched.remove(d);
            self.turns.forget(d);
        } else {
            self.drop_if_empty(d);
        }
        dropped
    }

    fn submit(&mut self, request: Request, now: Ns) {
        if !self.queues.contains_key(&request.client) {
            self.register(request.client, now);
        }
        records::record_submitted(&mut self.ledger, &request, now);
        self.turns.arrived(self.domain_of(request.client), now);
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
        // ticks, and for the anticipation window while its queue is empty
        // and others wait; `Turns` has the rule, shared with the simulator.
        let (next, owner_queued) = match self.turns.owner() {
            Some((d, _)) => (
                self.front_of(d)
                    .and_then(|c| self.queues[&c].front())
                    .map(|r| r.expected_ns.max(0.0) as Ns),
                self.members(d).map(|c| self.queues[&c].len()).sum(),
            ),
            None => (None, 0),
        };
        let others_waiting = self.queued > owner_queued;
        let sched = &self.sched;
        let owner = match self
            .turns
            .keep(now, |_| next, others_waiting, |d| sched.cpu_side_runs(d))
        {
            Keep::Owner(d) => d,
            Keep::Hold(_) => return None,
            Keep::Decide => self.decide(now)?,
        };
        let client = self.front_of(owner)?;
        let request = self.queues.get_mut(&client)?.pop_front()?;
        self.queued -= 1;
        records::record_dispatched(&mut self.ledger, client, now);
        Some(request)
    }

    fn complete(&mut self, client: ClientId, ran_ns: Ns, now: Ns) {
        self.ledger.record_complete(client, ran_ns, now);
        let d = self.domain_of(client);
        self.sched.charge(d, ran_ns);
        let empty = self.members(d).all(|c| self.queues[&c].is_empty());
        self.turns.completed(d, now, empty);
    }

    fn charge(&mut self, client: ClientId, ran_ns: Ns, now: Ns) {
        self.ledger.record_charge(client, ran_ns, now);
        let d = self.domain_of(client);
        self.sched.charge(d, ran_ns);
    }

    fn tick(&mut self, now: Ns) {
        self.ledger.tick(now);
    }

    /// How long an owner with no call queued keeps its turn while others
    /// wait (0: it loses the turn as soon as its queue is empty).
    fn set_anticipation_ns(&mut self, ns: Ns) {
        self.turns.set_anticipation_ns(ns);
    }

    /// Calls of others wait for the current slot, or the owner's
    /// anticipation window, to end.
    fn retry_at(&self, now: Ns) -> Option<Ns> {
        if self.queued == 0 {
            return None;
        }
        self.turns.retry_at(now)
    }

    fn backend_state(&self, client: ClientId) -> Option<crate::backend_policy::DomainState> {
        self.sched.domain_state(self.domain_of(client))
    }

    fn client_views(&self, clients: &[ClientId], now: Ns) -> Vec<ClientUnitView> {
        clients.iter().map(|&c| self.view_of(c, now)).collect()
    }

    fn unit_view(&self, now: Ns) -> UnitView {
        self.ledger.unit_view(now)
    }

    fn queued(&self) -> usize {
        self.queued
    }

    /// A shared domain runs next if any member does, with the most credit
    /// any of them has left.
    fn set_cpu_schedule(&mut self, scheduled: &[(ClientId, u32)]) {
        let mut by_domain: Vec<(DomainId, u32)> = Vec::with_capacity(scheduled.len());
        for &(c, r) in scheduled {
            let d = self.domain_of(c);
            match by_domain.iter_mut().find(|(id, _)| *id == d) {
                Some(e) => e.1 = e.1.max(r),
                None => by_domain.push((d, r)),
            }
        }
        self.sched.set_cpu_schedule(CpuSchedule {
            scheduled: by_domain,
        });
    }

    fn set_cpu_credits(&mut self, client: ClientId, credits: u32) {
        CreditPolicy::set_cpu_credits(self, client, credits);
    }

    fn set_client_domain(&mut self, client: ClientId, domain: Option<SharedDomain>, now: Ns) {
        CreditPolicy::set_client_domain(self, client, domain, now);
    }
}

impl CreditPolicy {
    /// A client's guarantee is its domain's part of the credits of the
    /// active domains, split evenly among the domain's active members.
    fn view_of(&self, client: ClientId, now: Ns) -> ClientUnitView {
        let active = |c: ClientId| {
            c == client
                || self
                    .ledger
                    .get(c)
                    .is_some_and(|r| self.ledger.is_active(r, now))
        };
        let mine = self.domain_of(client);
        let mut domains: BTreeSet<DomainId> = BTreeSet::from([mine]);
        let mut peers = 1u32;
        for c in self.queues.keys().copied().filter(|&c| active(c)) {
            let d = self.domain_of(c);
            domains.insert(d);
            if d == mine && c != client {
                peers += 1;
            }
        }
        let credits = |d: DomainId| {
            self.sched
                .domains()
                .find(|(id, _)| *id == d)
                .map_or(0.0, |(_, cfg)| f64::from(cfg.acc_credits))
        };
        let total: f64 = domains.iter().map(|&d| credits(d)).sum();
        let guaranteed = if total > 0.0 {
            credits(mine) / total / f64::from(peers)
        } else {
            1.0
        };
        let current_utilisation = self
            .ledger
            .get(client)
            .map_or(0.0, |c| self.ledger.utilisation(c, now));
        ClientUnitView {
            guaranteed,
            wait_ns: self.ledger.backlog_ahead_ns(client, now, |_| true),
            current_utilisation,
            ..ClientUnitView::OPEN
        }
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

    fn normal(shares: u32) -> ClientSettings {
        ClientSettings {
            class: ShareClass::Normal { shares },
            priority: 0,
        }
    }

    /// Keeps every client busy with 1 ms calls for `secs` simulated
    /// seconds and returns the calls each completed.
    fn run_busy(p: &mut CreditPolicy, clients: &[u32], secs: u64) -> BTreeMap<u32, u64> {
        let mut served = BTreeMap::new();
        let (mut now, mut task) = (0, 0);
        while now < secs * 1_000_000_000 {
            for &c in clients {
                while p.queues[&ClientId(c)].len() < 2 {
                    p.submit(req(c, task, now), now);
                    task += 1;
                }
            }
            let r = p.pick_next(now).expect("work-conserving");
            now += 1_000_000;
            p.complete(r.client, 1_000_000, now);
            *served.entry(r.client.0).or_insert(0) += 1;
        }
        served
    }

    /// Three clients of a 512-credit container against one 512-credit
    /// client: the container is one domain, so it gets half the unit,
    /// not three quarters, and its members split that half.
    #[test]
    fn clients_of_one_shared_domain_share_its_credits() {
        let mut p = CreditPolicy::new(BackendPolicy::AccC, 1);
        let web = SharedDomain {
            key: 0,
            credits: 512,
        };
        for c in 1..=3 {
            p.set_client(ClientId(c), normal(512), 0).unwrap();
            p.set_client_domain(ClientId(c), Some(web), 0);
        }
        p.set_client(ClientId(4), normal(512), 0).unwrap();
        let served = run_busy(&mut p, &[1, 2, 3, 4], 10);
        let total: u64 = served.values().sum();
        let web_part = (served[&1] + served[&2] + served[&3]) as f64 / total as f64;
        assert!((web_part - 0.5).abs() < 0.02, "{served:?}");
        for c in 1..=3 {
            let part = served[&c] as f64 / total as f64;
            assert!((part - 0.5 / 3.0).abs() < 0.02, "{served:?}");
        }
        // Status shows the domain's credits and ticks for each member.
        let s1 = p.backend_state(ClientId(1)).unwrap();
        assert_eq!(s1, p.backend_state(ClientId(3)).unwrap());
        assert_eq!(s1.config.acc_credits, 512);
        let s4 = p.backend_state(ClientId(4)).unwrap();
        assert!(
            s1.ticks_granted.abs_diff(s4.ticks_granted) <= 4,
            "{s1:?} {s4:?}"
        );
        // Each member is guaranteed a third of the domain's half.
        let g = p.client_view(ClientId(2), 10_000_000_000).guaranteed;
        assert!((g - 1.0 / 6.0).abs() < 1e-9, "{g}");
    }

    #[test]
    fn a_shared_domain_lives_while_it_has_members() {
        let mut p = CreditPolicy::new(BackendPolicy::Rr, 1);
        let d = SharedDomain {
            key: 7,
            credits: 300,
        };
        for c in [1, 2] {
            p.set_client(ClientId(c), normal(10), 0).unwrap();
            p.set_client_domain(ClientId(c), Some(d), 0);
        }
        // Two clients, one scheduler domain (their own ones are gone).
        assert_eq!(p.scheduler().domains().count(), 1);
        p.submit(req(1, 0, 0), 0);
        p.submit(req(2, 1, 0), 0);
        assert_eq!(p.remove_client(ClientId(1), 0).len(), 1);
        assert_eq!(p.scheduler().domains().count(), 1);
        assert_eq!(p.pick_next(0).unwrap().client, ClientId(2));
        // New credits reach the domain; leaving it gives the client its own.
        p.set_client_domain(ClientId(2), Some(SharedDomain { credits: 900, ..d }), 0);
        assert_eq!(
            p.backend_state(ClientId(2)).unwrap().config.acc_credits,
            900
        );
        p.set_client_domain(ClientId(2), None, 0);
        let own: Vec<DomainId> = p.scheduler().domains().map(|(id, _)| id).collect();
        assert_eq!(own, vec![DomainId(2)]);
        assert_eq!(p.backend_state(ClientId(2)).unwrap().config.acc_credits, 10);
        p.remove_client(ClientId(2), 0);
        assert_eq!(p.scheduler().domains().count(), 0);
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
