//! `hetsched pipeline`: the demo's JSON and the printed table.

use std::process::Command;

fn hetsched(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hetsched"))
        .args(args)
        .env_remove("HETSCHED_CONFIG")
        .output()
        .expect("hetsched runs")
}

#[test]
fn pipeline_demo_json_reports_both_ways_and_verifies_outputs() {
    let out = hetsched(&[
        "pipeline",
        "demo",
        "--json",
        "--chunks",
        "40",
        "--side",
        "32",
        "--overhead-chunks",
        "2000",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "exactly one JSON object: {text}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["chunks"], 40);
    for key in [
        "controller_us_per_chunk",
        "naive_us_per_chunk",
        "controller_overhead_ns_per_stage_step",
    ] {
        let x = v[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} missing: {v}"));
        assert!(x.is_finite() && x > 0.0, "{key} = {x}");
    }
    assert_eq!(v["outputs_verified"], true);
    assert_eq!(v["assignment"].as_array().unwrap().len(), 3);
    // Re-planning is reported (additive fields).
    let replans = v["replans"].as_u64().expect("replans");
    assert_eq!(v["replan_events"].as_array().unwrap().len() as u64, replans);
    assert!(v["replan_checks"].as_u64().is_some(), "{v}");
    assert!(v["opencl"].is_array(), "{v}");
}

/// Wherever the runtime drives an OpenCL device, the demo runs grayscale
/// as an OpenCL kernel on it and checks it, in every build of the binary:
/// `-p hetsched --features opencl`, and the workspace build, where Cargo
/// gives the runtime OpenCL (for another crate) while this crate's own
/// feature is off. That build once offered opencl0 without the stage for
/// it, and the demo failed.
#[test]
fn pipeline_demo_runs_an_opencl_stage_in_every_build_whose_runtime_has_opencl() {
    let found = hetsched_runtime::opencl_devices().map(drop);
    if !hetsched_platform::test_support::available("opencl", found) {
        return;
    }
    let out = hetsched(&[
        "pipeline",
        "demo",
        "--json",
        "--chunks",
        "20",
        "--side",
        "32",
        "--overhead-chunks",
        "200",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = v["opencl"].as_array().unwrap();
    assert!(!runs.is_empty(), "an OpenCL device but no OpenCL run: {v}");
    for r in runs {
        assert_eq!(r["outputs_verified"], true, "{r}");
        assert_eq!(r["assignment"][0], r["unit"], "{r}");
        assert!(r["grayscale_profiled_us"].as_f64().unwrap() > 0.0, "{r}");
    }
}

#[test]
fn pipeline_show_prints_the_table() {
    let out = hetsched(&["pipeline", "show", "--chunks", "4", "--side", "16"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("pipelining table: 3 stages, 4 chunks"),
        "{text}"
    );
    for s in ["grayscale#0", "sepia#3", "alpha-blend#3"] {
        assert!(text.contains(s), "{s} missing:\n{text}");
    }
}

#[test]
fn pipeline_show_json_is_the_table() {
    let out = hetsched(&[
        "pipeline", "show", "--json", "--chunks", "3", "--side", "16",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["chunks"], 3);
    assert_eq!(v["stage_names"].as_array().unwrap().len(), 3);
    let computes: usize = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["compute"].as_array().unwrap().len())
        .sum();
    assert_eq!(computes, 9);
}

#[test]
fn pipeline_scale_json_verifies_every_row_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("scale.svg");
    let out = hetsched(&[
        "pipeline",
        "scale",
        "--json",
        "--stages",
        "1,3",
        "--lanes",
        "1,2",
        "--chunks",
        "20",
        "--work",
        "10",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for r in rows {
        assert_eq!(r["outputs_verified"], true, "{r}");
        assert!(r["controller_us_per_chunk"].as_f64().unwrap() > 0.0);
    }
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(
        plot.starts_with("<svg") && plot.contains("naive loop"),
        "{plot:.200}"
    );
}
