//! What a daemon does to its host that an embedded monitor does not: set
//! the nice level of application threads and the weights of their cgroups
//! from the monitor's CPU plans, and serve `/metrics` over HTTP.
//!
//! hetsched-daemon supplies these (its `launch::prepare` fills
//! [`crate::server::DaemonSetup::host`]). A server without them (the
//! runtime's embedded monitor) plans exactly the same and applies none of
//! it; a setting that asks for one (`cpu_nice_from_shares`, `cpu_cgroups`,
//! `metrics_listen`) is then logged as not applied.

use crate::cpu_weights::CgroupTarget;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

/// The host parts a server may use; none by default.
#[derive(Clone, Copy, Debug, Default)]
pub struct Host {
    /// Opens the CPU controls that `cpu_nice_from_shares` and
    /// `cpu_cgroups` ask for. Called on the CPU agent's thread when it
    /// starts; what it returns is dropped when that thread ends.
    pub cpu_controls: Option<fn(CpuControlsWanted) -> CpuControls>,
    /// Binds the `/metrics` listener (`metrics_listen`).
    pub metrics: Option<BindMetrics>,
    /// Reads the kernel's process events as root, so that settings follow
    /// a process tree through reparenting ([`crate::fork_watch`]): the
    /// machine's daemon, not a program's embedded monitor.
    pub fork_events: bool,
}

/// Binds a `/metrics` listener at an address.
pub type BindMetrics = fn(SocketAddr) -> Result<Box<dyn MetricsHttp>, MetricsBindError>;
/// Sets the nice level of every thread of each application process (by
/// pid) to the monitor's target.
pub type Renice = Box<dyn FnMut(&BTreeMap<u32, i32>) + Send>;
/// Keeps each application process (by pid) in a cgroup weighed by its CPU
/// credits.
pub type WeighCgroups = Box<dyn FnMut(&BTreeMap<u32, CgroupTarget>) + Send>;

/// Which CPU controls the set-up asks for (its `cpu_nice_from_shares` and
/// `cpu_cgroups`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuControlsWanted {
    /// Nice levels from shares ([`Renice`]).
    pub renice: bool,
    /// Cgroup weights from CPU credits ([`WeighCgroups`]).
    pub cgroups: bool,
}

/// What the CPU agent applies on every scan.
#[derive(Default)]
pub struct CpuControls {
    /// Sets nice levels ([`Renice`]), with `cpu_nice_from_shares`.
    pub renice: Option<Renice>,
    /// Weighs cgroups ([`WeighCgroups`]), with `cpu_cgroups`.
    pub cgroups: Option<WeighCgroups>,
}

/// A bound `/metrics` listener, not yet serving.
pub trait MetricsHttp: Send {
    /// Where it listens (the port chosen when bound to port 0).
    fn local_addr(&self) -> Option<SocketAddr>;
    /// Ends [`MetricsHttp::serve`] (from another thread).
    fn unblocker(&self) -> Box<dyn Fn() + Send + Sync>;
    /// Answers requests until the unblocker is called, and returns once
    /// every thread it started has ended. `exposition` gives the text of
    /// `GET /metrics` now (the latest published snapshot's; `None` before
    /// the first), without taking the state lock; it may be called from
    /// several threads at once.
    fn serve(self: Box<Self>, exposition: &(dyn Fn() -> Option<Arc<str>> + Sync));
}

#[derive(Debug, thiserror::Error)]
#[error("cannot serve metrics on {addr}: {why}")]
pub struct MetricsBindError {
    pub addr: SocketAddr,
    pub why: String,
}
