//! A worker process for the balancer's experiment: runs one kernel for a
//! fixed time at a duty cycle (busy part of every 10 ms period, asleep the
//! rest, as an I/O-bound thread would be) and counts the units it did.
//!
//! Functional asymmetry is emulated the way Kinship's trap-and-emulate
//! path behaves: a unit of the `aes-128` kernel done on a CPU declared to
//! lack AES costs `penalty` units of work (the instruction would fault and
//! be emulated in software). The worker checks its CPU before every unit,
//! and reports every emulated unit as a capability fallback
//! (`hetsched_platform::fault_ledger`), as a program with a software path
//! for a missing instruction would.

use crate::kernels::{Kernel, Runner};
use hetsched_core::balance::Category;
use hetsched_platform::fault_ledger;
use std::hint::black_box;
use std::time::{Duration, Instant};

const PERIOD: Duration = Duration::from_millis(10);

#[derive(Clone, Debug)]
pub struct WorkSpec {
    pub kernel: Kernel,
    /// Busy fraction of every 10 ms period, (0, 1].
    pub duty: f64,
    /// CPUs without the kernel's instructions (for `aes-128`).
    pub slow_cpus: Vec<usize>,
    /// Work multiplier there.
    pub penalty: u32,
}

/// Runs `spec` for `seconds` and returns the units completed.
pub fn run(spec: &WorkSpec, seconds: f64) -> u64 {
    let mut runner = Runner::new(spec.kernel, u64::from(std::process::id()));
    let emulated = spec.kernel.name == "aes-128" && !spec.slow_cpus.is_empty();
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let busy = PERIOD.mul_f64(spec.duty.clamp(0.01, 1.0));
    let mut units = 0u64;
    while Instant::now() < end {
        let period_start = Instant::now();
        while period_start.elapsed() < busy {
            let repeat = if emulated && spec.slow_cpus.contains(&rustix::thread::sched_getcpu()) {
                fault_ledger::report_fallback(Category::CRYPTO);
                spec.penalty.max(1)
            } else {
                1
            };
            for _ in 0..repeat {
                black_box(runner.step());
            }
            units += 1;
        }
        if let Some(rest) = PERIOD.checked_sub(period_start.elapsed()) {
            if spec.duty < 1.0 {
                std::thread::sleep(rest);
            }
        }
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lower_duty_does_less_work_and_the_penalty_costs_work() {
        let k = Kernel::by_name("aes-128").unwrap();
        let spec = |duty, slow: Vec<usize>| WorkSpec {
            kernel: k,
            duty,
            slow_cpus: slow,
            penalty: 8,
        };
        let full = run(&spec(1.0, vec![]), 0.2);
        let fifth = run(&spec(0.2, vec![]), 0.2);
        assert!(fifth * 2 < full, "{fifth} vs {full}");
        // Every CPU declared slow: every unit pays the penalty.
        let all: Vec<usize> = (0..1024).collect();
        let slow = run(&spec(1.0, all), 0.2);
        assert!(slow * 3 < full, "{slow} vs {full}");
    }
}
