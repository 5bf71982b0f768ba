//! The thread-balance scenarios point the way the papers do, and their
//! reports keep the common shape with `linux-default` as the baseline.

use hetsched_sim::balance::{self, BalanceReport, BalanceResult, engine, scenarios};

fn run(name: &str, seed: u64) -> BalanceReport {
    balance::run(name, seed, &mut |_, _| {}).expect("built-in scenario")
}

/// smartbalance-mixes with seed 1, run once for every test that reads it
/// (it is the slowest scenario in a debug build).
fn mixes() -> &'static BalanceReport {
    static REPORT: std::sync::OnceLock<BalanceReport> = std::sync::OnceLock::new();
    REPORT.get_or_init(|| run("smartbalance-mixes", 1))
}

fn policy<'a>(r: &'a BalanceReport, name: &str) -> &'a BalanceResult {
    r.results
        .iter()
        .find(|p| p.result.policy == name)
        .unwrap_or_else(|| panic!("{name} missing"))
}

#[test]
fn every_scenario_reports_every_policy_against_linux_default() {
    for (name, _) in balance::SCENARIOS {
        let owned;
        let r = if name == "smartbalance-mixes" {
            mixes()
        } else {
            owned = run(name, 1);
            &owned
        };
        let names: Vec<&str> = r.results.iter().map(|p| p.result.policy.as_str()).collect();
        assert_eq!(
            names,
            [
                "linux-default",
                "gts",
                "smartbalance",
                "smartbalance-eq11",
                "kinship"
            ]
        );
        // The policies decide on the fitted predictor's output; its error
        // against the simulator's truth is SmartBalance's 4–5 %, ≤ 8 %,
        // where every kind has the same memory hierarchy (SmartBalance's
        // premise). Where cache sizes differ (kinship-cache) a prediction
        // from another kind's counters cannot know the misses there.
        let same_hierarchy = name != "kinship-cache";
        assert!(
            r.predictor_error_mean > 0.0 && (r.predictor_error_mean <= 0.08 || !same_hierarchy),
            "{name}: mean prediction error {}",
            r.predictor_error_mean
        );
        assert!(r.predictor_error_p95 >= r.predictor_error_mean, "{name}");
        let base = policy(r, "linux-default");
        assert!((base.result.system_speedup - 1.0).abs() < 1e-12);
        assert!((base.ips_per_watt_relative - 1.0).abs() < 1e-12);
        for a in base.result.apps.values() {
            assert!((a.relative - 1.0).abs() < 1e-12);
        }
        for p in &r.results {
            assert!(p.ips_per_watt.is_finite() && p.ips_per_watt > 0.0, "{name}");
            assert_eq!(p.result.apps.len(), r.apps.len(), "{name}");
        }
        assert!(r.oracle_system_speedup >= 1.0 - 1e-9, "{name}");
    }
}

#[test]
fn same_seed_same_report() {
    let a = serde_json::to_string(&run("kinship-usecase1", 5)).unwrap();
    let b = serde_json::to_string(&run("kinship-usecase1", 5)).unwrap();
    assert_eq!(a, b);
}

#[test]
fn smartbalance_gains_energy_efficiency_over_linux_and_gts() {
    let r = mixes();
    let sb = policy(r, "smartbalance");
    let gts = policy(r, "gts");
    assert!(
        sb.ips_per_watt_relative > 1.2,
        "{}",
        sb.ips_per_watt_relative
    );
    // On big.LITTLE, GTS's own ground.
    let octa = |p: &BalanceResult| p.ips_per_watt_relative_by_machine["octa"];
    assert!(octa(sb) > 1.1 * octa(gts), "{} vs {}", octa(sb), octa(gts));
    // The paper's own objective (Eq. 11) beats GTS by more than 15 %.
    let eq11 = policy(r, "smartbalance-eq11");
    assert!(
        eq11.ips_per_watt_relative > 1.15 * gts.ips_per_watt_relative,
        "{} vs {}",
        eq11.ips_per_watt_relative,
        gts.ips_per_watt_relative
    );
}

/// Why Eq. 11 stops short of the paper's +50 %: its own optimum on the
/// *true* figures (perfect prediction, no hysteresis, no migration cost)
/// gains no more than the policy does. The shortfall is the objective's,
/// not the predictor's, the annealer's or the hysteresis's; the run prints
/// the figures quoted in docs/balance.md
/// (`cargo test --release -p hetsched-sim --test balance_scenarios -- --nocapture eq11`).
#[test]
fn eq11_policy_reaches_eq11s_own_optimum() {
    use hetsched_core::balance::PerCoreEfficiency;
    use std::collections::BTreeMap;
    let r = mixes();
    let linux = policy(r, "linux-default");
    let eq11 = policy(r, "smartbalance-eq11");
    // Per machine: Σ ln(IPS/W ÷ Linux's), Σ ln(throughput ÷ Linux's), cases.
    let mut sums: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
    for case in scenarios::smartbalance_mixes() {
        let best = engine::best_static(&case, &PerCoreEfficiency::default(), 1);
        let (ips, ipw) = engine::static_figures(&case, &best);
        let base_ipw = linux.app_ips_per_watt[&case.label];
        let base_ips = linux.result.apps[&case.label].tasks_per_s * 1e9;
        println!(
            "{:<16} Eq. 11 optimum {:?}: IPS/W x{:.2}, throughput x{:.2}",
            case.label,
            best.core_of,
            ipw / base_ipw,
            ips / base_ips
        );
        for key in [case.machine.clone(), "all".to_string()] {
            let e = sums.entry(key).or_default();
            e.0 += (ipw / base_ipw).ln();
            e.1 += (ips / base_ips).ln();
            e.2 += 1.0;
        }
    }
    for (machine, (ipw, ips, n)) in &sums {
        let (bound, tput) = ((ipw / n).exp(), (ips / n).exp());
        let got = if machine == "all" {
            eq11.ips_per_watt_relative
        } else {
            eq11.ips_per_watt_relative_by_machine[machine]
        };
        println!(
            "{machine}: Eq. 11 optimum IPS/W x{bound:.3} (throughput x{tput:.3}); policy x{got:.3}"
        );
        // The policy, on predictions and through the hysteresis, gets within
        // 3 % of what perfect knowledge of the same objective would get.
        assert!(got >= 0.97 * bound, "{machine}: {got} vs {bound}");
    }
}

#[test]
fn kinship_puts_aes_threads_on_aes_cores_and_wins_use_case_2() {
    let r = run("kinship-usecase2", 1);
    let k = policy(&r, "kinship");
    for app in ["vm1:aes-small", "vm2:aes-large"] {
        let mix = &k.result.apps[app].unit_mix;
        let on_aes: f64 = mix
            .iter()
            .filter(|(u, _)| u.starts_with("s0-"))
            .map(|(_, f)| f)
            .sum();
        assert!(on_aes > 0.99, "{app}: {mix:?}");
    }
    assert!(k.result.system_speedup > 1.2, "{}", k.result.system_speedup);
    assert!(k.result.apps["vm1:aes-small"].relative > 1.5);
}

#[test]
fn kinship_gives_the_big_cache_to_the_thread_that_needs_it() {
    let r = run("kinship-cache", 1);
    let k = policy(&r, "kinship");
    let large = &k.result.apps["vm1:cachebuster-large"];
    let on_big: f64 = large
        .unit_mix
        .iter()
        .filter(|(u, _)| u.starts_with("s0-"))
        .map(|(_, f)| f)
        .sum();
    assert!(on_big > 0.99, "{:?}", large.unit_mix);
    assert!(large.relative > 1.5, "{}", large.relative);
    assert!(k.result.system_speedup > 1.2, "{}", k.result.system_speedup);
    assert!(k.result.fraction_of_oracle > 0.9);
}

#[test]
fn kinship_speeds_up_compute_threads_in_use_case_1() {
    let r = run("kinship-usecase1", 1);
    let k = policy(&r, "kinship");
    for app in ["vm1:ferret", "vm2:streamcluster"] {
        assert!(k.result.apps[app].relative > 1.3, "{app}");
    }
    assert!(k.result.system_speedup > 1.0);
}

/// Useful IPS/W and throughput of each (policy, goal) ÷ linux-default's,
/// geometric means over the octa-core cases of smartbalance-mixes.
fn octa_ratios(base_watts: f64, runs: &[engine::Policy]) -> Vec<(f64, f64)> {
    let cases: Vec<_> = scenarios::smartbalance_mixes()
        .into_iter()
        .filter(|c| c.machine == "octa")
        .map(|mut c| {
            c.base_watts = base_watts;
            c
        })
        .collect();
    let mut sums = vec![(0.0, 0.0); runs.len()];
    let work = |o: &engine::CaseOutcome| o.instructions.iter().sum::<f64>();
    for case in &cases {
        let linux = engine::run_case(case, engine::Policy::LinuxDefault, 1);
        for (sum, &policy) in sums.iter_mut().zip(runs) {
            let o = engine::run_case(case, policy, 1);
            sum.0 += (work(&o) / o.energy_j / (work(&linux) / linux.energy_j)).ln();
            sum.1 += (work(&o) / work(&linux)).ln();
        }
    }
    let n = cases.len() as f64;
    sums.into_iter()
        .map(|(ipw, tput)| ((ipw / n).exp(), (tput / n).exp()))
        .collect()
}

#[test]
fn base_power_sets_how_far_smartbalance_trades_speed_for_efficiency() {
    // The more the rest of the platform draws, the less it pays to run
    // slowly on efficient cores: the IPS/W gain shrinks and the throughput
    // given up shrinks with it.
    use engine::Policy;
    let mut last: Option<(f64, f64)> = None;
    for base in [0.25, 0.5, 2.0] {
        let mut runs = vec![Policy::SmartBalance, Policy::Gts];
        if base == scenarios::SOC_BASE_WATTS {
            runs.push(Policy::SmartBalanceEq11);
        }
        let r = octa_ratios(base, &runs);
        let (ipw, tput) = r[0];
        println!(
            "octa, base {base} W: smartbalance IPS/W x{ipw:.3} (gts x{:.3}), throughput x{tput:.3}",
            r[1].0
        );
        if let Some((eq11_ipw, eq11_tput)) = r.get(2) {
            println!(
                "octa, base {base} W, Eq. 11 objective: IPS/W x{eq11_ipw:.3}, throughput x{eq11_tput:.3}"
            );
            assert!(*eq11_ipw > 1.0);
        }
        assert!(ipw > 1.0, "base {base}: {ipw}");
        if let Some((ipw0, tput0)) = last {
            assert!(ipw <= ipw0 + 1e-9 && tput >= tput0 - 1e-9, "base {base}");
        }
        last = Some((ipw, tput));
    }
}
