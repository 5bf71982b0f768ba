//! What the interposers add to a launch on the lease path (target ≤ 1 µs
//! median): the handle's device from the [`HandleMap`], then the lease's
//! fast path (two atomic operations and a clock read) while the lease
//! lives. The device here passes through (no daemon), which takes the same
//! fast path as a live lease until its time runs out.

// Setting the environment is `unsafe` in edition 2024; it happens once,
// before any other thread exists.
#![allow(unsafe_code)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hetsched_intercept::{Governor, GovernorSetup, HandleMap, InterceptApi};

fn bench_launch(c: &mut Criterion) {
    // No daemon answers here: the first launch finds none and passes
    // through for a second, then tries again (a slow launch in ~1 s).
    let dir = std::env::temp_dir().join(format!("hetsched-bench-{}", std::process::id()));
    // SAFETY (of the environment change): the benchmark has one thread
    // until the governor starts its own below.
    unsafe {
        std::env::set_var("HETSCHED_SOCKET", dir.join("none.sock"));
        std::env::set_var("HETSCHED_INTERCEPT_QUIET", "1");
    }
    let governor: &'static Governor = Box::leak(Box::new(Governor::new(GovernorSetup {
        api: InterceptApi::OpenCl,
        unit_name: |i| format!("opencl{i}"),
        drain: Box::new(|_| {}),
    })));
    let queues = HandleMap::new();
    queues.with_write(|m| {
        for q in 0..64usize {
            m.insert(0x1000 + 64 * q, q % 2);
        }
    });
    drop(governor.launch(0));
    c.bench_function("launch_path", |b| {
        b.iter(|| {
            let device = queues.get(black_box(0x1000 + 64 * 6)).unwrap();
            let guard = governor.launch(device);
            black_box(&guard);
        })
    });
    governor.stop();
}

criterion_group!(benches, bench_launch);
criterion_main!(benches);
