//! Who holds the accelerator between decisions: the owner's slot of
//! ticks, the carry of slot time an owner could not use, and the
//! anticipation window.
//!
//! The daemon's credit unit policy and the simulator's Pegasus model both
//! drive this, so the two hold and give up the device by the same rule:
//! - The owner keeps the device while its next call fits in its slot.
//! - A call that does not fit ends the slot; the time left (at most half
//!   a tick) carries to the owner's next turn, as in deficit round robin.
//! - **Work-conserving.** An owner with no call queued keeps its turn for
//!   at most the anticipation window while another domain has calls
//!   queued, counted from when the device is free and someone else waits.
//!   If the owner's next call arrives within it, the owner goes on (its
//!   loop's CPU phase is shorter than a context switch is worth); if not,
//!   the slot ends and the scheduler decides again. The owner is charged
//!   only the device time it used ([`super::BackendScheduler::charge`]),
//!   so giving the slot up costs it nothing in credits.
//! - Under `none` every call is its own decision.

use super::{BackendPolicy, Decision, DomainId};
use crate::Ns;
use std::collections::BTreeMap;

/// Default window a Pegasus policy keeps the device for its owner's next
/// call: long enough for a tightly coupled loop's next call (a CPU phase
/// of up to about half a millisecond, plus the poll that notices it),
/// short against a 10 ms tick. The share policy's is
/// [`crate::policy::SHARE_ANTICIPATION_NS`].
pub const TURN_ANTICIPATION_NS: Ns = 1_000_000;

/// What the caller does next with a free device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Serve the owner's next call.
    Owner(DomainId),
    /// Leave the device to the owner until this instant (it has no call
    /// queued yet); ask again then, or when the owner's call arrives.
    Hold(Ns),
    /// The slot is over: ask the scheduler ([`Turns::start`] its answer).
    Decide,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    domain: DomainId,
    until: Ns,
    /// Since when the device has been free for an owner with no queued
    /// call while another domain waited.
    idle_since: Option<Ns>,
}

#[derive(Clone, Debug)]
pub struct Turns {
    tick_ns: Ns,
    anticipation_ns: Ns,
    fcfs: bool,
    slot: Option<Slot>,
    carry: BTreeMap<DomainId, Ns>,
    /// When each domain's queue last went empty at a completion.
    empty_since: BTreeMap<DomainId, Ns>,
    /// Per domain, a moving average of the gap between its queue going
    /// empty and its next call (each gap counted up to four windows).
    gap_ns: BTreeMap<DomainId, Ns>,
}

impl Turns {
    pub fn new(policy: BackendPolicy, tick_ns: Ns, anticipation_ns: Ns) -> Turns {
        Turns {
            tick_ns: tick_ns.max(1),
            anticipation_ns,
            fcfs: policy == BackendPolicy::None,
            slot: None,
            carry: BTreeMap::new(),
            empty_since: BTreeMap::new(),
            gap_ns: BTreeMap::new(),
        }
    }

    pub fn anticipation_ns(&self) -> Ns {
        self.anticipation_ns
    }

    pub fn set_anticipation_ns(&mut self, ns: Ns) {
        self.anticipation_ns = ns;
    }

    /// The domain holding the device and until when.
    pub fn owner(&self) -> Option<(DomainId, Ns)> {
        self.slot.map(|s| (s.domain, s.until))
    }

    /// A free device at `now`: does the owner go on, hold, or is it time
    /// to decide? `next_call(d)` is the expected length of `d`'s next
    /// queued call (`None` when its queue is empty); `others_waiting`
    /// whether a domain other than the owner has a call queued;
    /// `runs(d)` whether `d`'s CPU side runs now
    /// ([`super::BackendScheduler::cpu_side_runs`]): an owner whose CPU
    /// side is descheduled gets no anticipation, since its next call
    /// cannot come before the CPU scheduler runs it again.
    pub fn keep(
        &mut self,
        now: Ns,
        next_call: impl Fn(DomainId) -> Option<Ns>,
        others_waiting: bool,
        runs: impl Fn(DomainId) -> bool,
    ) -> Keep {
        let Some(slot) = self.slot.as_mut() else {
            return Keep::Decide;
        };
        let d = slot.domain;
        let next = next_call(d);
        if self.fcfs {
            self.slot = None;
            return Keep::Decide;
        }
        if now >= slot.until {
            self.end(now, next.is_some());
            return Keep::Decide;
        }
        match next {
            Some(len) if now.saturating_add(len) <= slot.until => {
                slot.idle_since = None;
                Keep::Owner(d)
            }
            Some(_) => {
                self.end(now, true);
                Keep::Decide
            }
            None if !others_waiting => {
                // Nobody else wants the device: nothing is lost by waiting,
                // and the window has not started.
                slot.idle_since = None;
                Keep::Hold(slot.until)
            }
            None => {
                let since = *slot.idle_since.get_or_insert(now);
                let comes_back = self
                    .gap_ns
                    .get(&d)
                    .is_none_or(|&g| g <= self.anticipation_ns);
                let window = if runs(d) && comes_back {
                    self.anticipation_ns
                } else {
                    0
                };
                let deadline = since.saturating_add(window).min(slot.until);
                if now < deadline {
                    Keep::Hold(deadline)
                } else {
                    self.end(now, false);
                    Keep::Decide
                }
            }
        }
    }

    /// Ends the current slot. An owner that still had calls (its next did
    /// not fit) keeps the time left, up to half a tick, for its next turn:
    /// without the carry, calls that do not divide a slot evenly would
    /// skew shares against domains with few ticks; capped so a slot never
    /// grows by a whole extra call of a tick's length.
    fn end(&mut self, now: Ns, had_calls: bool) {
        if let Some(s) = self.slot.take() {
            let left = if had_calls {
                s.until.saturating_sub(now).min(self.tick_ns / 2)
            } else {
                0
            };
            self.carry.insert(s.domain, left);
        }
    }

    /// Starts the slot the scheduler decided on at `now`.
    pub fn start(&mut self, decision: Decision, now: Ns) {
        let carried = self.carry.remove(&decision.domain).unwrap_or(0);
        self.slot = Some(Slot {
            domain: decision.domain,
            until: now + u64::from(decision.ticks) * self.tick_ns + carried,
            idle_since: None,
        });
    }

    /// A call of `d` completed at `now`; `queue_empty` if it has no other
    /// call queued. With [`Turns::arrived`], this measures how soon a
    /// domain's next call follows its last (its loop's CPU phase): an
    /// owner whose calls usually come later than the window is not waited
    /// for, as in anticipatory disk scheduling.
    pub fn completed(&mut self, d: DomainId, now: Ns, queue_empty: bool) {
        if queue_empty {
            self.empty_since.insert(d, now);
        } else {
            self.empty_since.remove(&d);
        }
    }

    /// A call of `d` arrived at `now`.
    pub fn arrived(&mut self, d: DomainId, now: Ns) {
        if let Some(t) = self.empty_since.remove(&d) {
            let gap = now
                .saturating_sub(t)
                .min(self.anticipation_ns.saturating_mul(4));
            let avg = self.gap_ns.entry(d).or_insert(gap);
            *avg = (*avg * 3 + gap) / 4;
        }
    }

    /// Forgets a domain that left: it holds no slot and no carry.
    pub fn forget(&mut self, d: DomainId) {
        self.empty_since.remove(&d);
        self.gap_ns.remove(&d);
        self.carry.remove(&d);
        if self.slot.is_some_and(|s| s.domain == d) {
            self.slot = None;
        }
    }

    /// When a call held back now could start: the end of the owner's
    /// anticipation window or of its slot. `None` without a slot.
    pub fn retry_at(&self, now: Ns) -> Option<Ns> {
        let s = self.slot?;
        let at = match s.idle_since {
            Some(since) => since.saturating_add(self.anticipation_ns).min(s.until),
            None => s.until,
        };
        Some(at.max(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: Ns = 10_000_000;
    const MS: Ns = 1_000_000;

    fn turns(w: Ns) -> Turns {
        let mut t = Turns::new(BackendPolicy::AccC, TICK, w);
        t.start(
            Decision {
                domain: DomainId(1),
                ticks: 2,
            },
            0,
        );
        t
    }

    #[test]
    fn an_owner_whose_call_comes_within_the_window_keeps_its_turn() {
        let mut t = turns(MS);
        assert_eq!(
            t.keep(0, |_| Some(MS), true, |_| true),
            Keep::Owner(DomainId(1))
        );
        // Its call done, none queued yet, another domain waits: hold.
        assert_eq!(t.keep(MS, |_| None, true, |_| true), Keep::Hold(2 * MS));
        assert_eq!(t.retry_at(MS), Some(2 * MS));
        // Its next call comes half a millisecond later: it goes on.
        let at = MS + MS / 2;
        assert_eq!(
            t.keep(at, |_| Some(MS), true, |_| true),
            Keep::Owner(DomainId(1))
        );
    }

    #[test]
    fn an_owner_gives_the_device_up_when_the_window_passes() {
        let mut t = turns(MS);
        assert_eq!(t.keep(MS, |_| None, true, |_| true), Keep::Hold(2 * MS));
        assert_eq!(t.keep(2 * MS, |_| None, true, |_| true), Keep::Decide);
        assert_eq!(t.owner(), None);
        // It had no call: nothing carries to its next turn.
        t.start(
            Decision {
                domain: DomainId(1),
                ticks: 1,
            },
            5 * MS,
        );
        assert_eq!(t.owner(), Some((DomainId(1), 5 * MS + TICK)));
    }

    #[test]
    fn with_nobody_else_waiting_the_window_does_not_run() {
        let mut t = turns(MS);
        assert_eq!(t.keep(MS, |_| None, false, |_| true), Keep::Hold(2 * TICK));
        assert_eq!(t.keep(5 * MS, |_| None, true, |_| true), Keep::Hold(6 * MS));
    }

    #[test]
    fn an_owner_whose_cpu_side_is_descheduled_gets_no_window() {
        let mut t = turns(MS);
        assert_eq!(t.keep(MS, |_| None, true, |_| false), Keep::Decide);
    }

    #[test]
    fn an_owner_whose_calls_come_late_gets_no_window() {
        let mut t = turns(MS);
        for i in 0..4 {
            t.completed(DomainId(1), i * 10 * MS, true);
            t.arrived(DomainId(1), i * 10 * MS + 3 * MS);
        }
        assert_eq!(t.keep(MS, |_| None, true, |_| true), Keep::Decide);
    }

    #[test]
    fn a_zero_window_decides_at_once_and_fcfs_decides_every_call() {
        let mut t = turns(0);
        assert_eq!(t.keep(MS, |_| None, true, |_| true), Keep::Decide);
        let mut f = Turns::new(BackendPolicy::None, TICK, MS);
        f.start(
            Decision {
                domain: DomainId(1),
                ticks: 1,
            },
            0,
        );
        assert_eq!(f.keep(0, |_| Some(MS), true, |_| true), Keep::Decide);
    }

    #[test]
    fn a_call_that_does_not_fit_ends_the_slot_and_carries_up_to_half_a_tick() {
        let mut t = turns(MS);
        assert_eq!(
            t.keep(12 * MS, |_| Some(9 * MS), true, |_| true),
            Keep::Decide
        );
        t.start(
            Decision {
                domain: DomainId(1),
                ticks: 1,
            },
            20 * MS,
        );
        assert_eq!(t.owner(), Some((DomainId(1), 20 * MS + TICK + TICK / 2)));
    }
}
