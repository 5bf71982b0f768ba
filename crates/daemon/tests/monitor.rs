//! The monitor as a state machine, on virtual time: no sockets, no clocks.

use hetsched_core::ids::{ClientId, KindId, Ns, TaskId, UnitId};
use hetsched_core::policy::PolicyKind;
use hetsched_core::unit::{Capabilities, LinkCost, Unit, UnitClass};
use hetsched_daemon::agent::UnitSetup;
use hetsched_daemon::monitor::{Monitor, MonitorConfig, ProcessTable};
use hetsched_daemon::outbox::Outbox;
use hetsched_daemon::privilege::Peer;
use hetsched_daemon::store::{ProcessKey, SettingsStore};
use hetsched_protocol::{DaemonMsg, ErrorCode, Role, SettingsRequest, WireClass};
use std::collections::BTreeMap;

fn device(slots: u32) -> UnitSetup {
    UnitSetup {
        unit: Unit {
            id: UnitId(0),
            name: "gpu0".into(),
            kind: KindId(0),
            class: UnitClass::Gpu,
            caps: Capabilities::empty(),
            relative_speed: 8.0,
            coherent: false,
            copy_in: LinkCost::new(0, 1e10),
            copy_out: LinkCost::new(0, 1e10),
            dispatch_ns: 0,
            slots,
            busy_watts: 100.0,
            idle_watts: 10.0,
        },
        kind_name: "gpu".into(),
        policy: PolicyKind::Share,
        emulated: true,
    }
}

fn peer(pid: u32, uid: u32) -> Peer {
    Peer {
        pid,
        uid,
        gid: uid,
        groups: vec![],
        start_time: 1,
    }
}

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
    let (id, welcome) = m.hello(
        peer(pid, uid),
        format!("app{pid}"),
        Role::Application,
        SettingsRequest {
            class,
            priority: None,
        },
        0,
    );
    match welcome {
        DaemonMsg::Welcome { notice: None, .. } => id,
        other => panic!("{other:?}"),
    }
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
    let huge = m
        .submit_device(a, UnitId(0), TaskId(5), u64::MAX / 2, 0, 0, 0, &mut out)
        .unwrap_err();
    assert!(matches!(
        huge.0,
        ErrorCode::TooManyOutstanding | ErrorCode::InvalidSettings
    ));
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
    let st = m.status(
        hetsched_protocol::DaemonStatus {
            version: "t".into(),
            pid: 0,
            uptime_ns: 0,
            socket: String::new(),
        },
        0,
    );
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
