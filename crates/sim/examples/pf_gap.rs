//! Where hetsched-pf loses against the no-loser bound (issue 10).
//!
//! `cargo run --release -p hetsched-sim --example pf_gap -- SCENARIO SEED`
//! prints, per app, the bound's relative throughput (no-loser and
//! queue-aware) and unit-time shares beside what `hetsched-pf` achieved; `SCENARIO` is a built-in name, a
//! file, or `mix:N` (random mix N of `tests/pf_mixes.rs`).
//! `... --example pf_gap -- mixes [POLICY [all]]` summarises all random
//! mixes (default policy `hetsched-pf`) against the no-loser and the
//! queue-aware bound and lists the worst ones (`all`: every mix).
//! `... --example pf_gap -- plot OUT.svg` draws every mix's lowest app
//! against its fraction of the no-loser bound, for `hetsched-pf` and
//! selfish `hetsched` (docs/img/pf-mixes.svg).

#[path = "../tests/mixgen/mod.rs"]
mod mixgen;

use hetsched_core::fairness::solve_no_loser;
use hetsched_sim::catalog;
use hetsched_sim::engine;
use hetsched_sim::metrics::ReportApp;
use hetsched_sim::oracle;
use hetsched_sim::scenario::Scenario;
use hetsched_sim::strategy::{PfJudge, StrategyKind};

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
    let q = oracle::queue_aware_bound(sc, &apps, &native);
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
    println!(
        "  queue-aware bound {:.3} (floor {:.2}, feasible {}): {:.3} of it",
        q.system_speedup,
        q.floor,
        q.floor_feasible,
        r.system_speedup / q.system_speedup
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
            "  {:<10} r bound {:6.2} queue-aware {:6.2} got {:6.2} ({:5.2})  thr {:8.1}/{:8.1}  ta {:7.3} ms  exec ms [{}]  unit time bound/got [{}]",
            a.name,
            s.solution.relative[i],
            q.relative[i],
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

struct MixRow {
    mix: u64,
    /// Of the no-loser bound.
    fraction: f64,
    min: f64,
    feasible: bool,
    apps: usize,
    units: usize,
    /// Of the queue-aware bound.
    queue_fraction: f64,
    /// Queue-aware bound ÷ no-loser bound.
    queue_vs_fluid: f64,
    queue_floor: f64,
}

fn mix_rows(policy: StrategyKind) -> Vec<MixRow> {
    let mut rows = Vec::new();
    for n in 0..mixgen::MIXES {
        let sc = mixgen::random_mix(n);
        let seed = n + 1;
        let native = engine::run(&sc, StrategyKind::Native, seed, &mut |_| {}).tasks_per_s();
        let apps = ReportApp::for_scenario(&sc);
        let bound = oracle::no_loser_bound(&sc, &apps, &native);
        let queue = oracle::queue_aware_bound(&sc, &apps, &native);
        let thr = engine::run(&sc, policy, seed, &mut |_| {}).tasks_per_s();
        let rel: Vec<f64> = thr.iter().zip(&native).map(|(t, n)| t / n).collect();
        rows.push(MixRow {
            mix: n,
            fraction: geomean(&rel) / bound.system_speedup,
            min: rel.iter().copied().fold(f64::INFINITY, f64::min),
            feasible: bound.floor_feasible,
            apps: sc.apps.len(),
            units: sc.machine.units.len(),
            queue_fraction: geomean(&rel) / queue.system_speedup,
            queue_vs_fluid: queue.system_speedup / bound.system_speedup,
            queue_floor: queue.floor,
        });
    }
    rows
}

fn mixes(policy: StrategyKind, all: bool) {
    let rows = mix_rows(policy);
    let mean = |f: &dyn Fn(&MixRow) -> f64| rows.iter().map(f).sum::<f64>() / rows.len() as f64;
    let least = |f: &dyn Fn(&MixRow) -> f64| rows.iter().map(f).fold(f64::INFINITY, f64::min);
    let feasible: Vec<&MixRow> = rows.iter().filter(|r| r.feasible).collect();
    let lowest = feasible.iter().map(|r| r.min).fold(f64::INFINITY, f64::min);
    let below = feasible.iter().filter(|r| r.min < 0.98).count();
    println!(
        "{}: mean fraction {:.3}, worst {:.3}; floor feasible in {}: below 0.98 in {below}, lowest {lowest:.3}",
        policy.name(),
        mean(&|r| r.fraction),
        least(&|r| r.fraction),
        feasible.len()
    );
    println!(
        "  of the queue-aware bound: mean {:.3}, worst {:.3}; queue-aware bound / no-loser bound: mean {:.3}, lowest {:.3}",
        mean(&|r| r.queue_fraction),
        least(&|r| r.queue_fraction),
        mean(&|r| r.queue_vs_fluid),
        least(&|r| r.queue_vs_fluid)
    );
    if all {
        for r in &rows {
            println!(
                "  mix {:3}: fraction {:.3} min {:.3} feasible {} | queue-aware: fraction {:.3}, bound/no-loser {:.3}, floor {:.4}",
                r.mix,
                r.fraction,
                r.min,
                r.feasible,
                r.queue_fraction,
                r.queue_vs_fluid,
                r.queue_floor
            );
        }
        return;
    }
    let mut worst: Vec<&MixRow> = rows.iter().collect();
    worst.sort_by(|a, b| a.fraction.total_cmp(&b.fraction));
    for r in worst.iter().take(12) {
        println!(
            "  mix {:3}: fraction {:.3} min {:.3} feasible {} apps {} units {}",
            r.mix, r.fraction, r.min, r.feasible, r.apps, r.units
        );
    }
    let mut lows: Vec<&&MixRow> = feasible.iter().filter(|r| r.min < 0.98).collect();
    lows.sort_by(|a, b| a.min.total_cmp(&b.min));
    for r in lows.iter().take(8) {
        println!(
            "  floor miss mix {:3}: min {:.3} fraction {:.3}",
            r.mix, r.min, r.fraction
        );
    }
}

/// Lowest app (y, clipped to 1.6) against the fraction of the no-loser
/// bound (x), one point per mix and policy; filled where the fluid model
/// says the floor is feasible.
fn plot(path: &str) {
    use plotters::prelude::*;
    let series = [
        (
            "hetsched-pf",
            StrategyKind::HetschedPf(PfJudge::Replay),
            RGBColor(0x1f, 0x77, 0xb4),
        ),
        (
            "hetsched (selfish)",
            StrategyKind::parse("hetsched").expect("policy"),
            RGBColor(0xd6, 0x27, 0x28),
        ),
    ];
    let rows: Vec<(&str, RGBColor, Vec<MixRow>)> = series
        .iter()
        .map(|(name, kind, color)| (*name, *color, mix_rows(*kind)))
        .collect();
    let root = SVGBackend::new(path, (820, 560)).into_drawing_area();
    root.fill(&WHITE).expect("fill");
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "100 random mixes: lowest app vs. native against fraction of the no-loser bound",
            ("sans-serif", 18),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0f64..1.05, 0.0f64..1.6)
        .expect("chart");
    chart
        .configure_mesh()
        .x_desc("system speedup ÷ no-loser bound")
        .y_desc("lowest app ÷ its native throughput")
        .draw()
        .expect("mesh");
    chart
        .draw_series(LineSeries::new(
            [(0.0, 0.98), (1.05, 0.98)],
            BLACK.mix(0.5).stroke_width(1),
        ))
        .expect("floor line")
        .label("0.98 of native (the floor target)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK.mix(0.5)));
    for (name, color, rows) in &rows {
        let points = rows.iter().map(|r| {
            let style = if r.feasible {
                color.filled()
            } else {
                color.stroke_width(1)
            };
            Circle::new((r.fraction.min(1.05), r.min.min(1.6)), 4, style)
        });
        chart
            .draw_series(points)
            .expect("points")
            .label(format!(
                "{name} (filled: floor feasible in the fluid model)"
            ))
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .draw()
        .expect("legend");
    root.present().expect("write the SVG");
    println!("wrote {path}");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let policy = |i: usize| {
        args.get(i)
            .map(|n| StrategyKind::parse(n).expect("policy name"))
            .unwrap_or(StrategyKind::HetschedPf(PfJudge::Replay))
    };
    match args.first().map(String::as_str) {
        Some("mixes") => mixes(policy(1), args.get(2).is_some_and(|a| a == "all")),
        Some("plot") => plot(args.get(1).map_or("pf-mixes.svg", String::as_str)),
        Some(name) => {
            let seed = args.get(1).map_or(1, |s| s.parse().expect("seed"));
            detail(&load(name), seed, policy(2));
        }
        None => eprintln!(
            "usage: pf_gap SCENARIO|mix:N [SEED [POLICY]] | mixes [POLICY [all]] | plot OUT.svg"
        ),
    }
}
