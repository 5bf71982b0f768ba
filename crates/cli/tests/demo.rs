//! The main job end to end: `hetsched demo` starts a real daemon and six
//! application processes under each policy, and ends with the checkable
//! line `system throughput: hetsched/native = X.XX (median of N runs)`.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_hetsched");

/// `X.XX` and `N` from the demo's last line, if it has the checkable form.
fn parse_last_line(line: &str) -> Option<(f64, u32)> {
    let rest = line.strip_prefix("system throughput: hetsched/native = ")?;
    let (ratio, rest) = rest.split_once(" (median of ")?;
    let runs = rest.strip_suffix(" runs)")?;
    // Exactly two decimals, as the interface says.
    let (whole, frac) = ratio.split_once('.')?;
    if whole.is_empty() || frac.len() != 2 || !ratio.chars().all(|c| c.is_ascii_digit() || c == '.')
    {
        return None;
    }
    Some((ratio.parse().ok()?, runs.parse().ok()?))
}

#[test]
fn the_last_line_parser_accepts_only_the_interface_form() {
    assert_eq!(
        parse_last_line("system throughput: hetsched/native = 1.73 (median of 3 runs)"),
        Some((1.73, 3))
    );
    for bad in [
        "system throughput: hetsched/native = 1.7 (median of 3 runs)",
        "system throughput: hetsched/native = -1.70 (median of 3 runs)",
        "system throughput: hetsched/native = 1.70 (median of 3)",
        "system throughput hetsched/native = 1.70 (median of 3 runs)",
        "",
    ] {
        assert_eq!(parse_last_line(bad), None, "{bad:?}");
    }
}

#[test]
fn demo_ends_with_the_throughput_ratio_and_writes_its_results() {
    let out_dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args([
            "demo",
            "--runs",
            "1",
            "--seconds",
            "3",
            "--warmup",
            "1",
            "--daemon-logs",
            "--out",
        ])
        .arg(out_dir.path())
        .env_remove("HETSCHED_SOCKET")
        .env_remove("HETSCHED_CLASS")
        .env_remove("HETSCHED_SHARES")
        .env_remove("HETSCHED_PRIORITY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "demo failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let last = stdout.trim_end().lines().last().unwrap_or_default();
    let (ratio, runs) = parse_last_line(last)
        .unwrap_or_else(|| panic!("last line is not the interface line: {last:?}\n{stdout}"));
    assert_eq!(runs, 1);
    assert!(
        ratio > 1.0,
        "hetsched did not beat native: {ratio}\n{stdout}\n{stderr}"
    );

    let results = out_dir.path().join("results.json");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&results).expect("results.json"))
            .expect("results.json is JSON");
    let median = json["median_system_ratio"]
        .as_f64()
        .expect("median_system_ratio");
    assert!(
        (median - ratio).abs() <= 0.005 + 1e-9,
        "results.json says {median}, stdout {ratio}"
    );
    let runs_json = json["runs"].as_array().expect("runs");
    assert_eq!(runs_json.len(), 1);
    // hetsched-pf's line comes just before the last one.
    let pf_line = stdout.trim_end().lines().rev().nth(1).unwrap_or_default();
    let pf = pf_line
        .strip_prefix("system throughput: hetsched-pf/native = ")
        .and_then(|r| r.split_once(' '))
        .and_then(|(r, _)| r.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no hetsched-pf line before the last: {pf_line:?}\n{stdout}"));
    let pf_json = json["median_system_ratio_by_policy"]["hetsched-pf"]
        .as_f64()
        .expect("hetsched-pf's median");
    assert!((pf_json - pf).abs() <= 0.005 + 1e-9, "{pf_json} vs {pf}");
    assert!(pf > 1.0, "hetsched-pf did not beat native: {pf}\n{stdout}");
    for policy in ["native", "hetsched", "hetsched-pf"] {
        let p = &runs_json[0][policy];
        assert!(p["checked"].as_u64().unwrap() > 0, "{policy}: {p}");
        assert_eq!(p["wrong"], 0, "{policy}: {p}");
        assert_eq!(p["failed"], 0, "{policy}: {p}");
    }
    let svg = std::fs::read_to_string(out_dir.path().join("timeline.svg")).expect("timeline.svg");
    assert!(svg.contains("<svg"), "timeline.svg is not an SVG");
    // `--daemon-logs`: hetsched-pf's daemon log is kept, with the
    // coordinator's solves and the apps' pids to read them by; the other
    // policies run no coordinator and keep none.
    let log = std::fs::read_to_string(out_dir.path().join("daemon-hetsched-pf-run1.log"))
        .expect("hetsched-pf's daemon log");
    assert!(
        log.contains("coordination: solve 1 took") && log.contains("ms (full: apps came or went)"),
        "{log}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains(" native ") && l.contains(" predicted ") && l.contains(" on ")),
        "no per-app solve line:\n{log}"
    );
    for app in ["aes", "lbm", "dxt", "lavamd", "grep", "histogram"] {
        assert!(
            log.contains(&format!("demo app {app}: pid ")),
            "{app}:\n{log}"
        );
    }
    for policy in ["native", "hetsched"] {
        let other = out_dir.path().join(format!("daemon-{policy}-run1.log"));
        assert!(!other.exists(), "{}", other.display());
    }
}
