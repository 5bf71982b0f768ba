//! `hetsched-pf-fluid`, the daemon's default pick: warm re-solves between
//! full picks from `WARM_MIN_APPS` applications on, and
//! `full_resolve_period_s` in the scenario file turning them off.

use hetsched_core::coordination::WARM_MIN_APPS;
use hetsched_sim::engine;
use hetsched_sim::random_mix::{MixSpec, generate};
use hetsched_sim::scenario::parse;
use hetsched_sim::strategy::{PfJudge, StrategyKind};

/// A generated mix of `apps` on a CPU and 4 GPUs, 2 s measured after 1 s,
/// with `extra` added to its settings.
fn mix(apps: usize, extra: &str) -> hetsched_sim::scenario::Scenario {
    let text = generate(&MixSpec {
        apps: apps as u32,
        gpus: 4,
        kinds: 2,
        seed: 3,
        duration_s: Some(2.0),
        warmup_s: Some(1.0),
    })
    .expect("mix");
    let text = text.replacen("duration_s = 2\n", &format!("duration_s = 2\n{extra}\n"), 1);
    assert!(text.contains(extra), "{text}");
    parse("mix.toml", &text).expect("mix parses")
}

fn fluid(sc: &hetsched_sim::scenario::Scenario) -> Vec<f64> {
    engine::run(sc, StrategyKind::HetschedPf(PfJudge::Fluid), 1, &mut |_| {}).tasks_per_s()
}

#[test]
fn below_the_warm_minimum_the_period_changes_nothing() {
    // Every re-solve is a full pick whatever the period says.
    let apps = WARM_MIN_APPS - 4;
    let default = fluid(&mix(apps, "noise = 0.05"));
    let off = fluid(&mix(apps, "full_resolve_period_s = 0"));
    assert_eq!(default, off);
    assert!(default.iter().all(|t| *t > 0.0), "{default:?}");
}

#[test]
fn from_the_warm_minimum_on_warm_re_solves_change_the_run() {
    // The same run with warm re-solves and with full picks only: the
    // coordinator's plans differ, so the apps' rates do; both give
    // every app targets to run on.
    let apps = WARM_MIN_APPS + 4;
    let warm = fluid(&mix(apps, "noise = 0.05"));
    let full = fluid(&mix(apps, "full_resolve_period_s = 0"));
    assert_ne!(warm, full);
    for rates in [&warm, &full] {
        assert!(rates.iter().all(|t| *t > 0.0), "{rates:?}");
    }
}
