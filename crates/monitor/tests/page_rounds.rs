//! The private pages a tick rewrites: quiet clients cost one view per
//! group and nothing when nothing moved; a client that acts gets its own
//! view again; every page still shows what the policy says of it.

use hetsched_core::ids::{ClientId, Ns, TaskId, UnitId};
use hetsched_core::view::ClientUnitView;
use hetsched_monitor::monitor::{Monitor, MonitorConfig};
use hetsched_monitor::outbox::Outbox;
use hetsched_monitor::page_rounds::{PageRounds, QUIET_AFTER, moved};
use hetsched_monitor::privilege::Peer;
use hetsched_monitor::store::SettingsStore;
use hetsched_protocol::{Role, SettingsRequest, WireClass};
use std::collections::BTreeMap;

mod common;
use common::device;

fn hello(m: &mut Monitor, rounds: &mut PageRounds, pid: u32, class: Option<WireClass>) -> ClientId {
    let peer = Peer {
        pid,
        uid: 0,
        gid: 0,
        groups: vec![],
        start_time: 1,
        ancestors: vec![],
    };
    let request = SettingsRequest {
        class,
        priority: None,
    };
    let (id, _) = m.hello(peer, format!("app{pid}"), Role::Application, request, 0);
    rounds.joined(id, m.client_views(id, 0));
    id
}

/// Every page, after applying `updates` to `pages`, shows what the
/// monitor says of its client now (within what [`moved`] ignores).
fn check_pages(
    m: &Monitor,
    pages: &mut BTreeMap<ClientId, Vec<ClientUnitView>>,
    updates: Vec<hetsched_monitor::page_rounds::PageUpdate>,
    now: Ns,
) {
    for u in updates {
        pages.insert(u.client, u.views);
    }
    for (id, shown) in pages.iter() {
        let truth = m.client_views(*id, now);
        assert!(
            !moved(shown, &truth),
            "client {}: page {shown:?}, truth {truth:?}",
            id.0
        );
    }
}

#[test]
fn quiet_clients_cost_one_view_and_nothing_when_nothing_moved() {
    let mut m = Monitor::new(
        vec![device(1)],
        MonitorConfig::default(),
        SettingsStore::default(),
    );
    let mut rounds = PageRounds::default();
    let mut pages = BTreeMap::new();
    let idle: Vec<ClientId> = (0..50)
        .map(|i| hello(&mut m, &mut rounds, 100 + i, None))
        .collect();
    for &id in &idle {
        pages.insert(id, m.client_views(id, 0));
    }
    // Just connected: busy, each computed, nothing moved yet.
    let first = rounds.round(&mut m, 1_000_000);
    assert!(first.is_empty(), "{first:?}");
    // Quiet: one group, and a round with nothing new writes nothing.
    let t = QUIET_AFTER + 10_000_000;
    let settled = rounds.round(&mut m, t);
    check_pages(&m, &mut pages, settled, t);
    assert_eq!((rounds.quiet_groups(), rounds.len()), (1, 50));
    assert!(rounds.round(&mut m, t + 10_000_000).is_empty());

    // A CUSTOM client starts using the unit: what every idle client would
    // get drops from the whole unit to what CUSTOM leaves, so all pages
    // are rewritten, from one view.
    let busy = hello(&mut m, &mut rounds, 7, Some(WireClass::Custom(60)));
    pages.insert(busy, m.client_views(busy, t));
    let mut out = Outbox::default();
    let t = t + 20_000_000;
    m.request_dispatch(busy, UnitId(0), TaskId(1), 5_000_000, t, &mut out)
        .unwrap();
    let updates = rounds.round(&mut m, t);
    let rewritten: Vec<ClientId> = updates.iter().map(|u| u.client).collect();
    for id in &idle {
        assert!(rewritten.contains(id), "client {} not rewritten", id.0);
    }
    check_pages(&m, &mut pages, updates, t);
    assert_eq!(rounds.quiet_groups(), 1);

    // An idle client that acts leaves the group and is computed alone.
    m.request_dispatch(idle[3], UnitId(0), TaskId(1), 5_000_000, t + 1, &mut out)
        .unwrap();
    let updates = rounds.round(&mut m, t + 2);
    check_pages(&m, &mut pages, updates, t + 2);
    assert_eq!(rounds.len(), 51);

    // Gone clients are forgotten.
    rounds.left(idle[0]);
    m.disconnect(idle[0], true, t + 3, &mut out);
    pages.remove(&idle[0]);
    assert_eq!(rounds.len(), 50);
    let updates = rounds.round(&mut m, t + 4);
    assert!(updates.iter().all(|u| u.client != idle[0]));
    check_pages(&m, &mut pages, updates, t + 4);
}

#[test]
fn small_changes_are_not_rewritten_and_large_ones_are() {
    let view = |wait_ns: f64, guaranteed: f64| ClientUnitView {
        guaranteed,
        wait_ns,
        current_utilisation: 0.0,
        throttled: false,
        max_utilisation: 1.0,
    };
    assert!(!moved(&[view(1e6, 0.5)], &[view(1.01e6, 0.501)]));
    assert!(moved(&[view(1e6, 0.5)], &[view(1.05e6, 0.5)]));
    assert!(moved(&[view(1e6, 0.5)], &[view(1e6, 0.51)]));
    assert!(moved(&[view(1e6, 0.5)], &[view(f64::INFINITY, 0.5)]));
    assert!(!moved(
        &[view(f64::INFINITY, 0.5)],
        &[view(f64::INFINITY, 0.5)]
    ));
    assert!(moved(&[], &[view(0.0, 0.0)]));
}
