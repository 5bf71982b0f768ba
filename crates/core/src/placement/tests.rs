//! The fast placer against its oracle (`oracle.rs`, the straightforward
//! formula): over random machines, views, models, tasks and observed
//! turnarounds, both take the same decisions, bit for bit, and end in the
//! same state. The simulator's reports depend on it.

use super::*;
use crate::ids::KindId;
use crate::task_model::FnModel;
use crate::unit::LinkCost;
use proptest::prelude::*;

/// Numbers as the placer may meet them: ordinary ones, zeros, and the
/// extremes where floating point loses its manners.
fn awkward(ordinary: std::ops::Range<f64>) -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => ordinary,
        1 => Just(0.0),
        1 => prop_oneof![Just(1e-300), Just(1e300), Just(f64::MAX), Just(f64::INFINITY)],
    ]
}

fn link() -> impl Strategy<Value = LinkCost> {
    (
        prop_oneof![4 => 0u64..2_000_000, 1 => Just(u64::MAX), 1 => Just(0)],
        awkward(0.0..10.0),
    )
        .prop_map(|(latency_ns, ns_per_byte)| LinkCost {
            latency_ns,
            ns_per_byte,
        })
}

fn unit(kinds: u16) -> impl Strategy<Value = Unit> {
    (
        0..kinds,
        any::<bool>(),
        link(),
        link(),
        prop_oneof![4 => 0u64..100_000, 1 => Just(u64::MAX)],
        1u32..16,
        awkward(0.0..300.0),
    )
        .prop_map(
            |(kind, coherent, copy_in, copy_out, dispatch_ns, slots, watts)| Unit {
                copy_out,
                dispatch_ns,
                slots,
                busy_watts: watts,
                ..Unit::basic(UnitId(0), KindId(kind), coherent, copy_in)
            },
        )
}

fn view() -> impl Strategy<Value = ClientUnitView> {
    (
        prop_oneof![3 => Just(0.0), 3 => 0.0..=1.0f64, 1 => Just(f64::INFINITY), 1 => Just(-0.5)],
        prop_oneof![
            4 => 0.0..1e8f64,
            1 => Just(f64::INFINITY),
            1 => Just(f64::NAN),
            1 => Just(-1e3),
            1 => Just(1e307)
        ],
        prop_oneof![3 => Just(1.0), 2 => 0.0..=1.0f64, 1 => Just(0.0), 1 => Just(2.0)],
        any::<bool>(),
    )
        .prop_map(
            |(guaranteed, wait_ns, max_utilisation, throttled)| ClientUnitView {
                guaranteed,
                wait_ns,
                max_utilisation,
                throttled,
                current_utilisation: 0.5,
            },
        )
}

/// Per kind: `None` (never run there) or `fixed + per_byte × bytes`.
fn kind_times(kinds: usize) -> impl Strategy<Value = Vec<Option<(f64, f64)>>> {
    proptest::collection::vec(
        prop_oneof![
            1 => Just(None),
            6 => (awkward(0.0..1e7), awkward(0.0..100.0)).prop_map(Some),
        ],
        kinds,
    )
}

fn goal() -> impl Strategy<Value = Goal> {
    prop_oneof![
        3 => Just(Goal::MinLatency),
        1 => Just(Goal::MaxThroughput),
        1 => Just(Goal::MinEnergy),
        1 => awkward(0.0..1e8).prop_map(|deadline_ns| Goal::Deadline { deadline_ns }),
    ]
}

/// One decision and what the task then took, relative to the prediction.
#[derive(Clone, Debug)]
struct Step {
    task: TaskRequest,
    actual_over_predicted: f64,
}

fn step(units: usize) -> impl Strategy<Value = Step> {
    let at = units as u16;
    (
        prop_oneof![4 => 0u64..1 << 30, 1 => Just(0), 1 => Just(u64::MAX)],
        prop_oneof![3 => 0u64..1 << 30, 1 => Just(0)],
        prop_oneof![2 => Just(DataLocation::Host), 1 => (0..at).prop_map(|u| DataLocation::Unit(UnitId(u)))],
        any::<bool>(),
        prop_oneof![6 => Just(u64::MAX), 3 => any::<u64>(), 1 => Just(0)],
        goal(),
        prop_oneof![2 => Just(1.0), 3 => 0.05..20.0f64],
    )
        .prop_map(
            |(bytes, out_bytes, data_at, persistent, mask, goal, actual_over_predicted)| Step {
                task: TaskRequest {
                    bytes,
                    out_bytes,
                    data_at,
                    persistent,
                    implemented: ImplSet(mask),
                    goal,
                },
                actual_over_predicted,
            },
        )
}

fn config() -> impl Strategy<Value = PlacementConfig> {
    (
        proptest::option::of(1.0..2.0f64),
        0.0..16.0f64,
        proptest::option::of(0.5..4.0f64),
        0u32..40,
        proptest::option::of(0.0..2.0f64),
        0u32..8,
    )
        .prop_map(
            |(
                speedup_threshold,
                amortise_tasks,
                aggregation_factor,
                max_group,
                damping_tolerance,
                damping_decisions,
            )| {
                PlacementConfig {
                    speedup_threshold,
                    amortise_tasks,
                    aggregation_factor,
                    max_group,
                    damping_tolerance,
                    damping_decisions,
                }
            },
        )
}

#[derive(Clone, Debug)]
struct Case {
    units: Vec<Unit>,
    views: Vec<ClientUnitView>,
    times: Vec<Option<(f64, f64)>>,
    config: PlacementConfig,
    steps: Vec<Step>,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=10, 1u16..=6).prop_flat_map(|(n, kinds)| {
        (
            proptest::collection::vec(unit(kinds), n),
            proptest::collection::vec(view(), n),
            kind_times(kinds as usize),
            config(),
            proptest::collection::vec(step(n), 1..24),
        )
            .prop_map(|(mut units, views, times, config, steps)| {
                for (i, u) in units.iter_mut().enumerate() {
                    u.id = UnitId(i as u16);
                }
                Case {
                    units,
                    views,
                    times,
                    config,
                    steps,
                }
            })
    })
}

/// Decisions compare bit for bit (NaN included).
fn same(a: &Result<Decision, PlacementError>, b: &Result<Decision, PlacementError>) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => {
            a.unit == b.unit
                && a.reason == b.reason
                && a.predicted_ns.to_bits() == b.predicted_ns.to_bits()
        }
        (a, b) => a == b,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_fast_placer_decides_as_the_formula_does(case in case()) {
        let times = case.times.clone();
        let model = FnModel::new(move |k: KindId, bytes: u64| {
            let (fixed, per_byte) = (*times.get(k.index())?)?;
            Some(fixed + per_byte * bytes as f64)
        });
        let mut fast = Placer::new(case.config, case.units.len());
        let mut oracle = fast.clone();
        for step in &case.steps {
            let got = fast.decide(&case.units, &case.views, &model, &step.task);
            let want = oracle.reference_decide(&case.units, &case.views, &model, &step.task);
            prop_assert!(same(&got, &want), "{:?}: {got:?} vs {want:?}", step.task);
            if let Ok(d) = got {
                let actual = d.predicted_ns * step.actual_over_predicted;
                fast.observe(d.unit, d.predicted_ns, actual);
                oracle.observe(d.unit, d.predicted_ns, actual);
            }
        }
        prop_assert_eq!(format!("{fast:?}"), format!("{oracle:?}"));
    }

    #[test]
    fn a_prediction_is_the_formulas(case in case()) {
        let times = case.times.clone();
        let model = FnModel::new(move |k: KindId, bytes: u64| {
            let (fixed, per_byte) = (*times.get(k.index())?)?;
            Some(fixed + per_byte * bytes as f64)
        });
        for step in &case.steps {
            for (unit, view) in case.units.iter().zip(&case.views) {
                let got = predict(&case.units, unit, view, &model, &step.task);
                let want = oracle::reference_predict(&case.units, unit, view, &model, &step.task);
                let bits = |p: Option<Prediction>| p.map(|p| {
                    [p.exec_ns, p.copy_ns, p.dispatch_ns, p.stretched_ns, p.turnaround_ns].map(f64::to_bits)
                });
                prop_assert_eq!(bits(got), bits(want), "{:?} {:?}", unit, view);
            }
        }
    }
}

/// The built-in model goes through the same scan as an application's.
#[test]
fn a_task_model_decides_as_the_formula_does() {
    let units: Vec<Unit> = (0..8u16)
        .map(|i| Unit {
            dispatch_ns: 20_000,
            ..Unit::basic(UnitId(i), KindId(i), i == 0, LinkCost::new(10_000, 6e9))
        })
        .collect();
    let mut model = crate::task_model::TaskModel::new("t", 8);
    let views: Vec<ClientUnitView> = (0..8)
        .map(|i| ClientUnitView {
            wait_ns: 1e5 * f64::from(i),
            guaranteed: 0.1,
            ..ClientUnitView::default()
        })
        .collect();
    let mut fast = Placer::new(PlacementConfig::default(), 8);
    let mut oracle = fast.clone();
    for round in 0..200u64 {
        let task = TaskRequest {
            bytes: 1 << (10 + round % 12),
            out_bytes: 1 << 16,
            data_at: DataLocation::Host,
            persistent: round % 3 == 0,
            implemented: ImplSet(0xff),
            goal: Goal::MinLatency,
        };
        let got = fast.decide(&units, &views, &model, &task);
        let want = oracle.reference_decide(&units, &views, &model, &task);
        assert!(same(&got, &want), "{round}: {got:?} vs {want:?}");
        let d = got.unwrap();
        let kind = units[d.unit.index()].kind;
        let actual = (task.bytes as f64) * (1.0 + kind.0 as f64) + (round % 7) as f64 * 1e5;
        use crate::task_model::PerformanceModel as _;
        model.observe(kind, task.bytes, actual);
        fast.observe(d.unit, d.predicted_ns, actual);
        oracle.observe(d.unit, d.predicted_ns, actual);
    }
}
