//! The `hetsched` binary, run as a user would.

use std::path::PathBuf;
use std::process::Command;

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
