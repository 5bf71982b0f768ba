//! What one simulated scenario produced: the data behind the table, the CSV
//! and JSON files and the plots. Field names here are the checkable `--json`
//! interface; keep them stable.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// All policies run on one scenario with one seed.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScenarioReport {
    pub scenario: String,
    pub description: String,
    pub seed: u64,
    /// Simulated seconds measured per policy (after warm-up).
    pub measured_s: f64,
    /// Geometric mean of the apps' relative throughput at the
    /// proportional-fair optimum of the fluid model.
    pub oracle_system_speedup: f64,
    /// Per app relative throughput at that optimum.
    pub oracle_apps: BTreeMap<String, f64>,
    /// The proportional-fair bound with no loser: geometric-mean relative
    /// throughput maximising Σ log rᵢ subject to rᵢ ≥ 1 for every app, or,
    /// when no allocation gives everyone native, rᵢ ≥ the largest common
    /// floor (`oracle_no_loser_floor`).
    #[serde(default = "nan")]
    pub oracle_no_loser_system_speedup: f64,
    /// The floor that bound holds every app to (1 when feasible).
    #[serde(default = "nan")]
    pub oracle_no_loser_floor: f64,
    /// Whether rᵢ ≥ 1 for every app is feasible in the fluid model.
    #[serde(default)]
    pub oracle_no_loser_floor_feasible: bool,
    /// The no-loser bound with the rows every schedule obeys on a
    /// single-slot non-preemptive queue (an app's places in flight overlap
    /// another app's task there only with their own copies): still an upper
    /// bound, tighter where short tasks share a queue with long ones. Its
    /// floor is `oracle_queue_aware_floor` (1, or the largest common floor
    /// under these rows).
    #[serde(default = "nan")]
    pub oracle_queue_aware_system_speedup: f64,
    #[serde(default = "nan")]
    pub oracle_queue_aware_floor: f64,
    /// Units in machine order and apps in scenario order (for plots).
    pub units: Vec<String>,
    pub apps: Vec<String>,
    pub results: Vec<PolicyResult>,
    /// `hetsched` and `hetsched-pf` with every prediction off by up to
    /// ±`model_error` (only for scenarios that list `model_error_sweep`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prediction_error_sweep: Vec<SweepPoint>,
}

/// One policy at one model error.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepPoint {
    pub model_error: f64,
    pub policy: String,
    pub system_speedup: f64,
    pub min_relative: f64,
    /// Of the predicted turnarounds, against what happened.
    pub mean_prediction_error: Option<f64>,
}

fn nan() -> f64 {
    f64::NAN
}

/// One placement policy's outcome.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PolicyResult {
    pub policy: String,
    /// Geometric mean over apps of `relative`.
    pub system_speedup: f64,
    /// Smallest `relative` over apps.
    pub min_relative: f64,
    /// Completed tasks per simulated second, all apps together.
    pub tasks_per_s: f64,
    /// `system_speedup / oracle_system_speedup`.
    pub fraction_of_oracle: f64,
    /// Times an app's consecutive tasks ran on different units, per simulated second.
    pub placement_changes_per_s: f64,
    /// Mean |predicted − actual| / actual turnaround of the placement model, when it predicts.
    pub mean_prediction_error: Option<f64>,
    pub apps: BTreeMap<String, AppResult>,
    /// Per unit, the fraction of its capacity each app used (Rinnegan Fig. 6).
    pub unit_time: BTreeMap<String, BTreeMap<String, f64>>,
    /// How long placement took to settle after each app arrival or
    /// departure (`crate::convergence`); absent when the scenario has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub convergence: Vec<ConvergenceEvent>,
    /// The largest `max_settle_s` over `convergence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_settle_s: Option<f64>,
    /// hetsched-pf: wall-clock microseconds of the coordinator's solves in
    /// the run, median and 99th percentile. The only figures of a report
    /// that differ between two runs with the same seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordination_solve_us_p50: Option<WallClock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordination_solve_us_p99: Option<WallClock>,
    /// Which unit each app used over time (Rinnegan Fig. 3). Not in `--json`.
    #[serde(skip)]
    pub timeline: Vec<TimelineSegment>,
}

/// A figure measured on the host's clock, not simulated: it varies from
/// run to run, so its `Debug` form leaves the value out (reproducibility
/// checks compare `Debug` forms); it serialises as the bare number.
#[derive(Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct WallClock(pub f64);

impl std::fmt::Debug for WallClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WallClock(..)")
    }
}

/// One app under one policy.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AppResult {
    pub tasks_per_s: f64,
    /// `tasks_per_s` ÷ the same app's `tasks_per_s` under `native`.
    pub relative: f64,
    pub tasks: u64,
    pub mean_turnaround_ms: f64,
    /// How often consecutive tasks of this app changed unit.
    pub unit_changes: u64,
    /// Tasks the app issued before its first run of 10 consecutive tasks on
    /// one unit (how fast its placement settled; all its tasks if it never did).
    pub settled_after_tasks: u64,
    /// Fraction of this app's tasks that ran on each unit.
    pub unit_mix: BTreeMap<String, f64>,
    /// How it fared against its throughput goal, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<GoalResult>,
}

/// An app against its throughput goal, judged every optimizer period
/// (0.5 s) it was alive in the measured window. A period meets the goal
/// when it reaches 95 % of it (the optimizer's tolerance).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GoalResult {
    pub target_tasks_per_s: f64,
    pub periods: u64,
    pub periods_met: u64,
    /// Seconds from the app's start to the end of its first period that
    /// met the goal; absent if none did.
    pub time_to_goal_s: Option<f64>,
    /// Periods below the goal after it was first met.
    pub misses_after_goal: u64,
    /// (end of period, simulated s; tasks per second achieved in it).
    pub achieved: Vec<(f64, f64)>,
    /// After its last period: the CUSTOM shares its optimizer held (0: its
    /// starting class) and the fraction of its work it did per task.
    pub last_shares: u32,
    pub last_work_factor: f64,
}

/// Settling after one app arrived or left (definition: `crate::convergence`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConvergenceEvent {
    /// Simulated time of the event (warm-up included).
    pub at_s: f64,
    /// `arrive` or `leave`.
    pub event: String,
    /// The app that arrived or left.
    pub app: String,
    /// End of the interval judged: the next event, or the end of the run.
    pub until_s: f64,
    /// Per app alive over the whole interval, seconds from the event until
    /// its per-unit placement fractions stayed within tolerance of where
    /// they ended up.
    pub settle_s: BTreeMap<String, f64>,
    /// Apps that never settled (their `settle_s` is the whole interval).
    pub unsettled: Vec<String>,
    /// The largest `settle_s`.
    pub max_settle_s: f64,
    /// hetsched-pf: seconds from the event until the coordinator's last
    /// change of published targets in the interval (0 if none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets_settle_s: Option<f64>,
    /// hetsched-pf: re-solves in the interval that moved some app's targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_changes: Option<u64>,
}

/// An interval during which an app's tasks ran on one unit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineSegment {
    pub app: String,
    pub unit: String,
    pub start_s: f64,
    pub end_s: f64,
}
