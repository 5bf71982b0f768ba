//! "Threads do not bounce": which of a policy's proposed moves to apply.
//!
//! Predictions carry a few per cent of error (SmartBalance reports 4–5 %),
//! and a migration costs cache warmth, so a move is applied only when its
//! predicted gain clears a margin, and a thread that moved recently stays
//! put for a few epochs whatever the policy says. A thread whose current
//! core it may no longer use always moves: correctness before stability.

use super::{Allocation, BalanceInput};
use std::collections::BTreeMap;

/// Relative objective changes this small are rounding, not a loss: a plan
/// that swaps threads the objective cannot tell apart predicts 0.
const OBJECTIVE_ROUNDING: f64 = 1e-9;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hysteresis {
    /// Smallest predicted relative gain (0.05 = 5 %) worth a migration.
    pub min_relative_gain: f64,
    /// Epochs a thread stays on a core after it moved there.
    pub min_epochs_between_moves: u64,
}

impl Default for Hysteresis {
    /// A margin just above the predictor's error, and two epochs' rest.
    fn default() -> Self {
        Hysteresis {
            min_relative_gain: 0.05,
            min_epochs_between_moves: 2,
        }
    }
}

/// When each thread (by id) last moved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HysteresisState {
    pub last_move: BTreeMap<u64, u64>,
}

impl Hysteresis {
    /// Applies the moves of `proposed` whose own predicted relative gain
    /// (`gain[i]` for thread `i`) clears the margin and whose thread has
    /// rested long enough; the others stay on their current core. Records
    /// the moves in `state` and forgets threads no longer in `input`.
    pub fn filter(
        &self,
        input: &BalanceInput,
        proposed: &Allocation,
        gain: &[f64],
        epoch: u64,
        state: &mut HysteresisState,
    ) -> Allocation {
        self.apply(input, proposed, epoch, state, |i| {
            gain.get(i).copied().unwrap_or(0.0) >= self.min_relative_gain
        })
    }

    /// The same with one predicted relative gain for the whole proposal
    /// (what an annealer knows): all of it is worth applying or none, and
    /// recently moved threads still rest.
    pub fn filter_plan(
        &self,
        input: &BalanceInput,
        proposed: &Allocation,
        plan_gain: f64,
        epoch: u64,
        state: &mut HysteresisState,
    ) -> Allocation {
        let worth = plan_gain >= self.min_relative_gain;
        self.apply(input, proposed, epoch, state, |_| worth)
    }

    /// [`filter_plan`](Self::filter_plan) for a policy that ranks plans by
    /// its own measure (Kinship's total kinship), which the objective
    /// model does not share: the plan must clear the margin by that measure
    /// (`plan_gain`) *and* the objective must predict no loss
    /// (`objective_gain ≥ 0`, up to rounding). Kinship's greedy rematch can
    /// raise its total by stacking two CPU-bound threads on one core and
    /// leaving another idle (each newcomer weighs only its own share of
    /// the core, not what it takes from the thread already there), a plan
    /// the objective rightly predicts to be a loss.
    pub fn filter_plan_guarded(
        &self,
        input: &BalanceInput,
        proposed: &Allocation,
        plan_gain: f64,
        objective_gain: f64,
        epoch: u64,
        state: &mut HysteresisState,
    ) -> Allocation {
        let worth = plan_gain >= self.min_relative_gain && objective_gain >= -OBJECTIVE_ROUNDING;
        self.apply(input, proposed, epoch, state, |_| worth)
    }

    fn apply(
        &self,
        input: &BalanceInput,
        proposed: &Allocation,
        epoch: u64,
        state: &mut HysteresisState,
        worth: impl Fn(usize) -> bool,
    ) -> Allocation {
        let mut core_of = Vec::with_capacity(input.threads.len());
        for (i, t) in input.threads.iter().enumerate() {
            let want = proposed.core_of[i];
            let here = t
                .current
                .filter(|&c| c < input.cores.len() && input.may_run(t, c));
            let core = match here {
                None => want,
                Some(h) if h == want => h,
                Some(h) => {
                    let rested = state.last_move.get(&t.id).is_none_or(|&at| {
                        epoch.saturating_sub(at) >= self.min_epochs_between_moves
                    });
                    if rested && worth(i) {
                        state.last_move.insert(t.id, epoch);
                        want
                    } else {
                        h
                    }
                }
            };
            core_of.push(core);
        }
        let live: std::collections::BTreeSet<u64> = input.threads.iter().map(|t| t.id).collect();
        state.last_move.retain(|id, _| live.contains(id));
        Allocation { core_of }
    }
}
