//! The [`Coordinator`]: the monitor's state of coordination, re-solved when
//! applications come, go or their models move.

use super::*;

#[cfg(feature = "solver")]
mod search;
#[cfg(feature = "solver")]
use search::Search;

/// How the monitor re-solves.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoordinatorConfig {
    /// Floor asked for, × native estimate (a little above 1 leaves a margin
    /// for what the fluid model does not see: queueing, noise).
    pub floor_goal: f64,
    /// Least time between re-solves caused by model drift, ns. A change in
    /// the set of apps re-solves at the next call whatever this says.
    pub resolve_period_ns: Ns,
    /// Relative change of a measured exec time that counts as drift.
    pub model_change: f64,
    /// Interference-aware rounds of [`solve_targets`] (0: plain fluid model).
    pub interference_rounds: usize,
    /// Add [`blocking_limits`] for queues.
    pub blocking: bool,
    /// Wait-aware rounds of [`solve_targets_waiting`] (0: off). Takes
    /// precedence over `interference_rounds` and `blocking`.
    pub wait_rounds: usize,
    /// The exclusion step of [`solve_targets_waiting`] after the rounds
    /// (only with `wait_rounds` > 0).
    #[serde(default = "default_exclusion")]
    pub exclusion: bool,
    /// Judge the candidates by replaying them
    /// ([`solve_targets_replayed`]) rather than by the fluid predictor
    /// (only with `wait_rounds` > 0).
    #[serde(default = "default_replay")]
    pub replay: bool,
    /// Hysteresis of the outside CPU load taken out of the CPU units'
    /// supply ([`Coordinator::set_outside_load`]), cores: the supply moves
    /// only when the measured load is this far or further from the load
    /// it was last set for.
    #[serde(default = "default_outside_load_step")]
    pub outside_load_step: f64,
    /// Replayed events a replay-judged solve may spend on its optional
    /// candidates ([`JudgeBudget`]).
    #[serde(default = "default_replay_events")]
    pub replay_events_per_solve: u64,
    /// The fluid-judged pick (`replay` off) of [`WARM_MIN_APPS`] or more
    /// apps re-solves warm ([`warm`]: the last full pick's shape, one
    /// program) when models drift, the outside load moves or at most
    /// [`MAX_WARM_NEWCOMERS`] apps come (any number may go), as long as
    /// the last full pick is younger than this, ns, and the models are
    /// near those it saw ([`WARM_MODEL_DRIFT`]); 0: every re-solve is a
    /// full pick. A newcomer taken in warm gets targets at once, and a
    /// full pick follows `resolve_period_ns` later
    /// ([`SolveCause::Deferred`]).
    #[serde(default = "default_full_resolve_period")]
    pub full_resolve_period_ns: Ns,
    /// The replay-judged pick (`replay` on) runs in slices of about this
    /// many replayed events, one per [`Coordinator::update`], and publishes
    /// when the last ends ([`super::slices`]): the same targets as a pick
    /// run whole, without stalling the coordinator for the whole of it.
    /// 0: every pick runs whole inside one update.
    #[serde(default = "default_pick_slice_events")]
    pub pick_slice_events: u64,
}

/// The default of [`CoordinatorConfig::pick_slice_events`]: one replay at
/// its cap, about 5 ms at 128 apps. A slice starts no step that would take
/// it past this (but always runs its first), so one slice is at most this
/// or one step.
pub const DEFAULT_PICK_SLICE_EVENTS: u64 = 80_000;

pub(super) fn default_pick_slice_events() -> u64 {
    DEFAULT_PICK_SLICE_EVENTS
}

/// The default of [`CoordinatorConfig::full_resolve_period_ns`]: 10 s. A
/// full pick of 32 apps on 9 units took 2.6 s, so a coordinator that
/// re-picks whenever a model drifts (every `resolve_period_ns`) keeps a
/// core busy; one full pick per 10 s for drift is about a quarter of one.
pub const DEFAULT_FULL_RESOLVE_PERIOD_NS: Ns = 10_000_000_000;

pub(super) fn default_full_resolve_period() -> Ns {
    DEFAULT_FULL_RESOLVE_PERIOD_NS
}

/// The default of [`CoordinatorConfig::replay_events_per_solve`].
pub const DEFAULT_REPLAY_EVENTS: u64 = 64_000_000;

pub(super) fn default_replay_events() -> u64 {
    DEFAULT_REPLAY_EVENTS
}

pub(super) fn default_replay() -> bool {
    true
}

pub(super) fn default_exclusion() -> bool {
    true
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            floor_goal: 1.05,
            resolve_period_ns: 200_000_000,
            model_change: 0.02,
            interference_rounds: 0,
            blocking: false,
            wait_rounds: 3,
            exclusion: true,
            replay: true,
            outside_load_step: OUTSIDE_LOAD_STEP,
            replay_events_per_solve: DEFAULT_REPLAY_EVENTS,
            full_resolve_period_ns: DEFAULT_FULL_RESOLVE_PERIOD_NS,
            pick_slice_events: DEFAULT_PICK_SLICE_EVENTS,
        }
    }
}

/// What made the coordinator re-solve ([`Coordinator::last_cause`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SolveCause {
    /// An app came or went, or its weight changed.
    Membership,
    /// The outside CPU load held in the supply moved.
    OutsideLoad,
    /// A measured model or the supply drifted, and the period had passed.
    Drift,
    /// The full pick a warm re-solve put off when it took in a newcomer,
    /// a period later.
    Deferred,
}

impl std::fmt::Display for SolveCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SolveCause::Membership => "apps came or went",
            SolveCause::OutsideLoad => "outside load moved",
            SolveCause::Drift => "models drifted",
            SolveCause::Deferred => "after a warm newcomer",
        })
    }
}

/// One client's share of the last solve.
#[cfg(feature = "solver")]
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ClientTargets {
    fraction: Vec<f64>,
    rate: f64,
    /// Its native estimate (tasks/s) and predicted throughput relative to it.
    estimate: Option<(f64, f64)>,
}

/// The monitor's side: apps' demands in, per-client targets out.
#[cfg(feature = "solver")]
#[derive(Clone, Debug)]
pub struct Coordinator {
    config: CoordinatorConfig,
    /// What each unit offers the coordinated apps: `given` less the
    /// outside load held in `outside`.
    units: Vec<UnitSupply>,
    /// The supply at start (the units' slots).
    configured: Vec<UnitSupply>,
    /// The supply last set ([`Coordinator::set_supply`]).
    given: Vec<UnitSupply>,
    /// CPU time programs outside coordination take, per unit.
    outside: OutsideLoad,
    /// The held outside load moved since the last solve.
    outside_moved: bool,
    /// The supply the targets were last solved with.
    solved_units: Option<Vec<UnitSupply>>,
    /// Demand each app last reported, and the one the targets were solved with.
    apps: BTreeMap<ClientId, (AppDemand, Option<AppDemand>)>,
    /// What the last solve gave each client.
    targets: BTreeMap<ClientId, ClientTargets>,
    membership_changed: bool,
    last_solve: Option<Ns>,
    solves: u64,
    floor: Option<(f64, bool)>,
    /// Per unit, the queue order of the last solve (short-first or not).
    short_first: Vec<bool>,
    /// Why the last solve ran.
    last_cause: Option<SolveCause>,
    /// The fluid-judged pick's warm start.
    warm: Option<WarmStart>,
    /// Re-solves that were warm.
    warm_solves: u64,
    /// Whether the last re-solve was.
    last_warm: bool,
    /// A warm re-solve took in a newcomer: a full pick is owed once the
    /// period has passed.
    full_pick_owed: bool,
    /// The replay-judged pick in progress, if it runs in slices.
    search: Option<Search>,
    /// Updates that computed: slices of a pick, or solves run whole.
    slices: u64,
    /// How many slices the last published pick took.
    last_pick_slices: u64,
}

#[cfg(feature = "solver")]
impl Coordinator {
    pub fn new(config: CoordinatorConfig, units: Vec<UnitSupply>) -> Self {
        // Arrival order until a solve chooses: passing while apps profile
        // changes the models they measure (docs/sim.md, "Short-first
        // queues").
        let short_first = vec![false; units.len()];
        Coordinator {
            config,
            outside: OutsideLoad::new(units.len(), config.outside_load_step),
            outside_moved: false,
            configured: units.clone(),
            given: units.clone(),
            units,
            solved_units: None,
            apps: BTreeMap::new(),
            targets: BTreeMap::new(),
            membership_changed: false,
            last_solve: None,
            solves: 0,
            floor: None,
            short_first,
            last_cause: None,
            warm: None,
            warm_solves: 0,
            last_warm: false,
            full_pick_owed: false,
            search: None,
            slices: 0,
            last_pick_slices: 0,
        }
    }

    /// Records what the monitor measured for `client` (new or updated).
    pub fn set_app(&mut self, client: ClientId, demand: AppDemand) {
        match self.apps.get_mut(&client) {
            Some(entry) => {
                // A new weight (its class or shares changed) is a new
                // problem: re-solved at the next update, as a newcomer is.
                if entry.0.weight != demand.weight {
                    self.membership_changed = true;
                }
                entry.0 = demand;
            }
            None => {
                self.apps.insert(client, (demand, None));
                self.membership_changed = true;
            }
        }
    }

    /// What each unit offers the coordinated apps now
    /// ([`Coordinator::set_supply`] less [`Coordinator::set_outside_load`]).
    pub fn supply(&self) -> &[UnitSupply] {
        &self.units
    }

    /// What the monitor last recorded for `client`.
    pub fn demand(&self, client: ClientId) -> Option<&AppDemand> {
        self.apps.get(&client).map(|entry| &entry.0)
    }

    /// Sets what each unit offers the coordinated apps (its slots less what
    /// apps outside coordination use). A change beyond `model_change`
    /// counts as drift. Ignored unless it has one entry per unit.
    pub fn set_supply(&mut self, units: Vec<UnitSupply>) {
        if units.len() == self.units.len() {
            self.units = self.outside.apply(&units, &self.configured);
            self.given = units;
        }
    }

    /// Records the CPU time programs outside coordination take from unit
    /// `u` (cores, measured and smoothed by the caller), taken out of the
    /// processor-shared units' supply with hysteresis ([`OutsideLoad`]).
    /// When the load the supply is held at moves, the next
    /// [`Coordinator::update`] re-solves, whatever the period. Returns
    /// whether it moved; queues (devices) and units out of range ignore it.
    pub fn set_outside_load(&mut self, u: usize, cores: f64) -> bool {
        if !self.configured.get(u).is_some_and(|s| s.time_shared) {
            return false;
        }
        if !self.outside.observe(u, cores) {
            return false;
        }
        self.units = self.outside.apply(&self.given, &self.configured);
        self.outside_moved = true;
        true
    }

    /// The outside load (cores) unit `u`'s supply is held at.
    pub fn outside_load(&self, u: usize) -> f64 {
        self.outside.held(u)
    }

    /// `client` left (or stopped issuing).
    pub fn remove_app(&mut self, client: ClientId) {
        if self.apps.remove(&client).is_some() {
            self.targets.remove(&client);
            self.membership_changed = true;
        }
    }

    fn drifted(&self) -> bool {
        let tol = self.config.model_change;
        let supply_moved = self.solved_units.as_ref().is_some_and(|old| {
            old.iter()
                .zip(&self.units)
                .any(|(a, b)| (a.slots - b.slots).abs() > tol * a.slots.max(b.slots).max(1e-9))
        });
        supply_moved
            || self.apps.values().any(|(now, solved)| match solved {
                None => true,
                Some(old) => now
                    .exec_ns
                    .iter()
                    .zip(&old.exec_ns)
                    .any(|(a, b)| match (a, b) {
                        (Some(a), Some(b)) => (a - b).abs() > tol * b.abs(),
                        (None, None) => false,
                        _ => true,
                    }),
            })
    }

    /// Re-solves if the set of apps changed or the outside load held
    /// moved, or models drifted and the period has passed. Returns
    /// whether targets were recomputed. On a solver failure the previous
    /// targets stay (and apps without one use plain placement).
    ///
    /// A replay-judged pick in slices (`pick_slice_events`) runs one slice
    /// per call and returns `true` at the call that ends it. Meanwhile the
    /// targets in force stay, but for the best plan the pick replayed so
    /// far where that beats them (`publish_leader`), and apps without any
    /// run on their native unit (`cover_newcomers`); `true` at the calls
    /// that do either. Apps that come or go, or an outside load that moves,
    /// start it again on the new inputs; models that drift wait for it to
    /// end.
    pub fn update(&mut self, now: Ns) -> bool {
        if self.search.is_some() && !self.membership_changed && !self.outside_moved {
            return self.advance_search();
        }
        let due = self
            .last_solve
            .is_none_or(|t| now.saturating_sub(t) >= self.config.resolve_period_ns);
        let cause = if self.membership_changed {
            SolveCause::Membership
        } else if self.outside_moved {
            SolveCause::OutsideLoad
        } else if due && self.drifted() {
            SolveCause::Drift
        } else if due && self.full_pick_owed {
            SolveCause::Deferred
        } else {
            return false;
        };
        self.last_cause = Some(cause);
        self.last_warm = false;
        self.membership_changed = false;
        let outside_moved = std::mem::take(&mut self.outside_moved);
        self.last_solve = Some(now);
        // A pick in progress was for other apps or another supply.
        self.search = None;
        // Only apps with at least one measured unit take part.
        let ids: Vec<ClientId> = self
            .apps
            .iter()
            .filter(|(_, (d, _))| d.fastest_unit().is_some())
            .map(|(c, _)| *c)
            .collect();
        if ids.is_empty() {
            self.targets.clear();
            return true;
        }
        let demands: Vec<AppDemand> = ids.iter().map(|c| self.apps[c].0.clone()).collect();
        if self.config.wait_rounds > 0 && self.config.replay {
            // The targets in force, if they cover exactly these apps.
            let incumbent = (ids.len() == self.targets.len()
                && ids.iter().all(|c| self.targets.contains_key(c)))
            .then(|| Plan {
                fraction: ids
                    .iter()
                    .map(|c| self.targets[c].fraction.clone())
                    .collect(),
                rate: ids.iter().map(|c| self.targets[c].rate).collect(),
                short_first: self.short_first.clone(),
            })
            // Not kept once outside load moved the supply: it was solved
            // for cores that are no longer there, and can hold more than
            // is left.
            .filter(|_| !outside_moved);
            self.search = Some(Search {
                ids,
                demands,
                units: self.units.clone(),
                incumbent,
                journal: Journal::sliced(self.config.pick_slice_events),
            });
            return self.advance_search();
        }
        self.slices += 1;
        self.last_pick_slices = 1;
        let solved = if self.config.wait_rounds > 0 {
            self.solve_fluid(&ids, &demands, now)
        } else {
            solve_targets(
                &demands,
                &self.units,
                self.config.floor_goal,
                self.config.interference_rounds,
                self.config.blocking,
            )
        };
        let Ok(t) = solved else {
            return false;
        };
        let units = self.units.clone();
        self.publish(&ids, &demands, units, t);
        true
    }

    /// Puts `t` in force for `ids`, solved for `demands` on `units`.
    fn publish(
        &mut self,
        ids: &[ClientId],
        demands: &[AppDemand],
        units: Vec<UnitSupply>,
        t: Targets,
    ) {
        self.solves += 1;
        self.solved_units = Some(units);
        self.floor = Some((t.floor, t.floor_feasible));
        self.short_first = t.short_first;
        self.targets.clear();
        for (i, ((c, fraction), rate)) in ids.iter().zip(t.fraction).zip(t.rate).enumerate() {
            let estimate = t
                .native
                .get(i)
                .copied()
                .zip(t.predicted_relative.get(i).copied());
            self.targets.insert(
                *c,
                ClientTargets {
                    fraction,
                    rate,
                    estimate,
                },
            );
            // Models that moved since the pick began are drift it did not see.
            if let (Some(entry), Some(solved)) = (self.apps.get_mut(c), demands.get(i)) {
                entry.1 = Some(solved.clone());
            }
        }
    }

    /// The fluid-judged pick: warm from the last full pick where it may
    /// be (`WarmStart::resolve`), else a full pick.
    fn solve_fluid(
        &mut self,
        ids: &[ClientId],
        demands: &[AppDemand],
        now: Ns,
    ) -> Result<Targets, FairError> {
        let owed = std::mem::take(&mut self.full_pick_owed);
        let warm = self.warm.as_ref().filter(|_| !owed).and_then(|start| {
            start.resolve(&WarmRequest {
                ids,
                demands,
                units: &self.units,
                floor_goal: self.config.floor_goal,
                now,
                period: self.config.full_resolve_period_ns,
            })
        });
        if let Some(w) = warm {
            self.warm = Some(w.next);
            self.warm_solves += 1;
            self.last_warm = true;
            // The newcomer's waits and exclusions are the full pick's to
            // find.
            self.full_pick_owed = w.took_newcomer;
            return Ok(w.targets);
        }
        let (t, shape) = pick_targets_waiting(
            demands,
            &self.units,
            self.config.floor_goal,
            self.config.wait_rounds,
            self.config.exclusion,
        )?;
        self.warm = Some(WarmStart::after_pick(ids, shape, now, demands, &self.units));
        Ok(t)
    }

    /// The fraction of `client`'s tasks each unit should run, if solved.
    pub fn target(&self, client: ClientId) -> Option<&[f64]> {
        self.targets.get(&client).map(|t| t.fraction.as_slice())
    }

    /// The tasks per second `client` should issue at most, if solved.
    pub fn rate(&self, client: ClientId) -> Option<f64> {
        self.targets.get(&client).map(|t| t.rate)
    }

    /// `client`'s native throughput as the last solve estimated it
    /// (tasks/s), and its predicted throughput relative to that: what the
    /// floor is measured against, for status.
    pub fn estimate(&self, client: ClientId) -> Option<(f64, f64)> {
        self.targets.get(&client).and_then(|t| t.estimate)
    }

    /// `(floor, feasible)` of the last solve: what `status` reports.
    pub fn floor(&self) -> Option<(f64, bool)> {
        self.floor
    }

    /// Whether unit `u`'s queue should run short-first (as the last solve
    /// chose; arrival order before any). The unit's agent applies it
    /// ([`crate::policy::UnitPolicy::set_short_first`]).
    pub fn short_first(&self, u: usize) -> bool {
        self.short_first.get(u).copied().unwrap_or(false)
    }

    /// Why the last re-solve ran (`None` before the first).
    pub fn last_cause(&self) -> Option<SolveCause> {
        self.last_cause
    }

    /// How many re-solves were warm ([`warm`]).
    pub fn warm_solves(&self) -> u64 {
        self.warm_solves
    }

    /// Whether the last re-solve was warm.
    pub fn last_solve_warm(&self) -> bool {
        self.last_warm
    }

    /// How many times the allocation was solved.
    pub fn solves(&self) -> u64 {
        self.solves
    }

    /// How many updates computed: slices of a replay-judged pick, or solves
    /// run whole. What one update spends is what one of these costs.
    pub fn slices(&self) -> u64 {
        self.slices
    }

    /// How many slices the last published solve took (1: run whole).
    pub fn last_pick_slices(&self) -> u64 {
        self.last_pick_slices
    }

    /// Whether a pick is in progress (its targets not yet in force).
    pub fn picking(&self) -> bool {
        self.search.is_some()
    }
}
