//! Placement follows predicted turnaround under contention: a device ten
//! times faster than the CPU gets most calls once profiled, a busy device
//! pushes calls back to the CPU, and an application's own model overrides
//! what the runtime would learn.
//!
//! Every runtime uses an embedded monitor over a private config (the
//! machine's CPUs plus one emulated device `dev0` of kind `dev`) and
//! persists no models. Shares are asserted loosely: the machine running
//! the tests may be busy.

use hetsched_core::unit::UnitClass;
use hetsched_runtime::{Mode, Runtime, Task};
use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

mod common;
use common::{Models, spin};

fn runtime(dir: &Path, name: &str) -> Runtime {
    runtime_with_policy(dir, name, "share")
}

fn runtime_with_policy(dir: &Path, name: &str, policy: &str) -> Runtime {
    common::embedded(dir, name, policy, Models::None)
}

/// Where calls ran: (on a CPU, on dev0).
#[derive(Debug, Default, Clone, Copy)]
struct Mix {
    cpu: u32,
    dev: u32,
}

impl Mix {
    fn add(&mut self, rt: &Runtime, unit: usize) {
        match rt.units()[unit].class {
            UnitClass::Cpu => self.cpu += 1,
            _ => {
                assert_eq!(rt.units()[unit].name, "dev0");
                self.dev += 1;
            }
        }
    }

    fn dev_share(&self) -> f64 {
        f64::from(self.dev) / f64::from(self.cpu + self.dev)
    }
}

/// Runs `n` calls of `task` keeping `inflight` in flight; checks results.
fn run(rt: &Runtime, task: &Task<u64, u64>, n: u64, inflight: usize) -> Mix {
    let mut mix = Mix::default();
    let mut pending = VecDeque::new();
    let mut next = 0;
    while next < n || !pending.is_empty() {
        while pending.len() < inflight && next < n {
            pending.push_back((next, rt.accelerate(task, next, Mode::Async).unwrap()));
            next += 1;
        }
        let (i, h) = pending.pop_front().unwrap();
        let (got, info) = h.wait_with_info().unwrap();
        assert_eq!(got, i + 1);
        mix.add(rt, info.unit.index());
    }
    mix
}

/// CPU: 2 ms of CPU time a call; dev0: 200 µs. Ten times faster there.
fn device_is_ten_times_faster(name: &str) -> Task<u64, u64> {
    Task::new(name)
        .cpu(|x: &u64| {
            spin(Duration::from_millis(2));
            x + 1
        })
        .emulated("dev", |_: &u64| Duration::from_micros(200), |x: &u64| x + 1)
}

#[test]
fn once_profiled_most_calls_go_to_the_ten_times_faster_device() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), "placement-faster-device");
    let task = device_is_ten_times_faster("ten-x");

    // Profiling: the first calls visit every implemented kind.
    let warm = run(&rt, &task, 10, 1);
    assert!(warm.cpu >= 1 && warm.dev >= 1, "not profiled: {warm:?}");

    for inflight in [1, 4] {
        let mix = run(&rt, &task, 100, inflight);
        assert!(
            mix.dev_share() >= 0.8,
            "{inflight} in flight: only {:.0} % on the device ({mix:?})",
            100.0 * mix.dev_share()
        );
    }
}

#[test]
fn a_device_busy_with_our_own_backlog_sends_calls_to_the_cpu_fifo() {
    busy_device_sends_calls_to_the_cpu_and_back("fifo");
}

#[test]
fn a_device_busy_with_our_own_backlog_sends_calls_to_the_cpu_share() {
    busy_device_sends_calls_to_the_cpu_and_back("share");
}

#[test]
fn calls_that_can_run_elsewhere_do_not_wait_behind_a_full_device_queue() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), "placement-head-of-line");
    let dev_only =
        Task::new("dev-only").emulated("dev", |_: &u64| Duration::from_millis(40), |x: &u64| *x);
    let cpu_only = Task::new("cpu-only").cpu(|x: &u64| x + 1);
    // Ten 40 ms device calls: more than the device's short queue holds.
    let hogs: Vec<_> = (0..10)
        .map(|i| rt.accelerate(&dev_only, i, Mode::Async).unwrap())
        .collect();
    let (got, info) = rt
        .accelerate(&cpu_only, 1, Mode::Sync)
        .unwrap()
        .wait_with_info()
        .unwrap();
    assert_eq!(got, 2);
    // The CPU was idle all along: the call should not have waited for
    // more than the device calls already running when it came.
    let done = hogs.iter().filter(|h| h.is_done()).count();
    assert!(
        done <= 3,
        "a CPU-only call waited for {done} device calls ({:?})",
        info.turnaround
    );
    rt.wait_all();
}

fn busy_device_sends_calls_to_the_cpu_and_back(policy: &str) {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime_with_policy(dir.path(), "placement-busy-device", policy);
    let task = device_is_ten_times_faster("ten-x");
    run(&rt, &task, 10, 1);

    // Another task of this application occupies the device's only stream
    // for a while: three 150 ms calls, queued at once. Its model is learned
    // first so the queue knows how long they will hold the device.
    let hog_ms = 150;
    let hog = Task::new("hog").emulated(
        "dev",
        move |_: &u64| Duration::from_millis(hog_ms),
        |x: &u64| *x,
    );
    assert_eq!(rt.accelerate(&hog, 1, Mode::Sync).unwrap().wait(), Ok(1));
    // A handle is filled just before the model learns from its call.
    rt.wait_all();
    let hogs: Vec<_> = (0..3)
        .map(|i| rt.accelerate(&hog, i, Mode::Async).unwrap())
        .collect();

    // While the device is busy, the fast-on-device task runs on the CPU:
    // 2 ms there beats waiting behind the hog.
    let mut busy = Mix::default();
    let mut samples = 0;
    while samples < 20 && !hogs[1].is_done() {
        let (got, info) = rt
            .accelerate(&task, 41, Mode::Sync)
            .unwrap()
            .wait_with_info()
            .unwrap();
        assert_eq!(got, 42);
        busy.add(&rt, info.unit.index());
        samples += 1;
    }
    assert!(
        samples >= 5,
        "the hog finished too soon to measure ({busy:?})"
    );
    assert!(
        busy.dev_share() <= 0.2,
        "{:.0} % of calls still went to the busy device ({busy:?})",
        100.0 * busy.dev_share()
    );
    for (i, h) in hogs.into_iter().enumerate() {
        assert_eq!(h.wait(), Ok(i as u64));
    }
    rt.wait_all();

    // The device is free again: calls go back to it.
    let after = run(&rt, &task, 50, 2);
    assert!(
        after.dev_share() >= 0.8,
        "calls did not return to the idle device ({after:?})"
    );
}

#[test]
fn an_applications_own_model_decides_placement() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), "placement-app-model");

    // In reality the device is ten times faster, but the application says
    // the CPU is: its model wins, and nothing is profiled on the device.
    let cpu_kind = rt
        .units()
        .iter()
        .find(|u| u.class == UnitClass::Cpu)
        .unwrap()
        .kind
        .clone();
    let says_cpu = {
        let cpu_kind = cpu_kind.clone();
        device_is_ten_times_faster("claims-cpu").model(move |kind, _bytes| {
            Some(if kind == cpu_kind {
                Duration::from_micros(10)
            } else {
                Duration::from_secs(1)
            })
        })
    };
    let mix = run(&rt, &says_cpu, 60, 2);
    assert_eq!(mix.dev, 0, "the app's model was ignored: {mix:?}");
    // An app's model is the app's: the runtime learns none for it.
    assert!(rt.model_of("claims-cpu").is_none());

    // And the other way round: a model claiming the device is far faster
    // sends calls there even when the CPU implementation is cheap.
    let says_dev = Task::new("claims-dev")
        .cpu(|x: &u64| x + 1)
        .emulated("dev", |_: &u64| Duration::from_micros(300), |x: &u64| x + 1)
        .model(move |kind, _bytes| {
            Some(if kind == "dev" {
                Duration::from_micros(1)
            } else {
                Duration::from_secs(1)
            })
        });
    let mix = run(&rt, &says_dev, 60, 2);
    assert_eq!(mix.cpu, 0, "the app's model was ignored: {mix:?}");
}

#[test]
fn a_kind_the_apps_model_cannot_predict_is_profiled_then_learned() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), "placement-app-model-partial");
    // The model knows the device (fast) but not the CPU (`None`): the CPU
    // is profiled, and once it has been, the calls go to the device.
    let task = device_is_ten_times_faster("partial")
        .model(|kind, _| (kind == "dev").then(|| Duration::from_micros(200)));
    let mix = run(&rt, &task, 40, 1);
    assert!(mix.cpu >= 1, "the unknown kind was never profiled: {mix:?}");
    assert!(
        mix.dev_share() >= 0.8,
        "profiling the unknown kind never ended: {mix:?}"
    );
}
