//! Following the daemon's proportional-fair targets (`hetsched-pf`,
//! issue 10), the client side of [`hetsched_core::coordination`].
//!
//! When the daemon runs with `coordination = "pf"` it publishes, in this
//! client's private page, the fraction of its calls each unit should run
//! and the call rate the allocation gives it. The scheduler then places a
//! profiled task's calls with a [`DeficitFollower`] over those fractions
//! (instead of its own turnaround prediction) and paces them with a
//! [`Pacer`] at the published rate: the optimum often gives an app less of
//! a contended unit than a closed loop would grab, and without pacing it
//! would take the rest and push the apps the floor protects below native.
//!
//! A thread of the runtime reports, every [`REPORT_EVERY`], what the CPU
//! kinds ran (cumulative counters, which the daemon checks against the
//! CPU time the process consumed) and the mean number of calls in
//! flight; it also places calls the pacer held back when their token is
//! due. A runtime with no targets (the daemon does not coordinate, an
//! embedded monitor, `HETSCHED_COORDINATION=off`) places as before.

use super::{Backend, Queues, Scheduler};
use hetsched_core::coordination::{DeficitFollower, Pacer};
use hetsched_core::ids::Ns;
use hetsched_protocol::UnitDemand;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the runtime tells the daemon what it ran on CPU kinds.
pub(crate) const REPORT_EVERY: Duration = Duration::from_millis(250);

/// How often calls in flight are sampled for their mean.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);

/// The pacer's rate is the published one plus this headroom, so the app
/// is never the reason it falls short of its allocation.
const PACE_HEADROOM: f64 = 0.05;

/// The pacer may bank this many calls per call in flight.
const PACE_BURST: f64 = 2.0;

/// A unit the targets leave out gets one call (a probe) when this runtime
/// has not used it for this long: the daemon solves from what it measured,
/// and an app that only ever follows its targets would never be measured
/// on a unit they leave out (say, because it was solved before the app had
/// run there), so the targets could never change. Time-based, so a
/// fast-calling app probes no more often than a slow one: a probe of a
/// long task on a queue delays everyone behind it. Only units this
/// runtime's own model predicts at least as fast as the targets' fastest
/// are probed: probing a slow unit would cost the app a slow call for
/// nothing the solver would use.
const PROBE_AFTER: Duration = Duration::from_secs(1);

/// Weight of a new sample in the mean of calls in flight.
const IN_FLIGHT_WEIGHT: f64 = 0.05;

/// The follower's state, inside the scheduler's queues (one lock).
#[derive(Debug)]
pub(crate) struct Following {
    follower: DeficitFollower,
    pacer: Pacer,
    /// Fractions read from the private page (scratch).
    fractions: Vec<f64>,
    /// The published rate at the last read, if there were targets.
    rate: Option<f64>,
    /// A call waits for the pacer's next token, due then.
    pub paced_until: Option<Instant>,
    /// Mean calls in flight (accepted, not finished).
    in_flight: f64,
    epoch: Instant,
    /// Calls placed by following targets (probes included).
    pub coordinated_calls: u64,
    /// Per unit, when it last got a call from this runtime.
    last_used: Vec<Instant>,
}

impl Following {
    pub fn new() -> Self {
        Following {
            follower: DeficitFollower::new(),
            pacer: Pacer::new(),
            fractions: Vec::new(),
            rate: None,
            paced_until: None,
            in_flight: 1.0,
            epoch: Instant::now(),
            coordinated_calls: 0,
            last_used: Vec::new(),
        }
    }

    /// Reads this client's targets from its private page; `true` when
    /// there are some to follow.
    pub fn refresh(&mut self, sched: &Scheduler) -> bool {
        let client = sched.link.client();
        self.rate = client
            .private_view()
            .and_then(|p| p.targets_into(&mut self.fractions));
        self.rate.is_some()
    }

    /// Takes the pacer's token for one call, or records when the next is
    /// due and says no.
    pub fn admit(&mut self, now: Instant) -> bool {
        let Some(rate) = self.rate else {
            return true;
        };
        let at = now.saturating_duration_since(self.epoch).as_nanos() as Ns;
        let burst = self.in_flight.max(1.0) * PACE_BURST;
        match self.pacer.take(at, rate * (1.0 + PACE_HEADROOM), burst) {
            Ok(()) => true,
            Err(due) => {
                self.paced_until = Some(self.epoch + Duration::from_nanos(due));
                false
            }
        }
    }

    /// The unit the targets give the next call at `now`, among those
    /// `allowed`; or a unit unused for [`PROBE_AFTER`] that `exec_ns` (this
    /// runtime's prediction per unit) says is no slower than the targets'
    /// fastest (a probe).
    pub fn pick(
        &mut self,
        now: Instant,
        exec_ns: &[f64],
        allowed: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        self.rate?;
        let n = self.fractions.len();
        // Units start "just used": targets are solved from a profiled app.
        self.last_used.resize(n, now);
        let exec = |u: usize| exec_ns.get(u).copied().filter(|e| e.is_finite());
        let targeted_best = (0..n)
            .filter(|&u| self.fractions[u] > 0.0 && allowed(u))
            .filter_map(exec)
            .fold(f64::INFINITY, f64::min);
        let stale = (0..n)
            .filter(|&u| allowed(u) && exec(u).is_some_and(|e| e <= targeted_best))
            .filter(|&u| now.saturating_duration_since(self.last_used[u]) >= PROBE_AFTER)
            .min_by_key(|&u| self.last_used[u]);
        let unit = match stale {
            Some(u) => u,
            None => self.follower.pick(&self.fractions, &allowed)?,
        };
        self.coordinated_calls += 1;
        self.last_used[unit] = now;
        Some(unit)
    }

    fn sample_in_flight(&mut self, outstanding: u64) {
        self.in_flight += IN_FLIGHT_WEIGHT * (outstanding as f64 - self.in_flight);
    }
}

/// Starts the thread that reports demand and wakes paced calls.
pub(crate) fn spawn(sched: &Arc<Scheduler>) -> std::io::Result<JoinHandle<()>> {
    let sched = Arc::clone(sched);
    std::thread::Builder::new()
        .name("hetsched-coord".into())
        .spawn(move || run(&sched))
}

fn run(sched: &Arc<Scheduler>) {
    let mut next_report = Instant::now() + REPORT_EVERY;
    let mut next_sample = Instant::now();
    let mut q = sched.lock();
    loop {
        if q.shutdown {
            return;
        }
        let now = Instant::now();
        let outstanding = sched.outstanding.in_flight();
        let Some(f) = q.follow.as_mut() else {
            return;
        };
        if now >= next_sample {
            f.sample_in_flight(outstanding);
            next_sample = now + SAMPLE_EVERY;
        }
        if f.paced_until.is_some_and(|t| t <= now) {
            f.paced_until = None;
            sched.pump(&mut q);
        }
        if now >= next_report {
            let report = demand_report(sched, &q);
            let in_flight = q.follow.as_ref().map_or(1.0, |f| f.in_flight);
            drop(q);
            // Not answered; an error (a daemon that left) is the link's
            // business, and the next report goes to whoever replaced it.
            let _ = sched.link.client().report_demand(
                report,
                in_flight,
                implemented(sched),
                sched.native_unit,
            );
            next_report = Instant::now() + REPORT_EVERY;
            q = sched.lock();
            continue;
        }
        let mut wake_at = next_report.min(next_sample);
        if let Some(t) = q.follow.as_ref().and_then(|f| f.paced_until) {
            wake_at = wake_at.min(t);
        }
        let wait = wake_at.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            q = sched
                .coord_wake
                .wait_timeout(q, wait)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }
}

/// The monitor's units some task of this runtime implements.
fn implemented(sched: &Scheduler) -> Vec<hetsched_core::ids::UnitId> {
    let mask = sched
        .implemented_any
        .load(std::sync::atomic::Ordering::Relaxed);
    (0..sched.link.units().len().min(64))
        .filter(|&u| mask & (1 << u) != 0)
        .map(|u| sched.units[u].id)
        .collect()
}

/// Cumulative counters of the CPU kinds (the units this process runs
/// itself and the daemon cannot time).
fn demand_report(sched: &Scheduler, q: &Queues) -> Vec<UnitDemand> {
    sched
        .backends
        .iter()
        .enumerate()
        .filter(|(u, b)| matches!(b, Backend::Cpu { .. }) && *u < sched.link.units().len())
        .map(|(u, _)| UnitDemand {
            unit: sched.units[u].id,
            calls: q.units[u].completed,
            exec_ns: q.units[u].exec_ns_total,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_targets_nothing_is_paced_or_picked() {
        let mut f = Following::new();
        assert!(f.admit(Instant::now()));
        assert_eq!(f.pick(Instant::now(), &[0.0; 0], |_| true), None);
        assert_eq!(f.paced_until, None);
    }

    #[test]
    fn targets_are_followed_and_paced() {
        let mut f = Following::new();
        f.rate = Some(100.0);
        f.fractions = vec![0.5, 0.0, 0.5];
        let now = Instant::now();
        let picks: Vec<_> = (0..4)
            .map(|_| f.pick(now, &[0.0; 0], |_| true).unwrap())
            .collect();
        assert_eq!(picks.iter().filter(|&&u| u == 0).count(), 2);
        assert!(!picks.contains(&1));
        assert_eq!(f.coordinated_calls, 4);
        // A burst of 2 tokens (1 call in flight × 2), then the pacer says when.
        let t = f.epoch + Duration::from_secs(1);
        assert!(f.admit(t));
        assert!(f.admit(t));
        assert!(!f.admit(t));
        let due = f.paced_until.expect("a due time");
        // 100/s with 5 % headroom: the next token in about 9.5 ms.
        let gap = due - t;
        assert!(
            gap > Duration::from_millis(8) && gap < Duration::from_millis(11),
            "{gap:?}"
        );
    }

    #[test]
    fn every_allowed_unit_is_probed_now_and_then() {
        let mut f = Following::new();
        f.rate = Some(10.0);
        f.fractions = vec![1.0, 0.0, 0.0];
        // 1000 calls over 5 s: unit 1 has no target but looks as fast as
        // unit 0 and is probed once a second; unit 2 is not allowed.
        let start = Instant::now();
        let exec = [2e6, 1e6, 1e6];
        let mut count = [0; 3];
        for i in 0..1000u64 {
            let now = start + Duration::from_millis(5 * i);
            count[f.pick(now, &exec, |u| u != 2).unwrap()] += 1;
        }
        assert_eq!(count, [996, 4, 0]);
    }

    #[test]
    fn a_unit_slower_than_the_targeted_ones_is_never_probed() {
        let mut f = Following::new();
        f.rate = Some(10.0);
        f.fractions = vec![1.0, 0.0];
        let start = Instant::now();
        let mut count = [0; 2];
        for i in 0..1000u64 {
            let now = start + Duration::from_millis(5 * i);
            count[f.pick(now, &[1e6, 5e6], |_| true).unwrap()] += 1;
        }
        assert_eq!(count, [1000, 0]);
    }

    #[test]
    fn in_flight_mean_tracks_samples() {
        let mut f = Following::new();
        for _ in 0..200 {
            f.sample_in_flight(3);
        }
        assert!((f.in_flight - 3.0).abs() < 0.01, "{}", f.in_flight);
    }
}
