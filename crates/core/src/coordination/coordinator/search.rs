//! The replay-judged pick in slices, on the coordinator's side: the pick
//! in progress, one slice per [`Coordinator::update`], and what goes in
//! force while it runs ([`crate::coordination::slices`]).

use super::*;
use crate::coordination::replayed::Score;

/// A replay-judged pick in progress: what it was asked, frozen at its
/// start, and the answers its slices found so far.
#[derive(Clone, Debug)]
pub(super) struct Search {
    pub(super) ids: Vec<ClientId>,
    pub(super) demands: Vec<AppDemand>,
    pub(super) units: Vec<UnitSupply>,
    pub(super) incumbent: Option<Plan>,
    pub(super) journal: Journal,
}

impl Coordinator {
    /// Runs the next slice of the pick in progress; publishes its targets
    /// if that was the last. Returns whether it did.
    pub(super) fn advance_search(&mut self) -> bool {
        let Some(search) = self.search.as_mut() else {
            return false;
        };
        self.slices += 1;
        let pick = ReplayedPick {
            apps: &search.demands,
            units: &search.units,
            floor_goal: self.config.floor_goal,
            rounds: self.config.wait_rounds,
            exclusion: self.config.exclusion,
            incumbent: search.incumbent.as_ref(),
            budget: JudgeBudget {
                replay_events: self.config.replay_events_per_solve,
            },
        };
        let solved = pick.run(&mut search.journal);
        if search.journal.paused() {
            return self.publish_leader(solved.ok()) || self.cover_newcomers();
        }
        let Some(search) = self.search.take() else {
            return false;
        };
        self.last_pick_slices = search.journal.runs();
        let Ok(t) = solved else {
            return false;
        };
        self.publish(&search.ids, &search.demands, search.units, t);
        true
    }

    /// While a pick runs in slices, the best plan it replayed so far
    /// (`leader`) goes in force for its apps if it holds the floor and
    /// beats the plan in force, as the pick's own figures for that plan
    /// rate it, by [`INCUMBENT_MARGIN`] (or some app has no targets yet).
    /// The pick goes on, and publishes its own choice at its end. Returns
    /// whether the leader went in force.
    fn publish_leader(&mut self, leader: Option<Targets>) -> bool {
        let Some(t) = leader.filter(|t| t.floor_feasible) else {
            return false;
        };
        let Some(search) = self.search.as_ref() else {
            return false;
        };
        let weights = weights_of(&search.demands);
        let in_force: Option<Vec<f64>> = search
            .ids
            .iter()
            .map(|c| Some(self.targets.get(c)?.estimate?.1))
            .collect();
        if let Some(relative) = in_force {
            let leader = Score::of(&t.predicted_relative, &weights);
            let current = Score::of(&relative, &weights);
            if !leader.beats(current, INCUMBENT_MARGIN, weights.iter().sum()) {
                return false;
            }
        }
        for (i, c) in search.ids.iter().enumerate() {
            self.targets.insert(
                *c,
                ClientTargets {
                    fraction: t.fraction[i].clone(),
                    rate: t.rate[i],
                    estimate: t
                        .native
                        .get(i)
                        .copied()
                        .zip(t.predicted_relative.get(i).copied()),
                },
            );
        }
        self.short_first = t.short_first;
        true
    }

    /// While a pick runs in slices, an app it covers that has no targets
    /// yet (it came since the last pick ended) runs on its native unit,
    /// unpaced, from the slice that found the native estimate on: the
    /// plan that holds the floor by construction, rather than plain
    /// placement, which can leave it far below native while the pick takes
    /// its periods. Returns whether any app got targets.
    fn cover_newcomers(&mut self) -> bool {
        let Some(search) = self.search.as_ref() else {
            return false;
        };
        let Some(native) = search.journal.native_estimate() else {
            return false;
        };
        if search.ids.iter().all(|c| self.targets.contains_key(c)) {
            return false;
        }
        let plan = Plan::native(&search.demands, search.units.len(), native);
        for (i, c) in search.ids.iter().enumerate() {
            if !self.targets.contains_key(c) {
                self.targets.insert(
                    *c,
                    ClientTargets {
                        fraction: plan.fraction[i].clone(),
                        rate: plan.rate[i],
                        estimate: native.get(i).map(|n| (*n, 1.0)),
                    },
                );
            }
        }
        true
    }
}
