//! Time-slice leases and intercepted programs, on the monitor as a state
//! machine: lengths by class, extension only while nobody waits, charging
//! from grant to release, release on disconnect, device-memory caps.

use hetsched_core::ids::{ClientId, TaskId, UnitId};
use hetsched_monitor::monitor::{DeviceMemoryCaps, Monitor, MonitorConfig};
use hetsched_monitor::outbox::Outbox;
use hetsched_monitor::store::SettingsStore;
use hetsched_protocol::{DaemonMsg, ErrorCode, InterceptApi, WireClass};

mod common;
use common::device;

const LEASE: u64 = 4_000_000;

fn monitor(caps: DeviceMemoryCaps) -> Monitor {
    Monitor::new(
        vec![device(1)],
        MonitorConfig {
            lease_ns: LEASE,
            device_memory: caps,
            ..MonitorConfig::default()
        },
        SettingsStore::default(),
    )
}

fn app(m: &mut Monitor, pid: u32, class: WireClass) -> ClientId {
    app_of(m, pid, 0, class)
}

fn app_of(m: &mut Monitor, pid: u32, uid: u32, class: WireClass) -> ClientId {
    common::application(m, pid, uid, class)
}

fn lease_granted(out: &Outbox, c: ClientId) -> Option<u64> {
    out.for_client(c).iter().find_map(|m| match m {
        DaemonMsg::LeaseGranted { lease_ns, .. } => Some(*lease_ns),
        _ => None,
    })
}

#[test]
fn leases_are_as_long_as_configured_and_a_quarter_for_background() {
    let mut m = monitor(DeviceMemoryCaps::default());
    let a = app(&mut m, 1, WireClass::Custom(60));
    let mut out = Outbox::default();
    m.request_lease(a, UnitId(0), TaskId(1), 0, &mut out)
        .unwrap();
    assert_eq!(lease_granted(&out, a), Some(LEASE));
    m.task_completed(a, UnitId(0), TaskId(1), 10, &mut out)
        .unwrap();
    let b = app(&mut m, 2, WireClass::Background);
    let mut out = Outbox::default();
    m.request_lease(b, UnitId(0), TaskId(1), 20, &mut out)
        .unwrap();
    assert_eq!(lease_granted(&out, b), Some(LEASE / 4));
}

fn lease_due(out: &Outbox, c: ClientId) -> Vec<TaskId> {
    out.for_client(c)
        .iter()
        .filter_map(|m| match m {
            DaemonMsg::LeaseDue { task, .. } => Some(*task),
            _ => None,
        })
        .collect()
}

#[test]
fn a_holder_is_told_once_when_someone_waits_and_charged_the_whole_lease() {
    let mut m = monitor(DeviceMemoryCaps::default());
    let a = app(&mut m, 1, WireClass::Custom(50));
    let b = app(&mut m, 2, WireClass::Custom(50));
    let c = app(&mut m, 3, WireClass::Custom(50));
    let mut out = Outbox::default();
    m.request_lease(a, UnitId(0), TaskId(7), 0, &mut out)
        .unwrap();
    assert!(lease_granted(&out, a).is_some());
    // Alone: nobody tells it anything, so it keeps the lease.
    assert!(lease_due(&out, a).is_empty());
    // Someone waits: told, once, whoever else comes.
    let mut out = Outbox::default();
    m.request_lease(b, UnitId(0), TaskId(1), LEASE + 1, &mut out)
        .unwrap();
    assert_eq!(lease_granted(&out, b), None);
    assert_eq!(lease_due(&out, a), vec![TaskId(7)]);
    let mut out = Outbox::default();
    m.request_lease(c, UnitId(0), TaskId(1), LEASE + 2, &mut out)
        .unwrap();
    assert!(lease_due(&out, a).is_empty());
    // Released after two lease lengths and a bit: charged all of it. The
    // next holder is told at once that the third waits.
    let mut out = Outbox::default();
    let released_at = 2 * LEASE + 500_000;
    m.task_completed(a, UnitId(0), TaskId(7), released_at, &mut out)
        .unwrap();
    let next = if lease_granted(&out, b).is_some() {
        b
    } else {
        c
    };
    assert!(lease_granted(&out, next).is_some());
    assert_eq!(lease_due(&out, next), vec![TaskId(1)]);
    let status = m.status_page(
        hetsched_protocol::DaemonStatus {
            version: String::new(),
            pid: 0,
            uptime_ns: 0,
            socket: String::new(),
        },
        None,
        ClientId(0),
        u32::MAX,
        released_at,
    );
    let busy = status
        .report
        .clients
        .iter()
        .find(|x| x.id == a)
        .map(|x| x.units[0].busy_ns_total);
    assert_eq!(busy, Some(released_at));
    // A lease that is not held cannot be ended again.
    let err = m
        .task_completed(a, UnitId(0), TaskId(7), released_at, &mut out)
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::UnknownTask);
}

#[test]
fn a_client_that_leaves_holding_a_lease_gives_it_to_the_next() {
    let mut m = monitor(DeviceMemoryCaps::default());
    let a = app(&mut m, 1, WireClass::Custom(50));
    let b = app(&mut m, 2, WireClass::Custom(50));
    let mut out = Outbox::default();
    m.request_lease(a, UnitId(0), TaskId(1), 0, &mut out)
        .unwrap();
    m.request_lease(b, UnitId(0), TaskId(1), 10, &mut out)
        .unwrap();
    assert_eq!(lease_granted(&out, b), None);
    let mut out = Outbox::default();
    m.disconnect(a, true, 100, &mut out);
    assert!(lease_granted(&out, b).is_some());
}

#[test]
fn device_memory_caps_are_the_smaller_of_the_asked_and_the_class_cap() {
    let caps = DeviceMemoryCaps {
        background: Some(1 << 30),
        ..DeviceMemoryCaps::default()
    };
    let mut m = monitor(caps);
    let bg = app(&mut m, 1, WireClass::Background);
    let custom = app(&mut m, 2, WireClass::Custom(10));
    // Reports before the declaration are refused.
    let err = m.report_device_memory(bg, UnitId(0), 10).unwrap_err();
    assert_eq!(err.0, ErrorCode::BadSequence);
    assert_eq!(
        m.declare_intercepted(bg, InterceptApi::OpenCl, Some(2 << 30)),
        Ok(Some(1 << 30))
    );
    assert_eq!(
        m.declare_intercepted(bg, InterceptApi::OpenCl, Some(1 << 20)),
        Ok(Some(1 << 20))
    );
    assert_eq!(
        m.declare_intercepted(custom, InterceptApi::Cuda, None),
        Ok(None)
    );
    let err = m
        .declare_intercepted(custom, InterceptApi::Cuda, Some(0))
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::InvalidSettings);
    m.report_device_memory(bg, UnitId(0), 4096).unwrap();
    let err = m.report_device_memory(bg, UnitId(9), 1).unwrap_err();
    assert_eq!(err.0, ErrorCode::UnknownUnit);
    let entry = m.client(bg).unwrap();
    let state = entry.intercept.as_ref().unwrap();
    assert_eq!(state.api, InterceptApi::OpenCl);
    assert_eq!(state.device_memory_bytes(), 4096);
}

#[test]
fn a_device_memory_cap_set_later_reaches_the_program_and_only_admins_raise_it() {
    let mut m = monitor(DeviceMemoryCaps::default());
    let root_tool = app(&mut m, 1, WireClass::Normal(10));
    let user_prog = app_of(&mut m, 2, 1000, WireClass::Normal(10));
    let user_tool = app_of(&mut m, 3, 1000, WireClass::Normal(10));
    let _plain = app_of(&mut m, 4, 1000, WireClass::Normal(10));
    m.declare_intercepted(user_prog, InterceptApi::OpenCl, Some(4 << 20))
        .unwrap();
    let mut out = Outbox::default();
    // Not intercepted, or no such process: refused by name.
    let err = m
        .set_device_memory(root_tool, 4, 1 << 20, &mut out)
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::UnknownClient);
    let err = m.set_device_memory(root_tool, 2, 0, &mut out).unwrap_err();
    assert_eq!(err.0, ErrorCode::InvalidSettings);
    // The user may lower its own program's cap, not raise it.
    let err = m
        .set_device_memory(user_tool, 2, 8 << 20, &mut out)
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::NotPermitted);
    let reply = m
        .set_device_memory(user_tool, 2, 2 << 20, &mut out)
        .unwrap();
    assert_eq!(
        reply,
        DaemonMsg::InterceptTerms {
            device_memory_limit: Some(2 << 20)
        }
    );
    // The program is told; root may raise it again.
    assert_eq!(
        out.for_client(user_prog),
        vec![&DaemonMsg::InterceptTerms {
            device_memory_limit: Some(2 << 20)
        }]
    );
    m.set_device_memory(root_tool, 2, 16 << 20, &mut out)
        .unwrap();
    let state = m.client(user_prog).unwrap().intercept.clone().unwrap();
    assert_eq!(state.device_memory_limit, Some(16 << 20));
}
