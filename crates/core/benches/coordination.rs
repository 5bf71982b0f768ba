//! The coordinator's solves: the fluid-judged pick (`solve_targets_waiting`)
//! against the replay-judged one (`solve_targets_replayed`) on a
//! six-app, four-unit machine shaped like `rinnegan-contention` (a
//! two-core processor-shared CPU group and three FIFO devices, or devices
//! that may run short-first), and the replay alone.

use criterion::{Criterion, criterion_group, criterion_main};
use hetsched_core::coordination::{
    AppDemand, UnitSupply, solve_targets_replayed, solve_targets_waiting,
};
use hetsched_core::replay::{ReplayBudget, replay_native};
use std::hint::black_box;

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
        b.iter(|| solve_targets_replayed(black_box(&apps), &units, 1.05, 3, true, None).unwrap())
    });
    // The devices may run short-first: every candidate is replayed again
    // with them so, and the best has each queue's order flipped once.
    let short_first: Vec<UnitSupply> = units.iter().map(|u| u.with_short_first()).collect();
    c.bench_function("coordination/solve_replay_judged_short_first_6x4", |b| {
        b.iter(|| {
            solve_targets_replayed(black_box(&apps), &short_first, 1.05, 3, true, None).unwrap()
        })
    });
    c.bench_function("coordination/replay_native_6x4", |b| {
        b.iter(|| replay_native(black_box(&apps), &units, ReplayBudget::default()))
    });
}

criterion_group!(benches, solves);
criterion_main!(benches);
