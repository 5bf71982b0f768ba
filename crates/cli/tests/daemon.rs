//! Integration tests: the real daemon and real client processes (the
//! `hetsched` binary as daemon, `load`, `run`, `shares` and `status`).

use hetsched_core::ids::UnitId;
use hetsched_protocol::{Client, ClientOptions, ErrorCode, FRAME_HEADER_BYTES, PROTOCOL_VERSION};
use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{ONE_GPU, TestDaemon, load_report as report, unit_s};

#[test]
fn custom_shares_50_30_20_split_the_device_within_3_points() {
    let d = TestDaemon::start("custom", ONE_GPU);
    let load = ["--unit", "gpu0", "--seconds", "3", "--exec-ms", "5"];
    let children: Vec<(f64, Child)> = [50.0, 30.0, 20.0]
        .into_iter()
        .map(|s| {
            let shares = format!("{s}");
            let class = ["--class", "custom", "--shares", shares.as_str()];
            (s, d.load(&class, &load))
        })
        .collect();
    let got: Vec<(f64, Value)> = children.into_iter().map(|(s, c)| (s, report(c))).collect();
    let total: f64 = got.iter().map(|(_, v)| unit_s(v)).sum();
    assert!(total > 2.7, "device mostly idle: {total} s of 3");
    for (share, v) in &got {
        let pct = 100.0 * unit_s(v) / total;
        assert!(
            (pct - share).abs() <= 3.0,
            "custom:{share} got {pct:.1} % of the device ({got:?})"
        );
        assert_eq!(v["class"], format!("custom:{share}"));
    }
}

#[test]
fn background_runs_only_on_an_idle_device_and_normal_splits_by_shares() {
    let d = TestDaemon::start("background", ONE_GPU);
    let bg = d.load(
        &["--class", "background"],
        &["--unit", "gpu0", "--seconds", "3"],
    );
    // Background has the idle device before the others arrive.
    wait_until(&d, "background running on gpu0", |r| {
        r.units[0].view.running > 0
    });
    let contended = ["--unit", "gpu0", "--seconds", "2"];
    let n20 = d.load(&["--class", "normal", "--shares", "20"], &contended);
    let n10 = d.load(&["--class", "normal", "--shares", "10"], &contended);
    let (n20, n10, bg) = (report(n20), report(n10), report(bg));
    let normal_total = unit_s(&n20) + unit_s(&n10);
    let pct20 = 100.0 * unit_s(&n20) / normal_total;
    assert!(
        (pct20 - 66.7).abs() <= 3.0,
        "normal 20 vs 10 got {pct20:.1} % / {:.1} %",
        100.0 - pct20
    );
    // Background had the device for the first 0.1 s and the last ~1 s,
    // when nobody else wanted it, and next to nothing in between.
    let bg_s = unit_s(&bg);
    assert!(
        (0.6..=1.4).contains(&bg_s),
        "background got {bg_s:.3} s of device time in 3 s"
    );
}

#[test]
fn a_killed_client_gives_its_grant_back_within_a_second() {
    let d = TestDaemon::start("killed", ONE_GPU);
    // The holder takes the only stream through the dispatch gate for a minute.
    let mut holder = d
        .cmd()
        .args([
            "load",
            "--unit",
            "gpu0",
            "--gate",
            "--exec-ms",
            "60000",
            "--seconds",
            "1",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut observer = d.observer().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while observer.status().unwrap().units[0].view.running == 0 {
        assert!(Instant::now() < deadline, "holder never got the device");
        std::thread::sleep(Duration::from_millis(10));
    }
    let waiter = std::thread::spawn({
        let socket = d.socket.clone();
        move || {
            let mut opts = ClientOptions::application("waiter")
                .unwrap()
                .socket(&socket);
            opts.requested = Default::default();
            let mut c = Client::connect(opts).unwrap();
            let g = c.request_dispatch(UnitId(0), 1_000_000).unwrap();
            (Instant::now(), g)
        }
    });
    // The waiter is queued behind the holder before the holder dies.
    wait_until(&d, "the waiter queued", |r| r.units[0].view.queued > 0);
    let killed_at = Instant::now();
    holder.kill().unwrap();
    holder.wait().unwrap();
    let (granted_at, grant) = waiter.join().unwrap();
    let after = granted_at.duration_since(killed_at);
    assert!(
        after < Duration::from_secs(1),
        "grant came {after:?} after the kill"
    );
    // It waited for the holder: granted only once the holder was gone.
    assert!(
        granted_at >= killed_at,
        "granted before the holder died: {grant:?}"
    );
    assert!(grant.waited_ns > 0, "{grant:?}");
}

#[test]
fn privileges_and_impossible_shares_are_refused_with_a_reason() {
    // Root starts clients as another user (uid 65534).
    if !hetsched_platform::test_support::available("root", hetsched_platform::test_support::root())
    {
        return;
    }
    let d = TestDaemon::start("privilege", ONE_GPU);
    // An unprivileged process asking for CUSTOM keeps NORMAL and is told why.
    let out = d
        .cmd()
        .args(["load", "--json", "--unit", "gpu0", "--seconds", "0.2"])
        .env("HETSCHED_CLASS", "custom")
        .env("HETSCHED_SHARES", "10")
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["class"], "normal:10");
    assert!(v["notice"].as_str().unwrap().contains("CUSTOM"), "{v}");

    // Two running programs; CUSTOM 60 for one, then 60 more would total 120.
    let long = ["--unit", "gpu0", "--seconds", "3"];
    let mut first = d.load(&[], &long);
    let mut second = d.load(&[], &long);
    let pids = wait_for_clients(&d, 2);
    let set = |pid: u32, shares: &str| {
        d.cmd()
            .args(["shares", "set", "--pid", &pid.to_string(), "--unit", "gpu0"])
            .args(["--class", "custom", "--shares", shares])
            .output()
            .unwrap()
    };
    let ok = set(pids[0], "60");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let over = set(pids[1], "60");
    assert!(!over.status.success());
    let why = String::from_utf8_lossy(&over.stderr);
    assert!(
        why.contains("would total 120") && why.contains("40 shares are still free"),
        "{why}"
    );
    let zero = set(pids[1], "0");
    assert!(!zero.status.success());
    assert!(String::from_utf8_lossy(&zero.stderr).contains("at least 1"));
    let unknown = d
        .cmd()
        .args([
            "shares", "set", "--pid", "1", "--unit", "tpu9", "--class", "normal",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("unknown unit \"tpu9\""));

    // Another user may not touch root's client.
    let out = d
        .cmd()
        .args([
            "shares",
            "set",
            "--pid",
            &pids[0].to_string(),
            "--class",
            "background",
        ])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("another user's"));
    for c in [&mut first, &mut second] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

/// Waits (up to 5 s) until the daemon's status report satisfies `ok`.
fn wait_until(d: &TestDaemon, what: &str, ok: impl Fn(&hetsched_protocol::StatusReport) -> bool) {
    let mut obs = d.observer().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ok(&obs.status().unwrap()) {
        assert!(Instant::now() < deadline, "waited 5 s for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Pids of the first `n` application clients, once that many are connected.
fn wait_for_clients(d: &TestDaemon, n: usize) -> Vec<u32> {
    let mut obs = d.observer().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = obs.status().unwrap();
        if r.clients.len() >= n {
            return r.clients.iter().map(|c| c.pid).collect();
        }
        assert!(
            Instant::now() < deadline,
            "only {} clients connected",
            r.clients.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_malformed_frame_only_disconnects_its_sender() {
    let d = TestDaemon::start("malformed", ONE_GPU);
    let worker = d.load(&[], &["--unit", "gpu0", "--seconds", "1"]);
    wait_for_clients(&d, 1);
    for garbage in [
        // A length far over the cap.
        {
            let mut f = (u32::MAX).to_le_bytes().to_vec();
            f.push(PROTOCOL_VERSION);
            f
        },
        // A valid header around bytes that are no message.
        {
            let mut f = 3u32.to_le_bytes().to_vec();
            f.push(PROTOCOL_VERSION);
            f.extend([0xff, 0xff, 0xff]);
            f
        },
        // Another protocol version.
        vec![1, 0, 0, 0, 99, 0],
    ] {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        s.write_all(&garbage).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).unwrap();
        assert!(
            reply.len() > FRAME_HEADER_BYTES,
            "no error frame before close"
        );
        let msg = hetsched_protocol::decode_daemon(&reply[FRAME_HEADER_BYTES..]).unwrap();
        assert!(
            matches!(
                msg,
                hetsched_protocol::DaemonMsg::Error {
                    code: ErrorCode::BadFrame,
                    ..
                }
            ),
            "{msg:?}"
        );
    }
    let v = report(worker);
    assert!(
        unit_s(&v) > 0.8,
        "the well-behaved client was disturbed: {v}"
    );
    assert!(d.observer().unwrap().status().is_ok());
}

#[test]
fn shares_survive_a_daemon_restart_and_clients_reconnect() {
    let mut d = TestDaemon::start("restart", ONE_GPU);
    let worker = d.load(&[], &["--unit", "gpu0", "--seconds", "3", "--depth", "1"]);
    let pid = wait_for_clients(&d, 1)[0];
    let out = d
        .cmd()
        .args(["shares", "set", "--pid", &pid.to_string(), "--unit", "gpu0"])
        .args(["--class", "custom", "--shares", "40"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The settings are in the state file (written off the lock, at most
    // five times a second) before the daemon is killed.
    let state = d.dir.join("state.json");
    let deadline = Instant::now() + Duration::from_secs(5);
    let stored = || -> Option<Value> {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&state).ok()?).ok()?;
        let p = v["processes"]
            .as_array()?
            .iter()
            .find(|p| p["pid"] == pid)?;
        Some(p["units"]["gpu0"]["class"]["shares"].clone())
    };
    while stored() != Some(Value::from(40)) {
        assert!(
            Instant::now() < deadline,
            "the new shares never reached {}",
            state.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    d.kill();
    d.spawn();
    let mut obs = d.observer().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let class = loop {
        let r = obs.status().unwrap();
        if let Some(c) = r.clients.iter().find(|c| c.pid == pid) {
            break c.units[0].settings.class.to_string();
        }
        assert!(Instant::now() < deadline, "worker never reconnected");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(class, "custom:40");
    let v = report(worker);
    assert!(v["reconnects"].as_u64().unwrap() >= 1, "{v}");
}

#[test]
fn status_json_and_prometheus_name_units_and_clients() {
    let d = TestDaemon::start("status", ONE_GPU);
    let _app = d.app("visible-app");
    let out = d.cmd().args(["status", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["units"][0]["info"]["name"], "gpu0");
    assert_eq!(v["clients"][0]["name"], "visible-app");
    let text = String::from_utf8(
        d.cmd()
            .args(["status", "--prometheus"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        text.contains("hetsched_unit_busy_fraction{unit=\"gpu0\"}"),
        "{text}"
    );
    let plain = String::from_utf8(d.cmd().arg("status").output().unwrap().stdout).unwrap();
    assert!(
        plain.contains("visible-app") && plain.contains("gpu0"),
        "{plain}"
    );
}

#[test]
fn applications_read_both_view_pages_from_shared_memory() {
    let d = TestDaemon::start("views", ONE_GPU);
    let worker = d.load(&[], &["--unit", "gpu0", "--seconds", "1.5"]);
    let app = d.app("viewer");
    let global = app.global_view().expect("applications get the global page");
    let private = app.private_view().expect("and a private page");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let u = global.unit(0).expect("unit 0 on the page");
        if u.view.busy_fraction > 0.5 && u.view.active_clients >= 1 {
            assert!(u.busy_ns_total > 0);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "global page never showed the load: {u:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let snap = private.snapshot().unwrap();
    assert_eq!(snap.client_id, app.client_id().0);
    assert!(snap.seq > 0, "private page never published");
    assert_eq!(snap.units.len(), 1);
    assert_eq!(snap.units[0].max_utilisation, 1.0);
    // Observers get no pages.
    assert!(d.observer().unwrap().global_view().is_none());
    report(worker);
}

#[test]
fn device_work_over_the_limit_is_refused_with_its_own_code() {
    let d = TestDaemon::start("too-long", &format!("max_device_seconds = 1.0\n{ONE_GPU}"));
    let mut app = d.app("long-work");
    let err = app.run_device(UnitId(0), 2_000_000_000, 0, 0).unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::WorkTooLong), "{err}");
    assert!(err.to_string().contains("1.000 s limit"), "{err}");
    // The connection goes on.
    app.run_device(UnitId(0), 1_000_000, 0, 0).unwrap();
}

/// Open descriptor numbers of a process.
fn open_fds(pid: u32) -> std::collections::BTreeSet<u32> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// The descriptor limit under which a process with `open` descriptors can
/// open exactly `more` new ones. RLIMIT_NOFILE bounds descriptor
/// *numbers* and a new descriptor takes the lowest free number, so holes
/// in the table count as room.
fn nofile_limit_allowing(open: &std::collections::BTreeSet<u32>, more: u32) -> u64 {
    let mut free = 0;
    let mut n = 0;
    loop {
        if !open.contains(&n) {
            if free == more {
                return u64::from(n);
            }
            free += 1;
        }
        n += 1;
    }
}

#[test]
fn the_nofile_limit_counts_holes_as_room() {
    let open = [0, 1, 2, 4, 5].into_iter().collect();
    assert_eq!(nofile_limit_allowing(&open, 0), 3);
    assert_eq!(nofile_limit_allowing(&open, 1), 6);
    assert_eq!(nofile_limit_allowing(&open, 2), 7);
}

#[test]
fn an_application_whose_view_page_cannot_be_made_is_told_so() {
    use rustix::process::{Pid, Resource, Rlimit, prlimit};
    let d = TestDaemon::start("no-views", ONE_GPU);
    let daemon = d.child.as_ref().unwrap().id();
    let pid = Pid::from_raw(daemon as i32);
    // Wait until the daemon holds only its own descriptors (the start-up
    // probe's connection is gone), then allow one more: the socket of the
    // next connection, but not the memfd of its private page. (A transient
    // descriptor of the daemon's /proc scan can only delay the accept or
    // take the memfd's place; either way the answer is the same.)
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut fds = open_fds(daemon);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = open_fds(daemon);
        if now == fds {
            break;
        }
        fds = now;
        assert!(Instant::now() < deadline, "descriptor count never settled");
    }
    // Only descriptors open in every one of several samples count: one a
    // /proc scan held during both samples above would leave room for the
    // memfd too (seen once under load in CI).
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(10));
        let now = open_fds(daemon);
        fds.retain(|fd| now.contains(fd));
    }
    // The daemon inherited this process's hard limit; keep it.
    let hard = rustix::process::getrlimit(Resource::Nofile).maximum;
    let tight = Rlimit {
        current: Some(nofile_limit_allowing(&fds, 1)),
        maximum: hard,
    };
    let old = prlimit(pid, Resource::Nofile, tight).unwrap();
    let mut opts = ClientOptions::application("no-page")
        .unwrap()
        .socket(&d.socket);
    opts.requested = Default::default();
    let err = Client::connect(opts.clone()).unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::ViewsUnavailable), "{err}");
    // Nothing was registered, and with descriptors back a later
    // connection gets its pages.
    prlimit(pid, Resource::Nofile, old).unwrap();
    assert!(d.observer().unwrap().status().unwrap().clients.is_empty());
    let app = Client::connect(opts).unwrap();
    assert!(app.private_view().is_some());
}

#[test]
fn a_client_that_stops_reading_is_cut_off_and_others_keep_going() {
    let d = TestDaemon::start("slow-reader", ONE_GPU);
    let mut worker = d.app("worker");
    let mut s = UnixStream::connect(&d.socket).unwrap();
    let hello = hetsched_protocol::encode_frame(&hetsched_protocol::ClientMsg::Hello {
        name: "never-reads".into(),
        role: hetsched_protocol::Role::Application,
        requested: Default::default(),
    });
    s.write_all(&hello).unwrap();
    // Ask for status reports and never read them: the replies fill the
    // socket, a send would block, and the daemon cuts the client off.
    let status = hetsched_protocol::encode_frame(&hetsched_protocol::ClientMsg::Status {
        first_client: hetsched_core::ids::ClientId(0),
        max_clients: u32::MAX,
    });
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let cut_off = loop {
        if let Err(e) = s.write_all(&status) {
            break e;
        }
        assert!(Instant::now() < deadline, "never cut off");
    };
    assert!(
        matches!(
            cut_off.kind(),
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
        ),
        "{cut_off}"
    );
    // The others are served, and the reader is released at once (what
    // it sent after being cut off is not served), well within a second.
    worker.run_device(UnitId(0), 1_000_000, 0, 0).unwrap();
    let mut obs = d.observer().unwrap();
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let clients = obs.status().unwrap().clients;
        let names: Vec<String> = clients.into_iter().map(|c| c.name).collect();
        if names == ["worker"] {
            break;
        }
        assert!(Instant::now() < deadline, "still listed: {names:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Nice level of every thread of a process (none once it is gone).
fn thread_nices(pid: u32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| {
            let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
            // Field 19 (nice), counted after the command name.
            let after = &stat[stat.rfind(')')? + 1..];
            after.split_whitespace().nth(16)?.parse().ok()
        })
        .collect()
}

#[test]
fn the_cpu_agent_renices_background_clients() {
    // Only root may give threads their priority back.
    if !hetsched_platform::test_support::available("root", hetsched_platform::test_support::root())
    {
        return;
    }
    let config = format!(
        "include_cpus = true\ncpu_nice_from_shares = true\ncpu_scan_ms = 50\n{}",
        ONE_GPU.replace("include_cpus = false", "")
    );
    let d = TestDaemon::start("renice", &config);
    let mut bg = d.load(
        &["--class", "background"],
        &["--unit", "gpu0", "--seconds", "5", "--depth", "1"],
    );
    let normal = d.load(&[], &["--unit", "gpu0", "--seconds", "2"]);
    let pids = wait_for_clients(&d, 2);
    let bg_pid = bg.id();
    assert!(pids.contains(&bg_pid), "{pids:?} vs {bg_pid}");
    let normal_pid = normal.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let nices = thread_nices(bg_pid);
        if !nices.is_empty() && nices.iter().all(|&n| n == 19) {
            break;
        }
        assert!(Instant::now() < deadline, "background threads at {nices:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A default client keeps the priority it started with (this test's).
    let own = rustix::process::getpriority_process(None).unwrap();
    let nices = thread_nices(normal_pid);
    assert!(nices.iter().all(|&n| n == own), "{nices:?} vs {own}");
    report(normal);
    bg.kill().unwrap();
    bg.wait().unwrap();
}

/// Settings changes are written at most five times a second; a daemon
/// stopped with SIGTERM writes the last one before it exits, so a change
/// acknowledged just before the stop is in the state file.
#[test]
fn a_daemon_stopped_by_sigterm_writes_its_pending_settings() {
    use hetsched_protocol::{SettingsRequest, WireClass};
    let mut d = TestDaemon::start("sigterm-flush", ONE_GPU);
    let mut c = d.app("flushed");
    for shares in [11, 12, 13, 14, 15, 16, 17] {
        c.set_settings(
            None,
            None,
            SettingsRequest {
                class: Some(WireClass::Normal(shares)),
                priority: None,
            },
        )
        .unwrap();
    }
    let mut child = d.child.take().unwrap();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the daemon did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let state = std::fs::read_to_string(d.dir.join("state.json")).unwrap();
    let state: Value = serde_json::from_str(&state).unwrap();
    let shares = &state["processes"][0]["units"]["gpu0"]["class"]["shares"];
    assert_eq!(shares, 17, "the last change is not in {state}");
    drop(c);
}

/// A `hetsched bench hold-connections` process running as `uid`: it opens
/// up to `count` connections and holds them while its stdin is open.
struct Holder {
    child: Child,
    held: u32,
    refused: String,
}

fn hold_as(d: &TestDaemon, uid: u32, count: u32) -> Holder {
    use std::io::BufRead;
    let mut child = std::process::Command::new(common::BIN)
        .args(["bench", "hold-connections", "--socket"])
        .arg(&d.socket)
        .args(["--count", &count.to_string()])
        .uid(uid)
        .gid(uid)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let held = line
        .trim()
        .strip_prefix("held ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the holder said {line:?}"));
    line.clear();
    out.read_line(&mut line).unwrap();
    let refused = line.trim().trim_start_matches("refused ").to_string();
    Holder {
        child,
        held,
        refused,
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// One user opening connections until refused cannot lock out another
/// user, nor root: each user holds at most `max_connections_per_uid`, all
/// of them but root at most `max_connections`, and root always gets in.
/// Runs two real unprivileged users (the test needs root, as CI is).
#[test]
fn one_user_cannot_lock_the_others_out() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test runs clients as two other users, which needs root (CI runs as root)"
    );
    let d = TestDaemon::start(
        "connection-limits",
        &format!("max_connections_per_uid = 8\nmax_connections = 12\n{ONE_GPU}"),
    );
    let first = hold_as(&d, 65534, 50);
    assert_eq!(first.held, 8, "refused: {}", first.refused);
    assert!(
        first.refused.contains("max_connections_per_uid"),
        "{}",
        first.refused
    );
    // Another user gets what is left of the total, then a clear refusal.
    let second = hold_as(&d, 65533, 50);
    assert_eq!(second.held, 4, "refused: {}", second.refused);
    assert!(
        second.refused.contains("max_connections"),
        "{}",
        second.refused
    );
    // Root is let in beyond the total.
    for _ in 0..3 {
        let status = d.observer().unwrap().status().unwrap();
        assert!(status.daemon.pid > 0);
    }
    // Places come back when a user's connections close.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    let third = loop {
        let h = hold_as(&d, 65532, 3);
        if h.held == 3 || Instant::now() > deadline {
            break h;
        }
        drop(h);
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(third.held, 3, "refused: {}", third.refused);
}

/// A connection that never says Hello is closed after the handshake
/// deadline (5 s), so silent connections cannot pile up.
#[test]
fn a_connection_that_never_says_hello_is_closed() {
    let d = TestDaemon::start("handshake-deadline", ONE_GPU);
    let mut silent = UnixStream::connect(&d.socket).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let n = silent.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the daemon sent something to a silent client");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(4) && waited < Duration::from_secs(20),
        "closed after {waited:?}"
    );
}

/// Shares belong to the process: a process that opens four connections
/// gets what a process with one gets at equal shares (the daemon's own
/// charge of modelled device time, not wall time: both keep two tasks
/// queued on every connection throughout).
#[test]
fn four_connections_of_one_process_share_one_entitlement() {
    let out = std::process::Command::new(common::BIN)
        .args(["bench", "process-shares", "--connections", "4"])
        .args(["--seconds", "2", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gap = report["gap_pp"].as_f64().unwrap();
    // Per connection (the old accounting) the gap would be 60 pp.
    assert!(gap.abs() <= 5.0, "{report}");
}

/// `--parent-pid`: a daemon whose supervisor is SIGKILLed stops as on
/// SIGTERM (its socket removed); a wrong parent pid is refused at start.
#[test]
fn a_daemon_with_parent_pid_stops_when_its_parent_dies() {
    let d = TestDaemon::start("parent-pid", ONE_GPU);
    let socket = d.dir.join("child.sock");
    let config = d.dir.join("hetsched.toml");

    let mut wrong = common::daemon_command(Some(&config), &socket);
    wrong.args(["--parent-pid", "1"]);
    let err = common::refused_start(wrong);
    assert!(
        err.contains("--parent-pid 1: the daemon's parent is process"),
        "{err}"
    );

    // The parent: a shell that starts the daemon, then becomes `sleep`.
    let script = format!(
        "{bin} daemon --parent-pid $$ --config {config} --socket {socket} 2>/dev/null & exec sleep 600",
        bin = common::BIN,
        config = config.display(),
        socket = socket.display()
    );
    let parent = std::process::Command::new("sh")
        .args(["-c", &script])
        .spawn()
        .unwrap();
    let mut parent = common::Reaped(parent);
    let connect = || Client::connect(ClientOptions::observer("test").socket(&socket));
    drop(common::wait_for_daemon(&socket, Duration::from_secs(10)));
    parent.0.kill().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while socket.exists() {
        assert!(
            Instant::now() < deadline,
            "the daemon outlived its parent by 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(connect().is_err());
}

/// Under systemd (Type=notify): READY=1 once the socket takes
/// connections, STOPPING=1 on SIGTERM.
#[test]
fn the_daemon_tells_systemd_when_it_is_ready_and_when_it_stops() {
    use std::os::unix::net::UnixDatagram;
    let d = TestDaemon::start("notify", ONE_GPU);
    let notify = d.dir.join("notify.sock");
    let socket = d.dir.join("notified.sock");
    let listener = UnixDatagram::bind(&notify).unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let child = common::daemon_command(Some(&d.dir.join("hetsched.toml")), &socket)
        .env("NOTIFY_SOCKET", &notify)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = common::Reaped(child);
    let mut buf = [0u8; 4096];
    let n = listener.recv(&mut buf).expect("no READY from the daemon");
    let msg = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(msg.lines().any(|l| l == "READY=1"), "{msg}");
    assert!(
        msg.contains(&format!("STATUS=listening on {}", socket.display())),
        "{msg}"
    );
    // Ready means ready: a client gets in at once.
    Client::connect(ClientOptions::observer("after-ready").socket(&socket)).unwrap();

    let term = std::process::Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let n = listener
        .recv(&mut buf)
        .expect("no STOPPING from the daemon");
    assert_eq!(String::from_utf8_lossy(&buf[..n]).trim(), "STOPPING=1");
    assert!(child.0.wait().unwrap().success());
}

/// The daemon logs one line per client connecting and leaving (pid, uid,
/// name) and per settings change, at info level.
#[test]
fn the_daemon_logs_clients_and_settings_changes() {
    use hetsched_protocol::{SettingsRequest, WireClass};
    let d = TestDaemon::start_logged("logging", ONE_GPU);
    let mut c = d.app("logged \"app\"");
    c.set_settings(
        None,
        None,
        SettingsRequest {
            class: Some(WireClass::Normal(7)),
            priority: None,
        },
    )
    .unwrap();
    drop(c);
    let pid = std::process::id();
    let deadline = Instant::now() + Duration::from_secs(10);
    let lines = loop {
        let log = d.log_text();
        let lines: Vec<String> = log
            .lines()
            .filter(|l| l.contains(r#"name="logged \"app\"""#) || l.contains("settings changed"))
            .map(str::to_string)
            .collect();
        if lines.iter().any(|l| l.contains("client disconnected")) {
            break lines;
        }
        assert!(Instant::now() < deadline, "no disconnect line in: {log}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(
        lines[0].contains("INFO") && lines[0].contains("client connected"),
        "{lines:#?}"
    );
    assert!(lines[0].contains(&format!("pid={pid}")) && lines[0].contains("uid="));
    assert!(lines[1].contains("settings changed") && lines[1].contains("Normal(7)"));
    assert!(lines[2].contains("client disconnected"), "{lines:#?}");
}

/// systemd socket activation: the daemon serves the socket it is handed
/// (`systemd-socket-activate` plays systemd), and leaves it in place when
/// it stops.
#[test]
fn a_socket_systemd_passes_is_served_and_left_in_place() {
    let tool = std::process::Command::new("systemd-socket-activate")
        .arg("--version")
        .output();
    let found = match tool {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("systemd-socket-activate is not installed".to_string()),
    };
    if !hetsched_platform::test_support::available("systemd", found) {
        return;
    }
    let d = TestDaemon::start("activation", ONE_GPU);
    let socket = d.dir.join("activated.sock");
    let log = d.dir.join("activated.log");
    let child = std::process::Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&socket)
        .args([common::BIN, "daemon", "--config"])
        .arg(d.dir.join("hetsched.toml"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut child = common::Reaped(child);
    // The first connection starts the daemon, which answers it.
    let mut obs = common::wait_for_daemon(&socket, Duration::from_secs(20));
    let status = obs.status().unwrap();
    assert_eq!(status.daemon.socket, socket.display().to_string());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("(socket from systemd)"), "{text}");
    drop(obs);
    let term = std::process::Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    assert!(child.0.wait().unwrap().success());
    assert!(socket.exists(), "the daemon removed systemd's socket");
}
