//! `hetsched sim run` for the thread-balance scenarios, as a script would
//! call it: the JSON has the common shape plus `ips_per_watt`.

use std::process::Command;

fn hetsched(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_hetsched"))
        .args(args)
        .output()
        .expect("hetsched runs")
}

#[test]
fn sim_list_names_the_balance_scenarios() {
    let out = hetsched(&["sim", "list"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "smartbalance-mixes",
        "kinship-usecase1",
        "kinship-usecase2",
        "kinship-cache",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
}

#[test]
fn balance_scenarios_print_the_common_json_with_ips_per_watt() {
    for name in ["kinship-usecase1", "kinship-usecase2", "smartbalance-mixes"] {
        let out = hetsched(&["sim", "run", name, "--seed", "2", "--json"]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        assert_eq!(v["scenario"], name);
        assert_eq!(v["seed"], 2);
        assert_eq!(v["baseline"], "linux-default");
        assert!(v["oracle_system_speedup"].as_f64().is_some());
        let results = v["results"].as_array().unwrap();
        let policies: Vec<&str> = results
            .iter()
            .map(|r| r["policy"].as_str().unwrap())
            .collect();
        assert_eq!(
            policies,
            [
                "linux-default",
                "gts",
                "smartbalance",
                "smartbalance-eq11",
                "kinship"
            ]
        );
        for field in ["predictor_error_mean", "predictor_error_p95"] {
            let e = v[field]
                .as_f64()
                .unwrap_or_else(|| panic!("{name}: {field}"));
            assert!(e > 0.0 && e < 1.0, "{name}: {field} = {e}");
        }
        for r in results {
            for field in [
                "system_speedup",
                "min_relative",
                "tasks_per_s",
                "fraction_of_oracle",
                "placement_changes_per_s",
                "ips_per_watt",
                "ips_per_watt_relative",
            ] {
                assert!(r[field].as_f64().is_some(), "{name}: {field} in {r}");
            }
            for (app, a) in r["apps"].as_object().unwrap() {
                assert!(a["relative"].as_f64().is_some(), "{name}/{app}");
            }
        }
        assert_eq!(results[0]["system_speedup"].as_f64(), Some(1.0));
    }
}

#[test]
fn balance_scenario_table_and_out_files() {
    let dir = std::env::temp_dir().join(format!("hetsched-balance-sim-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = hetsched(&[
        "sim",
        "run",
        "kinship-usecase2",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("kinship") && text.contains("IPS/W"), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert!(json["results"][0]["ips_per_watt"].as_f64().is_some());
    assert!(dir.join("results.csv").exists() && dir.join("timeline.svg").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
