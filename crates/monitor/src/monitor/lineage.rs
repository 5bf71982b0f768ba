//! Settings follow the process tree, reparenting included. A process
//! whose settings are stored (root demoted it to BACKGROUND, say) roots a
//! tree: every process it forks, and their children, get a copy of its
//! settings under their own key (pid and start time), so that they keep
//! them after the root exits and they are reparented to init.
//!
//! At `Hello`, a process without settings of its own takes those of its
//! nearest ancestor that has some ([`Monitor::hello`]); that only sees the
//! ancestry as it is then. The timer therefore also scans `/proc` every
//! second while settings are stored, with no lock held, and records every
//! live descendant of a stored process ([`Monitor::adopt_descendants`]),
//! while the parent links still show where it came from. A child that
//! forks, is orphaned and connects within one scan is caught by the fork
//! log instead, where the daemon can read the kernel's process events
//! ([`crate::fork_watch`]); without them, it escapes.

use super::Monitor;
use crate::procfs::ProcEntry;
use crate::store::ProcessKey;
use std::collections::HashMap;

/// Most generations walked up from a process.
const MAX_DEPTH: usize = 64;

impl Monitor {
    /// Gives every process in `table` (a `/proc` scan) that has no stored
    /// settings of its own those of its nearest ancestor that has (a copy,
    /// brought up to date at every scan while that ancestor lives); how
    /// many it gave or updated.
    pub fn adopt_descendants(&mut self, table: &[ProcEntry]) -> usize {
        if self.store.is_empty() {
            return 0;
        }
        let by_pid: HashMap<u32, ProcEntry> = table.iter().map(|e| (e.pid(), *e)).collect();
        let mut adopted = 0;
        for e in table {
            // Settings of its own stay; a copy follows its ancestor's.
            if self.store.settings_of(e.key).is_some() && !self.store.is_inherited(e.key) {
                continue;
            }
            // The nearest with settings, its own or a copy (the root may
            // have exited: an orphan's children still inherit).
            let root = stored_ancestor(&by_pid, e, |k| self.store.settings_of(k).is_some());
            if let Some(root) = root
                && self.store.adopt(root, e.key)
            {
                adopted += 1;
            }
        }
        if adopted > 0 {
            self.store_dirty = true;
        }
        adopted
    }
}

impl ProcEntry {
    fn pid(&self) -> u32 {
        self.key.pid
    }
}

/// The nearest ancestor of `e` in `by_pid` for which `stored` holds. A
/// parent that started after its child is not its parent (its pid was
/// reused during the scan): the walk stops there.
fn stored_ancestor(
    by_pid: &HashMap<u32, ProcEntry>,
    e: &ProcEntry,
    stored: impl Fn(ProcessKey) -> bool,
) -> Option<ProcessKey> {
    let mut at = *e;
    for _ in 0..MAX_DEPTH {
        if at.parent <= 1 || at.parent == at.pid() {
            return None;
        }
        let up = *by_pid.get(&at.parent)?;
        if up.key.start_time > at.key.start_time {
            return None;
        }
        if stored(up.key) {
            return Some(up.key);
        }
        at = up;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: u32, start_time: u64, parent: u32) -> ProcEntry {
        ProcEntry {
            key: ProcessKey { pid, start_time },
            parent,
        }
    }

    fn table(entries: &[ProcEntry]) -> HashMap<u32, ProcEntry> {
        entries.iter().map(|e| (e.pid(), *e)).collect()
    }

    #[test]
    fn the_nearest_stored_ancestor_is_found_through_generations() {
        let root = entry(10, 100, 1);
        let child = entry(11, 110, 10);
        let grandchild = entry(12, 120, 11);
        let t = table(&[root, child, grandchild]);
        let stored = |k: ProcessKey| k == root.key;
        assert_eq!(stored_ancestor(&t, &grandchild, stored), Some(root.key));
        assert_eq!(stored_ancestor(&t, &child, stored), Some(root.key));
        assert_eq!(stored_ancestor(&t, &root, stored), None);
    }

    #[test]
    fn init_a_reused_pid_and_a_loop_end_the_walk() {
        // The parent's pid now names a process younger than the child.
        let t = table(&[entry(10, 500, 1), entry(11, 110, 10)]);
        assert_eq!(stored_ancestor(&t, &entry(11, 110, 10), |_| true), None);
        let t = table(&[entry(20, 1, 21), entry(21, 1, 20)]);
        assert_eq!(stored_ancestor(&t, &entry(20, 1, 21), |_| false), None);
        assert_eq!(stored_ancestor(&t, &entry(5, 1, 1), |_| true), None);
    }
}
