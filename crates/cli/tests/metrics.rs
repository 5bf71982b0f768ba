//! `hetsched daemon --metrics`: the real daemon serves `/metrics` over
//! HTTP while real load clients use its unit; counters of a client that
//! left stay, and client names are escaped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

mod common;
use common::{TestDaemon, load_report};

/// [`common::ONE_GPU`] with metrics on a port of the system's choosing.
fn gpu_with_metrics() -> String {
    format!("metrics_listen = \"127.0.0.1:0\"\n{}", common::ONE_GPU)
}

/// The address the daemon printed: "metrics on http://ADDR/metrics".
fn metrics_addr(d: &TestDaemon) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = d.log_text();
        if let Some(rest) = log.split("metrics on http://").nth(1) {
            return rest.split('/').next().unwrap().to_string();
        }
        assert!(Instant::now() < deadline, "no metrics line in: {log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The status line and the body of `GET path`.
fn get(addr: &str, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// The value of the sample whose name and labels are exactly `series`.
fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

#[test]
fn metrics_show_units_and_clients_and_keep_departed_totals() {
    let d = TestDaemon::start_logged("metrics", &gpu_with_metrics());
    let addr = metrics_addr(&d);

    let (status, body) = get(&addr, "/metrics");
    assert!(status.contains("200"), "{status}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert!(body.contains("hetsched_build_info{version=\""), "{body}");
    assert_eq!(
        sample(
            &body,
            "hetsched_unit_utilization{unit=\"gpu0\",kind=\"gpu0\",class=\"gpu\"}"
        ),
        Some(0.0)
    );

    let name = r#"odd\name"x"#;
    let load = d.load(
        &["--class", "custom", "--shares", "60"],
        &[
            "--unit",
            "gpu0",
            "--seconds",
            "1",
            "--exec-ms",
            "2",
            "--name",
            name,
        ],
    );
    // While it runs: its standing, under its escaped name.
    let escaped = r#"odd\\name\"x"#;
    let shares =
        format!("hetsched_client_shares{{client=\"{escaped}\",class=\"custom\",unit=\"gpu0\"}}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while sample(&get(&addr, "/metrics").1, &shares) != Some(60.0) {
        assert!(Instant::now() < deadline, "no shares for the load client");
        std::thread::sleep(Duration::from_millis(20));
    }
    let report = load_report(load);

    // After it left (the daemon has seen its connection close: its
    // standing is gone), what it was charged stays in the counters.
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let (_, body) = get(&addr, "/metrics");
        if sample(&body, &shares).is_none() {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "the load client's standing stays: {body}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let seconds =
        format!("hetsched_client_device_seconds_total{{client=\"{escaped}\",unit=\"gpu0\"}}");
    let charged = sample(&body, &seconds).unwrap_or_else(|| panic!("{seconds} not in {body}"));
    let reported = common::unit_s(&report);
    // As many seconds as the client was told it was charged, and at most
    // its 2 in-flight tasks of 2 ms more (they may finish after it stopped
    // reading).
    assert!(
        charged >= reported - 1e-6 && charged <= reported + 2.0 * 0.002 + 1e-3,
        "metrics {charged} s, load report {reported} s"
    );
    let tasks = format!("hetsched_client_tasks_total{{client=\"{escaped}\",unit=\"gpu0\"}}");
    let tasks = sample(&body, &tasks).unwrap();
    // The daemon counts a task when it finishes; the load client stops
    // reading with up to 2 (its depth) in flight, which may finish after.
    let seen = report["tasks"].as_f64().unwrap();
    assert!(
        (seen..=seen + 2.0).contains(&tasks),
        "{tasks} tasks counted, the client saw {seen}"
    );
    let waits = format!("hetsched_client_wait_seconds_count{{client=\"{escaped}\"}}");
    // Waits are counted when a request gets its slot: the load's last
    // requests (it keeps 2 outstanding) may have started and not finished.
    let waits = sample(&body, &waits).unwrap();
    assert!(
        (tasks..=tasks + 2.0).contains(&waits),
        "{waits} waits, {tasks} tasks"
    );
    let unit_tasks = sample(&body, "hetsched_unit_tasks_total{unit=\"gpu0\"}").unwrap();
    assert!(unit_tasks >= tasks);

    let (status, _) = get(&addr, "/nothing");
    assert!(status.contains("404"), "{status}");
}

#[test]
fn a_metrics_address_in_use_is_refused_at_start() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let d = TestDaemon::start("metrics-taken", common::ONE_GPU);
    let mut daemon = common::daemon_command(None, &d.dir.join("other.sock"));
    daemon
        .args(["--metrics", &addr.to_string()])
        .env("HETSCHED_SOCKET", d.dir.join("other.sock"));
    let err = common::refused_start(daemon);
    assert!(
        err.contains(&format!("cannot serve metrics on {addr}")),
        "{err}"
    );
}
