//! The I/O half of the CPU agent's share → nice mapping: finds every
//! thread of each application process in `/proc/PID/task` and sets its
//! nice level with `setpriority(PRIO_PROCESS, tid)` (on Linux that call
//! takes a thread id and changes that thread only). What level to set is
//! decided by [`crate::nice_map`].
//!
//! It runs on every CPU scan, so threads a program starts later are
//! covered within one scan period. Nothing is restored when a client
//! disconnects or the daemon exits: the threads keep the level they were
//! last given. The daemon keeps remembering each live thread's own level,
//! so a client that reconnects can be given it back; a restarted daemon
//! has no such memory and takes the level it finds as the thread's own.

use crate::nice_map::{ThreadNice, plan_thread};
use rustix::process::{Pid, getpriority_process, setpriority_process};
use std::collections::{BTreeMap, HashMap};

/// Remembers the threads it manages across scans.
#[derive(Debug, Default)]
pub struct Renicer {
    /// Per (pid, tid): the thread's baseline and what it was last set to.
    threads: HashMap<(u32, u32), ThreadNice>,
}

/// What one pass did, for logs and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenicePass {
    /// Threads looked at.
    pub threads: usize,
    /// Threads whose level was changed.
    pub changed: usize,
    /// Threads whose level could not be read or set (most have just exited).
    pub failed: usize,
}

/// Whether this daemon may lower nice values again (give a thread back
/// the level it had): only root can. Without it, lowering a thread once
/// would be irreversible, so the mapping is not applied at all.
pub fn may_renice() -> bool {
    rustix::process::geteuid().is_root()
}

fn tids(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

impl Renicer {
    /// Brings every thread of each process in `targets` (pid → the nice
    /// level its class maps to) to its planned level. Threads of processes
    /// that are no longer clients are left as they are but remembered
    /// while they live; threads that are gone are forgotten.
    pub fn apply(&mut self, targets: &BTreeMap<u32, i32>) -> RenicePass {
        let mut pass = RenicePass::default();
        let mut seen: HashMap<(u32, u32), ThreadNice> = self
            .threads
            .iter()
            .filter(|((pid, tid), _)| {
                !targets.contains_key(pid)
                    && std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists()
            })
            .map(|(&k, &v)| (k, v))
            .collect();
        for (&pid, &mapped) in targets {
            for tid in tids(pid) {
                let Some(raw) = Pid::from_raw(tid as i32) else {
                    continue;
                };
                pass.threads += 1;
                let Ok(current) = getpriority_process(Some(raw)) else {
                    pass.failed += 1;
                    continue;
                };
                let prev = self.threads.get(&(pid, tid)).copied();
                let (mut mem, set) = plan_thread(prev, current, mapped);
                if let Some(level) = set {
                    if setpriority_process(Some(raw), level).is_ok() {
                        pass.changed += 1;
                    } else {
                        // Left as it is; next scan sees it at `current`.
                        mem.applied = current;
                        pass.failed += 1;
                    }
                }
                seen.insert((pid, tid), mem);
            }
        }
        self.threads = seen;
        pass
    }

    /// Threads currently managed.
    pub fn managed(&self) -> usize {
        self.threads.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    const HELPER_ENV: &str = "HETSCHED_RENICE_HELPER";

    fn nice_of(tid: u32) -> i32 {
        getpriority_process(Pid::from_raw(tid as i32)).unwrap()
    }

    /// Not a test: the process `every_thread_...` starts (this test binary
    /// again), so that it reniced a process of its own with several threads.
    #[test]
    #[ignore = "the child process of every_thread_of_a_process_is_lowered_and_given_back, run by it"]
    fn helper_process_with_threads() {
        if std::env::var_os(HELPER_ENV).is_none() {
            return;
        }
        for _ in 0..3 {
            std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_secs(30)));
        }
        println!("ready");
        std::thread::sleep(std::time::Duration::from_secs(30));
    }

    #[test]
    fn every_thread_of_a_process_is_lowered_and_given_back() {
        // Only root may give threads their level back.
        let root = if may_renice() {
            Ok(())
        } else {
            Err("not running as root".into())
        };
        if !hetsched_platform::test_support::available("root", root) {
            return;
        }
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "renice::tests::helper_process_with_threads"])
            .args(["--ignored", "--nocapture", "--test-threads", "1"])
            .env(HELPER_ENV, "1")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // libtest may print the test's name on the same line first.
        while !lines.next().unwrap().unwrap().ends_with("ready") {}
        let pid = child.id();
        let threads = tids(pid);
        assert!(threads.len() >= 4, "{threads:?}");

        let mut r = Renicer::default();
        let pass = r.apply(&BTreeMap::from([(pid, 19)]));
        assert_eq!((pass.threads, pass.changed), (threads.len(), threads.len()));
        assert!(threads.iter().all(|&t| nice_of(t) == 19));
        // Nothing left to do on the next scan.
        assert_eq!(r.apply(&BTreeMap::from([(pid, 19)])).changed, 0);
        // The class went back up: each thread gets its own level (0), not
        // the -3 that twice the default shares would ask for.
        r.apply(&BTreeMap::from([(pid, -3)]));
        assert!(threads.iter().all(|&t| nice_of(t) == 0));
        // A process that is no longer a client is not restored...
        r.apply(&BTreeMap::from([(pid, 10)]));
        r.apply(&BTreeMap::new());
        assert!(threads.iter().all(|&t| nice_of(t) == 10));
        // ...but its own level is remembered while it lives, so when it
        // is a client again at the default class it gets 0 back.
        assert_eq!(r.managed(), threads.len());
        r.apply(&BTreeMap::from([(pid, 0)]));
        assert!(threads.iter().all(|&t| nice_of(t) == 0));
        child.kill().unwrap();
        child.wait().unwrap();
        r.apply(&BTreeMap::new());
        assert_eq!(r.managed(), 0, "gone threads are forgotten");
    }

    #[test]
    fn a_process_that_is_gone_is_skipped() {
        let mut r = Renicer::default();
        // Pid numbers above the kernel's maximum never exist.
        let pass = r.apply(&BTreeMap::from([(u32::MAX >> 1, 19)]));
        assert_eq!(pass, RenicePass::default());
    }
}
