//! The runtime survives its daemon: a real `hetsched daemon` process is
//! killed with SIGKILL while calls are in flight, and every call still
//! returns its result — from an embedded monitor when the daemon stays
//! away, or from the daemon itself when it comes back on the same socket.

use hetsched_runtime::{Handle, Mode, MonitorMode, Runtime, RuntimeOptions, Task};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::{ONE_GPU, TestDaemon};

/// Device time of one call.
const CALL: Duration = Duration::from_millis(20);
const CALLS: u64 = 50;

fn runtime(socket: &Path, models: &Path, reconnect_for: Duration) -> Runtime {
    runtime_in(MonitorMode::Auto, socket, models, reconnect_for)
}

fn runtime_in(mode: MonitorMode, socket: &Path, models: &Path, reconnect_for: Duration) -> Runtime {
    let mut opts = RuntimeOptions::new("failover-test")
        .unwrap()
        .monitor(mode)
        .socket(socket)
        .model_dir(models)
        .give_up_after(Duration::from_millis(500));
    opts.requested = Default::default();
    opts.reconnect_for = reconnect_for;
    let rt = Runtime::with_options(opts).unwrap();
    assert_eq!(
        rt.stats().monitor,
        "daemon",
        "the runtime did not pick the daemon"
    );
    rt
}

/// A device-only task: 20 ms of device time, result `x * 3 + 1`; counts
/// how many results were computed.
fn device_task(computed: &Arc<AtomicU64>) -> Task<u64, u64> {
    let computed = Arc::clone(computed);
    Task::new("failover-work").emulated(
        "gpu0",
        |_: &u64| CALL,
        move |x: &u64| {
            computed.fetch_add(1, Ordering::SeqCst);
            x * 3 + 1
        },
    )
}

fn completed(rt: &Runtime) -> u64 {
    rt.stats().units.iter().map(|u| u.completed).sum()
}

/// Waits until at least `n` calls have finished, so the kill lands mid-run.
fn wait_for_completed(rt: &Runtime, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while completed(rt) < n {
        assert!(
            Instant::now() < deadline,
            "only {} calls finished in 30 s",
            completed(rt)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Every handle gives its call's own result, within a generous time.
fn check_all(handles: Vec<(u64, Handle<u64>)>) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for (i, h) in handles {
            let r = h.wait();
            tx.send((i, r)).unwrap();
        }
    });
    let mut seen = 0;
    while seen < CALLS {
        let (i, r) = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("calls lost: only {seen} of {CALLS} returned in time"));
        assert_eq!(r, Ok(i * 3 + 1), "call {i}");
        seen += 1;
    }
}

/// A daemon, a runtime on it with `CALLS` device calls submitted, and the
/// daemon killed with SIGKILL once a few have finished.
struct KilledMidRun {
    daemon: TestDaemon,
    rt: Runtime,
    computed: Arc<AtomicU64>,
    task: Task<u64, u64>,
    handles: Vec<(u64, Handle<u64>)>,
}

fn kill_mid_run(name: &str, reconnect_for: Duration) -> KilledMidRun {
    let mut daemon = TestDaemon::start(name, ONE_GPU);
    let rt = runtime(&daemon.socket, &daemon.dir.join("models"), reconnect_for);
    let computed = Arc::new(AtomicU64::new(0));
    let task = device_task(&computed);
    let handles: Vec<_> = (0..CALLS)
        .map(|i| (i, rt.accelerate(&task, i, Mode::Async).unwrap()))
        .collect();
    wait_for_completed(&rt, 5);
    let before_kill = completed(&rt);
    assert!(
        before_kill < CALLS - 5,
        "too late to kill mid-run: {before_kill} done"
    );
    daemon.kill();
    KilledMidRun {
        daemon,
        rt,
        computed,
        task,
        handles,
    }
}

#[test]
fn a_daemon_killed_mid_run_loses_no_call_and_the_runtime_goes_embedded() {
    let KilledMidRun {
        daemon: _daemon,
        rt,
        computed,
        task,
        handles,
    } = kill_mid_run("failover-embedded", Duration::from_millis(300));

    check_all(handles);
    rt.wait_all();
    let stats = rt.stats();
    assert!(stats.failovers >= 1, "{stats:?}");
    assert_eq!(stats.monitor, "embedded", "{stats:?}");
    assert_eq!(stats.outstanding, 0);
    assert_eq!(completed(&rt), CALLS, "{stats:?}");
    // Each result was computed exactly once: re-queued calls were not run twice.
    assert_eq!(computed.load(Ordering::SeqCst), CALLS);

    // And the runtime carries on with the embedded monitor.
    assert_eq!(
        rt.accelerate(&task, 1000, Mode::Sync).unwrap().wait(),
        Ok(3001)
    );
}

#[test]
fn a_daemon_restarted_on_the_same_socket_gets_the_runtime_back() {
    // Long enough for a restart on a loaded machine.
    let KilledMidRun {
        daemon: mut d,
        rt,
        computed,
        task,
        handles,
    } = kill_mid_run("failover-restart", Duration::from_secs(20));
    d.spawn();

    check_all(handles);
    rt.wait_all();
    let stats = rt.stats();
    assert!(stats.failovers >= 1, "{stats:?}");
    assert_eq!(stats.monitor, "daemon", "{stats:?}");
    assert!(rt.monitor_is_daemon());
    assert_eq!(stats.outstanding, 0);
    assert_eq!(computed.load(Ordering::SeqCst), CALLS);

    // The restarted daemon knows this process as its client, and serves it.
    let pid = std::process::id();
    let status = d.observer().unwrap().status().unwrap();
    assert!(
        status.clients.iter().any(|c| c.pid == pid),
        "the restarted daemon does not list this process: {:?}",
        status.clients.iter().map(|c| c.pid).collect::<Vec<_>>()
    );
    assert_eq!(
        rt.accelerate(&task, 1000, Mode::Sync).unwrap().wait(),
        Ok(3001)
    );
}

/// Daemon-only mode does not wait for ever: once the daemon has been gone
/// for `give_up_after` (0.5 s here), the calls still waiting for its device
/// fail, saying so, and so do new ones; once the daemon is back on the
/// same socket, calls run again.
#[test]
fn in_daemon_only_mode_calls_fail_after_the_wait_and_run_once_the_daemon_is_back() {
    let mut daemon = TestDaemon::start("failover-give-up", ONE_GPU);
    let rt = runtime_in(
        MonitorMode::Daemon,
        &daemon.socket,
        &daemon.dir.join("models"),
        Duration::from_millis(100),
    );
    let computed = Arc::new(AtomicU64::new(0));
    let task = device_task(&computed);
    let handles: Vec<_> = (0..CALLS)
        .map(|i| (i, rt.accelerate(&task, i, Mode::Async).unwrap()))
        .collect();
    wait_for_completed(&rt, 5);
    daemon.kill();
    let killed = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for (i, h) in handles {
            tx.send((i, h.wait())).unwrap();
        }
    });
    let mut failed = 0;
    // When each call returned, for the message if they took too long.
    let mut returned_at = Vec::new();
    for _ in 0..CALLS {
        let (i, r) = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("a call still waits 20 s after the daemon died");
        returned_at.push((i, killed.elapsed(), r.is_ok()));
        match r {
            Ok(v) => assert_eq!(v, i * 3 + 1),
            Err(e) => {
                assert!(e.to_string().contains("has been gone"), "call {i}: {e}");
                failed += 1;
            }
        }
    }
    assert!(failed > 0, "no call failed");
    assert!(
        killed.elapsed() < Duration::from_secs(15),
        "the calls took {:?} to fail; (call, returned after, ok): {returned_at:?}",
        killed.elapsed()
    );
    // A new call fails at once while the daemon is away.
    let err = rt
        .accelerate(&task, 7, Mode::Sync)
        .unwrap()
        .wait()
        .unwrap_err();
    assert!(err.to_string().contains("has been gone"), "{err}");
    // Back on the same socket: calls run again.
    daemon.spawn();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match rt.accelerate(&task, 1000, Mode::Sync).unwrap().wait() {
            Ok(v) => {
                assert_eq!(v, 3001);
                break;
            }
            Err(e) => assert!(Instant::now() < deadline, "not back after 30 s: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(rt.monitor_is_daemon());
}
