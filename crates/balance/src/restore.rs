//! Taking the balancer's changes back: on a clean exit from its journal in
//! memory, after a crash from the state file the crashed balancer left.
//!
//! For each recorded thread that still exists (same ids *and* start time):
//! - its affinity goes back to the recorded set if it is still exactly the
//!   CPU the balancer pinned it to; any other affinity was set by its
//!   program or an operator since, and is theirs to keep;
//! - if it sits in one of the balancer's throttling cgroups, it goes back
//!   to its recorded cgroup (a self-managed thread too: the throttle is the
//!   balancer's, whatever the thread did with its affinity).

use crate::journal::{self, JournalError, JournalFile, ThreadRecord};
use crate::targets::ThreadId;
use rustix::process::Pid;
use rustix::thread::CpuSet;
use serde::Serialize;
use std::path::Path;

/// What a restore did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RestoreReport {
    /// Threads whose affinity or cgroup was put back.
    pub restored: usize,
    /// Threads that set their own affinity since: only the throttle (if
    /// any) was undone.
    pub self_managed: usize,
    /// Recorded threads that have exited (or whose id now names another
    /// thread): left alone.
    pub gone: usize,
    /// One sentence per thread that could not be restored.
    pub failed: Vec<String>,
}

impl RestoreReport {
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} thread(s) restored, {} kept the affinity they set themselves, {} had exited",
            self.restored, self.self_managed, self.gone
        );
        if !self.failed.is_empty() {
            s.push_str(&format!(
                "; {} failed: {}",
                self.failed.len(),
                self.failed.join("; ")
            ));
        }
        s
    }
}

/// Restores every thread `file` lists.
pub fn restore(file: &JournalFile) -> RestoreReport {
    let mut report = RestoreReport::default();
    for r in &file.threads {
        restore_thread(r, file, &mut report);
    }
    report
}

fn restore_thread(r: &ThreadRecord, file: &JournalFile, report: &mut RestoreReport) {
    let id = r.id();
    if journal::thread_start_time(id) != Some(r.start_time) {
        report.gone += 1;
        return;
    }
    let mut changed = false;
    // The cgroup first: out of the throttle, the thread runs at full speed
    // whatever its affinity.
    if let (Some(home), Some(now)) = (&r.cgroup, journal::cpu_cgroup_of(id)) {
        if file.throttles.contains(&now) && &now != home {
            match std::fs::write(home.join("tasks"), id.tid.to_string()) {
                Ok(()) => changed = true,
                Err(e) if e.raw_os_error() == Some(3) => {
                    report.gone += 1; // ESRCH: exited meanwhile
                    return;
                }
                Err(e) => report.failed.push(format!(
                    "thread {} could not go back to {}: {e}",
                    id.tid,
                    home.display()
                )),
            }
        }
    }
    let Some(now) = crate::sense::affinity_of(id.tid) else {
        report.gone += 1;
        return;
    };
    match r.pinned {
        Some(cpu) if now == [cpu] => match set_affinity(id, &r.affinity) {
            Ok(()) => changed = true,
            Err(rustix::io::Errno::SRCH) => {
                report.gone += 1;
                return;
            }
            Err(e) => report.failed.push(format!(
                "thread {} could not get its affinity {:?} back: {e}",
                id.tid, r.affinity
            )),
        },
        // Pinned by us never (recorded just before a move that did not
        // happen) or re-pinned by its program since.
        _ if now != r.affinity => report.self_managed += 1,
        _ => {}
    }
    if changed {
        report.restored += 1;
    }
}

fn set_affinity(id: ThreadId, cpus: &[usize]) -> rustix::io::Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c);
    }
    rustix::thread::sched_setaffinity(Pid::from_raw(id.tid as i32), &set)
}

/// On start: restores what a previous balancer that did not exit cleanly
/// left in `path`, and removes the file. `None` when there was no file.
/// A file whose balancer still runs is an error: its threads are its own.
pub fn recover(path: &Path) -> Result<Option<RestoreReport>, JournalError> {
    let Some(file) = journal::load(path)? else {
        return Ok(None);
    };
    if let Some(owner) = file.owner {
        if owner.pid != std::process::id() && owner.is_alive() {
            return Err(JournalError::InUse {
                path: path.into(),
                pid: owner.pid,
            });
        }
    }
    let report = restore(&file);
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(JournalError::Write(path.into(), e));
        }
    }
    Ok(Some(report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{Journal, ProcessStamp};
    use crate::test_threads::IdleThread;

    #[test]
    fn a_pinned_thread_gets_its_affinity_back_and_a_repinned_one_keeps_its_own() {
        let allowed = crate::sense::affinity_of(std::process::id()).unwrap();
        let cpu = *allowed.last().unwrap();
        let (ia, ib) = (IdleThread::spawn(), IdleThread::spawn());
        let (a, b) = (ia.id, ib.id);
        let mut j = Journal::in_memory(Vec::new());
        for id in [a, b] {
            j.note_pin(id, cpu).unwrap().unwrap();
            set_affinity(id, &[cpu]).unwrap();
        }
        // b's program re-pins it to another CPU (where there is one).
        let own = vec![allowed[0]];
        set_affinity(b, &own).unwrap();
        let report = restore(j.contents());
        assert_eq!(crate::sense::affinity_of(a.tid).unwrap(), allowed);
        if allowed.len() > 1 {
            assert_eq!(crate::sense::affinity_of(b.tid).unwrap(), own);
            assert_eq!(report.self_managed, 1, "{report:?}");
        }
        assert_eq!(report.failed, Vec::<String>::new());
        assert_eq!(report.gone, 0);
        assert!(report.restored >= 1, "{report:?}");
        ia.end();
        ib.end();
        // Both exited: nothing is touched, both count as gone.
        let report = restore(j.contents());
        assert_eq!(report.gone, 2, "{report:?}");
    }

    #[test]
    fn a_reused_thread_id_is_not_touched() {
        let allowed = crate::sense::affinity_of(std::process::id()).unwrap();
        let idle = IdleThread::spawn();
        let a = idle.id;
        let mut j = Journal::in_memory(Vec::new());
        j.note_pin(a, allowed[0]).unwrap().unwrap();
        set_affinity(a, &[allowed[0]]).unwrap();
        let mut file = j.contents().clone();
        // The same ids, another start time: another thread.
        file.threads[0].start_time += 1;
        file.threads[0].affinity = vec![allowed[0]];
        let report = restore(&file);
        assert_eq!(report.gone, 1);
        assert_eq!(crate::sense::affinity_of(a.tid).unwrap(), vec![allowed[0]]);
        idle.end();
    }

    #[test]
    fn recovery_restores_a_dead_balancers_file_and_refuses_a_live_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        assert_eq!(recover(&path).unwrap(), None);
        let allowed = crate::sense::affinity_of(std::process::id()).unwrap();
        let idle = IdleThread::spawn();
        let a = idle.id;
        let mut j = Journal::at(&path, Vec::new());
        j.note_pin(a, allowed[0]).unwrap().unwrap();
        set_affinity(a, &[allowed[0]]).unwrap();
        // Written by a balancer that still runs (pid 1): refused.
        let mut file = j.contents().clone();
        let init = ProcessStamp {
            pid: 1,
            start_time: journal::thread_start_time(ThreadId { pid: 1, tid: 1 }).unwrap(),
        };
        file.owner = Some(init);
        std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
        let e = recover(&path).unwrap_err().to_string();
        assert!(e.contains("still runs (pid 1)"), "{e}");
        // Written by one that has gone: restored, and the file removed.
        file.owner = Some(ProcessStamp {
            pid: 1,
            start_time: init.start_time + 1,
        });
        std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
        let report = recover(&path).unwrap().unwrap();
        assert_eq!(report.restored, 1, "{report:?}");
        assert_eq!(crate::sense::affinity_of(a.tid).unwrap(), allowed);
        assert!(!path.exists());
        idle.end();
    }
}
