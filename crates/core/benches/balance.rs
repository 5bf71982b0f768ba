//! Cost of one balancing decision: SmartBalance annealing at 256 threads ×
//! 128 cores (target ≤ 1 ms, within 2 % of a known optimum) and Kinship
//! rematch at 48 × 12 (target ≤ 18 µs; Montage took 180 µs) and 1024 × 256
//! (target ≤ 2 ms). The optimality gap of each annealing case is printed
//! once before timing, from the same seeds.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use hetsched_core::balance::objective::evaluate;
use hetsched_core::balance::planted::planted;
use hetsched_core::balance::{
    AnnealParams, Category, Hint, Kinship, KinshipState, Objective, PerCoreEfficiency,
    SmartBalance, Throughput,
};
use std::hint::black_box;

fn gap<O: Objective + Clone>(name: &str, objective: O, per_core: usize, cores: usize) {
    let mut worst: f64 = 0.0;
    let mut sum = 0.0;
    const SEEDS: u64 = 10;
    for seed in 0..SEEDS {
        let (input, optimum) = planted(per_core, cores, 4, seed);
        let sb = SmartBalance::new(
            objective.clone(),
            AnnealParams::for_size(input.threads.len(), cores),
        );
        let got = sb.allocate(&input, seed).expect("valid input");
        let best = evaluate(&input, &objective, &optimum);
        let g = 1.0 - evaluate(&input, &objective, &got) / best;
        worst = worst.max(g);
        sum += g;
    }
    println!(
        "anneal {name} {}x{cores}: gap to optimum mean {:.3} %, worst {:.3} % over {SEEDS} seeds",
        per_core * cores,
        100.0 * sum / SEEDS as f64,
        100.0 * worst
    );
}

fn anneal(c: &mut Criterion) {
    gap("throughput", Throughput, 2, 128);
    gap("per-core-ips/w", PerCoreEfficiency::default(), 2, 128);
    let mut group = c.benchmark_group("anneal");
    let (input, _) = planted(2, 128, 4, 1);
    let params = AnnealParams::for_size(256, 128);
    println!("anneal 256x128: {} iterations", params.max_iter);
    let tp = SmartBalance::new(Throughput, params);
    group.bench_function(BenchmarkId::new("throughput", "256x128"), |b| {
        b.iter(|| tp.allocate(black_box(&input), 7).unwrap())
    });
    let eff = SmartBalance::new(PerCoreEfficiency::default(), params);
    group.bench_function(BenchmarkId::new("per-core-ips-per-watt", "256x128"), |b| {
        b.iter(|| eff.allocate(black_box(&input), 7).unwrap())
    });
    group.finish();
}

/// A rematch input: `threads` × `cores` with four kinds, a quarter of the
/// cores AES-capable, a mix of hints and categories, and some faults.
fn kinship_input(threads: usize, cores: usize) -> hetsched_core::balance::BalanceInput {
    let (mut input, _) = planted(1, cores, 4, 3);
    for (c, core) in input.cores.iter_mut().enumerate() {
        if c % 4 == 0 {
            core.caps = hetsched_core::unit::Capabilities::AES;
        }
    }
    let template = input.threads[0].clone();
    input.threads = (0..threads)
        .map(|i| {
            let mut t = template.clone();
            t.id = i as u64;
            t.current = Some(i % cores);
            t.utilisation = [1.0, 0.6, 0.3][i % 3];
            t.ips = (0..4).map(|k| 1e9 * (1.0 + ((i + k) % 5) as f64)).collect();
            t.hint = [Hint::MOSTLY_CPU, Hint::MOSTLY_IO, Hint::UNKNOWN][i % 3];
            if i % 7 == 0 {
                t.category = Category::CRYPTO;
            }
            if i % 11 == 0 {
                t.faults = vec![0, 3, 0, 0];
            }
            t
        })
        .collect();
    input
}

fn rematch(c: &mut Criterion) {
    let mut group = c.benchmark_group("kinship-rematch");
    let k = Kinship::default();
    for (threads, cores) in [(48, 12), (1024, 256)] {
        let input = kinship_input(threads, cores);
        group.bench_function(
            BenchmarkId::from_parameter(format!("{threads}x{cores}")),
            |b| {
                let mut state = KinshipState::default();
                b.iter(|| k.allocate(black_box(&input), &mut state).unwrap())
            },
        );
    }
    group.finish();
}

criterion_group!(benches, anneal, rematch);
criterion_main!(benches);
