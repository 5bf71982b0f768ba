//! The coordinator's solves: the fluid-judged pick (`solve_targets_waiting`)
//! against the replay-judged one (`solve_targets_replayed`) on a
//! six-app, four-unit machine shaped like `rinnegan-contention` (a
//! two-core processor-shared CPU group and three FIFO devices, or devices
//! that may run short-first), and the replay alone; then the replay-judged
//! solve against the number of applications and units (`solve_scaling`):
//! 8 and 32 apps on a CPU group and 4 devices, the apps' times drawn
//! from a seeded stream as `hetsched sim random` draws them; the
//! fluid-judged solve and the targets' program alone up to 256 apps.

use criterion::{Criterion, criterion_group, criterion_main};
use hetsched_core::coordination::{
    AppDemand, JudgeBudget, UnitSupply, WarmOutcome, pick_targets_waiting, solve_targets_replayed,
    solve_targets_waiting, solve_targets_warm,
};
use hetsched_core::fairness::{solve_no_loser_conic, solve_no_loser_weighted};
use hetsched_core::replay::{ReplayBudget, replay, replay_native};
use std::hint::black_box;
use std::time::Duration;

#[path = "common/mix.rs"]
mod mix;
use mix::mix;
#[path = "common/programs.rs"]
mod programs;
use programs::{PROGRAM_SIZES, program};
#[path = "common/drift.rs"]
mod drift;
use drift::drifted;

fn machine() -> (Vec<UnitSupply>, Vec<AppDemand>) {
    let units = vec![
        UnitSupply::processor_shared(2.0),
        UnitSupply::queue(1.0),
        UnitSupply::queue(1.0),
        UnitSupply::queue(1.0),
    ];
    // Per app: exec ms on (cpu, gpu-big, gpu-wimpy, accel), copy ms.
    let table: [([f64; 4], f64); 6] = [
        ([4.0, 0.5, 0.36, 0.9], 0.75),
        ([0.6, 1.1, 2.6, 3.0], 0.4),
        ([22.0, 2.7, 9.4, 5.0], 1.2),
        ([41.0, 4.9, 14.0, 9.0], 0.8),
        ([67.0, 25.0, 40.0, 60.0], 2.0),
        ([249.0, 12.0, 34.0, 62.0], 2.5),
    ];
    let apps = table
        .iter()
        .map(|(exec, copy)| AppDemand {
            exec_ns: exec.iter().map(|ms| Some(ms * 1e6)).collect(),
            overhead_ns: vec![0.0, copy * 1e6, copy * 1e6, copy * 1e6],
            in_flight: 2.0,
            weight: 1.0,
            declared_native: Some(1),
            native_trusted: false,
            native_in_flight: None,
            exec_samples: Vec::new(),
        })
        .collect();
    (units, apps)
}

fn solves(c: &mut Criterion) {
    let (units, apps) = machine();
    c.bench_function("coordination/solve_fluid_judged_6x4", |b| {
        b.iter(|| solve_targets_waiting(black_box(&apps), &units, 1.05, 3, true).unwrap())
    });
    c.bench_function("coordination/solve_replay_judged_6x4", |b| {
        b.iter(|| {
            solve_targets_replayed(
                black_box(&apps),
                &units,
                1.05,
                3,
                true,
                None,
                JudgeBudget::default(),
            )
            .unwrap()
        })
    });
    // The devices may run short-first: every candidate is replayed again
    // with them so, and the best has each queue's order flipped once.
    let short_first: Vec<UnitSupply> = units.iter().map(|u| u.with_short_first()).collect();
    c.bench_function("coordination/solve_replay_judged_short_first_6x4", |b| {
        b.iter(|| {
            solve_targets_replayed(
                black_box(&apps),
                &short_first,
                1.05,
                3,
                true,
                None,
                JudgeBudget::default(),
            )
            .unwrap()
        })
    });
    c.bench_function("coordination/replay_native_6x4", |b| {
        b.iter(|| replay_native(black_box(&apps), &units, ReplayBudget::default()))
    });
    // One candidate of a 32-app solve: every app spread evenly over the
    // units it can use, unpaced (a replay runs to its 80,000-event cap
    // here, as from 32 apps on).
    let (supply, demand) = mix(32, 5, 1);
    let even: Vec<Vec<f64>> = demand
        .iter()
        .map(|_| vec![1.0 / supply.len() as f64; supply.len()])
        .collect();
    c.bench_function("coordination/replay_plan_32x5", |b| {
        b.iter(|| {
            replay(
                black_box(&demand),
                &supply,
                &even,
                None,
                ReplayBudget::default(),
            )
        })
    });
}

/// A warm re-solve ([`solve_targets_warm`]) of `mix`'s full pick, every
/// app's times drifted by a factor within `1 ± drift`.
fn bench_warm(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    mix: (&[UnitSupply], &[AppDemand]),
    drift: f64,
) {
    let (supply, demand) = mix;
    let (_, shape) = pick_targets_waiting(demand, supply, 1.05, 3, true).unwrap();
    let drifted = drifted(demand, drift);
    group.bench_function(name, |b| {
        b.iter(|| {
            let out = solve_targets_warm(black_box(&drifted), supply, 1.05, &shape).unwrap();
            assert!(matches!(out, WarmOutcome::Solved(..)));
            out
        })
    });
}

fn solve_scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("coordination/solve_scaling");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for (apps, units) in [(8, 5), (32, 5)] {
        let (supply, demand) = mix(apps, units, 1);
        group.bench_function(format!("{apps}x{units}"), |b| {
            b.iter(|| {
                solve_targets_replayed(
                    black_box(&demand),
                    &supply,
                    1.05,
                    3,
                    true,
                    None,
                    JudgeBudget::default(),
                )
                .unwrap()
            })
        });
    }
    // The fluid-judged pick (the daemon's `coordination = "pf"`), whose
    // exclusion step solves up to `FLUID_EXCLUSION_CANDIDATES` candidates.
    for (apps, units) in [(32, 9), (64, 9), (128, 9)] {
        let (supply, demand) = mix(apps, units, 1);
        group.bench_function(format!("fluid/{apps}x{units}"), |b| {
            b.iter(|| solve_targets_waiting(black_box(&demand), &supply, 1.05, 3, true).unwrap())
        });
        // The coordinator's warm re-solve between full picks: every app's
        // times drifted by up to ±5 %, solved in the last pick's shape.
        let name = format!("fluid_warm/{apps}x{units}");
        bench_warm(&mut group, &name, (&supply, &demand), 0.05);
    }
    // Other mixes at 128 × 9, their times drifted by up to ±10 % (as far
    // as `WARM_MODEL_DRIFT` lets the shape stand): the spread of warm
    // re-solves.
    for seed in [2, 3, 4] {
        let (supply, demand) = mix(128, 9, seed);
        let name = format!("fluid_warm_drift10/seed{seed}");
        bench_warm(&mut group, &name, (&supply, &demand), 0.1);
    }
    // The no-loser proportional-fair solve alone, as every candidate of
    // the coordinator's solve makes it: floor 1.05, no extra limits (the
    // barrier method from `BARRIER_MIN_APPS` apps on), and by Clarabel.
    for (apps, units) in PROGRAM_SIZES {
        let (p, weights) = program(apps, units);
        group.bench_function(format!("pf/{apps}x{units}"), |b| {
            b.iter(|| solve_no_loser_weighted(black_box(&p), 1.05, &[], &weights).unwrap())
        });
        // Clarabel on the same problem, whatever the size.
        group.bench_function(format!("pf_conic/{apps}x{units}"), |b| {
            b.iter(|| solve_no_loser_conic(black_box(&p), 1.05, &[], &weights).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, solves, solve_scaling);
criterion_main!(benches);
