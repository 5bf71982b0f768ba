//! A pick spread over coordinator periods
//! ([`super::CoordinatorConfig::pick_slice_events`]).
//!
//! The replay-judged pick ([`super::solve_targets_replayed`]) is a long,
//! deterministic computation: hundreds of replays and a score of solves,
//! 0.6–0.9 s at 128 apps. Run whole, it stalls the coordinator that long.
//! Sliced, each coordinator period runs it again from its start on the
//! same inputs, with a [`Journal`] of the expensive steps' answers (solves,
//! replays, the native estimate, the waits of wait-aware rounds):
//!
//! * a step the journal holds is answered from it, at no cost;
//! * a new step runs and is recorded, until the slice's cost is spent;
//! * from there the run is *paused*: every further step is answered at once
//!   with a stand-in, optional work stops, and what the run returns is
//!   thrown away.
//!
//! Because the computation is a function of its inputs and the answers,
//! the run after the last slice makes the same decisions, step for step, as
//! one run whole: a sliced pick publishes exactly the targets the whole
//! pick would have, a few periods later. Cost is counted in replayed
//! events; a solve is charged by its size ([`SOLVE_EVENTS_PER_CELL`]),
//! measured once against the replay's events.

use super::replay::ReplayOutcome;
use crate::fairness::{FairError, NoLoserSolution};

/// What one solve is charged, in replayed events per app and unit of its
/// program: the barrier method solves the 128 × 9 program in 6.7–7.6 ms,
/// a replay takes about 29 ns an event, so one such solve costs about as
/// much as 250,000 replayed events.
pub const SOLVE_EVENTS_PER_CELL: u64 = 220;

/// What a wait-aware round's waits are charged, in replayed events per
/// app and unit of the program: where a replay saw no wait, a pair's
/// expected wait sums over the unit's other users; at 128 apps × 9 units
/// all of them took about 0.3 ms, some 10,000 events.
pub const WAIT_EVENTS_PER_CELL: u64 = 9;

/// One expensive step's answer.
#[derive(Clone, Debug)]
pub(super) enum Answer {
    Native(Vec<f64>),
    Solve(Result<NoLoserSolution, FairError>),
    Replay(ReplayOutcome),
    /// A wait-aware round's waits, ns, indexed `[app][unit]`.
    Waits(Vec<Vec<f64>>),
}

impl Answer {
    fn solve(&self) -> Option<Result<NoLoserSolution, FairError>> {
        match self {
            Answer::Solve(s) => Some(s.clone()),
            _ => None,
        }
    }

    fn waits(&self) -> Option<Vec<Vec<f64>>> {
        match self {
            Answer::Waits(w) => Some(w.clone()),
            _ => None,
        }
    }
}

/// The answers of a sliced pick's expensive steps, in the order its runs
/// ask for them, and the accounting of the run in progress.
#[derive(Clone, Debug, Default)]
pub struct Journal {
    answers: Vec<Answer>,
    /// Steps asked for in this run so far.
    asked: usize,
    /// Cost of the steps this run computed.
    spent: u64,
    /// The most a run may spend (`None`: no limit, the whole pick).
    slice: Option<u64>,
    paused: bool,
    /// Runs so far.
    runs: u64,
}

impl Journal {
    /// A journal for a pick run whole: nothing pauses.
    pub fn whole() -> Self {
        Journal::default()
    }

    /// A journal for a pick spread over runs of at most `events` each
    /// (0: whole).
    pub fn sliced(events: u64) -> Self {
        Journal {
            slice: (events > 0).then_some(events),
            ..Journal::default()
        }
    }

    /// Starts the next run from the first step.
    pub(super) fn rewind(&mut self) {
        self.asked = 0;
        self.spent = 0;
        self.paused = false;
        self.runs += 1;
    }

    /// Whether runs stop at a slice's end (else the pick runs whole).
    pub fn is_sliced(&self) -> bool {
        self.slice.is_some()
    }

    /// Whether the run in progress stopped at its slice's end: what it
    /// returns is not the pick's.
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Runs started so far (the slices of a sliced pick).
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// The native estimate, once the first step of a pick in slices found
    /// it.
    pub(super) fn native_estimate(&self) -> Option<&[f64]> {
        match self.answers.first() {
            Some(Answer::Native(n)) => Some(n),
            _ => None,
        }
    }

    /// Steps recorded so far (none where the pick runs whole).
    pub fn steps(&self) -> usize {
        self.answers.len()
    }

    /// The next step's answer: from the journal where it holds one, else
    /// `run` (its answer and cost) if the slice has room for `estimate`
    /// more (or nothing ran yet in this run), else `None`, and the run
    /// pauses. `kind` says whether a recorded answer is of the step asked
    /// for: a run that asks for other steps than the one before it is a bug
    /// (the pick must be deterministic); the journal then forgets from there
    /// and pauses, so the next run computes afresh.
    fn answer<T>(
        &mut self,
        estimate: u64,
        run: impl FnOnce() -> (Answer, u64),
        kind: impl Fn(&Answer) -> Option<T>,
    ) -> Option<T> {
        if self.paused {
            return None;
        }
        if let Some(recorded) = self.answers.get(self.asked) {
            if let Some(found) = kind(recorded) {
                self.asked += 1;
                return Some(found);
            }
            self.answers.truncate(self.asked);
            self.paused = true;
            return None;
        }
        if let Some(slice) = self.slice
            && self.spent > 0
            && self.spent.saturating_add(estimate) > slice
        {
            self.paused = true;
            return None;
        }
        let (answer, cost) = run();
        self.spent = self.spent.saturating_add(cost.max(1));
        let found = kind(&answer);
        // A pick run whole never runs again: it keeps no answers (a pick
        // of 32 apps would hold 2 MiB of them).
        if self.is_sliced() {
            self.answers.push(answer);
        }
        self.asked += 1;
        found
    }

    /// A replay: `estimate` events expected.
    pub(super) fn replay(
        &mut self,
        estimate: u64,
        run: impl FnOnce() -> ReplayOutcome,
    ) -> Option<ReplayOutcome> {
        self.answer(
            estimate,
            || {
                let outcome = run();
                let cost = outcome.events;
                (Answer::Replay(outcome), cost)
            },
            |a| match a {
                Answer::Replay(o) => Some(o.clone()),
                _ => None,
            },
        )
    }

    /// A solve of a program of `cells` apps × units.
    pub(super) fn solve(
        &mut self,
        cells: usize,
        run: impl FnOnce() -> Result<NoLoserSolution, FairError>,
    ) -> Option<Result<NoLoserSolution, FairError>> {
        let cost = (cells as u64).saturating_mul(SOLVE_EVENTS_PER_CELL);
        self.answer(cost, || (Answer::Solve(run()), cost), Answer::solve)
    }

    /// The waits a wait-aware round charges a program of `cells` apps ×
    /// units.
    pub(super) fn waits(
        &mut self,
        cells: usize,
        run: impl FnOnce() -> Vec<Vec<f64>>,
    ) -> Option<Vec<Vec<f64>>> {
        let cost = (cells as u64).saturating_mul(WAIT_EVENTS_PER_CELL);
        self.answer(cost, || (Answer::Waits(run()), cost), Answer::waits)
    }

    /// The native estimate: one replay of every app on its native unit,
    /// `estimate` events expected.
    pub(super) fn native(
        &mut self,
        estimate: u64,
        run: impl FnOnce() -> (Vec<f64>, u64),
    ) -> Option<Vec<f64>> {
        self.answer(
            estimate,
            || {
                let (native, cost) = run();
                (Answer::Native(native), cost)
            },
            |a| match a {
                Answer::Native(n) => Some(n.clone()),
                _ => None,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(events: u64) -> ReplayOutcome {
        ReplayOutcome {
            throughput: vec![events as f64],
            wait_ns: vec![vec![None]],
            events,
        }
    }

    #[test]
    fn a_whole_journal_never_pauses() {
        let mut j = Journal::whole();
        for e in [1_000_000, 5_000_000, 9_000_000] {
            assert_eq!(j.replay(e, || outcome(e)).map(|o| o.events), Some(e));
        }
        assert!(!j.paused());
        assert_eq!(j.steps(), 0, "nothing kept");
    }

    #[test]
    fn a_slice_runs_its_first_step_whatever_it_costs_then_stops_at_its_end() {
        let mut j = Journal::sliced(100);
        j.rewind();
        assert!(j.replay(500, || outcome(500)).is_some(), "first step runs");
        let mut ran = false;
        assert!(
            j.replay(10, || {
                ran = true;
                outcome(10)
            })
            .is_none()
        );
        assert!(!ran, "a paused run computes nothing");
        assert!(j.paused());
        // The next run: the first answer comes from the journal, the
        // second runs, a third that would pass the slice waits.
        j.rewind();
        let mut calls = 0;
        let first = j.replay(500, || {
            calls += 1;
            outcome(1)
        });
        assert_eq!(first.map(|o| o.events), Some(500), "recorded, not rerun");
        assert_eq!(calls, 0);
        assert_eq!(j.replay(60, || outcome(60)).map(|o| o.events), Some(60));
        assert!(j.replay(60, || outcome(60)).is_none());
        assert_eq!((j.steps(), j.runs()), (2, 2));
    }

    #[test]
    fn solves_are_charged_by_size() {
        let mut j = Journal::sliced(SOLVE_EVENTS_PER_CELL * 100);
        j.rewind();
        assert!(j.solve(60, || Err(FairError::NoApps)).is_some());
        assert!(
            j.solve(60, || Err(FairError::NoApps)).is_none(),
            "120 cells > 100"
        );
        j.rewind();
        assert!(j.solve(60, || Err(FairError::NoUnits)).is_some());
        assert!(j.solve(30, || Err(FairError::NoApps)).is_some());
        assert!(!j.paused() && j.steps() == 2);
    }

    #[test]
    fn a_run_that_asks_for_another_step_forgets_from_there() {
        let mut j = Journal::sliced(1_000);
        j.rewind();
        assert!(j.replay(10, || outcome(10)).is_some());
        assert!(j.native(10, || (vec![1.0], 10)).is_some());
        j.rewind();
        assert!(j.replay(10, || outcome(10)).is_some());
        // A solve where the journal holds the native estimate.
        assert!(j.solve(1, || Err(FairError::NoApps)).is_none());
        assert!(j.paused());
        assert_eq!(j.steps(), 1);
        j.rewind();
        assert!(j.replay(10, || outcome(10)).is_some());
        assert!(
            j.solve(1, || Err(FairError::NoApps)).is_some(),
            "computed afresh"
        );
    }
}
