//! The goal optimizer in a real run: a toy application (this test process,
//! through hetsched-runtime) shares a daemon's emulated GPU with a
//! competing `hetsched load` process and must reach a throughput it cannot
//! get at an equal share.

use hetsched_runtime::{
    Mode, MonitorMode, OptimizerConfig, PerformanceGoal, Runtime, RuntimeOptions, Task,
};
use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::{ONE_GPU, Reaped, TestDaemon};

#[test]
fn optimizer_raises_shares_until_the_goal_is_met() {
    let config = format!("default_policy = \"share\"\n{ONE_GPU}");
    let daemon = TestDaemon::start("optimizer", &config);
    let socket = daemon.socket.clone();
    // A NORMAL competitor that would take half of the device forever.
    let competitor = daemon
        .cmd()
        .args([
            "load",
            "--unit",
            "gpu0",
            "--exec-ms",
            "2",
            "--seconds",
            "60",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _competitor = Reaped(competitor);

    let opts = RuntimeOptions::new("optimizer-toy")
        .unwrap()
        .monitor(MonitorMode::Daemon)
        .socket(&socket)
        .persist_models(false);
    let rt = Runtime::with_options(opts).unwrap();
    let task: Task<(), u32> = Task::new("toy")
        .emulated("gpu0", |_| Duration::from_millis(2), |_| 7)
        .sizes(|_| (0, 0));
    let done = Arc::new(AtomicU64::new(0));
    // The device does about 500 calls/s; an equal share is about 250.
    let target = 400.0;
    rt.set_goal(
        PerformanceGoal::rate_of(target, Arc::clone(&done))
            .period(Duration::from_millis(300))
            .config(OptimizerConfig {
                patience: 1,
                ..OptimizerConfig::default()
            }),
    )
    .unwrap();

    let start = Instant::now();
    let mut inflight = VecDeque::new();
    let mut window: VecDeque<Instant> = VecDeque::new();
    let mut met_at = None;
    while start.elapsed() < Duration::from_secs(20) {
        while inflight.len() < 4 {
            inflight.push_back(rt.accelerate(&task, (), Mode::Async).unwrap());
        }
        let result = inflight.pop_front().unwrap().wait().unwrap();
        assert_eq!(result, 7);
        done.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        window.push_back(now);
        while window
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(1))
        {
            window.pop_front();
        }
        // Met: a full second at ≥ 90 % of the goal.
        if start.elapsed() > Duration::from_secs(2) && window.len() as f64 >= 0.9 * target {
            met_at = Some(start.elapsed());
            break;
        }
    }
    let status = rt.goal_status().expect("a goal is set");
    let met_at = met_at.unwrap_or_else(|| {
        panic!(
            "goal of {target}/s not reached in 20 s: last second {} calls, optimizer {status:?}",
            window.len()
        )
    });
    assert!(status.spreading, "spreading is the first rung: {status:?}");
    assert!(
        status.shares >= 60,
        "an equal share cannot give 80 % of the device: {status:?}"
    );
    eprintln!("goal met after {met_at:?}: {status:?}");
}
