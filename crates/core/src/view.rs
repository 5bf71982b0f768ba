//! What agents publish: Rinnegan's global page (per unit) and private page
//! (per client and unit). Plain `Copy` data, so the daemon can place it in
//! shared memory and the simulator can snapshot it every 10 ms.

use serde::{Deserialize, Serialize};

/// Lowest utilisation a view may report. Keeps `exec / utilisation` finite
/// for clients that would get (almost) nothing from a unit.
pub const MIN_UTILISATION: f64 = 1e-4;

/// Global, per unit: what every client may see.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UnitView {
    /// Moving average of the fraction of the unit's capacity in use (0..=1).
    pub busy_fraction: f64,
    /// Moving average of task execution time on this unit, ns.
    pub avg_task_ns: f64,
    /// Clients with work queued or running, or that ran work within the activity window.
    pub active_clients: u32,
    /// Requests waiting to be dispatched.
    pub queued: u32,
    /// Tasks running now.
    pub running: u32,
}

/// Private, per client and unit: what this client can expect from the unit.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientUnitView {
    /// Fraction of the unit's time this client is guaranteed while everyone
    /// wants the unit (its share, normalised among active clients; for a
    /// time-shared CPU, its fair slice). 0 when the policy guarantees nothing.
    pub guaranteed: f64,
    /// Expected time one new task of this client waits before it runs, ns
    /// (work ahead of it in the queue). `f64::INFINITY` when the client
    /// only runs when nobody else wants the unit and somebody does.
    pub wait_ns: f64,
    /// Fraction of the unit's time this client used recently.
    pub current_utilisation: f64,
    /// The policy is holding this client back right now (over its share,
    /// or BACKGROUND while others wait).
    pub throttled: bool,
    /// Most of the unit's time this client may get whatever others do
    /// (Rinnegan's "maximum share allowed"; an administrator cap, or time
    /// taken by work hetsched does not schedule). 1 when uncapped.
    pub max_utilisation: f64,
}

impl Default for ClientUnitView {
    /// An idle unit: no wait, nothing guaranteed because nothing is contended.
    fn default() -> Self {
        ClientUnitView::OPEN
    }
}

impl ClientUnitView {
    /// Nothing guaranteed, no wait, no use, not held back and not capped:
    /// what a policy that never throttles nor caps completes its view with
    /// (`ClientUnitView { guaranteed, wait_ns, current_utilisation,
    /// ..ClientUnitView::OPEN }`).
    pub const OPEN: ClientUnitView = ClientUnitView {
        guaranteed: 0.0,
        wait_ns: 0.0,
        current_utilisation: 0.0,
        throttled: false,
        max_utilisation: 1.0,
    };

    /// Expected utilisation (0..=1] for a task that runs `exec_ns` on the unit:
    /// the fraction of wall time it will actually be running, so that
    /// `turnaround = exec / utilisation` (Rinnegan's `exec × 100 / U`).
    ///
    /// A queue ahead of the task gives `exec / (exec + wait)`; a guaranteed
    /// share bounds it from below (the policy will not let others keep it out).
    #[inline]
    pub fn expected_utilisation(&self, exec_ns: f64) -> f64 {
        let queued = if self.wait_ns.is_finite() {
            let exec = exec_ns.max(1.0);
            exec / (exec + self.wait_ns.max(0.0))
        } else {
            0.0
        };
        queued
            .max(self.guaranteed)
            .min(self.max_utilisation)
            .clamp(MIN_UTILISATION, 1.0)
    }
}

/// `exec / guaranteed`, out of line: inline, the compiler turns the branch
/// into a select and divides for every unit, the queue-bound ones too,
/// putting a division's latency on every placement's path (measured:
/// `placement/decide_8_units` ≈ 8 % faster out of line).
#[inline(never)]
fn share_bound(exec: f64, guaranteed: f64) -> f64 {
    exec / guaranteed
}

impl ClientUnitView {
    /// `exec / expected_utilisation(exec)` (with `exec` at least 1 ns): the wall time a task of
    /// `exec_ns` takes on the unit. Same value, computed without dividing
    /// on the common paths (an uncapped queue, a share), because it runs
    /// for every unit of every placement decision.
    #[inline]
    pub fn stretched_ns(&self, exec_ns: f64) -> f64 {
        let exec = exec_ns.max(1.0);
        // `if wait_ns.is_finite()` in one comparison: a wait of +∞ queues
        // for ever either way (`exec + ∞`), and −∞ and NaN fail it.
        let queued = if self.wait_ns > f64::NEG_INFINITY {
            exec + self.wait_ns.max(0.0)
        } else {
            f64::INFINITY
        };
        // min(queued, exec / guaranteed), dividing only when the share is
        // what bounds the wait.
        let bounded = if self.guaranteed > 0.0 && queued * self.guaranteed > exec {
            share_bound(exec, self.guaranteed)
        } else {
            queued
        };
        let capped = if self.max_utilisation < 1.0 {
            exec / self.max_utilisation.max(MIN_UTILISATION)
        } else {
            exec
        };
        // `bounded.max(capped)`: neither can be NaN (`exec` is at least 1,
        // `guaranteed` and the cap divide only when positive), so a plain
        // comparison gives the same number without `max`'s NaN handling.
        let slower = if bounded > capped { bounded } else { capped };
        clamp_unchecked(slower, exec, exec * (1.0 / MIN_UTILISATION))
    }
}

/// `value.clamp(low, high)` without its check that `low <= high` (true
/// here: `high` is `low × 10⁴` with `low ≥ 1`), which the compiler cannot
/// prove and keeps as a compare and a branch to a panic on every unit of
/// every placement. Same steps as `f64::clamp`, so the same bits.
#[inline(always)]
fn clamp_unchecked(value: f64, low: f64, high: f64) -> f64 {
    let mut v = value;
    if v < low {
        v = low;
    }
    if v > high {
        v = high;
    }
    v
}

/// Work other clients placed on a unit since its views were published:
/// what a view, up to one refresh old, does not show yet. Counting it keeps
/// clients that decide within the same refresh (short-lived programs
/// arriving together, each told the same newcomer view) from all choosing
/// the unit that looked idle.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PlacedSincePublish {
    /// Tasks placed there.
    pub tasks: u32,
    /// Their expected execution time, summed, ns.
    pub expected_ns: f64,
}

impl PlacedSincePublish {
    /// Adds one task of `expected_ns`.
    pub fn add(&mut self, expected_ns: f64) {
        self.tasks += 1;
        self.expected_ns += expected_ns.max(0.0);
    }
}

impl ClientUnitView {
    /// This view with `others` counted, on a unit of `slots` slots. A queue
    /// grows by their work spread over the slots; a time-shared unit's fair
    /// slice is split among that many more tasks (the slice is
    /// `slots / (tasks of others + 1)`, capped at 1, so a capped slice is
    /// read as a full unit: the most the unit could hold without sharing).
    /// A guaranteed share of a share-based unit stays what it is.
    ///
    /// The published part is not aged: a queue seen draining within one
    /// refresh made clients flip between units (measured in
    /// `rinnegan-shares`: 132 placement changes/s against 54, system
    /// speedup 1.77 against 1.98), so a view stays what the agent said
    /// until it says something new.
    pub fn brought_forward(mut self, others: PlacedSincePublish, slots: u32) -> ClientUnitView {
        if others.tasks == 0 {
            return self;
        }
        let slots = f64::from(slots.max(1));
        if self.wait_ns.is_finite() {
            self.wait_ns = self.wait_ns.max(0.0) + others.expected_ns / slots;
        } else if self.guaranteed > 0.0 && self.guaranteed.is_finite() {
            let tasks_now = slots / self.guaranteed;
            self.guaranteed = (slots / (tasks_now + f64::from(others.tasks))).min(1.0);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placed_work_lengthens_a_queue_and_splits_a_fair_slice() {
        let mut placed = PlacedSincePublish::default();
        let idle = ClientUnitView::default();
        assert_eq!(idle.brought_forward(placed, 1), idle);
        placed.add(2e6);
        placed.add(1e6);
        // A queue of one slot: 3 ms more ahead of the next task.
        let q = ClientUnitView {
            wait_ns: 1e6,
            ..Default::default()
        };
        assert_eq!(q.brought_forward(placed, 1).wait_ns, 4e6);
        // Two slots share it.
        assert_eq!(q.brought_forward(placed, 2).wait_ns, 2.5e6);
        // A fair slice of 12 slots with 23 other tasks (12/24) and 2 more: 12/26.
        let ts = ClientUnitView {
            guaranteed: 0.5,
            wait_ns: f64::INFINITY,
            ..Default::default()
        };
        let g = ts.brought_forward(placed, 12).guaranteed;
        assert!((g - 12.0 / 26.0).abs() < 1e-12, "{g}");
        // A queue-less view that guarantees nothing (BACKGROUND) is unchanged.
        let bg = ClientUnitView {
            wait_ns: f64::INFINITY,
            ..Default::default()
        };
        assert_eq!(bg.brought_forward(placed, 1), bg);
        // Placed work only ever makes a unit look slower.
        for v in [idle, q, ts] {
            let after = v.brought_forward(placed, 3);
            assert!(after.stretched_ns(1e6) >= v.stretched_ns(1e6));
        }
    }

    #[test]
    fn stretched_time_matches_exec_over_utilisation() {
        let views = [
            ClientUnitView::default(),
            ClientUnitView {
                wait_ns: 3e6,
                ..Default::default()
            },
            ClientUnitView {
                guaranteed: 0.25,
                wait_ns: 9e6,
                ..Default::default()
            },
            ClientUnitView {
                guaranteed: 0.5,
                wait_ns: f64::INFINITY,
                ..Default::default()
            },
            ClientUnitView {
                wait_ns: 1e5,
                max_utilisation: 0.7,
                ..Default::default()
            },
            ClientUnitView {
                wait_ns: f64::INFINITY,
                ..Default::default()
            },
        ];
        for v in views {
            for exec in [1e3, 1e6, 5e7] {
                let want = exec / v.expected_utilisation(exec);
                let got = v.stretched_ns(exec);
                assert!(
                    (got - want).abs() <= 1e-9 * want,
                    "{v:?} {exec}: {got} vs {want}"
                );
            }
        }
    }

    /// `stretched_ns` as first written (`max` of the two bounds, the share
    /// divided inline): the faster form must give the same bits.
    fn stretched_as_written(v: &ClientUnitView, exec_ns: f64) -> f64 {
        let exec = exec_ns.max(1.0);
        let queued = if v.wait_ns.is_finite() {
            exec + v.wait_ns.max(0.0)
        } else {
            f64::INFINITY
        };
        let bounded = if v.guaranteed > 0.0 && queued * v.guaranteed > exec {
            exec / v.guaranteed
        } else {
            queued
        };
        let capped = if v.max_utilisation < 1.0 {
            exec / v.max_utilisation.max(MIN_UTILISATION)
        } else {
            exec
        };
        bounded
            .max(capped)
            .clamp(exec, exec * (1.0 / MIN_UTILISATION))
    }

    fn awkward() -> impl proptest::strategy::Strategy<Value = f64> {
        use proptest::prelude::*;
        prop_oneof![
            4 => -1e9..1e9f64,
            1 => 0.0..=1.0f64,
            1 => prop_oneof![
                Just(0.0), Just(-0.0), Just(1e-300), Just(1e300), Just(f64::MAX),
                Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(f64::NAN)
            ],
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(5000))]
        #[test]
        fn stretched_time_is_the_formula_as_written(
            guaranteed in awkward(), wait_ns in awkward(), max_utilisation in awkward(), exec in awkward()
        ) {
            let v = ClientUnitView { guaranteed, wait_ns, max_utilisation, ..ClientUnitView::OPEN };
            proptest::prop_assert_eq!(
                v.stretched_ns(exec).to_bits(),
                stretched_as_written(&v, exec).to_bits(),
                "{:?} {}", v, exec
            );
        }
    }

    #[test]
    fn idle_unit_gives_full_utilisation() {
        assert_eq!(ClientUnitView::default().expected_utilisation(1e6), 1.0);
    }

    #[test]
    fn queue_wait_lowers_utilisation() {
        let v = ClientUnitView {
            wait_ns: 3e6,
            ..Default::default()
        };
        assert!((v.expected_utilisation(1e6) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn guarantee_bounds_utilisation_from_below() {
        let v = ClientUnitView {
            guaranteed: 0.5,
            wait_ns: f64::INFINITY,
            ..Default::default()
        };
        assert_eq!(v.expected_utilisation(1e6), 0.5);
        let blocked = ClientUnitView {
            wait_ns: f64::INFINITY,
            ..Default::default()
        };
        assert_eq!(blocked.expected_utilisation(1e6), MIN_UTILISATION);
    }
}
