//! The hold limit, on virtual time: a slot a client holds itself (a gate
//! task, a lease) past the unit's limit is taken back and charged, the
//! holder is told, and the unit serves the others.

use hetsched_core::ids::{ClientId, Ns, TaskId, UnitId};
use hetsched_core::unit::UnitClass;
use hetsched_monitor::monitor::{Monitor, MonitorConfig};
use hetsched_monitor::outbox::Outbox;
use hetsched_monitor::store::SettingsStore;
use hetsched_protocol::{DaemonMsg, ErrorCode, WireClass};
use std::collections::BTreeMap;

mod common;
use common::device;

const MS: Ns = 1_000_000;

fn monitor(cfg: MonitorConfig) -> Monitor {
    Monitor::new(vec![device(1)], cfg, SettingsStore::default())
}

fn app(m: &mut Monitor, pid: u32, uid: u32, class: WireClass) -> ClientId {
    common::application(m, pid, uid, class)
}

fn granted(out: &Outbox, c: ClientId, task: TaskId) -> bool {
    out.for_client(c).iter().any(|m| {
        matches!(m, DaemonMsg::Granted { task: t, .. } | DaemonMsg::LeaseGranted { task: t, .. } if *t == task)
    })
}

/// Advances the monitor to `now` as the timer would: at its deadline.
fn run_until(m: &mut Monitor, now: Ns, out: &mut Outbox) {
    while let Some(d) = m.next_deadline(0).filter(|&d| d <= now) {
        m.advance(d, out);
    }
    m.advance(now, out);
}

#[test]
fn a_gate_held_past_the_limit_is_taken_back_charged_and_the_next_client_served() {
    let mut m = monitor(MonitorConfig {
        max_hold_ns: BTreeMap::from([("gpu0".to_string(), 50 * MS)]),
        ..MonitorConfig::default()
    });
    let hog = app(&mut m, 1, 1000, WireClass::Normal(100));
    let root = app(&mut m, 2, 0, WireClass::Custom(90));
    let mut out = Outbox::default();
    m.request_dispatch(hog, UnitId(0), TaskId(1), MS, 0, &mut out)
        .unwrap();
    assert!(granted(&out, hog, TaskId(1)));
    m.request_dispatch(root, UnitId(0), TaskId(1), MS, MS, &mut out)
        .unwrap();
    assert!(!granted(&out, root, TaskId(1)), "one slot, held");
    // The timer wakes for the revocation.
    assert_eq!(m.next_deadline(MS), Some(50 * MS));
    run_until(&mut m, 49 * MS, &mut out);
    assert!(!granted(&out, root, TaskId(1)));
    run_until(&mut m, 50 * MS, &mut out);
    let told = out.refusals_to(hog);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].0, ErrorCode::WorkTooLong);
    assert!(
        told[0].1.contains("hold limit of 50 ms") && told[0].1.contains("gpu0"),
        "{}",
        told[0].1
    );
    assert!(granted(&out, root, TaskId(1)), "the slot went to the next");
    // Charged the whole hold.
    let used = m.agents()[0].use_of(hog);
    assert_eq!(
        (used.busy_ns, used.completed, used.outstanding),
        (50 * MS, 1, 0)
    );
    assert_eq!(m.agents()[0].revoked_total(), 1);
    // Completing it afterwards is refused as unknown; the unit goes on.
    let late = m
        .task_completed(hog, UnitId(0), TaskId(1), 51 * MS, &mut out)
        .unwrap_err();
    assert_eq!(late.0, ErrorCode::UnknownTask);
    m.task_completed(root, UnitId(0), TaskId(1), 52 * MS, &mut out)
        .unwrap();
    let mut out = Outbox::default();
    m.request_dispatch(hog, UnitId(0), TaskId(2), MS, 53 * MS, &mut out)
        .unwrap();
    assert!(granted(&out, hog, TaskId(2)), "the holder may ask again");
}

#[test]
fn a_lease_held_past_the_limit_is_taken_back_too() {
    let mut m = monitor(MonitorConfig {
        max_hold_ns: BTreeMap::from([("gpu0".to_string(), 20 * MS)]),
        lease_ns: 5 * MS,
        ..MonitorConfig::default()
    });
    let a = app(&mut m, 1, 1000, WireClass::Normal(100));
    let mut out = Outbox::default();
    m.request_lease(a, UnitId(0), TaskId(7), 0, &mut out)
        .unwrap();
    assert!(granted(&out, a, TaskId(7)));
    run_until(&mut m, 20 * MS, &mut out);
    let told = out.refusals_to(a);
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].1.contains("lease"), "{}", told[0].1);
    assert_eq!(m.agents()[0].use_of(a).outstanding, 0);
}

#[test]
fn devices_default_to_max_device_ns_and_cpu_units_to_no_limit() {
    let mut cpu = device(1);
    cpu.unit.class = UnitClass::Cpu;
    cpu.unit.name = "cpu".into();
    cpu.unit.id = UnitId(1);
    let m = Monitor::new(
        vec![device(1), cpu],
        MonitorConfig {
            max_device_ns: 3_000 * MS,
            ..MonitorConfig::default()
        },
        SettingsStore::default(),
    );
    assert_eq!(m.agents()[0].hold_limit_ns(), Some(3_000 * MS));
    assert_eq!(m.agents()[1].hold_limit_ns(), None);
}

#[test]
fn a_gate_completed_in_time_is_not_revoked() {
    let mut m = monitor(MonitorConfig {
        max_hold_ns: BTreeMap::from([("gpu0".to_string(), 50 * MS)]),
        ..MonitorConfig::default()
    });
    let a = app(&mut m, 1, 1000, WireClass::Normal(100));
    let mut out = Outbox::default();
    m.request_dispatch(a, UnitId(0), TaskId(1), MS, 0, &mut out)
        .unwrap();
    m.task_completed(a, UnitId(0), TaskId(1), 10 * MS, &mut out)
        .unwrap();
    assert_eq!(m.next_deadline(10 * MS), None);
    run_until(&mut m, 100 * MS, &mut out);
    assert!(out.refusals_to(a).is_empty());
}
