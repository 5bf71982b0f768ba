//! Applying an allocation: `sched_setaffinity` to the chosen CPU, and for
//! an emulated slow kind, moving the thread into that kind's throttling
//! cgroup (and back to its own cgroup when it leaves the kind).
//!
//! A thread whose affinity changed since the balancer last set it has
//! been re-pinned by its own process (or an operator): the balancer then
//! treats that set as the thread's allowed set and stops overriding it.
//!
//! Every change is recorded in a [`Journal`] before it is made, so that
//! [`Applier::restore`] (on exit) or [`crate::restore::recover`] (after a
//! crash) can take it back.

use crate::journal::{Journal, JournalError, cpu_cgroup_of};
use crate::machine::CoreMap;
use crate::restore::RestoreReport;
use crate::targets::ThreadId;
use rustix::process::Pid;
use rustix::thread::CpuSet;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// What happened to one requested move.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Moved,
    /// The thread exited before it could be moved.
    Gone,
    /// Its process set its own affinity since our last move; left alone.
    SelfManaged,
    Failed(String),
}

pub struct Applier {
    /// CPU each thread was last pinned to by us.
    pinned: HashMap<ThreadId, usize>,
    /// Threads whose process manages its own affinity.
    self_managed: HashSet<ThreadId>,
    /// Where a thread was in the `cpu` controller before we moved it into
    /// a throttling cgroup.
    home_cgroup: HashMap<ThreadId, PathBuf>,
    /// How every thread we changed was before, for the restore.
    journal: Journal,
}

impl Default for Applier {
    fn default() -> Self {
        Applier::new()
    }
}

impl Applier {
    /// An applier whose journal is kept in memory only.
    pub fn new() -> Applier {
        Applier::with_journal(Journal::in_memory(Vec::new()))
    }

    pub fn with_journal(journal: Journal) -> Applier {
        Applier {
            pinned: HashMap::new(),
            self_managed: HashSet::new(),
            home_cgroup: HashMap::new(),
            journal,
        }
    }

    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Puts every thread this applier changed back as it was (see
    /// [`crate::restore`]) and removes the state file; forgets them all.
    pub fn restore(&mut self) -> Result<RestoreReport, JournalError> {
        let report = crate::restore::restore(self.journal.contents());
        self.journal.remove_file()?;
        let throttles = self.journal.contents().throttles.clone();
        self.journal = match self.journal.path() {
            Some(p) => Journal::at(p, throttles),
            None => Journal::in_memory(throttles),
        };
        self.pinned.clear();
        self.self_managed.clear();
        self.home_cgroup.clear();
        Ok(report)
    }

    /// Whether `id` is pinned by the balancer to exactly `cpu` already.
    pub fn is_pinned_to(&self, id: ThreadId, cpu: usize) -> bool {
        self.pinned.get(&id) == Some(&cpu)
    }

    pub fn is_self_managed(&self, id: ThreadId) -> bool {
        self.self_managed.contains(&id)
    }

    /// Notes that the balancer's affinity for `id` has been overridden when
    /// its current affinity is not the single CPU we pinned it to.
    pub fn observe_affinity(&mut self, id: ThreadId, affinity: &[usize]) {
        if let Some(&cpu) = self.pinned.get(&id) {
            if affinity != [cpu] {
                self.self_managed.insert(id);
                self.pinned.remove(&id);
                self.journal.note_self_managed(id);
            }
        }
    }

    /// Forgets threads no longer listed. The journal keeps them while
    /// they live (a thread that left the target may still carry our pin),
    /// and drops those that exited.
    pub fn retain(&mut self, live: &[ThreadId]) -> Result<(), JournalError> {
        let keep = |id: &ThreadId| live.binary_search(id).is_ok();
        self.pinned.retain(|id, _| keep(id));
        self.self_managed.retain(keep);
        self.home_cgroup.retain(|id, _| keep(id));
        if self
            .journal
            .contents()
            .threads
            .iter()
            .any(|r| !keep(&r.id()))
        {
            self.journal.forget_exited()?;
        }
        Ok(())
    }

    /// Pins `id` to OS CPU `cpu` (of `map`) and puts it in or out of the
    /// throttling cgroup of that CPU's kind.
    pub fn move_thread(&mut self, map: &CoreMap, id: ThreadId, cpu: usize) -> Outcome {
        if self.self_managed.contains(&id) {
            return Outcome::SelfManaged;
        }
        let Some(core) = map.core_by_os_index(cpu) else {
            return Outcome::Failed(format!("CPU {cpu} is not in the core map"));
        };
        let throttle = map.kinds[map.cores[core].kind].throttle.as_deref();
        // The undo first: a change is made only once it can be taken back.
        match self.journal.note_pin(id, cpu) {
            Ok(Some(())) => {}
            Ok(None) => return Outcome::Gone,
            Err(e) => return Outcome::Failed(e.to_string()),
        }
        if let Err(o) = self.set_cgroup(id, throttle) {
            return o;
        }
        let mut set = CpuSet::new();
        set.set(cpu);
        match rustix::thread::sched_setaffinity(Pid::from_raw(id.tid as i32), &set) {
            Ok(()) => {
                self.pinned.insert(id, cpu);
                Outcome::Moved
            }
            Err(rustix::io::Errno::SRCH) => Outcome::Gone,
            Err(e) => Outcome::Failed(format!("sched_setaffinity: {e}")),
        }
    }

    fn set_cgroup(&mut self, id: ThreadId, throttle: Option<&Path>) -> Result<(), Outcome> {
        let target = match throttle {
            Some(dir) => {
                if let std::collections::hash_map::Entry::Vacant(e) = self.home_cgroup.entry(id) {
                    e.insert(cpu_cgroup_of(id).ok_or(Outcome::Gone)?);
                }
                dir.to_path_buf()
            }
            None => match self.home_cgroup.remove(&id) {
                Some(home) => home,
                None => return Ok(()),
            },
        };
        std::fs::write(target.join("tasks"), id.tid.to_string()).map_err(|e| {
            if e.raw_os_error() == Some(3) {
                Outcome::Gone // ESRCH
            } else {
                Outcome::Failed(format!("cannot move into {}: {e}", target.display()))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BalanceConfig;
    use crate::machine::CoreMap;
    use crate::test_threads::IdleThread;

    #[test]
    fn a_thread_is_pinned_and_an_outside_change_makes_it_self_managed() {
        let map = CoreMap::from_topology(
            &hetsched_platform::cpu::discover_cpus(),
            &BalanceConfig::default(),
        )
        .unwrap();
        let allowed = crate::sense::affinity_of(std::process::id()).unwrap();
        let cpu = *allowed.last().unwrap();
        let idle = IdleThread::spawn();
        let id = idle.id;
        let mut a = Applier::new();
        assert_eq!(a.move_thread(&map, id, cpu), Outcome::Moved);
        assert_eq!(crate::sense::affinity_of(id.tid).unwrap(), vec![cpu]);
        a.observe_affinity(id, &[cpu]);
        assert!(!a.is_self_managed(id));
        // The program re-pins its own thread: the balancer backs off.
        let mut set = CpuSet::new();
        for &c in &allowed {
            set.set(c);
        }
        rustix::thread::sched_setaffinity(Pid::from_raw(id.tid as i32), &set).unwrap();
        a.observe_affinity(id, &crate::sense::affinity_of(id.tid).unwrap());
        if allowed.len() > 1 {
            assert!(a.is_self_managed(id));
            assert_eq!(a.move_thread(&map, id, cpu), Outcome::SelfManaged);
        }
        idle.end();
        // Exited: the move reports it rather than failing.
        let mut b = Applier::new();
        assert_eq!(b.move_thread(&map, id, cpu), Outcome::Gone);
    }
}
