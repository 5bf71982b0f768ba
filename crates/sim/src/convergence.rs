//! How long placement takes to settle after an app arrives or leaves (issue
//! 10's stability requirement: "converge within 1 s of simulated time after
//! an app arrives or leaves").
//!
//! Definition (documented in `docs/sim.md`, "Metrics"). An *event* is an
//! app's `start_s` (> 0) or `stop_s` (before the run ends). Its interval
//! runs from the event to the next later event, or to the end of the run.
//! For each report app alive for the whole interval:
//!
//! - the *reference* is the fraction of the app's tasks issued to each unit
//!   over the interval's last [`REFERENCE_NS`] (or the whole interval when
//!   shorter): where its placement ended up;
//! - a *window* starting at `a` covers the tasks the app issued in
//!   `[a, a + w)`, `w` = the larger of [`WINDOW_NS`] and the time the app
//!   takes to issue [`WINDOW_TASKS`] tasks at its reference rate, at most
//!   the reference span; window starts step by [`STEP_NS`] from the event
//!   to the last start whose window ends inside the interval;
//! - a window is *within tolerance* when the total variation distance
//!   between its fractions and the reference (½ Σᵤ |fᵤ − refᵤ|, the share of
//!   its tasks that would have to move) is at most [`TOLERANCE`], or it holds
//!   no task (a paced or blocked app placed nothing to judge);
//! - `settle_s` = the start of the first window from which every later
//!   window is within tolerance, less the event time. An app that is never
//!   within tolerance to the end gets the whole interval and is listed in
//!   `unsettled`. An app with fewer than [`WINDOW_TASKS`] tasks in the
//!   reference span is not judged (too few tasks to tell).
//!
//! At least ten tasks per window keeps an app with 25–60 ms tasks (16–40
//! tasks/s, windows of 0.25–0.6 s) from being judged noisy forever by
//! quantisation alone: one task of ten elsewhere is a distance of 0.1.

use crate::report::ConvergenceEvent;
use hetsched_core::ids::Ns;
use std::collections::BTreeMap;

/// Shortest window over which placement fractions are measured.
pub const WINDOW_NS: Ns = 200_000_000;
/// Tasks a window covers at least (at the app's reference rate).
pub const WINDOW_TASKS: f64 = 10.0;
/// Span, before the next event, whose fractions are the reference.
pub const REFERENCE_NS: Ns = 1_000_000_000;
/// Step between window starts.
pub const STEP_NS: Ns = 10_000_000;
/// Largest total variation distance from the reference that counts as settled.
pub const TOLERANCE: f64 = 0.15;
/// Published target fractions that move by more than this (total
/// variation, any app) count as a change of targets.
pub const TARGET_CHANGE: f64 = 0.01;

/// An app arriving or leaving.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub at: Ns,
    pub arrive: bool,
    /// Scenario app index.
    pub app: usize,
}

/// Per report app, every task it issued: (time, unit index), in time order.
pub type IssueLog = Vec<(Ns, u16)>;

fn secs(ns: Ns) -> f64 {
    ns as f64 / 1e9
}

/// Fractions of the tasks in `log[lo..hi]` per unit.
fn fractions(log: &[(Ns, u16)], units: usize) -> Vec<f64> {
    let mut f = vec![0.0; units];
    for (_, u) in log {
        f[*u as usize] += 1.0;
    }
    let n = log.len().max(1) as f64;
    f.iter_mut().for_each(|x| *x /= n);
    f
}

/// ½ Σ |a − b|.
pub fn total_variation(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>() / 2.0
}

/// Tasks of `log` issued in `[from, to)`.
fn slice(log: &[(Ns, u16)], from: Ns, to: Ns) -> &[(Ns, u16)] {
    let lo = log.partition_point(|(t, _)| *t < from);
    let hi = log.partition_point(|(t, _)| *t < to);
    &log[lo..hi]
}

/// Settling time of one app over `[start, end)`, in ns after `start`, and
/// whether it settled; `None` when it issued too few tasks to judge.
pub fn settle_ns(log: &[(Ns, u16)], units: usize, start: Ns, end: Ns) -> Option<(Ns, bool)> {
    let ref_from = end.saturating_sub(REFERENCE_NS).max(start);
    let reference = slice(log, ref_from, end);
    if (reference.len() as f64) < WINDOW_TASKS {
        return None;
    }
    let ref_span = end - ref_from;
    let rate = reference.len() as f64 / ref_span as f64;
    let window = ((WINDOW_TASKS / rate).ceil() as Ns)
        .max(WINDOW_NS)
        .min(ref_span);
    let target = fractions(reference, units);
    // Walk window starts backwards: the settle point is just after the
    // last window out of tolerance.
    let last_start = end - window;
    let mut a = start + (last_start - start) / STEP_NS * STEP_NS;
    loop {
        let w = slice(log, a, a + window);
        if !w.is_empty() && total_variation(&fractions(w, units), &target) > TOLERANCE + 1e-9 {
            let settled_at = a + STEP_NS;
            return Some(if settled_at > last_start {
                (end - start, false)
            } else {
                (settled_at - start, true)
            });
        }
        if a == start {
            return Some((0, true));
        }
        a -= STEP_NS;
    }
}

/// The events of a run: every app's start after 0 and stop before `end`.
pub fn events(starts_stops: &[(Ns, Option<Ns>)], end: Ns) -> Vec<Event> {
    let mut out = Vec::new();
    for (app, (start, stop)) in starts_stops.iter().enumerate() {
        if *start > 0 && *start < end {
            out.push(Event {
                at: *start,
                arrive: true,
                app,
            });
        }
        if let Some(stop) = stop
            && *stop < end
        {
            out.push(Event {
                at: *stop,
                arrive: false,
                app,
            });
        }
    }
    out.sort_by_key(|e| (e.at, e.app, e.arrive));
    out
}

/// Everything [`analyse`] needs about one run.
pub struct RunLog<'a> {
    pub events: &'a [Event],
    pub end: Ns,
    pub units: usize,
    /// Scenario app names and (start, stop).
    pub app_names: &'a [String],
    pub lives: &'a [(Ns, Option<Ns>)],
    /// Report apps: name and scenario app index.
    pub report_apps: &'a [(String, usize)],
    pub issues: &'a [IssueLog],
    /// hetsched-pf: (time, largest change of any app's published targets)
    /// at every re-solve; `None` for other policies.
    pub target_changes: Option<&'a [(Ns, f64)]>,
}

/// One [`ConvergenceEvent`] per event.
pub fn analyse(run: &RunLog) -> Vec<ConvergenceEvent> {
    let mut out = Vec::new();
    for e in run.events {
        let next = run
            .events
            .iter()
            .map(|x| x.at)
            .filter(|t| *t > e.at)
            .min()
            .unwrap_or(run.end);
        let mut settle_s = BTreeMap::new();
        let mut unsettled = Vec::new();
        for (i, (name, app)) in run.report_apps.iter().enumerate() {
            let (start, stop) = run.lives[*app];
            if start > e.at || stop.is_some_and(|s| s < next) {
                continue;
            }
            if let Some((ns, settled)) = settle_ns(&run.issues[i], run.units, e.at, next) {
                settle_s.insert(name.clone(), secs(ns));
                if !settled {
                    unsettled.push(name.clone());
                }
            }
        }
        let max_settle_s = settle_s.values().copied().fold(0.0, f64::max);
        let (targets_settle_s, target_changes) = match run.target_changes {
            Some(changes) => {
                let moved: Vec<Ns> = changes
                    .iter()
                    .filter(|(t, c)| *t >= e.at && *t < next && *c > TARGET_CHANGE)
                    .map(|(t, _)| *t)
                    .collect();
                (
                    Some(moved.last().map_or(0.0, |t| secs(t - e.at))),
                    Some(moved.len() as u64),
                )
            }
            None => (None, None),
        };
        out.push(ConvergenceEvent {
            at_s: secs(e.at),
            event: if e.arrive { "arrive" } else { "leave" }.to_string(),
            app: run.app_names[e.app].clone(),
            until_s: secs(next),
            settle_s,
            unsettled,
            max_settle_s,
            targets_settle_s,
            target_changes,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Ns = 1_000_000;

    /// Tasks every `period` ms from `from` to `to` ms, unit chosen by `unit(k)`.
    fn log(from: Ns, to: Ns, period: Ns, unit: impl Fn(u64) -> u16) -> IssueLog {
        (0..)
            .map(|k| (from + k * period) * MS)
            .take_while(|t| *t < to * MS)
            .enumerate()
            .map(|(k, t)| (t, unit(k as u64)))
            .collect()
    }

    #[test]
    fn steady_placement_settles_at_once() {
        let l = log(0, 3000, 5, |k| (k % 4 == 0) as u16);
        assert_eq!(settle_ns(&l, 2, 0, 3000 * MS), Some((0, true)));
    }

    #[test]
    fn a_switch_settles_when_the_windows_stop_seeing_the_old_unit() {
        // Unit 0 until 700 ms, then unit 1; 5 ms tasks, 200 ms windows.
        let l = log(0, 3000, 5, |k| (k * 5 >= 700) as u16);
        let (ns, settled) = settle_ns(&l, 2, 0, 3000 * MS).unwrap();
        assert!(settled);
        // The first window with at most 15 % of its tasks before 700 ms
        // starts at 670 ms.
        assert_eq!(ns, 670 * MS);
    }

    #[test]
    fn long_tasks_get_longer_windows() {
        // 50 ms tasks: windows cover 10 tasks (500 ms). Alternating units
        // is steady at 50/50 and settles at once, though every 200 ms
        // window would be 2:2 or 3:1.
        let l = log(0, 4000, 50, |k| (k % 2) as u16);
        assert_eq!(settle_ns(&l, 2, 0, 4000 * MS), Some((0, true)));
        // Fewer than ten tasks in the reference second: not judged.
        let l = log(0, 4000, 150, |_| 0);
        assert_eq!(settle_ns(&l, 2, 0, 4000 * MS), None);
    }

    #[test]
    fn flapping_never_settles() {
        // Runs of 40 tasks on one unit, then 40 on the other: every 200 ms
        // window of 5 ms tasks sits on one unit, the reference on both.
        let l = log(0, 3000, 5, |k| ((k / 40) % 2) as u16);
        let (ns, settled) = settle_ns(&l, 2, 0, 3000 * MS).unwrap();
        assert!(!settled);
        assert_eq!(ns, 3000 * MS);
    }

    #[test]
    fn events_and_intervals() {
        let lives = [(0, None), (3000 * MS, None), (0, Some(6000 * MS))];
        let ev = events(&lives, 10_000 * MS);
        assert_eq!(
            ev,
            vec![
                Event {
                    at: 3000 * MS,
                    arrive: true,
                    app: 1
                },
                Event {
                    at: 6000 * MS,
                    arrive: false,
                    app: 2
                }
            ]
        );
        let names: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let report_apps: Vec<(String, usize)> = names.iter().cloned().zip(0..).collect();
        let steady = log(0, 10_000, 5, |_| 0);
        let late = log(3000, 10_000, 5, |k| (k * 5 >= 400) as u16);
        let issues = vec![steady.clone(), late, steady];
        let changes = [(3300 * MS, 1.0), (3500 * MS, 0.005), (6010 * MS, 0.2)];
        let run = RunLog {
            events: &ev,
            end: 10_000 * MS,
            units: 2,
            app_names: &names,
            lives: &lives,
            report_apps: &report_apps,
            issues: &issues,
            target_changes: Some(&changes),
        };
        let out = analyse(&run);
        assert_eq!(out.len(), 2);
        // Arrival of b: a, b and c are alive until 6 s; c leaves at 6 s,
        // so it is judged over [3, 6) too.
        assert_eq!(out[0].event, "arrive");
        assert_eq!(out[0].app, "b");
        assert_eq!(out[0].settle_s.len(), 3);
        assert!((out[0].settle_s["b"] - 0.37).abs() < 1e-9);
        assert_eq!(out[0].settle_s["a"], 0.0);
        assert!((out[0].max_settle_s - 0.37).abs() < 1e-9);
        assert_eq!(out[0].targets_settle_s, Some(0.3));
        assert_eq!(out[0].target_changes, Some(1));
        // Departure of c: only a and b are judged.
        assert_eq!(out[1].settle_s.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert!((out[1].targets_settle_s.unwrap() - 0.01).abs() < 1e-9);
    }
}
