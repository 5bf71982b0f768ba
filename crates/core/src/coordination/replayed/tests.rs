//! The walk in groups ([`toward_in_groups`]).

use super::*;
use crate::coordination::native_estimate_replayed;

/// An app that runs `exec_ms` per task on each unit (`None`: cannot),
/// one task in flight, counted natively on `native` (trusted).
fn app(exec_ms: &[Option<f64>], native: usize) -> AppDemand {
    AppDemand {
        exec_ns: exec_ms.iter().map(|e| e.map(|ms| ms * 1e6)).collect(),
        overhead_ns: vec![0.0; exec_ms.len()],
        in_flight: 1.0,
        weight: 1.0,
        declared_native: Some(native),
        native_trusted: true,
        native_in_flight: None,
    }
}

/// Everyone on its native unit, unpaced, and that plan's replay.
fn native_start(judge: &Judge<'_>, apps: &[AppDemand], units: usize) -> Candidate {
    let plan = Plan::native(apps, units, judge.native);
    let judged = judge.judge(&plan);
    (plan, judged)
}

/// `from` with the apps in `moved` sent wholly to unit `to_unit`.
fn moved_to(from: &Plan, moved: &[usize], to_unit: usize, rate: f64) -> Plan {
    let mut plan = from.clone();
    for &i in moved {
        plan.fraction[i] = vec![0.0; from.short_first.len()];
        plan.fraction[i][to_unit] = 1.0;
        plan.rate[i] = rate;
    }
    plan
}

/// Twelve alike apps that all queue natively on one device, and a CPU
/// group of twelve cores on which each runs nearly as fast alone.
fn twelve_alike() -> ([UnitSupply; 2], Vec<AppDemand>) {
    let units = [UnitSupply::processor_shared(12.0), UnitSupply::queue(1.0)];
    (units, vec![app(&[Some(1.0), Some(0.5)], 1); 12])
}

#[test]
fn moves_that_all_keep_the_floor_take_one_replay() {
    let (units, apps) = twelve_alike();
    let native = native_estimate_replayed(&apps, &units);
    let mut journal = Journal::whole();
    let judge = Judge::new(&apps, &units, &native, JudgeBudget::default(), &mut journal);
    let (from, from_judged) = native_start(&judge, &apps, units.len());
    let all: Vec<usize> = (0..apps.len()).collect();
    let to = moved_to(&from, &all, 0, 1e4);
    let to_judged = judge.judge(&to);
    assert!(to_judged.score.floor >= REPLAY_FLOOR_CAP - REPLAY_FLOOR_TIE);
    let before = judge.spent.get();
    let (plan, judged) =
        toward_in_groups(&judge, (&from, &from_judged), (&to, &to_judged)).unwrap();
    assert_eq!(plan.fraction, to.fraction);
    assert!(judged.score.log_sum > from_judged.score.log_sum);
    // One replay: the whole group at once.
    assert_eq!(judge.spent.get() - before, judged.outcome.events);
}

#[test]
fn a_move_that_costs_someone_the_floor_is_left_out_and_the_rest_kept() {
    // Unit 0: a CPU group; 1: a device the victim (app 0) has to itself
    // natively; 2: a device six apps share natively.
    let units = [
        UnitSupply::processor_shared(6.0),
        UnitSupply::queue(1.0),
        UnitSupply::queue(1.0),
    ];
    let mut apps = vec![app(&[None, Some(1.0), None], 1)];
    // Five apps that gain on the CPU group and cost no one anything there.
    apps.extend(vec![app(&[Some(1.0), None, Some(2.0)], 2); 5]);
    // An intruder: faster on the victim's device than on its own.
    apps.push(app(&[None, Some(1.0), Some(2.0)], 2));
    let native = native_estimate_replayed(&apps, &units);
    let mut journal = Journal::whole();
    let judge = Judge::new(&apps, &units, &native, JudgeBudget::default(), &mut journal);
    let (from, from_judged) = native_start(&judge, &apps, units.len());
    let to = moved_to(&moved_to(&from, &[1, 2, 3, 4, 5], 0, 1e4), &[6], 1, 1e4);
    let to_judged = judge.judge(&to);
    // The target plan costs the victim the floor; each mover gains.
    assert!(to_judged.relative[0] < 0.9, "{:?}", to_judged.relative);
    assert!((1..7).all(|i| to_judged.relative[i] > from_judged.relative[i]));
    let (plan, judged) =
        toward_in_groups(&judge, (&from, &from_judged), (&to, &to_judged)).unwrap();
    for i in 1..6 {
        assert_eq!(plan.fraction[i], to.fraction[i], "app {i}");
    }
    assert_eq!(plan.fraction[6], from.fraction[6]);
    assert!(judged.score.floor >= from_judged.score.floor - REPLAY_FLOOR_TIE / 2.0);
    assert!(judged.score.log_sum > from_judged.score.log_sum);
}

#[test]
fn the_walk_fits_where_the_budget_replays_every_apps_options() {
    let (units, apps) = twelve_alike();
    let native = native_estimate_replayed(&apps, &units);
    let mut journal = Journal::whole();
    let roomy = Judge::new(&apps, &units, &native, JudgeBudget::default(), &mut journal);
    let (from, _) = native_start(&roomy, &apps, units.len());
    let all: Vec<usize> = (0..apps.len()).collect();
    let to = moved_to(&from, &all, 0, 1e4);
    assert!(roomy.walk_fits(&from, &to));
    // Twelve apps × (three rates + two units) replays do not fit in the
    // events of about ten.
    let mut tight_journal = Journal::whole();
    let tight = Judge::new(
        &apps,
        &units,
        &native,
        JudgeBudget {
            replay_events: 10 * roomy.last.get(),
        },
        &mut tight_journal,
    );
    native_start(&tight, &apps, units.len());
    assert!(!tight.walk_fits(&from, &to));
    // Nothing to move: any budget fits.
    assert!(tight.walk_fits(&from, &from));
}
