//! What one call through the runtime costs (issue target: an empty CPU
//! task, submit → run → complete, ≤ 1 µs; StarPU: a few µs).
//!
//! * `runtime/empty_cpu_task_async` — batches of 1000 `Mode::Async` calls
//!   of an empty CPU task, then `wait_all`; reported per call (the
//!   handles are kept and dropped, as a program would).
//! * `runtime/empty_cpu_task_sync` — one `Mode::Sync` call at a time: the
//!   round trip to a worker thread and back.
//! * `runtime/accelerate_dispatch` — `accelerate(.., Mode::Async)` alone
//!   on an idle runtime: the placement decision over the views, queueing
//!   on the chosen unit and waking its sleeping worker (a futex wake).
//!   The call's run and completion are outside the timed part.
//! * `runtime/accelerate_decide` — placement and queueing only: every CPU
//!   worker is held asleep inside a blocker call, so no wake-up is needed;
//!   batches of 1000 calls are decided and queued per timed section.
//! * `runtime/accelerate_decide_two_units` — the same with a second unit
//!   (an emulated device) to weigh; the task's own model keeps every call
//!   on the CPU so no device work is involved.
//!
//! * `pipeline/noop_stage_step_4_stages` — chunks streamed through a
//!   pipeline of four no-op CPU stages on one lane, a feeder thread
//!   pushing and the bench thread pulling, in batches of 256 chunks:
//!   reported per stage step (the controller's own cost per step, issue
//!   target ≤ 2 µs, plus its share of the hand-offs).
//!
//! Embedded monitor over a private config, no model persistence.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use hetsched_core::unit::UnitClass;
use hetsched_runtime::{Mode, MonitorMode, PipelineBuilder, Runtime, RuntimeOptions, Stage, Task};
use std::hint::black_box;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

const BATCH: u64 = 1000;

fn runtime(dir: &Path, config: &str) -> Runtime {
    runtime_with_queue(
        dir,
        config,
        RuntimeOptions::new("bench").unwrap().queue_per_slot,
    )
}

/// An embedded runtime over `config`, with `queue_per_slot` placed calls
/// allowed per unit slot beyond those running.
fn runtime_with_queue(dir: &Path, config: &str, queue_per_slot: u32) -> Runtime {
    let path = dir.join("hetsched.toml");
    std::fs::write(&path, config).unwrap();
    let mut opts = RuntimeOptions::new("bench")
        .unwrap()
        .monitor(MonitorMode::Embedded)
        .config(&path)
        .persist_models(false);
    opts.queue_per_slot = queue_per_slot;
    Runtime::with_options(opts).unwrap()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    // CPUs only.
    let rt = runtime(dir.path(), "");
    let empty = Task::new("empty").cpu(|x: &u64| *x);
    // Profile once, outside every measurement.
    rt.accelerate(&empty, 0, Mode::Sync)
        .unwrap()
        .wait()
        .unwrap();

    let mut g = c.benchmark_group("runtime");
    g.throughput(Throughput::Elements(1));

    g.bench_function("empty_cpu_task_async", |b| {
        let mut handles = Vec::with_capacity(BATCH as usize);
        b.iter_custom(|iters| {
            let start = Instant::now();
            let mut left = iters;
            while left > 0 {
                let n = left.min(BATCH);
                for i in 0..n {
                    handles.push(rt.accelerate(&empty, i, Mode::Async).unwrap());
                }
                rt.wait_all();
                handles.clear();
                left -= n;
            }
            start.elapsed()
        });
    });

    g.bench_function("empty_cpu_task_sync", |b| {
        b.iter(|| {
            rt.accelerate(&empty, black_box(7), Mode::Sync)
                .unwrap()
                .wait()
                .unwrap()
        });
    });

    g.bench_function("accelerate_dispatch", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for i in 0..iters {
                let start = Instant::now();
                let h = rt.accelerate(&empty, black_box(i), Mode::Async).unwrap();
                timed += start.elapsed();
                h.wait().unwrap();
            }
            rt.wait_all();
            timed
        });
    });

    // Placement alone: the CPU workers are held (asleep) by blocker calls,
    // so calls are decided and queued but no worker needs waking; the
    // unit's short queue is made long enough to take a whole batch.
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime_with_queue(dir.path(), "", BATCH as u32);
    decide_bench(&mut g, "accelerate_decide", &rt, &empty);
    drop(rt);

    // The same with a second unit (an emulated device) to weigh; the
    // task's own model keeps every call on the CPU, so no device work runs.
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime_with_queue(
        dir.path(),
        "[[emulated]]\nname = \"dev0\"\nkind = \"dev\"\nclass = \"gpu\"\nspeed = 10.0\ncopy_gbps = 12.0\n",
        BATCH as u32,
    );
    let on_cpu = Task::new("empty-two-units")
        .cpu(|x: &u64| *x)
        .emulated("dev", |_: &u64| Duration::from_micros(100), |x: &u64| *x)
        .model(|kind, _| {
            Some(if kind == "dev" {
                Duration::from_secs(1)
            } else {
                Duration::from_nanos(100)
            })
        });
    decide_bench(&mut g, "accelerate_decide_two_units", &rt, &on_cpu);
    let dev = rt
        .stats()
        .units
        .iter()
        .find(|u| u.name == "dev0")
        .map_or(0, |u| u.completed);
    assert_eq!(dev, 0, "the two-unit benchmark sent calls to the device");
    g.finish();
}

/// Holds every CPU worker of a runtime asleep inside a call until opened.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
    holding: AtomicUsize,
}

impl Gate {
    fn hold(&self) {
        self.holding.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
    }

    fn set(&self, open: bool) {
        *self.open.lock().unwrap() = open;
        if open {
            self.opened.notify_all();
        } else {
            self.holding.store(0, Ordering::SeqCst);
        }
    }
}

fn decide_bench(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    rt: &Runtime,
    task: &Task<u64, u64>,
) {
    let cpus: Vec<_> = rt
        .units()
        .iter()
        .filter(|u| u.class == UnitClass::Cpu)
        .collect();
    if cpus.len() != 1 {
        eprintln!("runtime/{name}: skipped (needs exactly one CPU kind to hold its workers)");
        return;
    }
    let workers = cpus[0].slots.max(1) as usize;
    let gate = Arc::new(Gate::default());
    let holder = {
        let gate = Arc::clone(&gate);
        Task::new("hold-workers").cpu(move |_: &u64| gate.hold())
    };
    // Profile both tasks outside the measurement.
    gate.set(true);
    rt.accelerate(&holder, 0, Mode::Sync)
        .unwrap()
        .wait()
        .unwrap();
    rt.accelerate(task, 0, Mode::Sync).unwrap().wait().unwrap();
    rt.wait_all();

    g.bench_function(name, |b| {
        let mut handles = Vec::with_capacity(BATCH as usize);
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(BATCH);
                gate.set(false);
                let held: Vec<_> = (0..workers)
                    .map(|_| rt.accelerate(&holder, 0, Mode::Async).unwrap())
                    .collect();
                while gate.holding.load(Ordering::SeqCst) < workers {
                    std::thread::yield_now();
                }
                let start = Instant::now();
                for i in 0..n {
                    handles.push(rt.accelerate(task, black_box(i), Mode::Async).unwrap());
                }
                timed += start.elapsed();
                gate.set(true);
                rt.wait_all();
                drop(held);
                handles.clear();
                left -= n;
            }
            timed
        });
    });
}

/// Stages per chunk in the pipeline bench.
const STAGES: usize = 4;
const CHUNKS_PER_BATCH: u64 = 256;

fn pipeline_bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), "");
    let mut b = PipelineBuilder::new("bench").cpu_lanes(1);
    for i in 0..STAGES {
        b = b.stage(Stage::new(format!("noop{i}")).cpu(|x: u64| black_box(x)));
    }
    let mut p = b.build(&rt, &0u64).unwrap();
    let mut g = c.benchmark_group("pipeline");
    g.throughput(Throughput::Elements(STAGES as u64));
    g.bench_function("noop_stage_step_4_stages", |bench| {
        bench.iter_custom(|iters| {
            let feeder = p.feeder().unwrap();
            let start = Instant::now();
            let mut left = iters;
            while left > 0 {
                let n = left.min(CHUNKS_PER_BATCH);
                std::thread::scope(|scope| {
                    let f = &feeder;
                    scope.spawn(move || {
                        for i in 0..n {
                            f.push(i).unwrap();
                        }
                    });
                    for _ in 0..n {
                        black_box(p.pull().unwrap().unwrap());
                    }
                });
                left -= n;
            }
            start.elapsed()
        });
    });
    g.finish();
    let stats = p.stats();
    eprintln!(
        "pipeline: controller overhead {:.0} ns per stage step ({} steps, from the controller's own accounting)",
        stats.overhead_ns_per_stage_step(),
        stats.stage_steps
    );
}

criterion_group!(benches, bench, pipeline_bench);
criterion_main!(benches);
