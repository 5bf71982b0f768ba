//! The sensing step: one [`ThreadSample`] per live target thread per epoch.
//!
//! Counters come from [`crate::counters`]; the CPU a thread last ran on
//! and its name from `/proc/…/stat` (one read per thread per epoch: the
//! balancer's overhead is mostly this); its
//! affinity from `sched_getaffinity`. A thread that exits mid-epoch simply
//! does not appear in the next listing and its counters are closed.

use crate::counters::{Availability, ThreadCounters};
use crate::targets::ThreadId;
use hetsched_core::ips_model::ThreadCounts;
use rustix::process::Pid;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq)]
pub struct ThreadSample {
    pub id: ThreadId,
    pub comm: String,
    pub counts: ThreadCounts,
    /// OS CPU it last ran on.
    pub last_cpu: usize,
    /// OS CPUs it may run on now.
    pub affinity: Vec<usize>,
    /// Share of the epoch it was on a CPU, 0..=1 (can pass 1 briefly when
    /// windows do not align).
    pub utilisation: f64,
    /// Share of the epoch it was running *or waiting to run* (schedstat's
    /// run delay): what it wanted, which on a shared core is more than it
    /// got. Equal to `utilisation` where schedstat is not available.
    pub demand: f64,
}

/// Keeps counters open across epochs.
pub struct Sensor {
    proc_root: PathBuf,
    avail: Option<Availability>,
    open: HashMap<ThreadId, Open>,
}

struct Open {
    counters: Option<ThreadCounters>,
    /// Fallback CPU time from `/proc` when perf is unavailable, ns.
    last_proc_ns: u64,
    /// schedstat's time run and time waiting, ns.
    last_sched: Option<(u64, u64)>,
}

impl Sensor {
    /// `avail` is `None` when perf_event cannot be used at all: CPU time then
    /// comes from `/proc/…/stat` (clock ticks) and no counter is read.
    pub fn new(proc_root: &Path, avail: Option<Availability>) -> Sensor {
        Sensor {
            proc_root: proc_root.into(),
            avail,
            open: HashMap::new(),
        }
    }

    pub fn availability(&self) -> Option<&Availability> {
        self.avail.as_ref()
    }

    /// Samples `threads` over the window since the previous call (which
    /// lasted `window_ns`). Threads seen for the first time are opened and
    /// report from the next call on; threads not listed are dropped.
    pub fn sample(&mut self, threads: &[ThreadId], window_ns: u64) -> Vec<ThreadSample> {
        self.open.retain(|id, _| threads.binary_search(id).is_ok());
        let mut out = Vec::with_capacity(threads.len());
        for &id in threads {
            let Some(proc) = read_proc(&self.proc_root, id) else {
                self.open.remove(&id);
                continue;
            };
            let Some(affinity) = affinity_of(id.tid) else {
                self.open.remove(&id);
                continue;
            };
            match self.open.get_mut(&id) {
                None => {
                    // With no hardware event to count, perf would only add
                    // the task clock, which schedstat already gives: skip
                    // the descriptor and the read per thread.
                    let counters = self
                        .avail
                        .as_ref()
                        .filter(|a| a.events.len() > 1 || proc.sched.is_none())
                        .and_then(|a| ThreadCounters::open(id.tid, a).ok());
                    self.open.insert(
                        id,
                        Open {
                            counters,
                            last_proc_ns: proc.cpu_ns,
                            last_sched: proc.sched,
                        },
                    );
                }
                Some(o) => {
                    let mut counts = match o.counters.as_mut().map(|c| c.read_delta()) {
                        Some(Ok(c)) => c,
                        Some(Err(_)) => continue,
                        None => ThreadCounts::default(),
                    };
                    if o.counters.is_none() {
                        // Time on a CPU: schedstat's nanoseconds where the
                        // kernel keeps them, else /proc's clock ticks.
                        counts.task_ns = match (proc.sched, o.last_sched) {
                            (Some((run, _)), Some((run0, _))) => run.saturating_sub(run0),
                            _ => proc.cpu_ns.saturating_sub(o.last_proc_ns),
                        };
                    }
                    o.last_proc_ns = proc.cpu_ns;
                    let utilisation = counts.task_ns as f64 / window_ns.max(1) as f64;
                    let demand = match (proc.sched, o.last_sched) {
                        (Some((run, wait)), Some((run0, wait0))) => {
                            let busy = run.saturating_sub(run0) + wait.saturating_sub(wait0);
                            busy as f64 / window_ns.max(1) as f64
                        }
                        _ => utilisation,
                    };
                    o.last_sched = proc.sched;
                    out.push(ThreadSample {
                        id,
                        comm: proc.comm,
                        utilisation,
                        demand,
                        counts,
                        last_cpu: proc.last_cpu,
                        affinity,
                    });
                }
            }
        }
        out
    }
}

struct ProcThread {
    comm: String,
    last_cpu: usize,
    cpu_ns: u64,
    sched: Option<(u64, u64)>,
}

fn read_proc(root: &Path, id: ThreadId) -> Option<ProcThread> {
    let dir = root
        .join(id.pid.to_string())
        .join("task")
        .join(id.tid.to_string());
    let mut t = parse_thread(&std::fs::read_to_string(dir.join("stat")).ok()?)?;
    t.sched = std::fs::read_to_string(dir.join("schedstat"))
        .ok()
        .and_then(|s| parse_schedstat(&s));
    Some(t)
}

/// Clock ticks per second of `/proc` CPU times (USER_HZ, 100 on Linux).
const USER_HZ: u64 = 100;

fn parse_thread(stat: &str) -> Option<ProcThread> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_string();
    // Fields after the command name, numbered from field 3 (state).
    let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    let ticks = |i: usize| f.get(i)?.parse::<u64>().ok();
    let cpu_ns = (ticks(11)? + ticks(12)?) * (1_000_000_000 / USER_HZ); // utime, stime
    let last_cpu = f.get(36)?.parse().ok()?; // field 39
    Some(ProcThread {
        comm,
        last_cpu,
        cpu_ns,
        sched: None,
    })
}

/// `/proc/…/schedstat`: time on a CPU and time runnable but waiting, ns.
fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut f = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((f.next()??, f.next()??))
}

/// The thread's CPU affinity, or `None` when it has exited.
pub fn affinity_of(tid: u32) -> Option<Vec<usize>> {
    let set = rustix::thread::sched_getaffinity(Pid::from_raw(tid as i32)).ok()?;
    Some(
        (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let stat = "42 (my (odd) name) R 1 42 42 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 1 0 \
                    123 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let t = parse_thread(stat).unwrap();
        assert_eq!(t.comm, "my (odd) name");
        assert_eq!(t.cpu_ns, 300 * 10_000_000);
        assert_eq!(t.last_cpu, 1);
        assert_eq!(
            parse_schedstat("968303106 40851890 113\n"),
            Some((968303106, 40851890))
        );
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn a_busy_thread_and_a_sleeping_one_look_different_and_exited_ones_vanish() {
        let me = std::process::id();
        let tid_of = || rustix::thread::gettid().as_raw_nonzero().get() as u32;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let s1 = stop.clone();
        let tx1 = tx.clone();
        let busy = std::thread::spawn(move || {
            tx1.send(("busy", tid_of())).unwrap();
            let mut x = 1u64;
            while !s1.load(std::sync::atomic::Ordering::Relaxed) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            std::hint::black_box(x);
        });
        let s2 = stop.clone();
        let sleepy = std::thread::spawn(move || {
            tx.send(("sleepy", tid_of())).unwrap();
            while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        });
        let mut tids = HashMap::new();
        for _ in 0..2 {
            let (n, t) = rx.recv().unwrap();
            tids.insert(n, ThreadId { pid: me, tid: t });
        }
        let mut ids: Vec<ThreadId> = tids.values().copied().collect();
        ids.sort();
        let mut sensor = Sensor::new(Path::new("/proc"), Availability::probe().ok());
        assert!(sensor.sample(&ids, 1).is_empty(), "first sight only opens");
        let window = std::time::Duration::from_millis(200);
        std::thread::sleep(window);
        let got = sensor.sample(&ids, window.as_nanos() as u64);
        let of = |n: &str| got.iter().find(|s| s.id == tids[n]).unwrap().clone();
        let (b, s) = (of("busy"), of("sleepy"));
        // On 2 shared cores the busy thread gets well over a third of the
        // window even when the machine is loaded; the sleeper almost none.
        assert!(b.utilisation > 0.3, "{b:?}");
        assert!(s.utilisation < 0.2, "{s:?}");
        // Waiting for a CPU counts as demand, never less than what it got.
        assert!(b.demand >= b.utilisation - 0.05, "{b:?}");
        assert!(!b.affinity.is_empty());
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        busy.join().unwrap();
        sleepy.join().unwrap();
        // Both exited: /proc no longer lists them, nothing is reported.
        assert!(sensor.sample(&ids, 1).is_empty());
        assert!(sensor.open.is_empty());
    }
}
