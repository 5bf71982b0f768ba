use super::*;
use hetsched_core::coordination::CoordinatorConfig;
use hetsched_core::ids::UnitId;
use hetsched_core::policy::ShareClass;
use hetsched_protocol::UnitDemand;

fn sources() -> Vec<Source> {
    vec![Source::Reported, Source::Measured, Source::Measured]
}

fn supply() -> Vec<UnitSupply> {
    vec![
        UnitSupply::processor_shared(2.0),
        UnitSupply::queue(1.0),
        UnitSupply::queue(1.0),
    ]
}

/// The coordinator's defaults, each pick run whole inside one update:
/// these tests follow what a tick gathers, not how long a pick takes.
fn whole_picks() -> CoordinatorConfig {
    CoordinatorConfig {
        pick_slice_events: 0,
        ..CoordinatorConfig::default()
    }
}

fn report(cpu_calls: u64, cpu_ns: f64) -> Option<DemandReport> {
    Some(DemandReport {
        units: vec![UnitDemand {
            unit: UnitId(0),
            calls: cpu_calls,
            exec_ns: cpu_ns,
        }],
        in_flight: 2.0,
        implemented: vec![UnitId(0), UnitId(1), UnitId(2)],
        native: None,
    })
}

/// Two apps, both measured on both devices and reporting CPU work;
/// returns the coordinator after a few ticks.
fn run_ticks(
    cpu_used: impl Fn(u32) -> Option<f64>,
    claim_factor: f64,
) -> (Coordinator, BTreeMap<ClientId, Tracked>) {
    run_ticks_with(cpu_used, claim_factor, None)
}

/// [`run_ticks`], plus `extra` (a third app) at every tick.
fn run_ticks_with(
    cpu_used: impl Fn(u32) -> Option<f64>,
    claim_factor: f64,
    extra: Option<&dyn Fn(u64) -> GatheredApp>,
) -> (Coordinator, BTreeMap<ClientId, Tracked>) {
    let mut c = Coordinator::new(whole_picks(), supply());
    let mut tracked = BTreeMap::new();
    for tick in 1..=5u64 {
        let t = tick as f64;
        let mut g = Gathered {
            // 100 ms per tick.
            at: tick * 100_000_000,
            apps: vec![
                GatheredApp {
                    id: ClientId(1),
                    pid: 100,
                    measured: vec![
                        (0, 0.0),
                        (tick * 10, t * 10.0 * 2e6),
                        (tick * 5, t * 5.0 * 6e6),
                    ],
                    report: report(tick * 4, t * 4.0 * 5e6 * claim_factor),
                    weight: Some(1.0),
                    trusted: false,
                },
                GatheredApp {
                    id: ClientId(2),
                    pid: 200,
                    measured: vec![
                        (0, 0.0),
                        (tick * 10, t * 10.0 * 1e6),
                        (tick * 5, t * 5.0 * 3e6),
                    ],
                    report: report(tick * 4, t * 4.0 * 20e6),
                    weight: Some(1.0),
                    trusted: false,
                },
            ],
        };
        if let Some(extra) = extra {
            g.apps.push(extra(tick));
        }
        step(
            &mut c,
            &mut tracked,
            &sources(),
            &supply(),
            8.0,
            g,
            &cpu_used,
        );
    }
    c.update(0);
    (c, tracked)
}

#[test]
fn a_declared_native_unit_is_kept_for_the_solve() {
    let mut c = Coordinator::new(whole_picks(), supply());
    let mut tracked = BTreeMap::new();
    let mut declared = report(4, 4.0 * 5e6);
    if let Some(r) = declared.as_mut() {
        r.native = Some(UnitId(1));
    }
    // One tick with one app that reports `report`, from a client
    // trusted or not.
    let cpu = cpu_used_honestly();
    let tick = |c: &mut Coordinator, report, trusted, tracked: &mut BTreeMap<ClientId, Tracked>| {
        let app = GatheredApp {
            id: ClientId(1),
            pid: 100,
            measured: vec![(0, 0.0), (10, 10.0 * 2e6), (5, 5.0 * 6e6)],
            report,
            weight: Some(1.0),
            trusted,
        };
        let g = Gathered {
            at: 100_000_000,
            apps: vec![app],
        };
        step(c, tracked, &sources(), &supply(), 8.0, g, &cpu);
    };
    tick(&mut c, declared.clone(), false, &mut tracked);
    assert_eq!(tracked[&ClientId(1)].native, Some(1));
    assert!(!tracked[&ClientId(1)].trusted);
    // Root's (or the admin group's) declaration is marked trusted for
    // the core.
    let untrusted = c.demand(ClientId(1)).map(|d| d.native_trusted);
    tick(&mut c, declared, true, &mut tracked);
    assert!(tracked[&ClientId(1)].trusted);
    let demand = c.demand(ClientId(1)).expect("recorded");
    assert_eq!((untrusted, demand.native_trusted), (Some(false), true));
    assert_eq!(demand.declared_native, Some(1));
    // A later report without one withdraws it.
    tick(&mut c, report(8, 8.0 * 5e6), true, &mut tracked);
    assert_eq!(tracked[&ClientId(1)].native, None);
}

#[test]
fn measured_and_reported_figures_give_every_app_targets() {
    let (c, tracked) = run_ticks(cpu_used_honestly(), 1.0);
    for id in [ClientId(1), ClientId(2)] {
        let t = c.target(id).expect("solved");
        assert_eq!(t.len(), 3);
        assert!((t.iter().sum::<f64>() - 1.0).abs() < 1e-6, "{t:?}");
        assert!(c.rate(id).unwrap() > 0.0);
    }
    assert_eq!(c.floor().map(|f| f.1), Some(true));
    assert!(
        tracked
            .values()
            .all(|t| t.meter.caught_over_reporting() == 0)
    );
    let cpu = tracked[&ClientId(1)].meter.demand().exec_ns[0].unwrap();
    assert!((cpu - 5e6).abs() < 1.0, "{cpu}");
}

/// Cumulative CPU time of each process, `app1` and `app2` ns more
/// at every read (one read per tick): a clock of its own per test.
fn cpu_clock(app1: f64, app2: f64) -> impl Fn(u32) -> Option<f64> {
    let reads = std::cell::Cell::new([0u64; 2]);
    move |pid| {
        let mut n = reads.get();
        let i = usize::from(pid != 100);
        n[i] += 1;
        reads.set(n);
        Some(n[i] as f64 * if pid == 100 { app1 } else { app2 })
    }
}

/// What the apps of `run_ticks` do on the CPU: 20 ms (app 1) and 80 ms
/// (app 2) per tick, all of it in their CPU tasks.
fn cpu_used_honestly() -> impl Fn(u32) -> Option<f64> {
    cpu_clock(20e6, 80e6)
}

#[test]
fn the_apps_host_side_is_taken_out_of_the_cpu_supply() {
    let (honest, tracked) = run_ticks(cpu_used_honestly(), 1.0);
    assert!(tracked.values().all(|t| t.host.slots() == 0.0));
    assert_eq!(honest.supply()[0].slots, 2.0);
    // Each process uses twice that: 0.2 + 0.8 of a core beyond the CPU tasks, smoothed over four
    // report intervals (1 − 0.7⁴ of it): about 0.76 core.
    let (busy, tracked) = run_ticks(cpu_clock(40e6, 160e6), 1.0);
    let host: f64 = tracked.values().map(|t| t.host.slots()).sum();
    assert!((host - 0.76).abs() < 0.01, "{host}");
    let cpu = busy.supply()[0].slots;
    assert!((cpu - (2.0 - host)).abs() < 1e-9, "{cpu}");
    // The devices keep their slots.
    assert_eq!(busy.supply()[1].slots, 1.0);
    assert!(
        tracked
            .values()
            .all(|t| t.meter.caught_over_reporting() == 0)
    );
}

#[test]
fn an_app_claiming_more_cpu_time_than_it_used_is_held_to_what_it_used() {
    // App 1 claims 4x the CPU time its process consumed.
    let (_, tracked) = run_ticks(cpu_used_honestly(), 4.0);
    let liar = &tracked[&ClientId(1)].meter;
    assert!(
        liar.caught_over_reporting() >= 3,
        "{}",
        liar.caught_over_reporting()
    );
    // Every interval was capped to the CPU time the process used.
    let cpu = liar.demand().exec_ns[0].unwrap();
    assert!((cpu - 5e6).abs() < 1.0, "{cpu}");
    assert_eq!(tracked[&ClientId(2)].meter.caught_over_reporting(), 0);
}

fn standing(class: ShareClass, priority: i32) -> ClientSettings {
    ClientSettings { class, priority }
}

#[test]
fn every_class_takes_part_at_the_default_priority() {
    let default = ClientSettings::default().priority;
    let custom = vec![standing(ShareClass::Custom { shares: 70 }, default); 2];
    let background = vec![standing(ShareClass::Background, default); 2];
    let mixed = vec![
        standing(ShareClass::Normal { shares: 30 }, default),
        standing(ShareClass::Custom { shares: 20 }, default),
    ];
    let urgent = vec![standing(ShareClass::Normal { shares: 10 }, default + 1); 2];
    let w = coordination_weights(&[&custom, &background, &mixed, &urgent]);
    assert!(w[0].is_some() && w[1].is_some() && w[2].is_some(), "{w:?}");
    // A priority is a strict order its agents keep.
    assert_eq!(w[3], None);
}

#[test]
fn only_share_policy_units_split_by_entitlement() {
    assert!(splits_by_entitlement(PolicyKind::Share));
    for p in [
        PolicyKind::Fifo,
        PolicyKind::ShortFirst,
        PolicyKind::TimeShare,
        PolicyKind::Priority,
        PolicyKind::BackendAccC,
    ] {
        assert!(!splits_by_entitlement(p), "{p:?}");
    }
}

#[test]
fn an_app_with_a_priority_is_left_out_and_its_use_reserved() {
    let (plain, _) = run_ticks(cpu_used_honestly(), 1.0);
    // An app with a priority (no weight) keeps unit 1 busy 90 % of the
    // time.
    let custom = |tick: u64| GatheredApp {
        id: ClientId(3),
        pid: 300,
        measured: vec![(0, 0.0), (tick * 9, tick as f64 * 90e6), (0, 0.0)],
        report: report(0, 0.0),
        weight: None,
        trusted: false,
    };
    let (c, tracked) = run_ticks_with(cpu_used_honestly(), 1.0, Some(&custom));
    assert!(c.target(ClientId(3)).is_none());
    assert!(tracked[&ClientId(3)].usage.slots()[1] > 0.5);
    let on_unit_1 = |c: &Coordinator| {
        [ClientId(1), ClientId(2)]
            .iter()
            .map(|id| c.target(*id).unwrap()[1] * c.rate(*id).unwrap())
            .sum::<f64>()
    };
    // The coordinated apps send fewer calls per second to the unit
    // the prioritised app holds.
    assert!(
        on_unit_1(&c) < on_unit_1(&plain),
        "{} vs {}",
        on_unit_1(&c),
        on_unit_1(&plain)
    );
}

/// Two apps alike in every figure: the one with three times the
/// NORMAL shares is given the larger rate.
#[test]
fn an_app_with_more_shares_gets_more_of_what_is_above_the_floor() {
    let mut c = Coordinator::new(whole_picks(), supply());
    let mut tracked = BTreeMap::new();
    for tick in 1..=5u64 {
        let t = tick as f64;
        let app = |id: u32, weight: f64| GatheredApp {
            id: ClientId(id),
            pid: 100 * id,
            measured: vec![
                (0, 0.0),
                (tick * 10, t * 10.0 * 1e6),
                (tick * 5, t * 5.0 * 3e6),
            ],
            report: report(tick * 4, t * 4.0 * 20e6),
            weight: Some(weight),
            trusted: false,
        };
        let g = Gathered {
            at: tick * 100_000_000,
            apps: vec![app(1, 1.0), app(2, 3.0)],
        };
        step(&mut c, &mut tracked, &sources(), &supply(), 8.0, g, |_| {
            None
        });
    }
    c.update(0);
    let (light, heavy) = (c.rate(ClientId(1)).unwrap(), c.rate(ClientId(2)).unwrap());
    assert!(
        heavy > 1.2 * light,
        "weight 3: {heavy} calls/s, weight 1: {light}"
    );
    assert_eq!(c.floor().map(|f| f.1), Some(true));
}

#[test]
fn an_app_that_never_reports_is_not_coordinated() {
    let silent = |tick: u64| GatheredApp {
        id: ClientId(3),
        pid: 300,
        measured: vec![(0, 0.0), (tick, tick as f64 * 1e6), (0, 0.0)],
        report: None,
        weight: Some(1.0),
        trusted: false,
    };
    let (c, tracked) = run_ticks_with(cpu_used_honestly(), 1.0, Some(&silent));
    assert!(c.target(ClientId(3)).is_none());
    assert!(!tracked[&ClientId(3)].follows);
    assert!(c.target(ClientId(1)).is_some());
}

#[test]
fn an_app_that_leaves_loses_its_targets() {
    let (mut c, _) = run_ticks(|_| None, 1.0);
    let mut tracked = BTreeMap::new();
    // Rebuild tracking with only app 2 present.
    let g = Gathered {
        at: 1_000_000_000,
        apps: vec![GatheredApp {
            id: ClientId(2),
            pid: 200,
            measured: vec![(0, 0.0), (10, 10e6), (5, 15e6)],
            report: report(40, 40.0 * 20e6),
            weight: Some(1.0),
            trusted: false,
        }],
    };
    // App 1 is tracked, then gone.
    tracked.insert(ClientId(1), Tracked::new(&sources()));
    step(&mut c, &mut tracked, &sources(), &supply(), 8.0, g, |_| {
        None
    });
    c.update(1);
    assert!(c.target(ClientId(1)).is_none());
    assert!(c.target(ClientId(2)).is_some());
    assert!(!tracked.contains_key(&ClientId(1)));
}
