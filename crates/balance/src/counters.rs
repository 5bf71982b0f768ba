//! Per-thread counters through `perf_event_open` (perf-event2).
//!
//! One counter per event rather than one group: a VM or a small PMU has
//! few hardware counters, and the kernel multiplexes separate events where
//! it would refuse a group that does not fit. Each read is scaled by
//! `time_enabled / time_running` to undo the multiplexing. The task clock
//! is a software event, so it works on machines without a PMU; hardware
//! events the machine lacks are probed once and left out, and
//! [`ThreadCounts`] carries `None` for them.

use hetsched_core::ips_model::ThreadCounts;
use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Hardware, Software};
use perf_event::{Builder, Counter};

/// What the balancer counts per thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    TaskClock,
    Instructions,
    Cycles,
    CacheReferences,
    CacheMisses,
    Branches,
    BranchMisses,
    L1dMisses,
    DtlbMisses,
}

impl Event {
    pub const HARDWARE: [Event; 8] = [
        Event::Instructions,
        Event::Cycles,
        Event::CacheReferences,
        Event::CacheMisses,
        Event::Branches,
        Event::BranchMisses,
        Event::L1dMisses,
        Event::DtlbMisses,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Event::TaskClock => "task-clock",
            Event::Instructions => "instructions",
            Event::Cycles => "cycles",
            Event::CacheReferences => "cache-references",
            Event::CacheMisses => "cache-misses",
            Event::Branches => "branches",
            Event::BranchMisses => "branch-misses",
            Event::L1dMisses => "L1-dcache-load-misses",
            Event::DtlbMisses => "dTLB-load-misses",
        }
    }

    fn builder(self) -> Builder<'static> {
        fn cache(which: CacheId) -> Builder<'static> {
            Builder::new(Cache {
                which,
                operation: CacheOp::READ,
                result: CacheResult::MISS,
            })
        }
        let hw = |e: Hardware| Builder::new(e);
        match self {
            Event::TaskClock => Builder::new(Software::TASK_CLOCK),
            Event::Instructions => hw(Hardware::INSTRUCTIONS),
            Event::Cycles => hw(Hardware::CPU_CYCLES),
            Event::CacheReferences => hw(Hardware::CACHE_REFERENCES),
            Event::CacheMisses => hw(Hardware::CACHE_MISSES),
            Event::Branches => hw(Hardware::BRANCH_INSTRUCTIONS),
            Event::BranchMisses => hw(Hardware::BRANCH_MISSES),
            Event::L1dMisses => cache(CacheId::L1D),
            Event::DtlbMisses => cache(CacheId::DTLB),
        }
    }

    fn open(self, tid: Option<u32>) -> std::io::Result<Counter> {
        let mut b = self.builder();
        match tid {
            Some(t) => b.observe_pid(t as i32).any_cpu(),
            None => b.observe_self().any_cpu(),
        };
        // User and kernel time alike: a thread's system calls are part of
        // what it costs a core.
        b.include_kernel();
        let mut c = b.build()?;
        c.enable()?;
        Ok(c)
    }

    fn store(self, into: &mut ThreadCounts, value: u64) {
        let v = Some(value);
        match self {
            Event::TaskClock => into.task_ns = value,
            Event::Instructions => into.instructions = v,
            Event::Cycles => into.cycles = v,
            Event::CacheReferences => into.cache_references = v,
            Event::CacheMisses => into.cache_misses = v,
            Event::Branches => into.branches = v,
            Event::BranchMisses => into.branch_misses = v,
            Event::L1dMisses => into.l1d_misses = v,
            Event::DtlbMisses => into.dtlb_misses = v,
        }
    }
}

/// Which events this machine can count, found by opening each on the
/// calling thread once.
#[derive(Clone, Debug, PartialEq)]
pub struct Availability {
    pub events: Vec<Event>,
    /// `(event, why)` for each hardware event that could not be opened.
    pub missing: Vec<(Event, String)>,
}

impl Availability {
    pub fn probe() -> Result<Availability, CounterError> {
        Event::TaskClock
            .open(None)
            .map_err(|e| CounterError::Unavailable(explain(&e)))?;
        let mut events = vec![Event::TaskClock];
        let mut missing = Vec::new();
        for ev in Event::HARDWARE {
            match ev.open(None) {
                Ok(_) => events.push(ev),
                Err(e) => missing.push((ev, explain(&e))),
            }
        }
        Ok(Availability { events, missing })
    }

    /// Whether IPC (and so a cross-kind prediction) can be measured.
    pub fn has_ipc(&self) -> bool {
        self.events.contains(&Event::Instructions) && self.events.contains(&Event::Cycles)
    }

    /// One line for the log.
    pub fn summary(&self) -> String {
        if self.missing.is_empty() {
            return "all counters available".into();
        }
        let names: Vec<&str> = self.missing.iter().map(|(e, _)| e.name()).collect();
        let why = &self.missing[0].1;
        format!("not countable here: {} ({why})", names.join(", "))
    }
}

fn explain(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        // EACCES, EPERM
        Some(13) | Some(1) => {
            let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".into());
            format!(
                "permission denied: run as root or lower kernel.perf_event_paranoid (now {paranoid})"
            )
        }
        // ENOENT, EOPNOTSUPP
        Some(2) | Some(95) => {
            "the CPU's PMU does not offer it (a VM without a virtual PMU?)".into()
        }
        _ => e.to_string(),
    }
}

/// Counters could not be used at all.
#[derive(Debug, thiserror::Error)]
pub enum CounterError {
    #[error("perf_event_open is unavailable: {0}")]
    Unavailable(String),
}

/// Open counters of one thread and their totals at the last read.
pub struct ThreadCounters {
    counters: Vec<(Event, Counter)>,
    last: Vec<u64>,
}

impl ThreadCounters {
    /// Opens the available events on thread `tid`. Fails when the thread
    /// is gone or the task clock cannot be opened on it; a hardware event
    /// that fails here alone is left out.
    pub fn open(tid: u32, avail: &Availability) -> std::io::Result<ThreadCounters> {
        let mut counters = Vec::with_capacity(avail.events.len());
        for &ev in &avail.events {
            match ev.open(Some(tid)) {
                Ok(c) => counters.push((ev, c)),
                Err(e) if ev == Event::TaskClock => return Err(e),
                Err(_) => {}
            }
        }
        let last = vec![0; counters.len()];
        let mut me = ThreadCounters { counters, last };
        me.read_delta()?;
        Ok(me)
    }

    /// Counts since the previous read (scaled for multiplexing). A counter
    /// of an exited thread keeps its final value (deltas drop to zero);
    /// the target listing is what tells the balancer a thread is gone.
    pub fn read_delta(&mut self) -> std::io::Result<ThreadCounts> {
        let mut out = ThreadCounts::default();
        for ((ev, c), last) in self.counters.iter_mut().zip(&mut self.last) {
            let ct = c.read_count_and_time()?;
            let total = if ct.time_running == 0 {
                *last // not scheduled onto the PMU since: no new information
            } else {
                (ct.count as f64 * ct.time_enabled as f64 / ct.time_running as f64) as u64
            };
            ev.store(&mut out, total.saturating_sub(*last));
            *last = total;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_clock_counts_a_busy_thread_and_missing_events_are_reported() {
        let avail = match Availability::probe() {
            Ok(a) => a,
            Err(e) => {
                hetsched_platform::test_support::available("perf", Err(e.to_string()));
                return;
            }
        };
        eprintln!("{}", avail.summary());
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            tx.send(rustix::thread::gettid().as_raw_nonzero().get() as u32)
                .unwrap();
            go_rx.recv().unwrap();
            // 50 ms of CPU time, however loaded the machine is.
            let start = hetsched_platform::thread::cpu_time();
            let mut x = 1u64;
            while hetsched_platform::thread::cpu_time() - start
                < std::time::Duration::from_millis(50)
            {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            std::hint::black_box(x);
        });
        let tid = rx.recv().unwrap();
        let mut counters = ThreadCounters::open(tid, &avail).unwrap();
        go_tx.send(()).unwrap();
        worker.join().unwrap();
        let d = counters.read_delta().unwrap();
        assert!(d.task_ns >= 45_000_000, "{d:?}");
        assert_eq!(
            d.instructions.is_some(),
            avail.events.contains(&Event::Instructions)
        );
        if avail.has_ipc() {
            assert!(d.ipc().unwrap() > 0.1, "{d:?}");
        }
        // Nothing ran since: the next delta is (close to) zero.
        assert!(counters.read_delta().unwrap().task_ns < 1_000_000);
    }

    #[test]
    fn a_thread_that_does_not_exist_cannot_be_opened() {
        let avail = match Availability::probe() {
            Ok(a) => a,
            Err(e) => {
                hetsched_platform::test_support::available("perf", Err(e.to_string()));
                return;
            }
        };
        assert!(ThreadCounters::open(u32::MAX / 2, &avail).is_err());
    }
}
