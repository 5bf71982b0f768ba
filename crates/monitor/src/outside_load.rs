//! Outside CPU load, as the coordinator takes it out of the CPU units'
//! supply ([`hetsched_core::coordination::OutsideLoad`]): per CPU kind, the
//! cores' busy time (`/proc/stat`'s per-CPU lines: everything but idle and
//! I/O wait, steal included, since a hypervisor's other guests take it
//! too) less the CPU time of the applications whose every use of the CPU
//! the coordinator already models (those that report demand: their CPU
//! tasks are their demand, the rest of their process is their host load).
//! What is left is other programs, the monitor itself and clients that
//! do not report. Measured every [`MEASURE_EVERY_NS`] and smoothed
//! ([`SMOOTHING`]), in cores.
//!
//! The clients' CPU time comes from `/proc/PID/stat`, which does not say
//! on which CPUs it was spent; on a machine with several CPU kinds it is
//! split over them by their slots, as their host load is.

use hetsched_core::ids::Ns;
use std::collections::BTreeMap;

/// How often the load is measured. A few clock ticks' worth of noise
/// (10 ms each) on a quarter of a second is a few hundredths of a core.
pub(crate) const MEASURE_EVERY_NS: Ns = 250_000_000;

/// Weight of the newest interval in the smoothed figure (an exponential
/// moving average): a change of load shows three quarters of itself in
/// about a second.
pub(crate) const SMOOTHING: f64 = 0.3;

/// Busy time (ns) of each CPU kind since boot, from the text of
/// `/proc/stat`: its `cpuN` lines, each CPU counted for its kind
/// (`kind_of_cpu[N]`; CPUs of no kind are left out). `ns_per_tick`: the
/// length of the clock tick the file counts in (USER_HZ).
pub(crate) fn busy_by_kind(
    stat: &str,
    kind_of_cpu: &[Option<usize>],
    kinds: usize,
    ns_per_tick: f64,
) -> Vec<f64> {
    let mut busy = vec![0.0; kinds];
    for line in stat.lines() {
        let mut fields = line.split_whitespace();
        let Some(cpu) = fields
            .next()
            .and_then(|name| name.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let Some(Some(kind)) = kind_of_cpu.get(cpu) else {
            continue;
        };
        // user nice system idle iowait irq softirq steal (guest and
        // guest_nice are already in user and nice).
        let ticks: Vec<u64> = fields.take(8).filter_map(|f| f.parse().ok()).collect();
        if ticks.len() < 4 {
            continue;
        }
        let idle = ticks[3] + ticks.get(4).copied().unwrap_or(0);
        let total: u64 = ticks.iter().sum();
        if let Some(b) = busy.get_mut(*kind) {
            *b += total.saturating_sub(idle) as f64 * ns_per_tick;
        }
    }
    busy
}

/// The smoothed outside load per CPU kind, from samples of the kinds'
/// busy time and the modelled clients' CPU time.
#[derive(Debug)]
pub(crate) struct OutsideLoadMeter {
    /// Each kind's part of the clients' CPU time (its slots over all).
    split: Vec<f64>,
    /// The last sample: when, and each kind's busy time.
    last: Option<(Ns, Vec<f64>)>,
    /// Each modelled client's CPU time at the last sample, by pid.
    clients: BTreeMap<u32, f64>,
    smoothed: Option<Vec<f64>>,
}

impl OutsideLoadMeter {
    /// A meter for CPU kinds of `slots` cores each.
    pub(crate) fn new(slots: &[f64]) -> Self {
        let all: f64 = slots.iter().sum();
        OutsideLoadMeter {
            split: slots
                .iter()
                .map(|s| if all > 0.0 { s / all } else { 0.0 })
                .collect(),
            last: None,
            clients: BTreeMap::new(),
            smoothed: None,
        }
    }

    /// Whether a sample is due at `now`.
    pub(crate) fn due(&self, now: Ns) -> bool {
        self.last
            .as_ref()
            .is_none_or(|(at, _)| now.saturating_sub(*at) >= MEASURE_EVERY_NS)
    }

    /// One sample at `at`: each kind's busy time since boot and each
    /// modelled client's CPU time (pid, ns). A client seen for the first
    /// time counts from the next sample; one gone stops counting. Returns
    /// the smoothed load per kind, cores, once two samples are in.
    pub(crate) fn sample(
        &mut self,
        at: Ns,
        busy: Vec<f64>,
        clients: &[(u32, f64)],
    ) -> Option<&[f64]> {
        let mut used = 0.0;
        let mut seen = BTreeMap::new();
        for &(pid, cpu) in clients {
            if let Some(before) = self.clients.get(&pid) {
                used += (cpu - before).max(0.0);
            }
            seen.insert(pid, cpu);
        }
        self.clients = seen;
        let last = self.last.replace((at, busy.clone()));
        let (then, busy_then) = last?;
        let dt = at.saturating_sub(then) as f64;
        if dt <= 0.0 || busy_then.len() != busy.len() {
            return self.smoothed.as_deref();
        }
        let now: Vec<f64> = busy
            .iter()
            .zip(&busy_then)
            .zip(&self.split)
            .map(|((b, b0), part)| ((b - b0) - used * part).max(0.0) / dt)
            .collect();
        let smoothed = match self.smoothed.take() {
            Some(old) if old.len() == now.len() => old
                .iter()
                .zip(&now)
                .map(|(o, n)| o + SMOOTHING * (n - o))
                .collect(),
            _ => now,
        };
        self.smoothed = Some(smoothed);
        self.smoothed.as_deref()
    }
}

/// Reads `/proc/stat` into [`busy_by_kind`]; `None` where it cannot be read.
pub(crate) fn read_busy(kind_of_cpu: &[Option<usize>], kinds: usize) -> Option<Vec<f64>> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let ns_per_tick = 1e9 / rustix::param::clock_ticks_per_second() as f64;
    Some(busy_by_kind(&text, kind_of_cpu, kinds, ns_per_tick))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/stat` of a machine with four CPUs, `ticks` busy on each
    /// (user, nice, system, irq, softirq and steal all counted) and the
    /// rest idle or waiting on I/O.
    fn proc_stat(busy: [u64; 4]) -> String {
        let mut text = String::from("cpu  1 2 3 4 5 6 7 8 0 0\n");
        for (n, b) in busy.iter().enumerate() {
            // user, nice, system, idle, iowait, irq, softirq, steal,
            // guest, guest_nice: guest is inside user already.
            let (user, nice, system, irq, softirq, steal) = (
                b / 2,
                b / 8,
                b / 8,
                b / 8,
                b / 16,
                b - b / 2 - 3 * (b / 8) - b / 16,
            );
            text.push_str(&format!(
                "cpu{n} {user} {nice} {system} 9000 77 {irq} {softirq} {steal} {user} 0\n"
            ));
        }
        text.push_str("intr 123 4 5\nctxt 999\nbtime 1700000000\nprocesses 42\n");
        text
    }

    #[test]
    fn busy_time_is_counted_per_cpu_kind_from_proc_stat() {
        // CPUs 0 and 1 are kind 0, CPU 3 kind 1; CPU 2 is in no unit.
        let kinds = [Some(0), Some(0), None, Some(1)];
        let busy = busy_by_kind(&proc_stat([100, 40, 500, 64]), &kinds, 2, 10e6);
        assert_eq!(busy, vec![140.0 * 10e6, 64.0 * 10e6]);
        // Truncated or foreign lines count nothing.
        assert_eq!(
            busy_by_kind("cpu0 1 2\ncpux 1 2 3 4\n", &kinds, 2, 1.0),
            vec![0.0, 0.0]
        );
    }

    #[test]
    fn outside_load_is_busy_time_less_the_modelled_clients_smoothed() {
        let kinds = [Some(0), Some(0), None, Some(1)];
        // Kind 0 has 2 cores, kind 1 one: the clients' time splits 2:1.
        let mut meter = OutsideLoadMeter::new(&[2.0, 1.0]);
        let tick = 10e6;
        let quarter = MEASURE_EVERY_NS;
        // Per quarter second (25 ticks): kind 0 busy 40 ticks (1.6
        // cores), kind 1 25 (one core); the client (pid 7) uses 30
        // ticks, 20 of them on kind 0 and 10 on kind 1 by the split.
        let at = |i: u64| {
            let stat = proc_stat([20 * i, 20 * i, 999, 25 * i]);
            busy_by_kind(&stat, &kinds, 2, tick)
        };
        assert!(meter.due(0));
        assert!(meter.sample(0, at(0), &[(7, 0.0)]).is_none());
        assert!(!meter.due(quarter - 1) && meter.due(quarter));
        let load = meter
            .sample(quarter, at(1), &[(7, 30.0 * tick)])
            .unwrap()
            .to_vec();
        assert!((load[0] - 0.8).abs() < 1e-9, "{load:?}");
        assert!((load[1] - 0.6).abs() < 1e-9, "{load:?}");
        // A new client (pid 8) counts from its second sample: its first
        // interval is outside load, smoothed in with SMOOTHING's weight.
        let load = meter
            .sample(2 * quarter, at(2), &[(7, 60.0 * tick), (8, 15.0 * tick)])
            .unwrap()
            .to_vec();
        assert!((load[0] - 0.8).abs() < 1e-9, "{load:?}");
        // Then kind 0 goes quiet but for the clients: the outside load
        // decays towards nothing, never below.
        let mut quiet = |i: u64, c7: f64| {
            let mut busy = at(2);
            busy[0] += (i - 2) as f64 * 20.0 * tick;
            busy[1] += (i - 2) as f64 * 25.0 * tick;
            meter
                .sample(i * quarter, busy, &[(7, c7 * tick), (8, 15.0 * tick)])
                .unwrap()
                .to_vec()
        };
        let first = quiet(3, 90.0);
        assert!(
            (first[0] - 0.8 * (1.0 - SMOOTHING)).abs() < 1e-9,
            "{first:?}"
        );
        let mut last = first;
        for i in 4..30 {
            last = quiet(i, 90.0 + 30.0 * (i - 3) as f64);
        }
        assert!(last[0] < 0.01 && last[0] >= 0.0, "{last:?}");
    }
}
