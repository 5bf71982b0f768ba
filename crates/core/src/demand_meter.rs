//! What the monitor believes about one app's demand, for proportional-fair
//! coordination ([`crate::coordination`]).
//!
//! The monitor times the work it serves itself (emulated devices: the slot
//! time it held at completion), so those figures cannot be lied about. Work
//! an application runs on its own CPU threads is only *reported* by the
//! application, as cumulative counters (calls finished and their total
//! execution time per unit). A client that over-reports its CPU time would
//! look CPU-poor and be given more accelerator time; the meter therefore
//! holds the client's *cumulative* CPU claim to the CPU time its process
//! was measured to consume since it started (the daemon reads it from
//! `/proc`), scales what it learns down when the claim is larger, and
//! remembers that it had to. Cumulative, because a call is reported whole
//! when it ends while the process consumed its time over several report
//! intervals: an honest client's interval can exceed that interval's CPU
//! time, never its whole history's.
//!
//! Cumulative counters make a report idempotent: a lost or repeated report
//! changes nothing, and the meter works on the differences. Counters that go
//! backwards (the client restarted its runtime) start a new baseline.
//! Pure: no I/O or clocks.

use crate::coordination::AppDemand;
use crate::ids::Ns;

/// Weight of a new interval's mean in the running mean: enough smoothing to
/// ride out a noisy interval, fast enough that a phase change shows within
/// a few reports.
const EWMA_WEIGHT: f64 = 0.3;

/// Reports (250 ms apart from hetsched-runtime) whose mean calls in flight
/// count towards an app's native places: a few seconds, so a change in
/// the app's concurrency shows within that.
const PLACES_WINDOW: usize = 20;

/// A mean in flight at most this far above a whole number of places counts
/// as that number. A client that samples its outstanding calls can catch
/// one too many now and then (a result wakes the app, which submits its
/// next call, a moment before the finished one stops counting); rounded
/// up, a mean of 2.02 would give an app of 2 places 3, and the others on
/// its native unit a native estimate a third too low.
const PLACES_ROUNDING_SLACK: f64 = 0.1;

/// Slack allowed when comparing claimed CPU time with measured CPU time:
/// the two are sampled at slightly different instants, and a process's
/// measured time is in clock ticks (10 ms).
const CPU_SLACK_NS: f64 = 20e6;
/// Relative tolerance on the same comparison.
const CPU_TOLERANCE: f64 = 1.10;

/// Where the figures for one unit come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The monitor serves the unit and times the work itself.
    Measured,
    /// The application runs the work and reports it (CPU kinds).
    Reported,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct UnitMeter {
    /// Cumulative (calls, exec ns) at the last observation.
    last: Option<(u64, f64)>,
    /// Running mean exec time per call, ns.
    mean_ns: Option<f64>,
    /// Calls the mean has learned from.
    calls: u64,
}

impl UnitMeter {
    /// Takes cumulative counters; returns the interval's (calls, exec ns).
    fn delta(&mut self, calls: u64, total_ns: f64) -> Option<(u64, f64)> {
        if !total_ns.is_finite() || total_ns < 0.0 {
            return None;
        }
        let before = self.last.replace((calls, total_ns));
        match before {
            Some((c0, t0)) if calls >= c0 && total_ns >= t0 => Some((calls - c0, total_ns - t0)),
            // First report, or counters went backwards: a new baseline whose
            // whole count is the interval.
            _ => Some((calls, total_ns)),
        }
    }

    fn learn(&mut self, calls: u64, exec_ns: f64) {
        if calls == 0 || exec_ns <= 0.0 {
            return;
        }
        self.calls = self.calls.saturating_add(calls);
        let mean = exec_ns / calls as f64;
        self.mean_ns = Some(match self.mean_ns {
            Some(m) => m + EWMA_WEIGHT * (mean - m),
            None => mean,
        });
    }
}

/// One application's demand as the monitor sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct DemandMeter {
    sources: Vec<Source>,
    units: Vec<UnitMeter>,
    in_flight: f64,
    /// The mean calls in flight of the last [`PLACES_WINDOW`] reports,
    /// newest last: their largest, rounded up, is taken for the places
    /// the app keeps natively ([`AppDemand::native_in_flight`]).
    recent_in_flight: std::collections::VecDeque<f64>,
    /// Units the client said it implements (`None`: it never said).
    implemented: Option<Vec<usize>>,
    /// Intervals in which reported CPU time exceeded measured CPU time.
    caught_over_reporting: u64,
}

impl DemandMeter {
    /// `sources[u]`: how unit `u`'s figures are obtained.
    pub fn new(sources: Vec<Source>) -> Self {
        DemandMeter {
            units: vec![UnitMeter::default(); sources.len()],
            sources,
            in_flight: 1.0,
            recent_in_flight: std::collections::VecDeque::new(),
            implemented: None,
            caught_over_reporting: 0,
        }
    }

    /// The monitor's own cumulative figures for a unit it serves.
    pub fn measured(&mut self, unit: usize, calls: u64, total_ns: f64) {
        if self.sources.get(unit) != Some(&Source::Measured) {
            return;
        }
        if let Some((c, t)) = self.units[unit].delta(calls, total_ns) {
            self.units[unit].learn(c, t);
        }
    }

    /// A client's report: cumulative `(unit, calls, exec ns)` for the units
    /// it runs itself, its mean calls in flight, and the CPU time its
    /// process has consumed since it started, as the monitor measured it
    /// (`None` when it could not be read: the claim is then taken as it
    /// is). Entries for units the monitor measures itself are ignored.
    pub fn reported(
        &mut self,
        entries: &[(usize, u64, f64)],
        in_flight: f64,
        process_cpu_ns: Option<f64>,
        max_in_flight: f64,
    ) {
        if in_flight.is_finite() && in_flight > 0.0 {
            self.in_flight = in_flight.clamp(1.0, max_in_flight.max(1.0));
            if self.recent_in_flight.len() == PLACES_WINDOW {
                self.recent_in_flight.pop_front();
            }
            self.recent_in_flight.push_back(self.in_flight);
        }
        let mut intervals = Vec::new();
        for &(unit, calls, total) in entries {
            if self.sources.get(unit) != Some(&Source::Reported) {
                continue;
            }
            if let Some(d) = self.units[unit].delta(calls, total) {
                intervals.push((unit, d));
            }
        }
        // Everything claimed so far on the units the client runs itself.
        let claimed: f64 = (0..self.units.len())
            .filter(|&u| self.sources[u] == Source::Reported)
            .filter_map(|u| self.units[u].last.map(|(_, t)| t))
            .sum();
        let scale = match process_cpu_ns {
            Some(m) if claimed > m.max(0.0) * CPU_TOLERANCE + CPU_SLACK_NS => {
                self.caught_over_reporting += 1;
                m.max(0.0) / claimed
            }
            _ => 1.0,
        };
        for (unit, (c, t)) in intervals {
            self.units[unit].learn(c, t * scale);
        }
    }

    /// The demand for [`crate::coordination::Coordinator::set_app`]: mean
    /// exec per unit where known, no per-call overhead outside the unit (the
    /// monitor's device hold already includes dispatch and copies).
    pub fn demand(&self) -> AppDemand {
        AppDemand {
            exec_ns: self.units.iter().map(|m| m.mean_ns).collect(),
            overhead_ns: vec![0.0; self.units.len()],
            in_flight: self.in_flight,
            weight: 1.0,
            declared_native: None,
            native_trusted: false,
            native_in_flight: self
                .recent_in_flight
                .iter()
                .copied()
                .reduce(f64::max)
                .map(|m| (m - PLACES_ROUNDING_SLACK).ceil().max(1.0)),
            exec_samples: self.units.iter().map(|m| m.calls).collect(),
        }
    }

    /// Whether anything was learned yet.
    pub fn is_known(&self) -> bool {
        self.units.iter().any(|m| m.mean_ns.is_some())
    }

    /// The units the client has implementations for (out-of-range indices
    /// are dropped).
    pub fn set_implemented(&mut self, units: Vec<usize>) {
        let n = self.units.len();
        self.implemented = Some(units.into_iter().filter(|&u| u < n).collect());
    }

    /// Whether every unit the client implements has figures (for a client
    /// that never said what it implements: whether anything is known).
    pub fn is_complete(&self) -> bool {
        match &self.implemented {
            Some(units) => {
                self.is_known() && units.iter().all(|&u| self.units[u].mean_ns.is_some())
            }
            None => self.is_known(),
        }
    }

    /// How many report intervals claimed more CPU time than was consumed.
    pub fn caught_over_reporting(&self) -> u64 {
        self.caught_over_reporting
    }
}

/// How much of each unit (in slots) one app keeps busy, from its
/// cumulative busy time per unit: what the monitor sets aside for apps
/// that are not coordinated, so the coordinated ones share the rest.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UnitUse {
    last: Option<(Ns, Vec<f64>)>,
    slots: Vec<f64>,
}

impl UnitUse {
    /// Cumulative busy time per unit (ns) at `at`; the interval since the
    /// previous observation moves the running mean.
    pub fn observe(&mut self, at: Ns, busy_ns: Vec<f64>) {
        if let Some((t0, b0)) = &self.last
            && at > *t0
            && b0.len() == busy_ns.len()
        {
            let dt = (at - t0) as f64;
            self.slots.resize(busy_ns.len(), 0.0);
            for (u, (b, a)) in busy_ns.iter().zip(b0).enumerate() {
                let used = ((b - a) / dt).max(0.0);
                self.slots[u] += EWMA_WEIGHT * (used - self.slots[u]);
            }
        }
        self.last = Some((at, busy_ns));
    }

    /// Mean slots busy per unit (empty before two observations).
    pub fn slots(&self) -> &[f64] {
        &self.slots
    }
}

/// CPU an application's process uses besides the tasks it runs on the CPU
/// units: its host side (preparing and checking calls, the runtime's
/// threads, emulated devices' host work). It runs on the same cores as the
/// CPU units' tasks, so the coordinator's CPU supply is what is left of the
/// cores after it. Measured as the process's CPU time less the execution
/// time it reported for its CPU tasks, over the interval between two
/// reports (the two counters then cover the same stretch of time).
///
/// A CPU task's reported time is its wall time, which contention stretches
/// beyond the CPU it used: the difference then understates the host side
/// (and is held at 0, never negative), so the supply errs towards what the
/// model assumed before.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostLoad {
    /// At the last report: (instant, process CPU ns, reported CPU task ns).
    last: Option<(Ns, f64, f64)>,
    slots: f64,
}

impl HostLoad {
    /// A report arrived at `at`: the process had used `process_cpu_ns` of
    /// CPU since it started and reported `cpu_task_ns` of CPU tasks in all.
    /// Counters that go backwards start a new baseline.
    pub fn observe(&mut self, at: Ns, process_cpu_ns: f64, cpu_task_ns: f64) {
        if !(process_cpu_ns.is_finite() && cpu_task_ns.is_finite()) {
            return;
        }
        if let Some((t0, p0, e0)) = self.last
            && at > t0
            && process_cpu_ns >= p0
            && cpu_task_ns >= e0
        {
            let dt = (at - t0) as f64;
            let host = ((process_cpu_ns - p0) - (cpu_task_ns - e0)).max(0.0) / dt;
            self.slots += EWMA_WEIGHT * (host - self.slots);
        }
        self.last = Some((at, process_cpu_ns, cpu_task_ns));
    }

    /// Mean cores the host side keeps busy (0 before two reports).
    pub fn slots(&self) -> f64 {
        self.slots
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_load_is_process_cpu_beyond_the_reported_cpu_tasks() {
        let mut h = HostLoad::default();
        h.observe(0, 0.0, 0.0);
        assert_eq!(h.slots(), 0.0);
        // Each 250 ms: 300 ms of process CPU, 200 ms of it in CPU tasks:
        // the host side keeps 0.4 of a core busy.
        for i in 1..=30u64 {
            let t = i as f64;
            h.observe(i * 250_000_000, t * 300e6, t * 200e6);
        }
        assert!((h.slots() - 0.4).abs() < 1e-3, "{}", h.slots());
        // Tasks stretched by contention (more wall than CPU) never make it
        // negative; a restarted process starts a new baseline.
        for i in 31..=60u64 {
            let t = i as f64;
            h.observe(
                i * 250_000_000,
                9000e6 + (t - 30.0) * 100e6,
                6000e6 + (t - 30.0) * 200e6,
            );
        }
        assert!(h.slots() >= 0.0 && h.slots() < 0.01, "{}", h.slots());
        h.observe(61 * 250_000_000, 1e6, 0.0);
        h.observe(62 * 250_000_000, 1e6 + 250e6, 0.0);
        assert!(h.slots() > 0.25, "{}", h.slots());
        // Not a number: ignored.
        let before = h.clone();
        h.observe(63 * 250_000_000, f64::NAN, 0.0);
        assert_eq!(h, before);
    }

    fn meter() -> DemandMeter {
        DemandMeter::new(vec![Source::Reported, Source::Measured])
    }

    #[test]
    fn means_come_from_differences_of_cumulative_counters() {
        let mut m = meter();
        m.measured(1, 10, 10e6);
        m.measured(1, 20, 20e6);
        assert_eq!(m.demand().exec_ns[1], Some(1e6));
        // A repeated report adds nothing.
        m.measured(1, 20, 20e6);
        assert_eq!(m.demand().exec_ns[1], Some(1e6));
    }

    #[test]
    fn a_restarted_counter_is_a_new_baseline() {
        let mut m = meter();
        m.measured(1, 100, 100e6);
        m.measured(1, 5, 10e6);
        let e = m.demand().exec_ns[1].unwrap();
        // 1 ms, then an interval of 2 ms per call.
        assert!((e - (1e6 + EWMA_WEIGHT * 1e6)).abs() < 1.0, "{e}");
    }

    #[test]
    fn honest_cpu_reports_are_taken_as_they_are() {
        let mut m = meter();
        m.reported(&[(0, 10, 50e6)], 2.0, Some(52e6), 8.0);
        assert_eq!(m.demand().exec_ns[0], Some(5e6));
        assert_eq!(m.demand().in_flight, 2.0);
        assert_eq!(m.caught_over_reporting(), 0);
    }

    #[test]
    fn over_reported_cpu_time_is_capped_by_what_the_process_used() {
        let mut m = meter();
        // Claims 10 calls of 50 ms; the process used 100 ms of CPU.
        m.reported(&[(0, 10, 500e6)], 2.0, Some(100e6), 8.0);
        assert_eq!(m.demand().exec_ns[0], Some(10e6));
        assert_eq!(m.caught_over_reporting(), 1);
    }

    #[test]
    fn a_long_call_reported_whole_in_one_interval_is_not_a_lie() {
        let mut m = meter();
        // 100 ms of CPU used so far, 60 ms of it by calls finished.
        m.reported(&[(0, 6, 60e6)], 1.0, Some(100e6), 8.0);
        // A 90 ms call ends: 90 ms claimed in an interval in which the
        // process used 40 ms, but 150 ms in all against 140 ms used.
        m.reported(&[(0, 7, 150e6)], 1.0, Some(140e6), 8.0);
        assert_eq!(m.caught_over_reporting(), 0);
        let e = m.demand().exec_ns[0].unwrap();
        assert!((e - (10e6 + EWMA_WEIGHT * 80e6)).abs() < 1.0, "{e}");
    }

    #[test]
    fn reports_cannot_override_what_the_monitor_measures() {
        let mut m = meter();
        m.measured(1, 10, 10e6);
        m.reported(&[(1, 10, 900e6)], 1.0, None, 8.0);
        assert_eq!(m.demand().exec_ns[1], Some(1e6));
    }

    #[test]
    fn each_units_figure_counts_the_calls_it_learned_from() {
        let mut m = meter();
        assert_eq!(m.demand().exec_samples, vec![0, 0]);
        m.measured(1, 3, 3e6);
        m.measured(1, 10, 10e6);
        // Counters that go backwards start a new baseline, counted whole.
        m.measured(1, 2, 2e6);
        m.reported(&[(0, 5, 5e6)], 1.0, None, 8.0);
        // Nothing learned from an interval without time.
        m.reported(&[(0, 9, 5e6)], 1.0, None, 8.0);
        assert_eq!(m.demand().exec_samples, vec![5, 12]);
    }

    #[test]
    fn in_flight_is_clamped_to_what_the_daemon_allows() {
        let mut m = meter();
        m.reported(&[], 1e9, None, 8.0);
        assert_eq!(m.demand().in_flight, 8.0);
        m.reported(&[], f64::NAN, None, 8.0);
        assert_eq!(m.demand().in_flight, 8.0);
        m.reported(&[], 0.2, None, 8.0);
        assert_eq!(m.demand().in_flight, 1.0);
    }

    #[test]
    fn native_places_are_the_recent_peak_of_the_mean_in_flight_rounded_up() {
        let mut m = meter();
        assert_eq!(m.demand().native_in_flight, None);
        // A closed loop of 2 places whose host side holds one between
        // calls: 1.6–1.9 outstanding on average.
        for mean in [1.9, 1.6, 1.7, 1.8] {
            m.reported(&[], mean, None, 8.0);
        }
        let d = m.demand();
        assert_eq!((d.in_flight, d.native_in_flight), (1.8, Some(2.0)));
        assert_eq!(d.native_places(), 2.0);
        // A lower concurrency shows once the window has passed.
        for _ in 0..PLACES_WINDOW {
            m.reported(&[], 1.0, None, 8.0);
        }
        assert_eq!(m.demand().native_in_flight, Some(1.0));
    }

    #[test]
    fn a_mean_just_above_the_places_is_sampling_noise_not_another_place() {
        let mut m = meter();
        for mean in [2.0, 2.04, 2.01] {
            m.reported(&[], mean, None, 8.0);
        }
        assert_eq!(m.demand().native_in_flight, Some(2.0));
        // Further above, a third place shows.
        m.reported(&[], 2.3, None, 8.0);
        assert_eq!(m.demand().native_in_flight, Some(3.0));
    }

    #[test]
    fn complete_only_once_every_implemented_unit_has_figures() {
        let mut m = meter();
        m.measured(1, 10, 10e6);
        assert!(m.is_complete(), "nothing said about implementations");
        m.set_implemented(vec![0, 1, 9]);
        assert!(!m.is_complete(), "the CPU has no figures yet");
        m.reported(&[(0, 4, 8e6)], 1.0, None, 8.0);
        assert!(m.is_complete());
    }

    #[test]
    fn unit_use_is_busy_time_over_wall_time() {
        let mut u = UnitUse::default();
        u.observe(0, vec![0.0, 0.0]);
        assert!(u.slots().is_empty());
        // 100 ms: unit 0 busy all of it, unit 1 a quarter.
        u.observe(100_000_000, vec![100e6, 25e6]);
        assert_eq!(u.slots(), &[EWMA_WEIGHT, EWMA_WEIGHT * 0.25]);
        // A counter that went backwards counts as idle, not negative.
        u.observe(200_000_000, vec![50e6, 25e6]);
        assert!(u.slots()[0] < EWMA_WEIGHT && u.slots()[0] >= 0.0);
    }

    #[test]
    fn garbage_counters_are_ignored() {
        let mut m = meter();
        m.reported(
            &[(0, 3, f64::NAN), (0, 3, -1.0), (7, 1, 1.0)],
            1.0,
            None,
            8.0,
        );
        assert!(!m.is_known());
    }
}
