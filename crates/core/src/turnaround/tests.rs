use super::*;
use crate::view::MIN_UTILISATION;
use proptest::prelude::*;

fn input(exec_ns: f64, ahead_ns: f64, slots: u32, load: UnitLoad) -> TurnaroundInput {
    TurnaroundInput {
        exec_ns,
        dispatch_ns: 500.0,
        copy_ns: 1500.0,
        ahead_ns,
        slots,
        load,
    }
}

fn load() -> impl Strategy<Value = UnitLoad> {
    prop_oneof![
        (0.0..1e4f64).prop_map(UnitLoad::RunnableThreads),
        (0.0..1e5f64).prop_map(UnitLoad::Backlog),
        (0.0..=1.0f64, 0.0..1e9f64, 0.01..=1.0f64).prop_map(|(g, w, m)| {
            UnitLoad::View(ClientUnitView {
                guaranteed: g,
                wait_ns: w,
                max_utilisation: m,
                ..ClientUnitView::OPEN
            })
        }),
    ]
}

#[test]
fn unknown_length_gives_no_figure() {
    for exec in [f64::NAN, f64::INFINITY, -1.0] {
        assert_eq!(
            turnaround(&input(exec, 0.0, 1, UnitLoad::Backlog(0.0))),
            None
        );
    }
}

#[test]
fn a_view_load_is_the_views_stretch() {
    let view = ClientUnitView {
        guaranteed: 0.25,
        wait_ns: 9e6,
        ..ClientUnitView::OPEN
    };
    let t = turnaround(&input(1e6, 0.0, 1, UnitLoad::View(view))).unwrap();
    assert_eq!(t.stretched_ns, view.stretched_ns(1e6));
    assert_eq!(t.turnaround_ns, 2000.0 + view.stretched_ns(1e6));
}

#[test]
fn unknown_work_ahead_counts_as_none() {
    let none = turnaround(&input(1e6, 0.0, 2, UnitLoad::Backlog(4.0))).unwrap();
    for ahead in [f64::NAN, f64::INFINITY, -5.0] {
        let t = turnaround(&input(1e6, ahead, 2, UnitLoad::Backlog(4.0))).unwrap();
        assert_eq!(t, none);
    }
}

proptest! {
    #[test]
    fn stretch_stays_within_the_views_bounds(
        exec in 1.0..1e9f64, ahead in 0.0..1e9f64, slots in 1u32..64, load in load()
    ) {
        let t = turnaround(&input(exec, ahead, slots, load)).unwrap();
        prop_assert!(t.stretch >= 1.0 - 1e-12, "{t:?}");
        prop_assert!(t.stretch <= 1.0 / MIN_UTILISATION + 1e-6, "{t:?}");
        prop_assert!((t.stretched_ns - exec * t.stretch).abs() <= 1e-9 * t.stretched_ns);
        prop_assert!((t.ahead_ns - ahead * t.stretch).abs() <= 1e-9 * t.ahead_ns.max(1.0));
        let sum = 2000.0 + t.ahead_ns + t.stretched_ns;
        prop_assert!((t.turnaround_ns - sum).abs() <= 1e-9 * sum);
        let rate = f64::from(slots) * 1e9 / t.stretched_ns;
        prop_assert!((t.rate_per_s - rate).abs() <= 1e-9 * rate);
    }

    #[test]
    fn more_load_never_predicts_sooner(
        exec in 1.0..1e9f64, slots in 1u32..64, less in 0.0..1e4f64, more in 0.0..1e4f64
    ) {
        let (less, more) = (less.min(more), less.max(more));
        for (a, b) in [
            (UnitLoad::RunnableThreads(less), UnitLoad::RunnableThreads(more)),
            (UnitLoad::Backlog(less), UnitLoad::Backlog(more)),
        ] {
            let a = turnaround(&input(exec, 0.0, slots, a)).unwrap();
            let b = turnaround(&input(exec, 0.0, slots, b)).unwrap();
            prop_assert!(b.turnaround_ns >= a.turnaround_ns, "{a:?} {b:?}");
            prop_assert!(b.rate_per_s <= a.rate_per_s, "{a:?} {b:?}");
        }
    }
}
