//! Emulated asymmetric cores: a `[[slow_cores]]` CPU becomes a kind of its
//! own, and the runtime's workers on it really run at its speed (CFS quota
//! of a cgroup), as Rinnegan emulated slow cores with duty cycles.

use hetsched_runtime::{Mode, Task};

mod common;
use common::{slow_core_runtime, slow_core_unsupported};
use std::time::{Duration, Instant};

use hetsched_platform::thread::cpu_time as thread_cpu;

/// Spins for `wall` of wall time and returns the share of it this thread
/// got on a CPU.
fn cpu_share(wall: Duration) -> f64 {
    let (t0, c0) = (Instant::now(), thread_cpu());
    while t0.elapsed() < wall {
        std::hint::spin_loop();
    }
    (thread_cpu() - c0).as_secs_f64() / t0.elapsed().as_secs_f64()
}

#[test]
fn a_slow_core_is_a_kind_of_its_own_and_runs_at_its_speed() {
    if !hetsched_platform::test_support::available(
        "cgroup-v1",
        slow_core_unsupported().map_or(Ok(()), Err),
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rt = slow_core_runtime(dir.path(), "slow-core-test");
    let little = rt
        .units()
        .iter()
        .find(|u| u.name == "little")
        .expect("a little kind");
    assert_eq!(little.pus, vec![1]);
    assert!(little.throttle.is_some(), "{little:?}");
    let big = rt
        .units()
        .iter()
        .find(|u| u.name != "little" && u.pus == vec![0]);
    assert!(
        big.is_some(),
        "the other core stays a kind of its own: {:?}",
        rt.units()
    );

    // The application's model sends every call to the kind it names.
    let on = |kind: &'static str| {
        Task::new(format!("share-on-{kind}"))
            .cpu(|wall: &Duration| cpu_share(*wall))
            .model(move |k, _| {
                Some(if k == kind {
                    Duration::from_micros(1)
                } else {
                    Duration::from_secs(1)
                })
            })
    };
    let run = |task: &Task<Duration, f64>| {
        let mut shares: Vec<f64> = (0..5)
            .map(|_| {
                let (share, info) = rt
                    .accelerate(task, Duration::from_millis(60), Mode::Sync)
                    .unwrap()
                    .wait_with_info()
                    .unwrap();
                (share, info.unit_name.to_string())
            })
            .map(|(share, unit)| {
                assert_eq!(unit, task.name().trim_start_matches("share-on-"));
                share
            })
            .collect();
        shares.sort_by(f64::total_cmp);
        shares[2]
    };
    let slow = run(&on("little"));
    assert!(
        slow < 0.45,
        "the little core gave {slow:.2} of a core (quota 0.25)"
    );
    // The big core is unthrottled, but other programs on this machine may
    // take it for a while: measure until it shows its speed, with a
    // deadline (the quota above holds whatever the load).
    let big_task = on(big.unwrap().name.clone().leak());
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut fast = run(&big_task);
    while fast <= 1.5 * slow && Instant::now() < deadline {
        fast = run(&big_task);
    }
    eprintln!("share of a core per call: little {slow:.2}, big {fast:.2}");
    assert!(fast > 1.5 * slow, "big {fast:.2} vs little {slow:.2}");
}
