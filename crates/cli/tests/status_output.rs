//! `hetsched status` for scripts: `--json` with `schema_version` and named
//! fields, `--format csv` with `--fields`, `--watch`.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;
use common::{Reaped, TestDaemon};

/// Waits until `status --json` lists a client named `name`.
fn wait_for_client(d: &TestDaemon, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = d.cmd().args(["status", "--json"]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        if v["clients"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == name)
        {
            return v;
        }
        assert!(Instant::now() < deadline, "no client {name} in {v}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn json_and_csv_name_their_fields() {
    let d = TestDaemon::start("status-output", common::ONE_GPU);
    let name = r#"app, "quoted""#;
    let _load = Reaped(d.load(
        &["--class", "custom", "--shares", "40"],
        &["--unit", "gpu0", "--seconds", "60", "--name", name],
    ));
    let v = wait_for_client(&d, name);
    assert_eq!(v["schema_version"], 1);
    let unit = &v["units"][0];
    let q = &unit["queued_by_class"];
    assert!(
        q["custom"].is_u64() && q["normal"].is_u64() && q["background"].is_u64(),
        "{q}"
    );
    assert!(unit["info"]["caps"].is_array(), "{}", unit["info"]);

    let out = d
        .cmd()
        .args([
            "status",
            "--format",
            "csv",
            "--clients",
            "--fields",
            "name,class,shares,unit",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut rows = csv::Reader::from_reader(out.stdout.as_slice());
    assert_eq!(
        rows.headers().unwrap(),
        vec!["name", "class", "shares", "unit"]
    );
    let rows: Vec<Vec<String>> = rows
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect();
    assert_eq!(
        rows,
        vec![vec![
            name.to_string(),
            "custom".into(),
            "40".into(),
            "gpu0".into()
        ]]
    );

    let out = d
        .cmd()
        .args(["status", "--format", "csv", "--fields", "unit,busy,queued"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown unit field \"busy\"") && err.contains("busy_s"),
        "{err}"
    );
}

#[test]
fn watch_prints_again_and_csv_keeps_one_header() {
    let d = TestDaemon::start("status-watch", common::ONE_GPU);
    let child = d
        .cmd()
        .args([
            "status",
            "--format",
            "csv",
            "--fields",
            "unit,slots",
            "--watch",
            "0.1",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reaped(child);
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let got: Vec<String> = (0..4).map(|_| lines.next().unwrap().unwrap()).collect();
    assert_eq!(got, ["unit,slots", "gpu0,1", "gpu0,1", "gpu0,1"]);
}
