//! Turning the app processes' reports into throughput, ratios, the
//! results file and the placement timeline.

use super::app_process::AppReport;
use anyhow::{Result, bail};
use hetsched_sim::report::{AppResult, PolicyResult, ScenarioReport, TimelineSegment};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// One app under one policy in one run.
#[derive(Clone, Debug, Serialize)]
pub struct AppSummary {
    pub app: String,
    /// Calls finished per second in the measured window.
    pub tasks_per_s: f64,
    pub mean_turnaround_ms: f64,
    /// Fraction of the window's calls that ran on each unit.
    pub unit_mix: BTreeMap<String, f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PolicySummary {
    pub policy: String,
    pub apps: Vec<AppSummary>,
    pub checked: u64,
    pub wrong: u64,
    pub failed: u64,
}

impl PolicySummary {
    pub fn one_line(&self) -> String {
        let per_app: Vec<String> = self
            .apps
            .iter()
            .map(|a| format!("{} {:.1}/s", a.app, a.tasks_per_s))
            .collect();
        format!("{:<8} {}", self.policy, per_app.join(", "))
    }

    fn app(&self, name: &str) -> Option<&AppSummary> {
        self.apps.iter().find(|a| a.app == name)
    }
}

pub fn summarise(policy: &str, reports: &[AppReport], warmup: f64, seconds: f64) -> PolicySummary {
    let window = seconds - warmup;
    let apps = reports
        .iter()
        .map(|r| {
            let measured: Vec<&(f64, usize, f64)> = r
                .calls
                .iter()
                .filter(|c| c.0 >= warmup && c.0 <= seconds)
                .collect();
            let n = measured.len() as f64;
            let mut unit_mix = BTreeMap::new();
            for c in &measured {
                let name = r
                    .units
                    .get(c.1)
                    .cloned()
                    .unwrap_or_else(|| format!("#{}", c.1));
                *unit_mix.entry(name).or_insert(0.0) += 1.0 / n;
            }
            AppSummary {
                app: r.app.clone(),
                tasks_per_s: n / window,
                mean_turnaround_ms: if n > 0.0 {
                    measured.iter().map(|c| c.2).sum::<f64>() / n
                } else {
                    f64::NAN
                },
                unit_mix,
            }
        })
        .collect();
    PolicySummary {
        policy: policy.into(),
        apps,
        checked: reports.iter().map(|r| r.checked).sum(),
        wrong: reports.iter().map(|r| r.wrong).sum(),
        failed: reports.iter().map(|r| r.failed).sum(),
    }
}

/// Per app `hetsched / native` throughput.
fn app_ratios(native: &PolicySummary, hetsched: &PolicySummary) -> Vec<(String, f64)> {
    native
        .apps
        .iter()
        .filter_map(|n| {
            let h = hetsched.app(&n.app)?;
            (n.tasks_per_s > 0.0).then(|| (n.app.clone(), h.tasks_per_s / n.tasks_per_s))
        })
        .collect()
}

/// System throughput ratio: the geometric mean over apps of each app's
/// `hetsched / native` throughput (apps' calls differ in size by 100×, so
/// raw calls per second would weigh the smallest app only). The same
/// metric as the simulator's `system_speedup`.
pub fn system_ratio(native: &PolicySummary, hetsched: &PolicySummary) -> f64 {
    let ratios = app_ratios(native, hetsched);
    if ratios.is_empty() {
        return f64::NAN;
    }
    let log_sum: f64 = ratios.iter().map(|(_, r)| r.max(1e-9).ln()).sum();
    (log_sum / ratios.len() as f64).exp()
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.retain(|x| x.is_finite());
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let m = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[m]
    } else {
        (xs[m - 1] + xs[m]) / 2.0
    }
}

/// One run: every policy's reports and summary (native first), and each
/// other policy's system ratio against native, in the same order.
pub type Run = (Vec<(Vec<AppReport>, PolicySummary)>, Vec<f64>);

/// The final table, files and the checkable last line
/// (`system throughput: hetsched/native = …`, printed last; other
/// policies' ratios come just before it).
pub fn finish(out: &Path, runs: &[Run], warmup: f64, seconds: f64) -> Result<String> {
    let mut text = String::new();
    let policies: Vec<String> = runs
        .first()
        .map(|(p, _)| p.iter().map(|(_, s)| s.policy.clone()).collect())
        .unwrap_or_default();
    let all = || runs.iter().flat_map(|(p, _)| p.iter().map(|(_, s)| s));
    let checked: u64 = all().map(|s| s.checked).sum();
    let wrong: u64 = all().map(|s| s.wrong).sum();
    let failed: u64 = all().map(|s| s.failed).sum();
    write!(text, "{:<10}", "app")?;
    for p in &policies {
        write!(text, " {:>13}", format!("{p} /s"))?;
    }
    for p in policies.iter().skip(1) {
        write!(text, " {:>13}", format!("{p}/nat"))?;
    }
    writeln!(
        text,
        "   {} unit mix (last run)",
        policies.last().map_or("", |p| p)
    )?;
    let last = runs.last().and_then(|(p, _)| p.last()).map(|(_, s)| s);
    for app in super::apps::APPS {
        let per_policy: Vec<f64> = (0..policies.len())
            .map(|i| {
                median(
                    runs.iter()
                        .filter_map(|(p, _)| p.get(i)?.1.app(app.name))
                        .map(|a| a.tasks_per_s)
                        .collect(),
                )
            })
            .collect();
        write!(text, "{:<10}", app.name)?;
        for t in &per_policy {
            write!(text, " {t:>13.1}")?;
        }
        for t in per_policy.iter().skip(1) {
            write!(text, " {:>13.2}", t / per_policy[0])?;
        }
        let mix = last
            .and_then(|s| s.app(app.name))
            .map(|a| {
                a.unit_mix
                    .iter()
                    .map(|(u, f)| format!("{u} {:.0}%", f * 100.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        writeln!(text, "   {mix}")?;
    }
    writeln!(
        text,
        "\nresults checked: {checked} calls, {wrong} wrong, {failed} failed (median per app over {} runs; window {warmup:.0}-{seconds:.0} s)",
        runs.len()
    )?;
    std::fs::create_dir_all(out)?;
    let medians: Vec<f64> = (1..policies.len())
        .map(|i| {
            median(
                runs.iter()
                    .filter_map(|r| r.1.get(i - 1).copied())
                    .collect(),
            )
        })
        .collect();
    let json = serde_json::json!({
        "schema_version": hetsched_core::JSON_SCHEMA_VERSION,
        "runs": runs.iter().map(|(p, ratios)| {
            let mut run = serde_json::Map::new();
            for (_, s) in p {
                run.insert(s.policy.clone(), serde_json::to_value(s).unwrap_or_default());
            }
            for (name, r) in policies.iter().skip(1).zip(ratios) {
                run.insert(format!("system_ratio_{name}"), serde_json::json!(r));
            }
            serde_json::Value::Object(run)
        }).collect::<Vec<_>>(),
        // hetsched's, as the checkable line says it.
        "median_system_ratio": policies.iter().skip(1).zip(&medians)
            .find(|(p, _)| *p == "hetsched").map(|(_, m)| *m),
        "median_system_ratio_by_policy": policies.iter().skip(1).zip(&medians)
            .map(|(p, m)| (p.clone(), serde_json::json!(m)))
            .collect::<serde_json::Map<_, _>>(),
    });
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    if let Some((policies, _)) = runs.last() {
        let svg = hetsched_sim::output::render_timeline_svg_with_warmup(
            &timeline_report(policies, seconds),
            Some(warmup),
        )?;
        std::fs::write(out.join("timeline.svg"), svg)?;
    }
    writeln!(
        text,
        "wrote {} and {}",
        out.join("results.json").display(),
        out.join("timeline.svg").display()
    )?;
    if wrong > 0 || failed > 0 {
        bail!("{text}\ndemo results are wrong: {wrong} wrong, {failed} failed calls");
    }
    let line = |text: &mut String, name: &str, ratio: f64| {
        writeln!(
            text,
            "system throughput: {name}/native = {ratio:.2} (median of {} runs)",
            runs.len()
        )
    };
    let named = |name: &str| policies.iter().skip(1).position(|p| p == name);
    for (i, name) in policies.iter().skip(1).enumerate() {
        if name != "hetsched" {
            line(&mut text, name, medians[i])?;
        }
    }
    if let Some(i) = named("hetsched") {
        line(&mut text, "hetsched", medians[i])?;
    }
    Ok(text)
}

/// The last run as a simulator report, so the simulator's Fig. 3-style
/// timeline draws it: one lane per app, coloured by unit.
fn timeline_report(policies: &[(Vec<AppReport>, PolicySummary)], seconds: f64) -> ScenarioReport {
    let units = policies
        .first()
        .and_then(|(r, _)| r.first())
        .map(|r| r.units.clone())
        .unwrap_or_default();
    let results = policies
        .iter()
        .map(|(reports, summary)| PolicyResult {
            policy: summary.policy.clone(),
            system_speedup: f64::NAN,
            min_relative: f64::NAN,
            tasks_per_s: summary.apps.iter().map(|a| a.tasks_per_s).sum(),
            fraction_of_oracle: f64::NAN,
            placement_changes_per_s: f64::NAN,
            mean_prediction_error: None,
            apps: summary
                .apps
                .iter()
                .map(|a| {
                    (
                        a.app.clone(),
                        AppResult {
                            tasks_per_s: a.tasks_per_s,
                            relative: f64::NAN,
                            tasks: 0,
                            mean_turnaround_ms: a.mean_turnaround_ms,
                            unit_changes: 0,
                            settled_after_tasks: 0,
                            unit_mix: a.unit_mix.clone(),
                            goal: None,
                        },
                    )
                })
                .collect(),
            unit_time: BTreeMap::new(),
            convergence: Vec::new(),
            max_settle_s: None,
            coordination_solve_us_p50: None,
            coordination_solve_us_p99: None,
            timeline: reports.iter().flat_map(segments).collect(),
        })
        .collect();
    ScenarioReport {
        scenario: "hetsched demo".into(),
        description: "Table 3 apps as processes on a real daemon".into(),
        seed: 0,
        measured_s: seconds,
        oracle_system_speedup: f64::NAN,
        oracle_apps: BTreeMap::new(),
        oracle_no_loser_system_speedup: f64::NAN,
        oracle_no_loser_floor: f64::NAN,
        oracle_no_loser_floor_feasible: false,
        oracle_queue_aware_system_speedup: f64::NAN,
        oracle_queue_aware_floor: f64::NAN,
        units,
        apps: super::apps::APPS
            .iter()
            .map(|a| a.name.to_string())
            .collect(),
        results,
        prediction_error_sweep: Vec::new(),
    }
}

/// Consecutive calls of one app on one unit, merged into one bar from the
/// first call's start to the last call's end.
fn segments(r: &AppReport) -> Vec<TimelineSegment> {
    let mut out: Vec<TimelineSegment> = Vec::new();
    for &(end, unit, turnaround_ms) in &r.calls {
        let unit = r.units.get(unit).cloned().unwrap_or_default();
        let start = (end - turnaround_ms / 1e3).max(0.0);
        match out.last_mut() {
            Some(s) if s.unit == unit => s.end_s = end,
            _ => out.push(TimelineSegment {
                app: r.app.clone(),
                unit,
                start_s: start,
                end_s: end,
            }),
        }
    }
    out
}
