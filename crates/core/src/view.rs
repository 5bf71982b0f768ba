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
        ClientUnitView {
            guaranteed: 0.0,
            wait_ns: 0.0,
            current_utilisation: 0.0,
            throttled: false,
            max_utilisation: 1.0,
        }
    }
}

impl ClientUnitView {
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

impl ClientUnitView {
    /// `exec / expected_utilisation(exec)` (with `exec` at least 1 ns): the wall time a task of
    /// `exec_ns` takes on the unit. Same value, computed without dividing
    /// on the common paths (an uncapped queue, a share), because it runs
    /// for every unit of every placement decision.
    #[inline]
    pub fn stretched_ns(&self, exec_ns: f64) -> f64 {
        let exec = exec_ns.max(1.0);
        let queued = if self.wait_ns.is_finite() {
            exec + self.wait_ns.max(0.0)
        } else {
            f64::INFINITY
        };
        // min(queued, exec / guaranteed), dividing only when the share is
        // what bounds the wait.
        let bounded = if self.guaranteed > 0.0 && queued * self.guaranteed > exec {
            exec / self.guaranteed
        } else {
            queued
        };
        let capped = if self.max_utilisation < 1.0 {
            exec / self.max_utilisation.max(MIN_UTILISATION)
        } else {
            exec
        };
        bounded
            .max(capped)
            .clamp(exec, exec * (1.0 / MIN_UTILISATION))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
