//! What the daemon reads about other processes from `/proc`: start time
//! (to tell a process from a later one with the same pid), owner and
//! groups (privileges), thread counts (min-funding demand) and the nice
//! level and last CPU of every runnable thread (the CPU agent's figures).

use crate::processes::{ProcessKey, ProcessTable};
use std::path::Path;

/// Nice levels -20..=19.
pub const NICE_LEVELS: usize = 40;

/// Fields of `/proc/PID/stat` after the command name (which may contain
/// spaces and parentheses, so we split after the last `)`). Index 0 is
/// field 3 (state) of proc(5).
fn stat_fields(text: &str) -> Option<Vec<&str>> {
    let close = text.rfind(')')?;
    Some(text[close + 1..].split_whitespace().collect())
}

const STATE: usize = 0; // field 3
const PPID: usize = 1; // field 4
const UTIME: usize = 11; // field 14
const STIME: usize = 12; // field 15
const NICE: usize = 16; // field 19
const START_TIME: usize = 19; // field 22
const PROCESSOR: usize = 36; // field 39

/// CPU time (user + system) the process has consumed, all threads, ns.
/// Resolution is one clock tick (10 ms on most systems).
pub fn cpu_time_ns(pid: u32) -> Option<f64> {
    stat_cpu_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
        .map(|t| t as f64 * 1e9 / rustix::param::clock_ticks_per_second() as f64)
}

fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let f = stat_fields(stat)?;
    let user: u64 = f.get(UTIME)?.parse().ok()?;
    let system: u64 = f.get(STIME)?.parse().ok()?;
    Some(user + system)
}

/// The parent of a process (`/proc/PID/stat` field 4).
fn parent(pid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_fields(&text)?.get(PPID)?.parse().ok()
}

/// Most ancestors looked up for a process.
const MAX_ANCESTORS: usize = 16;

/// A process's ancestors, nearest first, up to (not including) init, at
/// most [`MAX_ANCESTORS`].
pub fn ancestors(pid: u32) -> Vec<ProcessKey> {
    let mut out = Vec::new();
    let mut at = pid;
    while out.len() < MAX_ANCESTORS {
        let Some(up) = parent(at).filter(|&p| p > 1 && p != at) else {
            break;
        };
        let Some(start_time) = start_time(up) else {
            break;
        };
        out.push(ProcessKey {
            pid: up,
            start_time,
        });
        at = up;
    }
    out
}

pub fn start_time(pid: u32) -> Option<u64> {
    stat_start_time(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn stat_start_time(stat: &str) -> Option<u64> {
    stat_fields(stat)?.get(START_TIME)?.parse().ok()
}

fn status_field(pid: u32, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
}

/// Supplementary groups of a process.
pub fn groups(pid: u32) -> Vec<u32> {
    status_field(pid, "Groups:")
        .map(|v| {
            v.split_whitespace()
                .filter_map(|g| g.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Real uid of a process.
pub fn uid(pid: u32) -> Option<u32> {
    status_field(pid, "Uid:")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The text of `/proc/PID/cgroup` (empty if the process is gone).
pub fn cgroup_text(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default()
}

/// Threads of a process (0 if it is gone).
pub fn threads(pid: u32) -> u32 {
    status_field(pid, "Threads:")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Threads of a process that are running or runnable now (state `R`).
pub fn runnable_threads(pid: u32) -> u32 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    dir.filter_map(|e| {
        let stat = std::fs::read_to_string(e.ok()?.path().join("stat")).ok()?;
        (stat_fields(&stat)?.get(STATE)? == &"R").then_some(())
    })
    .count() as u32
}

/// Whether the process `key` names is still the one running.
///
/// Only a missing `/proc` entry or a different start time means gone: a
/// read that fails for another reason (the daemon out of descriptors, say)
/// must not make it forget a live process's settings or grants.
pub fn alive(key: ProcessKey) -> bool {
    stat_says_alive(
        std::fs::read_to_string(format!("/proc/{}/stat", key.pid)),
        key.start_time,
    )
}

fn stat_says_alive(stat: std::io::Result<String>, start_time: u64) -> bool {
    match stat {
        Ok(text) => stat_start_time(&text) == Some(start_time),
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// One process of a `/proc` scan: which it is, and its parent's pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcEntry {
    pub key: ProcessKey,
    pub parent: u32,
}

/// Every process now, from `/proc/*/stat` (one that ends during the scan
/// is left out).
pub fn process_table() -> Vec<ProcEntry> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let f = stat_fields(&text)?;
        Some(ProcEntry {
            key: ProcessKey {
                pid,
                start_time: f.get(START_TIME)?.parse().ok()?,
            },
            parent: f.get(PPID)?.parse().ok()?,
        })
    })
    .collect()
}

/// Gid of a group named in `/etc/group`.
pub fn group_gid(name: &str) -> Option<u32> {
    let text = std::fs::read_to_string("/etc/group").ok()?;
    text.lines().find_map(|l| {
        let mut parts = l.split(':');
        (parts.next()? == name)
            .then(|| parts.nth(1)?.parse().ok())
            .flatten()
    })
}

/// The uid of user `name` in `/etc/passwd`.
pub fn user_uid(name: &str) -> Option<u32> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let mut parts = l.split(':');
        (parts.next()? == name)
            .then(|| parts.nth(1)?.parse().ok())
            .flatten()
    })
}

/// [`ProcessTable`] over the real `/proc`.
pub struct LiveProcesses;

impl ProcessTable for LiveProcesses {
    fn lookup(&self, pid: u32) -> Option<(ProcessKey, u32)> {
        let start_time = start_time(pid)?;
        Some((ProcessKey { pid, start_time }, uid(pid)?))
    }
}

/// [`ProcessTable`] over one process read from `/proc` beforehand, so that
/// the state lock is not held while `/proc` is read: it knows only `pid`
/// (any other is not found).
#[derive(Clone, Copy, Debug)]
pub struct ReadBefore {
    pid: Option<u32>,
    entry: Option<(ProcessKey, u32)>,
}

impl ReadBefore {
    /// Reads `pid`'s entry now (nothing without a pid).
    pub fn read(pid: Option<u32>) -> ReadBefore {
        ReadBefore {
            pid,
            entry: pid.and_then(|p| LiveProcesses.lookup(p)),
        }
    }
}

impl ProcessTable for ReadBefore {
    fn lookup(&self, pid: u32) -> Option<(ProcessKey, u32)> {
        debug_assert_eq!(self.pid, Some(pid), "looked up a process not read before");
        self.entry.filter(|_| self.pid == Some(pid))
    }
}

/// Runnable threads per nice level, per CPU kind (`kind_of_cpu[cpu]`
/// gives the kind index of an OS CPU number; CPUs not in it are skipped).
pub fn runnable_by_nice(kind_of_cpu: &[Option<usize>], kinds: usize) -> Vec<[u32; NICE_LEVELS]> {
    let mut out = vec![[0u32; NICE_LEVELS]; kinds];
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let name = p.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            count_thread(&t.path(), kind_of_cpu, &mut out);
        }
    }
    out
}

fn count_thread(dir: &Path, kind_of_cpu: &[Option<usize>], out: &mut [[u32; NICE_LEVELS]]) {
    let Ok(text) = std::fs::read_to_string(dir.join("stat")) else {
        return;
    };
    let Some(f) = stat_fields(&text) else { return };
    if f.get(STATE) != Some(&"R") {
        return;
    }
    let nice: Option<i32> = f.get(NICE).and_then(|v| v.parse().ok());
    let cpu: Option<usize> = f.get(PROCESSOR).and_then(|v| v.parse().ok());
    if let (Some(nice), Some(cpu)) = (nice, cpu) {
        let level = (nice.clamp(-20, 19) + 20) as usize;
        if let Some(Some(kind)) = kind_of_cpu.get(cpu) {
            if let Some(row) = out.get_mut(*kind) {
                row[level] += 1;
            }
        }
    }
}

/// CFS load weight of a nice level: each level is about 1.25× the next
/// (the kernel's table is this curve, rounded), nice 0 = 1024.
pub fn cfs_weight(nice: i32) -> f64 {
    1024.0 / 1.25f64.powi(nice)
}

/// Fraction of CPU time each nice level gets when all its runnable
/// threads compete on the same cores.
pub fn time_ratios(threads_by_nice: &[u32; NICE_LEVELS]) -> [f64; NICE_LEVELS] {
    let mut out = [0.0; NICE_LEVELS];
    let total: f64 = threads_by_nice
        .iter()
        .enumerate()
        .map(|(i, &n)| f64::from(n) * cfs_weight(i as i32 - 20))
        .sum();
    if total > 0.0 {
        for (i, &n) in threads_by_nice.iter().enumerate() {
            out[i] = f64::from(n) * cfs_weight(i as i32 - 20) / total;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        let key = ProcessKey {
            pid: me,
            start_time: start_time(me).expect("own stat"),
        };
        assert!(alive(key));
        assert!(!alive(ProcessKey {
            start_time: key.start_time + 1,
            ..key
        }));
        assert_eq!(uid(me), Some(rustix::process::getuid().as_raw()));
        assert!(threads(me) >= 1);
        // This thread is running while it reads its own stat.
        assert!(runnable_threads(me) >= 1);
        assert_eq!(LiveProcesses.lookup(me).map(|(k, _)| k), Some(key));
        assert_eq!(
            ReadBefore::read(Some(me)).lookup(me),
            LiveProcesses.lookup(me)
        );
        assert_eq!(ReadBefore::read(Some(u32::MAX)).lookup(u32::MAX), None);
    }

    #[test]
    fn cpu_time_counts_user_and_system_ticks_of_this_process() {
        // Fields 14 and 15 (utime 11, stime 12) of a command with spaces.
        let stat = "7 (a b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14";
        assert_eq!(stat_cpu_ticks(stat), Some(11 + 12));
        assert_eq!(stat_cpu_ticks("7 (x) S 1 2"), None);
        let me = std::process::id();
        let before = cpu_time_ns(me).expect("own stat");
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(60) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let after = cpu_time_ns(me).expect("own stat");
        // 60 ms of spinning shows as at least one 10 ms tick.
        assert!(after > before, "{before} -> {after}");
    }

    #[test]
    fn only_a_missing_entry_or_another_start_time_means_gone() {
        use std::io::{Error, ErrorKind};
        let stat = "12 (a) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 5 1 0 999 0 0".to_string();
        assert!(stat_says_alive(Ok(stat.clone()), 999));
        assert!(!stat_says_alive(Ok(stat), 998));
        assert!(!stat_says_alive(Err(ErrorKind::NotFound.into()), 999));
        // EMFILE: the daemon is short of descriptors, the process is not gone.
        assert!(stat_says_alive(Err(Error::from_raw_os_error(24)), 999));
    }

    #[test]
    fn command_names_with_parentheses_do_not_shift_fields() {
        let line = "12 (a) b) c) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 5 1 0 999 0 0";
        let f = stat_fields(line).unwrap();
        assert_eq!(f[STATE], "R");
        assert_eq!(f[NICE], "5");
        assert_eq!(f[START_TIME], "999");
    }

    #[test]
    fn nice_ratios_follow_cfs_weights() {
        let mut t = [0u32; NICE_LEVELS];
        t[20] = 1; // nice 0
        t[25] = 1; // nice 5
        let r = time_ratios(&t);
        let sum: f64 = r.iter().sum();
        assert!((sum - 1.0).abs() < 1e-12);
        // 1.25^5 ≈ 3.05: nice 0 gets about three times nice 5.
        assert!((r[20] / r[25] - 1.25f64.powi(5)).abs() < 1e-9);
    }

    #[test]
    fn this_thread_counts_as_runnable_somewhere() {
        let cpus = std::thread::available_parallelism().unwrap().get();
        let map: Vec<Option<usize>> = (0..cpus).map(|_| Some(0)).collect();
        let got = runnable_by_nice(&map, 1);
        // The test thread itself is running while it reads /proc.
        assert!(got[0].iter().sum::<u32>() >= 1);
    }
}
