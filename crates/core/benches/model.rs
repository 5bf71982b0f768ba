//! Cost of the task model on the scheduler's paths: `predict` sits on the
//! placement hot path (budget ≤ 100 ns per placement, several kinds each),
//! `update` runs once per completed task.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hetsched_core::KindId;
use hetsched_core::task_model::{PerformanceModel, TaskModel};

const KINDS: u16 = 4;

/// A model past profiling on every kind, as in steady state.
fn warmed_model() -> TaskModel {
    let mut model = TaskModel::new("bench", KINDS as usize);
    for i in 0..1_000u64 {
        for k in 0..KINDS {
            let bytes = 1_024 + (i * 7_919) % 1_000_000;
            let ns = 2_000.0 * (k + 1) as f64 + 0.5 * bytes as f64;
            model.observe(KindId(k), bytes, ns);
        }
    }
    model
}

fn bench_model(c: &mut Criterion) {
    let mut group = c.benchmark_group("model");

    let mut model = warmed_model();
    let mut i = 0u64;
    group.bench_function("update", |b| {
        b.iter(|| {
            // Varying sizes keep the fit well conditioned as samples pile up.
            i = i.wrapping_add(1);
            let bytes = 1_024 + (i * 7_919) % 1_000_000;
            let ns = 2_000.0 + 0.5 * bytes as f64;
            model.observe(black_box(KindId(0)), black_box(bytes), black_box(ns));
        })
    });

    let model = warmed_model();
    group.bench_function("predict", |b| {
        b.iter(|| model.predict_ns(black_box(KindId(2)), black_box(65_536)))
    });

    group.finish();
}

criterion_group!(benches, bench_model);
criterion_main!(benches);
