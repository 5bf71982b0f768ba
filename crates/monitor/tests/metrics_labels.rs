//! `/metrics` labels go by usage, root's and configured names first:
//! throwaway client names cannot push a root job's series into `(other)`.

use hetsched_core::ids::{ClientId, TaskId, UnitId};
use hetsched_monitor::metrics::ledger::OTHER;
use hetsched_monitor::metrics::snapshot::MetricsSnapshot;
use hetsched_monitor::monitor::{Monitor, MonitorConfig};
use hetsched_monitor::outbox::Outbox;
use hetsched_monitor::privilege::Peer;
use hetsched_monitor::store::SettingsStore;
use hetsched_protocol::{Role, SettingsRequest};

mod common;
use common::device;

fn app(m: &mut Monitor, pid: u32, uid: u32, name: &str) -> ClientId {
    let peer = Peer {
        pid,
        uid,
        gid: uid,
        groups: vec![],
        start_time: 1,
        ancestors: vec![],
    };
    m.hello(
        peer,
        name.into(),
        Role::Application,
        SettingsRequest::default(),
        0,
    )
    .0
}

/// One gate task, granted and completed at once.
fn run_one(m: &mut Monitor, c: ClientId, task: u64, now: u64) {
    let mut out = Outbox::default();
    m.request_dispatch(c, UnitId(0), TaskId(task), 1_000, now, &mut out)
        .unwrap();
    m.task_completed(c, UnitId(0), TaskId(task), now + 1, &mut out)
        .unwrap();
}

fn labels(m: &mut Monitor) -> Vec<String> {
    m.label_names_by_usage();
    MetricsSnapshot::of(m, None, 10, 10)
        .served
        .into_iter()
        .map(|s| s.client)
        .collect()
}

#[test]
fn throwaway_names_do_not_push_root_or_configured_names_into_other() {
    let mut m = Monitor::new(
        vec![device(1)],
        MonitorConfig {
            metrics_names: vec!["train".into()],
            ..MonitorConfig::default()
        },
        SettingsStore::default(),
    );
    // 300 names that connect and do nothing take no label.
    for i in 0..300 {
        app(&mut m, 1000 + i, 1000, &format!("throwaway-{i}"));
    }
    assert_eq!(labels(&mut m), vec![OTHER.to_string()]);
    // 300 more that each run one task take every label left by usage.
    for i in 0..300 {
        let c = app(&mut m, 2000 + i, 1000, &format!("busy-{i}"));
        run_one(&mut m, c, 1, 1);
    }
    let after_busy = labels(&mut m);
    assert_eq!(after_busy.len(), 256 + 1, "256 by usage and (other)");
    // Root's job and a configured name still get series of their own.
    let job = app(&mut m, 1, 0, "root-job");
    let train = app(&mut m, 2, 1000, "train");
    run_one(&mut m, job, 1, 2);
    run_one(&mut m, train, 1, 3);
    let now = labels(&mut m);
    assert!(now.contains(&"root-job".to_string()), "{now:?}");
    assert!(now.contains(&"train".to_string()), "{now:?}");
}
