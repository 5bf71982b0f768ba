//! Where hetsched-pf loses against the no-loser bound (issue 10).
//!
//! `cargo run --release -p hetsched-sim --example pf_gap -- SCENARIO SEED`
//! prints, per app, the bound's relative throughput and unit-time shares
//! beside what `hetsched-pf` achieved; `SCENARIO` is a built-in name, a
//! file, or `mix:N` (random mix N of `tests/pf_mixes.rs`).
//! `... --example pf_gap -- mixes [POLICY]` summarises all random mixes
//! (default policy `hetsched-pf`) and lists the worst ones.

#[path = "../tests/mixgen/mod.rs"]
mod mixgen;

use hetsched_core::fairness::solve_no_loser;
use hetsched_sim::catalog;
use hetsched_sim::engine;
use hetsched_sim::metrics::ReportApp;
use hetsched_sim::oracle;
use hetsched_sim::scenario::Scenario;
use hetsched_sim::strategy::StrategyKind;

fn load(name: &str) -> Scenario {
    match name.strip_prefix("mix:") {
        Some(n) => mixgen::random_mix(n.parse().expect("mix number")),
        None => catalog::load(name).unwrap_or_else(|e| panic!("{e}")),
    }
}

fn geomean(v: &[f64]) -> f64 {
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
}

fn detail(sc: &Scenario, seed: u64, policy: StrategyKind) {
    let native = engine::run(sc, StrategyKind::Native, seed, &mut |_| {}).tasks_per_s();
    let apps = ReportApp::for_scenario(sc);
    let p = oracle::problem(sc, &apps, &native);
    let s = solve_no_loser(&p).expect("bound solves");
    let m = engine::run(sc, policy, seed, &mut |_| {});
    let r = m.into_result(&native, f64::NAN);
    let units: Vec<&str> = sc.machine.units.iter().map(|u| u.name.as_str()).collect();
    println!(
        "{} seed {seed}: bound {:.3} (floor {:.2}, feasible {}), {} {:.3} = {:.3} of bound, min {:.3}, changes/s {:.1}",
        sc.name,
        s.solution.system_speedup,
        s.floor,
        s.floor_feasible,
        r.policy,
        r.system_speedup,
        r.system_speedup / s.solution.system_speedup,
        r.min_relative,
        r.placement_changes_per_s
    );
    for (i, a) in apps.iter().enumerate() {
        let spec = &sc.apps[a.app];
        let got = &r.apps[&a.name];
        let exec: Vec<String> = units
            .iter()
            .enumerate()
            .map(|(u, n)| match spec.exec_ns[u] {
                Some(e) => format!("{n}={:.2}", e / 1e6),
                None => format!("{n}=-"),
            })
            .collect();
        let share: Vec<String> = units
            .iter()
            .enumerate()
            .map(|(u, n)| {
                let bound = s.solution.allocation[i][u] / p.capacity[u];
                let real = r.unit_time[*n].get(&a.name).copied().unwrap_or(0.0);
                format!("{n} {bound:.3}/{real:.3}")
            })
            .collect();
        println!(
            "  {:<10} r bound {:6.2} got {:6.2} ({:5.2})  thr {:8.1}/{:8.1}  ta {:7.3} ms  exec ms [{}]  unit time bound/got [{}]",
            a.name,
            s.solution.relative[i],
            got.relative,
            got.relative / s.solution.relative[i],
            s.solution.throughput[i],
            got.tasks_per_s,
            got.mean_turnaround_ms,
            exec.join(" "),
            share.join(", ")
        );
    }
}

fn mixes(policy: StrategyKind) {
    let mut rows = Vec::new();
    for n in 0..mixgen::MIXES {
        let sc = mixgen::random_mix(n);
        let seed = n + 1;
        let native = engine::run(&sc, StrategyKind::Native, seed, &mut |_| {}).tasks_per_s();
        let apps = ReportApp::for_scenario(&sc);
        let bound = oracle::no_loser_bound(&sc, &apps, &native);
        let thr = engine::run(&sc, policy, seed, &mut |_| {}).tasks_per_s();
        let rel: Vec<f64> = thr.iter().zip(&native).map(|(t, n)| t / n).collect();
        let min = rel.iter().copied().fold(f64::INFINITY, f64::min);
        rows.push((
            n,
            geomean(&rel) / bound.system_speedup,
            min,
            bound.floor_feasible,
            sc.apps.len(),
            sc.machine.units.len(),
        ));
    }
    let mean = rows.iter().map(|r| r.1).sum::<f64>() / rows.len() as f64;
    let worst = rows.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
    let feasible: Vec<_> = rows.iter().filter(|r| r.3).cloned().collect();
    let lowest = feasible.iter().map(|r| r.2).fold(f64::INFINITY, f64::min);
    let below = feasible.iter().filter(|r| r.2 < 0.98).count();
    println!(
        "{}: mean fraction {mean:.3}, worst {worst:.3}; floor feasible in {}: below 0.98 in {below}, lowest {lowest:.3}",
        policy.name(),
        feasible.len()
    );
    rows.sort_by(|a, b| a.1.total_cmp(&b.1));
    for r in rows.iter().take(12) {
        println!(
            "  mix {:3}: fraction {:.3} min {:.3} feasible {} apps {} units {}",
            r.0, r.1, r.2, r.3, r.4, r.5
        );
    }
    let mut lows: Vec<_> = feasible.iter().filter(|r| r.2 < 0.98).collect();
    lows.sort_by(|a, b| a.2.total_cmp(&b.2));
    for r in lows.iter().take(8) {
        println!(
            "  floor miss mix {:3}: min {:.3} fraction {:.3}",
            r.0, r.2, r.1
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let policy = |i: usize| {
        args.get(i)
            .map(|n| StrategyKind::parse(n).expect("policy name"))
            .unwrap_or(StrategyKind::HetschedPf)
    };
    match args.first().map(String::as_str) {
        Some("mixes") => mixes(policy(1)),
        Some(name) => {
            let seed = args.get(1).map_or(1, |s| s.parse().expect("seed"));
            detail(&load(name), seed, policy(2));
        }
        None => eprintln!("usage: pf_gap SCENARIO|mix:N [SEED [POLICY]] | mixes [POLICY]"),
    }
}
