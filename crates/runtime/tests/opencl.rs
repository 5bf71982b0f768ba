//! OpenCL devices as runtime units (feature `opencl`): a task with a CPU
//! and an OpenCL implementation gives the CPU reference's answer whichever
//! ran it, and the OpenCL unit is really used (profiled). Skips, saying
//! why, where no OpenCL device exists.
#![cfg(feature = "opencl")]

use hetsched_runtime::opencl::kernels::Histogram;
use hetsched_runtime::opencl::reference;
use hetsched_runtime::{Mode, MonitorMode, Runtime, RuntimeOptions, Task};
use std::sync::Arc;

#[test]
fn opencl_and_cpu_give_the_same_histograms() {
    let found = hetsched_runtime::opencl::devices()
        .map(drop)
        .map_err(|e| e.to_string());
    if !hetsched_platform::test_support::available("opencl", found) {
        return;
    }
    let opts = RuntimeOptions::new("opencl-test")
        .unwrap()
        .monitor(MonitorMode::Embedded)
        .persist_models(false);
    let rt = Runtime::with_options(opts).unwrap();
    let Some(ocl) = rt.units().iter().find(|u| u.name.starts_with("opencl")) else {
        panic!(
            "an OpenCL device exists but the runtime has no OpenCL unit: {:?}",
            rt.units()
        );
    };
    let ocl = ocl.id;
    let task = Task::new("histogram")
        .cpu(|d: &Arc<Vec<u8>>| reference::histogram(d))
        .opencl(|dev, d: &Arc<Vec<u8>>| Ok(Histogram::new(dev)?.run(dev, d)?.0))
        .sizes(|d| (d.len() as u64, 1024));
    let inputs: Vec<Arc<Vec<u8>>> = (0..6u8)
        .map(|i| {
            Arc::new(
                (0..50_000u32)
                    .map(|j| (j as u8).wrapping_mul(i + 1))
                    .collect(),
            )
        })
        .collect();
    let handles: Vec<_> = (0..24)
        .map(|i| {
            (
                i % inputs.len(),
                rt.accelerate(&task, Arc::clone(&inputs[i % inputs.len()]), Mode::Async)
                    .unwrap(),
            )
        })
        .collect();
    let mut on_opencl = 0;
    for (input, h) in handles {
        let (counts, info) = h.wait_with_info().unwrap();
        assert_eq!(
            counts,
            reference::histogram(&inputs[input]),
            "on {}",
            info.unit_name
        );
        on_opencl += usize::from(info.unit == ocl);
    }
    assert!(on_opencl >= 1, "the OpenCL unit was never profiled");
}

/// A process alone on a device its monitor arbitrates keeps each slot the
/// agent grants for call after call (up to a lease's length, while nobody
/// else waits) instead of asking once per call: one call at a time, each
/// result waited for, still pays far fewer round trips than calls.
#[test]
fn calls_one_at_a_time_share_their_grants_when_alone() {
    let found = hetsched_runtime::opencl::devices()
        .map(drop)
        .map_err(|e| e.to_string());
    if !hetsched_platform::test_support::available("opencl", found) {
        return;
    }
    let opts = RuntimeOptions::new("opencl-grants")
        .unwrap()
        .monitor(MonitorMode::Embedded)
        .persist_models(false);
    let rt = Runtime::with_options(opts).unwrap();
    let task = Task::new("histogram-grants")
        .opencl(|dev, d: &Arc<Vec<u8>>| Ok(Histogram::new(dev)?.run(dev, d)?.0))
        .sizes(|d| (d.len() as u64, 1024));
    let input = Arc::new((0..4096u32).map(|j| j as u8).collect::<Vec<u8>>());
    let want = reference::histogram(&input);
    for _ in 0..200 {
        let got = rt
            .accelerate(&task, Arc::clone(&input), Mode::Sync)
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(got, want);
    }
    let stats = rt.stats();
    let unit = stats
        .units
        .iter()
        .find(|u| u.name.starts_with("opencl") && u.completed > 0)
        .unwrap_or_else(|| panic!("no OpenCL unit ran the calls: {stats:?}"));
    assert_eq!(unit.completed, 200, "{stats:?}");
    assert!(
        unit.grants >= 1,
        "the embedded monitor arbitrates its OpenCL units: {stats:?}"
    );
    // A grant is kept for calls that start within its hold (5 ms): 18–25
    // of these calls on an idle machine (8–11 grants for 200), four under
    // a loaded CI run (51 grants once). Asking once per call would take
    // 200.
    assert!(
        unit.grants * 2 <= unit.completed,
        "{} grants for {} calls",
        unit.grants,
        unit.completed
    );
}
