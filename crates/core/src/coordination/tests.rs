//! Tests of the coordination module as a whole.

use super::*;

#[test]
fn supply_left_takes_reserved_slots_and_splits_the_host_side_over_the_cpu_units() {
    let supply = [
        UnitSupply::processor_shared(3.0),
        UnitSupply::queue(1.0),
        UnitSupply::processor_shared(1.0),
    ];
    let left = supply_left(&supply, &[0.5, 0.25, 0.0], 2.0);
    let slots: Vec<f64> = left.iter().map(|s| s.slots).collect();
    // 2 host cores split 3:1 over the two CPU groups; the queue only
    // loses what is reserved on it.
    assert_eq!(slots, vec![3.0 - 0.5 - 1.5, 0.75, 0.5]);
    assert!(left[0].time_shared && !left[1].time_shared);
    // Never negative; no CPU units: the host side takes nothing.
    let left = supply_left(&supply, &[9.0, 0.0, 0.0], 0.0);
    assert_eq!(left[0].slots, 0.0);
    let left = supply_left(&[UnitSupply::queue(1.0)], &[], 4.0);
    assert_eq!(left[0].slots, 1.0);
}

#[test]
fn a_unit_taken_by_apps_outside_coordination_moves_the_targets() {
    let units = vec![UnitSupply::queue(1.0), UnitSupply::queue(1.0)];
    let mut c = Coordinator::new(whole_picks(), units.clone());
    c.set_app(ClientId(1), two_unit_app(1e6, 2e6));
    c.set_app(ClientId(2), two_unit_app(1e6, 2e6));
    assert!(c.update(0));
    let before = c.target(ClientId(1)).unwrap().to_vec();
    // The same supply again is no drift.
    c.set_supply(units.clone());
    assert!(!c.update(1_000_000_000));
    // Someone outside coordination now holds 90 % of unit 0.
    let mut less = units;
    less[0].slots = 0.1;
    c.set_supply(less);
    assert!(c.update(2_000_000_000));
    let after = c.target(ClientId(1)).unwrap().to_vec();
    assert!(after[0] < before[0], "{before:?} -> {after:?}");
    // A supply of the wrong length is ignored.
    c.set_supply(Vec::new());
    assert!(!c.update(3_000_000_000));
}

#[test]
fn a_declared_native_unit_counts_when_nearly_fastest_or_trusted() {
    let app = |declared| AppDemand {
        exec_ns: vec![Some(1.0e6), Some(1.05e6), Some(2.0e6), None],
        overhead_ns: vec![0.0; 4],
        in_flight: 1.0,
        weight: 1.0,
        declared_native: declared,
        native_trusted: false,
        native_in_flight: None,
        exec_samples: Vec::new(),
    };
    assert_eq!(app(None).native_unit(), Some(0));
    // Within NATIVE_CLAIM_SLACK of the fastest: believed.
    assert_eq!(app(Some(1)).native_unit(), Some(1));
    // Twice as slow, or not implemented, or out of range: the fastest.
    assert_eq!(app(Some(2)).native_unit(), Some(0));
    assert_eq!(app(Some(3)).native_unit(), Some(0));
    assert_eq!(app(Some(9)).native_unit(), Some(0));
    // Trusted: any unit measured for the app, but still not one it
    // cannot run on.
    let trusted = |declared| AppDemand {
        native_trusted: true,
        native_in_flight: None,
        exec_samples: Vec::new(),
        ..app(declared)
    };
    assert_eq!(trusted(Some(2)).native_unit(), Some(2));
    assert_eq!(trusted(Some(3)).native_unit(), Some(0));
    assert_eq!(trusted(Some(9)).native_unit(), Some(0));
    // It decides where the others' native estimates count the app.
    let queue = UnitSupply::queue(1.0);
    let other = AppDemand {
        exec_ns: vec![Some(1.0e6), Some(5.0e6), None, None],
        ..app(None)
    };
    let units = [queue; 4];
    let shared = native_estimate(&[app(None), other.clone()], &units);
    let apart = native_estimate(&[app(Some(1)), other], &units);
    assert!(apart[1] > 1.5 * shared[1], "{shared:?} {apart:?}");
}

#[test]
fn a_declaration_measured_on_few_executions_stands_further() {
    let app = |declared, samples: &[u64]| AppDemand {
        exec_ns: vec![Some(1.0e6), Some(1.4e6), Some(1.6e6)],
        overhead_ns: vec![0.0; 3],
        in_flight: 1.0,
        weight: 1.0,
        declared_native: Some(declared),
        native_trusted: false,
        native_in_flight: None,
        exec_samples: samples.to_vec(),
    };
    let many = NATIVE_CLAIM_MIN_SAMPLES;
    let few = NATIVE_CLAIM_MIN_SAMPLES - 1;
    // 40 % above the fastest, on well-measured figures (or counts not
    // given): refused.
    assert_eq!(app(1, &[]).native_unit(), Some(0));
    assert_eq!(app(1, &[many; 3]).native_unit(), Some(0));
    // The declared unit's figure, or the fastest one's, on few
    // executions: believed.
    assert_eq!(app(1, &[many, few, many]).native_unit(), Some(1));
    assert_eq!(app(1, &[few, many, many]).native_unit(), Some(1));
    // Beyond NATIVE_CLAIM_SLACK_UNSURE: refused however few.
    assert_eq!(app(2, &[few; 3]).native_unit(), Some(0));
}

#[test]
fn native_estimates_count_the_places_an_app_keeps_natively() {
    let app = |in_flight, native_in_flight| AppDemand {
        exec_ns: vec![Some(1.0e6)],
        overhead_ns: vec![0.0],
        in_flight,
        weight: 1.0,
        declared_native: None,
        native_trusted: false,
        native_in_flight,
        exec_samples: Vec::new(),
    };
    let units = [UnitSupply::queue(1.0)];
    // Two closed loops of 2 places sharing a saturated queue take equal
    // turns natively, whatever one's host side left of its mean
    // outstanding under coordination.
    let fluid = native_estimate(&[app(2.0, None), app(1.5, Some(2.0))], &units);
    assert!((fluid[0] - fluid[1]).abs() < 1e-9, "{fluid:?}");
    let unequal = native_estimate(&[app(2.0, None), app(1.5, None)], &units);
    assert!(unequal[1] < 0.8 * unequal[0], "{unequal:?}");
    let replayed = native_estimate_replayed(&[app(2.0, None), app(1.5, Some(2.0))], &units);
    assert!(
        (replayed[0] - replayed[1]).abs() < 0.05 * replayed[0],
        "{replayed:?}"
    );
    // Never fewer than it keeps now.
    assert_eq!(app(3.0, Some(2.0)).native_places(), 3.0);
    assert_eq!(app(1.5, Some(f64::NAN)).native_places(), 1.5);
}

#[test]
fn follower_matches_fractions() {
    let mut f = DeficitFollower::new();
    let target = [0.25, 0.0, 0.75];
    let mut count = [0; 3];
    for _ in 0..400 {
        count[f.pick(&target, |_| true).unwrap()] += 1;
    }
    assert_eq!(count, [100, 0, 300]);
    assert_eq!(f.pick(&[0.0, 0.0, 0.0], |_| true), None);
    assert_eq!(f.pick(&[1.0, 0.0, 0.0], |u| u != 0), None);
}

#[test]
fn pacer_holds_the_rate() {
    let mut p = Pacer::new();
    let (mut now, mut issued) = (0, 0);
    // 1000 tasks/s for one simulated second, burst 2.
    while now < 1_000_000_000 {
        match p.take(now, 1000.0, 2.0) {
            Ok(()) => issued += 1,
            Err(at) => now = at,
        }
    }
    assert!((1000..=1003).contains(&issued), "{issued}");
    assert_eq!(Pacer::new().take(0, f64::INFINITY, 1.0), Ok(()));
}

proptest::proptest! {
    /// Tasks of any sizes, asked for back to back: over a span the pacer
    /// lets through the rate's work, give or take the bucket and one task.
    #[test]
    fn a_pacer_lets_through_the_rates_work_give_or_take_a_bucket(
        works in proptest::collection::vec(0.05f64..4.0, 1..40),
        rate in 10.0f64..10_000.0,
        burst in 1.0f64..8.0,
    ) {
        let mut p = Pacer::new();
        let span: u64 = 1_000_000_000;
        let (mut now, mut issued, mut k, mut waits) = (0u64, 0.0, 0usize, 0u64);
        while now < span {
            let work = works[k % works.len()];
            match p.take_work(now, rate, burst, work) {
                Ok(()) => {
                    issued += work;
                    k += 1;
                }
                Err(at) => {
                    proptest::prop_assert!(at > now);
                    now = at;
                    waits += 1;
                }
            }
        }
        let most = works.iter().cloned().fold(0.0, f64::max);
        let expected = rate * span as f64 / 1e9;
        // A full bucket at the start and one task past the end at most;
        // each wait is rounded up to the next ns.
        let rounding = waits as f64 * rate / 1e9;
        proptest::prop_assert!(issued <= expected + burst + most + 1e-6, "{} of {}", issued, expected);
        proptest::prop_assert!(
            issued >= expected - most - rounding - 1e-6,
            "{} of {}",
            issued,
            expected
        );
    }
}

#[test]
fn pacer_holds_the_rate_in_work_whatever_the_task_sizes() {
    // 1000 mean-size tasks/s for one simulated second, burst 2: as tasks of
    // a quarter, of 1.5 and of 3 (more than the burst) mean-size tasks.
    for work in [0.25, 1.5, 3.0] {
        let mut p = Pacer::new();
        let (mut now, mut issued) = (0, 0.0);
        while now < 1_000_000_000 {
            match p.take_work(now, 1000.0, 2.0, work) {
                Ok(()) => issued += work,
                Err(at) => {
                    assert!(at > now);
                    now = at;
                }
            }
        }
        assert!((1000.0..=1005.0).contains(&issued), "{work}: {issued}");
    }
}

#[test]
fn blocking_rows_keep_a_long_task_app_off_a_short_task_apps_queue() {
    // App 0: 0.1 ms tasks, only on the queue (unit 1). App 1: 10 ms
    // tasks, a bit faster on the queue than on the CPU group (unit 0).
    let units = [UnitSupply::processor_shared(1.0), UnitSupply::queue(1.0)];
    let apps = [
        AppDemand {
            exec_ns: vec![None, Some(1e5)],
            overhead_ns: vec![0.0, 1e5],
            in_flight: 1.0,
            weight: 1.0,
            declared_native: None,
            native_trusted: false,
            native_in_flight: None,
            exec_samples: Vec::new(),
        },
        AppDemand {
            exec_ns: vec![Some(1.2e7), Some(1e7)],
            overhead_ns: vec![0.0, 0.0],
            in_flight: 1.0,
            weight: 1.0,
            declared_native: None,
            native_trusted: false,
            native_in_flight: None,
            exec_samples: Vec::new(),
        },
    ];
    let plain = solve_targets(&apps, &units, 0.5, 0, false).unwrap();
    let blocking = solve_targets(&apps, &units, 0.5, 0, true).unwrap();
    let stretched = solve_targets(&apps, &units, 0.5, 3, false).unwrap();
    // The fluid model lets app 1 use the queue's idle half; with the
    // blocking rows it stays on the CPU group.
    assert!(plain.fraction[1][1] > 0.1, "{plain:?}");
    assert!(
        blocking.fraction[1][1] < plain.fraction[1][1],
        "{blocking:?}"
    );
    for t in [&plain, &blocking, &stretched] {
        for row in &t.fraction {
            assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{t:?}");
        }
        assert!(t.rate.iter().all(|r| *r > 0.0), "{t:?}");
    }
}

#[test]
fn waiting_moves_a_short_task_app_off_a_queue_held_by_long_tasks() {
    // Random mix 76 in miniature: app 0 keeps queue 1 busy with 2.5 ms
    // tasks (it has nothing else as fast); app 1's 20 µs tasks are
    // fastest there too, but queue 2 is free and almost as good
    // counting copies. The fluid optimum slots app 1 into queue 1's
    // gaps, where each of its tasks would wait behind app 0's.
    let queue = UnitSupply::queue(1.0);
    let units = [queue, queue, queue];
    let apps = [
        AppDemand {
            exec_ns: vec![Some(1.7e7), Some(2.5e6), Some(3e7)],
            overhead_ns: vec![1e5; 3],
            in_flight: 1.0,
            weight: 1.0,
            declared_native: None,
            native_trusted: false,
            native_in_flight: None,
            exec_samples: Vec::new(),
        },
        AppDemand {
            exec_ns: vec![Some(1.2e5), Some(2e4), Some(3e4)],
            overhead_ns: vec![1e5; 3],
            in_flight: 1.0,
            weight: 1.0,
            declared_native: None,
            native_trusted: false,
            native_in_flight: None,
            exec_samples: Vec::new(),
        },
    ];
    let plain = solve_targets(&apps, &units, 1.0, 0, false).unwrap();
    let waiting = solve_targets_waiting(&apps, &units, 1.0, 3, false).unwrap();
    assert!(plain.fraction[1][1] > 0.1, "{plain:?}");
    assert!(
        waiting.fraction[1][1] < plain.fraction[1][1] / 2.0,
        "{waiting:?}"
    );
    // App 0 keeps its floor either way.
    assert!(waiting.predicted_relative[0] >= 0.999, "{waiting:?}");
    // The wait a queue adds: app 1 visiting queue 1 while app 0 holds it
    // 90 % of the time waits at most app 0's residual task...
    let p = problem(&apps, &units, &native_estimate(&apps, &units));
    let x = vec![vec![0.0, 0.9, 0.0], vec![0.0, 0.05, 0.0]];
    let w = expected_wait_ns(&p, &units, &x, 1, 1);
    assert!(w > 0.0 && w <= 0.9 * 2.5e6 / 2.0 + 1.0, "{w}");
    // ...and app 0 barely waits for app 1's short tasks.
    assert!(expected_wait_ns(&p, &units, &x, 0, 1) <= 0.05 * 2e4 / 2.0 + 1.0);
}

/// Random mix 7: a CPU group of one core and one queue; app 3's 80 µs
/// tasks need the queue, app 2's 28–59 ms tasks run nearly as well on the
/// CPU.
pub(super) fn mix7() -> (Vec<UnitSupply>, Vec<AppDemand>) {
    let units = vec![UnitSupply::processor_shared(1.0), UnitSupply::queue(1.0)];
    let app = |cpu: f64, queue: Option<f64>, overhead: f64| AppDemand {
        exec_ns: vec![Some(cpu), queue],
        overhead_ns: vec![5e3, overhead],
        in_flight: 1.0,
        weight: 1.0,
        declared_native: None,
        native_trusted: false,
        native_in_flight: None,
        exec_samples: Vec::new(),
    };
    let apps = vec![
        app(3e4, None, 0.0),
        app(6.1e5, Some(2.24e6), 1.5e5),
        app(2.84e7, Some(5.94e7), 1.5e5),
        app(6.5e5, Some(8e4), 1.15e5),
    ];
    (units, apps)
}

#[test]
fn exclusion_moves_a_long_task_app_off_a_short_task_apps_queue() {
    // Random mix 7: app 3's 80 µs tasks need the queue (unit 1) to reach
    // native; app 2's 28–59 ms tasks run nearly as well on the CPU
    // group (unit 0). The fluid optimum, and the wait-aware rounds,
    // which hold each wait fixed, keep app 2 on the queue, where app 3
    // waits behind it; the exclusion step sees app 3's wait fall as app
    // 2 leaves.
    let (units, apps) = mix7();
    let rounds = solve_targets_waiting(&apps, &units, 1.05, 3, false).unwrap();
    let excluded = solve_targets_waiting(&apps, &units, 1.05, 3, true).unwrap();
    assert!(rounds.fraction[2][1] > 0.3, "{rounds:?}");
    assert!(excluded.fraction[2][1] < 0.01, "{excluded:?}");
    let p = problem(&apps, &units, &native_estimate(&apps, &units));
    let floor = |t: &Targets| {
        let x: Vec<Vec<f64>> = (0..apps.len())
            .map(|i| {
                (0..units.len())
                    .map(|u| {
                        if p.rate[i][u] > 0.0 {
                            t.fraction[i][u] * t.rate[i] / p.rate[i][u]
                        } else {
                            0.0
                        }
                    })
                    .collect()
            })
            .collect();
        predicted_score(&p, &units, &x, 1.05, &[]).floor
    };
    assert!(
        floor(&excluded) > floor(&rounds) + 0.1,
        "{} vs {}",
        floor(&excluded),
        floor(&rounds)
    );
}

#[test]
fn nonpreemptive_rows_charge_long_tasks_less_the_copy_overlap() {
    let queue = UnitSupply::queue(1.0);
    let cpu = UnitSupply::processor_shared(1.0);
    // App 0: 0.1 ms tasks plus 0.4 ms of copies; app 1: 10 ms tasks.
    let apps = [
        AppDemand {
            exec_ns: vec![None, Some(1e5)],
            overhead_ns: vec![0.0, 4e5],
            in_flight: 1.0,
            weight: 1.0,
            declared_native: None,
            native_trusted: false,
            native_in_flight: None,
            exec_samples: Vec::new(),
        },
        AppDemand {
            exec_ns: vec![Some(1.1e7), Some(1e7)],
            overhead_ns: vec![0.0, 0.0],
            in_flight: 1.0,
            weight: 1.0,
            declared_native: None,
            native_trusted: false,
            native_in_flight: None,
            exec_samples: Vec::new(),
        },
    ];
    let units = [cpu, queue];
    let p = problem(&apps, &units, &[1.0, 1.0]);
    let rows = nonpreemptive_limits(&p, &units);
    // One row per app on the queue; none for the CPU group.
    assert_eq!(rows.len(), 2, "{rows:?}");
    let short = &rows[0].terms;
    assert_eq!(short[0], (0, 1, 5.0));
    assert_eq!(short[1].0, 1);
    assert!((short[1].2 - (1.0 - 4e5 / 1e7)).abs() < 1e-12, "{short:?}");
    // App 1 has no copies to overlap app 0's tasks with: weight 1.
    let long = &rows[1].terms;
    assert_eq!(long[0], (1, 1, 1.0));
    assert!((long[1].2 - 1.0).abs() < 1e-12, "{long:?}");
    // A multi-slot queue gets no rows.
    let wide = [cpu, UnitSupply::queue(2.0)];
    assert!(nonpreemptive_limits(&p, &wide).is_empty());
    // The rows only cut: the bound with them is no higher.
    let plain = crate::fairness::solve_no_loser_limited(&p, 1.0, &[]).unwrap();
    let cut = crate::fairness::solve_no_loser_limited(&p, 1.0, &rows).unwrap();
    assert!(
        cut.solution.system_speedup <= plain.solution.system_speedup * (1.0 + 1e-6),
        "{} vs {}",
        cut.solution.system_speedup,
        plain.solution.system_speedup
    );
}

#[test]
fn weights_split_what_is_above_the_floor() {
    let units = [UnitSupply::queue(1.0)];
    let app = |weight: f64| AppDemand {
        exec_ns: vec![Some(1e6)],
        overhead_ns: vec![0.0],
        in_flight: 4.0,
        weight,
        declared_native: None,
        native_trusted: false,
        native_in_flight: None,
        exec_samples: Vec::new(),
    };
    // No floor: the unit is split 1 : 3.
    let t = solve_targets_waiting(&[app(1.0), app(3.0)], &units, 0.0, 0, false).unwrap();
    assert!((t.rate[1] / t.rate[0] - 3.0).abs() < 1e-3, "{t:?}");
    // Equal weights: an even split, as before weights existed.
    let t = solve_targets_waiting(&[app(1.0), app(1.0)], &units, 0.0, 3, true).unwrap();
    assert!((t.rate[1] / t.rate[0] - 1.0).abs() < 1e-3, "{t:?}");
    // A weight that is not positive counts as 1.
    let t = solve_targets_waiting(&[app(0.0), app(f64::NAN)], &units, 0.0, 0, false).unwrap();
    assert!((t.rate[1] / t.rate[0] - 1.0).abs() < 1e-3, "{t:?}");
    // The floor binds whatever the weights: both natives are 500
    // tasks/s (two apps sharing the unit), so a floor of 1 leaves
    // nothing above it to split 1 : 3.
    let t = solve_targets_waiting(&[app(1.0), app(3.0)], &units, 1.0, 0, false).unwrap();
    assert!((t.rate[0] - 500.0).abs() < 1.0, "{t:?}");
    assert!((t.rate[1] - 500.0).abs() < 1.0, "{t:?}");
    let p = problem(&[app(1.0)], &units, &[1.0]);
    assert!(crate::fairness::solve_no_loser_weighted(&p, 0.0, &[], &[-1.0]).is_err());
    assert!(crate::fairness::solve_no_loser_weighted(&p, 0.0, &[], &[1.0, 2.0]).is_err());
}

#[test]
fn native_estimate_splits_a_queue_by_work() {
    let units = [UnitSupply::queue(1.0)];
    let app = |e: f64| AppDemand {
        exec_ns: vec![Some(e)],
        overhead_ns: vec![0.0],
        in_flight: 1.0,
        weight: 1.0,
        declared_native: None,
        native_trusted: false,
        native_in_flight: None,
        exec_samples: Vec::new(),
    };
    let thr = native_estimate(&[app(1e6), app(3e6)], &units);
    // Time shares 1/4 and 3/4: both complete 250 tasks/s.
    assert!((thr[0] - 250.0).abs() < 1e-6, "{thr:?}");
    assert!((thr[1] - 250.0).abs() < 1e-6, "{thr:?}");
}

#[test]
fn the_replayed_pick_runs_a_queue_short_first_where_it_helps() {
    // A device that a 0.03 ms app and two 3 ms apps all need (the CPU
    // is 100-1000× slower). In arrival order the short app
    // waits for both long tasks every time; short-first, only for the
    // one running, and the long apps lose at most one 0.03 ms task per
    // 6 ms cycle, within the floor.
    let units = [
        UnitSupply::processor_shared(1.0),
        UnitSupply::queue(1.0).with_short_first(),
    ];
    let app = |cpu: f64, dev: f64| AppDemand {
        exec_ns: vec![Some(cpu), Some(dev)],
        overhead_ns: vec![0.0, 0.0],
        in_flight: 1.0,
        weight: 1.0,
        declared_native: Some(1),
        native_trusted: false,
        native_in_flight: None,
        exec_samples: Vec::new(),
    };
    let apps = [app(3e7, 3e4), app(3e8, 3e6), app(3e8, 3e6)];
    let t =
        solve_targets_replayed(&apps, &units, 1.05, 3, true, None, JudgeBudget::default()).unwrap();
    assert_eq!(t.short_first, vec![false, true]);
    let r = &t.predicted_relative;
    assert!(r[0] > 1.5, "{r:?}");
    assert!(
        r[1] >= REPLAY_FLOOR_CAP && r[2] >= REPLAY_FLOOR_CAP,
        "{r:?}"
    );
    // A device that cannot run short-first stays in arrival order.
    let fifo = [units[0], UnitSupply::queue(1.0)];
    let t =
        solve_targets_replayed(&apps, &fifo, 1.05, 3, true, None, JudgeBudget::default()).unwrap();
    assert_eq!(t.short_first, vec![false, false]);
}

/// The coordinator's defaults, each pick run whole inside one update
/// (the slices have their own tests: `tests/pick_slices.rs`).
fn whole_picks() -> CoordinatorConfig {
    CoordinatorConfig {
        pick_slice_events: 0,
        ..CoordinatorConfig::default()
    }
}

#[test]
fn coordinator_resolves_on_membership_only() {
    let units = vec![UnitSupply::queue(1.0); 2];
    let mut c = Coordinator::new(whole_picks(), units);
    let d = AppDemand {
        exec_ns: vec![Some(1e6), Some(2e6)],
        overhead_ns: vec![0.0, 0.0],
        in_flight: 2.0,
        weight: 1.0,
        declared_native: None,
        native_trusted: false,
        native_in_flight: None,
        exec_samples: Vec::new(),
    };
    c.set_app(ClientId(1), d.clone());
    assert!(c.update(0));
    assert!(!c.update(1));
    let t = c.target(ClientId(1)).unwrap();
    assert!(t.iter().all(|f| *f > 0.0), "{t:?}");
    c.set_app(ClientId(2), d);
    assert!(c.update(2));
    c.remove_app(ClientId(1));
    assert!(c.update(3));
    assert!(c.target(ClientId(1)).is_none());
    assert_eq!(c.floor().map(|f| f.1), Some(true));
}

/// Two apps that run some of their calls on a CPU unit of two cores and
/// the rest on a device.
fn cpu_and_device() -> (Vec<UnitSupply>, AppDemand, AppDemand) {
    let units = vec![UnitSupply::processor_shared(2.0), UnitSupply::queue(1.0)];
    (units, two_unit_app(4e6, 1e6), two_unit_app(8e6, 2e6))
}

/// An app with two calls in flight whose calls take `a` ns on unit 0 and
/// `b` ns on unit 1, with no overheads.
fn two_unit_app(a: f64, b: f64) -> AppDemand {
    AppDemand {
        exec_ns: vec![Some(a), Some(b)],
        overhead_ns: vec![0.0; 2],
        in_flight: 2.0,
        weight: 1.0,
        declared_native: None,
        native_trusted: false,
        native_in_flight: None,
        exec_samples: Vec::new(),
    }
}

/// Per unit, the slots the targets keep busy (fluid model).
fn busy_slots(c: &Coordinator, apps: &[(ClientId, &AppDemand)]) -> Vec<f64> {
    let mut busy = vec![0.0; c.supply().len()];
    for (id, d) in apps {
        let (f, r) = (c.target(*id).unwrap(), c.rate(*id).unwrap());
        for (u, b) in busy.iter_mut().enumerate() {
            *b += r * f[u] * d.exec_ns[u].unwrap() / 1e9;
        }
    }
    busy
}

#[test]
fn outside_cpu_load_re_solves_once_it_moves_a_step_and_not_for_noise() {
    let (units, a, b) = cpu_and_device();
    let mut c = Coordinator::new(whole_picks(), units.clone());
    c.set_app(ClientId(1), a.clone());
    c.set_app(ClientId(2), b.clone());
    assert!(c.update(0));
    let apps = [(ClientId(1), &a), (ClientId(2), &b)];
    let quiet = busy_slots(&c, &apps);
    // Noise below the step: no re-solve, even long after the period.
    let second = 1_000_000_000;
    for (i, cores) in [0.1, 0.2, 0.05, 0.15].into_iter().enumerate() {
        assert!(!c.set_outside_load(0, cores));
        c.set_supply(units.clone());
        assert!(!c.update(second * (i as u64 + 1)), "{cores}");
    }
    assert_eq!(c.supply()[0].slots, 2.0);
    // A program takes three quarters of a core: the next update
    // re-solves at once (within the period), and the CPU unit carries
    // less.
    assert!(c.set_outside_load(0, 0.75));
    assert_eq!(c.outside_load(0), 0.75);
    assert_eq!(c.supply()[0].slots, 1.25);
    assert!(c.update(5 * second + 1));
    let loaded = busy_slots(&c, &apps);
    assert!(loaded[0] < quiet[0], "{quiet:?} -> {loaded:?}");
    assert!(loaded[0] <= 1.25 + 1e-6, "{loaded:?}");
    // The host side's share (`set_supply`) still comes off what is left,
    // down to half the unit.
    c.set_supply(vec![UnitSupply::processor_shared(1.8), units[1]]);
    assert!((c.supply()[0].slots - 1.05).abs() < 1e-12);
    assert!(c.set_outside_load(0, 3.0));
    assert_eq!(c.supply()[0].slots, 1.0);
    // Devices take no outside CPU load.
    assert!(!c.set_outside_load(1, 1.0));
    assert_eq!(c.supply()[1].slots, 1.0);
    // The program ends: back to the whole unit.
    assert!(c.set_outside_load(0, 0.0));
    c.set_supply(units);
    assert!(c.update(5 * second + 2));
    assert_eq!(c.supply()[0].slots, 2.0);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    /// Whatever outside load is measured, the CPU unit keeps at least
    /// half its cores, and the targets solved for it keep it no
    /// busier than the supply says (with the solver's tolerance).
    #[test]
    fn targets_under_outside_load_stay_within_the_supply(
        loads in proptest::collection::vec(0.0f64..3.0, 1..6),
    ) {
        let (units, a, b) = cpu_and_device();
        let mut c = Coordinator::new(whole_picks(), units);
        c.set_app(ClientId(1), a.clone());
        c.set_app(ClientId(2), b.clone());
        proptest::prop_assert!(c.update(0));
        for (i, &l) in loads.iter().enumerate() {
            let moved = c.set_outside_load(0, l);
            let now = (i as u64 + 1) * 1_000;
            proptest::prop_assert_eq!(c.update(now), moved);
            let slots = c.supply()[0].slots;
            proptest::prop_assert!((1.0..=2.0).contains(&slots), "{}", slots);
            let busy = busy_slots(&c, &[(ClientId(1), &a), (ClientId(2), &b)]);
            proptest::prop_assert!(busy[0] <= slots * 1.01 + 1e-6, "{:?} on {}", busy, slots);
        }
    }
}

/// The replay plays queues in arrival order: on a unit that splits by
/// weight, with weights that differ, the replayed native estimate is the
/// fluid one; with equal weights it is the replay's, as on a queue.
#[test]
fn the_replayed_native_estimate_is_the_fluid_one_on_a_share_split_unit() {
    let app = |e: f64, weight: f64| AppDemand {
        exec_ns: vec![Some(e)],
        overhead_ns: vec![1e5],
        in_flight: 2.0,
        weight,
        declared_native: None,
        native_trusted: false,
        native_in_flight: None,
        exec_samples: Vec::new(),
    };
    let split = [UnitSupply::queue(1.0).with_weight_split()];
    let weighted = [app(1e6, 1.4), app(4e6, 0.6)];
    assert_eq!(
        native_estimate_replayed(&weighted, &split),
        native_estimate(&weighted, &split)
    );
    let equal = [app(1e6, 1.0), app(4e6, 1.0)];
    let queue = [UnitSupply::queue(1.0)];
    assert_eq!(
        native_estimate_replayed(&equal, &split),
        native_estimate_replayed(&equal, &queue)
    );
}

/// A new weight (the app's class or shares changed) re-solves at once.
#[test]
fn a_changed_weight_re_solves_at_the_next_update() {
    let units = vec![
        UnitSupply::queue(1.0).with_weight_split(),
        UnitSupply::queue(1.0),
    ];
    let mut c = Coordinator::new(whole_picks(), units);
    c.set_app(ClientId(1), two_unit_app(1e6, 2e6));
    c.set_app(ClientId(2), two_unit_app(1e6, 2e6));
    assert!(c.update(0));
    // The same figures again: nothing to do before the period.
    c.set_app(ClientId(1), two_unit_app(1e6, 2e6));
    assert!(!c.update(1));
    let heavier = AppDemand {
        weight: 3.0,
        ..two_unit_app(1e6, 2e6)
    };
    c.set_app(ClientId(1), heavier);
    assert!(c.update(2));
    assert!(c.rate(ClientId(1)).unwrap() > c.rate(ClientId(2)).unwrap());
}

/// 48 apps on a CPU group and two queues, each app's tasks a different
/// length: a mix where many (app, queue) pairs share a queue.
fn shared_queues_at_scale() -> ([UnitSupply; 3], Vec<AppDemand>) {
    let units = [
        UnitSupply::processor_shared(2.0),
        UnitSupply::queue(1.0),
        UnitSupply::queue(1.0),
    ];
    let apps: Vec<AppDemand> = (0..BARRIER_MIN_APPS)
        .map(|i| {
            let cpu = 1e6 * (1.0 + (i % 7) as f64);
            AppDemand {
                exec_ns: vec![
                    Some(cpu),
                    Some(cpu / (2.0 + (i % 5) as f64)),
                    Some(cpu / 3.0),
                ],
                overhead_ns: vec![0.0, 1e5, 2e5],
                in_flight: 1.0,
                weight: 1.0,
                declared_native: None,
                native_trusted: false,
                native_in_flight: None,
                exec_samples: Vec::new(),
            }
        })
        .collect();
    (units, apps)
}

/// The exclusion candidates of [`shared_queues_at_scale`]'s no-loser
/// solution (floor 1.05, equal weights): at most `max`, started warm or
/// not.
fn candidates_at_scale(max: u64, warm: bool) -> Vec<(Solved, FairProblem)> {
    let (units, apps) = shared_queues_at_scale();
    let base = problem(&apps, &units, &native_estimate(&apps, &units));
    let weights = vec![1.0; apps.len()];
    let s = solve_no_loser_weighted(&base, 1.05, &[], &weights).unwrap();
    let search = CandidateSearch {
        warm,
        max,
        waits: Waits::for_apps(apps.len()),
    };
    exclusion_candidates(
        &base,
        &base,
        &units,
        &s.solution.allocation,
        search,
        &mut |q, limits, from| solve_candidate(q, &limits(), from, 1.05, &weights),
    )
}

#[test]
fn exclusion_candidates_stop_at_their_cap_and_hold_waits_fixed_at_scale() {
    assert_eq!(Waits::for_apps(BARRIER_MIN_APPS - 1), Waits::Coupled);
    assert_eq!(Waits::for_apps(BARRIER_MIN_APPS), Waits::Fixed);
    let weights = vec![1.0; BARRIER_MIN_APPS];
    let found = candidates_at_scale(5, false);
    assert!((2..=5).contains(&found.len()), "{} candidates", found.len());
    // Fixed waits: each candidate is its problem's plain solution, with no
    // coupled rows.
    for (next, q) in &found {
        let plain = solve_no_loser_weighted(q, 1.05, &[], &weights).unwrap();
        assert_eq!(plain.solution.allocation, next.solution.allocation);
    }
}

#[test]
fn warm_candidates_are_their_problems_optimum_in_fewer_steps() {
    let weights = vec![1.0; BARRIER_MIN_APPS];
    let found = candidates_at_scale(32, true);
    assert!(found.len() >= 4, "{} candidates", found.len());
    let mut fewer_steps = 0;
    for (next, q) in &found {
        let cold = solve_no_loser_weighted(q, 1.05, &[], &weights).unwrap();
        let (a, b) = (next.solution.objective, cold.solution.objective);
        assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{a} against {b}");
        assert!(next.held.feasible && next.held.floor == cold.floor);
        if next.solution.iterations < cold.solution.iterations {
            fewer_steps += 1;
        }
    }
    // The first is solved cold. A move that leaves the moved app short
    // of the goal on the units it keeps makes no warm start (the others
    // would have to give way first): here most do, and the rest start warm.
    assert!(
        fewer_steps >= 2,
        "{fewer_steps} of {} started warm",
        found.len()
    );
}

/// [`shared_queues_at_scale`]'s program with every queue pair's occupancy
/// raised by 20 %, as a wait-aware round raises it.
fn with_waits(base: &FairProblem) -> FairProblem {
    let mut q = base.clone();
    for (i, row) in q.occupancy.iter_mut().enumerate() {
        for (u, o) in row.iter_mut().enumerate().skip(1) {
            if base.rate[i][u] > 0.0 {
                *o *= 1.2;
            }
        }
    }
    q
}

/// The first `apps` of [`shared_queues_at_scale`], solved; then the
/// program with its waits ([`with_waits`]) solved as the next wait-aware
/// round ([`solve_round_after`]) and cold: (round, cold).
fn next_round(apps: usize) -> (NoLoserSolution, NoLoserSolution) {
    let (units, mut demands) = shared_queues_at_scale();
    demands.truncate(apps);
    let base = problem(&demands, &units, &native_estimate(&demands, &units));
    let weights = vec![1.0; demands.len()];
    let before = solve_no_loser_weighted(&base, 1.05, &[], &weights).unwrap();
    let q = with_waits(&base);
    let cold = solve_no_loser_weighted(&q, 1.05, &[], &weights).unwrap();
    let round = solve_round_after(&q, 1.05, &weights, &before).unwrap();
    (round, cold)
}

#[test]
fn a_wait_aware_round_at_scale_starts_warm_from_the_round_before() {
    let (warm, cold) = next_round(BARRIER_MIN_APPS);
    let (a, b) = (warm.solution.objective, cold.solution.objective);
    assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{a} against {b}");
    assert!(warm.floor_feasible && warm.floor == cold.floor);
    assert!(
        warm.solution.iterations < cold.solution.iterations,
        "warm {} steps, cold {}",
        warm.solution.iterations,
        cold.solution.iterations
    );
}

#[test]
fn a_wait_aware_round_below_the_barriers_size_is_solved_cold() {
    let (round, cold) = next_round(BARRIER_MIN_APPS - 1);
    assert_eq!(round, cold);
}
