//! Results do not depend on where a call ran, and the call-level contract
//! of `accelerate`: one-implementation tasks, missing implementations,
//! panicking implementations, `wait_all` and `Mode::Sync`.
//!
//! Every runtime here uses an embedded monitor over a private config (the
//! machine's CPUs plus one emulated device `dev0` of kind `dev`) and never
//! touches the user's model cache.

use hetsched_core::unit::UnitClass;
use hetsched_runtime::{Mode, Runtime, RuntimeError, Task, TaskError};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

mod common;
use common::{Models, spin};

fn runtime(dir: &Path, name: &str) -> Runtime {
    common::embedded(dir, name, "share", Models::None)
}

/// FNV-1a: the function both implementations compute.
fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Distinct input number `i`: 4 KiB from a small LCG.
fn input(i: u64) -> Vec<u8> {
    let mut x = i.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
    (0..4096)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 56) as u8
        })
        .collect()
}

fn is_cpu(rt: &Runtime, unit: usize) -> bool {
    rt.units()[unit].class == UnitClass::Cpu
}

fn device_index(rt: &Runtime) -> usize {
    rt.units()
        .iter()
        .position(|u| u.name == "dev0")
        .expect("the config's device is a unit")
}

#[test]
fn results_are_identical_whichever_unit_ran_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), "results-identical");
    // Comparable costs (about 200 µs either way), so both units stay
    // candidates; profiling runs each implemented kind at start anyway.
    let task = Task::new("checksum")
        .cpu(|data: &Vec<u8>| {
            spin(Duration::from_micros(200));
            checksum(data)
        })
        .emulated(
            "dev",
            |_: &Vec<u8>| Duration::from_micros(200),
            |data: &Vec<u8>| checksum(data),
        )
        .sizes(|data| (data.len() as u64, 8));

    let calls = 200u64;
    let inflight = 6;
    let mut pending = std::collections::VecDeque::new();
    let mut by_unit = vec![0u64; rt.units().len()];
    let mut next = 0u64;
    let mut checked = 0u64;
    while checked < calls {
        while pending.len() < inflight && next < calls {
            let data = input(next);
            let expected = checksum(&data);
            pending.push_back((
                next,
                expected,
                rt.accelerate(&task, data, Mode::Async).unwrap(),
            ));
            next += 1;
        }
        let (i, expected, handle) = pending.pop_front().unwrap();
        let (got, info) = handle.wait_with_info().unwrap();
        assert_eq!(
            got, expected,
            "call {i} on {} returned a different checksum",
            info.unit_name
        );
        assert_eq!(*info.unit_name, *rt.units()[info.unit.index()].name);
        by_unit[info.unit.index()] += 1;
        checked += 1;
    }
    let cpu_calls: u64 = (0..by_unit.len())
        .filter(|&u| is_cpu(&rt, u))
        .map(|u| by_unit[u])
        .sum();
    let dev_calls = by_unit[device_index(&rt)];
    assert!(cpu_calls >= 1, "no call ran on a CPU: {by_unit:?}");
    assert!(dev_calls >= 1, "no call ran on dev0: {by_unit:?}");
    assert_eq!(cpu_calls + dev_calls, calls);

    // The runtime's own counters agree with what the handles said (a
    // handle is filled just before its unit's bookkeeping: wait for that).
    rt.wait_all();
    let stats = rt.stats();
    assert_eq!(stats.outstanding, 0);
    for (u, s) in stats.units.iter().enumerate() {
        assert_eq!(s.completed, by_unit[u], "unit {}: {stats:?}", s.name);
    }
}

#[test]
fn a_task_with_one_implementation_always_runs_there() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), "results-one-impl");
    let dev = device_index(&rt);

    let cpu_only = Task::new("cpu-only").cpu(|x: &u64| x * 3);
    let dev_only = Task::new("dev-only").emulated(
        "dev",
        |_: &u64| Duration::from_micros(100),
        |x: &u64| x * 5,
    );
    let mut handles = Vec::new();
    for i in 0..40u64 {
        handles.push((i, true, rt.accelerate(&cpu_only, i, Mode::Async).unwrap()));
        handles.push((i, false, rt.accelerate(&dev_only, i, Mode::Async).unwrap()));
    }
    for (i, on_cpu, h) in handles {
        let (got, info) = h.wait_with_info().unwrap();
        if on_cpu {
            assert_eq!(got, i * 3);
            assert!(
                is_cpu(&rt, info.unit.index()),
                "CPU-only call ran on {}",
                info.unit_name
            );
        } else {
            assert_eq!(got, i * 5);
            assert_eq!(info.unit.index(), dev, "device-only call ran elsewhere");
        }
    }
}

#[test]
fn a_task_with_no_implementation_for_any_unit_is_refused_naming_the_units() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), "results-no-impl");

    let elsewhere = Task::new("only-on-a-tpu").emulated(
        "tpu",
        |_: &u64| Duration::from_micros(10),
        |x: &u64| *x,
    );
    let bare: Task<u64, u64> = Task::new("no-impl-at-all");
    for (task, name) in [(&elsewhere, "only-on-a-tpu"), (&bare, "no-impl-at-all")] {
        // Twice: a refused task must not leave state behind that lets a
        // second call through.
        for _ in 0..2 {
            let err = rt.accelerate(task, 1, Mode::Sync).unwrap_err();
            match &err {
                RuntimeError::NoImplementation { task, units } => {
                    assert_eq!(task, name);
                    for u in rt.units() {
                        assert!(units.contains(&u.name), "{units:?} lacks {}", u.name);
                    }
                }
                other => panic!("expected NoImplementation, got {other:?}"),
            }
            let message = err.to_string();
            assert!(message.contains(name), "{message}");
            for u in rt.units() {
                assert!(
                    message.contains(&u.name),
                    "message does not name unit {}: {message}",
                    u.name
                );
            }
        }
    }
    rt.wait_all();
    assert_eq!(rt.stats().outstanding, 0);
    // The runtime is still fine for tasks that can run.
    let ok = Task::new("fine").cpu(|x: &u64| x + 1);
    assert_eq!(rt.accelerate(&ok, 41, Mode::Sync).unwrap().wait(), Ok(42));
}

#[test]
fn a_panicking_implementation_fails_only_its_own_call() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), "results-panic");

    let task = Task::new("picky").cpu(|x: &u64| {
        assert!(*x % 7 != 3, "no multiples of 7 plus 3 here ({x})");
        x * 2
    });
    let handles: Vec<_> = (0..50u64)
        .map(|i| (i, rt.accelerate(&task, i, Mode::Async).unwrap()))
        .collect();
    let mut panicked = 0;
    for (i, h) in handles {
        match h.wait() {
            Ok(got) => {
                assert!(i % 7 != 3, "call {i} should have panicked");
                assert_eq!(got, i * 2);
            }
            Err(TaskError::Panicked {
                task,
                unit,
                message,
            }) => {
                assert_eq!(i % 7, 3, "call {i} panicked unexpectedly: {message}");
                assert_eq!(task, "picky");
                assert!(
                    rt.units()
                        .iter()
                        .any(|u| u.name == unit && u.class == UnitClass::Cpu),
                    "panicked on unknown unit {unit}"
                );
                assert!(
                    message.contains(&format!("no multiples of 7 plus 3 here ({i})")),
                    "{message}"
                );
                panicked += 1;
            }
            Err(e) => panic!("call {i}: unexpected error {e}"),
        }
    }
    assert_eq!(panicked, 7);

    // The workers survived: later calls, sync and async, still work.
    assert_eq!(
        rt.accelerate(&task, 100, Mode::Sync).unwrap().wait(),
        Ok(200)
    );
    let later: Vec<_> = (200..220u64)
        .map(|i| (i, rt.accelerate(&task, i, Mode::Async).unwrap()))
        .collect();
    for (i, h) in later {
        let r = h.wait();
        if i % 7 == 3 {
            assert!(matches!(r, Err(TaskError::Panicked { .. })), "{r:?}");
        } else {
            assert_eq!(r, Ok(i * 2));
        }
    }

    // The same on the device: a panicking kernel fails its call only.
    let dev_task = Task::new("picky-dev").emulated(
        "dev",
        |_: &u64| Duration::from_micros(50),
        |x: &u64| {
            assert!(*x != 5, "kernel refuses 5");
            x + 1
        },
    );
    let handles: Vec<_> = (0..10u64)
        .map(|i| (i, rt.accelerate(&dev_task, i, Mode::Async).unwrap()))
        .collect();
    for (i, h) in handles {
        match h.wait() {
            Err(TaskError::Panicked { unit, message, .. }) => {
                assert_eq!(i, 5);
                assert_eq!(unit, "dev0");
                assert!(message.contains("kernel refuses 5"), "{message}");
            }
            r => assert_eq!(r, Ok(i + 1), "call {i}"),
        }
    }
    assert_eq!(
        rt.accelerate(&dev_task, 6, Mode::Sync).unwrap().wait(),
        Ok(7)
    );
    rt.wait_all();
    assert_eq!(rt.stats().outstanding, 0);
}

#[test]
fn wait_all_returns_only_when_every_call_has_finished() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), "results-wait-all");
    let ran = Arc::new(AtomicUsize::new(0));

    let counter = Arc::clone(&ran);
    let slow_cpu = Task::new("slow-cpu").cpu(move |x: &u64| {
        spin(Duration::from_millis(3));
        counter.fetch_add(1, Ordering::SeqCst);
        *x
    });
    let counter = Arc::clone(&ran);
    let slow_dev = Task::new("slow-dev").emulated(
        "dev",
        |_: &u64| Duration::from_millis(10),
        move |x: &u64| {
            counter.fetch_add(1, Ordering::SeqCst);
            *x
        },
    );
    let mut handles = Vec::new();
    for i in 0..30u64 {
        handles.push(rt.accelerate(&slow_cpu, i, Mode::Async).unwrap());
    }
    for i in 0..10u64 {
        handles.push(rt.accelerate(&slow_dev, i, Mode::Async).unwrap());
    }
    // 30 × 3 ms on two workers and 10 × 10 ms on one stream: well over
    // 50 ms of work, so returning early would be caught below.
    rt.wait_all();
    assert_eq!(ran.load(Ordering::SeqCst), 40);
    assert_eq!(rt.stats().outstanding, 0);
    assert!(handles.iter().all(|h| h.is_done()));
    let done: u64 = rt.stats().units.iter().map(|u| u.completed).sum();
    assert_eq!(done, 40);

    // With nothing outstanding it returns at once.
    rt.wait_all();
}

#[test]
fn sync_mode_returns_a_ready_handle() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), "results-sync");
    let cpu = Task::new("sync-cpu").cpu(|x: &u64| {
        spin(Duration::from_millis(5));
        x + 10
    });
    let dev =
        Task::new("sync-dev").emulated("dev", |_: &u64| Duration::from_millis(5), |x: &u64| x + 20);
    for i in 0..5u64 {
        let h = rt.accelerate(&cpu, i, Mode::Sync).unwrap();
        assert!(h.is_done(), "a Sync call returned before it ran");
        assert_eq!(h.wait(), Ok(i + 10));

        let h = rt.accelerate(&dev, i, Mode::Sync).unwrap();
        assert!(h.is_done(), "a Sync device call returned before it ran");
        let (got, info) = h.wait_with_info().unwrap();
        assert_eq!(got, i + 20);
        assert_eq!(&*info.unit_name, "dev0");
        assert!(info.turnaround >= Duration::from_millis(5), "{info:?}");
    }
}
