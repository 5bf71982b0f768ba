//! A hostile local user against the service: `/metrics` abused (a scrape
//! loop, an oversized header, an unread pipelined connection, more
//! connections than the cap), a device slot held for ever, and a demoted
//! process whose child is orphaned and connects. Each attack runs in a
//! process of its own as uid 65534 (when the tests run as root, as CI
//! does): this test binary again, running [`attacker`] with the role in
//! `HOSTILE_ROLE`. Each test asserts that the daemon survives, that the
//! victim (root) is served, and that the attacker got a clear refusal.

use hetsched_core::ids::UnitId;
use hetsched_protocol::{Client, ClientError, ClientOptions, SettingsRequest};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod common;
use common::{Reaped, TestDaemon};

/// The user attacks run as.
const NOBODY: u32 = 65534;

/// [`common::ONE_GPU`] with metrics on a loopback port, then `tables`.
fn gpu_with_metrics(tables: &str) -> String {
    format!(
        "metrics_listen = \"127.0.0.1:0\"\n{}\n{tables}",
        common::ONE_GPU
    )
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

/// The status line of `GET /metrics`, and its body.
fn scrape(addr: &str) -> std::io::Result<(String, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n")?;
    let mut bytes = Vec::new();
    s.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Ok((
        head.lines().next().unwrap_or("").to_string(),
        body.to_string(),
    ))
}

/// A `/proc/PID/status` field's number (`VmRSS:` in kB, `Threads:`).
fn proc_status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {field} for {pid}"))
}

fn daemon_pid(d: &TestDaemon) -> u32 {
    d.child.as_ref().unwrap().id()
}

/// An attacker process: this binary running [`attacker`] as `role`, as
/// uid 65534 when the tests run as root. What it says on lines that
/// start with `ATTACK:` comes through [`Attacker::expect`].
struct Attacker {
    /// Killed when the test ends (closing its stdin ends a holding one).
    child: Reaped,
    lines: mpsc::Receiver<String>,
}

impl Attacker {
    fn start(role: &str, env: &[(&str, &str)]) -> Attacker {
        let mut c = Command::new(std::env::current_exe().unwrap());
        c.args(["attacker", "--exact", "--ignored", "--nocapture"])
            .args(["--test-threads", "1"])
            .env("HOSTILE_ROLE", role)
            .env_remove("HETSCHED_CLASS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            c.env(k, v);
        }
        if rustix::process::getuid().is_root() {
            c.uid(NOBODY).gid(NOBODY);
        }
        let mut child = c.spawn().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                // The harness may print "test attacker ... " before it on
                // the same line.
                if let Some((_, said)) = line.split_once("ATTACK: ") {
                    if tx.send(said.to_string()).is_err() {
                        return;
                    }
                }
            }
        });
        Attacker {
            child: Reaped(child),
            lines,
        }
    }

    fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// Writes a line to the attacker's stdin.
    fn say(&mut self, line: &str) {
        let stdin = self.child.0.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
    }

    /// The attacker's next line, which must start with `prefix`, within
    /// `within`.
    fn expect(&self, prefix: &str, within: Duration) -> String {
        let line = self
            .lines
            .recv_timeout(within)
            .unwrap_or_else(|e| panic!("the attacker did not say {prefix:?}: {e}"));
        assert!(
            line.starts_with(prefix),
            "expected {prefix:?}, got {line:?}"
        );
        line
    }
}

/// The attacks. Run only by the tests above, as a process of its own
/// (`HOSTILE_ROLE` unset: nothing to do).
#[test]
#[ignore = "the attacker's side, started by the other tests as an unprivileged process"]
fn attacker() {
    let Ok(role) = std::env::var("HOSTILE_ROLE") else {
        return;
    };
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} unset"));
    let say = |what: String| {
        println!("ATTACK: {what}");
        std::io::stdout().flush().unwrap();
    };
    // Holds what it opened until the test closes its stdin.
    let hold = || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
    };
    match role.as_str() {
        "scrape" => {
            let addr = var("METRICS_ADDR");
            say("started".into());
            let until = Instant::now() + Duration::from_secs(2);
            let mut ok = 0;
            while Instant::now() < until {
                if scrape(&addr).is_ok_and(|(status, _)| status.contains("200")) {
                    ok += 1;
                }
            }
            say(format!("scraped {ok}"));
        }
        "header" => {
            let addr = var("METRICS_ADDR");
            let mut s = TcpStream::connect(&addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nX-Big: ").unwrap();
            // 256 MiB of header, or until the daemon hangs up.
            let chunk = vec![b'a'; 1 << 20];
            let mut sent = 0usize;
            while sent < 256 << 20 && s.write_all(&chunk).is_ok() {
                sent += chunk.len();
            }
            let mut answer = Vec::new();
            let _ = s.read_to_end(&mut answer);
            let text = String::from_utf8_lossy(&answer);
            say(format!(
                "answered {} after {} MiB",
                text.lines().next().unwrap_or("nothing"),
                sent >> 20
            ));
        }
        "pipeline" => {
            let addr = var("METRICS_ADDR");
            let mut s = TcpStream::connect(&addr).unwrap();
            let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n");
            for _ in 0..1000 {
                if s.write_all(request.as_bytes()).is_err() {
                    break;
                }
            }
            say("sent".into());
            hold();
        }
        "connections" => {
            let addr = var("METRICS_ADDR");
            let n: usize = var("CONNECTIONS").parse().unwrap();
            let held: Vec<TcpStream> = (0..n)
                .filter_map(|_| TcpStream::connect(&addr).ok())
                .collect();
            say(format!("holding {}", held.len()));
            hold();
        }
        "hold" => {
            let mut opts = ClientOptions::application("hog")
                .unwrap()
                .socket(var("HETSCHED_SOCKET"));
            opts.requested = SettingsRequest::default();
            let mut c = Client::connect(opts).unwrap();
            let unit = c.unit_by_name("gpu0").unwrap().id;
            let grant = c.request_dispatch(unit, 1_000_000).unwrap();
            say("granted".into());
            // Never completes; waits to be told.
            c.set_reply_timeout(Some(Duration::from_secs(30))).unwrap();
            match c.wait_revoked(grant) {
                Ok(ClientError::Refused { code, message }) => {
                    say(format!("revoked {code:?}: {message}"))
                }
                other => say(format!("not revoked: {other:?}")),
            }
        }
        "forker" => {
            // A connected client that, once demoted, forks a child that
            // forks the real attacker and exits at once: the attacker is
            // orphaned within milliseconds of its fork and connects.
            let mut opts = ClientOptions::application("forker")
                .unwrap()
                .socket(var("HETSCHED_SOCKET"));
            opts.requested = SettingsRequest::default();
            let _c = Client::connect(opts).unwrap();
            say("connected".into());
            let mut go = String::new();
            std::io::stdin().read_line(&mut go).unwrap();
            let status = Command::new("sh")
                .args([
                    "-c",
                    r#""$BIN" load --json --unit gpu0 --seconds 0.3 --name orphan > "$REPORT" &"#,
                ])
                .stdin(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
            say("forked".into());
            hold();
        }
        other => panic!("no attack {other:?}"),
    }
}

/// A root client that asks for the gate and says how long it waited.
fn victim(d: &TestDaemon, class: Option<&str>) -> Client {
    let mut opts = ClientOptions::application("victim")
        .unwrap()
        .socket(&d.socket);
    opts.requested = match class {
        Some("custom90") => SettingsRequest {
            class: Some(hetsched_protocol::WireClass::Custom(90)),
            priority: None,
        },
        _ => SettingsRequest::default(),
    };
    Client::connect(opts).unwrap()
}

#[test]
fn a_scrape_loop_does_not_stall_the_gate() {
    let d = TestDaemon::start_logged("hostile-scrape", &gpu_with_metrics(""));
    let addr = metrics_addr(&d);
    // Idle clients, whose snapshot a scrape under the state lock would
    // have copied every time.
    let idle: Vec<Client> = (0..300)
        .map(|i| {
            let mut opts = ClientOptions::application(format!("idle-{i}"))
                .unwrap()
                .socket(&d.socket);
            opts.requested = SettingsRequest::default();
            Client::connect(opts).unwrap()
        })
        .collect();
    let scraper = Attacker::start("scrape", &[("METRICS_ADDR", &addr)]);
    scraper.expect("started", Duration::from_secs(10));
    // The gate keeps answering while the loop runs: round trips go on.
    let mut v = victim(&d, None);
    let unit = UnitId(0);
    let start = Instant::now();
    let mut round_trips = 0u32;
    while start.elapsed() < Duration::from_secs(1) {
        let g = v.request_dispatch(unit, 1_000).unwrap();
        v.task_completed(g, 0).unwrap();
        round_trips += 1;
    }
    let said = scraper.expect("scraped", Duration::from_secs(20));
    let scrapes: u32 = said["scraped ".len()..].parse().unwrap();
    assert!(scrapes > 0, "the scraper got no answer");
    // A loose functional bound (speed is for `hetsched bench clients
    // --idle N --scrape`): the gate was not stalled.
    assert!(
        round_trips >= 50,
        "{round_trips} gate round trips in 1 s while /metrics was scraped {scrapes} times"
    );
    drop(idle);
}

#[test]
fn an_oversized_header_is_refused_and_memory_stays_bounded() {
    let d = TestDaemon::start_logged("hostile-header", &gpu_with_metrics(""));
    let addr = metrics_addr(&d);
    let pid = daemon_pid(&d);
    let rss_before = proc_status(pid, "VmRSS:");
    let a = Attacker::start("header", &[("METRICS_ADDR", &addr)]);
    let said = a.expect("answered", Duration::from_secs(30));
    assert!(said.contains("431"), "{said}");
    let grown_kb = proc_status(pid, "VmRSS:").saturating_sub(rss_before);
    assert!(
        grown_kb < 32 << 10,
        "the daemon grew by {grown_kb} kB reading a huge header"
    );
    let (status, _) = scrape(&addr).unwrap();
    assert!(status.contains("200"), "{status}");
}

#[test]
fn an_unread_pipelined_connection_does_not_hang_other_scrapers() {
    let d = TestDaemon::start_logged("hostile-pipeline", &gpu_with_metrics(""));
    let addr = metrics_addr(&d);
    let a = Attacker::start("pipeline", &[("METRICS_ADDR", &addr)]);
    a.expect("sent", Duration::from_secs(10));
    // The attacker holds its connection and reads nothing; others are
    // answered meanwhile, each well within the 10 s read timeout.
    for _ in 0..5 {
        let t0 = Instant::now();
        let (status, body) = scrape(&addr).unwrap();
        assert!(status.contains("200"), "{status}");
        assert!(body.ends_with("# EOF\n"));
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }
}

#[test]
fn connections_past_the_cap_are_answered_503_and_threads_stay_fixed() {
    let d = TestDaemon::start_logged("hostile-conns", &gpu_with_metrics(""));
    let addr = metrics_addr(&d);
    let pid = daemon_pid(&d);
    let threads_before = proc_status(pid, "Threads:");
    let a = Attacker::start(
        "connections",
        &[("METRICS_ADDR", &addr), ("CONNECTIONS", "100")],
    );
    let said = a.expect("holding", Duration::from_secs(10));
    assert_eq!(said, "holding 100");
    // The cap is 64: a further connection is told 503 at once (it reads
    // before sending, so that nothing it sends is left unread).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        if text.starts_with("HTTP/1.1 503") {
            break;
        }
        assert!(Instant::now() < deadline, "never refused: {text:?}");
    }
    assert_eq!(
        proc_status(pid, "Threads:"),
        threads_before,
        "the daemon started threads for connections"
    );
    // Once the attacker's connections close, scrapes are served again.
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !scrape(&addr).is_ok_and(|(status, _)| status.contains("200")) {
        assert!(Instant::now() < deadline, "not served after the attack");
    }
}

#[test]
fn a_slot_held_past_the_hold_limit_is_taken_back_and_another_client_served() {
    let d = TestDaemon::start_logged(
        "hostile-hold",
        &gpu_with_metrics("[max_hold_ms]\ngpu0 = 500\n"),
    );
    let socket = d.socket.display().to_string();
    let hog = Attacker::start("hold", &[("HETSCHED_SOCKET", &socket)]);
    hog.expect("granted", Duration::from_secs(10));
    // Root, CUSTOM 90, asks for the only stream the hog holds.
    let mut root = victim(&d, Some("custom90"));
    root.set_reply_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let t0 = Instant::now();
    let grant = root.request_dispatch(UnitId(0), 1_000).unwrap();
    let waited = t0.elapsed();
    root.task_completed(grant, 0).unwrap();
    let said = hog.expect("revoked", Duration::from_secs(20));
    assert!(
        said.contains("WorkTooLong") && said.contains("hold limit of 500 ms"),
        "{said}"
    );
    assert!(waited < Duration::from_secs(15), "root waited {waited:?}");
    // The daemon goes on: root is served again at once.
    let grant = root.request_dispatch(UnitId(0), 1_000).unwrap();
    root.task_completed(grant, 0).unwrap();
    // And counts it (the snapshot is at most a second old).
    let addr = metrics_addr(&d);
    wait_for("the revocation counted", Duration::from_secs(10), || {
        let (_, body) = scrape(&addr).ok()?;
        let value = body
            .lines()
            .find_map(|l| l.strip_prefix("hetsched_unit_revoked_total{unit=\"gpu0\"} "))?;
        (value.parse::<f64>().ok()? == 1.0).then_some(())
    });
}

/// The stored processes' pids in the daemon's state file.
fn stored_pids(state: &Path) -> Vec<u64> {
    let Ok(text) = std::fs::read_to_string(state) else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    v["processes"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p["pid"].as_u64()).collect())
        .unwrap_or_default()
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Root sets process `pid` to BACKGROUND.
fn demote(d: &TestDaemon, pid: u32) {
    let out = d
        .cmd()
        .args(["shares", "set", "--pid", &pid.to_string()])
        .args(["--class", "background"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn wait_for<T>(what: &str, within: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_orphaned_child_of_a_demoted_process_keeps_its_demotion() {
    let d = TestDaemon::start("hostile-orphan", common::ONE_GPU);
    // Files the attacker's processes write.
    let files: PathBuf = d.dir.join("attack");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::set_permissions(&files, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let fifo = files.join("go");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o666),
        0,
    )
    .unwrap();
    std::fs::set_permissions(&fifo, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let (child_pid_file, report) = (files.join("child.pid"), files.join("child.json"));
    // The parent forks a child that waits on the fifo, then becomes a
    // load client itself (same pid).
    let script = r#"
        ( read go < "$FIFO"; exec "$BIN" load --json --unit gpu0 --seconds 0.5 --name orphan > "$REPORT" ) &
        echo $! > "$CHILD_PID"
        exec "$BIN" load --unit gpu0 --seconds 120 --name parent
    "#;
    let mut parent = Command::new("sh");
    parent
        .args(["-c", script])
        .env("FIFO", &fifo)
        .env("BIN", common::BIN)
        .env("REPORT", &report)
        .env("CHILD_PID", &child_pid_file)
        .env("HETSCHED_SOCKET", &d.socket)
        .env_remove("HETSCHED_CLASS")
        .stdout(Stdio::null());
    if rustix::process::getuid().is_root() {
        parent.uid(NOBODY).gid(NOBODY);
    }
    let mut parent = Reaped(parent.spawn().unwrap());
    let parent_pid = parent.0.id();
    let mut observer = d.observer().unwrap();
    wait_for("the parent connected", Duration::from_secs(10), || {
        let r = observer.status().ok()?;
        r.clients.iter().any(|c| c.pid == parent_pid).then_some(())
    });
    // Root demotes the parent.
    demote(&d, parent_pid);
    let child_pid: u32 = wait_for("the child's pid", Duration::from_secs(10), || {
        std::fs::read_to_string(&child_pid_file)
            .ok()?
            .trim()
            .parse()
            .ok()
    });
    // The daemon records the child while its parent link shows it.
    wait_for("the child recorded", Duration::from_secs(10), || {
        stored_pids(&d.dir.join("state.json"))
            .contains(&u64::from(child_pid))
            .then_some(())
    });
    // The parent dies; the child is reparented (to init, or a subreaper).
    parent.0.kill().unwrap();
    parent.0.wait().unwrap();
    wait_for("the child reparented", Duration::from_secs(10), || {
        (parent_of(child_pid)? != parent_pid).then_some(())
    });
    // The orphan connects, and is still BACKGROUND.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .unwrap()
        .write_all(b"go\n")
        .unwrap();
    let report: serde_json::Value =
        wait_for("the orphan's report", Duration::from_secs(30), || {
            serde_json::from_str(&std::fs::read_to_string(&report).ok()?).ok()
        });
    assert_eq!(report["pid"].as_u64(), Some(u64::from(child_pid)));
    assert_eq!(report["class"], "background", "{report}");
}

#[test]
fn a_hold_limit_for_a_unit_that_does_not_exist_is_refused() {
    let d = TestDaemon::start("hostile-badunit", common::ONE_GPU);
    let config = common::write_config(
        &d.dir.join("bad.toml"),
        &d.dir.join("bad-state.json"),
        &format!("{}\n[max_hold_ms]\nnope = 10\n", common::ONE_GPU),
    );
    let err = common::refused_start(common::daemon_command(
        Some(&config),
        &d.dir.join("other.sock"),
    ));
    assert!(
        err.contains("[max_hold_ms]") && err.contains("nope"),
        "{err}"
    );
}

#[test]
fn metrics_on_a_non_loopback_address_need_metrics_remote() {
    let d = TestDaemon::start("hostile-remote", common::ONE_GPU);
    let mut daemon = common::daemon_command(None, &d.dir.join("other.sock"));
    daemon
        .args(["--metrics", "0.0.0.0:0"])
        .env("HETSCHED_SOCKET", d.dir.join("other.sock"));
    let err = common::refused_start(daemon);
    assert!(err.contains("metrics_remote"), "{err}");
}

#[test]
fn a_child_orphaned_the_moment_it_is_forked_keeps_the_demotion() {
    if !rustix::process::getuid().is_root() {
        eprintln!("skipped: the daemon sees forks as they happen only as root");
        return;
    }
    let d = TestDaemon::start("hostile-fast-orphan", common::ONE_GPU);
    let files: PathBuf = d.dir.join("attack");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::set_permissions(&files, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let report = files.join("orphan.json");
    let socket = d.socket.display().to_string();
    let report_path = report.display().to_string();
    let mut forker = Attacker::start(
        "forker",
        &[
            ("HETSCHED_SOCKET", &socket),
            ("BIN", common::BIN),
            ("REPORT", &report_path),
        ],
    );
    forker.expect("connected", Duration::from_secs(10));
    let pid = forker.pid();
    // Root demotes the forker; then it forks.
    demote(&d, pid);
    forker.say("go");
    forker.expect("forked", Duration::from_secs(10));
    let report: serde_json::Value =
        wait_for("the orphan's report", Duration::from_secs(30), || {
            serde_json::from_str(&std::fs::read_to_string(&report).ok()?).ok()
        });
    assert_eq!(report["class"], "background", "{report}");
}

/// Open descriptors of a process.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn running_out_of_descriptors_does_not_end_the_metrics_listener() {
    // A daemon held to 128 open files (soft and hard: it cannot raise it).
    let dir = std::env::temp_dir().join(format!("hetsched-it-hostile-fds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (config, socket, log) = (
        dir.join("h.toml"),
        dir.join("h.sock"),
        dir.join("daemon.log"),
    );
    common::write_config(&config, &dir.join("state.json"), &gpu_with_metrics(""));
    let daemon = Command::new("sh")
        .args([
            "-c",
            r#"ulimit -n 128 && exec "$0" daemon --config "$1" --socket "$2""#,
        ])
        .arg(common::BIN)
        .arg(&config)
        .arg(&socket)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    let daemon = Reaped(daemon);
    let pid = daemon.0.id();
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let addr = wait_for("the metrics address", Duration::from_secs(20), || {
        let text = log_text();
        let rest = text.split("metrics on http://").nth(1)?;
        Some(rest.split('/').next()?.to_string())
    });
    // Connections that say nothing use up its descriptors.
    let held: Vec<std::os::unix::net::UnixStream> = (0..200)
        .filter_map(|_| std::os::unix::net::UnixStream::connect(&socket).ok())
        .collect();
    wait_for(
        "the daemon out of descriptors",
        Duration::from_secs(10),
        || (open_fds(pid) >= 127).then_some(()),
    );
    // A scrape now is queued by the kernel, and the listener cannot
    // accept it: it says so and keeps trying.
    let mut pending = TcpStream::connect(&addr).unwrap();
    pending
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(pending, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    wait_for("the accept error logged", Duration::from_secs(10), || {
        log_text()
            .contains("metrics listener: accept")
            .then_some(())
    });
    // Descriptors come back (those connections close); the scrape that
    // waited is answered, and so is a new one.
    drop(held);
    let mut answer = String::new();
    let _ = pending.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:.200}");
    let (status, _) = scrape(&addr).unwrap();
    assert!(status.contains("200"), "{status}");
    drop(daemon);
    let _ = std::fs::remove_dir_all(&dir);
}
