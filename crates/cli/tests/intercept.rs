//! Unmodified OpenCL programs under `hetsched run`: the OpenCL layer puts
//! their launches under the daemon's leases and their allocations under
//! caps. Real processes on PoCL (`scripts/install-deps.sh` installs it).
#![cfg(feature = "opencl")]

use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::{BIN, TestDaemon};

/// The tests share PoCL, which is this machine's CPUs: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn device() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// `hetsched run --class CLASS [--shares S] -- hetsched load
/// --direct-opencl 0 LOAD…` against the daemon at `socket`: a plain
/// OpenCL loop that never talks to the daemon itself.
fn direct_load(socket: &std::path::Path, class: &str, load: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    let (name, shares) = class.split_once(':').unwrap_or((class, ""));
    cmd.args(["run", "--class", name]);
    if !shares.is_empty() {
        cmd.args(["--shares", shares]);
    }
    cmd.arg("--")
        .arg(BIN)
        .args(["load", "--direct-opencl", "0"])
        .args(load)
        .env("HETSCHED_SOCKET", socket);
    cmd
}

/// Waits (30 s at most) until the daemon shows a client of `pid` that is
/// intercepted and was charged device time.
fn wait_governed(daemon: &TestDaemon, pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let governed = daemon
            .observer()
            .ok()
            .and_then(|mut o| o.status().ok())
            .is_some_and(|r| {
                r.clients.iter().any(|c| {
                    c.pid == pid
                        && c.intercepted.is_some()
                        && c.units.iter().any(|u| u.busy_ns_total > 0)
                })
            });
        if governed {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "program {pid} was not governed within 30 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `cmd` to success and reads the JSON it printed.
fn json_of(cmd: &mut Command) -> (Value, String) {
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (serde_json::from_slice(&out.stdout).unwrap(), stderr)
}

/// Two copies of a plain OpenCL loop at CUSTOM 70 / 30 split the device
/// time 70 / 30 within 3 points, every result checked, both marked
/// intercepted; a BACKGROUND copy gets at most 2 % against a busy CUSTOM
/// one. The shares are timing: a CUSTOM program that other programs on
/// this machine keep off the CPU is not busy, and BACKGROUND rightly gets
/// the device meanwhile. So the timing figures get three runs to show
/// themselves; the results are checked in every run.
#[test]
fn unmodified_programs_split_a_device_by_shares() {
    let _d = device();
    let mut misses = Vec::new();
    for _ in 0..3 {
        let (r, _) = json_of(
            Command::new(BIN)
                .args(["bench", "intercept", "--json", "--seconds", "5"])
                .args(["--overhead-seconds", "0.5"]),
        );
        assert_eq!(r["checked"], true, "{r}");
        assert_eq!(r["unit"], "opencl0");
        assert!(r["overhead_ratio"].as_f64().unwrap() > 0.0);
        assert!(r["custom_wait_p99_ms"].as_f64().unwrap() > 0.0, "{r}");
        let clients = r["clients"].as_array().unwrap();
        let split = clients.iter().zip([0.70, 0.30]).all(|(c, want)| {
            assert_eq!(c["intercepted"], true);
            (c["device_fraction"].as_f64().unwrap() - want).abs() <= 0.03
        });
        // BACKGROUND gets next to nothing while a CUSTOM program is busy.
        let background = r["background_fraction"].as_f64().unwrap();
        if split && background <= 0.02 {
            return;
        }
        eprintln!("split or BACKGROUND off target: {r}");
        misses.push(r);
    }
    panic!("three runs off target: {misses:?}");
}

/// Without a daemon every call passes through: the program runs to the
/// end with its results right, and one line says why.
#[test]
fn with_no_daemon_the_program_runs_ungoverned() {
    let _d = device();
    let dir = tempfile::tempdir().unwrap();
    let (r, stderr) = json_of(
        direct_load(
            &dir.path().join("none.sock"),
            "custom:50",
            &["--seconds", "0.5", "--json"],
        )
        .env_remove("HETSCHED_INTERCEPT_QUIET"),
    );
    assert!(r["tasks"].as_u64().unwrap() > 0);
    assert_eq!(r["tasks"], r["verified"]);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("hetsched:"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    assert!(said[0].contains("pass through"), "{stderr}");
}

/// A device-memory cap is exact to the byte, and past it the allocation
/// fails with CL_MEM_OBJECT_ALLOCATION_FAILURE; the program goes on.
#[test]
fn a_memory_cap_refuses_with_the_apis_own_code() {
    let _d = device();
    let daemon = TestDaemon::start("intercept-mem", "include_cpus = false\n");
    let script = r#"
import pyopencl as cl, numpy as np
ctx = cl.Context([cl.get_platforms()[0].get_devices()[0]])
mf = cl.mem_flags
a = cl.Buffer(ctx, mf.READ_WRITE, 600 * 1024)
b = cl.Buffer(ctx, mf.READ_WRITE, 400 * 1024)
try:
    cl.Buffer(ctx, mf.READ_WRITE, 1)
    print("over the cap: allocated")
except cl.MemoryError as e:
    print("over the cap:", e.code == cl.status_code.MEM_OBJECT_ALLOCATION_FAILURE)
b.release()
c = cl.Buffer(ctx, mf.READ_WRITE, 400 * 1024)
q = cl.CommandQueue(ctx)
x = np.arange(1024, dtype=np.float32)
cl.enqueue_copy(q, c, x)
y = np.empty_like(x)
cl.enqueue_copy(q, y, c)
print("after release:", bool((x == y).all()))
"#;
    let out = Command::new(BIN)
        .args([
            "run",
            "--class",
            "normal",
            "--device-memory",
            "1000K",
            "--",
            "python3",
            "-c",
            script,
        ])
        .env("HETSCHED_SOCKET", &daemon.socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("over the cap: True"), "{text}");
    assert!(text.contains("after release: True"), "{text}");
}

/// A program killed while it holds the device's lease gives it back: the
/// next program is granted within a second.
#[test]
fn a_killed_program_releases_its_lease() {
    let _d = device();
    let daemon = TestDaemon::start("intercept-kill", "include_cpus = false\n");
    let mut holder = direct_load(
        &daemon.socket,
        "custom:90",
        &["--seconds", "60", "--bytes", "262144"],
    )
    .spawn()
    .unwrap();
    wait_governed(&daemon, holder.id());
    let pid = holder.id();
    holder.kill().unwrap();
    holder.wait().unwrap();
    let killed = Instant::now();
    // Within a second the daemon has let go of it: the client is gone and
    // nothing holds the device.
    let mut observer = daemon.observer().unwrap();
    loop {
        let r = observer.status().unwrap();
        let gone = !r.clients.iter().any(|c| c.pid == pid);
        if gone && r.units.iter().all(|u| u.view.running == 0) {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(1),
            "the killed program still held the device after 1 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let (r, _) = json_of(&mut direct_load(
        &daemon.socket,
        "custom:10",
        &["--seconds", "0.3", "--json"],
    ));
    assert!(r["tasks"].as_u64().unwrap() > 0);
    // The next program's first wait is part of its run: well under the
    // program's own start-up plus a second.
    assert!(
        killed.elapsed() < Duration::from_secs(15),
        "{:?}",
        killed.elapsed()
    );
    assert_eq!(r["tasks"], r["verified"]);
}

/// A daemon restart leaves a governed program running (ungoverned while
/// the daemon is away), and the program is governed again once the daemon
/// is back; its results stay right.
#[test]
fn a_program_survives_a_daemon_restart_and_is_governed_again() {
    let _d = device();
    let mut daemon = TestDaemon::start("intercept-restart", "include_cpus = false\n");
    let program = direct_load(
        &daemon.socket,
        "custom:60",
        &["--seconds", "8", "--bytes", "65536", "--json"],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    wait_governed(&daemon, program.id());
    daemon.kill();
    daemon.spawn();
    wait_governed(&daemon, program.id());
    let out = program.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["tasks"].as_u64().unwrap() > 0);
    assert_eq!(r["tasks"], r["verified"]);
}

/// `hetsched shares set --device-memory` caps a program that is already
/// running: its later allocations are refused with the API's code.
#[test]
fn a_cap_set_on_a_running_program_refuses_its_later_allocations() {
    let _d = device();
    let daemon = TestDaemon::start("intercept-live-cap", "include_cpus = false\n");
    let script = r#"
import sys, time, pyopencl as cl
ctx = cl.Context([cl.get_platforms()[0].get_devices()[0]])
mf = cl.mem_flags
held = [cl.Buffer(ctx, mf.READ_WRITE, 256 * 1024) for _ in range(2)]
print("ready", flush=True)
sys.stdin.readline()
for _ in range(60):
    try:
        held.append(cl.Buffer(ctx, mf.READ_WRITE, 256 * 1024))
    except cl.MemoryError as e:
        print("refused", e.code == cl.status_code.MEM_OBJECT_ALLOCATION_FAILURE, flush=True)
        break
    time.sleep(0.05)
else:
    print("never refused", flush=True)
"#;
    let mut program = Command::new(BIN)
        .args(["run", "--class", "normal", "--", "python3", "-c", script])
        .env("HETSCHED_SOCKET", &daemon.socket)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines =
        std::io::BufRead::lines(std::io::BufReader::new(program.stdout.take().unwrap()));
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let set = Command::new(BIN)
        .args([
            "shares",
            "set",
            "--pid",
            &program.id().to_string(),
            "--device-memory",
            "1M",
        ])
        .env("HETSCHED_SOCKET", &daemon.socket)
        .output()
        .unwrap();
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    assert!(String::from_utf8_lossy(&set.stdout).contains("capped at 1M"));
    let report = daemon.observer().unwrap().status().unwrap();
    let client = report
        .clients
        .iter()
        .find(|c| c.pid == program.id())
        .unwrap();
    assert_eq!(client.device_memory_limit, Some(1 << 20));
    std::io::Write::write_all(program.stdin.as_mut().unwrap(), b"go\n").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "refused True");
    assert!(program.wait().unwrap().success());
}
