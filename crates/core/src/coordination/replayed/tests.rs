//! The walk in groups ([`toward_in_groups`]) and the floor's repair
//! ([`repair_floor`]).

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
        exec_samples: Vec::new(),
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

/// Unit 0: a device app 0 has to itself natively; 1: a device apps 1–3
/// share natively; 2: a CPU group of four cores on which apps 1 and 2
/// gain. With a plan that moves apps 1 and 2 there, plus the moves in
/// `extra` (app, unit).
fn repairable(extra: &[(usize, usize)]) -> Repairable {
    let units = [
        UnitSupply::queue(1.0),
        UnitSupply::queue(1.0),
        UnitSupply::processor_shared(4.0),
    ];
    let mut apps = vec![app(&[Some(1.0), Some(3.0), None], 0)];
    apps.extend(vec![app(&[Some(2.0), Some(1.0), Some(0.5)], 1); 2]);
    apps.push(app(&[Some(1.0), Some(1.0), None], 1));
    let native = native_estimate_replayed(&apps, &units);
    let mut plan = moved_to(&Plan::native(&apps, units.len(), &native), &[1, 2], 2, 1e4);
    for &(i, u) in extra {
        plan = moved_to(&plan, &[i], u, 1e4);
    }
    Repairable {
        units,
        apps,
        native,
        plan,
    }
}

/// The set-up of the repair's tests.
struct Repairable {
    units: [UnitSupply; 3],
    apps: Vec<AppDemand>,
    native: Vec<f64>,
    plan: Plan,
}

/// A judge whose budget cannot afford the app-by-app walk: room for
/// about eight replays.
fn tight_judge<'a>(
    apps: &'a [AppDemand],
    units: &'a [UnitSupply],
    native: &'a [f64],
    journal: &'a mut Journal,
) -> Judge<'a> {
    let mut probe_journal = Journal::whole();
    let probe = Judge::new(
        apps,
        units,
        native,
        JudgeBudget::default(),
        &mut probe_journal,
    );
    native_start(&probe, apps, units.len());
    let events = 8 * probe.last.get();
    Judge::new(
        apps,
        units,
        native,
        JudgeBudget {
            replay_events: events,
        },
        journal,
    )
}

/// [`repairable`]`(extra)` under [`tight_judge`]: the plan's replay,
/// the native plan and its replay, and the repair.
fn repaired_tightly(extra: &[(usize, usize)]) -> (Judged, Plan, Option<Candidate>) {
    let Repairable {
        units,
        apps,
        native,
        plan,
    } = repairable(extra);
    let mut journal = Journal::whole();
    let judge = tight_judge(&apps, &units, &native, &mut journal);
    let judged = judge.judge(&plan);
    let home = native_start(&judge, &apps, units.len());
    assert!(!judge.walk_fits(&home.0, &plan));
    let plans = vec![(plan, judged.clone()), home.clone()];
    let repaired = repair_floor(&judge, &plans);
    if let Some((_, after)) = &repaired {
        assert!(after.score.holds_the_floor(), "{:?}", after.relative);
        assert!(after.score.log_sum > home.1.score.log_sum);
    }
    (judged, home.0, repaired)
}

/// Repairing [`repairable`]`(extra)`, where app 0 replays below
/// `victim_below`: app `sent` goes back to its native row and the apps in
/// `kept` keep the plan's.
fn assert_sends_home(
    extra: &[(usize, usize)],
    victim_below: f64,
    sent: usize,
    kept: std::ops::Range<usize>,
) {
    let (before, home, repaired) = repaired_tightly(extra);
    assert!(before.relative[0] < victim_below, "{:?}", before.relative);
    let (plan, _) = repaired.expect("a repair");
    let to = repairable(extra).plan;
    assert_eq!(plan.fraction[sent], home.fraction[sent]);
    for i in kept {
        assert_eq!(plan.fraction[i], to.fraction[i], "app {i}");
    }
}

#[test]
fn an_app_moved_below_the_floor_goes_home_and_the_others_keep_their_moves() {
    // App 0 moved to the device it runs three times slower on.
    assert_sends_home(&[(0, 1)], 0.5, 0, 1..4);
}

#[test]
fn an_app_crowded_at_home_gets_its_unit_back_from_the_apps_the_plan_added() {
    // App 3 moved onto app 0's device.
    assert_sends_home(&[(3, 0)], 0.9, 3, 1..3);
}

#[test]
fn no_repair_where_the_walk_fits_or_the_best_candidate_holds_the_floor() {
    let Repairable {
        units,
        apps,
        native,
        plan: to,
    } = repairable(&[(0, 1)]);
    let mut roomy_journal = Journal::whole();
    let roomy = Judge::new(
        &apps,
        &units,
        &native,
        JudgeBudget::default(),
        &mut roomy_journal,
    );
    let to_judged = roomy.judge(&to);
    let home = native_start(&roomy, &apps, units.len());
    let plans = vec![(to.clone(), to_judged), home.clone()];
    assert!(roomy.walk_fits(&home.0, &to));
    assert!(repair_floor(&roomy, &plans).is_none());
    // Apps 1 and 2 alone moved: the plan holds the floor as it is.
    let (fine, _, repaired) = repaired_tightly(&[]);
    assert!(fine.score.holds_the_floor(), "{:?}", fine.relative);
    assert!(repaired.is_none());
}

/// Apps on a CPU group of two cores and two devices: per app, its task
/// time on each unit (ms, `None`: cannot run there), its native unit and
/// the unit a plan sends it to (both among those it can run on).
fn drawn_mix(
    rows: &[(Vec<Option<f64>>, usize, usize)],
) -> ([UnitSupply; 3], Vec<AppDemand>, Vec<usize>) {
    let units = [
        UnitSupply::processor_shared(2.0),
        UnitSupply::queue(1.0),
        UnitSupply::queue(1.0),
    ];
    let usable = |exec: &[Option<f64>], pick: usize| {
        let on: Vec<usize> = (0..exec.len()).filter(|&u| exec[u].is_some()).collect();
        on[pick % on.len()]
    };
    let apps = rows
        .iter()
        .map(|(exec, native, _)| app(exec, usable(exec, *native)))
        .collect();
    let moved = rows.iter().map(|(exec, _, to)| usable(exec, *to)).collect();
    (units, apps, moved)
}

/// One app's row for [`drawn_mix`]: task times with at least one unit.
fn drawn_row() -> impl proptest::strategy::Strategy<Value = (Vec<Option<f64>>, usize, usize)> {
    use proptest::prelude::*;
    (
        proptest::collection::vec(proptest::option::weighted(0.8, 0.2f64..5.0), 3),
        0usize..3,
        0usize..3,
    )
        .prop_map(|(mut exec, native, to)| {
            if exec.iter().all(Option::is_none) {
                exec[native] = Some(1.0);
            }
            (exec, native, to)
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
    /// A repair raises the replayed floor of the plan it starts from,
    /// and leaves every app either where that plan put it or where the
    /// native plan does. (About one case in five is repaired; in the
    /// others the repair returns nothing, which the property allows.)
    #[test]
    fn a_repair_raises_the_floor_and_only_sends_apps_home(
        rows in proptest::collection::vec(drawn_row(), 3..7),
    ) {
        let (units, apps, moved) = drawn_mix(&rows);
        let native = native_estimate_replayed(&apps, &units);
        let mut journal = Journal::whole();
        let judge = tight_judge(&apps, &units, &native, &mut journal);
        let home = native_start(&judge, &apps, units.len());
        let mut to = home.0.clone();
        for (i, &u) in moved.iter().enumerate() {
            to = moved_to(&to, &[i], u, 1e4);
        }
        let to_judged = judge.judge(&to);
        let plans = vec![(to.clone(), to_judged.clone()), home.clone()];
        if let Some((plan, judged)) = repair_floor(&judge, &plans) {
            proptest::prop_assert!(judged.score.floor > to_judged.score.floor);
            for i in 0..apps.len() {
                let kept = plan.fraction[i] == to.fraction[i] && plan.rate[i] == to.rate[i];
                let sent = plan.fraction[i] == home.0.fraction[i] && plan.rate[i] == home.0.rate[i];
                proptest::prop_assert!(kept || sent, "app {}", i);
            }
        }
    }
}

#[test]
fn a_queues_other_apps_cut_together_leave_the_room_to_one() {
    // A device shared natively by a short-task app (0), two long-task
    // apps (1, 2) and a fourth (3) that the plan moves to the CPU: the
    // three left above their native rates, unpaced.
    let units = [UnitSupply::processor_shared(1.0), UnitSupply::queue(1.0)];
    let apps = vec![
        app(&[None, Some(2.0)], 1),
        app(&[None, Some(8.0)], 1),
        app(&[None, Some(8.0)], 1),
        app(&[Some(8.0), Some(8.0)], 1),
    ];
    let native = native_estimate_replayed(&apps, &units);
    let mut journal = Journal::whole();
    let judge = Judge::new(&apps, &units, &native, JudgeBudget::default(), &mut journal);
    let (start, _) = native_start(&judge, &apps, units.len());
    let mut from = moved_to(&start, &[3], 0, native[3] * 2.0);
    // The short-task app unpaced, the others at twice their native rate.
    from.rate[0] = native[0] * 100.0;
    let from_judged = judge.judge(&from);
    assert!(
        (0..3).all(|i| from_judged.relative[i] > 1.2),
        "{:?}",
        from_judged.relative
    );
    let (plan, judged) = cut_others(&judge, (&from, &from_judged)).expect("a cut that pays");
    // The short-task app keeps its rate and gains; the two others are paced
    // to their native estimates and stay at native or above.
    assert_eq!(plan.rate[0], from.rate[0]);
    assert_eq!(plan.rate[1], native[1] * RATE_CUT_FLOOR);
    assert_eq!(plan.rate[2], native[2] * RATE_CUT_FLOOR);
    assert_eq!(plan.fraction, from.fraction);
    assert!(
        judged.relative[0] > 2.0 * from_judged.relative[0],
        "{:?}",
        judged.relative
    );
    assert!(judged.score.floor >= REPLAY_FLOOR_CAP - REPLAY_FLOOR_TIE);
    assert!(judge.beats(judged.score, from_judged.score, 0.0));
}
