//! A plan that misses the floor, repaired by replay: the apps below it
//! sent back to their native rows, then the apps crowding their native
//! units. The replay-judged pick repairs its best candidate this way
//! where its walk from the native plan cannot go app by app
//! ([`repair_floor`]).

use super::judge::{Candidate, Judge, Judged};
use super::{Plan, REPLAY_FLOOR_CAP, richest};

/// Steps a repair takes at most, each one replay: a bound, for a repair
/// that keeps raising the floor a little.
const REPAIR_STEPS: usize = 8;

/// Where the walk from the native plan (the last of `plans`) toward the
/// richest plan cannot be afforded app by app ([`Judge::walk_fits`]), the
/// best candidate that misses the floor, repaired ([`repaired`]).
///
/// At 128 apps every candidate of a pick can miss the floor by one or
/// two apps (0.93–0.97) with a replayed sum near 180, where the walk in
/// groups from the native plan runs out of budget at a sum of 5–20: the
/// pick then publishes nearly native placement (docs/sim.md, "The floor's
/// repair at scale": 1.15× on a mix whose picks otherwise reach 4.4×).
/// Below that size the walk fits and this step is not taken; taken there,
/// it held two of the 100 random mixes at a floor the replay saw and the
/// run did not.
pub(super) fn repair_floor(judge: &Judge<'_>, plans: &[Candidate]) -> Option<Candidate> {
    let native_at = plans.len().checked_sub(1)?;
    let (native_plan, _) = &plans[native_at];
    if judge.walk_fits(native_plan, &plans[richest(plans)].0) {
        return None;
    }
    let start = judge.best(&plans[..native_at]);
    let from = plans.get(start).filter(|_| start < native_at)?;
    repaired(judge, (&from.0, &from.1), native_plan)
}

/// `from` repaired toward the floor: each step sends the apps that replay
/// below [`REPLAY_FLOOR_CAP`] back to their rows of `native_plan`
/// (unpaced, as there), and for such an app already there, every app the
/// plan added to its native unit back to its own ([`sent_home`]). A step
/// is kept while it raises the replayed floor. Returns the last plan
/// kept, if any step was (none where `from` holds the floor).
fn repaired(judge: &Judge<'_>, from: (&Plan, &Judged), native_plan: &Plan) -> Option<Candidate> {
    let mut current = from.0.clone();
    let mut current_judged = from.1.clone();
    let mut kept = false;
    for _ in 0..REPAIR_STEPS {
        if current_judged.score.holds_the_floor() || !judge.affordable() {
            break;
        }
        let next = sent_home(judge, &current, &current_judged.relative, native_plan);
        if next == current {
            break;
        }
        let judged = judge.judge(&next);
        if judged.score.floor <= current_judged.score.floor {
            break;
        }
        current = next;
        current_judged = judged;
        kept = true;
    }
    kept.then_some((current, current_judged))
}

/// One step of [`repaired`]: `plan` with every app below the floor (by
/// `relative`) on its row of `native_plan`, or, where it already is, the
/// apps `plan` adds to its native unit on theirs.
fn sent_home(judge: &Judge<'_>, plan: &Plan, relative: &[f64], native_plan: &Plan) -> Plan {
    let mut next = plan.clone();
    let home = |next: &mut Plan, i: usize| {
        next.fraction[i] = native_plan.fraction[i].clone();
        next.rate[i] = native_plan.rate[i];
    };
    for (i, &r) in relative.iter().enumerate() {
        if r >= REPLAY_FLOOR_CAP {
            continue;
        }
        if plan.fraction[i] != native_plan.fraction[i] {
            home(&mut next, i);
            continue;
        }
        let Some(u) = judge.apps[i].native_unit() else {
            continue;
        };
        for j in 0..plan.fraction.len() {
            let adds = plan.fraction[j].get(u).is_some_and(|f| *f > 0.0)
                && plan.fraction[j] != native_plan.fraction[j];
            if adds {
                home(&mut next, j);
            }
        }
    }
    next
}
