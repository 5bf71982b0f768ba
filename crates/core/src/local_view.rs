//! What one placement decision sees of each unit: the monitor's pages,
//! corrected by what the client itself has queued that the monitor cannot
//! know yet (pages are up to 10 ms old, and calls waiting in the client's
//! own queues never reached it). The runtime builds its views with these;
//! anything else that places on published views (a simulator strategy,
//! the StarPU policy) can use the same.

use crate::view::{ClientUnitView, MIN_UTILISATION};

/// This process's own load on one unit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OwnLoad {
    /// Calls placed here and waiting in our queue.
    pub waiting: u32,
    /// Calls running (CPU) or at the monitor (devices).
    pub running: u32,
    /// Predicted execution time of all of them, ns.
    pub pending_ns: f64,
}

/// A device unit for a call predicted to run `exec_ns` there: first our
/// own pending calls on the unit must drain (no share lets a call pass its
/// own process's earlier calls), then the call fares as the monitor's view
/// says, with our part taken out of the published wait so it is not
/// counted twice. The result is a plain wait, exact for this `exec_ns`
/// (views are built afresh for every decision).
///
/// Without a prediction (the kind is being profiled) the wait is at least
/// what our own pending calls need.
pub fn device_view(
    published: ClientUnitView,
    own: OwnLoad,
    slots: u32,
    exec_ns: Option<f64>,
) -> ClientUnitView {
    let own_wait = own.pending_ns / f64::from(slots.max(1));
    match exec_ns.filter(|e| e.is_finite() && *e > 0.0) {
        Some(exec) => {
            let others = ClientUnitView {
                wait_ns: (published.wait_ns - own_wait).max(0.0),
                ..published
            };
            let stretched = own_wait + others.stretched_ns(exec);
            ClientUnitView {
                guaranteed: 0.0,
                wait_ns: (stretched - exec).max(0.0),
                max_utilisation: 1.0,
                ..published
            }
        }
        None => ClientUnitView {
            wait_ns: published.wait_ns.max(own_wait),
            ..published
        },
    }
}

/// A CPU kind: CFS shares its `cores` among every runnable thread, so a
/// new call gets `cores / (threads + 1)` of a core, at most a whole one.
/// `runnable` is the CPU agent's count of runnable threads of every
/// process (ours included) at its last scan; our running calls are counted
/// from our own state instead, which is current. Calls waiting in our
/// queue stretch the wait by the number of rounds of our workers they need.
pub fn cpu_view(runnable: u32, cores: u32, own: OwnLoad) -> ClientUnitView {
    let cores = f64::from(cores.max(1));
    // The scan saw our busy workers too; what is left is everybody else
    // (an estimate: our count may have changed since the scan).
    let others = f64::from(runnable.saturating_sub(own.running));
    let share = (cores / (others + f64::from(own.running) + 1.0)).min(1.0);
    let rounds = 1.0 + f64::from(own.waiting) / cores;
    ClientUnitView {
        guaranteed: (share / rounds).max(MIN_UTILISATION),
        wait_ns: f64::INFINITY,
        current_utilisation: 0.0,
        throttled: false,
        max_utilisation: 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_cpu_gives_a_whole_core() {
        let v = cpu_view(0, 2, OwnLoad::default());
        assert_eq!(v.expected_utilisation(1e6), 1.0);
    }

    #[test]
    fn busy_cpu_shares_cores_among_threads() {
        // Three threads of others on two cores, plus the new call: 2/4.
        let v = cpu_view(3, 2, OwnLoad::default());
        assert!((v.expected_utilisation(1e6) - 0.5).abs() < 1e-12);
        // Our own running calls are not counted twice.
        let own = OwnLoad {
            running: 1,
            ..Default::default()
        };
        let v = cpu_view(4, 2, own);
        assert!((v.expected_utilisation(1e6) - 0.4).abs() < 1e-12);
    }

    #[test]
    fn our_queue_stretches_cpu_turnaround() {
        let own = OwnLoad {
            waiting: 4,
            ..Default::default()
        };
        let v = cpu_view(0, 2, own);
        // Two rounds of two workers ahead: a third of the time running.
        assert!((v.expected_utilisation(1e6) - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn device_wait_covers_our_own_pending_calls() {
        let published = ClientUnitView {
            wait_ns: 1e6,
            ..Default::default()
        };
        let own = OwnLoad {
            waiting: 2,
            running: 1,
            pending_ns: 6e6,
        };
        assert_eq!(device_view(published, own, 2, None).wait_ns, 3e6);
        assert_eq!(
            device_view(published, OwnLoad::default(), 2, None).wait_ns,
            1e6
        );
    }

    #[test]
    fn a_guaranteed_share_does_not_hide_our_own_backlog() {
        // Sole client under a share policy: the monitor guarantees the
        // whole unit, but 450 ms of our own calls are ahead of this one.
        let published = ClientUnitView {
            guaranteed: 1.0,
            wait_ns: 0.0,
            ..Default::default()
        };
        let own = OwnLoad {
            waiting: 3,
            running: 0,
            pending_ns: 450e6,
        };
        let v = device_view(published, own, 1, Some(1e6));
        assert!((v.stretched_ns(1e6) - 451e6).abs() < 1.0, "{v:?}");
    }

    #[test]
    fn our_part_of_the_published_wait_is_not_counted_twice() {
        let published = ClientUnitView {
            wait_ns: 5e6,
            ..Default::default()
        };
        let own = OwnLoad {
            waiting: 0,
            running: 1,
            pending_ns: 2e6,
        };
        // 2 ms ours, 3 ms others', then 1 ms of execution.
        let v = device_view(published, own, 1, Some(1e6));
        assert!((v.stretched_ns(1e6) - 6e6).abs() < 1.0, "{v:?}");
    }
}
