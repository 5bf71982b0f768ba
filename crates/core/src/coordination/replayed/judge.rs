//! The judge of a replay-judged pick: every plan played out
//! ([`crate::replay`]) and scored floor first, then sum, its expensive
//! steps answered through the pick's [`Journal`], within the budget.

use super::{JudgeBudget, Plan, REPLAY_FLOOR_CAP, REPLAY_FLOOR_TIE, SWITCH_RATE_STEPS};
use crate::coordination::replay::{ReplayBudget, ReplayOutcome, replay};
use crate::coordination::slices::Journal;
use crate::coordination::solve::solve_round_after;
use crate::coordination::{
    AppDemand, FairError, FairProblem, LinearLimit, Targets, UnitSupply, expected_wait_ns,
    weights_of,
};
use crate::fairness::{NoLoserSolution, solve_no_loser_weighted};
use std::cell::{Cell, RefCell};

/// The events the native estimate's replay is charged, and a replay
/// is expected to cost before one was measured: a replay's cap.
pub(super) const NATIVE_REPLAY_EVENTS: u64 = 80_000;

/// How a candidate replays, compared floor first, then sum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(in crate::coordination) struct Score {
    /// The lowest app's throughput relative to native, up to
    /// `REPLAY_FLOOR_CAP`.
    pub(in crate::coordination) floor: f64,
    /// Σ wᵢ ln rᵢ over the apps.
    pub(in crate::coordination) log_sum: f64,
}

impl Score {
    /// The score of apps at `relative` × native, weighed by `weights`.
    pub(in crate::coordination) fn of(relative: &[f64], weights: &[f64]) -> Score {
        Score {
            floor: relative
                .iter()
                .copied()
                .fold(f64::INFINITY, f64::min)
                .min(REPLAY_FLOOR_CAP),
            log_sum: relative
                .iter()
                .zip(weights)
                .map(|(r, w)| w * r.max(1e-12).ln())
                .sum(),
        }
    }

    /// Whether this score beats `other` by `margin` (floor first, then
    /// sum; the sum's margin per unit of `total_weight`).
    pub(in crate::coordination) fn beats(
        self,
        other: Score,
        margin: f64,
        total_weight: f64,
    ) -> bool {
        self.floor > other.floor + REPLAY_FLOOR_TIE + margin
            || (self.floor >= other.floor - REPLAY_FLOOR_TIE
                && self.log_sum > other.log_sum + margin * total_weight)
    }

    /// Whether the floor counts as held (the native plan's, within the
    /// tie).
    pub(in crate::coordination) fn holds_the_floor(self) -> bool {
        self.floor >= REPLAY_FLOOR_CAP - REPLAY_FLOOR_TIE
    }
}

/// A candidate's replay: its score, `r_i`, waits.
#[derive(Clone)]
pub(super) struct Judged {
    pub(super) score: Score,
    pub(super) relative: Vec<f64>,
    pub(super) outcome: ReplayOutcome,
}

/// A plan and its replay.
pub(super) type Candidate = (Plan, Judged);

pub(super) struct Judge<'a> {
    pub(super) apps: &'a [AppDemand],
    pub(super) units: &'a [UnitSupply],
    pub(super) native: &'a [f64],
    pub(super) weights: Vec<f64>,
    pub(super) budget: JudgeBudget,
    /// Replayed events so far, and the last replay's.
    pub(super) spent: Cell<u64>,
    pub(super) last: Cell<u64>,
    /// The answers of the pick's solves and replays so far (all of them
    /// when the pick runs whole; [`super::slices`]).
    pub(super) journal: RefCell<&'a mut Journal>,
    /// The best plan replayed so far, floor first, then sum: what a pick
    /// in slices may publish before it ends ([`ReplayedPick::run`]); kept
    /// only for a pick in slices.
    pub(super) leader: RefCell<Option<Candidate>>,
}

impl<'a> Judge<'a> {
    /// Judges plans for `apps` on `units` against `native` (tasks/s),
    /// within `budget`.
    pub(super) fn new(
        apps: &'a [AppDemand],
        units: &'a [UnitSupply],
        native: &'a [f64],
        budget: JudgeBudget,
        journal: &'a mut Journal,
    ) -> Self {
        Judge {
            apps,
            units,
            native,
            weights: weights_of(apps),
            budget,
            spent: Cell::new(0),
            last: Cell::new(0),
            journal: RefCell::new(journal),
            leader: RefCell::new(None),
        }
    }

    /// Whether an optional candidate may still be judged (not once a
    /// sliced pick paused: nothing it finds from there counts).
    pub(super) fn affordable(&self) -> bool {
        self.spent.get() < self.budget.replay_events && !self.paused()
    }

    /// Whether a sliced pick paused: from there nothing counts, and the
    /// run should end as soon as it can.
    pub(super) fn paused(&self) -> bool {
        self.journal.borrow().paused()
    }

    /// The no-loser program `p` solved without extra limits, or
    /// [`FairError::Paused`] once a sliced pick paused.
    pub(super) fn solve(
        &self,
        p: &FairProblem,
        floor_goal: f64,
    ) -> Result<NoLoserSolution, FairError> {
        self.solve_with(p, floor_goal, &Vec::new)
    }

    /// [`Judge::solve`] with the limits computed only where the solve
    /// runs (not where the journal answers it).
    pub(super) fn solve_with(
        &self,
        p: &FairProblem,
        floor_goal: f64,
        limits: &dyn Fn() -> Vec<LinearLimit>,
    ) -> Result<NoLoserSolution, FairError> {
        self.journaled_solve(p, || {
            solve_no_loser_weighted(p, floor_goal, &limits(), &self.weights)
        })
    }

    /// The next wait-aware round's program `p`, warm from the round
    /// before it ([`solve_round_after`]): the floor program skipped where
    /// the barrier method solves programs of `p`'s size and `before` held
    /// the goal, else cold. One journal step either way;
    /// [`FairError::Paused`] once a sliced pick paused.
    pub(super) fn solve_after(
        &self,
        p: &FairProblem,
        floor_goal: f64,
        before: &NoLoserSolution,
    ) -> Result<NoLoserSolution, FairError> {
        self.journaled_solve(p, || {
            solve_round_after(p, floor_goal, &self.weights, before)
        })
    }

    /// `run`, a solve of `p`, as one journal step: charged by `p`'s size,
    /// [`FairError::Paused`] once a sliced pick paused.
    fn journaled_solve(
        &self,
        p: &FairProblem,
        run: impl FnOnce() -> Result<NoLoserSolution, FairError>,
    ) -> Result<NoLoserSolution, FairError> {
        self.journal
            .borrow_mut()
            .solve(p.apps() * p.units(), run)
            .unwrap_or(Err(FairError::Paused))
    }

    /// The waits a wait-aware round charges `base`'s pairs after a round
    /// that solved `allocation` and replayed `judged`: what the replay saw,
    /// else the expected wait ([`expected_wait_ns`]); 0 where an app has
    /// no rate. `None` once a sliced pick paused.
    pub(super) fn waits(
        &self,
        base: &FairProblem,
        judged: &Judged,
        allocation: &[Vec<f64>],
    ) -> Option<Vec<Vec<f64>>> {
        self.journal
            .borrow_mut()
            .waits(base.apps() * base.units(), || {
                (0..base.apps())
                    .map(|i| {
                        (0..base.units())
                            .map(|u| {
                                if base.rate[i][u] > 0.0 {
                                    judged.outcome.wait_ns[i][u].unwrap_or_else(|| {
                                        expected_wait_ns(base, self.units, allocation, i, u)
                                    })
                                } else {
                                    0.0
                                }
                            })
                            .collect()
                    })
                    .collect()
            })
    }

    /// About how many plans `events` replayed events judge.
    pub(super) fn plans_within(&self, events: u64) -> u64 {
        events.div_ceil(self.last.get().max(1))
    }

    /// Whether the budget left can replay every option of an app-by-app
    /// walk ([`toward`]) from `from` to `to`: one per rate step and one per
    /// usable unit, for every app whose row differs.
    pub(super) fn walk_fits(&self, from: &Plan, to: &Plan) -> bool {
        let options: u64 = (0..to.fraction.len())
            .filter(|&i| from.fraction[i] != to.fraction[i])
            .map(|i| {
                let units = self.apps[i].exec_ns.iter().flatten().count();
                (SWITCH_RATE_STEPS.len() + units) as u64
            })
            .sum();
        options <= self.plans_left()
    }

    /// About how many more plans the budget can judge.
    pub(super) fn plans_left(&self) -> u64 {
        self.plans_within(self.budget.replay_events.saturating_sub(self.spent.get()))
    }

    pub(super) fn judge(&self, plan: &Plan) -> Judged {
        let units: Vec<UnitSupply> = self
            .units
            .iter()
            .enumerate()
            .map(|(u, s)| UnitSupply {
                short_first: s.short_first && plan.short_first.get(u).copied().unwrap_or(false),
                ..*s
            })
            .collect();
        // Until a replay was measured, expect one at its cap.
        let expected = match self.last.get() {
            0 => NATIVE_REPLAY_EVENTS,
            last => last,
        };
        let outcome = self
            .journal
            .borrow_mut()
            .replay(expected, || {
                replay(
                    self.apps,
                    &units,
                    &plan.fraction,
                    Some(&plan.rate),
                    ReplayBudget::default(),
                )
            })
            // Paused: a stand-in that completes nothing, at no cost.
            .unwrap_or_else(|| ReplayOutcome {
                throughput: vec![0.0; self.apps.len()],
                wait_ns: vec![vec![None; self.units.len()]; self.apps.len()],
                events: 0,
            });
        // A stand-in's cost is no replay's.
        if !self.paused() {
            self.spent
                .set(self.spent.get().saturating_add(outcome.events));
            self.last.set(outcome.events);
        }
        let relative: Vec<f64> = outcome
            .throughput
            .iter()
            .zip(self.native)
            .map(|(t, n)| t / n.max(1e-9))
            .collect();
        let judged = Judged {
            score: Score::of(&relative, &self.weights),
            relative,
            outcome,
        };
        // Only a pick in slices publishes its leader: a whole pick keeps
        // no copies.
        if !self.paused() && self.journal.borrow().is_sliced() {
            let mut leader = self.leader.borrow_mut();
            if leader
                .as_ref()
                .is_none_or(|l| self.beats(judged.score, l.1.score, 0.0))
            {
                *leader = Some((plan.clone(), judged.clone()));
            }
        }
        judged
    }

    /// The best plan replayed so far as targets, if any was.
    pub(super) fn leader_targets(&self) -> Option<Targets> {
        let leader = self.leader.borrow();
        let (plan, judged) = leader.as_ref()?;
        Some(Targets {
            fraction: plan.fraction.clone(),
            rate: plan.rate.clone(),
            short_first: plan.short_first.clone(),
            native: self.native.to_vec(),
            floor: judged.score.floor,
            floor_feasible: judged.score.holds_the_floor(),
            predicted_relative: judged.relative.clone(),
        })
    }

    /// The index of the best of `plans`: the largest sum among the plans
    /// whose floor is within the tie of the highest floor (the first of
    /// equals). Anchored to the highest floor, not compared pair by pair:
    /// a chain of plans each within the tie of the one before could
    /// otherwise end a whole tie or more below the best floor (found by
    /// `replayed_targets_keep_the_native_floor`: 0.976 against the native
    /// plan's 0.99).
    pub(super) fn best(&self, plans: &[Candidate]) -> usize {
        let top = plans
            .iter()
            .map(|p| p.1.score.floor)
            .fold(f64::NEG_INFINITY, f64::max);
        (0..plans.len())
            .filter(|&i| plans[i].1.score.floor >= top - REPLAY_FLOOR_TIE)
            .reduce(|a, b| {
                if plans[b].1.score.log_sum > plans[a].1.score.log_sum {
                    b
                } else {
                    a
                }
            })
            .unwrap_or(0)
    }

    /// Whether score `a` beats `b` by `margin` (floor first, then sum).
    pub(super) fn beats(&self, a: Score, b: Score, margin: f64) -> bool {
        a.beats(b, margin, self.weights.iter().sum())
    }
}
