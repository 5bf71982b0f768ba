//! What the engine measures during one run, and how it becomes a
//! [`PolicyResult`].

use crate::convergence;
use crate::report::{AppResult, GoalResult, PolicyResult, TimelineSegment, WallClock};
use crate::scenario::Scenario;
use hetsched_core::coordination::replay::counted::Counted;
use hetsched_core::ids::{Ns, UnitId};
use std::collections::BTreeMap;

/// An application as reported: one per long-lived instance (`grep#2`), or
/// one per short-lived app (all its instances together).
#[derive(Clone, Debug, PartialEq)]
pub struct ReportApp {
    pub name: String,
    pub app: usize,
}

impl ReportApp {
    pub fn for_scenario(sc: &Scenario) -> Vec<ReportApp> {
        let mut out = Vec::new();
        for (i, app) in sc.apps.iter().enumerate() {
            if app.short_lived.is_some() || app.copies == 1 {
                out.push(ReportApp {
                    name: app.name.clone(),
                    app: i,
                });
            } else {
                for k in 1..=app.copies {
                    out.push(ReportApp {
                        name: format!("{}#{k}", app.name),
                        app: i,
                    });
                }
            }
        }
        out
    }
}

/// A goal app's periods: its goal, each period's (end, tasks per second),
/// and where its optimizer stood after the last one.
#[derive(Clone, Debug)]
struct GoalLog {
    target: f64,
    periods: Vec<(Ns, f64)>,
    stand: GoalStand,
}

/// Where an app's optimizer stands: CUSTOM shares asked for (0: its
/// starting class) and the fraction of its work it still does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GoalStand {
    pub shares: u32,
    pub work_factor: f64,
}

/// A period meets a throughput goal at this fraction of it (the
/// optimizer's tolerance).
const GOAL_MET: f64 = 0.95;

/// Consecutive tasks on one unit that count as "settled".
pub const SETTLE_RUN: u64 = 10;

/// An app that lives through the whole window and completes fewer tasks
/// than this in it is rated by the spacing of its completions rather than
/// their count ([`Counted::per_s_in_window`]). The count is off by up to a
/// task per place in flight, depending on where the window's edges fall in
/// the app's cycle: at 8 tasks in the window that is an eighth, in its
/// native run and in every policy's alike, so an app could read 0.89×
/// native having run as fast. The coordinator's replay rates its apps so
/// below the same number of completions.
pub const RATE_BY_SPACING_BELOW: u64 = 30;

#[derive(Clone, Debug, Default)]
struct AppStats {
    /// Completions inside the window.
    done: Counted,
    turnaround_sum_ns: f64,
    unit_changes: u64,
    /// Tasks issued before the first run of [`SETTLE_RUN`] tasks on one unit.
    settled_after: Option<u64>,
    run_start: u64,
    issued: u64,
    tasks_per_unit: Vec<u64>,
    busy_ns: Vec<f64>,
    open_segment: Option<TimelineSegment>,
}

/// A task whose result came back: when it was issued and started, where
/// it ran, and the work it carried ([`crate::scenario::App::nominal_work`]).
#[derive(Clone, Copy, Debug)]
pub struct CompletedTask {
    pub issued_at: Ns,
    pub started_at: Ns,
    pub unit: UnitId,
    pub work: f64,
}

/// Counters of one run.
#[derive(Debug)]
pub struct Metrics {
    policy: String,
    apps: Vec<ReportApp>,
    /// Per report app: it runs through the whole window, one instance of
    /// a long-lived app (rated by spacing when it completes few tasks).
    whole_window: Vec<bool>,
    unit_names: Vec<String>,
    stats: Vec<AppStats>,
    window: (Ns, Ns),
    timeline_end: Ns,
    timeline: Vec<TimelineSegment>,
    errors: Vec<f64>,
    /// Apps arriving or leaving mid-run; the logs below are kept only when
    /// there are some.
    events: Vec<convergence::Event>,
    end: Ns,
    app_names: Vec<String>,
    lives: Vec<(Ns, Option<Ns>)>,
    /// Per report app, every task issued: (time, unit).
    issues: Vec<convergence::IssueLog>,
    /// hetsched-pf: (time, largest change of published targets) per re-solve.
    target_changes: Option<Vec<(Ns, f64)>>,
    /// hetsched-pf: wall-clock time of each solve, ns.
    solve_ns: Vec<u64>,
    /// Per report app with a throughput goal: the goal and each period's
    /// (end, tasks per second).
    goal_periods: Vec<Option<GoalLog>>,
}

fn secs(ns: Ns) -> f64 {
    ns as f64 / 1e9
}

impl Metrics {
    pub fn new(sc: &Scenario, apps: Vec<ReportApp>, policy: String) -> Self {
        let units = sc.machine.units.len();
        let end = sc.warmup_ns + sc.duration_ns;
        let lives: Vec<(Ns, Option<Ns>)> =
            sc.apps.iter().map(|a| (a.start_ns, a.stop_ns)).collect();
        let events = convergence::events(&lives, end);
        let logs = if events.is_empty() { 0 } else { apps.len() };
        let whole_window = apps
            .iter()
            .map(|ra| {
                let app = &sc.apps[ra.app];
                app.short_lived.is_none()
                    && app.start_ns <= sc.warmup_ns
                    && app.stop_ns.is_none_or(|stop| stop >= end)
            })
            .collect();
        Metrics {
            whole_window,
            events,
            end,
            app_names: sc.apps.iter().map(|a| a.name.clone()).collect(),
            lives,
            issues: vec![Vec::new(); logs],
            target_changes: None,
            solve_ns: Vec::new(),
            goal_periods: vec![None; apps.len()],
            policy,
            stats: vec![
                AppStats {
                    tasks_per_unit: vec![0; units],
                    busy_ns: vec![0.0; units],
                    ..Default::default()
                };
                apps.len()
            ],
            apps,
            unit_names: sc.machine.units.iter().map(|u| u.name.clone()).collect(),
            window: (sc.warmup_ns, sc.warmup_ns + sc.duration_ns),
            timeline_end: sc.timeline_ns,
            timeline: Vec::new(),
            errors: Vec::new(),
        }
    }

    pub fn report_app_of(&self, app: usize, instance: usize) -> usize {
        let base = self
            .apps
            .iter()
            .position(|r| r.app == app)
            .expect("every app is reported");
        let last = self
            .apps
            .iter()
            .rposition(|r| r.app == app)
            .expect("every app is reported");
        (base + instance).min(last)
    }

    fn in_window(&self, at: Ns) -> bool {
        at >= self.window.0 && at <= self.window.1
    }

    /// A task was issued to `unit`; `changed` when the instance's previous task ran elsewhere.
    pub fn issued(&mut self, app: usize, unit: UnitId, changed: bool, task_index: u64, now: Ns) {
        let in_window = self.in_window(now);
        let s = &mut self.stats[app];
        s.issued = s.issued.max(task_index);
        if changed {
            s.run_start = task_index;
            if in_window {
                s.unit_changes += 1;
            }
        }
        if task_index == 1 {
            s.run_start = 1;
        }
        if s.settled_after.is_none() && task_index + 1 - s.run_start >= SETTLE_RUN {
            s.settled_after = Some(s.run_start - 1);
        }
        if in_window {
            s.tasks_per_unit[unit.index()] += 1;
        }
        if let Some(log) = self.issues.get_mut(app) {
            log.push((now, unit.index() as u16));
        }
    }

    /// hetsched-pf: the coordinator re-solved at `now`; `change` is the
    /// largest total variation distance between any client's old and new
    /// targets (1 for a client that gained or lost its targets).
    pub fn targets_published(&mut self, now: Ns, change: f64) {
        self.target_changes
            .get_or_insert_with(Vec::new)
            .push((now, change));
    }

    /// hetsched-pf: an update of the coordinator computed (a whole solve,
    /// or one slice of a pick), taking `wall_ns` of the host's time.
    pub fn solved(&mut self, wall_ns: u64) {
        self.solve_ns.push(wall_ns);
    }

    /// hetsched-pf runs record target changes even when none happens.
    pub fn coordinated(&mut self) {
        self.target_changes.get_or_insert_with(Vec::new);
    }

    /// An optimizer period of a goal app ended at `now` with `achieved`
    /// tasks per second against `target`.
    pub fn goal_period(
        &mut self,
        app: usize,
        now: Ns,
        achieved: f64,
        target: f64,
        stand: GoalStand,
    ) {
        if self.in_window(now) {
            let log = self.goal_periods[app].get_or_insert_with(|| GoalLog {
                target,
                periods: Vec::new(),
                stand,
            });
            log.periods.push((now, achieved));
            log.stand = stand;
        }
    }

    fn goal_result(&self, app: usize) -> Option<GoalResult> {
        let log = self.goal_periods[app].as_ref()?;
        let (target, periods) = (&log.target, &log.periods);
        let met = |a: f64| a >= target * GOAL_MET;
        let first = periods.iter().position(|&(_, a)| met(a));
        let start = self.lives[self.apps[app].app].0;
        Some(GoalResult {
            target_tasks_per_s: *target,
            periods: periods.len() as u64,
            periods_met: periods.iter().filter(|&&(_, a)| met(a)).count() as u64,
            time_to_goal_s: first.map(|i| secs(periods[i].0.saturating_sub(start))),
            misses_after_goal: first.map_or(0, |i| {
                periods[i..].iter().filter(|&&(_, a)| !met(a)).count() as u64
            }),
            achieved: periods.iter().map(|&(t, a)| (secs(t), a)).collect(),
            last_shares: log.stand.shares,
            last_work_factor: log.stand.work_factor,
        })
    }

    /// `fraction` of `unit`'s capacity was used by `app` from `start` to `end`.
    pub fn busy(&mut self, app: usize, unit: usize, start: Ns, end: Ns, fraction: f64) {
        let (lo, hi) = (start.max(self.window.0), end.min(self.window.1));
        if hi > lo {
            self.stats[app].busy_ns[unit] += (hi - lo) as f64 * fraction;
        }
    }

    /// A task's result is back: it counts as completed at `now`, with the
    /// work it carried (in tasks of the app's mean size).
    pub fn completed(&mut self, app: usize, task: CompletedTask, now: Ns) {
        let CompletedTask {
            issued_at,
            started_at,
            unit,
            work,
        } = task;
        if self.in_window(now) {
            let s = &mut self.stats[app];
            s.done.complete_work(now as f64, work);
            s.turnaround_sum_ns += (now - issued_at) as f64;
        }
        if started_at < self.timeline_end {
            self.extend_timeline(app, unit, started_at, now.min(self.timeline_end));
        }
    }

    fn extend_timeline(&mut self, app: usize, unit: UnitId, start: Ns, end: Ns) {
        let unit_name = &self.unit_names[unit.index()];
        let s = &mut self.stats[app];
        match s.open_segment.as_mut() {
            Some(seg) if &seg.unit == unit_name => seg.end_s = seg.end_s.max(secs(end)),
            _ => {
                if let Some(done) = s.open_segment.take() {
                    self.timeline.push(done);
                }
                s.open_segment = Some(TimelineSegment {
                    app: self.apps[app].name.clone(),
                    unit: unit_name.clone(),
                    start_s: secs(start),
                    end_s: secs(end),
                });
            }
        }
    }

    pub fn prediction_error(&mut self, error: f64) {
        self.errors.push(error);
    }

    /// Closes open timeline segments.
    pub fn finish(&mut self) {
        for s in &mut self.stats {
            if let Some(seg) = s.open_segment.take() {
                self.timeline.push(seg);
            }
        }
        self.timeline
            .sort_by(|a, b| a.app.cmp(&b.app).then(a.start_s.total_cmp(&b.start_s)));
    }

    /// Names of the report apps, in scenario order.
    pub fn app_names(&self) -> Vec<String> {
        self.apps.iter().map(|a| a.name.clone()).collect()
    }

    /// Tasks per second of each report app: its completions in the window
    /// ÷ the window, or for an app that lives through the window and
    /// completes few tasks in it, by their spacing
    /// ([`RATE_BY_SPACING_BELOW`]).
    pub fn tasks_per_s(&self) -> Vec<f64> {
        let span = secs(self.window.1 - self.window.0);
        let (start, end) = (self.window.0 as f64, self.window.1 as f64);
        self.stats
            .iter()
            .zip(&self.whole_window)
            .map(|(s, whole)| {
                if *whole {
                    s.done.per_s_in_window(start, end, RATE_BY_SPACING_BELOW)
                } else {
                    s.done.work / span
                }
            })
            .collect()
    }

    /// Turns the counters into a result, given each app's native tasks/s.
    pub fn into_result(self, native: &[f64], oracle_system_speedup: f64) -> PolicyResult {
        let span = secs(self.window.1 - self.window.0);
        let tps = self.tasks_per_s();
        let mut apps = BTreeMap::new();
        let mut log_sum = 0.0;
        let mut min_relative = f64::INFINITY;
        let mut changes = 0;
        let mut unit_time: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for (i, (ra, s)) in self.apps.iter().zip(&self.stats).enumerate() {
            let relative = if native[i] > 0.0 {
                tps[i] / native[i]
            } else {
                f64::NAN
            };
            log_sum += relative.ln();
            min_relative = min_relative.min(relative);
            changes += s.unit_changes;
            let issued: u64 = s.tasks_per_unit.iter().sum();
            let unit_mix = self
                .unit_names
                .iter()
                .zip(&s.tasks_per_unit)
                .filter(|(_, n)| **n > 0)
                .map(|(u, n)| (u.clone(), *n as f64 / issued.max(1) as f64))
                .collect();
            for (u, busy) in self.unit_names.iter().zip(&s.busy_ns) {
                unit_time
                    .entry(u.clone())
                    .or_default()
                    .insert(ra.name.clone(), busy / (span * 1e9));
            }
            apps.insert(
                ra.name.clone(),
                AppResult {
                    tasks_per_s: tps[i],
                    relative,
                    tasks: s.done.tasks,
                    mean_turnaround_ms: if s.done.tasks > 0 {
                        s.turnaround_sum_ns / s.done.tasks as f64 / 1e6
                    } else {
                        f64::NAN
                    },
                    unit_changes: s.unit_changes,
                    settled_after_tasks: s.settled_after.unwrap_or(s.issued),
                    unit_mix,
                    goal: self.goal_result(i),
                },
            );
        }
        let system_speedup = (log_sum / self.apps.len() as f64).exp();
        let report_apps: Vec<(String, usize)> =
            self.apps.iter().map(|a| (a.name.clone(), a.app)).collect();
        let convergence = convergence::analyse(&convergence::RunLog {
            events: &self.events,
            end: self.end,
            units: self.unit_names.len(),
            app_names: &self.app_names,
            lives: &self.lives,
            report_apps: &report_apps,
            issues: &self.issues,
            target_changes: self.target_changes.as_deref(),
        });
        let max_settle_s = convergence.iter().map(|e| e.max_settle_s).reduce(f64::max);
        let mut solve_ns = self.solve_ns;
        solve_ns.sort_unstable();
        let solve_us = |q: f64| {
            let last = solve_ns.len().checked_sub(1)?;
            let at = ((last as f64) * q).round() as usize;
            Some(WallClock(solve_ns[at] as f64 / 1e3))
        };
        PolicyResult {
            policy: self.policy,
            system_speedup,
            min_relative,
            tasks_per_s: tps.iter().sum(),
            fraction_of_oracle: system_speedup / oracle_system_speedup,
            placement_changes_per_s: changes as f64 / span,
            mean_prediction_error: (!self.errors.is_empty())
                .then(|| self.errors.iter().sum::<f64>() / self.errors.len() as f64),
            apps,
            unit_time,
            convergence,
            max_settle_s,
            coordination_solve_us_p50: solve_us(0.5),
            coordination_solve_us_p99: solve_us(0.99),
            timeline: self.timeline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCENARIO: &str = r#"
name = "spacing"
duration_s = 1
warmup_s = 0.5
policies = ["native"]

[[units]]
name = "cpu"
class = "cpu"
kind = "cpu"

[[apps]]
name = "long"
bytes = { kib = 1 }
exec_ms = { cpu = 450 }

[[apps]]
name = "late"
bytes = { kib = 1 }
start_s = 1.0
exec_ms = { cpu = 450 }
"#;

    /// Both apps complete a task every `every_ms` from `phase` on, each
    /// carrying `work`.
    fn rates_of(phase_ms: f64, every_ms: f64, work: f64) -> Vec<f64> {
        let sc = crate::scenario::parse("spacing", SCENARIO).unwrap();
        let mut m = Metrics::new(&sc, ReportApp::for_scenario(&sc), "native".into());
        for app in 0..2 {
            let mut at = phase_ms;
            while at <= 1600.0 {
                let now = (at * 1e6) as Ns;
                let task = CompletedTask {
                    issued_at: now.saturating_sub((every_ms * 1e6) as Ns),
                    started_at: now,
                    unit: UnitId(0),
                    work,
                };
                m.completed(app, task, now);
                at += every_ms;
            }
        }
        m.tasks_per_s()
    }

    /// Both apps complete a task every 450 ms from `phase` on.
    fn rates(phase_ms: f64) -> Vec<f64> {
        rates_of(phase_ms, 450.0, 1.0)
    }

    #[test]
    fn an_app_is_rated_in_the_work_its_tasks_carry() {
        // One mean-size task's work per 450 ms, as tasks of a third of it
        // every 150 ms or of 1.5 times it every 675 ms: 2.2 per second,
        // where counting tasks would read about 6.7 and 1.5.
        for (every, work) in [(150.0, 1.0 / 3.0), (675.0, 1.5)] {
            for phase in [0.0, 100.0] {
                let got = rates_of(phase, every, work)[0];
                assert!(
                    (got - 1.0 / 0.45).abs() < 1e-9,
                    "{work} every {every} ms from {phase}: {got}"
                );
            }
        }
    }

    #[test]
    fn only_a_task_of_varying_size_carries_other_than_one_task_of_work() {
        let sc = crate::scenario::parse("spacing", SCENARIO).unwrap();
        assert_eq!(sc.apps[0].nominal_work(1024), 1.0);
        let varying = SCENARIO.replacen(
            "bytes = { kib = 1 }",
            "bytes = { min_kib = 1, max_kib = 3 }",
            1,
        );
        let sc = crate::scenario::parse("spacing", &varying).unwrap();
        let app = &sc.apps[0];
        let fixed = app.fixed_fraction;
        assert_eq!(app.nominal_work(2048), 1.0);
        assert!((app.nominal_work(1024) - (fixed + (1.0 - fixed) * 0.5)).abs() < 1e-12);
        assert!((app.nominal_work(3072) - (fixed + (1.0 - fixed) * 1.5)).abs() < 1e-12);
        let exec = |kib: u64| app.exec_ns(UnitId(0), kib * 1024).unwrap();
        assert!((exec(3) / exec(2) - app.nominal_work(3072)).abs() < 1e-12);
    }

    #[test]
    fn an_app_of_few_tasks_through_the_window_is_rated_by_their_spacing() {
        // The 1 s window from 0.5 s holds 2 or 3 completions depending on
        // the phase (2 or 3 tasks/s counted); the spacing gives 1/0.45 s.
        for phase in [0.0, 100.0, 300.0, 449.0] {
            let got = rates(phase)[0];
            assert!((got - 1.0 / 0.45).abs() < 1e-9, "phase {phase}: {got}");
        }
    }

    #[test]
    fn an_app_that_arrives_inside_the_window_is_counted() {
        // "late" starts at 1 s: its completions in the window over its length.
        for phase in [0.0, 100.0, 300.0] {
            let sc = crate::scenario::parse("spacing", SCENARIO).unwrap();
            let window = (sc.warmup_ns, sc.warmup_ns + sc.duration_ns);
            let counted = (0..)
                .map(|k| phase + 450.0 * k as f64)
                .take_while(|t| *t <= 1600.0)
                .map(|t| (t * 1e6) as Ns)
                .filter(|t| *t >= window.0 && *t <= window.1)
                .count();
            assert_eq!(rates(phase)[1], counted as f64, "phase {phase}");
        }
    }
}
