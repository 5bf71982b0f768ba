//! hetsched-pf weighs apps by their NORMAL shares, as the daemon does
//! (`hetsched_core::coordination::coordination_weights`): two identical
//! apps contending for one fast device, one with three times the shares
//! on every unit, the other with the default.

use hetsched_sim::engine;
use hetsched_sim::metrics::ReportApp;
use hetsched_sim::oracle;
use hetsched_sim::scenario::parse;
use hetsched_sim::strategy::{PfJudge, StrategyKind};

/// Both scenarios' run and machine: a two-core CPU and one GPU.
const MACHINE: &str = r#"
duration_s = 3
warmup_s = 1
policies = ["native", "hetsched-pf"]

[[units]]
name = "cpu"
class = "cpu"
policy = "time-share"
dispatch_us = 5
slots = 2

[[units]]
name = "gpu"
class = "gpu"
policy = "fifo"
dispatch_us = 20
copy = { latency_us = 10, in_gb_s = 6, out_gb_s = 6 }
"#;

fn scenario(heavy_shares: u32) -> String {
    format!(
        r#"name = "pf-weights"
{MACHINE}
[[apps]]
name = "heavy"
bytes = {{ kib = 64 }}
exec_ms = {{ cpu = 0.8, gpu = 0.4 }}
in_flight = 2
shares = {{ cpu = {heavy_shares}, gpu = {heavy_shares} }}

[[apps]]
name = "light"
bytes = {{ kib = 64 }}
exec_ms = {{ cpu = 0.8, gpu = 0.4 }}
in_flight = 2
"#
    )
}

/// Tasks/s of (heavy, light) under hetsched-pf.
fn rates(heavy_shares: u32) -> (f64, f64) {
    let sc = parse("pf-weights.toml", &scenario(heavy_shares)).expect("scenario parses");
    let thr = engine::run(
        &sc,
        StrategyKind::HetschedPf(PfJudge::Replay),
        1,
        &mut |_| {},
    )
    .tasks_per_s();
    (thr[0], thr[1])
}

#[test]
fn more_normal_shares_get_more_of_the_contended_unit() {
    let (heavy, light) = rates(30);
    let (even_a, even_b) = rates(10);
    // Equal shares: equal rates (the apps are identical).
    assert!(
        (even_a - even_b).abs() < 0.05 * even_a.max(even_b),
        "equal shares: {even_a:.0} vs {even_b:.0}"
    );
    eprintln!("equal shares: {even_a:.0} / {even_b:.0}; 30 vs 10: {heavy:.0} / {light:.0} tasks/s");
    // Three times the shares: clearly more.
    assert!(
        heavy > 1.2 * light,
        "30 vs 10 shares: {heavy:.0} vs {light:.0} tasks/s"
    );
}

/// Two identical apps at CUSTOM 70 / 30 on every unit beside six NORMAL
/// ones, all alike: the CUSTOM apps weigh 1.4 / 0.6 and the NORMAL ones,
/// entitled to nothing where CUSTOM takes whole units, the least weight.
/// Each is compared with its native throughput and the split with its
/// entitlement.
fn weighted_mix() -> String {
    let mut s = format!("name = \"pf-weights-custom\"\n{MACHINE}");
    let custom = |shares: u32| format!("custom\"\nshares = {{ cpu = {shares}, gpu = {shares} }}");
    let apps = [
        ("c70".to_string(), custom(70)),
        ("c30".to_string(), custom(30)),
    ]
    .into_iter()
    .chain((0..6).map(|i| (format!("n{i}"), "normal\"".to_string())));
    for (name, class) in apps {
        s.push_str(&format!(
            "\n[[apps]]\nname = \"{name}\"\nbytes = {{ kib = 64 }}\nexec_ms = {{ cpu = 0.8, gpu = 0.2 }}\nin_flight = 2\nclass = \"{class}\n"
        ));
    }
    s
}

#[test]
fn custom_shares_weigh_inside_the_coordination() {
    let sc = parse("pf-weights-custom.toml", &weighted_mix()).expect("scenario parses");
    let native = engine::run(&sc, StrategyKind::Native, 1, &mut |_| {}).tasks_per_s();
    let pf = engine::run(
        &sc,
        StrategyKind::HetschedPf(PfJudge::Replay),
        1,
        &mut |_| {},
    )
    .tasks_per_s();
    let relative: Vec<f64> = pf.iter().zip(&native).map(|(p, n)| p / n).collect();
    eprintln!("native {native:.0?}\npf     {pf:.0?}\nrelative {relative:.2?}");
    // Above native, the CUSTOM 70 app gets more than the CUSTOM 30 one.
    assert!(
        pf[0] > 1.3 * pf[1],
        "70 vs 30: {:.0} vs {:.0}",
        pf[0],
        pf[1]
    );
    // The floor: nobody below 0.98 of native (measured: the NORMAL apps
    // at 1.00-1.05, the CUSTOM ones at 4.08 and 1.82).
    for (i, r) in relative.iter().enumerate() {
        assert!(*r >= 0.98, "app {i} at {r:.2} of native");
    }
    // The bounds are the weighted optimum: the same weights, and above the
    // floor the CUSTOM 70 app gets more than the CUSTOM 30 one there too.
    let apps = ReportApp::for_scenario(&sc);
    let w = oracle::weights(&sc, &apps);
    assert_eq!(w.len(), 8);
    assert!(
        (w[0] - 1.4).abs() < 1e-9 && (w[1] - 0.6).abs() < 1e-9,
        "{w:?}"
    );
    let bound = oracle::queue_aware_bound(&sc, &apps, &native);
    eprintln!("queue-aware bound, weighted: {:.2?}", bound.relative);
    assert!(bound.floor_feasible);
    assert!(bound.relative[0] > 1.3 * bound.relative[1], "{bound:?}");
}
