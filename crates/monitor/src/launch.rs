//! From a config file to a [`DaemonSetup`]: discover the platform, pick
//! each unit's policy, resolve the admin group. The setup has none of the
//! host's parts ([`crate::host::Host`]); hetsched-daemon's `launch::prepare`
//! adds them.

use crate::agent::UnitSetup;
use crate::config::DaemonConfig;
use crate::kernel_exec::KernelBackend;
use crate::kernel_exec::device_api::DeviceApi;
use crate::monitor::MonitorConfig;
use crate::procfs;
use crate::server::DaemonSetup;
use hetsched_core::policy::PolicyKind;
use hetsched_core::unit::UnitClass;
use hetsched_platform::{Platform, PlatformConfig, PlatformError, slow_cores};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Platform(#[from] PlatformError),
    #[error("[policies] names units that do not exist: {unknown}; units are: {known}")]
    UnknownPolicyUnit { unknown: String, known: String },
    #[error("[max_hold_ms] names units that do not exist: {unknown}; units are: {known}")]
    UnknownHoldUnit { unknown: String, known: String },
    #[error(
        "[[domains]] unit_credits names units that do not exist: {unknown}; units are: {known}"
    )]
    UnknownDomainUnit { unknown: String, known: String },
    #[error("admin_group {0:?} is not a group on this machine (see /etc/group)")]
    UnknownGroup(String),
    #[error("{0} (see /etc/passwd and /etc/group)")]
    KernelUsers(String),
    #[error(
        "cannot emulate slow cores of kind {kind}: {source} (run the daemon as root on a machine with cgroup v1 CFS bandwidth control, or remove [[slow_cores]])"
    )]
    Throttle {
        kind: String,
        source: std::io::Error,
    },
}

/// Creates the throttling cgroup of every `[[slow_cores]]` kind, by unit name.
fn set_up_throttles(
    cfg: &DaemonConfig,
    platform: &Platform,
) -> Result<BTreeMap<String, PathBuf>, LaunchError> {
    let mut out = BTreeMap::new();
    if !cfg.include_cpus {
        return Ok(out);
    }
    let root = Path::new(slow_cores::CGROUP_CPU_ROOT);
    for s in &cfg.slow_cores {
        let kind = s.kind_name();
        let cores = platform
            .machine
            .kind_by_name(&kind)
            .and_then(|k| platform.cpus_of_kind(k.id))
            .map_or(0, <[usize]>::len);
        let dir = slow_cores::set_up_throttle(root, &kind, s.speed, cores).map_err(|source| {
            LaunchError::Throttle {
                kind: kind.clone(),
                source,
            }
        })?;
        out.insert(kind, dir);
    }
    Ok(out)
}

/// Discovers the platform the config describes and builds the daemon's setup.
pub fn prepare(cfg: &DaemonConfig) -> Result<(DaemonSetup, Platform), LaunchError> {
    let platform = hetsched_platform::discover(&PlatformConfig {
        emulated: cfg.emulated.clone(),
        include_cpus: cfg.include_cpus,
        calibration_cache: cfg.calibration_cache_path(),
        slow_cores: cfg.slow_cores.clone(),
    })?;
    let throttles = set_up_throttles(cfg, &platform)?;
    let devices = DeviceUnits::open(
        cfg,
        platform.machine.units.len(),
        platform.machine.kinds.len(),
    );
    let names: Vec<&str> = platform
        .machine
        .units
        .iter()
        .map(|u| u.name.as_str())
        .chain(devices.names())
        .collect();
    check_unit_names(cfg, &names)?;
    let admin_gid = match &cfg.admin_group {
        Some(g) => Some(procfs::group_gid(g).ok_or_else(|| LaunchError::UnknownGroup(g.clone()))?),
        None => None,
    };
    let mut units = platform_units(cfg, &platform, &throttles);
    let mut backends = Vec::new();
    for ServedUnit { mut setup, backend } in devices.served {
        setup.policy = device_policy(cfg, &setup.unit.name);
        backends.push((setup.unit.id, backend));
        units.push(setup);
    }
    for mut setup in devices.gated {
        setup.policy = device_policy(cfg, &setup.unit.name);
        units.push(setup);
    }
    let setup = DaemonSetup {
        socket: cfg.socket_path(),
        state_path: cfg.state_path(),
        monitor: MonitorConfig {
            kernels: crate::kernel_config::KernelPolicy::resolve(
                &cfg.kernel_users,
                &cfg.kernel_groups,
                &cfg.kernels,
            )
            .map_err(LaunchError::KernelUsers)?,
            ..monitor_config(cfg, admin_gid)
        },
        units,
        tick: Duration::from_millis(cfg.tick_ms),
        cpu_scan: Duration::from_millis(cfg.cpu_scan_ms),
        cpu_schedule: Duration::from_millis(cfg.cpu_schedule_ms),
        cpu_nice_from_shares: cfg.cpu_nice_from_shares,
        cpu_cgroups: cfg.cpu_cgroups,
        accelerator_limits: accelerator_limits(cfg),
        coordination: cfg.coordination,
        coordinator: hetsched_core::coordination::CoordinatorConfig {
            pick_slice_events: cfg.coordination_slice_events,
            ..cfg.coordination.coordinator_config(cfg.coordination_floor)
        },
        max_frame_bytes: cfg.max_frame_bytes,
        connection_limits: crate::admission::ConnectionLimits {
            per_uid: cfg.max_connections_per_uid,
            total: cfg.max_connections,
        },
        kind_of_cpu: kind_of_cpu(&platform),
        kernel_backends: crate::kernel_exec::Backends::new(backends),
        kernel_sandbox: crate::kernel_exec::SandboxSpec {
            program: std::env::current_exe().ok(),
            call_limit: Duration::from_secs_f64(cfg.max_device_seconds),
            limits: crate::kernel_config::KernelLimits::from(&cfg.kernels),
            max_kept_bytes: cfg.max_region_mb << 20,
        },
        metrics_listen: cfg.metrics_listen,
        host: crate::host::Host::default(),
    };
    Ok((setup, platform))
}

/// The device units the config asks for, after the platform's: the ones
/// the daemon serves (OpenCL, then CUDA; each with the backend that runs
/// its kernels), then the gated ones clients drive themselves.
struct DeviceUnits {
    served: Vec<ServedUnit>,
    gated: Vec<UnitSetup>,
}

/// A unit the daemon serves, and the device behind it.
struct ServedUnit {
    setup: UnitSetup,
    backend: Box<dyn KernelBackend>,
}

impl DeviceUnits {
    /// Opens them, numbered from `first_id` (one kind each, from
    /// `first_kind`).
    fn open(cfg: &DaemonConfig, first_id: usize, first_kind: usize) -> DeviceUnits {
        let served = served_units(
            crate::kernel_exec::apis::all(),
            |api| cfg.serves(api.config_key()),
            cfg.max_region_mb << 20,
            first_id,
            first_kind,
        );
        let served_kinds: Vec<String> = served.iter().map(|s| s.setup.kind_name.clone()).collect();
        let gated = gated_device_units(
            cfg,
            &served_kinds,
            first_id + served.len(),
            first_kind + served.len(),
        );
        DeviceUnits { served, gated }
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        self.served
            .iter()
            .map(|s| s.setup.unit.name.as_str())
            .chain(self.gated.iter().map(|s| s.unit.name.as_str()))
    }
}

/// Refuses a `[policies]` entry or a domain's `unit_credits` that names a
/// unit not among `names`.
fn check_unit_names(cfg: &DaemonConfig, names: &[&str]) -> Result<(), LaunchError> {
    let unknown = cfg.unknown_policy_units(names);
    if !unknown.is_empty() {
        return Err(LaunchError::UnknownPolicyUnit {
            unknown: unknown.join(", "),
            known: names.join(", "),
        });
    }
    let unknown: Vec<&str> = cfg
        .max_hold_ms
        .keys()
        .map(String::as_str)
        .filter(|k| !names.contains(k))
        .collect();
    if !unknown.is_empty() {
        return Err(LaunchError::UnknownHoldUnit {
            unknown: unknown.join(", "),
            known: names.join(", "),
        });
    }
    let unknown = crate::domains::unknown_units(&cfg.domains, names);
    if !unknown.is_empty() {
        return Err(LaunchError::UnknownDomainUnit {
            unknown: unknown.join(", "),
            known: names.join(", "),
        });
    }
    Ok(())
}

/// The setup of each unit the platform discovery found (CPU kinds and
/// `[[emulated]]` devices), with its configured policy.
fn platform_units(
    cfg: &DaemonConfig,
    platform: &Platform,
    throttles: &BTreeMap<String, PathBuf>,
) -> Vec<UnitSetup> {
    platform
        .machine
        .units
        .iter()
        .map(|u| {
            let is_cpu = u.class == UnitClass::Cpu;
            let configured = cfg.policies.get(&u.name).copied();
            let policy = if is_cpu {
                configured.unwrap_or(PolicyKind::TimeShare)
            } else {
                cfg.coordination
                    .device_policy(configured.unwrap_or(cfg.default_policy))
            };
            UnitSetup {
                unit: u.clone(),
                kind_name: platform.machine.kinds[u.kind.index()].name.clone(),
                policy,
                // Every non-CPU unit the daemon knows today comes from
                // `[[emulated]]`; real devices get their own executors.
                emulated: !is_cpu,
                kernels: Vec::new(),
                pus: platform
                    .cpus_of_kind(u.kind)
                    .filter(|_| is_cpu)
                    .map(|p| p.iter().map(|&c| c as u32).collect())
                    .unwrap_or_default(),
                throttle: throttles.get(&u.name).cloned(),
            }
        })
        .collect()
}

/// The CPU kind of each OS CPU number (`None` for numbers not in use).
fn kind_of_cpu(platform: &Platform) -> Vec<Option<usize>> {
    let n_os_cpus = platform
        .cpus
        .iter()
        .map(|c| c.os_index + 1)
        .max()
        .unwrap_or(0);
    let mut kind_of_cpu = vec![None; n_os_cpus];
    for c in &platform.cpus {
        kind_of_cpu[c.os_index] = Some(c.kind.index());
    }
    kind_of_cpu
}

fn monitor_config(cfg: &DaemonConfig, admin_gid: Option<u32>) -> MonitorConfig {
    MonitorConfig {
        max_outstanding: cfg.max_outstanding,
        max_device_ns: (cfg.max_device_seconds * 1e9) as u64,
        admin_gid,
        max_region_bytes: cfg.max_region_mb << 20,
        domains: cfg.domains.clone(),
        accelerator_binding: cfg.accelerator_binding,
        anticipation_ns: cfg.anticipation_us.map(|us| us * 1_000),
        lease_ns: cfg.lease_us * 1_000,
        device_memory: cfg
            .device_memory
            .caps()
            .expect("checked when the configuration was read"),
        metrics_names: cfg.metrics_names.clone(),
        max_hold_ns: cfg
            .max_hold_ms
            .iter()
            .map(|(unit, &ms)| (unit.clone(), ms * 1_000_000))
            .collect(),
        kernels: crate::kernel_config::KernelPolicy::default(),
    }
}

/// Each `[[emulated]]` device's memory and client limits, by name.
fn accelerator_limits(cfg: &DaemonConfig) -> BTreeMap<String, crate::monitor::AcceleratorLimits> {
    cfg.emulated
        .iter()
        .map(|e| {
            let limits = crate::monitor::AcceleratorLimits {
                memory_bytes: e.memory_bytes(),
                max_clients: e.max_clients,
            };
            (e.name.clone(), limits)
        })
        .collect()
}

/// The policy of device unit `name`: its own in `[policies]`, else the
/// default, as coordination adjusts it.
fn device_policy(cfg: &DaemonConfig, name: &str) -> PolicyKind {
    cfg.coordination.device_policy(
        cfg.policies
            .get(name)
            .copied()
            .unwrap_or(cfg.default_policy),
    )
}

/// The units `device_units = true` adds: every real device this build can
/// drive, numbered from `first_id` (one kind each, from `first_kind`).
/// Clients run their own kernels there once the unit's agent grants them
/// a slot; nothing runs in the daemon. A device the daemon serves itself
/// (one of `served_kinds`) gets no second unit: its served unit's agent
/// grants the clients' slots too, so one agent arbitrates the device.
fn gated_device_units(
    cfg: &DaemonConfig,
    served_kinds: &[String],
    first_id: usize,
    first_kind: usize,
) -> Vec<UnitSetup> {
    if !cfg.device_units {
        return Vec::new();
    }
    let mut served: Vec<&String> = served_kinds.iter().collect();
    crate::devices::discover(&mut |note| tracing::info!("{note}"))
        .into_iter()
        .filter(|d| match served.iter().position(|k| **k == d.kind) {
            Some(i) => {
                served.remove(i);
                tracing::info!(
                    "{} is served by the daemon too: its served unit's agent \
                     arbitrates both",
                    d.name
                );
                false
            }
            None => true,
        })
        .enumerate()
        .map(|(i, d)| served_unit(first_id + i, first_kind + i, d.name, d.class, d.kind, &[]))
        .collect()
}

/// A device unit: numbered `id`, of a kind `kind` of its own named
/// `kind_name`, one call at a time; the daemon runs `kernels` on it for
/// clients (none: clients run their own through the dispatch gate).
fn served_unit(
    id: usize,
    kind: usize,
    name: String,
    class: UnitClass,
    kind_name: String,
    kernels: &[hetsched_protocol::kernel_call::Kernel],
) -> UnitSetup {
    use hetsched_core::ids::{KindId, UnitId};
    use hetsched_core::unit::{Capabilities, LinkCost, Unit};
    UnitSetup {
        kind_name,
        policy: PolicyKind::Fifo,
        emulated: false,
        kernels: kernels.to_vec(),
        pus: Vec::new(),
        throttle: None,
        unit: Unit {
            id: UnitId(id as u16),
            name,
            kind: KindId(kind as u16),
            class,
            caps: Capabilities::empty(),
            // Unknown until measured: the kernel costs the monitor learns
            // are what the policy is told.
            relative_speed: 1.0,
            // Copies are part of every call's measured time.
            coherent: true,
            copy_in: LinkCost::FREE,
            copy_out: LinkCost::FREE,
            dispatch_ns: 0,
            // One in-order queue: calls run one at a time.
            slots: 1,
            busy_watts: 0.0,
            idle_watts: 0.0,
        },
    }
}

/// The units each device API of `apis` adds when `wanted` (the config,
/// through `opencl_units = true`, `cuda_units = true`) asks the daemon to
/// serve its devices, a client keeping up to `max_kept_bytes` on each: every
/// device that opens, as `served-<api><N>`, numbered after the platform's
/// `first_id` units (one kind each, after its `first_kind` kinds), with
/// the backend that runs its kernels. Where an API's driver is absent,
/// one line says why and it adds none: the daemon still starts.
fn served_units(
    apis: &[&dyn DeviceApi],
    wanted: impl Fn(&dyn DeviceApi) -> bool,
    max_kept_bytes: u64,
    first_id: usize,
    first_kind: usize,
) -> Vec<ServedUnit> {
    let mut out: Vec<ServedUnit> = Vec::new();
    for api in apis.iter().copied().filter(|a| wanted(*a)) {
        let devices = match api.open_served(max_kept_bytes) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(
                    "{} = true, but no {} device is served: {e}",
                    api.config_key(),
                    api.label()
                );
                continue;
            }
        };
        for (i, device) in devices.into_iter().enumerate() {
            let n = out.len();
            let setup = served_unit(
                first_id + n,
                first_kind + n,
                format!("served-{}{i}", api.name()),
                device.listed.class,
                format!("{}:{}", api.name(), device.listed.name),
                device.backend.kernels(),
            );
            tracing::info!(
                "serving {} device {} ({}) as {}",
                api.label(),
                device.listed.index,
                device.listed.name,
                setup.unit.name
            );
            out.push(ServedUnit {
                setup,
                backend: device.backend,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests;
