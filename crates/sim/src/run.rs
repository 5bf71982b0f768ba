//! Runs every strategy of a scenario and assembles the report.

use crate::engine;
use crate::metrics::ReportApp;
use crate::oracle;
use crate::report::ScenarioReport;
use crate::scenario::Scenario;
use crate::strategy::StrategyKind;

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
    ScenarioReport {
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
