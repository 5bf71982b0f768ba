//! Everything `hetsched sim run` shows or writes for one [`ScenarioReport`]:
//! the terminal table, CSV files for further analysis, the JSON report and
//! two SVG plots (Rinnegan Fig. 3 style timeline, relative throughput bars).
//!
//! All renderers are pure functions of the report so that the same report
//! always yields byte-identical output; only [`write_outputs`] touches disk.

mod csv;
mod goals_svg;
mod order;
mod svg;
mod table;

use crate::report::ScenarioReport;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub use csv::{SYSTEM_ROW, render_results_csv, render_timeline_csv, render_unit_time_csv};
pub use goals_svg::render_goals_svg;
pub use svg::{render_relative_svg, render_timeline_svg, render_timeline_svg_with_warmup};
pub use table::render_table;

// File names written by `write_outputs`; scripts depend on them, keep stable.
pub const RESULTS_CSV: &str = "results.csv";
pub const UNIT_TIME_CSV: &str = "unit_time.csv";
pub const TIMELINE_CSV: &str = "timeline.csv";
pub const REPORT_JSON: &str = "report.json";
pub const TIMELINE_SVG: &str = "timeline.svg";
pub const RELATIVE_SVG: &str = "relative.svg";
/// Only for scenarios whose apps set throughput goals.
pub const GOALS_SVG: &str = "goals.svg";

/// Writes every output file for `report` into `dir` (created if missing) and
/// returns the paths written, in a fixed order.
pub fn write_outputs(report: &ScenarioReport, dir: &Path) -> io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    // Render everything before writing anything, so a plotting failure does
    // not leave a directory with only half of the files refreshed.
    let mut files = vec![
        (RESULTS_CSV, render_results_csv(report)),
        (UNIT_TIME_CSV, render_unit_time_csv(report)),
        (TIMELINE_CSV, render_timeline_csv(report)),
        (REPORT_JSON, render_report_json(report)?),
        (TIMELINE_SVG, render_timeline_svg(report)?),
        (RELATIVE_SVG, render_relative_svg(report)?),
    ];
    if let Some(goals) = render_goals_svg(report)? {
        files.push((GOALS_SVG, goals));
    }
    files
        .into_iter()
        .map(|(name, contents)| {
            let path = dir.join(name);
            fs::write(&path, contents)?;
            Ok(path)
        })
        .collect()
}

/// The full report as pretty JSON (non-finite numbers become `null`).
fn render_report_json(report: &ScenarioReport) -> io::Result<String> {
    let mut json = serde_json::to_string_pretty(&versioned(report)?)?;
    json.push('\n');
    Ok(json)
}

/// `value` as a JSON object with `schema_version`
/// ([`hetsched_core::JSON_SCHEMA_VERSION`]) added; a value that is not an
/// object is returned as it is.
pub fn versioned<T: serde::Serialize>(value: &T) -> serde_json::Result<serde_json::Value> {
    let mut v = serde_json::to_value(value)?;
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "schema_version".into(),
            hetsched_core::JSON_SCHEMA_VERSION.into(),
        );
    }
    Ok(v)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::{AppResult, PolicyResult, TimelineSegment};
    use std::collections::BTreeMap;

    fn app(tasks_per_s: f64, relative: f64, tasks: u64, mix: &[(&str, f64)]) -> AppResult {
        AppResult {
            tasks_per_s,
            relative,
            tasks,
            mean_turnaround_ms: 12.5,
            unit_changes: 3,
            settled_after_tasks: 40,
            unit_mix: mix.iter().map(|(u, f)| (u.to_string(), *f)).collect(),
            goal: None,
        }
    }

    fn segment(app: &str, unit: &str, start_s: f64, end_s: f64) -> TimelineSegment {
        TimelineSegment {
            app: app.into(),
            unit: unit.into(),
            start_s,
            end_s,
        }
    }

    fn unit_time(entries: &[(&str, &str, f64)]) -> BTreeMap<String, BTreeMap<String, f64>> {
        let mut map: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for (unit, app, fraction) in entries {
            map.entry(unit.to_string())
                .or_default()
                .insert(app.to_string(), *fraction);
        }
        map
    }

    /// Two policies, three apps (one name needs CSV quoting), two units.
    pub(crate) fn sample_report() -> ScenarioReport {
        let native = PolicyResult {
            policy: "native".into(),
            system_speedup: 1.0,
            min_relative: 1.0,
            tasks_per_s: 30.0,
            fraction_of_oracle: 0.625,
            placement_changes_per_s: 0.0,
            mean_prediction_error: None,
            apps: [
                ("bfs".to_string(), app(10.0, 1.0, 100, &[("cpu", 1.0)])),
                (
                    "mm, \"big\"".to_string(),
                    app(5.0, 1.0, 50, &[("gpu", 1.0)]),
                ),
                ("kmeans".to_string(), app(15.0, 1.0, 150, &[("cpu", 1.0)])),
            ]
            .into(),
            unit_time: unit_time(&[
                ("cpu", "bfs", 0.5),
                ("cpu", "kmeans", 0.5),
                ("gpu", "mm, \"big\"", 1.0),
            ]),
            convergence: Vec::new(),
            max_settle_s: None,
            coordination_solve_us_p50: None,
            coordination_solve_us_p99: None,
            timeline: vec![
                segment("bfs", "cpu", 0.0, 10.0),
                segment("mm, \"big\"", "gpu", 0.0, 10.0),
                segment("kmeans", "cpu", 0.0, 10.0),
            ],
        };
        let hetsched = PolicyResult {
            policy: "hetsched".into(),
            system_speedup: 1.4422,
            min_relative: 1.2,
            tasks_per_s: 45.5,
            fraction_of_oracle: 0.9013,
            placement_changes_per_s: 0.25,
            mean_prediction_error: Some(0.083),
            apps: [
                (
                    "bfs".to_string(),
                    app(12.0, 1.2, 120, &[("cpu", 0.7), ("gpu", 0.3)]),
                ),
                (
                    "mm, \"big\"".to_string(),
                    app(9.0, 1.8, 90, &[("gpu", 1.0)]),
                ),
                (
                    "kmeans".to_string(),
                    app(24.5, 1.6333, 245, &[("cpu", 1.0)]),
                ),
            ]
            .into(),
            unit_time: unit_time(&[
                ("cpu", "bfs", 0.4),
                ("cpu", "kmeans", 0.6),
                ("gpu", "bfs", 0.2),
            ]),
            convergence: Vec::new(),
            max_settle_s: None,
            coordination_solve_us_p50: None,
            coordination_solve_us_p99: None,
            timeline: vec![
                segment("bfs", "gpu", 0.0, 3.0),
                segment("bfs", "cpu", 3.0, 10.0),
                segment("mm, \"big\"", "gpu", 0.0, 10.0),
                segment("kmeans", "cpu", 0.0, 10.0),
            ],
        };
        ScenarioReport {
            scenario: "mixed-3".into(),
            description: "three apps share a CPU and a GPU".into(),
            seed: 42,
            measured_s: 10.0,
            oracle_system_speedup: 1.6,
            oracle_apps: [
                ("bfs".to_string(), 1.3),
                ("mm, \"big\"".to_string(), 2.0),
                ("kmeans".to_string(), 1.6),
            ]
            .into(),
            oracle_no_loser_system_speedup: 1.5,
            oracle_no_loser_floor: 1.0,
            oracle_no_loser_floor_feasible: true,
            oracle_queue_aware_system_speedup: 1.4,
            oracle_queue_aware_floor: 1.0,
            units: vec!["cpu".into(), "gpu".into()],
            apps: vec!["bfs".into(), "mm, \"big\"".into(), "kmeans".into()],
            results: vec![native, hetsched],
            prediction_error_sweep: Vec::new(),
        }
    }

    /// The sample with NaN/inf sprinkled over every kind of number.
    pub(crate) fn poisoned_report() -> ScenarioReport {
        let mut report = sample_report();
        report.measured_s = f64::NAN;
        report.oracle_system_speedup = f64::INFINITY;
        report.oracle_apps.insert("bfs".into(), f64::NAN);
        let policy = &mut report.results[1];
        policy.system_speedup = f64::NAN;
        policy.fraction_of_oracle = f64::NEG_INFINITY;
        policy.mean_prediction_error = Some(f64::NAN);
        policy.apps.get_mut("bfs").unwrap().relative = f64::INFINITY;
        policy.apps.get_mut("kmeans").unwrap().tasks_per_s = f64::NAN;
        policy.timeline.push(segment("bfs", "gpu", f64::NAN, 4.0));
        policy
            .timeline
            .push(segment("kmeans", "cpu", 2.0, f64::INFINITY));
        report
    }

    /// A fresh directory per test so parallel tests never share files.
    pub(crate) fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "hetsched-output-{name}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn write_outputs_creates_dir_and_every_file() {
        let dir = scratch_dir("all").join("nested");
        let written = write_outputs(&sample_report(), &dir).unwrap();
        let names: Vec<_> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            [
                RESULTS_CSV,
                UNIT_TIME_CSV,
                TIMELINE_CSV,
                REPORT_JSON,
                TIMELINE_SVG,
                RELATIVE_SVG
            ]
        );
        for path in &written {
            assert!(path.starts_with(&dir));
            assert!(fs::metadata(path).unwrap().len() > 0, "{path:?} is empty");
        }
        for svg in [TIMELINE_SVG, RELATIVE_SVG] {
            let text = fs::read_to_string(dir.join(svg)).unwrap();
            assert!(text.trim_start().starts_with("<svg"), "{svg} is not SVG");
            assert!(text.trim_end().ends_with("</svg>"), "{svg} is truncated");
        }
        let _ = fs::remove_dir_all(dir.parent().unwrap());
    }

    #[test]
    fn goals_are_plotted_only_when_an_app_has_one() {
        let mut report = sample_report();
        assert!(render_goals_svg(&report).unwrap().is_none());
        let app = report.results[1].apps.get_mut("kmeans").unwrap();
        app.goal = Some(crate::report::GoalResult {
            target_tasks_per_s: 20.0,
            periods: 3,
            periods_met: 1,
            time_to_goal_s: Some(1.5),
            misses_after_goal: 0,
            achieved: vec![(0.5, 5.0), (1.0, 12.0), (1.5, 21.0)],
            last_shares: 20,
            last_work_factor: 1.0,
        });
        let svg = render_goals_svg(&report).unwrap().expect("a goal to plot");
        assert!(svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("kmeans"), "the legend names the app");
        let dir = scratch_dir("goals");
        let written = write_outputs(&report, &dir).unwrap();
        assert!(written.last().unwrap().ends_with(GOALS_SVG));
        let _ = fs::remove_dir_all(dir);
    }

    #[test]
    fn report_json_round_trips_except_timeline() {
        let report = sample_report();
        let json = render_report_json(&report).unwrap();
        let back: ScenarioReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back.scenario, report.scenario);
        assert_eq!(back.results.len(), 2);
        assert_eq!(back.results[1].apps["kmeans"].tasks, 245);
        // The timeline is `#[serde(skip)]`: it lives in timeline.csv instead.
        assert!(back.results[1].timeline.is_empty());
    }

    #[test]
    fn poisoned_numbers_still_write_every_file() {
        let dir = scratch_dir("nan");
        let written = write_outputs(&poisoned_report(), &dir).unwrap();
        assert_eq!(written.len(), 6);
        let json = fs::read_to_string(dir.join(REPORT_JSON)).unwrap();
        assert!(json.contains("null"), "NaN should serialise as null");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn degenerate_reports_do_not_panic() {
        let mut empty = sample_report();
        empty.results.truncate(1);
        empty.results[0].timeline.clear();
        let dir = scratch_dir("single");
        assert_eq!(write_outputs(&empty, &dir).unwrap().len(), 6);

        empty.results.clear();
        empty.apps.clear();
        empty.units.clear();
        empty.oracle_apps.clear();
        assert_eq!(write_outputs(&empty, &dir).unwrap().len(), 6);
        assert!(render_table(&empty).contains("mixed-3"));
        let _ = fs::remove_dir_all(&dir);
    }
}
