//! The `hetsched` binary, run as a user would.

mod common;

use common::{ONE_GPU, TestDaemon};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn hetsched(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hetsched"))
        .args(args)
        .output()
        .expect("hetsched runs")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hetsched-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn sim_list_names_every_builtin_scenario() {
    let out = hetsched(&["sim", "list"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "rinnegan-contention",
        "rinnegan-shares",
        "asym-fast-cores",
        "rinnegan-ping-pong",
        "pf-arrivals",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
}

#[test]
fn sim_run_json_has_the_checked_fields_and_out_writes_files() {
    let dir = temp_dir("json");
    let out = hetsched(&[
        "sim",
        "run",
        "asym-fast-cores",
        "--seed",
        "3",
        "--json",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["scenario"], "asym-fast-cores");
    assert!(v["oracle_system_speedup"].as_f64().unwrap() > 1.0);
    let results = v["results"].as_array().unwrap();
    assert!(results.iter().any(|r| r["policy"] == "hetsched"));
    for r in results {
        for field in ["system_speedup", "min_relative", "tasks_per_s"] {
            assert!(r[field].as_f64().is_some(), "{field} in {r}");
        }
        let pbzip = &r["apps"]["pbzip"];
        assert!(pbzip["tasks_per_s"].as_f64().unwrap() > 0.0);
        assert!(pbzip["relative"].as_f64().is_some());
    }
    for file in [
        "results.csv",
        "unit_time.csv",
        "timeline.csv",
        "report.json",
        "timeline.svg",
        "relative.svg",
    ] {
        let path = dir.join(file);
        let written = std::fs::metadata(&path)
            .map(|m| m.len() > 0)
            .unwrap_or(false);
        assert!(written, "{} missing", path.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_scenario_file_fails_with_file_line_and_field() {
    let dir = temp_dir("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "name = \"bad\"\nduration_s = 1\npolicies = []\n\n[[units]]\nname = \"cpu\"\nclass = \"cpu\"\n\n[[apps]]\nname = \"a\"\nbytes = { kib = 4 }\nexec_ms = { tpu = 1.0 }\n",
    )
    .unwrap();
    let out = hetsched(&["sim", "run", path.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("bad.toml:12:"), "{err}");
    assert!(err.contains("apps[0].exec_ms.tpu"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_scenario_name_is_a_clear_error() {
    let out = hetsched(&["sim", "run", "no-such-scenario"]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("not a built-in scenario"), "{err}");
}

/// `--seconds nan` (and the other values `Duration::from_secs_f64` panics
/// on) is a usage error naming the option, before any daemon is asked.
#[test]
fn load_refuses_durations_that_would_panic() {
    for (option, value) in [
        ("--seconds", "nan"),
        ("--seconds", "inf"),
        ("--seconds", "-1"),
        ("--seconds", "0"),
        ("--seconds", "1e300"),
        ("--exec-ms", "nan"),
        ("--exec-ms", "0"),
        ("--think-ms", "-1"),
        ("--think-ms", "inf"),
    ] {
        let out = Command::new(common::BIN)
            // `--seconds=-1`: a separate `-1` would read as an option.
            .args(["load", "--unit", "gpu0", &format!("{option}={value}")])
            .env("HETSCHED_SOCKET", "/nonexistent/hetsched.sock")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{option} {value}: {err}");
        assert!(
            err.contains(&format!("invalid value '{value}' for '{option}")),
            "{option} {value}: {err}"
        );
        assert!(!err.contains("panicked"), "{option} {value}: {err}");
    }
}

/// The reader of the output going away (`hetsched sim list | head -1`)
/// ends the command quietly instead of with a panic.
#[test]
fn a_closed_stdout_ends_quietly() {
    for args in [
        &["sim", "list"][..],
        &["sim", "run", "asym-fast-cores", "--json"],
    ] {
        let mut child = Command::new(common::BIN)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end before the child writes anything.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {}: {err}", out.status);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.trim().is_empty(), "{args:?}: {err}");
    }
}

/// Client names are chosen by any client; `hetsched status` shows them
/// escaped, so none can clear the screen or add a line, nor a metric.
#[test]
fn status_shows_client_names_escaped() {
    let d = TestDaemon::start("escaped-names", ONE_GPU);
    let _clear = d.app("\x1b[2J");
    let _two_lines = d.app("a\nb");
    let _metric = d.app("m\"} 1\nhetsched_fake 9");
    let out = d.cmd().arg("status").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains('\x1b'), "{text}");
    assert!(text.contains("\\u{1b}[2J"), "{text}");
    assert!(text.contains("a\\nb"), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("b ")), "{text}");
    let out = d.cmd().args(["status", "--prometheus"]).output().unwrap();
    assert!(out.status.success());
    let metrics = String::from_utf8(out.stdout).unwrap();
    assert!(!metrics.contains('\x1b'), "{metrics}");
    for line in metrics.lines() {
        assert!(
            line.starts_with("# ") || line.starts_with("hetsched_"),
            "{metrics}"
        );
        assert!(!line.starts_with("hetsched_fake"), "{metrics}");
    }
    assert!(metrics.contains(r#"name="\\u{1b}[2J""#), "{metrics}");
    // JSON keeps the names as they are, escaped by JSON itself.
    let out = d.cmd().args(["status", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v["clients"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(
        names.contains(&"\x1b[2J") && names.contains(&"a\nb"),
        "{names:?}"
    );
}

/// A client refuses a daemon that runs as another user (not root), unless
/// HETSCHED_DAEMON_UID names that user. Needs root, to run the daemon as
/// uid 65534.
#[test]
fn a_daemon_of_another_user_is_refused_unless_named() {
    assert!(
        rustix::process::getuid().is_root(),
        "this test runs the daemon as another user (uid 65534), which needs root (CI runs as root)"
    );
    let dir = temp_dir("other-user");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
    let socket = dir.join("hetsched.sock");
    let config = common::write_config(&dir.join("hetsched.toml"), &dir.join("state.json"), ONE_GPU);
    let daemon = common::daemon_command(Some(&config), &socket)
        .uid(65534)
        .gid(65534)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _daemon = common::Reaped(daemon);
    let status = |daemon_uid: Option<&str>| {
        let mut c = Command::new(common::BIN);
        c.arg("status")
            .env("HETSCHED_SOCKET", &socket)
            .env_remove("HETSCHED_DAEMON_UID");
        if let Some(uid) = daemon_uid {
            c.env("HETSCHED_DAEMON_UID", uid);
        }
        c.output().unwrap()
    };
    // Named, it is accepted (once it listens).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = status(Some("65534"));
        if out.status.success() {
            assert!(String::from_utf8_lossy(&out.stdout).contains("gpu0"));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "daemon did not come up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = status(None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("refusing the hetsched daemon")
            && err.contains("uid 65534")
            && err.contains("HETSCHED_DAEMON_UID"),
        "{err}"
    );
    let out = status(Some("1234"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("HETSCHED_DAEMON_UID=1234"), "{err}");
    let out = status(Some("daemon"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("not a numeric user id"), "{err}");
    drop(_daemon);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `hetsched --version`: the workspace's version (the root Cargo.toml's,
/// which every crate inherits) and, in a git checkout, the commit built.
#[test]
fn version_names_the_workspace_version_and_the_commit() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let version = manifest
        .split_once("[workspace.package]")
        .unwrap()
        .1
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("a version in [workspace.package]");
    let out = hetsched(&["--version"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.trim_end();
    let head = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string());
    match (std::env::var("HETSCHED_GIT_COMMIT"), head) {
        (Ok(c), _) if !c.is_empty() => {
            assert_eq!(line, format!("hetsched {version} (commit {c})"))
        }
        (_, Some(c)) => assert_eq!(line, format!("hetsched {version} (commit {c})")),
        (_, None) => assert_eq!(line, format!("hetsched {version}")),
    }
}
