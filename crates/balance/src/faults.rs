//! The capability faults of the balanced threads, as Kinship's moving
//! window: fallbacks each thread reported through its process's ledger
//! (`hetsched_platform::fault_ledger`), per CPU, over the last
//! [`FAULT_WINDOW`] epochs, and what they were for.

use crate::targets::ThreadId;
use hetsched_core::balance::Category;
use hetsched_platform::fault_ledger;
use std::collections::{HashMap, HashSet, VecDeque};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Epochs a fault is remembered: Kinship's window `TW` (four of its
/// accounting periods in the paper; four balancer epochs here).
pub const FAULT_WINDOW: usize = 4;

/// Faults of one thread on one CPU over the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuFaults {
    /// OS index of the CPU.
    pub cpu: u32,
    pub count: u32,
}

/// A thread's window: faults per CPU and the categories they were for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultWindow {
    pub per_cpu: Vec<CpuFaults>,
    pub categories: Category,
}

impl FaultWindow {
    pub fn total(&self) -> u32 {
        self.per_cpu
            .iter()
            .fold(0u32, |n, c| n.saturating_add(c.count))
    }
}

#[derive(Default)]
struct History {
    /// One entry per epoch, newest last: faults per CPU in that epoch.
    epochs: VecDeque<Vec<CpuFaults>>,
    categories: Category,
}

/// Reads the ledgers every epoch and keeps each thread's window.
pub struct FaultTracker {
    dir: PathBuf,
    /// Last count read per thread and CPU, to turn running counts into
    /// per-epoch faults.
    last: HashMap<(ThreadId, u32), u64>,
    history: HashMap<ThreadId, History>,
    /// Processes whose ledger could not be used, said once each.
    refused: HashSet<u32>,
}

impl FaultTracker {
    /// Ledgers are read from `dir` (`fault_ledger::ledger_dir()` in use).
    pub fn new(dir: PathBuf) -> FaultTracker {
        FaultTracker {
            dir,
            last: HashMap::new(),
            history: HashMap::new(),
            refused: HashSet::new(),
        }
    }

    /// One epoch: reads the ledgers of `threads`' processes and moves every
    /// thread's window on. Returns a line per process whose ledger was
    /// refused or unreadable, once per process.
    pub fn observe(&mut self, threads: &[ThreadId], proc_root: &Path) -> Vec<String> {
        let mut notes = Vec::new();
        let mut now: HashMap<ThreadId, Vec<CpuFaults>> = HashMap::new();
        let mut pids: Vec<u32> = threads.iter().map(|t| t.pid).collect();
        pids.dedup();
        for pid in pids {
            // /proc/PID belongs to the user the process runs as.
            let Ok(uid) = std::fs::metadata(proc_root.join(pid.to_string())).map(|m| m.uid())
            else {
                continue;
            };
            let records = match fault_ledger::read(&self.dir, pid, uid) {
                Ok(r) => r,
                Err(e) => {
                    if self.refused.insert(pid) {
                        notes.push(format!("faults of process {pid} not counted: {e}"));
                    }
                    continue;
                }
            };
            for r in records {
                let id = ThreadId { pid, tid: r.tid };
                if threads.binary_search(&id).is_err() {
                    continue;
                }
                let last = self.last.insert((id, r.cpu), r.count).unwrap_or(0);
                // A count below the last one is a new thread of a reused
                // tid (or a restarted ledger): everything is new.
                let delta = if r.count >= last {
                    r.count - last
                } else {
                    r.count
                };
                let h = self.history.entry(id).or_default();
                h.categories = h.categories.union(r.categories);
                if delta > 0 {
                    now.entry(id).or_default().push(CpuFaults {
                        cpu: r.cpu,
                        count: u32::try_from(delta).unwrap_or(u32::MAX),
                    });
                }
            }
        }
        for id in threads {
            if let Some(h) = self.history.get_mut(id) {
                h.epochs.push_back(now.remove(id).unwrap_or_default());
                while h.epochs.len() > FAULT_WINDOW {
                    h.epochs.pop_front();
                }
            }
        }
        self.history
            .retain(|id, _| threads.binary_search(id).is_ok());
        self.last
            .retain(|(id, _), _| threads.binary_search(id).is_ok());
        notes
    }

    /// The thread's faults over the window; `None` for a thread that never
    /// reported one.
    pub fn window(&self, id: ThreadId) -> Option<FaultWindow> {
        let h = self.history.get(&id)?;
        let mut per_cpu: Vec<CpuFaults> = Vec::new();
        for f in h.epochs.iter().flatten() {
            match per_cpu.iter_mut().find(|c| c.cpu == f.cpu) {
                Some(c) => c.count = c.count.saturating_add(f.count),
                None => per_cpu.push(*f),
            }
        }
        Some(FaultWindow {
            per_cpu,
            categories: h.categories,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_platform::fault_ledger::{FaultRecord, ledger_path};

    fn write(dir: &Path, pid: u32, records: &[FaultRecord]) {
        let bytes: Vec<u8> = records.iter().flat_map(|r| r.encode()).collect();
        std::fs::write(ledger_path(dir, pid), bytes).unwrap();
    }

    fn rec(tid: u32, cpu: u32, count: u64) -> FaultRecord {
        FaultRecord {
            tid,
            cpu,
            categories: Category::CRYPTO,
            count,
        }
    }

    #[test]
    fn running_counts_become_a_moving_window_per_cpu() {
        let dir = tempfile::tempdir().unwrap();
        // Our own process stands in for the balanced one: /proc/self's
        // owner and the ledger's are both us.
        let pid = std::process::id();
        let t = ThreadId { pid, tid: 11 };
        let other = ThreadId { pid, tid: 12 };
        let threads = [t, other];
        let mut ft = FaultTracker::new(dir.path().to_path_buf());
        let proc_root = Path::new("/proc");
        assert!(ft.observe(&threads, proc_root).is_empty());
        assert_eq!(ft.window(t), None);
        write(dir.path(), pid, &[rec(11, 1, 5)]);
        ft.observe(&threads, proc_root);
        let w = ft.window(t).unwrap();
        assert_eq!(w.per_cpu, vec![CpuFaults { cpu: 1, count: 5 }]);
        assert!(w.categories.contains(Category::CRYPTO));
        write(dir.path(), pid, &[rec(11, 1, 8), rec(11, 0, 2)]);
        ft.observe(&threads, proc_root);
        let w = ft.window(t).unwrap();
        assert_eq!(w.total(), 10);
        assert_eq!(ft.window(other), None);
        // No new faults: they age out after FAULT_WINDOW epochs.
        for _ in 0..FAULT_WINDOW {
            ft.observe(&threads, proc_root);
        }
        assert_eq!(ft.window(t).unwrap().total(), 0);
        // A thread that left is forgotten.
        ft.observe(&[other], proc_root);
        assert_eq!(ft.window(t), None);
    }

    #[test]
    fn a_ledger_owned_by_someone_else_is_refused_once() {
        let dir = tempfile::tempdir().unwrap();
        // A fake /proc whose entry for the process belongs to us, and a
        // ledger handed to another user (only root can do that).
        use hetsched_platform::test_support::{available, root};
        if !available("root", root()) {
            return;
        }
        let fake_proc = tempfile::tempdir().unwrap();
        let pid = 4_000_000u32;
        std::fs::create_dir(fake_proc.path().join(pid.to_string())).unwrap();
        write(dir.path(), pid, &[rec(3, 0, 1)]);
        rustix::fs::chown(
            ledger_path(dir.path(), pid),
            Some(rustix::fs::Uid::from_raw(65534)),
            None,
        )
        .unwrap();
        let t = ThreadId { pid, tid: 3 };
        let mut ft = FaultTracker::new(dir.path().to_path_buf());
        let notes = ft.observe(&[t], fake_proc.path());
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("not counted"), "{notes:?}");
        assert!(ft.observe(&[t], fake_proc.path()).is_empty());
        assert_eq!(ft.window(t), None);
    }
}
