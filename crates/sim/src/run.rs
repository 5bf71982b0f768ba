//! Runs every strategy of a scenario and assembles the report.

use crate::engine;
use crate::metrics::ReportApp;
use crate::oracle;
use crate::report::{ScenarioReport, SweepPoint};
use crate::scenario::Scenario;
use crate::strategy::{PfJudge, Stabilisers, StrategyKind};

/// Progress of a scenario run: which strategy, and how far it is (0..=1).
pub type Progress<'a> = &'a mut dyn FnMut(&str, f64);

/// Runs `native` first (the baseline of every relative figure), then the
/// scenario's other strategies, each on the same seeded workload.
pub fn run_scenario(sc: &Scenario, seed: u64, progress: Progress) -> ScenarioReport {
    let native_name = StrategyKind::Native.name();
    let native_metrics = engine::run(sc, StrategyKind::Native, seed, &mut |f| {
        progress(&native_name, f)
    });
    let native = native_metrics.tasks_per_s();
    let report_apps = ReportApp::for_scenario(sc);
    let bound = oracle::bound(sc, &report_apps, &native);
    let no_loser = oracle::no_loser_bound(sc, &report_apps, &native);
    let queue_aware = oracle::queue_aware_bound(sc, &report_apps, &native);
    let mut results = vec![native_metrics.into_result(&native, bound.system_speedup)];
    for strategy in sc.strategies.iter().filter(|s| **s != StrategyKind::Native) {
        let name = strategy.name();
        let metrics = engine::run(sc, *strategy, seed, &mut |f| progress(&name, f));
        results.push(metrics.into_result(&native, bound.system_speedup));
    }
    let mut prediction_error_sweep = Vec::new();
    if !sc.model_error_sweep.is_empty() {
        // The runs above are the sweep's point at the scenario's own error.
        for r in results
            .iter()
            .filter(|r| SWEPT.iter().any(|s| s.name() == r.policy))
        {
            prediction_error_sweep.push(SweepPoint {
                model_error: sc.model_error,
                policy: r.policy.clone(),
                system_speedup: r.system_speedup,
                min_relative: r.min_relative,
                mean_prediction_error: r.mean_prediction_error,
            });
        }
        prediction_error_sweep.extend(sweep_model_error(
            sc,
            seed,
            &native,
            bound.system_speedup,
            progress,
        ));
    }
    ScenarioReport {
        prediction_error_sweep,
        scenario: sc.name.clone(),
        description: sc.description.clone(),
        seed,
        measured_s: sc.duration_ns as f64 / 1e9,
        oracle_system_speedup: bound.system_speedup,
        oracle_apps: report_apps
            .iter()
            .map(|a| a.name.clone())
            .zip(bound.relative)
            .collect(),
        oracle_no_loser_system_speedup: no_loser.system_speedup,
        oracle_no_loser_floor: no_loser.floor,
        oracle_no_loser_floor_feasible: no_loser.floor_feasible,
        oracle_queue_aware_system_speedup: queue_aware.system_speedup,
        oracle_queue_aware_floor: queue_aware.floor,
        units: sc.machine.units.iter().map(|u| u.name.clone()).collect(),
        apps: report_apps.into_iter().map(|a| a.name).collect(),
        results,
    }
}

/// The strategies a model-error sweep runs.
const SWEPT: [StrategyKind; 2] = [
    StrategyKind::Hetsched(Stabilisers::ALL),
    StrategyKind::HetschedPf(PfJudge::Replay),
];

/// `hetsched` and `hetsched-pf` again at each of the scenario's
/// `model_error_sweep` errors (Rinnegan §4.6), against the same native run.
fn sweep_model_error(
    sc: &Scenario,
    seed: u64,
    native: &[f64],
    bound: f64,
    progress: Progress,
) -> Vec<SweepPoint> {
    let mut points = Vec::new();
    for &error in sc
        .model_error_sweep
        .iter()
        .filter(|e| **e != sc.model_error)
    {
        let mispredicted = Scenario {
            model_error: error,
            ..sc.clone()
        };
        for strategy in SWEPT {
            let name = format!("{} ±{:.0} %", strategy.name(), error * 100.0);
            let result = engine::run(&mispredicted, strategy, seed, &mut |f| progress(&name, f))
                .into_result(native, bound);
            points.push(SweepPoint {
                model_error: error,
                policy: result.policy,
                system_speedup: result.system_speedup,
                min_relative: result.min_relative,
                mean_prediction_error: result.mean_prediction_error,
            });
        }
    }
    points
}
