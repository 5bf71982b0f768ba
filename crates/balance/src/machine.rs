//! The cores the balancer allocates: discovered kinds (hwloc/sysfs through
//! hetsched-platform), emulated slow kinds and capability overrides from
//! the configuration, and each kind's power model.

use crate::config::{BalanceConfig, ConfigError};
use hetsched_core::balance::PowerModel;
use hetsched_core::unit::Capabilities;
use hetsched_platform::cpu::{CpuTopology, discover_cpus};
use hetsched_platform::slow_cores::{CGROUP_CPU_ROOT, apply_slow_cores, set_up_throttle};
use std::path::{Path, PathBuf};

/// Frequency assumed where sysfs reports none (a VM): it only scales IPS.
const DEFAULT_HZ: f64 = 2.0e9;

/// One core (an OS CPU number) as the policies see it.
#[derive(Clone, Debug, PartialEq)]
pub struct Core {
    pub os_index: usize,
    pub kind: usize,
    pub caps: Capabilities,
    /// Size of its last-level cache, when the topology says.
    pub llc_bytes: Option<u64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Kind {
    pub name: String,
    /// Relative to the fastest kind's core (1.0).
    pub relative_speed: f64,
    /// Effective frequency: nominal × duty fraction for an emulated kind.
    pub hz: f64,
    /// Fraction of each core's time its threads may run: `speed` of an
    /// emulated slow kind, 1 for a real one.
    pub duty: f64,
    pub power: PowerModel,
    /// Throttling cgroup threads join to run at this kind's speed
    /// (emulated slow kinds only).
    pub throttle: Option<PathBuf>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct CoreMap {
    pub cores: Vec<Core>,
    pub kinds: Vec<Kind>,
}

/// Default power of a kind without a configured or measured model: a
/// core's busy power grows with its speed (fewer, faster cycles cost more
/// energy each), about 5 W at full speed like the platform's CPU units,
/// a tenth of that idle. An assumption, said so in `hetsched balance`'s
/// output: this machine has no RAPL to fit it from.
pub fn default_power(relative_speed: f64) -> PowerModel {
    let s = relative_speed.clamp(0.05, 4.0);
    PowerModel {
        watts_per_ipc: 2.5 * s * s,
        static_watts: 0.5 * s,
        sleep_watts: 0.05 * s,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("slow cores: {0}")]
    SlowCores(String),
    #[error("cannot set up the throttle of kind {kind}: {source}")]
    Throttle {
        kind: String,
        source: std::io::Error,
    },
}

impl CoreMap {
    /// Discovers this machine and applies the configuration. Emulated
    /// kinds get their throttling cgroup created (root needed).
    pub fn discover(cfg: &BalanceConfig) -> Result<CoreMap, MachineError> {
        let mut topo = discover_cpus();
        apply_slow_cores(&mut topo, &cfg.slow_cores)
            .map_err(|e| MachineError::SlowCores(e.to_string()))?;
        let mut map = Self::from_topology(&topo, cfg)?;
        for s in &cfg.slow_cores {
            let name = s.kind_name();
            let dir = set_up_throttle(Path::new(CGROUP_CPU_ROOT), &name, s.speed, 1).map_err(
                |source| MachineError::Throttle {
                    kind: name.clone(),
                    source,
                },
            )?;
            if let Some(k) = map.kinds.iter_mut().find(|k| k.name == name) {
                k.throttle = Some(dir);
            }
        }
        Ok(map)
    }

    /// The map of a known topology (no I/O): what tests and `discover` use.
    pub fn from_topology(topo: &CpuTopology, cfg: &BalanceConfig) -> Result<CoreMap, MachineError> {
        let fastest = topo
            .kinds
            .iter()
            .map(|k| k.relative_speed)
            .fold(0.0, f64::max)
            .max(f64::MIN_POSITIVE);
        let kinds: Vec<Kind> = topo
            .kinds
            .iter()
            .map(|k| {
                let nominal = topo
                    .cpus
                    .iter()
                    .filter(|c| k.os_indices.contains(&c.os_index))
                    .filter_map(|c| c.max_freq_khz)
                    .max()
                    .map_or(DEFAULT_HZ, |khz| khz as f64 * 1e3);
                let relative_speed = k.relative_speed / fastest;
                let slow = cfg.slow_cores.iter().find(|s| s.kind_name() == k.name);
                Kind {
                    name: k.name.clone(),
                    relative_speed,
                    hz: nominal * slow.map_or(1.0, |s| s.speed),
                    duty: slow.map_or(1.0, |s| s.speed),
                    power: cfg
                        .power
                        .get(&k.name)
                        .copied()
                        .unwrap_or_else(|| default_power(relative_speed)),
                    throttle: None,
                }
            })
            .collect();
        let mut cores: Vec<Core> = topo
            .cpus
            .iter()
            .map(|c| Core {
                os_index: c.os_index,
                kind: usize::from(c.kind.0),
                caps: topo.kinds[usize::from(c.kind.0)].caps,
                // The last level: L3 where the CPU has one.
                llc_bytes: c.caches.l3.or(c.caches.l2),
            })
            .collect();
        for (i, cc) in cfg.core_caps.iter().enumerate() {
            for &cpu in &cc.cpus {
                let core = cores
                    .iter_mut()
                    .find(|c| c.os_index == cpu)
                    .ok_or_else(|| ConfigError::Invalid {
                        field: format!("core_caps[{i}].cpus"),
                        reason: format!("CPU {cpu} is not on this machine"),
                    })?;
                for name in &cc.without {
                    let cap = Capabilities::parse_name(name).expect("validated");
                    core.caps = Capabilities(core.caps.0 & !cap.0);
                }
                for name in &cc.with {
                    core.caps = core
                        .caps
                        .union(Capabilities::parse_name(name).expect("validated"));
                }
            }
        }
        Ok(CoreMap { cores, kinds })
    }

    /// Whether there is anything to balance: two kinds, or one kind whose
    /// cores differ in capabilities.
    pub fn is_asymmetric(&self) -> bool {
        let first = self.cores.first();
        self.kinds.len() > 1 || first.is_some_and(|f| self.cores.iter().any(|c| c.caps != f.caps))
    }

    pub fn core_by_os_index(&self, os: usize) -> Option<usize> {
        self.cores.iter().position(|c| c.os_index == os)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_platform::SlowCoreConfig;
    use hetsched_platform::cpu::discover_cpus_from_sysfs;

    pub(crate) fn two_cpus() -> CpuTopology {
        let dir = tempfile::tempdir().unwrap();
        hetsched_platform::cpu::write_synthetic_sysfs(dir.path(), 2, |_| None).unwrap();
        discover_cpus_from_sysfs(dir.path())
    }

    #[test]
    fn a_slow_core_and_a_capability_override_make_an_asymmetric_map() {
        let mut topo = two_cpus();
        let cfg = BalanceConfig {
            slow_cores: vec![SlowCoreConfig {
                cpus: vec![1],
                speed: 0.4,
                kind: Some("little".into()),
            }],
            core_caps: vec![crate::config::CoreCapsConfig {
                cpus: vec![1],
                without: vec!["aes".into()],
                with: vec![],
            }],
            ..BalanceConfig::default()
        };
        let plain = CoreMap::from_topology(&topo, &BalanceConfig::default()).unwrap();
        assert_eq!(plain.kinds.len(), 1);
        apply_slow_cores(&mut topo, &cfg.slow_cores).unwrap();
        let map = CoreMap::from_topology(&topo, &cfg).unwrap();
        assert!(map.is_asymmetric());
        let little = map.kinds.iter().position(|k| k.name == "little").unwrap();
        let big = 1 - little;
        assert!((map.kinds[little].hz / map.kinds[big].hz - 0.4).abs() < 1e-9);
        let c1 = &map.cores[map.core_by_os_index(1).unwrap()];
        assert_eq!(c1.kind, little);
        assert!(!c1.caps.contains(Capabilities::AES));
        assert!(
            map.kinds[little].power.running_watts(1.0) < map.kinds[big].power.running_watts(1.0)
        );
    }

    #[test]
    fn an_override_for_a_missing_cpu_is_an_error() {
        let cfg = BalanceConfig {
            core_caps: vec![crate::config::CoreCapsConfig {
                cpus: vec![7],
                without: vec!["aes".into()],
                with: vec![],
            }],
            ..BalanceConfig::default()
        };
        let err = CoreMap::from_topology(&two_cpus(), &cfg).unwrap_err();
        assert!(err.to_string().contains("CPU 7"), "{err}");
    }
}
