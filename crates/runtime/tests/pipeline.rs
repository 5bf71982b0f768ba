//! Streaming pipelines: outputs in order, emulated-device stages through
//! the monitor, a failing stage fails one chunk only, back-pressure,
//! draining and cancelling.

mod common;

use common::{Models, embedded};
use hetsched_runtime::pipeline::{PipelineBuilder, PipelineError, Stage};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn add(n: u64) -> impl Fn(Vec<u64>) -> Vec<u64> + Send + Sync + 'static {
    move |v: Vec<u64>| v.into_iter().map(|x| x + n).collect()
}

fn mul(n: u64) -> impl Fn(Vec<u64>) -> Vec<u64> + Send + Sync + 'static {
    move |v: Vec<u64>| v.into_iter().map(|x| x * n).collect()
}

#[allow(clippy::ptr_arg)] // `Stage::sizes` takes `Fn(&T)` with `T = Vec<u64>`
fn sizes(v: &Vec<u64>) -> (u64, u64) {
    let b = (v.len() * 8) as u64;
    (b, b)
}

#[test]
fn cpu_stages_keep_order_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let rt = embedded(dir.path(), "pipe-cpu", "fifo", Models::None);
    let mut p = PipelineBuilder::new("cpu")
        .stage(Stage::new("add1").cpu(add(1)))
        .stage(Stage::new("mul3").cpu(mul(3)))
        .stage(Stage::new("add2").cpu(add(2)))
        .build(&rt, &vec![0; 64])
        .unwrap();
    assert_eq!(p.stage_specs().len(), 3);
    let feeder = p.feeder().unwrap();
    let producer = std::thread::spawn(move || {
        for k in 0..200u64 {
            feeder.push(vec![k; 64]).unwrap();
        }
    });
    for k in 0..200u64 {
        let out = p.pull().unwrap().unwrap();
        assert_eq!(out, vec![(k + 1) * 3 + 2; 64], "chunk {k}");
    }
    producer.join().unwrap();
    let rest = p.finish();
    assert!(rest.is_empty());
}

#[test]
fn emulated_stage_goes_through_the_monitor_with_copies() {
    let dir = tempfile::tempdir().unwrap();
    let rt = embedded(dir.path(), "pipe-dev", "fifo", Models::None);
    let cpu = rt
        .units()
        .iter()
        .find(|u| u.kind != "dev")
        .unwrap()
        .name
        .clone();
    let p = PipelineBuilder::new("dev")
        .stage(Stage::new("add1").cpu(add(1)).sizes(sizes))
        .stage(
            Stage::new("mul5-dev")
                .emulated("dev", |_: &Vec<u64>| Duration::from_micros(50), mul(5))
                .sizes(sizes),
        )
        .stage(Stage::new("add2").cpu(add(2)).sizes(sizes))
        .build(&rt, &vec![0; 256])
        .unwrap();
    let placed: Vec<String> = p
        .assignment()
        .iter()
        .map(|n| n.split('/').next().unwrap().to_string())
        .collect();
    assert_eq!(placed, vec![cpu.clone(), "dev0".to_string(), cpu]);
    let table = p.table(4);
    assert!(table.steps.iter().any(|s| !s.copies.is_empty()));
    for k in 0..20u64 {
        p.push(vec![k; 256]).unwrap();
    }
    let results = p.finish();
    assert_eq!(results.len(), 20);
    for (k, r) in results.into_iter().enumerate() {
        assert_eq!(r.unwrap(), vec![(k as u64 + 1) * 5 + 2; 256]);
    }
}

#[test]
fn device_copies_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let rt = embedded(dir.path(), "pipe-copies", "fifo", Models::None);
    let mut p = PipelineBuilder::new("dev-only")
        .stage(
            Stage::new("mul2-dev")
                .emulated("dev", |_: &Vec<u64>| Duration::from_micros(20), mul(2))
                .sizes(sizes),
        )
        .build(&rt, &vec![0; 128])
        .unwrap();
    for k in 0..5u64 {
        p.push(vec![k; 128]).unwrap();
        assert_eq!(p.pull().unwrap().unwrap(), vec![2 * k; 128]);
    }
    let s = p.stats();
    assert_eq!(s.chunks_out, 5);
    // A copy in and a copy out per chunk.
    assert_eq!(s.copies, 10);
}

#[test]
fn a_panicking_stage_fails_one_chunk_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let rt = embedded(dir.path(), "pipe-panic", "fifo", Models::None);
    let p = PipelineBuilder::new("panics")
        .stage(Stage::new("add1").cpu(add(1)))
        .stage(Stage::new("picky").cpu(|v: Vec<u64>| {
            assert!(v[0] != 6, "no sixes");
            v
        }))
        .stage(Stage::new("add2").cpu(add(2)))
        .build(&rt, &vec![0; 4])
        .unwrap();
    for k in 0..12u64 {
        p.push(vec![k; 4]).unwrap();
    }
    let out = p.finish();
    assert_eq!(out.len(), 12);
    for (k, r) in out.into_iter().enumerate() {
        if k == 5 {
            match r {
                Err(PipelineError::StageFailed {
                    stage,
                    chunk,
                    name,
                    why,
                }) => {
                    assert_eq!((stage, chunk, name.as_str()), (1, 5, "picky"));
                    assert!(why.contains("no sixes"), "{why}");
                }
                other => panic!("chunk 5: {other:?}"),
            }
        } else {
            assert_eq!(r.unwrap(), vec![k as u64 + 3; 4]);
        }
    }
}

#[test]
fn a_slow_consumer_bounds_what_is_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let rt = embedded(dir.path(), "pipe-bp", "fifo", Models::None);
    let mut p = PipelineBuilder::new("bp")
        .stage(Stage::new("add1").cpu(add(1)))
        .stage(Stage::new("add2").cpu(add(2)))
        .max_in_flight(2)
        .build(&rt, &vec![0; 4])
        .unwrap();
    let pushed = Arc::new(AtomicUsize::new(0));
    let feeder = p.feeder().unwrap();
    let count = Arc::clone(&pushed);
    let producer = std::thread::spawn(move || {
        for k in 0..100u64 {
            feeder.push(vec![k; 4]).unwrap();
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    // Input queue (2) + controller (2) + output queue (2) + one blocked send.
    let early = pushed.load(Ordering::SeqCst);
    assert!(early <= 8, "{early} chunks pushed with nobody pulling");
    assert!(p.stats().chunks_out <= 3);
    for k in 0..100u64 {
        assert_eq!(p.pull().unwrap().unwrap(), vec![k + 3; 4]);
    }
    producer.join().unwrap();
}

#[test]
fn drop_cancels_promptly_and_finish_drains() {
    let dir = tempfile::tempdir().unwrap();
    let rt = embedded(dir.path(), "pipe-drop", "fifo", Models::None);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&ran);
    let build = |r: Arc<AtomicUsize>| {
        PipelineBuilder::new("slow")
            .stage(Stage::new("slow").cpu(move |v: Vec<u64>| {
                r.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(5));
                v
            }))
            .max_in_flight(2)
    };
    let p = build(r).build(&rt, &vec![0; 4]).unwrap();
    let profiled = ran.load(Ordering::SeqCst);
    for k in 0..4u64 {
        p.push(vec![k; 4]).unwrap();
    }
    let t = Instant::now();
    drop(p);
    assert!(t.elapsed() < Duration::from_secs(2));
    // Cancelled: not every pushed chunk ran.
    let after = ran.load(Ordering::SeqCst) - profiled;
    assert!(after <= 4, "{after}");

    let p = build(Arc::clone(&ran)).build(&rt, &vec![0; 4]).unwrap();
    for k in 0..4u64 {
        p.push(vec![k; 4]).unwrap();
    }
    let out = p.finish();
    assert_eq!(out.len(), 4);
    assert!(out.iter().all(|r| r.is_ok()));
}

#[test]
fn controller_overhead_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let rt = embedded(dir.path(), "pipe-overhead", "fifo", Models::None);
    let mut p = PipelineBuilder::new("noop")
        .stage(Stage::new("a").cpu(|v: u64| v + 1))
        .stage(Stage::new("b").cpu(|v: u64| v + 1))
        .stage(Stage::new("c").cpu(|v: u64| v + 1))
        .max_in_flight(16)
        .build(&rt, &0)
        .unwrap();
    let n = 5_000u64;
    let feeder = p.feeder().unwrap();
    let producer = std::thread::spawn(move || {
        for k in 0..n {
            feeder.push(k).unwrap();
        }
    });
    for k in 0..n {
        assert_eq!(p.pull().unwrap().unwrap(), k + 3);
    }
    producer.join().unwrap();
    let s = p.stats();
    assert_eq!(s.stage_steps, 3 * n);
    assert!(s.steps >= n);
    eprintln!(
        "controller overhead: {:.0} ns per stage step over {} steps (debug build)",
        s.overhead_ns_per_stage_step(),
        s.steps
    );
}

#[test]
fn cpu_lanes_run_stages_on_worker_threads_too() {
    let dir = tempfile::tempdir().unwrap();
    let rt = embedded(dir.path(), "pipe-lanes", "fifo", Models::None);
    let cpu = rt.units().iter().find(|u| u.kind != "dev").unwrap().clone();
    if cpu.slots < 2 {
        eprintln!("one core: no second lane to test");
        return;
    }
    let lane = |i: usize| format!("{}/{i}", cpu.name);
    let mut p = PipelineBuilder::new("lanes")
        .stage(Stage::new("add1").cpu(add(1)))
        .stage(Stage::new("picky").cpu(|v: Vec<u64>| {
            assert!(v[0] != 4, "no fours");
            v
        }))
        .stage(Stage::new("mul3").cpu(mul(3)))
        .assign(vec![lane(0), lane(1), lane(0)])
        .build(&rt, &vec![0; 16])
        .unwrap();
    assert_eq!(p.assignment(), vec![lane(0), lane(1), lane(0)]);
    let table = p.table(6);
    // Both lanes busy in one step: the stages overlap.
    assert!(table.steps.iter().any(|s| s.compute.len() == 2));
    let feeder = p.feeder().unwrap();
    let producer = std::thread::spawn(move || {
        for k in 0..50u64 {
            feeder.push(vec![k; 16]).unwrap();
        }
    });
    for k in 0..50u64 {
        let r = p.pull().unwrap();
        if k == 3 {
            assert!(
                matches!(
                    r,
                    Err(PipelineError::StageFailed {
                        stage: 1,
                        chunk: 3,
                        ..
                    })
                ),
                "{r:?}"
            );
        } else {
            assert_eq!(r.unwrap(), vec![(k + 1) * 3; 16]);
        }
    }
    producer.join().unwrap();
    assert_eq!(p.stats().failed_chunks, 1);
}

#[test]
fn a_panicking_device_cost_fails_its_chunk_only() {
    let dir = tempfile::tempdir().unwrap();
    let rt = embedded(dir.path(), "pipe-cost", "fifo", Models::None);
    let p = PipelineBuilder::new("cost")
        .stage(Stage::new("dev").emulated(
            "dev",
            |v: &Vec<u64>| {
                assert!(v[0] != 2, "no cost for twos");
                Duration::from_micros(5)
            },
            add(1),
        ))
        .build(&rt, &vec![0; 8])
        .unwrap();
    for k in 0..4u64 {
        p.push(vec![k; 8]).unwrap();
    }
    let out = p.finish();
    assert_eq!(out.len(), 4);
    assert!(matches!(
        &out[2],
        Err(PipelineError::StageFailed { stage: 0, chunk: 2, why, .. }) if why.contains("no cost for twos")
    ));
    assert_eq!(out[3].clone().unwrap(), vec![4; 8]);
}
