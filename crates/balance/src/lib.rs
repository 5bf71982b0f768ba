//! hetsched-balance: the thread balancer for unmodified programs.
//!
//! Every epoch it *senses* the target threads (per-thread counters through
//! perf_event, CPU time, the CPU each last ran on), *predicts* each
//! thread's throughput and power on every core kind (SmartBalance Eq. 8–9,
//! `hetsched_core::ips_model`), runs one of the allocation policies of
//! `hetsched_core::balance` and *applies* the result with
//! `sched_setaffinity`, moving threads into the throttling cgroup of an
//! emulated slow kind where the machine emulates one.

pub mod apply;
pub mod balancer;
pub mod calibrate;
pub mod config;
pub mod counters;
pub mod faults;
pub mod journal;
pub mod kernels;
pub mod machine;
pub mod power;
pub mod restore;
pub mod sense;
pub mod targets;
#[cfg(test)]
mod test_threads;
pub mod work;
