//! Rinnegan's default share-based policy (§3.1, "GPU agent").
//!
//! * CUSTOM clients hold absolute shares (percent of the unit, at most
//!   [`MAX_CUSTOM_SHARES`] registered per unit).
//! * NORMAL clients split what the active CUSTOM clients leave, in proportion
//!   to their shares.
//! * BACKGROUND clients run only when no CUSTOM or NORMAL request is queued.
//!
//! Entitlements are computed among *active* clients, so unused shares flow to
//! whoever is using the unit. Tasks cannot be preempted, so the policy
//! enforces shares over a decayed window of a few hundred milliseconds: it
//! always dispatches the client with the lowest usage per unit of
//! entitlement, and a client far over its entitlement is throttled (skipped
//! while anyone under it has work queued). After a long task its client thus
//! waits until the others have caught up.
//!
//! Under proportional-fair coordination the NORMAL clients the coordinator
//! places ([`UnitPolicy::set_coordinated`]) are served as one pool: the
//! pool holds their entitlements and usage together against CUSTOM clients
//! (and ahead of BACKGROUND ones), and inside it requests run in arrival
//! order. Their shares are already their weights in the coordinator's
//! targets, and its model of a device is a FIFO queue; ordering them by
//! usage as well gives an app with long tasks about an equal share of the
//! device, below what the targets (and its native FIFO turns) give it.
//! (`hold_over_share`, off by default, still judges pool members one by
//! one when it decides how long to hold the unit.)

use super::accounting::{ClientLedger, ClientQueue, ClientRecord, LedgerConfig, UsageAt};
use super::accounts::{Accounts, Standing};
use super::records::{self, ArrivalSeq};
use super::{
    ClientSettings, MAX_CUSTOM_SHARES, PolicyError, PolicyKind, Request, ShareClass, UnitPolicy,
};
use crate::ids::{ClientId, Ns};
use crate::view::{ClientUnitView, UnitView};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeSet;

/// Re-check interval when the policy holds work back but cannot tell when it
/// becomes eligible.
const RECHECK_NS: Ns = 1_000_000;

/// Entitlement used in the usage/entitlement ratio for clients entitled to
/// nothing (NORMAL clients when CUSTOM takes 100 %): they still order among
/// themselves by usage, after everyone with a real entitlement.
const MIN_ENTITLEMENT: f64 = 1e-9;

/// Time constants and tolerances of the share policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShareWindow {
    /// Half-life of decayed usage, ns (default 200 ms).
    pub usage_half_life_ns: Ns,
    /// How long after its last task a client still holds its share, ns
    /// (default 100 ms).
    pub activity_window_ns: Ns,
    /// A client is throttled when its share of the window exceeds its
    /// entitlement by more than this (fraction of the unit, default 0.05).
    pub throttle_slack: f64,
    /// `false` (default): work-conserving, a throttled client runs when no
    /// one else has work queued. `true`: a throttled client is also held
    /// while another active, unthrottled CUSTOM/NORMAL client is between
    /// tasks (strict isolation at the cost of idle time; see `retry_at`).
    pub hold_over_share: bool,
    /// Anticipation, ns (default 500 µs; 0 turns it off). A client under
    /// its entitlement whose task just completed, and who comes back with
    /// its next one within this (its measured think time), keeps its turn:
    /// the slot waits for it up to twice its think time, never longer than
    /// this, instead of going to a client that has used more. Without it a
    /// closed-loop client with short tasks, between two of them when the
    /// slot frees, waits behind whole long tasks of others and gets less
    /// than its share of a device that cannot be preempted.
    pub anticipation_ns: Ns,
}

impl Default for ShareWindow {
    fn default() -> Self {
        let ledger = LedgerConfig::default();
        ShareWindow {
            usage_half_life_ns: ledger.usage_half_life_ns,
            activity_window_ns: ledger.activity_window_ns,
            throttle_slack: 0.05,
            hold_over_share: false,
            anticipation_ns: SHARE_ANTICIPATION_NS,
        }
    }
}

/// Default of [`ShareWindow::anticipation_ns`]: how long the share
/// policy holds a free slot for an under-share client's next task. The
/// Pegasus policies' window for the owner's next call is
/// [`crate::backend_policy::TURN_ANTICIPATION_NS`]; the daemon's one knob,
/// `anticipation_us`, sets both.
pub const SHARE_ANTICIPATION_NS: Ns = 500_000;

impl ShareWindow {
    fn ledger_config(&self) -> LedgerConfig {
        LedgerConfig {
            usage_half_life_ns: self.usage_half_life_ns,
            activity_window_ns: self.activity_window_ns,
        }
    }

    fn slack(&self) -> f64 {
        if self.throttle_slack.is_finite() {
            self.throttle_slack.max(0.0)
        } else {
            0.0
        }
    }
}

/// Shares held by a set of (active) clients, per class. The coordinator
/// weighs applications by the same rule ([`crate::coordination::weights`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ClassTotals {
    custom: u64,
    normal: u64,
}

impl ClassTotals {
    pub(crate) fn add(&mut self, class: ShareClass) {
        match class {
            ShareClass::Custom { shares } => self.custom += u64::from(shares),
            ShareClass::Normal { shares } => self.normal += u64::from(shares),
            ShareClass::Background => {}
        }
    }

    /// Fraction of the unit a client of `class` is entitled to, given that
    /// these totals include it.
    pub(crate) fn entitlement(&self, class: ShareClass) -> f64 {
        self.rates().entitlement(class)
    }

    /// Entitlement per share in each class (computed once per decision, so
    /// comparing many clients needs no division).
    fn rates(&self) -> ShareRates {
        let max = f64::from(MAX_CUSTOM_SHARES);
        if self.normal > 0 {
            let left = (max - self.custom as f64).max(0.0) / max;
            ShareRates {
                custom: 1.0 / max,
                normal: left / self.normal as f64,
            }
        } else if self.custom > 0 {
            // No NORMAL client to give the remainder to: CUSTOM clients
            // split the whole unit in proportion.
            ShareRates {
                custom: 1.0 / self.custom as f64,
                normal: 0.0,
            }
        } else {
            ShareRates::default()
        }
    }
}

/// Fraction of the unit per share, by class.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct ShareRates {
    custom: f64,
    normal: f64,
}

impl ShareRates {
    fn entitlement(&self, class: ShareClass) -> f64 {
        match class {
            ShareClass::Custom { shares } => f64::from(shares) * self.custom,
            ShareClass::Normal { shares } => f64::from(shares) * self.normal,
            ShareClass::Background => 0.0,
        }
    }
}

/// What the policy decides for a free slot.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Choice {
    Run(usize),
    /// Work is queued but held back until (about) this instant.
    Hold(Ns),
    Nothing,
}

/// A queued CUSTOM/NORMAL client competing for the next slot.
#[derive(Clone, Copy, Debug)]
struct Contender {
    idx: usize,
    throttled: bool,
    /// Usage charged for the ordering, ns (see `choose`).
    charged_ns: f64,
    /// Entitlement, at least [`MIN_ENTITLEMENT`].
    entitlement: f64,
    seq: u64,
}

impl Contender {
    /// Unthrottled first, then lowest usage per entitlement
    /// (`charged / entitlement`, compared without dividing), then arrival.
    fn runs_before(&self, other: &Contender) -> bool {
        if self.throttled != other.throttled {
            return other.throttled;
        }
        let mine = self.charged_ns * other.entitlement;
        let theirs = other.charged_ns * self.entitlement;
        mine < theirs || (mine == theirs && self.seq < other.seq)
    }
}

/// The clients of one shared standing in one decision, summed.
#[derive(Clone, Copy, Debug, Default)]
struct Held {
    class: ShareClass,
    used_ns: f64,
    /// The member whose queued request came first (index, seq).
    head: Option<(usize, u64)>,
}

/// The coordinated NORMAL clients of one decision, summed.
#[derive(Clone, Copy, Debug, Default)]
struct Pool {
    entitlement: f64,
    used_ns: f64,
    /// The pooled client whose queued request came first (index, seq).
    head: Option<(usize, u64)>,
}

#[derive(Debug)]
pub struct SharePolicy {
    ledger: ClientLedger<ClientQueue>,
    window: ShareWindow,
    arrivals: ArrivalSeq,
    /// Clients the coordinator places (pooled while NORMAL).
    coordinated: BTreeSet<ClientId>,
    /// Which clients hold their shares together (one process's
    /// connections): [`super::accounts`].
    accounts: Accounts,
}

impl SharePolicy {
    pub fn new(slots: u32, window: ShareWindow) -> Self {
        SharePolicy {
            ledger: ClientLedger::new(slots, window.ledger_config()),
            window,
            arrivals: ArrivalSeq::default(),
            coordinated: BTreeSet::new(),
            accounts: Accounts::default(),
        }
    }

    fn pooled(&self, c: &ClientRecord<ClientQueue>) -> bool {
        matches!(c.class(), ShareClass::Normal { .. }) && self.coordinated.contains(&c.id())
    }

    pub fn window(&self) -> ShareWindow {
        self.window
    }

    pub fn ledger(&self) -> &ClientLedger<ClientQueue> {
        &self.ledger
    }

    /// CUSTOM shares registered on this unit (active or not).
    pub fn custom_shares(&self) -> u32 {
        let total: u64 = self
            .ledger
            .clients()
            .iter()
            .map(|c| match c.class() {
                ShareClass::Custom { shares } => u64::from(shares),
                _ => 0,
            })
            .sum();
        u32::try_from(total).unwrap_or(u32::MAX)
    }

    /// Entitlement of every active client, in client-id order.
    pub fn entitlements(&self, now: Ns) -> Vec<(ClientId, f64)> {
        let totals = self.active_totals(now);
        self.ledger
            .clients()
            .iter()
            .filter(|c| self.ledger.is_active(c, now))
            .map(|c| (c.id(), totals.entitlement(c.class())))
            .collect()
    }

    /// Shares of the active standings, per class: a client on its own
    /// counts once, and so does each class of an account however many of
    /// its clients are active.
    fn active_totals(&self, now: Ns) -> ClassTotals {
        let mut totals = ClassTotals::default();
        let mut counted: FxHashSet<Standing> = FxHashSet::default();
        for c in self.ledger.clients() {
            if !self.ledger.is_active(c, now) {
                continue;
            }
            match self.accounts.shared_standing(c.id(), c.class()) {
                Some(standing) if !counted.insert(standing) => {}
                _ => totals.add(c.class()),
            }
        }
        totals
    }

    fn is_over_share(
        &self,
        usage: &UsageAt,
        c: &ClientRecord<ClientQueue>,
        entitlement: f64,
    ) -> bool {
        usage.fraction(c) > entitlement + self.window.slack()
    }

    fn choose(&self, now: Ns) -> Choice {
        if self.ledger.queued() == 0 {
            // Nothing to choose from (the common case at a tick): no need
            // to look at every client.
            return Choice::Nothing;
        }
        let totals = self.active_totals(now);
        let rates = totals.rates();
        let slack = self.window.slack();
        let usage = self.ledger.usage_at(now);
        let mut best: Option<Contender> = None;
        let mut first_background: Option<(usize, u64)> = None;
        let mut pool = Pool::default();
        let mut standings: FxHashMap<Standing, Held> = FxHashMap::default();
        // The client the slot would wait for, and until when.
        let mut anticipated: Option<(Contender, Ns)> = None;
        for (idx, c) in self.ledger.clients().iter().enumerate() {
            let used_ns = usage.usage_ns(c);
            let idle = c.queue.is_empty() && used_ns == 0.0;
            let shared = if idle || self.pooled(c) {
                None
            } else {
                self.accounts.shared_standing(c.id(), c.class())
            };
            if let Some(standing) = shared {
                // Judged with the others of its standing, below.
                let held = standings.entry(standing).or_insert(Held {
                    class: c.class(),
                    ..Held::default()
                });
                held.used_ns += used_ns;
                if let Some(head) = c.queue.front()
                    && held.head.is_none_or(|(_, seq)| head.seq < seq)
                {
                    held.head = Some((idx, head.seq));
                }
                continue;
            }
            if self.pooled(c) {
                // The pool's standing counts every member's, queued or not.
                if self.ledger.is_active(c, now) {
                    pool.entitlement += rates.entitlement(c.class());
                }
                pool.used_ns += usage.usage_ns(c);
                if let Some(head) = c.queue.front()
                    && pool.head.is_none_or(|(_, seq)| head.seq < seq)
                {
                    pool.head = Some((idx, head.seq));
                }
                continue;
            }
            let Some(head) = c.queue.front() else {
                if let Some(until) = self.anticipated_until(c, now) {
                    let entitlement = rates.entitlement(c.class());
                    let contender = Contender {
                        idx,
                        throttled: usage.exceeds(used_ns, entitlement + slack),
                        charged_ns: used_ns + self.ledger.avg_task_ns(c) / 2.0,
                        entitlement: entitlement.max(MIN_ENTITLEMENT),
                        seq: u64::MAX,
                    };
                    if anticipated.is_none_or(|(a, _)| contender.runs_before(&a)) {
                        anticipated = Some((contender, until));
                    }
                }
                continue;
            };
            let class = c.class();
            if class == ShareClass::Background {
                if first_background.is_none_or(|(_, seq)| head.seq < seq) {
                    first_background = Some((idx, head.seq));
                }
                continue;
            }
            let entitlement = rates.entitlement(class);
            let contender = Contender {
                idx,
                throttled: usage.exceeds(used_ns, entitlement + slack),
                // Half a task ahead: a client is picked when the middle of
                // its next task, not its start, is behind everyone else's.
                // Charging whole tasks from the start would favour clients
                // with long tasks by half a task per round (measured: a 5 %
                // client with 20 ms tasks got 7.7 %); from the end, the
                // reverse.
                charged_ns: used_ns + self.ledger.avg_task_ns(c) / 2.0,
                entitlement: entitlement.max(MIN_ENTITLEMENT),
                seq: head.seq,
            };
            if best.is_none_or(|b| contender.runs_before(&b)) {
                best = Some(contender);
            }
        }
        for held in standings.values() {
            let Some((idx, seq)) = held.head else {
                continue;
            };
            if held.class == ShareClass::Background {
                if first_background.is_none_or(|(_, s)| seq < s) {
                    first_background = Some((idx, seq));
                }
                continue;
            }
            let entitlement = rates.entitlement(held.class);
            let head = &self.ledger.clients()[idx];
            let contender = Contender {
                idx,
                throttled: usage.exceeds(held.used_ns, entitlement + slack),
                charged_ns: held.used_ns + self.ledger.avg_task_ns(head) / 2.0,
                entitlement: entitlement.max(MIN_ENTITLEMENT),
                seq,
            };
            if best.is_none_or(|b| contender.runs_before(&b)) {
                best = Some(contender);
            }
        }
        if let Some((idx, seq)) = pool.head {
            let head = &self.ledger.clients()[idx];
            let contender = Contender {
                idx,
                throttled: usage.exceeds(pool.used_ns, pool.entitlement + slack),
                charged_ns: pool.used_ns + self.ledger.avg_task_ns(head) / 2.0,
                entitlement: pool.entitlement.max(MIN_ENTITLEMENT),
                seq,
            };
            if best.is_none_or(|b| contender.runs_before(&b)) {
                best = Some(contender);
            }
        }
        match (best, anticipated) {
            (Some(b), Some((a, until))) if a.runs_before(&b) => return Choice::Hold(until),
            (None, Some((_, until))) if first_background.is_some() => return Choice::Hold(until),
            _ => {}
        }
        match best {
            Some(b) if b.throttled && self.window.hold_over_share => {
                match self.hold_until(&totals, &usage, now) {
                    Some(until) => Choice::Hold(until),
                    None => Choice::Run(b.idx),
                }
            }
            Some(b) => Choice::Run(b.idx),
            None => first_background.map_or(Choice::Nothing, |(idx, _)| Choice::Run(idx)),
        }
    }

    /// Until when the slot waits for `c`, which has nothing queued: a
    /// CUSTOM or NORMAL client, judged on its own (not pooled or in a
    /// shared standing), idle since its last task completed less than
    /// twice its think time ago, a think time within the anticipation
    /// window. `None`: not worth waiting for.
    fn anticipated_until(&self, c: &ClientRecord<ClientQueue>, now: Ns) -> Option<Ns> {
        let window = self.window.anticipation_ns;
        if window == 0
            || c.class() == ShareClass::Background
            || c.running() > 0
            || self.pooled(c)
            || self.accounts.shared_standing(c.id(), c.class()).is_some()
        {
            return None;
        }
        let idle_since = c.idle_since()?;
        let think = c.think_ns()?;
        if think.is_nan() || think > window as f64 {
            return None;
        }
        let wait = ((2.0 * think).ceil() as Ns).clamp(1, window);
        let until = idle_since.saturating_add(wait);
        (now < until).then_some(until)
    }

    /// With `hold_over_share`, every queued CUSTOM/NORMAL client is over its
    /// share: hold them while an unthrottled one is active but has nothing
    /// queued (between tasks, or running). Returns the earliest instant the
    /// decision can change (a held client decays back under its share, or an
    /// idle one's activity lapses); the caller re-asks then. `None`: nobody
    /// to hold the slot for.
    fn hold_until(&self, totals: &ClassTotals, usage: &UsageAt, now: Ns) -> Option<Ns> {
        let mut idle_entitled_until: Option<Ns> = None;
        for c in self.ledger.clients() {
            let entitled = c.class() != ShareClass::Background
                && c.queued() == 0
                && self.ledger.is_active(c, now)
                && !self.is_over_share(usage, c, totals.entitlement(c.class()));
            if entitled {
                // Running clients stay active until they complete (and then
                // for the window); idle ones until the window lapses.
                let lapse = if c.running() > 0 {
                    Ns::MAX
                } else {
                    c.last_activity()
                        .unwrap_or(now)
                        .saturating_add(self.window.activity_window_ns)
                        .saturating_add(1)
                };
                idle_entitled_until = Some(idle_entitled_until.map_or(lapse, |t| t.min(lapse)));
            }
        }
        let lapse = idle_entitled_until?;
        let capacity = self.ledger.capacity_ns(now);
        let half_life = self.window.usage_half_life_ns.max(1) as f64;
        let mut release = lapse;
        for c in self.ledger.clients() {
            if c.queued() == 0 || c.class() == ShareClass::Background {
                continue;
            }
            let allowed = (totals.entitlement(c.class()) + self.window.slack()) * capacity;
            let used = usage.usage_ns(c);
            // Decay needed to bring usage down to what is allowed, assuming
            // the capacity stays where it is (it only grows, so this is late
            // at worst by the start-up transient).
            let t = if allowed > 0.0 && used > allowed {
                let wait = half_life * (used / allowed).log2();
                now.saturating_add(wait.ceil().min(u64::MAX as f64) as Ns)
            } else {
                now.saturating_add(RECHECK_NS)
            };
            release = release.min(t);
        }
        Some(release.max(now.saturating_add(1)))
    }

    /// CUSTOM shares registered, each standing once, leaving out
    /// `client`'s own standing (as it would hold `class`).
    fn custom_shares_except(&self, client: ClientId, class: ShareClass) -> u64 {
        if !self.accounts.any_shared() {
            return self.ledger.custom_shares_except(client);
        }
        let mine = self.accounts.standing(client, class);
        let mut counted: FxHashSet<Standing> = FxHashSet::default();
        self.ledger
            .clients()
            .iter()
            .filter(|c| c.id() != client)
            .filter_map(|c| match c.class() {
                ShareClass::Custom { shares } => {
                    let standing = self.accounts.standing(c.id(), c.class());
                    (standing != mine && counted.insert(standing)).then_some(u64::from(shares))
                }
                _ => None,
            })
            .sum()
    }

    fn validate(&self, client: ClientId, class: ShareClass) -> Result<(), PolicyError> {
        match class {
            ShareClass::Custom { shares: 0 } | ShareClass::Normal { shares: 0 } => {
                Err(PolicyError::ZeroShares)
            }
            ShareClass::Custom { shares } => {
                let max = u64::from(MAX_CUSTOM_SHARES);
                let others = self.custom_shares_except(client, class);
                let total = others + u64::from(shares);
                if total > max {
                    Err(PolicyError::CustomSharesExceeded {
                        requested_total: u32::try_from(total).unwrap_or(u32::MAX),
                        available: u32::try_from(max.saturating_sub(others)).unwrap_or(0),
                    })
                } else {
                    Ok(())
                }
            }
            ShareClass::Normal { .. } | ShareClass::Background => Ok(()),
        }
    }
}

impl UnitPolicy for SharePolicy {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Share
    }

    fn set_client(
        &mut self,
        client: ClientId,
        settings: ClientSettings,
        now: Ns,
    ) -> Result<(), PolicyError> {
        self.validate(client, settings.class)?;
        self.ledger.set_settings(client, settings, now);
        Ok(())
    }

    fn remove_client(&mut self, client: ClientId, now: Ns) -> Vec<Request> {
        self.coordinated.remove(&client);
        self.accounts.remove(client);
        records::remove_queued(&mut self.ledger, client, now)
    }

    fn submit(&mut self, request: Request, now: Ns) {
        self.arrivals.submit(&mut self.ledger, request, now);
    }

    fn pick_next(&mut self, now: Ns) -> Option<Request> {
        self.ledger.observe(now);
        let Choice::Run(idx) = self.choose(now) else {
            return None;
        };
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

    fn set_anticipation_ns(&mut self, ns: Ns) {
        self.window.anticipation_ns = ns;
    }

    fn retry_at(&self, now: Ns) -> Option<Ns> {
        match self.choose(now) {
            Choice::Hold(until) => Some(until),
            Choice::Run(_) | Choice::Nothing => None,
        }
    }

    fn client_views(&self, clients: &[ClientId], now: Ns) -> Vec<ClientUnitView> {
        let round = ShareViews::new(self, now);
        clients.iter().map(|&c| round.view(c)).collect()
    }

    fn unit_view(&self, now: Ns) -> UnitView {
        self.ledger.unit_view(now)
    }

    fn queued(&self) -> usize {
        self.ledger.queued() as usize
    }

    fn set_client_account(&mut self, client: ClientId, account: Option<u64>) {
        self.accounts.set(client, account);
    }

    fn set_coordinated(&mut self, client: ClientId, coordinated: bool) {
        if coordinated {
            self.coordinated.insert(client);
        } else {
            self.coordinated.remove(&client);
        }
    }
}

/// Everything a client's view needs to know about the others, summed over
/// the ledger once: each view then takes its own part out instead of
/// scanning the others, so a round of views costs O(clients), not
/// O(clients²).
struct ShareViews<'a> {
    policy: &'a SharePolicy,
    now: Ns,
    usage: UsageAt,
    /// Shares of the active clients, per class.
    totals: ClassTotals,
    /// Active CUSTOM/NORMAL clients.
    active_foreground: u32,
    /// Some CUSTOM/NORMAL client has a request queued.
    foreground_queued: bool,
    /// Average tasks of the active clients, summed, and their number.
    active_task_sum: f64,
    active: u32,
    /// FIFO work of the active clients (average task × outstanding, at
    /// least one), by whether they are BACKGROUND.
    foreground_work: f64,
    background_work: f64,
    /// Standings shared by several clients: their usage (fraction of the
    /// unit) summed, and whether any of them is active.
    shared: FxHashMap<Standing, SharedUse>,
}

#[derive(Clone, Copy, Debug, Default)]
struct SharedUse {
    fraction: f64,
    active: bool,
}

impl<'a> ShareViews<'a> {
    fn new(policy: &'a SharePolicy, now: Ns) -> Self {
        let ledger = &policy.ledger;
        let mut round = ShareViews {
            policy,
            now,
            usage: ledger.usage_at(now),
            totals: policy.active_totals(now),
            active_foreground: 0,
            foreground_queued: false,
            active_task_sum: 0.0,
            active: 0,
            foreground_work: 0.0,
            background_work: 0.0,
            shared: FxHashMap::default(),
        };
        for c in ledger.clients() {
            let background = c.class() == ShareClass::Background;
            round.foreground_queued |= !background && c.queued() > 0;
            let active = ledger.is_active(c, now);
            let fraction = round.usage.fraction(c);
            // A client that never used the unit adds nothing to its
            // standing (checked first: most connected clients are idle).
            let standing = if active || fraction > 0.0 {
                policy.accounts.shared_standing(c.id(), c.class())
            } else {
                None
            };
            if let Some(standing) = standing {
                let held = round.shared.entry(standing).or_default();
                held.fraction += fraction;
                held.active |= active;
            }
            if !active {
                continue;
            }
            round.active += 1;
            round.active_task_sum += ledger.avg_task_ns(c);
            if background {
                round.background_work += round.work_of(c);
            } else {
                round.active_foreground += 1;
                round.foreground_work += round.work_of(c);
            }
        }
        round
    }

    /// What a closed-loop client puts ahead of a new task in a FIFO.
    fn work_of(&self, c: &ClientRecord<ClientQueue>) -> f64 {
        self.policy.ledger.avg_task_ns(c) * f64::from(c.outstanding().max(1))
    }

    fn view(&self, client: ClientId) -> ClientUnitView {
        let ledger = &self.policy.ledger;
        let me = ledger.get(client);
        let class = me.map_or_else(ShareClass::default, |c| c.class());
        // A shared standing's usage and activity are its clients' together.
        let held = self
            .policy
            .accounts
            .shared_standing(client, class)
            .and_then(|s| self.shared.get(&s));
        let usage = match held {
            Some(h) => h.fraction,
            None => me.map_or(0.0, |c| self.usage.fraction(c)),
        };
        let current_utilisation = usage.clamp(0.0, 1.0);
        let slots = f64::from(ledger.slots());
        // This client's own part of the sums, if it is in them.
        let mine = me.filter(|c| ledger.is_active(c, self.now));
        let standing_active = held.map_or(mine.is_some(), |h| h.active);
        let my_work = mine.map_or(0.0, |c| self.work_of(c));

        if class == ShareClass::Background {
            let wait_ns = if self.active_foreground > 0 {
                f64::INFINITY
            } else {
                (self.background_work - my_work).max(0.0) / slots
            };
            return ClientUnitView {
                guaranteed: 0.0,
                wait_ns,
                current_utilisation,
                throttled: self.foreground_queued,
                max_utilisation: 1.0,
            };
        }

        // The entitlement this client would have once it uses the unit.
        let mut totals = self.totals;
        if !standing_active {
            totals.add(class);
        }
        let entitlement = totals.entitlement(class);
        let wait_ns = if usage <= entitlement {
            // Under its share it is next in line: it only waits for the
            // rest of a task already running (about half of one).
            let (sum, n) = match mine {
                Some(c) => (
                    self.active_task_sum - ledger.avg_task_ns(c),
                    self.active - 1,
                ),
                None => (self.active_task_sum, self.active),
            };
            if n == 0 {
                0.0
            } else {
                sum.max(0.0) / f64::from(n) / 2.0 / slots
            }
        } else {
            (self.foreground_work - my_work).max(0.0) / slots
        };
        ClientUnitView {
            guaranteed: entitlement,
            wait_ns,
            current_utilisation,
            throttled: usage > entitlement + self.policy.window.slack(),
            max_utilisation: 1.0,
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
            expected_ns: 1e6,
            submitted_at: now,
        }
    }

    fn class(class: ShareClass) -> ClientSettings {
        ClientSettings { class, priority: 0 }
    }

    fn custom(shares: u32) -> ClientSettings {
        class(ShareClass::Custom { shares })
    }

    fn normal(shares: u32) -> ClientSettings {
        class(ShareClass::Normal { shares })
    }

    fn policy() -> SharePolicy {
        SharePolicy::new(1, ShareWindow::default())
    }

    /// Two CUSTOM 50 clients on one slot, closed loop: `short` runs 1 ms
    /// calls and comes back 0.2 ms after each, `long` always has a 20 ms
    /// call queued. Returns `short`'s part of the device time over 4 s.
    /// The short client's part of the device, with the window set
    /// through [`UnitPolicy::set_anticipation_ns`] (as the daemon's
    /// `anticipation_us` key does).
    fn short_part_against_long(anticipation_ns: Ns) -> f64 {
        let mut p = SharePolicy::new(1, ShareWindow::default());
        p.set_anticipation_ns(anticipation_ns);
        p.set_client(ClientId(1), custom(50), 0).unwrap();
        p.set_client(ClientId(2), custom(50), 0).unwrap();
        let (short, long) = (MS, 20 * MS);
        let think = MS / 5;
        let mut now: Ns = 0;
        let mut task = 0;
        let mut short_back_at = Some(0);
        let mut short_ns = 0;
        p.submit(req(2, task, 0), 0);
        while now < 4_000 * MS {
            if short_back_at.is_some_and(|t| t <= now) {
                task += 1;
                p.submit(req(1, task, now), now);
                short_back_at = None;
            }
            match p.pick_next(now) {
                Some(r) if r.client == ClientId(1) => {
                    now += short;
                    short_ns += short;
                    p.complete(ClientId(1), short, now);
                    short_back_at = Some(now + think);
                }
                Some(_) => {
                    // The short client comes back while the long call runs.
                    if let Some(t) = short_back_at.take_if(|t| *t < now + long) {
                        task += 1;
                        p.submit(req(1, task, t), t);
                    }
                    now += long;
                    p.complete(ClientId(2), long, now);
                    task += 1;
                    p.submit(req(2, task, now), now);
                }
                // Held for the short client: the clock moves to when the
                // policy re-decides or the client comes back.
                None => {
                    let retry = p.retry_at(now).expect("held with work queued");
                    assert!(retry > now && retry <= now + anticipation_ns);
                    now = retry.min(short_back_at.unwrap_or(retry));
                }
            }
        }
        short_ns as f64 / now as f64
    }

    #[test]
    fn anticipation_keeps_a_short_client_its_share_of_a_device_with_long_calls() {
        // Without it, the slot goes to the long client whenever the short
        // one is between calls, and each such turn costs it 20 ms.
        let without = short_part_against_long(0);
        let with = short_part_against_long(SHARE_ANTICIPATION_NS);
        assert!(without < 0.25, "without anticipation: {without}");
        assert!(with > 0.45, "with anticipation: {with}");
    }

    #[test]
    fn custom_total_is_capped() {
        let mut p = policy();
        p.set_client(ClientId(1), custom(60), 0).unwrap();
        let err = p.set_client(ClientId(2), custom(50), 0).unwrap_err();
        assert_eq!(
            err,
            PolicyError::CustomSharesExceeded {
                requested_total: 110,
                available: 40
            }
        );
        assert!(p.ledger().get(ClientId(2)).is_none());
        // Raising one's own shares counts only the others.
        p.set_client(ClientId(1), custom(100), 0).unwrap();
        assert_eq!(p.custom_shares(), 100);
        assert_eq!(
            p.set_client(ClientId(3), normal(0), 0),
            Err(PolicyError::ZeroShares)
        );
    }

    #[test]
    fn entitlements_split_among_active_clients() {
        let mut p = policy();
        p.set_client(ClientId(1), custom(40), 0).unwrap();
        p.set_client(ClientId(2), normal(10), 0).unwrap();
        p.set_client(ClientId(3), normal(30), 0).unwrap();
        p.set_client(ClientId(4), custom(20), 0).unwrap();
        for c in 1..=3 {
            p.submit(req(c, 0, 0), 0);
        }
        // Client 4 is idle: its 20 shares go to the NORMAL clients.
        let e = p.entitlements(0);
        assert_eq!(e.len(), 3);
        assert!((e[0].1 - 0.40).abs() < 1e-12);
        assert!((e[1].1 - 0.15).abs() < 1e-12);
        assert!((e[2].1 - 0.45).abs() < 1e-12);
        // Its view counts itself in: 20 % guaranteed.
        assert!((p.client_view(ClientId(4), 0).guaranteed - 0.2).abs() < 1e-12);
    }

    #[test]
    fn custom_clients_share_the_remainder_without_normal_ones() {
        let mut p = policy();
        for c in 1..=3 {
            p.set_client(ClientId(c), custom(25), 0).unwrap();
            p.submit(req(c, 0, 0), 0);
        }
        for (_, e) in p.entitlements(0) {
            assert!((e - 1.0 / 3.0).abs() < 1e-12);
        }
    }

    #[test]
    fn background_waits_for_queued_foreground_work() {
        let mut p = policy();
        p.set_client(ClientId(1), class(ShareClass::Background), 0)
            .unwrap();
        p.submit(req(1, 10, 0), 0);
        p.submit(req(2, 20, 1), 1);
        p.submit(req(2, 21, 2), 2);
        assert!(p.client_view(ClientId(1), 2).throttled);
        assert_eq!(p.client_view(ClientId(1), 2).wait_ns, f64::INFINITY);
        assert_eq!(p.client_view(ClientId(1), 2).guaranteed, 0.0);
        assert_eq!(p.pick_next(3).map(|r| r.task.0), Some(20));
        assert_eq!(p.pick_next(3).map(|r| r.task.0), Some(21));
        // Nothing else wants the unit: work-conserving.
        assert_eq!(p.pick_next(3).map(|r| r.task.0), Some(10));
    }

    #[test]
    fn over_share_client_is_throttled_after_a_long_task() {
        let mut p = policy();
        p.set_client(ClientId(1), custom(50), 0).unwrap();
        p.set_client(ClientId(2), custom(50), 0).unwrap();
        p.submit(req(1, 10, 0), 0);
        assert_eq!(p.pick_next(0).map(|r| r.task.0), Some(10));
        p.submit(req(2, 20, MS), MS);
        p.complete(ClientId(1), 100 * MS, 100 * MS);
        p.submit(req(1, 11, 100 * MS), 100 * MS);
        let view = p.client_view(ClientId(1), 100 * MS);
        assert!(view.throttled);
        assert!(view.wait_ns > 0.0);
        assert!((view.guaranteed - 0.5).abs() < 1e-12);
        // Client 2 arrived later but runs first.
        assert_eq!(p.pick_next(100 * MS).map(|r| r.task.0), Some(20));
        // Work-conserving: with nobody else queued, client 1 runs anyway.
        assert_eq!(p.pick_next(100 * MS).map(|r| r.task.0), Some(11));
        assert_eq!(p.retry_at(100 * MS), None);
    }

    #[test]
    fn holding_over_share_client_sets_a_retry_time() {
        let window = ShareWindow {
            hold_over_share: true,
            ..ShareWindow::default()
        };
        let mut p = SharePolicy::new(1, window);
        p.set_client(ClientId(1), custom(50), 0).unwrap();
        p.set_client(ClientId(2), custom(50), 0).unwrap();
        // Client 2 ran a short task and is between tasks; client 1 ran long.
        p.submit(req(2, 20, 0), 0);
        p.pick_next(0);
        p.complete(ClientId(2), MS, MS);
        p.submit(req(1, 10, MS), MS);
        p.pick_next(MS);
        p.complete(ClientId(1), 100 * MS, 101 * MS);
        p.submit(req(1, 11, 101 * MS), 101 * MS);
        // Client 2 finished 100 ms ago: still active, at the window's edge.
        let now = 101 * MS;
        assert!(p.client_view(ClientId(1), now).throttled);
        let retry = p.retry_at(now).expect("client 1 is held back");
        assert!(retry > now);
        assert_eq!(p.pick_next(now), None);
        // Once client 2's activity lapses (it finished at 1 ms), client 1 runs.
        assert!(retry <= MS + DEFAULT_WINDOW + 1);
        assert_eq!(p.pick_next(retry).map(|r| r.task.0), Some(11));
        assert_eq!(p.retry_at(retry), None);
    }

    const DEFAULT_WINDOW: Ns = super::super::DEFAULT_ACTIVITY_WINDOW_NS;

    /// One slot for 2 s; every client keeps one request queued (closed
    /// loop) of its own length. Returns each client's share of the time.
    fn closed_loop(p: &mut SharePolicy, task_ns: &[(u32, Ns)]) -> Vec<f64> {
        let mut now = 0;
        let mut next_task = 0;
        for &(c, _) in task_ns {
            p.submit(req(c, next_task, now), now);
            next_task += 1;
        }
        let mut busy = vec![0; task_ns.len()];
        while now < 2_000 * MS {
            let r = p.pick_next(now).expect("work is always queued");
            let i = task_ns.iter().position(|t| ClientId(t.0) == r.client);
            let i = i.expect("a known client");
            now += task_ns[i].1;
            busy[i] += task_ns[i].1;
            p.complete(r.client, task_ns[i].1, now);
            p.submit(req(task_ns[i].0, next_task, now), now);
            next_task += 1;
        }
        busy.iter().map(|b| *b as f64 / now as f64).collect()
    }

    #[test]
    fn coordinated_normal_clients_run_in_arrival_order() {
        // A 10 ms app and a 1 ms app, both NORMAL with equal shares. By
        // usage, the long one gets about half the unit; pooled, they take
        // FIFO turns and it gets 10 of every 11 ms, as the coordinator's
        // model (and the driver's queue natively) has it.
        let apps = [(1, 10 * MS), (2, MS)];
        let by_usage = closed_loop(&mut policy(), &apps);
        assert!(by_usage[0] < 0.6, "{by_usage:?}");
        let mut p = policy();
        p.set_coordinated(ClientId(1), true);
        p.set_coordinated(ClientId(2), true);
        let pooled = closed_loop(&mut p, &apps);
        assert!((pooled[0] - 10.0 / 11.0).abs() < 0.01, "{pooled:?}");
        // Leaving coordination restores the order by usage.
        p.set_coordinated(ClientId(1), false);
        p.set_coordinated(ClientId(2), false);
        let again = closed_loop(&mut p, &apps);
        assert!(again[0] < 0.6, "{again:?}");
    }

    #[test]
    fn a_custom_client_keeps_its_share_against_the_pool() {
        let mut p = policy();
        p.set_client(ClientId(3), custom(50), 0).unwrap();
        p.set_client(ClientId(4), class(ShareClass::Background), 0)
            .unwrap();
        for c in [1, 2, 3, 4] {
            p.set_coordinated(ClientId(c), true);
        }
        // Two pooled 10 ms apps against a CUSTOM 50 % app with 1 ms tasks,
        // and a BACKGROUND one: the CUSTOM app still gets its half, the
        // pool the rest in turns, BACKGROUND nothing.
        let share = closed_loop(&mut p, &[(1, 10 * MS), (2, 10 * MS), (3, MS), (4, MS)]);
        assert!(share[2] > 0.45 && share[2] < 0.56, "{share:?}");
        assert!((share[0] - share[1]).abs() < 0.03, "{share:?}");
        assert!(share[3] < 0.01, "{share:?}");
    }

    #[test]
    fn under_share_wait_is_a_residual_task() {
        let mut p = policy();
        p.set_client(ClientId(1), custom(50), 0).unwrap();
        p.set_client(ClientId(2), custom(50), 0).unwrap();
        p.submit(req(2, 20, 0), 0);
        p.submit(req(2, 21, 0), 0);
        p.submit(req(2, 22, 0), 0);
        // Client 1 has used nothing: it waits half of one of client 2's tasks.
        let v = p.client_view(ClientId(1), 0);
        assert_eq!(v.wait_ns, 0.5e6);
        assert!(!v.throttled);
    }
}
