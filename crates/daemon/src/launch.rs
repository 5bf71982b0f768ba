//! From a config file to a [`DaemonSetup`]: discover the platform, pick
//! each unit's policy, resolve the admin group.

use crate::agent::UnitSetup;
use crate::config::DaemonConfig;
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
    #[error(
        "[[domains]] unit_credits names units that do not exist: {unknown}; units are: {known}"
    )]
    UnknownDomainUnit { unknown: String, known: String },
    #[error("admin_group {0:?} is not a group on this machine (see /etc/group)")]
    UnknownGroup(String),
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
        calibration_cache: cfg.calibration_cache.clone(),
        slow_cores: cfg.slow_cores.clone(),
    })?;
    let throttles = set_up_throttles(cfg, &platform)?;
    let names: Vec<&str> = platform
        .machine
        .units
        .iter()
        .map(|u| u.name.as_str())
        .collect();
    let unknown = cfg.unknown_policy_units(&names);
    if !unknown.is_empty() {
        return Err(LaunchError::UnknownPolicyUnit {
            unknown: unknown.join(", "),
            known: names.join(", "),
        });
    }
    let unknown = crate::domains::unknown_units(&cfg.domains, &names);
    if !unknown.is_empty() {
        return Err(LaunchError::UnknownDomainUnit {
            unknown: unknown.join(", "),
            known: names.join(", "),
        });
    }
    let admin_gid = match &cfg.admin_group {
        Some(g) => Some(procfs::group_gid(g).ok_or_else(|| LaunchError::UnknownGroup(g.clone()))?),
        None => None,
    };
    let units: Vec<UnitSetup> = platform
        .machine
        .units
        .iter()
        .map(|u| {
            let is_cpu = u.class == UnitClass::Cpu;
            let default = if is_cpu {
                PolicyKind::TimeShare
            } else {
                cfg.default_policy
            };
            UnitSetup {
                unit: u.clone(),
                kind_name: platform.machine.kinds[u.kind.index()].name.clone(),
                policy: cfg.policies.get(&u.name).copied().unwrap_or(default),
                // Every non-CPU unit the daemon knows today comes from
                // `[[emulated]]`; real devices get their own executors.
                emulated: !is_cpu,
                pus: platform
                    .cpus_of_kind(u.kind)
                    .filter(|_| is_cpu)
                    .map(|p| p.iter().map(|&c| c as u32).collect())
                    .unwrap_or_default(),
                throttle: throttles.get(&u.name).cloned(),
            }
        })
        .collect();
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
    let setup = DaemonSetup {
        socket: cfg.socket_path(),
        state_path: cfg.state_path(),
        monitor: MonitorConfig {
            max_outstanding: cfg.max_outstanding,
            max_device_ns: (cfg.max_device_seconds * 1e9) as u64,
            admin_gid,
            domains: cfg.domains.clone(),
        },
        units,
        tick: Duration::from_millis(cfg.tick_ms),
        cpu_scan: Duration::from_millis(cfg.cpu_scan_ms),
        cpu_nice_from_shares: cfg.cpu_nice_from_shares,
        cpu_cgroups: cfg.cpu_cgroups,
        accelerator_limits: cfg
            .emulated
            .iter()
            .map(|e| {
                let limits = crate::monitor::AcceleratorLimits {
                    memory_bytes: e.memory_bytes(),
                    max_clients: e.max_clients,
                };
                (e.name.clone(), limits)
            })
            .collect(),
        coordination: cfg.coordination,
        max_frame_bytes: cfg.max_frame_bytes,
        kind_of_cpu,
    };
    Ok((setup, platform))
}
