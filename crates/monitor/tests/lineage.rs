//! Settings follow the process tree: a descendant of a process with
//! stored settings, recorded by a `/proc` scan while its parent link still
//! showed it, keeps them after it is reparented to init and connects.

use hetsched_core::policy::{ClientSettings, ShareClass};
use hetsched_monitor::monitor::{Monitor, MonitorConfig};
use hetsched_monitor::privilege::Peer;
use hetsched_monitor::procfs::ProcEntry;
use hetsched_monitor::store::{ProcessKey, SettingsStore};
use hetsched_protocol::{Role, SettingsRequest};

mod common;
use common::device;

const BACKGROUND: ClientSettings = ClientSettings {
    class: ShareClass::Background,
    priority: 0,
};

fn key(pid: u32, start_time: u64) -> ProcessKey {
    ProcessKey { pid, start_time }
}

/// Connects process `k` (ancestry as `/proc` shows it now: none, for an
/// orphan) and returns its class on the unit.
fn class_at_hello(m: &mut Monitor, k: ProcessKey, ancestors: Vec<ProcessKey>) -> ShareClass {
    let peer = Peer {
        pid: k.pid,
        uid: 1000,
        gid: 1000,
        groups: vec![],
        start_time: k.start_time,
        ancestors,
    };
    let (id, _) = m.hello(
        peer,
        "child".into(),
        Role::Application,
        SettingsRequest::default(),
        0,
    );
    m.client(id).unwrap().settings[0].class
}

#[test]
fn an_orphaned_descendant_recorded_by_a_scan_keeps_the_demotion() {
    let root = key(100, 10);
    let mut store = SettingsStore::default();
    store.set(root, "demoted", "gpu0", BACKGROUND);
    let mut m = Monitor::new(vec![device(1)], MonitorConfig::default(), store);
    // The scan while the tree is whole: root → child → grandchild, and an
    // unrelated process.
    let scan = [
        ProcEntry {
            key: root,
            parent: 1,
        },
        ProcEntry {
            key: key(101, 11),
            parent: 100,
        },
        ProcEntry {
            key: key(102, 12),
            parent: 101,
        },
        ProcEntry {
            key: key(300, 5),
            parent: 1,
        },
    ];
    assert_eq!(m.adopt_descendants(&scan), 2);
    assert_eq!(m.adopt_descendants(&scan), 0, "recorded once");
    let mut stored = m.stored_processes();
    stored.sort();
    assert_eq!(stored, vec![root, key(101, 11), key(102, 12)]);
    // The root and the child exit; the grandchild, reparented to init,
    // connects with no ancestry at all.
    m.forget_processes(&[root, key(101, 11)].into());
    assert_eq!(
        class_at_hello(&mut m, key(102, 12), vec![]),
        ShareClass::Background
    );
    // The unrelated process, and a later process that reused the
    // grandchild's pid, are not demoted.
    assert_ne!(
        class_at_hello(&mut m, key(300, 5), vec![]),
        ShareClass::Background
    );
    assert_ne!(
        class_at_hello(&mut m, key(102, 99), vec![]),
        ShareClass::Background
    );
}

#[test]
fn settings_of_its_own_are_not_replaced_by_an_ancestors() {
    let root = key(100, 10);
    let child = key(101, 11);
    let mut store = SettingsStore::default();
    store.set(root, "demoted", "gpu0", BACKGROUND);
    store.set(
        child,
        "own",
        "gpu0",
        ClientSettings {
            class: ShareClass::Normal { shares: 5 },
            priority: 0,
        },
    );
    let mut m = Monitor::new(vec![device(1)], MonitorConfig::default(), store);
    let scan = [
        ProcEntry {
            key: root,
            parent: 1,
        },
        ProcEntry {
            key: child,
            parent: 100,
        },
    ];
    assert_eq!(m.adopt_descendants(&scan), 0);
    assert_eq!(
        class_at_hello(&mut m, child, vec![root]),
        ShareClass::Normal { shares: 5 }
    );
}

#[test]
fn a_copy_follows_its_ancestors_later_changes_and_an_orphans_children_inherit() {
    let root = key(100, 10);
    let mut store = SettingsStore::default();
    store.set(root, "demoted", "gpu0", BACKGROUND);
    let mut m = Monitor::new(vec![device(1)], MonitorConfig::default(), store);
    let child = ProcEntry {
        key: key(101, 11),
        parent: 100,
    };
    let scan = [
        ProcEntry {
            key: root,
            parent: 1,
        },
        child,
    ];
    assert_eq!(m.adopt_descendants(&scan), 1);
    // Root is given other settings (the store as `SetSettings` leaves it):
    // the next scan brings the child's copy up to date.
    let normal5 = ClientSettings {
        class: ShareClass::Normal { shares: 5 },
        priority: 0,
    };
    let mut store = SettingsStore::default();
    store.set(root, "demoted", "gpu0", normal5);
    store.adopt(root, child.key);
    store.set(root, "demoted", "gpu0", BACKGROUND);
    assert!(store.adopt(root, child.key), "the copy is refreshed");
    assert_eq!(store.settings_of(child.key).unwrap()["gpu0"], BACKGROUND);
    assert!(!store.adopt(root, child.key), "already up to date");
    // Settings set for the child itself are its own from then on.
    store.set(child.key, "own", "gpu0", normal5);
    assert!(!store.adopt(root, child.key));
    assert!(!store.is_inherited(child.key));
    // The root exits, the child is orphaned and forks: its child inherits.
    m.forget_processes(&[root].into());
    let orphaned = ProcEntry {
        key: key(101, 11),
        parent: 1,
    };
    let grandchild = ProcEntry {
        key: key(102, 30),
        parent: 101,
    };
    assert_eq!(m.adopt_descendants(&[orphaned, grandchild]), 1);
    assert_eq!(
        class_at_hello(&mut m, grandchild.key, vec![]),
        ShareClass::Background
    );
}
