//! Per-unit bookkeeping shared by every policy: who is registered, what each
//! client has queued and running, how long its tasks really take, how much
//! of the unit it used recently, and the unit-level moving averages that make
//! up the global page.
//!
//! Usage is charged from the *measured* duration at completion (plus the
//! elapsed time of tasks still running), never from the client's estimate, so
//! a client that under-reports its task sizes cannot buy itself a better
//! place in line or a better-looking view.

use super::{ClientSettings, Request, ShareClass};
use crate::ids::{ClientId, Ns};
use crate::view::UnitView;
use std::collections::VecDeque;

/// Half-life of the decayed per-client usage: Rinnegan keeps shares "over
/// coarse time scales on the order of hundreds of milliseconds", long enough
/// for a non-preemptible long task to be paid back by later throttling.
pub const DEFAULT_USAGE_HALF_LIFE_NS: Ns = 200_000_000;

/// A client that finished a task this recently still counts as active, so a
/// closed-loop client between two tasks keeps its share and its place in
/// everyone else's wait estimate.
pub const DEFAULT_ACTIVITY_WINDOW_NS: Ns = 100_000_000;

/// Weight of a new sample in a client's task-duration average (a client's
/// tasks are usually alike, so the average may follow them quickly).
const CLIENT_TASK_WEIGHT: f64 = 0.25;

/// Weight of a new sample in the unit-wide task-duration average (mixes all
/// clients, so it is smoothed more).
const UNIT_TASK_WEIGHT: f64 = 0.1;

/// Usage is stored pre-scaled by `2^((t - decay_ref)/half_life)` so that
/// comparing clients needs no per-client exponential; the reference point is
/// moved forward before the scale can grow past `2^RENORMALISE_HALF_LIVES`.
const RENORMALISE_HALF_LIVES: f64 = 32.0;

/// Time constants of a ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LedgerConfig {
    /// Half-life of decayed usage and of the busy-fraction average, ns.
    pub usage_half_life_ns: Ns,
    /// How long after its last task a client still counts as active, ns.
    pub activity_window_ns: Ns,
}

impl Default for LedgerConfig {
    fn default() -> Self {
        LedgerConfig {
            usage_half_life_ns: DEFAULT_USAGE_HALF_LIFE_NS,
            activity_window_ns: DEFAULT_ACTIVITY_WINDOW_NS,
        }
    }
}

/// Exponentially weighted moving average that takes its first sample as is.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Ewma {
    value: Option<f64>,
}

impl Ewma {
    fn add(&mut self, sample: f64, weight: f64) {
        self.value = Some(match self.value {
            None => sample,
            Some(v) => v + weight * (sample - v),
        });
    }
}

/// A request waiting in a per-client queue, with its global arrival number
/// (submission instants can tie; arrival order cannot).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueuedRequest {
    pub request: Request,
    pub seq: u64,
}

/// Per-client FIFO used by policies that choose between clients.
pub type ClientQueue = VecDeque<QueuedRequest>;

/// Everything the ledger knows about one client on this unit. `Q` is
/// policy-owned per-client state (a [`ClientQueue`], or `()`).
#[derive(Clone, Debug)]
pub struct ClientRecord<Q> {
    id: ClientId,
    settings: ClientSettings,
    queued: u32,
    running: u32,
    /// Measured durations on this unit.
    measured_task: Ewma,
    /// The client's own estimates, used only until a measurement exists.
    expected_task: Ewma,
    /// Decayed usage, scaled to the ledger's `decay_ref` (see
    /// [`RENORMALISE_HALF_LIVES`]).
    usage_scaled: f64,
    /// Sum of the dispatch instants of the running tasks, so the elapsed time
    /// of all of them is `running × now − sum` (u128: exact for any `Ns`).
    dispatch_instants: u128,
    last_activity: Option<Ns>,
    /// When its last task completed and left it with nothing outstanding
    /// (cleared by its next submission).
    idle_since: Option<Ns>,
    /// Its think time: from such a completion to its next submission
    /// (a closed-loop client's copy back, own work, copy in).
    think: Ewma,
    /// Policy-owned per-client state.
    pub queue: Q,
}

impl<Q> ClientRecord<Q> {
    pub fn id(&self) -> ClientId {
        self.id
    }

    pub fn settings(&self) -> ClientSettings {
        self.settings
    }

    pub fn class(&self) -> ShareClass {
        self.settings.class
    }

    pub fn queued(&self) -> u32 {
        self.queued
    }

    pub fn running(&self) -> u32 {
        self.running
    }

    /// Queued plus running.
    pub fn outstanding(&self) -> u32 {
        self.queued.saturating_add(self.running)
    }

    /// Average task duration on this unit: measured if anything completed,
    /// else the client's own estimate.
    pub fn avg_task_ns(&self) -> Option<f64> {
        self.measured_task.value.or(self.expected_task.value)
    }

    /// Last submit, dispatch or completion.
    pub fn last_activity(&self) -> Option<Ns> {
        self.last_activity
    }

    /// When its last task completed, if that left it with nothing
    /// queued or running and it has not submitted since.
    pub fn idle_since(&self) -> Option<Ns> {
        self.idle_since
    }

    /// Average time from a completion that left it idle to its next
    /// submission, ns; `None` before it has come back once.
    pub fn think_ns(&self) -> Option<f64> {
        self.think.value
    }

    /// Elapsed time of this client's running tasks at `now`, ns.
    fn in_flight_ns(&self, now: Ns) -> f64 {
        if self.running == 0 {
            return 0.0;
        }
        (u128::from(self.running) * u128::from(now)).saturating_sub(self.dispatch_instants) as f64
    }
}

/// Clamps a client-supplied duration estimate to something usable.
fn sane_ns(x: f64) -> Option<f64> {
    (x.is_finite() && x >= 0.0).then_some(x)
}

/// Usage of clients as seen at one instant (see [`ClientLedger::usage_at`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UsageAt {
    now: Ns,
    decay: f64,
    capacity_ns: f64,
}

impl UsageAt {
    /// Decayed usage, ns.
    pub fn usage_ns<Q>(&self, c: &ClientRecord<Q>) -> f64 {
        c.usage_scaled * self.decay + c.in_flight_ns(self.now)
    }

    /// `fraction > limit` for a client that used `used_ns`, without dividing.
    pub fn exceeds(&self, used_ns: f64, limit: f64) -> bool {
        self.capacity_ns > 0.0 && used_ns > limit * self.capacity_ns.max(1.0)
    }

    /// Usage as a fraction of the unit's decayed capacity (not clamped: a
    /// burst right after start-up can exceed 1). 0 before anything happened.
    pub fn fraction<Q>(&self, c: &ClientRecord<Q>) -> f64 {
        if self.capacity_ns <= 0.0 {
            0.0
        } else {
            self.usage_ns(c) / self.capacity_ns.max(1.0)
        }
    }
}

/// The ledger of one unit. Clients are kept sorted by id, so iteration (and
/// therefore every tie a policy breaks by scanning) is deterministic.
#[derive(Clone, Debug)]
pub struct ClientLedger<Q = ()> {
    config: LedgerConfig,
    slots: u32,
    clients: Vec<ClientRecord<Q>>,
    queued: u32,
    running: u32,
    /// Running tasks of clients that were removed; their `complete` still
    /// frees the slot.
    orphan_running: u32,
    /// First instant this ledger saw; `None` until any call.
    origin: Option<Ns>,
    decay_ref: Ns,
    last_tick: Ns,
    busy_mark: Ns,
    /// Busy slot-nanoseconds since `last_tick`.
    busy_slot_ns: u128,
    busy_fraction: f64,
    unit_measured_task: Ewma,
    unit_expected_task: Ewma,
}

impl<Q: Default> ClientLedger<Q> {
    pub fn new(slots: u32, config: LedgerConfig) -> Self {
        ClientLedger {
            config: LedgerConfig {
                usage_half_life_ns: config.usage_half_life_ns.max(1),
                ..config
            },
            slots: slots.max(1),
            clients: Vec::new(),
            queued: 0,
            running: 0,
            orphan_running: 0,
            origin: None,
            decay_ref: 0,
            last_tick: 0,
            busy_mark: 0,
            busy_slot_ns: 0,
            busy_fraction: 0.0,
            unit_measured_task: Ewma::default(),
            unit_expected_task: Ewma::default(),
        }
    }

    /// Registers `id` with `settings`, or replaces its settings.
    pub fn set_settings(&mut self, id: ClientId, settings: ClientSettings, now: Ns) -> usize {
        self.observe(now);
        let idx = self.ensure(id, now);
        self.clients[idx].settings = settings;
        idx
    }

    /// Index of `id`, registering it with default settings if unknown.
    pub fn ensure(&mut self, id: ClientId, now: Ns) -> usize {
        self.observe(now);
        match self.position(id) {
            Ok(idx) => idx,
            Err(idx) => {
                self.clients.insert(
                    idx,
                    ClientRecord {
                        id,
                        settings: ClientSettings::default(),
                        queued: 0,
                        running: 0,
                        measured_task: Ewma::default(),
                        expected_task: Ewma::default(),
                        usage_scaled: 0.0,
                        dispatch_instants: 0,
                        last_activity: None,
                        idle_since: None,
                        think: Ewma::default(),
                        queue: Q::default(),
                    },
                );
                idx
            }
        }
    }

    /// Forgets `id` and returns its record (with the policy's queue in it).
    /// Its running tasks keep their slots until their `complete` arrives.
    pub fn remove(&mut self, id: ClientId, now: Ns) -> Option<ClientRecord<Q>> {
        self.observe(now);
        let idx = self.position(id).ok()?;
        let record = self.clients.remove(idx);
        self.queued = self.queued.saturating_sub(record.queued);
        self.orphan_running = self.orphan_running.saturating_add(record.running);
        Some(record)
    }
}

impl<Q> ClientLedger<Q> {
    pub fn config(&self) -> LedgerConfig {
        self.config
    }

    pub fn slots(&self) -> u32 {
        self.slots
    }

    pub fn clients(&self) -> &[ClientRecord<Q>] {
        &self.clients
    }

    pub fn clients_mut(&mut self) -> &mut [ClientRecord<Q>] {
        &mut self.clients
    }

    pub fn position(&self, id: ClientId) -> Result<usize, usize> {
        self.clients.binary_search_by_key(&id, |c| c.id)
    }

    pub fn get(&self, id: ClientId) -> Option<&ClientRecord<Q>> {
        self.position(id).ok().map(|i| &self.clients[i])
    }

    /// Requests waiting on the unit.
    pub fn queued(&self) -> u32 {
        self.queued
    }

    /// Tasks running on the unit (including those of removed clients).
    pub fn running(&self) -> u32 {
        self.running
    }

    /// Sum of CUSTOM shares registered, not counting `except`.
    pub fn custom_shares_except(&self, except: ClientId) -> u64 {
        self.clients
            .iter()
            .filter(|c| c.id != except)
            .map(|c| match c.settings.class {
                ShareClass::Custom { shares } => u64::from(shares),
                _ => 0,
            })
            .sum()
    }

    /// Starts the clocks on the first call and keeps the usage scale bounded.
    /// Every mutating entry point calls this first.
    pub fn observe(&mut self, now: Ns) {
        if self.origin.is_none() {
            self.origin = Some(now);
            self.decay_ref = now;
            self.last_tick = now;
            self.busy_mark = now;
            return;
        }
        let half_lives = now.saturating_sub(self.decay_ref) as f64 / self.half_life();
        if half_lives > RENORMALISE_HALF_LIVES {
            let factor = (-half_lives).exp2();
            for c in &mut self.clients {
                c.usage_scaled *= factor;
            }
            self.decay_ref = now;
        }
    }

    fn half_life(&self) -> f64 {
        self.config.usage_half_life_ns as f64
    }

    /// `2^(-(now - decay_ref)/half_life)`: turns stored usage into usage at `now`.
    fn decay_factor(&self, now: Ns) -> f64 {
        let dt = now.saturating_sub(self.decay_ref) as f64;
        (-dt / self.half_life()).exp2()
    }

    /// Accumulates busy slot-time up to `now`; called before `running` changes.
    fn advance_busy(&mut self, now: Ns) {
        if now > self.busy_mark {
            let busy_slots = self.running.min(self.slots);
            self.busy_slot_ns += u128::from(busy_slots) * u128::from(now - self.busy_mark);
            self.busy_mark = now;
        }
    }

    /// A request of the client at `idx` was queued.
    pub fn record_submit(&mut self, idx: usize, expected_ns: f64, now: Ns) {
        self.observe(now);
        let c = &mut self.clients[idx];
        if let Some(idle) = c.idle_since.take() {
            c.think
                .add(now.saturating_sub(idle) as f64, CLIENT_TASK_WEIGHT);
        }
        c.queued = c.queued.saturating_add(1);
        c.last_activity = Some(now);
        if let Some(expected) = sane_ns(expected_ns) {
            c.expected_task.add(expected, CLIENT_TASK_WEIGHT);
            self.unit_expected_task.add(expected, UNIT_TASK_WEIGHT);
        }
        self.queued = self.queued.saturating_add(1);
    }

    /// A queued request of the client at `idx` starts running.
    pub fn record_dispatch(&mut self, idx: usize, now: Ns) {
        self.observe(now);
        self.advance_busy(now);
        let c = &mut self.clients[idx];
        c.queued = c.queued.saturating_sub(1);
        c.running = c.running.saturating_add(1);
        c.dispatch_instants += u128::from(now);
        c.last_activity = Some(now);
        self.queued = self.queued.saturating_sub(1);
        self.running = self.running.saturating_add(1);
    }

    /// `id` is charged `ran_ns` of the unit's time for work that took no
    /// slot of its (a build of a kernel it registered): its usage grows
    /// as if a task of that length had finished now. Unknown clients are
    /// not charged.
    pub fn record_charge(&mut self, id: ClientId, ran_ns: Ns, now: Ns) {
        self.observe(now);
        if let Ok(idx) = self.position(id) {
            let scaled_charge = ran_ns as f64 / self.decay_factor(now);
            let c = &mut self.clients[idx];
            c.usage_scaled += scaled_charge;
            c.last_activity = Some(now);
        }
    }

    /// A task of `id` finished after running `ran_ns`. Unknown clients only
    /// free the slot of a task they had before being removed.
    pub fn record_complete(&mut self, id: ClientId, ran_ns: Ns, now: Ns) {
        self.observe(now);
        let Ok(idx) = self.position(id) else {
            if self.orphan_running > 0 {
                self.advance_busy(now);
                self.orphan_running -= 1;
                self.running = self.running.saturating_sub(1);
            }
            return;
        };
        // The charge lands at `now`; expressed in the stored scale.
        let scaled_charge = ran_ns as f64 / self.decay_factor(now);
        let c = &mut self.clients[idx];
        if c.running > 0 {
            // We do not know which of its tasks finished; take out the mean
            // dispatch instant so the in-flight estimate stays unbiased (and
            // exact once nothing of this client is running).
            let mean = c.dispatch_instants / u128::from(c.running);
            c.dispatch_instants -= mean;
            c.running -= 1;
            if c.running == 0 {
                c.dispatch_instants = 0;
            }
            self.advance_busy(now);
            self.running = self.running.saturating_sub(1);
        }
        let c = &mut self.clients[idx];
        c.usage_scaled += scaled_charge;
        c.measured_task.add(ran_ns as f64, CLIENT_TASK_WEIGHT);
        c.last_activity = Some(now);
        if c.queued == 0 && c.running == 0 {
            c.idle_since = Some(now);
        }
        self.unit_measured_task.add(ran_ns as f64, UNIT_TASK_WEIGHT);
    }

    /// Periodic update of the busy-fraction average.
    pub fn tick(&mut self, now: Ns) {
        self.observe(now);
        self.advance_busy(now);
        let elapsed = now.saturating_sub(self.last_tick);
        if elapsed == 0 {
            return;
        }
        let capacity = u128::from(self.slots) * u128::from(elapsed);
        let fraction = (self.busy_slot_ns as f64 / capacity as f64).clamp(0.0, 1.0);
        // Time-based weight, so irregular ticks average the same way.
        let weight = 1.0 - (-(elapsed as f64) / self.half_life()).exp2();
        self.busy_fraction += weight * (fraction - self.busy_fraction);
        self.busy_slot_ns = 0;
        self.last_tick = now;
    }

    /// Has queued or running work, or did something within the activity window.
    pub fn is_active(&self, c: &ClientRecord<Q>, now: Ns) -> bool {
        c.queued > 0
            || c.running > 0
            || c.last_activity
                .is_some_and(|t| now.saturating_sub(t) <= self.config.activity_window_ns)
    }

    /// Active clients other than `me`.
    pub fn active_others(&self, me: ClientId, now: Ns) -> impl Iterator<Item = &ClientRecord<Q>> {
        self.clients
            .iter()
            .filter(move |c| c.id != me && self.is_active(c, now))
    }

    pub fn active_clients(&self, now: Ns) -> u32 {
        self.clients
            .iter()
            .filter(|c| self.is_active(c, now))
            .count() as u32
    }

    /// Unit-wide average task duration: measured if anything completed, else
    /// the clients' estimates, else 0.
    pub fn unit_avg_task_ns(&self) -> f64 {
        self.unit_measured_task
            .value
            .or(self.unit_expected_task.value)
            .unwrap_or(0.0)
    }

    /// The client's average task, falling back to the unit's.
    pub fn avg_task_ns(&self, c: &ClientRecord<Q>) -> f64 {
        c.avg_task_ns().unwrap_or_else(|| self.unit_avg_task_ns())
    }

    /// Decayed usage at `now`, ns: completed work plus elapsed time of tasks
    /// still running (so a long task counts against its client while it runs).
    pub fn usage_ns(&self, c: &ClientRecord<Q>, now: Ns) -> f64 {
        self.usage_at(now).usage_ns(c)
    }

    /// Decay and capacity evaluated once at `now`, for policies that compare
    /// the usage of many clients in one decision.
    pub fn usage_at(&self, now: Ns) -> UsageAt {
        UsageAt {
            now,
            decay: self.decay_factor(now),
            capacity_ns: self.capacity_ns(now),
        }
    }

    /// What the decayed usage of a client that used every slot all the time
    /// since the ledger started would be, ns.
    pub fn capacity_ns(&self, now: Ns) -> f64 {
        let Some(origin) = self.origin else {
            return 0.0;
        };
        let age = now.saturating_sub(origin) as f64;
        let mean_life = self.half_life() / std::f64::consts::LN_2;
        f64::from(self.slots) * mean_life * (1.0 - (-age / self.half_life()).exp2())
    }

    /// Fraction of the unit's (decayed) capacity this client used recently.
    pub fn utilisation(&self, c: &ClientRecord<Q>, now: Ns) -> f64 {
        self.usage_at(now).fraction(c).clamp(0.0, 1.0)
    }

    /// Expected work ahead of one new task of `me` in a shared FIFO, divided
    /// over the slots: every other active client passing `counts` contributes
    /// its average task times its outstanding tasks, at least one (an active
    /// closed-loop client between tasks is about to submit again).
    pub fn fifo_work_ahead_ns(
        &self,
        me: ClientId,
        now: Ns,
        counts: impl Fn(&ClientRecord<Q>) -> bool,
    ) -> f64 {
        let work: f64 = self
            .active_others(me, now)
            .filter(|c| counts(c))
            .map(|c| self.avg_task_ns(c) * f64::from(c.outstanding().max(1)))
            .sum();
        work / f64::from(self.slots)
    }

    /// Work queued or still running on the unit from other clients that
    /// `counts` accepts, right now, per slot: what a task arriving now
    /// would wait for under FIFO. Running tasks count only their expected
    /// remainder (average task minus time already run), which is what makes
    /// this sharper than a count of outstanding tasks.
    pub fn backlog_ahead_ns(
        &self,
        me: ClientId,
        now: Ns,
        counts: impl Fn(&ClientRecord<Q>) -> bool,
    ) -> f64 {
        let work: f64 = self
            .clients
            .iter()
            .filter(|c| c.id != me && (c.queued > 0 || c.running > 0) && counts(c))
            .map(|c| f64::from(c.queued) * self.avg_task_ns(c) + self.running_rest_ns(c, now))
            .sum();
        work / f64::from(self.slots)
    }

    /// One client's part of [`ClientLedger::backlog_ahead_ns`] (not divided
    /// over the slots): its queued requests and the rest of its running
    /// tasks. Summing it once over a ledger and taking each client's own
    /// part out gives every client's backlog in one pass.
    pub fn backlog_ns(&self, c: &ClientRecord<Q>, now: Ns) -> f64 {
        if c.queued == 0 && c.running == 0 {
            return 0.0;
        }
        f64::from(c.queued) * self.avg_task_ns(c) + self.running_rest_ns(c, now)
    }

    /// What is left of the other clients' running tasks, per slot: the
    /// wait of a task that nothing queued is ahead of.
    pub fn running_left_ns(&self, me: ClientId, now: Ns) -> f64 {
        let work: f64 = self
            .clients
            .iter()
            .filter(|c| c.id != me && c.running > 0)
            .map(|c| self.running_rest_ns(c, now))
            .sum();
        work / f64::from(self.slots)
    }

    /// Expected remainder of a client's running tasks: its average task
    /// per task minus the time they already ran.
    fn running_rest_ns(&self, c: &ClientRecord<Q>, now: Ns) -> f64 {
        let elapsed =
            (u128::from(c.running) * u128::from(now)).saturating_sub(c.dispatch_instants) as f64;
        (f64::from(c.running) * self.avg_task_ns(c) - elapsed).max(0.0)
    }

    /// The global page.
    pub fn unit_view(&self, now: Ns) -> UnitView {
        UnitView {
            busy_fraction: self.busy_fraction,
            avg_task_ns: self.unit_avg_task_ns(),
            active_clients: self.active_clients(now),
            queued: self.queued,
            running: self.running,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TaskId;

    const MS: Ns = 1_000_000;

    fn req(client: u32, expected_ms: f64, now: Ns) -> Request {
        Request {
            client: ClientId(client),
            task: TaskId(0),
            expected_ns: expected_ms * MS as f64,
            submitted_at: now,
        }
    }

    fn run_one(l: &mut ClientLedger, client: u32, expected_ms: f64, ran: Ns, start: Ns) {
        let r = req(client, expected_ms, start);
        let idx = l.ensure(r.client, start);
        l.record_submit(idx, r.expected_ns, start);
        l.record_dispatch(idx, start);
        l.record_complete(r.client, ran, start + ran);
    }

    #[test]
    fn measured_duration_replaces_the_clients_estimate() {
        let mut l = ClientLedger::<()>::new(1, LedgerConfig::default());
        let idx = l.ensure(ClientId(1), 0);
        l.record_submit(idx, 1.0 * MS as f64, 0);
        assert_eq!(l.clients()[idx].avg_task_ns(), Some(1e6));
        l.record_dispatch(idx, 0);
        l.record_complete(ClientId(1), 10 * MS, 10 * MS);
        // The client claimed 1 ms but ran 10 ms: the view uses 10 ms.
        assert_eq!(l.get(ClientId(1)).unwrap().avg_task_ns(), Some(1e7));
    }

    #[test]
    fn usage_halves_every_half_life() {
        let mut l = ClientLedger::<()>::new(1, LedgerConfig::default());
        run_one(&mut l, 1, 10.0, 10 * MS, 0);
        let c = l.get(ClientId(1)).unwrap();
        let at_end = l.usage_ns(c, 10 * MS);
        assert!((at_end - 1e7).abs() < 1.0);
        let later = l.usage_ns(c, 10 * MS + DEFAULT_USAGE_HALF_LIFE_NS);
        assert!((later - 5e6).abs() < 1.0, "{later}");
    }

    /// A charge outside any slot (a kernel build) adds to usage as a
    /// finished task of that length would, and touches no slot count.
    #[test]
    fn a_charge_adds_usage_without_a_slot() {
        let mut l = ClientLedger::<()>::new(1, LedgerConfig::default());
        l.ensure(ClientId(1), 0);
        l.record_charge(ClientId(1), 10 * MS, 10 * MS);
        let c = l.get(ClientId(1)).unwrap();
        assert!((l.usage_ns(c, 10 * MS) - 1e7).abs() < 1.0);
        assert_eq!(c.running, 0);
        // Unknown clients are not charged (and nothing breaks).
        l.record_charge(ClientId(9), MS, 11 * MS);
        assert!(l.get(ClientId(9)).is_none());
    }

    #[test]
    fn running_task_counts_as_usage_while_it_runs() {
        let mut l = ClientLedger::<()>::new(1, LedgerConfig::default());
        let idx = l.ensure(ClientId(1), 0);
        l.record_submit(idx, 1e6, 0);
        l.record_dispatch(idx, 0);
        let c = l.get(ClientId(1)).unwrap();
        assert_eq!(l.usage_ns(c, 7 * MS), 7e6);
    }

    #[test]
    fn renormalising_keeps_usage_continuous() {
        let mut l = ClientLedger::<()>::new(1, LedgerConfig::default());
        run_one(&mut l, 1, 10.0, 10 * MS, 0);
        let far = 40 * DEFAULT_USAGE_HALF_LIFE_NS;
        let before = l.usage_ns(l.get(ClientId(1)).unwrap(), far);
        l.tick(far); // moves the decay reference
        let after = l.usage_ns(l.get(ClientId(1)).unwrap(), far);
        assert!((before - after).abs() <= 1e-9 * before.max(1e-300));
        assert!(after > 0.0 && after < 1e-3);
    }

    #[test]
    fn activity_window_expires() {
        let mut l = ClientLedger::<()>::new(1, LedgerConfig::default());
        run_one(&mut l, 1, 1.0, MS, 0);
        let c = l.get(ClientId(1)).unwrap();
        assert!(l.is_active(c, MS + DEFAULT_ACTIVITY_WINDOW_NS));
        assert!(!l.is_active(c, MS + DEFAULT_ACTIVITY_WINDOW_NS + 1));
    }

    #[test]
    fn busy_fraction_follows_running_slots() {
        let mut l = ClientLedger::<()>::new(2, LedgerConfig::default());
        let idx = l.ensure(ClientId(1), 0);
        l.record_submit(idx, 1e6, 0);
        l.record_dispatch(idx, 0);
        // One of two slots busy for a long time: the average approaches 0.5.
        for t in 1..=500 {
            l.tick(t * 10 * MS);
        }
        let busy = l.unit_view(5000 * MS).busy_fraction;
        assert!((busy - 0.5).abs() < 1e-6, "{busy}");
    }

    #[test]
    fn orphaned_task_still_frees_its_slot() {
        let mut l = ClientLedger::<()>::new(1, LedgerConfig::default());
        let idx = l.ensure(ClientId(1), 0);
        l.record_submit(idx, 1e6, 0);
        l.record_dispatch(idx, 0);
        assert!(l.remove(ClientId(1), 1).is_some());
        assert_eq!(l.running(), 1);
        l.record_complete(ClientId(1), 5, 5);
        assert_eq!(l.running(), 0);
        // A second, spurious completion changes nothing.
        l.record_complete(ClientId(1), 5, 6);
        assert_eq!(l.running(), 0);
        assert!(l.get(ClientId(1)).is_none());
    }

    #[test]
    fn bad_estimates_are_ignored() {
        let mut l = ClientLedger::<()>::new(1, LedgerConfig::default());
        let idx = l.ensure(ClientId(1), 0);
        l.record_submit(idx, f64::NAN, 0);
        l.record_submit(idx, -5.0, 0);
        assert_eq!(l.clients()[idx].avg_task_ns(), None);
        assert_eq!(l.unit_avg_task_ns(), 0.0);
    }
}
