//! Pegasus backend policies in the real daemon: four processes keep an
//! emulated device busy through the daemon with credits 256/512/1024/256
//! (Pegasus Fig. 5), and the device time each gets follows its credits.

use serde_json::Value;
use std::process::Child;

mod common;
use common::{TestDaemon, load_report as report, unit_s};

fn credits_split_the_device(policy: &str) {
    let config = format!(
        "{}\n[policies]\ngpu0 = \"{policy}\"\n",
        common::ONE_GPU.trim_end()
    );
    let d = TestDaemon::start(&format!("backend-{policy}"), &config);
    let load = ["--unit", "gpu0", "--seconds", "3", "--exec-ms", "5"];
    let children: Vec<(f64, Child)> = [256.0, 512.0, 1024.0, 256.0]
        .into_iter()
        .map(|c: f64| {
            let shares = format!("{c}");
            let class = ["--class", "normal", "--shares", shares.as_str()];
            (c, d.load(&class, &load))
        })
        .collect();
    let got: Vec<(f64, Value)> = children
        .into_iter()
        .map(|(c, ch)| (c, report(ch)))
        .collect();
    let total: f64 = got.iter().map(|(_, v)| unit_s(v)).sum();
    assert!(
        total > 2.5,
        "device mostly idle under {policy}: {total} s of 3"
    );
    for (credits, v) in &got {
        let want = 100.0 * credits / 2048.0;
        let pct = 100.0 * unit_s(v) / total;
        eprintln!("{policy}: credits {credits}: {pct:.1} % (want {want:.1} %)");
        assert!(
            (pct - want).abs() <= 3.0,
            "{policy}: credits {credits} got {pct:.1} % of the device, want {want:.1} % ({got:?})"
        );
    }
}

#[test]
fn accc_gives_device_time_in_proportion_to_credits() {
    credits_split_the_device("accc");
}

#[test]
fn augc_without_a_cpu_schedule_follows_credits_too() {
    credits_split_the_device("augc");
}

#[test]
fn pegasus_scenarios_report_every_policy_against_none() {
    for name in ["pegasus-fig5", "pegasus-fig6", "pegasus-fwt"] {
        let out = std::process::Command::new(common::BIN)
            .args(["sim", "run", name, "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["scenario"], name);
        assert_eq!(v["baseline"], "none");
        let policies: Vec<&str> = v["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["policy"].as_str().unwrap())
            .collect();
        assert_eq!(
            policies,
            ["none", "rr", "accc", "xc", "slaf", "augc", "cosched"]
        );
        let none = &v["results"][0];
        assert_eq!(none["system_speedup"], 1.0);
        for app in none["apps"].as_object().unwrap().values() {
            assert_eq!(app["relative"], 1.0);
            assert!(app["latency_p99_ms"].as_f64().unwrap() > 0.0);
        }
    }
}
