//! The monitor as a state machine, on virtual time: no sockets, no clocks.

use hetsched_core::ids::{ClientId, Ns, TaskId, UnitId};
use hetsched_core::policy::PolicyKind;
use hetsched_core::unit::UnitClass;
use hetsched_monitor::agent::UnitSetup;
use hetsched_monitor::monitor::{Monitor, MonitorConfig, ProcessTable};
use hetsched_monitor::outbox::Outbox;
use hetsched_monitor::store::{ProcessKey, SettingsStore};
use hetsched_protocol::{
    DaemonMsg, DaemonStatus, ErrorCode, Role, STATUS_PAGE_BYTES, SettingsRequest, StatusReport,
    WireClass,
};
use std::collections::BTreeMap;

mod common;
use common::{device, peer};

struct NoProcs;
impl ProcessTable for NoProcs {
    fn lookup(&self, _: u32) -> Option<(ProcessKey, u32)> {
        None
    }
}

fn monitor(slots: u32) -> Monitor {
    Monitor::new(
        vec![device(slots)],
        MonitorConfig::default(),
        SettingsStore::default(),
    )
}

fn app(m: &mut Monitor, pid: u32, uid: u32, class: Option<WireClass>) -> ClientId {
    common::welcomed(m, pid, uid, class)
}

fn daemon_status() -> DaemonStatus {
    DaemonStatus {
        version: "t".into(),
        pid: 0,
        uptime_ns: 0,
        socket: String::new(),
    }
}

/// The whole status report, which these tests' few clients fit in one page.
fn report(m: &Monitor) -> StatusReport {
    let page = m.status_page(daemon_status(), None, ClientId(0), u32::MAX, 0);
    assert_eq!(page.next_client, None);
    page.report
}

#[test]
fn custom_shares_split_a_saturated_device() {
    let mut m = monitor(1);
    let shares = [50, 30, 20];
    let ids: Vec<ClientId> = shares
        .iter()
        .enumerate()
        .map(|(i, &s)| app(&mut m, 100 + i as u32, 0, Some(WireClass::Custom(s))))
        .collect();
    let mut out = Outbox::default();
    let mut next_task = 0u64;
    let exec: Ns = 5_000_000;
    let mut submit = |m: &mut Monitor, c: ClientId, now: Ns, out: &mut Outbox| {
        next_task += 1;
        m.submit_device(c, UnitId(0), TaskId(next_task), exec, 0, 0, now, out)
            .unwrap();
    };
    let mut now: Ns = 0;
    for &c in &ids {
        submit(&mut m, c, now, &mut out);
        submit(&mut m, c, now, &mut out);
    }
    let mut used: BTreeMap<ClientId, u64> = BTreeMap::new();
    let mut next_tick = 10_000_000;
    while now < 5_000_000_000 {
        now = m.next_deadline(now).unwrap_or(next_tick).min(next_tick);
        if now >= next_tick {
            m.tick(now, &mut out);
            next_tick += 10_000_000;
        }
        m.advance(now, &mut out);
        let msgs: Vec<(ClientId, DaemonMsg)> = out.drain().collect();
        for (c, msg) in msgs {
            if let DaemonMsg::DeviceDone { ran_ns, .. } = msg {
                *used.entry(c).or_default() += ran_ns;
                submit(&mut m, c, now, &mut out);
            }
        }
    }
    let total: u64 = used.values().sum();
    assert!(
        total as f64 > 0.99 * now as f64,
        "device idle: {total} of {now}"
    );
    for (c, s) in ids.iter().zip(shares) {
        let pct = 100.0 * used[c] as f64 / total as f64;
        assert!(
            (pct - f64::from(s)).abs() <= 3.0,
            "custom:{s} got {pct:.1} %"
        );
    }
}

#[test]
fn leaving_client_releases_its_gate_and_the_next_waiter_is_granted() {
    let mut m = monitor(1);
    let a = app(&mut m, 1, 0, None);
    let b = app(&mut m, 2, 0, None);
    let mut out = Outbox::default();
    m.request_dispatch(a, UnitId(0), TaskId(1), 1_000_000, 0, &mut out)
        .unwrap();
    m.request_dispatch(b, UnitId(0), TaskId(1), 1_000_000, 10, &mut out)
        .unwrap();
    assert!(matches!(out.for_client(a)[..], [DaemonMsg::Granted { .. }]));
    assert!(matches!(out.for_client(b)[..], [DaemonMsg::Delayed { .. }]));
    out.drain();
    m.disconnect(a, true, 500, &mut out);
    assert!(matches!(
        out.for_client(b)[..],
        [DaemonMsg::Granted { waited_ns: 490, .. }]
    ));
    // A completion for a grant that does not exist is refused, not trusted.
    let err = m
        .task_completed(a, UnitId(0), TaskId(1), 600, &mut out)
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::BadSequence);
    let err = m
        .task_completed(b, UnitId(0), TaskId(99), 600, &mut out)
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::UnknownTask);
}

#[test]
fn limits_and_bad_requests_are_refused_with_codes() {
    let mut m = Monitor::new(
        vec![device(1)],
        MonitorConfig {
            max_outstanding: 2,
            ..MonitorConfig::default()
        },
        SettingsStore::default(),
    );
    let a = app(&mut m, 1, 0, None);
    let mut out = Outbox::default();
    m.request_dispatch(a, UnitId(0), TaskId(1), 1, 0, &mut out)
        .unwrap();
    let dup = m
        .request_dispatch(a, UnitId(0), TaskId(1), 1, 0, &mut out)
        .unwrap_err();
    assert_eq!(dup.0, ErrorCode::DuplicateTask);
    m.request_dispatch(a, UnitId(0), TaskId(2), 1, 0, &mut out)
        .unwrap();
    let over = m
        .request_dispatch(a, UnitId(0), TaskId(3), 1, 0, &mut out)
        .unwrap_err();
    assert_eq!(over.0, ErrorCode::TooManyOutstanding);
    let unknown = m
        .request_dispatch(a, UnitId(7), TaskId(4), 1, 0, &mut out)
        .unwrap_err();
    assert_eq!(unknown.0, ErrorCode::UnknownUnit);
    assert!(unknown.1.contains("unit 7"));
    // At the limit, the outstanding count is checked before anything else.
    let huge = m
        .submit_device(a, UnitId(0), TaskId(5), u64::MAX / 2, 0, 0, 0, &mut out)
        .unwrap_err();
    assert_eq!(huge.0, ErrorCode::TooManyOutstanding);
    // Below it, work longer than `max_device_ns` has its own code, and so
    // does work whose length is not even a number of seconds.
    let b = app(&mut m, 2, 0, None);
    let max_s = MonitorConfig::default().max_device_ns / 1_000_000_000;
    let long = m
        .submit_device(
            b,
            UnitId(0),
            TaskId(1),
            (max_s + 1) * 1_000_000_000,
            0,
            0,
            0,
            &mut out,
        )
        .unwrap_err();
    assert_eq!(long.0, ErrorCode::WorkTooLong);
    assert!(long.1.contains("exceeds"), "{}", long.1);
    let absurd = m
        .submit_device(b, UnitId(0), TaskId(2), 0, u64::MAX, 0, 0, &mut out)
        .unwrap_err();
    assert_eq!(absurd.0, ErrorCode::WorkTooLong);
    // Exactly at the limit is still accepted.
    m.submit_device(
        b,
        UnitId(0),
        TaskId(3),
        max_s * 1_000_000_000,
        0,
        0,
        0,
        &mut out,
    )
    .unwrap();
    let (obs, _) = m.hello(
        peer(9, 0),
        "obs".into(),
        Role::Observer,
        SettingsRequest::default(),
        0,
    );
    let err = m
        .request_dispatch(obs, UnitId(0), TaskId(1), 1, 0, &mut out)
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::NotAnApplication);
}

#[test]
fn unprivileged_hello_keeps_normal_and_settings_roll_back_as_a_whole() {
    let mut m = monitor(1);
    let (_, welcome) = m.hello(
        peer(5, 1000),
        "user".into(),
        Role::Application,
        SettingsRequest {
            class: Some(WireClass::Custom(30)),
            priority: None,
        },
        0,
    );
    match welcome {
        DaemonMsg::Welcome {
            settings, notice, ..
        } => {
            assert_eq!(settings[0].class, WireClass::Normal(10));
            assert!(notice.unwrap().contains("CUSTOM"));
        }
        other => panic!("{other:?}"),
    }
    let root = app(&mut m, 6, 0, Some(WireClass::Custom(70)));
    let err = m
        .set_settings(
            root,
            Some(5),
            None,
            SettingsRequest {
                class: Some(WireClass::Custom(40)),
                priority: None,
            },
            &NoProcs,
            0,
        )
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::InvalidSettings);
    assert!(err.1.contains("110"), "{}", err.1);
    // Nothing changed: the user's client is still NORMAL.
    let st = report(&m);
    let user = st.clients.iter().find(|c| c.pid == 5).unwrap();
    assert_eq!(user.units[0].settings.class, WireClass::Normal(10));
    // A pid that is not connected and does not exist is named.
    let err = m
        .set_settings(
            root,
            Some(424242),
            None,
            SettingsRequest {
                class: Some(WireClass::Background),
                priority: None,
            },
            &NoProcs,
            0,
        )
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::UnknownClient);
}

/// Two CPU kinds (4 and 12 cores) and a device.
fn cpus_and_device() -> Monitor {
    let cpu = |id: u16, name: &str, slots: u32| {
        let mut s = device(slots);
        s.unit.id = UnitId(id);
        s.unit.name = name.into();
        s.unit.class = UnitClass::Cpu;
        s.policy = PolicyKind::TimeShare;
        s.emulated = false;
        s
    };
    let mut gpu = device(1);
    gpu.unit.id = UnitId(2);
    Monitor::new(
        vec![cpu(0, "big", 4), cpu(1, "little", 12), gpu],
        MonitorConfig::default(),
        SettingsStore::default(),
    )
}

fn set_class(m: &mut Monitor, actor: ClientId, unit: Option<u16>, class: WireClass) {
    m.set_settings(
        actor,
        None,
        unit.map(UnitId),
        SettingsRequest {
            class: Some(class),
            priority: None,
        },
        &NoProcs,
        0,
    )
    .unwrap();
}

#[test]
fn cpu_classes_map_to_nice_levels_per_process() {
    let mut m = cpus_and_device();
    let default = app(&mut m, 10, 0, None);
    app(&mut m, 11, 0, Some(WireClass::Background));
    app(&mut m, 12, 0, Some(WireClass::Normal(5)));
    // Only the device is BACKGROUND: the CPU classes decide, not it.
    let gpu_only = app(&mut m, 13, 0, None);
    set_class(&mut m, gpu_only, Some(2), WireClass::Background);
    // BACKGROUND on the 12 little cores, default on the 4 big ones: the
    // weight of an average core is about a quarter of the default's.
    let mostly_bg = app(&mut m, 14, 0, None);
    set_class(&mut m, mostly_bg, Some(1), WireClass::Background);
    // Two connections of one process: the better standing counts.
    let first = app(&mut m, 15, 0, Some(WireClass::Background));
    let _second = app(&mut m, 15, 0, Some(WireClass::Normal(1)));
    // Observers have no threads to manage.
    m.hello(
        peer(16, 0),
        "obs".into(),
        Role::Observer,
        SettingsRequest::default(),
        0,
    );
    let t = m.cpu_nice_targets();
    assert_eq!(t.len(), 6, "{t:?}");
    assert_eq!(t[&10], 0);
    assert_eq!(t[&11], 19);
    assert_eq!(t[&12], 3);
    assert_eq!(t[&13], 0);
    assert_eq!(t[&14], 6);
    assert_eq!(t[&15], 10);
    // A class change shows at the next scan.
    set_class(&mut m, default, None, WireClass::Normal(2));
    set_class(&mut m, first, None, WireClass::Normal(10));
    let t = m.cpu_nice_targets();
    assert_eq!((t[&10], t[&15]), (7, 0));
    // No CPU units, nothing to map.
    let mut gpu_only_daemon = monitor(1);
    app(&mut gpu_only_daemon, 20, 0, Some(WireClass::Background));
    assert!(gpu_only_daemon.cpu_nice_targets().is_empty());
}

/// Clients in a configured domain's cgroup are its members on every
/// unit: they share its credits under a Pegasus policy, status names it,
/// and only root (or the admin group) changes its credits and ceiling.
#[test]
fn clients_of_a_container_join_its_domain() {
    use hetsched_monitor::domains::DomainSpec;
    let mut unit = device(1);
    unit.policy = PolicyKind::BackendAccC;
    let mut m = Monitor::new(
        vec![unit],
        MonitorConfig {
            domains: vec![DomainSpec {
                name: "web".into(),
                cgroup: "/docker/abc".into(),
                credits: 512,
                unit_credits: Default::default(),
                cpu_cap: None,
            }],
            ..MonitorConfig::default()
        },
        SettingsStore::default(),
    );
    let a = app(&mut m, 100, 1000, None);
    let b = app(&mut m, 101, 1000, None);
    let c = app(&mut m, 102, 1000, None);
    assert_eq!(m.join_domain(a, "0::/docker/abc/app\n", 0), Some(0));
    assert_eq!(m.join_domain(b, "4:cpu,cpuacct:/docker/abc\n", 0), Some(0));
    assert_eq!(m.join_domain(c, "0::/user.slice\n", 0), None);
    assert_eq!(m.domain_name(a), Some("web"));
    assert_eq!(m.domain_name(c), None);
    let list = m.domain_list();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].members, vec![(a, 100), (b, 101)]);
    let credits = |m: &Monitor, id: ClientId| {
        let r = report(m);
        let cs = r.clients.iter().find(|x| x.id == id).unwrap();
        cs.units[0].backend.unwrap().config.acc_credits
    };
    assert_eq!(credits(&m, a), 512);
    assert_eq!(credits(&m, b), 512);
    assert_eq!(credits(&m, c), 10);
    // Users may not change a domain; root may.
    let user = m
        .hello(
            peer(300, 1000),
            "cli".into(),
            Role::Observer,
            SettingsRequest::default(),
            0,
        )
        .0;
    let err = m.set_domain(user, "web", Some(64), None, 0).unwrap_err();
    assert_eq!(err.0, ErrorCode::NotPermitted);
    let root = m
        .hello(
            peer(301, 0),
            "cli".into(),
            Role::Observer,
            SettingsRequest::default(),
            0,
        )
        .0;
    let err = m.set_domain(root, "db", Some(64), None, 0).unwrap_err();
    assert_eq!(err.0, ErrorCode::UnknownDomain);
    assert!(err.1.contains("web"), "{}", err.1);
    let err = m.set_domain(root, "web", Some(0), None, 0).unwrap_err();
    assert_eq!(err.0, ErrorCode::InvalidSettings);
    // No CPU units here, so no ceiling.
    let err = m.set_domain(root, "web", None, Some(0.5), 0).unwrap_err();
    assert_eq!(err.0, ErrorCode::InvalidSettings);
    match m.set_domain(root, "web", Some(64), None, 0).unwrap() {
        DaemonMsg::Domains(d) => assert_eq!(d[0].credits, 64),
        other => panic!("{other:?}"),
    }
    assert_eq!(credits(&m, a), 64);
    assert_eq!(credits(&m, b), 64);
    // Per-unit credits from the config apply on their unit.
    let mut unit = device(1);
    unit.policy = PolicyKind::BackendRr;
    let mut m2 = Monitor::new(
        vec![unit],
        MonitorConfig {
            domains: vec![DomainSpec {
                name: "web".into(),
                cgroup: "/docker/abc".into(),
                credits: 512,
                unit_credits: [("gpu0".to_string(), 64)].into(),
                cpu_cap: None,
            }],
            ..MonitorConfig::default()
        },
        SettingsStore::default(),
    );
    let x = app(&mut m2, 100, 1000, None);
    m2.join_domain(x, "0::/docker/abc\n", 0);
    assert_eq!(credits(&m2, x), 64);
    // A member leaves; the other stays in the domain.
    let mut out = Outbox::default();
    m.disconnect(a, true, 0, &mut out);
    assert_eq!(m.domain_list()[0].members, vec![(b, 101)]);
    assert_eq!(credits(&m, b), 64);
}

/// Under `accelerator_binding`, a client's calls go to the accelerator it
/// is associated with only; its first call associates it if the unit has
/// room, and the client cap holds for everyone else.
#[test]
fn binding_associations_hold_calls_to_the_chosen_accelerator() {
    let mut second = device(1);
    second.unit.id = UnitId(1);
    second.unit.name = "gpu1".into();
    let mut m = Monitor::new(
        vec![device(1), second],
        MonitorConfig {
            accelerator_binding: true,
            ..MonitorConfig::default()
        },
        SettingsStore::default(),
    );
    let cap_one = hetsched_monitor::monitor::AcceleratorLimits {
        memory_bytes: 1 << 30,
        max_clients: 1,
    };
    m.set_accelerator_limits(&BTreeMap::from([
        ("gpu0".to_string(), cap_one),
        ("gpu1".to_string(), cap_one),
    ]));
    let a = app(&mut m, 10, 0, None);
    let b = app(&mut m, 11, 0, None);
    let c = app(&mut m, 12, 0, None);
    let mut out = Outbox::default();
    // a's first call associates it with gpu0.
    m.submit_device(a, UnitId(0), TaskId(1), 1000, 0, 0, 0, &mut out)
        .unwrap();
    let err = m
        .submit_device(a, UnitId(1), TaskId(2), 1000, 0, 0, 0, &mut out)
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::NotAssociated, "{}", err.1);
    assert!(
        err.1.contains("gpu0") && err.1.contains("gpu1"),
        "{}",
        err.1
    );
    // gpu0 is at its cap of one: b is refused there, and goes to gpu1.
    let err = m
        .request_dispatch(b, UnitId(0), TaskId(1), 1000, 0, &mut out)
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::NoAcceleratorFits, "{}", err.1);
    m.request_dispatch(b, UnitId(1), TaskId(1), 1000, 0, &mut out)
        .unwrap();
    // Both are full now; when a leaves, c gets gpu0.
    assert_eq!(
        m.submit_device(c, UnitId(0), TaskId(1), 1000, 0, 0, 0, &mut out)
            .unwrap_err()
            .0,
        ErrorCode::NoAcceleratorFits
    );
    m.disconnect(a, true, 1, &mut out);
    m.submit_device(c, UnitId(0), TaskId(1), 1000, 0, 0, 1, &mut out)
        .unwrap();
}

/// Without binding, associations are advisory and calls go anywhere.
#[test]
fn without_binding_an_association_does_not_limit_calls() {
    let mut second = device(1);
    second.unit.id = UnitId(1);
    second.unit.name = "gpu1".into();
    let mut m = Monitor::new(
        vec![device(1), second],
        MonitorConfig::default(),
        SettingsStore::default(),
    );
    let a = app(&mut m, 10, 0, None);
    let mut out = Outbox::default();
    m.select_accelerator(a, 0, None).unwrap();
    m.submit_device(a, UnitId(0), TaskId(1), 1000, 0, 0, 0, &mut out)
        .unwrap();
    m.submit_device(a, UnitId(1), TaskId(2), 1000, 0, 0, 0, &mut out)
        .unwrap();
}

/// Status pages stay inside [`STATUS_PAGE_BYTES`] in the worst case the
/// daemon lets a client make: names of 64 four-byte characters, many
/// units under a Pegasus policy (a backend state per client and unit),
/// every client associated with an accelerator and coordinated with
/// targets on every unit, and ids, pids and uids of the longest varints.
/// A walk by `next_client` lists every client that stays connected once,
/// while others leave and arrive between pages.
#[test]
fn status_pages_stay_under_the_budget_and_a_walk_lists_each_client_once() {
    use hetsched_protocol::{CoordinatedApp, CoordinationStatus};
    use std::collections::BTreeSet;
    const UNITS: u16 = 32;
    let units: Vec<UnitSetup> = (0..UNITS)
        .map(|i| {
            let mut u = device(1);
            u.unit.id = UnitId(i);
            u.unit.name = format!("gpu{i}");
            u.policy = PolicyKind::BackendAccC;
            u
        })
        .collect();
    let mut m = Monitor::new(units, MonitorConfig::default(), SettingsStore::default());
    let roomy = hetsched_monitor::monitor::AcceleratorLimits {
        memory_bytes: 1 << 40,
        max_clients: 1 << 20,
    };
    m.set_accelerator_limits(&(0..UNITS).map(|i| (format!("gpu{i}"), roomy)).collect());
    let name: String = "\u{1d11e}".repeat(64);
    assert_eq!(name.len(), 256);
    let connect = |m: &mut Monitor, n: u32| {
        let (id, _) = m.hello(
            peer(u32::MAX - n, u32::MAX - 1),
            name.clone(),
            Role::Application,
            SettingsRequest::default(),
            0,
        );
        m.select_accelerator(id, 1, None).unwrap();
        id
    };
    let connected: BTreeSet<ClientId> = (0..400).map(|n| connect(&mut m, n)).collect();
    // An observer is not listed.
    m.hello(
        peer(7, 0),
        "observer".into(),
        Role::Observer,
        SettingsRequest::default(),
        0,
    );
    let coordination = |connected: &BTreeSet<ClientId>| CoordinationStatus {
        solves: u64::MAX,
        floor: Some(1.0),
        floor_feasible: Some(true),
        apps: connected
            .iter()
            .map(|&client| CoordinatedApp {
                client,
                pid: u32::MAX,
                rate: Some(1.0),
                fractions: vec![1.0 / f64::from(UNITS); UNITS.into()],
                native: Some(1.0),
                predicted_relative: Some(1.0),
                over_reported: u64::MAX,
                coordinated: true,
            })
            .collect(),
        short_first: (0..UNITS).map(UnitId).collect(),
    };
    // Every page of a walk, as the daemon encodes it.
    let walk = |m: &mut Monitor, max: u32, churn: bool| {
        let mut connected = connected.clone();
        let mut stayed = connected.clone();
        let mut seen = Vec::new();
        let mut apps = Vec::new();
        let mut associated = Vec::new();
        let mut at = ClientId(0);
        let mut pages = 0;
        loop {
            let page = m.status_page(daemon_status(), Some(&coordination(&connected)), at, max, 0);
            let bytes = hetsched_protocol::encoded_len(&DaemonMsg::Status(page.clone()));
            assert!(bytes <= STATUS_PAGE_BYTES, "page of {bytes} bytes");
            assert!(page.report.clients.len() <= max as usize);
            assert_eq!(page.clients_total as usize, connected.len());
            assert_eq!(page.report.units.len(), usize::from(UNITS));
            pages += 1;
            seen.extend(page.report.clients.iter().map(|c| c.id));
            apps.extend(
                page.report
                    .coordination
                    .unwrap()
                    .apps
                    .iter()
                    .map(|a| a.client),
            );
            for u in &page.report.units {
                associated.extend(u.selection.as_ref().unwrap().clients.iter().copied());
            }
            let Some(next) = page.next_client else { break };
            assert!(next > at, "{next:?} after {at:?}");
            at = next;
            if churn {
                // One listed and one not yet listed leave; one arrives.
                let mut out = Outbox::default();
                for gone in [seen.last().copied(), connected.range(at..).nth(1).copied()]
                    .into_iter()
                    .flatten()
                {
                    m.disconnect(gone, true, 0, &mut out);
                    connected.remove(&gone);
                    stayed.remove(&gone);
                }
                connected.insert(connect(m, 10_000 + pages));
            }
        }
        let unique: BTreeSet<ClientId> = seen.iter().copied().collect();
        assert_eq!(unique.len(), seen.len(), "a client listed twice");
        assert!(
            unique.is_superset(&stayed),
            "a client that stayed was not listed"
        );
        if !churn {
            assert_eq!(seen, stayed.iter().copied().collect::<Vec<_>>());
            assert_eq!(apps, seen);
            associated.sort();
            assert_eq!(associated, seen);
        }
        (pages, connected)
    };
    let (pages, _) = walk(&mut m, u32::MAX, false);
    assert!(pages > 4, "400 such clients fit {pages} pages");
    let (small, _) = walk(&mut m, 7, false);
    assert_eq!(small, 400usize.div_ceil(7) as u32);
    let (_, after) = walk(&mut m, u32::MAX, true);
    assert!(after.len() < 400, "nobody left during the walk");
}

#[test]
fn a_forked_child_inherits_its_parents_demotion() {
    let mut m = monitor(1);
    app(&mut m, 40, 1000, None);
    let root = app(&mut m, 41, 0, None);
    // An administrator demotes the parent to BACKGROUND.
    m.set_settings(
        root,
        Some(40),
        None,
        SettingsRequest {
            class: Some(WireClass::Background),
            priority: None,
        },
        &NoProcs,
        0,
    )
    .unwrap();
    // Its child (and grandchild) connect with no settings of their own.
    for (pid, ancestors) in [(42, vec![40]), (43, vec![42, 40])] {
        let mut child = peer(pid, 1000);
        child.ancestors = ancestors
            .into_iter()
            .map(|pid| ProcessKey { pid, start_time: 1 })
            .collect();
        let (_, welcome) = m.hello(
            child,
            format!("child{pid}"),
            Role::Application,
            SettingsRequest::default(),
            0,
        );
        match welcome {
            DaemonMsg::Welcome {
                settings, notice, ..
            } => {
                assert_eq!(settings[0].class, WireClass::Background, "pid {pid}");
                assert!(notice.unwrap().contains("inherited"), "pid {pid}");
            }
            other => panic!("{other:?}"),
        }
    }
    // A process with no ancestor settings keeps the defaults.
    let mut stranger = peer(44, 1000);
    stranger.ancestors = vec![ProcessKey {
        pid: 1234,
        start_time: 1,
    }];
    let (_, welcome) = m.hello(
        stranger,
        "stranger".into(),
        Role::Application,
        SettingsRequest::default(),
        0,
    );
    match welcome {
        DaemonMsg::Welcome {
            settings, notice, ..
        } => {
            assert_eq!(settings[0].class, WireClass::Normal(10));
            assert_eq!(notice, None);
        }
        other => panic!("{other:?}"),
    }
}
