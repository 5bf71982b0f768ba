//! Thread-balance simulation: hetsched-core's thread → core policies
//! (`linux-default`, `gts`, `smartbalance`, `kinship`) on the machines and
//! thread mixes of the SmartBalance and Kinship papers.
//!
//! Reports keep the shape of every other scenario ([`ScenarioReport`]'s
//! fields, with `linux-default` as the baseline of `relative` and
//! `system_speedup`) and add energy efficiency per policy. A "task" here
//! is 10⁹ useful instructions, so `tasks_per_s` reads as useful GIPS.

pub mod engine;
pub mod model;
pub mod predictor;
pub mod scenarios;

use crate::report::{AppResult, PolicyResult, ScenarioReport, TimelineSegment};
use engine::{Case, CaseOutcome, EPOCH_S, EPOCHS, Policy, WARMUP_EPOCHS};
use serde::Serialize;
use std::collections::BTreeMap;

/// Built-in thread-balance scenarios: (name, description).
pub const SCENARIOS: [(&str, &str); 4] = [
    (
        "smartbalance-mixes",
        "SmartBalance Table 2 cores (quad Huge/Big/Medium/Small and octa big.LITTLE), PARSEC-like and interactive mixes of 2/4/8 threads: IPS/W",
    ),
    (
        "kinship-usecase1",
        "Kinship use case 1 on QuickIA (2 Xeon + 2 Atom): compute vs IO/memory threads with hints",
    ),
    (
        "kinship-usecase2",
        "Kinship use case 2 on SimulatedWM: AES threads and AES-NI on one socket only, half-speed cores",
    ),
    (
        "kinship-cache",
        "Kinship Speedcache1 on SimulatedWM: 12 MiB vs 3 MiB last-level cache per socket, CacheBuster large/small and spin loops",
    ),
];

/// The baseline of `relative`, `system_speedup` and `ips_per_watt_relative`.
pub const BASELINE: &str = "linux-default";

/// Whether `name` is a thread-balance scenario.
pub fn is_builtin(name: &str) -> bool {
    SCENARIOS.iter().any(|(n, _)| *n == name)
}

/// A thread-balance scenario's report: [`ScenarioReport`]'s fields plus
/// energy efficiency per policy.
#[derive(Clone, Debug, Serialize)]
pub struct BalanceReport {
    pub scenario: String,
    pub description: String,
    pub seed: u64,
    /// Simulated seconds measured per policy and initial placement.
    pub measured_s: f64,
    /// Geometric mean over apps of `relative` at the proportional-fair
    /// allocation of the true figures (annealed long, static, no
    /// migration cost).
    pub oracle_system_speedup: f64,
    pub oracle_apps: BTreeMap<String, f64>,
    /// Not computed for thread scenarios (`null`); kept for the shape.
    pub oracle_no_loser_system_speedup: f64,
    pub oracle_no_loser_floor: f64,
    pub oracle_no_loser_floor_feasible: bool,
    pub units: Vec<String>,
    pub apps: Vec<String>,
    /// The policy every `relative` is measured against.
    pub baseline: String,
    /// Mean and 95th percentile of |predicted − true| / true IPS over
    /// every prediction of the fitted `Θ` the policies were given (each
    /// thread on every kind it was not running on, every measured epoch).
    pub predictor_error_mean: f64,
    pub predictor_error_p95: f64,
    pub results: Vec<BalanceResult>,
}

/// One policy's outcome: the common fields, then energy efficiency.
#[derive(Clone, Debug, Serialize)]
pub struct BalanceResult {
    #[serde(flatten)]
    pub result: PolicyResult,
    /// Useful instructions per joule (IPS/W), cores plus platform base
    /// power; the geometric mean over cases when the scenario has several.
    pub ips_per_watt: f64,
    /// Geometric mean over cases of `ips_per_watt` ÷ the baseline's.
    pub ips_per_watt_relative: f64,
    /// The same per machine, when the scenario has several machines.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub ips_per_watt_relative_by_machine: BTreeMap<String, f64>,
    /// IPS/W per app, when apps are whole cases (a thread alone has no
    /// power of its own).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub app_ips_per_watt: BTreeMap<String, f64>,
}

impl BalanceReport {
    /// The report without the energy fields, for the shared table, CSV and
    /// plot renderers.
    pub fn to_scenario_report(&self) -> ScenarioReport {
        ScenarioReport {
            scenario: self.scenario.clone(),
            description: self.description.clone(),
            seed: self.seed,
            measured_s: self.measured_s,
            oracle_system_speedup: self.oracle_system_speedup,
            oracle_apps: self.oracle_apps.clone(),
            oracle_no_loser_system_speedup: self.oracle_no_loser_system_speedup,
            oracle_no_loser_floor: self.oracle_no_loser_floor,
            oracle_no_loser_floor_feasible: self.oracle_no_loser_floor_feasible,
            oracle_queue_aware_system_speedup: f64::NAN,
            oracle_queue_aware_floor: f64::NAN,
            units: self.units.clone(),
            apps: self.apps.clone(),
            results: self.results.iter().map(|r| r.result.clone()).collect(),
            prediction_error_sweep: Vec::new(),
        }
    }

    /// The energy table printed under the common one.
    pub fn render_energy_table(&self) -> String {
        let mut out = format!(
            "predictor (fitted Θ): mean error {:.1} %, p95 {:.1} %\n\n",
            self.predictor_error_mean * 100.0,
            self.predictor_error_p95 * 100.0
        );
        out.push_str(&format!(
            "energy efficiency (useful IPS/W; relative to {})\n",
            self.baseline
        ));
        let machines: Vec<&String> = self
            .results
            .first()
            .map(|r| r.ips_per_watt_relative_by_machine.keys().collect())
            .unwrap_or_default();
        out.push_str(&format!("{:<16}{:>14}{:>10}", "policy", "IPS/W", "× base"));
        for m in &machines {
            out.push_str(&format!("{:>10}", format!("× {m}")));
        }
        out.push('\n');
        for r in &self.results {
            out.push_str(&format!(
                "{:<16}{:>14.4e}{:>10.3}",
                r.result.policy, r.ips_per_watt, r.ips_per_watt_relative
            ));
            for m in &machines {
                let x = r
                    .ips_per_watt_relative_by_machine
                    .get(*m)
                    .copied()
                    .unwrap_or(f64::NAN);
                out.push_str(&format!("{x:>10.3}"));
            }
            out.push('\n');
        }
        out
    }
}

/// How a scenario's apps map to the simulated threads.
enum Rows {
    /// One app per thread (one case).
    Threads,
    /// One app per case (mix × thread count × machine).
    Cases,
}

/// Runs a built-in thread-balance scenario; `None` for an unknown name.
/// `progress` gets the policy name and the fraction done.
pub fn run(name: &str, seed: u64, progress: &mut dyn FnMut(&str, f64)) -> Option<BalanceReport> {
    let (cases, rows) = match name {
        "smartbalance-mixes" => (scenarios::smartbalance_mixes(), Rows::Cases),
        "kinship-usecase1" => (scenarios::kinship_usecase1(), Rows::Threads),
        "kinship-usecase2" => (scenarios::kinship_usecase2(), Rows::Threads),
        "kinship-cache" => (scenarios::kinship_cache(), Rows::Threads),
        _ => return None,
    };
    let description = SCENARIOS.iter().find(|(n, _)| *n == name)?.1;
    let outcomes: Vec<Vec<CaseOutcome>> = Policy::ALL
        .iter()
        .map(|&policy| {
            cases
                .iter()
                .enumerate()
                .map(|(ci, case)| {
                    progress(policy.name(), ci as f64 / cases.len() as f64);
                    let o = engine::run_case(case, policy, seed);
                    progress(policy.name(), (ci + 1) as f64 / cases.len() as f64);
                    o
                })
                .collect()
        })
        .collect();
    let oracles: Vec<Vec<f64>> = cases.iter().map(|c| engine::oracle(c, seed)).collect();
    Some(assemble(
        name,
        description,
        seed,
        &cases,
        rows,
        &outcomes,
        &oracles,
    ))
}

/// Per app: (name, per-case thread indices it covers).
fn app_index(cases: &[Case], rows: &Rows) -> Vec<(String, usize, Vec<usize>)> {
    match rows {
        Rows::Threads => cases
            .iter()
            .enumerate()
            .flat_map(|(ci, c)| {
                c.threads
                    .iter()
                    .enumerate()
                    .map(move |(i, (n, _))| (n.clone(), ci, vec![i]))
            })
            .collect(),
        Rows::Cases => cases
            .iter()
            .enumerate()
            .map(|(ci, c)| (c.label.clone(), ci, (0..c.threads.len()).collect()))
            .collect(),
    }
}

fn unit_name(case: &Case, core: usize, rows: &Rows) -> String {
    match rows {
        Rows::Threads => case.cores[core].1.clone(),
        Rows::Cases => format!("{}/{}", case.machine, case.cores[core].1),
    }
}

fn geomean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x.ln(), n + 1));
    if n == 0 {
        f64::NAN
    } else {
        (sum / n as f64).exp()
    }
}

fn assemble(
    name: &str,
    description: &str,
    seed: u64,
    cases: &[Case],
    rows: Rows,
    outcomes: &[Vec<CaseOutcome>],
    oracles: &[Vec<f64>],
) -> BalanceReport {
    let apps = app_index(cases, &rows);
    let mut units: Vec<String> = Vec::new();
    for case in cases {
        for core in 0..case.cores.len() {
            let u = unit_name(case, core, &rows);
            if !units.contains(&u) {
                units.push(u);
            }
        }
    }
    // Useful GIPS per app under an outcome set.
    let app_gips = |per_case: &[CaseOutcome], (_, ci, threads): &(String, usize, Vec<usize>)| {
        let o = &per_case[*ci];
        threads.iter().map(|&i| o.instructions[i]).sum::<f64>() / o.measured_s / 1e9
    };
    let base = &outcomes[0];
    let base_gips: Vec<f64> = apps.iter().map(|a| app_gips(base, a)).collect();
    let oracle_apps: BTreeMap<String, f64> = apps
        .iter()
        .zip(&base_gips)
        .map(|((n, ci, threads), b)| {
            let gips = threads.iter().map(|&i| oracles[*ci][i]).sum::<f64>() / 1e9;
            (n.clone(), gips / b)
        })
        .collect();
    let oracle_system_speedup = geomean(oracle_apps.values().copied());
    let case_ipw = |o: &CaseOutcome| o.instructions.iter().sum::<f64>() / o.energy_j;
    let base_ipw: Vec<f64> = base.iter().map(case_ipw).collect();
    let machines: Vec<&str> = {
        let mut v: Vec<&str> = cases.iter().map(|c| c.machine.as_str()).collect();
        v.dedup();
        v
    };
    let results = Policy::ALL
        .iter()
        .zip(outcomes)
        .map(|(policy, per_case)| {
            let mut app_results = BTreeMap::new();
            let mut unit_time: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
            let mut timeline = Vec::new();
            let mut migrations = 0u64;
            let mut measured = 0.0;
            for (a, base) in apps.iter().zip(&base_gips) {
                let (name, ci, threads) = a;
                let (case, o) = (&cases[*ci], &per_case[*ci]);
                let gips = app_gips(per_case, a);
                let moves: u64 = threads.iter().map(|&i| o.migrations[i]).sum();
                migrations += moves;
                let epochs: u64 = threads.iter().flat_map(|&i| o.epochs_on[i].iter()).sum();
                let mut unit_mix = BTreeMap::new();
                for core in 0..case.cores.len() {
                    let on: u64 = threads.iter().map(|&i| o.epochs_on[i][core]).sum();
                    let used: f64 = threads.iter().map(|&i| o.core_seconds[i][core]).sum();
                    let unit = unit_name(case, core, &rows);
                    if on > 0 {
                        unit_mix.insert(unit.clone(), on as f64 / epochs.max(1) as f64);
                    }
                    unit_time
                        .entry(unit)
                        .or_default()
                        .insert(name.clone(), used / o.measured_s);
                }
                let instructions: f64 = threads.iter().map(|&i| o.instructions[i]).sum();
                app_results.insert(
                    name.clone(),
                    AppResult {
                        tasks_per_s: gips,
                        relative: gips / base,
                        tasks: (instructions / 1e9) as u64,
                        mean_turnaround_ms: if gips > 0.0 { 1e3 / gips } else { f64::NAN },
                        unit_changes: moves,
                        settled_after_tasks: threads
                            .iter()
                            .map(|&i| o.settled_after[i])
                            .max()
                            .unwrap_or(0),
                        unit_mix,
                        goal: None,
                    },
                );
                if let Rows::Threads = rows {
                    timeline.extend(segments(name, case, &o.trace, threads[0]));
                }
            }
            for o in per_case {
                measured += o.measured_s;
            }
            let relatives: Vec<f64> = app_results.values().map(|a| a.relative).collect();
            let system_speedup = geomean(relatives.iter().copied());
            let errors: Vec<f64> = per_case
                .iter()
                .flat_map(|o| o.prediction_errors.iter().copied())
                .collect();
            let ipw: Vec<f64> = per_case.iter().map(case_ipw).collect();
            let by_machine = if machines.len() > 1 {
                machines
                    .iter()
                    .map(|m| {
                        let r = geomean(
                            cases
                                .iter()
                                .enumerate()
                                .filter(|(_, c)| c.machine == *m)
                                .map(|(ci, _)| ipw[ci] / base_ipw[ci]),
                        );
                        (m.to_string(), r)
                    })
                    .collect()
            } else {
                BTreeMap::new()
            };
            let app_ips_per_watt = match rows {
                Rows::Cases => cases
                    .iter()
                    .zip(&ipw)
                    .map(|(c, x)| (c.label.clone(), *x))
                    .collect(),
                Rows::Threads => BTreeMap::new(),
            };
            BalanceResult {
                result: PolicyResult {
                    policy: policy.name().to_string(),
                    system_speedup,
                    min_relative: relatives.iter().copied().fold(f64::INFINITY, f64::min),
                    tasks_per_s: app_results.values().map(|a| a.tasks_per_s).sum(),
                    fraction_of_oracle: system_speedup / oracle_system_speedup,
                    placement_changes_per_s: migrations as f64 / measured,
                    mean_prediction_error: (!errors.is_empty())
                        .then(|| errors.iter().sum::<f64>() / errors.len() as f64),
                    apps: app_results,
                    unit_time,
                    convergence: Vec::new(),
                    max_settle_s: None,
                    coordination_solve_us_p50: None,
                    coordination_solve_us_p99: None,
                    timeline,
                },
                ips_per_watt: geomean(ipw.iter().copied()),
                ips_per_watt_relative: geomean(ipw.iter().zip(&base_ipw).map(|(a, b)| a / b)),
                ips_per_watt_relative_by_machine: by_machine,
                app_ips_per_watt,
            }
        })
        .collect();
    let mut errors: Vec<f64> = outcomes
        .iter()
        .flatten()
        .flat_map(|o| o.prediction_errors.iter().copied())
        .collect();
    errors.sort_by(f64::total_cmp);
    let (predictor_error_mean, predictor_error_p95) = if errors.is_empty() {
        (f64::NAN, f64::NAN)
    } else {
        (
            errors.iter().sum::<f64>() / errors.len() as f64,
            errors[(errors.len() * 95 / 100).min(errors.len() - 1)],
        )
    };
    BalanceReport {
        scenario: name.to_string(),
        description: description.to_string(),
        seed,
        predictor_error_mean,
        predictor_error_p95,
        measured_s: (EPOCHS - WARMUP_EPOCHS) as f64 * EPOCH_S,
        oracle_system_speedup,
        oracle_apps,
        oracle_no_loser_system_speedup: f64::NAN,
        oracle_no_loser_floor: f64::NAN,
        oracle_no_loser_floor_feasible: false,
        units,
        apps: apps.into_iter().map(|(n, _, _)| n).collect(),
        baseline: BASELINE.to_string(),
        results,
    }
}

/// Replica 0's placement of `thread` as timeline segments.
fn segments(app: &str, case: &Case, trace: &[Vec<usize>], thread: usize) -> Vec<TimelineSegment> {
    let mut out: Vec<TimelineSegment> = Vec::new();
    for (epoch, cores) in trace.iter().enumerate() {
        let unit = case.cores[cores[thread]].1.clone();
        let start = epoch as f64 * EPOCH_S;
        match out.last_mut() {
            Some(seg) if seg.unit == unit => seg.end_s = start + EPOCH_S,
            _ => out.push(TimelineSegment {
                app: app.to_string(),
                unit,
                start_s: start,
                end_s: start + EPOCH_S,
            }),
        }
    }
    out
}
