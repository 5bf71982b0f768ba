//! The monitor's limits and policy knobs ([`MonitorConfig`]), as the
//! daemon's config file or an embedding program sets them.

use crate::domains::DomainSpec;
use hetsched_core::ids::Ns;
use std::collections::BTreeMap;

/// Limits and policy knobs of the monitor.
#[derive(Clone, Debug, PartialEq)]
pub struct MonitorConfig {
    /// Requests one client may have waiting or running, over all units.
    pub max_outstanding: u32,
    /// Longest device work one request may hold a stream for, ns.
    pub max_device_ns: Ns,
    /// Group whose members administer shares (besides root).
    pub admin_gid: Option<u32>,
    /// Largest data region a client may ask for with a kernel ring, bytes.
    pub max_region_bytes: u64,
    /// Configured domains (`[[domains]]`), checked.
    pub domains: Vec<DomainSpec>,
    /// Accelerator selection binds (`accelerator_binding`): a client's
    /// calls on selectable units go to the one it is associated with
    /// only, and its first call on one associates it there if the unit
    /// has room under its client cap.
    pub accelerator_binding: bool,
    /// Every unit policy's anticipation window
    /// ([`hetsched_core::policy::UnitPolicy::set_anticipation_ns`]), ns;
    /// `None` keeps each policy's own default.
    pub anticipation_ns: Option<Ns>,
    /// Length of a time-slice lease for CUSTOM and NORMAL clients, ns
    /// (`lease_us`); BACKGROUND clients get a quarter of it.
    pub lease_ns: Ns,
    /// Device-memory caps of intercepted programs, by class
    /// (`[device_memory]`).
    pub device_memory: DeviceMemoryCaps,
    /// Client names `/metrics` keeps apart as soon as they connect, as
    /// it does root's (`metrics_names`).
    pub metrics_names: Vec<String>,
    /// Per unit name, how long a client may hold a slot it drives itself
    /// (a gate task, a lease) before the daemon takes it back, ns
    /// (`[max_hold_ms]`). Units not named: `max_device_ns` for devices, no
    /// limit for CPU units.
    pub max_hold_ns: BTreeMap<String, Ns>,
    /// Who may register kernels, and what one client's builds may cost
    /// (`kernel_users`, `kernel_groups`, `[kernels]`).
    pub kernels: crate::kernel_config::KernelPolicy,
}

/// Default `lease_us`: 5 ms.
pub const DEFAULT_LEASE_NS: Ns = 5_000_000;

/// Device-memory caps by share class, bytes (`None`: no cap).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceMemoryCaps {
    pub custom: Option<u64>,
    pub normal: Option<u64>,
    pub background: Option<u64>,
}

/// Default `max_region_mb`.
pub const DEFAULT_MAX_REGION_MB: u64 = 64;

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            max_outstanding: 64,
            max_device_ns: 10_000_000_000,
            admin_gid: None,
            max_region_bytes: DEFAULT_MAX_REGION_MB << 20,
            domains: Vec::new(),
            accelerator_binding: false,
            anticipation_ns: None,
            lease_ns: DEFAULT_LEASE_NS,
            device_memory: DeviceMemoryCaps::default(),
            metrics_names: Vec::new(),
            max_hold_ns: BTreeMap::new(),
            kernels: crate::kernel_config::KernelPolicy::default(),
        }
    }
}

/// Memory and client cap of a unit that accelerator selection may choose
/// (`memory_mb` and `max_clients` of an `[[emulated]]` unit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcceleratorLimits {
    pub memory_bytes: u64,
    pub max_clients: u32,
}

impl Default for AcceleratorLimits {
    fn default() -> Self {
        AcceleratorLimits {
            memory_bytes: hetsched_platform::emulated::DEFAULT_MEMORY_MB << 20,
            max_clients: hetsched_platform::emulated::DEFAULT_MAX_CLIENTS,
        }
    }
}
