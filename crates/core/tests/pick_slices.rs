//! A replay-judged pick run in slices (`coordination::slices`) publishes
//! exactly what the same pick run whole does, and a coordinator that
//! slices keeps the targets in force until the last slice, but for its
//! newcomers (on their native unit) and the best plan so far.

use hetsched_core::coordination::{
    AppDemand, Coordinator, CoordinatorConfig, Journal, JudgeBudget, Plan, ReplayedPick, Targets,
    UnitSupply,
};
use hetsched_core::ids::ClientId;
use proptest::prelude::*;

#[path = "common/small_machine.rs"]
mod small_machine;
use small_machine::{app, machine};

/// Runs `pick` in slices of `events` until one ends unpaused; the
/// targets and how many runs it took.
fn in_slices(pick: &ReplayedPick<'_>, events: u64) -> (Targets, u64) {
    let mut journal = Journal::sliced(events);
    loop {
        let t = pick.run(&mut journal);
        if !journal.paused() {
            return (t.unwrap(), journal.runs());
        }
        assert!(journal.runs() < 10_000, "a sliced pick that never ends");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Whatever the slice, the last slice's targets are the whole pick's,
    /// bit for bit, with or without an incumbent; and a slice smaller than
    /// the pick takes more than one run.
    #[test]
    fn a_pick_in_slices_publishes_what_the_whole_pick_does(
        (units, apps) in machine(2..=4, 3..=7),
        slice in prop::sample::select(vec![1u64, 30_000, 160_000]),
        with_incumbent in any::<bool>(),
    ) {
        let incumbent = Plan {
            fraction: apps
                .iter()
                .map(|a| a.exec_ns.iter().map(|e| f64::from(u8::from(e.is_some()))).collect::<Vec<f64>>())
                .map(|row| {
                    let sum: f64 = row.iter().sum();
                    row.iter().map(|f| f / sum).collect()
                })
                .collect(),
            rate: vec![100.0; apps.len()],
            short_first: vec![false; units.len()],
        };
        let pick = ReplayedPick {
            apps: &apps,
            units: &units,
            floor_goal: 1.05,
            rounds: 2,
            exclusion: true,
            incumbent: with_incumbent.then_some(&incumbent),
            budget: JudgeBudget { replay_events: 1_500_000 },
        };
        let whole = pick.run(&mut Journal::whole()).unwrap();
        let (sliced, runs) = in_slices(&pick, slice);
        prop_assert_eq!(&sliced, &whole);
        if slice == 1 {
            // One step per run: the native estimate, the first solve and a
            // replay at least.
            prop_assert!(runs >= 3, "{runs} runs");
        }
    }
}

/// Two apps on a CPU group and a device, at the default config but for the
/// slice.
fn two_apps(slice: u64) -> (Coordinator, AppDemand) {
    let units = vec![UnitSupply::processor_shared(2.0), UnitSupply::queue(1.0)];
    let config = CoordinatorConfig {
        pick_slice_events: slice,
        ..CoordinatorConfig::default()
    };
    let mut c = Coordinator::new(config, units);
    let d = app(vec![Some(4e6), Some(1e6)], 1e5, 2);
    c.set_app(ClientId(1), d.clone());
    c.set_app(ClientId(2), app(vec![Some(8e6), Some(2e6)], 1e5, 2));
    (c, d)
}

/// Calls `update` until a pick ends (`solves` moves); how many calls
/// that took.
fn until_published(c: &mut Coordinator, now: u64) -> u64 {
    let solves = c.solves();
    for calls in 1..=10_000 {
        let changed = c.update(now + calls);
        if c.solves() != solves {
            assert!(changed);
            return calls;
        }
        assert!(
            c.picking(),
            "an update that neither ended the pick nor picks"
        );
    }
    panic!("the pick never ended");
}

#[test]
fn a_sliced_pick_runs_newcomers_native_until_its_last_slice() {
    let (mut whole, _) = two_apps(0);
    assert!(whole.update(0), "a pick run whole publishes at once");
    assert_eq!((whole.solves(), whole.last_pick_slices()), (1, 1));

    let (mut c, _) = two_apps(1);
    // The first slice finds the native estimate: both apps, new, run on
    // their native unit (the device) meanwhile.
    assert!(c.update(0), "the newcomers got targets");
    assert!(c.picking());
    assert_eq!(c.solves(), 0);
    for id in [ClientId(1), ClientId(2)] {
        assert_eq!(c.target(id), Some(&[0.0, 1.0][..]), "{id:?}");
    }
    let calls = until_published(&mut c, 0);
    assert!(!c.picking());
    assert_eq!(c.last_pick_slices(), calls + 1);
    assert_eq!(c.slices(), calls + 1);
    for id in [ClientId(1), ClientId(2)] {
        assert_eq!(c.target(id), whole.target(id), "{id:?}");
        assert_eq!(c.rate(id), whole.rate(id), "{id:?}");
    }
    // Nothing changed: no new pick.
    assert!(!c.update(1_000_000_000));
    assert!(!c.picking());
}

#[test]
fn an_app_that_comes_mid_pick_starts_it_again_and_drift_waits_for_it() {
    let (mut c, d) = two_apps(1);
    assert!(c.update(0));
    assert!(!c.update(1), "a slice that finds nothing to publish");
    let before = (c.slices(), c.target(ClientId(1)).map(<[f64]>::to_vec));
    // A newcomer: the pick starts again, for three apps; the newcomer runs
    // natively meanwhile, the others keep what they had.
    c.set_app(ClientId(3), d.clone());
    assert!(c.update(2));
    assert!(c.picking());
    assert_eq!(c.target(ClientId(3)), Some(&[0.0, 1.0][..]));
    assert_eq!(c.target(ClientId(1)).map(<[f64]>::to_vec), before.1);
    // Drift while picking does not restart it.
    let mut drifted = d.clone();
    drifted.exec_ns[1] = Some(1.5e6);
    c.set_app(ClientId(1), drifted.clone());
    until_published(&mut c, 3);
    assert!(c.slices() > before.0);
    for id in [ClientId(1), ClientId(2), ClientId(3)] {
        assert!(c.target(id).is_some(), "{id:?}");
    }
    // The pick saw the models at its start: the drift is still to see,
    // once the period passed.
    let period = CoordinatorConfig::default().resolve_period_ns;
    assert!(!c.update(10) && !c.picking(), "not before the period");
    assert!(
        !c.update(period + 2),
        "one step per slice, every app covered"
    );
    assert!(c.picking(), "drift re-picks after the period");
}

#[test]
fn the_best_plan_so_far_goes_in_force_before_the_pick_ends() {
    let (mut c, _) = two_apps(1);
    assert!(c.update(0));
    let native: Vec<Option<Vec<f64>>> = [ClientId(1), ClientId(2)]
        .iter()
        .map(|id| c.target(*id).map(<[f64]>::to_vec))
        .collect();
    // Slices until the targets move off the native rows; the pick has not
    // ended there.
    let mut moved_at = None;
    for now in 1..10_000u64 {
        let changed = c.update(now);
        if c.solves() > 0 {
            break;
        }
        let now_targets: Vec<Option<Vec<f64>>> = [ClientId(1), ClientId(2)]
            .iter()
            .map(|id| c.target(*id).map(<[f64]>::to_vec))
            .collect();
        if now_targets != native {
            assert!(changed, "targets moved in an update that said nothing");
            moved_at = Some(now);
            break;
        }
    }
    assert!(
        moved_at.is_some(),
        "no plan went in force before the pick ended"
    );
    assert!(c.picking());
    // What went in force holds the floor as the pick replayed it.
    for id in [ClientId(1), ClientId(2)] {
        let (_, relative) = c.estimate(id).expect("an estimate");
        assert!(relative >= 0.98, "{id:?} at {relative}");
    }
    // And the pick still ends on its own choice.
    until_published(&mut c, 10_000);
    assert!(!c.picking());
}
