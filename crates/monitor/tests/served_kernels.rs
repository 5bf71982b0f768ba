//! Kernels the daemon runs itself on a served unit, as a state machine on
//! virtual time: calls go to the executor one at a time, failures and
//! refusals come back with their codes, a client that leaves mid-call is
//! not told, and a call past its slot is not retried.

use hetsched_core::ids::{ClientId, TaskId, UnitId};
use hetsched_core::policy::PolicyKind;
use hetsched_monitor::agent::UnitSetup;
use hetsched_monitor::monitor::{Monitor, MonitorConfig};
use hetsched_monitor::outbox::Outbox;
use hetsched_monitor::store::SettingsStore;
use hetsched_protocol::kernel_call::{self, Kernel, KernelCall};
use hetsched_protocol::{DaemonMsg, ErrorCode};

mod common;
use common::device;

fn app(m: &mut Monitor, pid: u32, uid: u32) -> ClientId {
    common::welcomed(m, pid, uid, None)
}

/// A unit the daemon runs real kernels on (one in-order queue).
fn served() -> UnitSetup {
    let mut s = device(1);
    s.unit.name = "served-opencl0".into();
    s.emulated = false;
    s.kernels = vec![Kernel::Histogram];
    s.policy = PolicyKind::Fifo;
    s
}

/// A data region the calls below are checked against.
fn region() -> std::sync::Arc<hetsched_views::data_region::DataRegion> {
    std::sync::Arc::new(hetsched_views::data_region::DataRegion::create(8192).unwrap())
}

fn served_monitor() -> Monitor {
    Monitor::new(
        vec![served()],
        MonitorConfig::default(),
        SettingsStore::default(),
    )
}

fn histogram_call(task: u64) -> KernelCall {
    kernel_call::decode(&[task, 1, 0, 4096, 4096, 1024, 0], 8192).unwrap()
}

#[test]
fn kernel_calls_go_to_the_executor_one_at_a_time_and_are_charged_what_they_held() {
    let mut m = served_monitor();
    let a = app(&mut m, 10, 0);
    let mut out = Outbox::default();
    m.submit_kernel(a, UnitId(0), histogram_call(1), region(), 0, &mut out)
        .unwrap();
    m.submit_kernel(a, UnitId(0), histogram_call(2), region(), 0, &mut out)
        .unwrap();
    // One slot: only the first call is started.
    let started: Vec<u64> = out
        .kernel_starts()
        .iter()
        .map(|s| s.call.call.task.0)
        .collect();
    assert_eq!(started, vec![1]);
    let _ = out.take_kernel_starts();
    m.kernel_done(
        UnitId(0),
        a,
        &histogram_call(1),
        2_000_000,
        Ok(()),
        3_000_000,
        &mut out,
    );
    let done: Vec<&DaemonMsg> = out.for_client(a);
    assert!(
        done.iter().any(|msg| matches!(
            msg,
            DaemonMsg::DeviceDone {
                task: TaskId(1),
                ran_ns: 3_000_000,
                waited_ns: 0,
                ..
            }
        )),
        "{done:?}"
    );
    // Finishing the first started the second.
    let started: Vec<u64> = out
        .kernel_starts()
        .iter()
        .map(|s| s.call.call.task.0)
        .collect();
    assert_eq!(started, vec![2]);
}

#[test]
fn a_failed_kernel_call_is_an_error_for_that_task_and_frees_the_unit() {
    let mut m = served_monitor();
    let a = app(&mut m, 10, 0);
    let b = app(&mut m, 11, 0);
    let mut out = Outbox::default();
    m.submit_kernel(a, UnitId(0), histogram_call(1), region(), 0, &mut out)
        .unwrap();
    m.submit_kernel(b, UnitId(0), histogram_call(1), region(), 0, &mut out)
        .unwrap();
    let _ = out.take_kernel_starts();
    m.kernel_done(
        UnitId(0),
        a,
        &histogram_call(1),
        5,
        Err("device lost".into()),
        10,
        &mut out,
    );
    assert!(out.for_client(a).iter().any(|msg| matches!(msg,
        DaemonMsg::Error { code: ErrorCode::BadKernelCall, task: Some(TaskId(1)), message }
            if message.contains("device lost"))));
    assert_eq!(out.kernel_starts().len(), 1, "b's call starts next");
    assert_eq!(out.kernel_starts()[0].client, b);
}

#[test]
fn kernels_a_unit_does_not_run_and_units_without_kernels_are_refused() {
    let mut m = Monitor::new(
        vec![served(), device(1)],
        MonitorConfig::default(),
        SettingsStore::default(),
    );
    let a = app(&mut m, 10, 0);
    let mut out = Outbox::default();
    let aes = kernel_call::decode(&[1, 2, 0, 64, 64, 64, 1024], 8192).unwrap();
    let err = m
        .submit_kernel(a, UnitId(0), aes, region(), 0, &mut out)
        .unwrap_err();
    assert_eq!(err.0, ErrorCode::BadKernelCall);
    assert!(err.1.contains("does not run aes128-ctr"), "{}", err.1);
    assert_eq!(
        m.check_kernel_ring(a, UnitId(1), 4096).unwrap_err().0,
        ErrorCode::NotEmulated
    );
    assert_eq!(
        m.check_call_ring(a, UnitId(0)).unwrap_err().0,
        ErrorCode::NotEmulated
    );
    for bad in [0, 12, (64 << 20) + 8] {
        assert_eq!(
            m.check_kernel_ring(a, UnitId(0), bad).unwrap_err().0,
            ErrorCode::BadKernelCall,
            "{bad}"
        );
    }
    assert!(m.check_kernel_ring(a, UnitId(0), 64 << 20).is_ok());
}

#[test]
fn a_client_that_leaves_mid_kernel_is_not_told_and_the_unit_frees_when_the_call_ends() {
    let mut m = served_monitor();
    let a = app(&mut m, 10, 0);
    let b = app(&mut m, 11, 0);
    let mut out = Outbox::default();
    m.submit_kernel(a, UnitId(0), histogram_call(1), region(), 0, &mut out)
        .unwrap();
    m.submit_kernel(a, UnitId(0), histogram_call(2), region(), 0, &mut out)
        .unwrap();
    m.submit_kernel(b, UnitId(0), histogram_call(1), region(), 0, &mut out)
        .unwrap();
    let _ = out.take_kernel_starts();
    m.disconnect(a, true, 5, &mut out);
    // a's running call cannot be stopped; nothing else starts meanwhile.
    assert!(out.kernel_starts().is_empty());
    let _ = out.drain().count();
    m.kernel_done(UnitId(0), a, &histogram_call(1), 9, Ok(()), 10, &mut out);
    assert!(out.for_client(a).is_empty(), "nobody to tell");
    // a's queued call went with it; b's runs next.
    let next: Vec<(ClientId, u64)> = out
        .kernel_starts()
        .iter()
        .map(|s| (s.client, s.call.call.task.0))
        .collect();
    assert_eq!(next, vec![(b, 1)]);
}

/// A kernel call running past its Pegasus slot holds the only slot: the
/// policy has a call waiting, but nothing can start before the running
/// call ends, so the monitor asks for no wake-up (a retry at `now` over
/// and over kept the timer thread spinning with the lock held).
#[test]
fn a_kernel_call_past_its_slot_asks_for_no_retry_while_it_holds_the_unit() {
    let mut setup = served();
    setup.policy = PolicyKind::BackendAccC;
    let mut m = Monitor::new(
        vec![setup],
        MonitorConfig::default(),
        SettingsStore::default(),
    );
    let a = app(&mut m, 10, 0);
    let b = app(&mut m, 11, 0);
    let mut out = Outbox::default();
    m.submit_kernel(a, UnitId(0), histogram_call(1), region(), 0, &mut out)
        .unwrap();
    m.submit_kernel(b, UnitId(0), histogram_call(1), region(), 0, &mut out)
        .unwrap();
    assert_eq!(out.take_kernel_starts().len(), 1);
    // Long after a's 10 ms slot ended, its call still runs.
    let now = 500_000_000;
    m.advance(now, &mut out);
    assert!(out.kernel_starts().is_empty());
    assert_eq!(m.next_deadline(now), None);
    // When it ends, b's call starts.
    m.kernel_done(UnitId(0), a, &histogram_call(1), now, Ok(()), now, &mut out);
    assert_eq!(out.kernel_starts().len(), 1);
    assert_eq!(out.kernel_starts()[0].client, b);
}
