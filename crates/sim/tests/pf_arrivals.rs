//! Issue 10's stability requirement on `pf-arrivals` (DXT arrives at 3 s,
//! lavaMD leaves at 6 s): hetsched-pf's placement settles within 1 s of
//! each event, and the convergence metric tells it from selfish placement.
//! Measured (seeds 1–3, release): hetsched-pf settles in 0.00 / 0.09 /
//! 0.00 s, its targets stop moving 0.08 / 0.09 / 0.09 s after the arrival
//! (DXT's profiling, then one refresh) and at the first refresh after the
//! departure; min rᵢ 1.04 / 1.06 / 1.05; 0.2 / 2.2 / 0.2 placement
//! changes/s. Plain hetsched: 4.00 / 3.77 / 4.00 s, some apps never
//! settling.

use hetsched_sim::catalog;
use hetsched_sim::report::{PolicyResult, ScenarioReport};
use hetsched_sim::run::run_scenario;

fn run(seed: u64) -> ScenarioReport {
    let sc = catalog::load("pf-arrivals").unwrap_or_else(|e| panic!("{e}"));
    run_scenario(&sc, seed, &mut |_, _| {})
}

fn policy<'a>(r: &'a ScenarioReport, name: &str) -> &'a PolicyResult {
    r.results
        .iter()
        .find(|p| p.policy == name)
        .unwrap_or_else(|| panic!("{} has no policy {name}", r.scenario))
}

#[test]
fn pf_settles_within_a_second_of_every_arrival_and_departure() {
    for seed in 1..=3 {
        let r = run(seed);
        let pf = policy(&r, "hetsched-pf");
        let events: Vec<(&str, &str, f64)> = pf
            .convergence
            .iter()
            .map(|e| (e.event.as_str(), e.app.as_str(), e.at_s))
            .collect();
        assert_eq!(
            events,
            [("arrive", "dxt", 3.0), ("leave", "lavamd", 6.0)],
            "seed {seed}"
        );
        // Every app alive over the interval is judged: six after the
        // arrival, five after the departure.
        assert_eq!(pf.convergence[0].settle_s.len(), 6, "seed {seed}");
        assert_eq!(pf.convergence[1].settle_s.len(), 5, "seed {seed}");
        assert!(!pf.convergence[1].settle_s.contains_key("lavamd"));
        for e in &pf.convergence {
            assert!(e.unsettled.is_empty(), "seed {seed}: {e:?}");
            // Measured at most 0.09 s (0.28 s in an earlier version, when
            // the targets that replaced the newcomer's first were replaced
            // once more as its models settled); the issue asks for 1 s.
            assert!(e.max_settle_s <= 0.5, "seed {seed}: {e:?}");
            // Targets: measured at most 0.09 s after the event.
            let targets = e.targets_settle_s.expect("hetsched-pf reports targets");
            assert!(targets <= 0.5, "seed {seed}: {e:?}");
            assert!(
                e.target_changes.is_some_and(|n| n >= 1),
                "seed {seed}: {e:?}"
            );
        }
        let max = pf.max_settle_s.expect("events, so a maximum");
        assert!(max <= 1.0, "seed {seed}: hetsched-pf settled in {max} s");
        assert!(
            pf.min_relative >= 0.98,
            "seed {seed}: min rel {:.3}",
            pf.min_relative
        );
        assert!(
            pf.placement_changes_per_s <= 30.0,
            "seed {seed}: {:.1} changes/s",
            pf.placement_changes_per_s
        );
        // The metric is not blind: selfish placement keeps wandering
        // (measured 3.77–4.00 s) and native never moves.
        let het = policy(&r, "hetsched");
        assert!(
            het.max_settle_s.is_some_and(|s| s > 1.0),
            "seed {seed}: hetsched {:?}",
            het.max_settle_s
        );
        assert_eq!(policy(&r, "native").max_settle_s, Some(0.0));
        // The bounds span the window phase by phase (five apps, six, five
        // again) and stay bounds: measured 89–92 % of the queue-aware one.
        let qa = r.oracle_queue_aware_system_speedup;
        assert!(
            qa <= r.oracle_no_loser_system_speedup * (1.0 + 1e-6)
                && r.oracle_no_loser_system_speedup <= r.oracle_system_speedup * (1.0 + 1e-6),
            "seed {seed}: bounds {qa} / {} / {}",
            r.oracle_no_loser_system_speedup,
            r.oracle_system_speedup
        );
        assert!(
            pf.system_speedup <= qa && pf.system_speedup >= 0.85 * qa,
            "seed {seed}: hetsched-pf {:.3}, queue-aware bound {qa:.3}",
            pf.system_speedup
        );
        // Only hetsched-pf has targets.
        assert!(het.convergence.iter().all(|e| e.targets_settle_s.is_none()));
    }
}

#[test]
fn scenarios_without_arrivals_report_no_convergence() {
    let sc = catalog::load("rinnegan-ping-pong").unwrap_or_else(|e| panic!("{e}"));
    let r = run_scenario(&sc, 1, &mut |_, _| {});
    for p in &r.results {
        assert!(p.convergence.is_empty() && p.max_settle_s.is_none());
    }
    let json = serde_json::to_string(&r).unwrap();
    assert!(!json.contains("max_settle_s"));
}
