//! hetsched-pf weighs apps by their NORMAL shares, as the daemon does
//! (`hetsched_core::coordination::coordination_weight`): two identical
//! apps contending for one fast device, one with three times the shares
//! on every unit, the other with the default.

use hetsched_sim::engine;
use hetsched_sim::scenario::parse;
use hetsched_sim::strategy::StrategyKind;

fn scenario(heavy_shares: u32) -> String {
    format!(
        r#"
name = "pf-weights"
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
copy = {{ latency_us = 10, in_gb_s = 6, out_gb_s = 6 }}

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
    let thr = engine::run(&sc, StrategyKind::HetschedPf, 1, &mut |_| {}).tasks_per_s();
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
