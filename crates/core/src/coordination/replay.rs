//! A discrete-event replay of closed-loop apps on the units, for the
//! coordinator's estimates where the fluid model is too coarse.
//!
//! The fluid model ([`crate::fairness`]) treats a unit as divisible time:
//! an app can slip its tasks into any idle moment, and an app's copies
//! overlap everyone's execution for free. Real queues run one task per slot
//! to completion, in arrival order, so an app with short tasks waits behind
//! other apps' long ones, and a device is idle while the app at its head
//! copies. Those effects decide whether an app ends up above or below its
//! native throughput, and they depend on the order in which tasks meet,
//! which a formula only approximates. The replay plays the apps' task loops
//! out instead: every app keeps `in_flight` tasks going; a task first spends
//! half the app's per-task overhead (dispatch and copy in: it holds the
//! app's place, not the unit), then queues at the unit its
//! [`DeficitFollower`] picks (FIFO on `slots` servers), or runs under
//! processor sharing (`min(1, slots / running)` of a core each), then
//! spends the other half (copy out); the app then issues the next, paced by
//! a [`Pacer`] when a rate is given, as the runtime does.
//!
//! Execution times jitter by ±[`JITTER`] (uniform, seeded): which of two
//! apps reaches a queue first can hinge on a few microseconds, and a replay
//! without jitter locks into one of those races for good, where real
//! tasks, whose times vary, see each outcome in turn.
//!
//! Pure and deterministic: simulated time and a seeded generator. The cost
//! is bounded by an event budget, so the monitor can afford it per solve.

pub mod counted;

use super::{AppDemand, DeficitFollower, Pacer, UnitSupply};
use crate::ids::Ns;
use crate::policy::short_first_key;
use counted::Counted;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BinaryHeap;

/// How long a replay runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReplayBudget {
    /// Events to process (task issues, arrivals and completions) before
    /// stopping, once every app has enough completions…
    pub events: usize,
    /// …at least this many after the warm-up (the first fifth of the
    /// events), unless `4 × events` are spent first.
    pub min_tasks: u64,
}

impl Default for ReplayBudget {
    fn default() -> Self {
        ReplayBudget {
            events: 20_000,
            min_tasks: 30,
        }
    }
}

/// Relative spread of execution times (uniform over ±this).
pub const JITTER: f64 = 0.08;
const SEED: u64 = 0x5eed_4e91_a7c0_0001;

/// Pacing headroom over the published rate, as the runtime's.
pub const PACE_HEADROOM: f64 = 0.05;
/// Pacing burst, in tasks per task in flight, as the runtime's.
pub const PACE_BURST: f64 = 2.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    /// The app may issue a task (a place in flight is free).
    Issue { app: u32 },
    /// A task's first half of overhead is over: it reaches `unit`.
    Arrive { app: u32, unit: u32 },
    /// A task's second half of overhead is over: its place is free.
    Returned { app: u32 },
    /// A queued unit's slot finishes the app's task.
    Done { app: u32, unit: u32 },
    /// The earliest processor-shared task on `unit` may be done (stale
    /// unless `epoch` is the unit's current one).
    Shared { unit: u32, epoch: u64 },
}

/// An event and when it is due: its time in whole ns in the high 64 bits
/// of `key`, the order it was scheduled in the low 64, so that events due
/// at the same ns run first scheduled, first run. One 128-bit comparison
/// orders two of them, where a tuple of the two compared them field by
/// field: the heap's sifting took 40 % of `hetsched sim run` on a
/// 32-application mix (perf, 2026-11-30). A radix heap (the `radix-heap`
/// crate, keys of 128 bits) in place of [`BinaryHeap`] made one replay of
/// `coordination/replay_plan_32x5` twice as slow: 1.36 ms against 0.69.
#[derive(Clone, Copy, Debug)]
struct Due {
    key: u128,
    event: Event,
}

/// Equal as ordered: by `key` alone (every key is unique).
impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Due {}

impl Ord for Due {
    /// Reversed: [`BinaryHeap`] pops its largest, the replay the earliest.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.key.cmp(&self.key)
    }
}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// An app's or a unit's index in an [`Event`], which holds them in 32
/// bits to keep the heap's entries small.
fn compact(index: usize) -> u32 {
    u32::try_from(index).expect("fewer than 2³² apps and units")
}

/// A time of the replay (ns, ≥ 0) to the nearest whole ns, halves up, as
/// `f64::round` gives for times below 2⁵² ns (all but one: 0.5 − 2⁻⁵⁴,
/// which adding a half rounds up to 1) without its library call, 8 % of
/// the same run.
fn nearest_ns(at: f64) -> u64 {
    (at.max(0.0) + 0.5) as u64
}

/// The first whole ns at or after `at` (≥ 0), as `f64::ceil` without its
/// library call.
fn ns_at_or_after(at: f64) -> u64 {
    let whole = at.max(0.0) as u64;
    if (whole as f64) < at {
        whole + 1
    } else {
        whole
    }
}

struct Unit {
    slots: f64,
    /// Queued units: [`Unit::servers_for`] of `slots`, and each one's
    /// speed, so that a task's start computes neither.
    servers: usize,
    server_speed: f64,
    shared: bool,
    /// Queued units: whether short tasks go first
    /// ([`crate::policy::short_first_key`]) rather than in arrival order.
    short_first: bool,
    /// Queued units: tasks waiting (app, arrival time, order key) and
    /// slots busy.
    waiting: Vec<(usize, f64, f64)>,
    busy: usize,
    /// Processor-shared units: (app, work left in ns at full speed,
    /// arrival, execution time).
    running: Vec<(usize, f64, f64, f64)>,
    last: f64,
    epoch: u64,
}

impl Unit {
    fn new(supply: &UnitSupply) -> Unit {
        let slots = supply.slots.max(1e-3);
        let servers = Unit::servers_for(slots);
        Unit {
            slots,
            servers,
            server_speed: slots / servers as f64,
            shared: supply.time_shared,
            short_first: supply.short_first,
            waiting: Vec::new(),
            busy: 0,
            running: Vec::new(),
            last: 0.0,
            epoch: 0,
        }
    }

    /// A queue's servers: `slots` rounded up. A fractional supply (what
    /// apps outside coordination leave of a unit) is served by slower
    /// servers (`slots / servers` each), so the queue's capacity is `slots`.
    fn servers_for(slots: f64) -> usize {
        slots.ceil().max(1.0) as usize
    }

    fn share(&self) -> f64 {
        (self.slots / self.running.len().max(1) as f64).min(1.0)
    }

    fn progress(&mut self, now: f64) {
        let done = (now - self.last) * self.share();
        self.running.iter_mut().for_each(|t| t.1 -= done);
        self.last = now;
    }
}

struct Replay<'a> {
    apps: &'a [AppDemand],
    fraction: &'a [Vec<f64>],
    rate: Option<&'a [f64]>,
    units: Vec<Unit>,
    heap: BinaryHeap<Due>,
    seq: u64,
    follower: Vec<DeficitFollower>,
    /// Per app and unit: whether the app can run there (a measured time).
    usable: Vec<Vec<bool>>,
    pacer: Vec<Pacer>,
    /// Per app and unit: time spent waiting (queued, or slowed by sharing)
    /// and tasks, counted after the warm-up.
    waited: Vec<Vec<(f64, u64)>>,
    counting: bool,
    rng: ChaCha8Rng,
}

impl Replay<'_> {
    fn schedule(&mut self, at: f64, event: Event) {
        self.schedule_ns(nearest_ns(at), event);
    }

    fn schedule_ns(&mut self, at: u64, event: Event) {
        self.seq += 1;
        let key = (u128::from(at) << 64) | u128::from(self.seq);
        self.heap.push(Due { key, event });
    }

    /// One task's execution time: the measured mean, jittered.
    fn draw(&mut self, app: usize, unit: usize) -> f64 {
        let mean = self.exec(app, unit).unwrap_or(1.0);
        mean * (1.0 + JITTER * (2.0 * self.rng.random::<f64>() - 1.0))
    }

    /// A task of `app` finished on `unit` at `now`: its place comes back
    /// after the second half of its overhead.
    fn returning(&mut self, app: usize, unit: usize, now: f64) {
        let back = self.overhead_half(app, unit);
        self.schedule(now + back, Event::Returned { app: compact(app) });
    }

    fn overhead_half(&self, app: usize, unit: usize) -> f64 {
        self.apps[app]
            .overhead_ns
            .get(unit)
            .copied()
            .unwrap_or(0.0)
            .max(0.0)
            / 2.0
    }

    fn exec(&self, app: usize, unit: usize) -> Option<f64> {
        self.apps[app]
            .exec_ns
            .get(unit)
            .copied()
            .flatten()
            .filter(|e| e.is_finite() && *e > 0.0)
    }

    fn issue(&mut self, app: usize, now: f64) {
        if let Some(rate) = self.rate.and_then(|r| r.get(app).copied()) {
            let burst = PACE_BURST * self.apps[app].in_flight.max(1.0);
            let paced = rate * (1.0 + PACE_HEADROOM);
            if let Err(at) = self.pacer[app].take(now as Ns, paced, burst) {
                self.schedule_ns(at, Event::Issue { app: compact(app) });
                return;
            }
        }
        let target = &self.fraction[app];
        let usable = &self.usable[app];
        // No usable unit: the place stays idle (the app cannot run).
        if let Some(unit) = self.follower[app].pick(target, |u| usable.get(u) == Some(&true)) {
            let overhead = self.overhead_half(app, unit);
            self.schedule(
                now + overhead,
                Event::Arrive {
                    app: compact(app),
                    unit: compact(unit),
                },
            );
        }
    }

    fn arrive(&mut self, app: usize, unit: usize, now: f64) {
        if self.units[unit].shared {
            let exec = self.draw(app, unit);
            self.units[unit].progress(now);
            self.units[unit].running.push((app, exec, now, exec));
            self.reschedule_shared(unit, now);
        } else if self.units[unit].busy < self.units[unit].servers {
            let exec = self.draw(app, unit) / self.units[unit].server_speed;
            self.units[unit].busy += 1;
            self.wait(app, unit, 0.0);
            self.schedule(
                now + exec,
                Event::Done {
                    app: compact(app),
                    unit: compact(unit),
                },
            );
        } else {
            let key = if self.units[unit].short_first {
                short_first_key(now, self.exec(app, unit).unwrap_or(0.0))
            } else {
                now
            };
            self.units[unit].waiting.push((app, now, key));
        }
    }

    /// A queued unit's slot is free: start the next waiting task.
    fn next_queued(&mut self, unit: usize, now: f64) {
        self.units[unit].busy -= 1;
        // Smallest key first; the earlier arrival on a tie (the queue is
        // in arrival order and `min_by` keeps the first of equals).
        let next = self.units[unit]
            .waiting
            .iter()
            .enumerate()
            .min_by(|(_, a), (_, b)| a.2.total_cmp(&b.2))
            .map(|(i, _)| i);
        if let Some((app, arrived, _)) = next.map(|i| self.units[unit].waiting.remove(i)) {
            let exec = self.draw(app, unit) / self.units[unit].server_speed;
            self.units[unit].busy += 1;
            self.wait(app, unit, now - arrived);
            self.schedule(
                now + exec,
                Event::Done {
                    app: compact(app),
                    unit: compact(unit),
                },
            );
        }
    }

    fn reschedule_shared(&mut self, unit: usize, now: f64) {
        let u = &mut self.units[unit];
        u.epoch += 1;
        let least = u.running.iter().map(|t| t.1).fold(f64::INFINITY, f64::min);
        if least.is_finite() {
            let at = now + least.max(0.0) / u.share();
            let epoch = u.epoch;
            self.schedule_ns(
                ns_at_or_after(at),
                Event::Shared {
                    unit: compact(unit),
                    epoch,
                },
            );
        }
    }

    fn wait(&mut self, app: usize, unit: usize, ns: f64) {
        if self.counting {
            let w = &mut self.waited[app][unit];
            w.0 += ns.max(0.0);
            w.1 += 1;
        }
    }

    /// Tasks finished on a processor-shared unit, by app.
    fn finish_shared(&mut self, unit: usize, now: f64) -> Vec<usize> {
        let u = &mut self.units[unit];
        u.progress(now);
        // A task within a nanosecond of its end is done (rounding).
        let done: Vec<(usize, f64)> = u
            .running
            .iter()
            .filter(|t| t.1 <= 1.0)
            .map(|t| (t.0, now - t.2 - t.3))
            .collect();
        u.running.retain(|t| t.1 > 1.0);
        self.reschedule_shared(unit, now);
        done.into_iter()
            .map(|(app, waited)| {
                self.wait(app, unit, waited);
                app
            })
            .collect()
    }
}

/// What a replay measured.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayOutcome {
    /// Tasks per second per app.
    pub throughput: Vec<f64>,
    /// Per app and unit, the mean time a task spent at the unit beyond its
    /// own execution (queued, or slowed by processor sharing), ns; `None`
    /// where the app ran nothing there.
    pub wait_ns: Vec<Vec<Option<f64>>>,
    /// Events the replay processed: what it cost.
    pub events: u64,
}

/// Tasks per second each app completes when its tasks go to the units
/// in the proportions of `fraction` (rows per app), paced at `rate` (tasks/s
/// per app, with the runtime's headroom and burst) when given. An app with
/// no usable unit in its row completes nothing.
pub fn replay_throughput(
    apps: &[AppDemand],
    units: &[UnitSupply],
    fraction: &[Vec<f64>],
    rate: Option<&[f64]>,
    budget: ReplayBudget,
) -> Vec<f64> {
    replay(apps, units, fraction, rate, budget).throughput
}

/// [`replay_throughput`] with the waits it saw.
pub fn replay(
    apps: &[AppDemand],
    units: &[UnitSupply],
    fraction: &[Vec<f64>],
    rate: Option<&[f64]>,
    budget: ReplayBudget,
) -> ReplayOutcome {
    let n = apps.len();
    let mut r = Replay {
        apps,
        fraction,
        rate,
        units: units.iter().map(Unit::new).collect(),
        heap: BinaryHeap::new(),
        seq: 0,
        follower: vec![DeficitFollower::new(); n],
        usable: Vec::new(),
        pacer: vec![Pacer::new(); n],
        waited: vec![vec![(0.0, 0); units.len()]; n],
        counting: false,
        rng: ChaCha8Rng::seed_from_u64(SEED),
    };
    r.usable = (0..n)
        .map(|i| {
            let width = fraction.get(i).map_or(0, Vec::len);
            (0..width).map(|u| r.exec(i, u).is_some()).collect()
        })
        .collect();
    for (i, app) in apps.iter().enumerate() {
        if fraction.get(i).is_none() {
            continue;
        }
        for k in 0..(app.in_flight.max(1.0).round() as usize) {
            // Staggered by a nanosecond so equal apps do not move in lockstep.
            r.schedule((i + k) as f64, Event::Issue { app: compact(i) });
        }
    }
    let warm_events = budget.events / 5;
    let mut warm_at: Option<f64> = None;
    let mut completed = vec![Counted::default(); n];
    let active: Vec<bool> = (0..n)
        .map(|i| {
            fraction.get(i).is_some_and(|row| {
                row.iter()
                    .enumerate()
                    .any(|(u, f)| *f > 0.0 && r.exec(i, u).is_some())
            })
        })
        .collect();
    let mut now = 0.0;
    let mut events = 0usize;
    while let Some(Due { key, event }) = r.heap.pop() {
        now = (key >> 64) as u64 as f64;
        events += 1;
        if events == warm_events {
            warm_at = Some(now);
            r.counting = true;
        }
        match event {
            Event::Issue { app } => r.issue(app as usize, now),
            Event::Arrive { app, unit } => r.arrive(app as usize, unit as usize, now),
            Event::Returned { app } => {
                if warm_at.is_some() {
                    completed[app as usize].complete(now);
                }
                r.schedule(now, Event::Issue { app });
            }
            Event::Done { app, unit } => {
                r.next_queued(unit as usize, now);
                r.returning(app as usize, unit as usize, now);
            }
            Event::Shared { unit, epoch } => {
                let unit = unit as usize;
                if epoch == r.units[unit].epoch {
                    for app in r.finish_shared(unit, now) {
                        r.returning(app, unit, now);
                    }
                }
            }
        }
        if events >= budget.events {
            let enough = (0..n).all(|i| !active[i] || completed[i].tasks >= budget.min_tasks);
            if enough || events >= 4 * budget.events {
                break;
            }
        }
    }
    let span = warm_at.map_or(0.0, |w| now - w);
    ReplayOutcome {
        throughput: completed
            .iter()
            .map(|c| c.per_s(span, now, budget.min_tasks))
            .collect(),
        wait_ns: r
            .waited
            .iter()
            .map(|row| {
                row.iter()
                    .map(|&(w, k)| (k > 0).then(|| w / k as f64))
                    .collect()
            })
            .collect(),
        events: events as u64,
    }
}

/// Each app's native throughput by replay: every app on its native unit
/// ([`AppDemand::native_unit`]), unpaced, and every queue in arrival order,
/// as a device runs without hetsched whatever order the units run now.
/// `None` for an app with no measured unit.
pub fn replay_native(
    apps: &[AppDemand],
    units: &[UnitSupply],
    budget: ReplayBudget,
) -> Vec<Option<f64>> {
    let units: Vec<UnitSupply> = units
        .iter()
        .map(|u| UnitSupply {
            short_first: false,
            ..*u
        })
        .collect();
    let units = &units[..];
    let apps: Vec<AppDemand> = apps.iter().map(AppDemand::as_native).collect();
    let apps = &apps[..];
    let fraction: Vec<Vec<f64>> = apps
        .iter()
        .map(|a| {
            let mut row = vec![0.0; units.len()];
            if let Some(u) = a.native_unit().filter(|&u| u < units.len()) {
                row[u] = 1.0;
            }
            row
        })
        .collect();
    let thr = replay_throughput(apps, units, &fraction, None, budget);
    apps.iter()
        .zip(thr)
        .map(|(a, t)| (a.fastest_unit().is_some() && t > 0.0).then_some(t))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The replay's own rounding gives what `f64::round` and
        /// `f64::ceil` give, from 1 ns to about 11 days in ns, at whole
        /// and half ns and between.
        #[test]
        fn whole_ns_as_the_library_rounds_them(
            ns in 1u64..1_000_000_000_000_000,
            frac in 0.0f64..1.0,
            half in proptest::bool::ANY,
        ) {
            let at = ns as f64 + if half { 0.5 } else { frac };
            proptest::prop_assert_eq!(nearest_ns(at), at.round() as u64);
            proptest::prop_assert_eq!(ns_at_or_after(at), at.ceil() as u64);
            let whole = ns as f64;
            proptest::prop_assert_eq!(nearest_ns(whole), ns);
            proptest::prop_assert_eq!(ns_at_or_after(whole), ns);
        }
    }

    fn app(exec: &[Option<f64>], overhead: f64) -> AppDemand {
        AppDemand {
            exec_ns: exec.to_vec(),
            overhead_ns: vec![overhead; exec.len()],
            in_flight: 1.0,
            weight: 1.0,
            declared_native: None,
            native_trusted: false,
            native_in_flight: None,
            exec_samples: Vec::new(),
        }
    }

    fn queue() -> UnitSupply {
        UnitSupply::queue(1.0)
    }

    #[test]
    fn an_app_alone_runs_at_one_task_per_cycle() {
        let thr = replay_native(
            &[app(&[Some(1e6)], 1e6)],
            &[queue()],
            ReplayBudget::default(),
        );
        // 1 ms of overhead + 1 ms of execution per task: 500 tasks/s.
        let t = thr[0].unwrap();
        assert!((t - 500.0).abs() < 1.0, "{t}");
    }

    #[test]
    fn a_fifo_queue_alternates_short_and_long_tasks() {
        // No overhead: each app waits for the other's task, one each per
        // 1.1 ms cycle, so the short-task app gets 1/1.1 ms, not 10×.
        let apps = [app(&[Some(1e5)], 0.0), app(&[Some(1e6)], 0.0)];
        let thr = replay_native(&apps, &[queue()], ReplayBudget::default());
        for t in thr {
            let t = t.unwrap();
            assert!((t - 909.1).abs() < 5.0, "{t}");
        }
    }

    #[test]
    fn short_first_lets_a_short_task_app_pass_queued_long_tasks() {
        // One 0.1 ms app and two 2 ms apps on one queue, no overhead. In
        // arrival order the short app waits for both long tasks every
        // time (1 / 4.1 ms); short-first it waits for the one running
        // (1 / 2.1 ms), and each long app is passed at most once per task.
        let apps = [
            app(&[Some(1e5)], 0.0),
            app(&[Some(2e6)], 0.0),
            app(&[Some(2e6)], 0.0),
        ];
        let all = vec![vec![1.0]; 3];
        let run = |short_first| {
            let unit = UnitSupply {
                short_first,
                ..queue()
            };
            replay_throughput(&apps, &[unit], &all, None, ReplayBudget::default())
        };
        let (arrival, short) = (run(false), run(true));
        assert!((arrival[0] - 1e9 / 4.1e6).abs() < 5.0, "{arrival:?}");
        assert!((short[0] - 1e9 / 2.1e6).abs() < 10.0, "{short:?}");
        for i in 1..3 {
            assert!(short[i] >= 0.95 * arrival[i], "{arrival:?} {short:?}");
        }
        // Natively the devices run in arrival order, whatever they run now.
        let unit = UnitSupply {
            short_first: true,
            ..queue()
        };
        assert_eq!(
            replay_native(&apps, &[unit], ReplayBudget::default()),
            replay_native(&apps, &[queue()], ReplayBudget::default())
        );
    }

    #[test]
    fn waits_are_what_a_task_spends_beyond_its_execution() {
        let apps = [app(&[Some(1e5)], 0.0), app(&[Some(1e6)], 0.0)];
        let out = replay(
            &apps,
            &[queue()],
            &[vec![1.0], vec![1.0]],
            None,
            ReplayBudget::default(),
        );
        // Strict alternation: each waits for the other's whole task.
        let short = out.wait_ns[0][0].unwrap();
        let long = out.wait_ns[1][0].unwrap();
        assert!(
            (short - 1e6).abs() < 1e4 && (long - 1e5).abs() < 1e4,
            "{short} {long}"
        );
        let cpu = UnitSupply::processor_shared(1.0);
        let out = replay(
            &apps[..1],
            &[cpu],
            &[vec![1.0]],
            None,
            ReplayBudget::default(),
        );
        assert!(out.wait_ns[0][0].unwrap() < 10.0);
    }

    #[test]
    fn a_fractional_queue_serves_that_fraction() {
        let tenth = UnitSupply::queue(0.1);
        let thr = replay_native(&[app(&[Some(1e5)], 0.0)], &[tenth], ReplayBudget::default());
        // 0.1 ms tasks on a tenth of a unit: 1000 tasks/s, not 10 000.
        let t = thr[0].unwrap();
        assert!((t - 1000.0).abs() < 20.0, "{t}");
    }

    #[test]
    fn processor_sharing_splits_a_core() {
        let cpu = UnitSupply::processor_shared(1.0);
        let apps = [app(&[Some(1e6)], 0.0), app(&[Some(1e6)], 0.0)];
        let thr = replay_native(&apps, &[cpu], ReplayBudget::default());
        for t in thr {
            let t = t.unwrap();
            assert!((t - 500.0).abs() < 5.0, "{t}");
        }
    }

    #[test]
    fn pacing_caps_an_app_at_its_rate_plus_headroom() {
        let thr = replay_throughput(
            &[app(&[Some(1e5)], 0.0)],
            &[queue()],
            &[vec![1.0]],
            Some(&[1000.0]),
            ReplayBudget::default(),
        );
        assert!((thr[0] - 1050.0).abs() < 15.0, "{}", thr[0]);
    }

    #[test]
    fn fractions_split_an_apps_tasks() {
        let apps = [app(&[Some(1e6), Some(1e6)], 0.0)];
        let two = [queue(), queue()];
        let one = replay_throughput(
            &apps,
            &two,
            &[vec![1.0, 0.0]],
            None,
            ReplayBudget::default(),
        );
        let half = replay_throughput(
            &apps,
            &two,
            &[vec![0.5, 0.5]],
            None,
            ReplayBudget::default(),
        );
        // One task in flight: the split does not add speed, it keeps it.
        assert!((one[0] - 1000.0).abs() < 5.0 && (half[0] - 1000.0).abs() < 5.0);
    }

    #[test]
    fn an_app_without_a_usable_unit_completes_nothing() {
        let apps = [app(&[None], 0.0), app(&[Some(1e6)], 0.0)];
        let thr = replay_native(&apps, &[queue()], ReplayBudget::default());
        assert_eq!(thr[0], None);
        assert!(thr[1].is_some());
    }
}
