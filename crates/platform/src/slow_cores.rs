//! Emulated asymmetric cores on a homogeneous machine.
//!
//! The papers emulated slow cores with duty-cycle modulation; here a core
//! declared slow becomes a CPU kind of its own whose threads hetsched puts
//! in a cgroup with a CFS bandwidth quota of `speed` of each of its cores.
//! Placement, task models and the balancer then see a real second kind:
//! work there really runs at that fraction of a core.
//!
//! ```toml
//! [[slow_cores]]
//! cpus = [1]
//! speed = 0.5        # fraction of a full core, (0, 1)
//! kind = "little"    # default: "slow-50"
//! ```
//!
//! Only hetsched's own threads on the kind (runtime workers, balanced
//! threads) join the cgroup; other processes on the core are not throttled.

use crate::cpu::{CpuKind, CpuTopology};
use crate::error::ConfigError;
use hetsched_core::ids::{KindId, UnitId};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where the cgroup v1 `cpu` controller is mounted.
pub const CGROUP_CPU_ROOT: &str = "/sys/fs/cgroup/cpu";
/// CFS period of the throttling cgroups, µs. Short, so a throttled thread
/// runs in small slices (like a duty cycle) rather than in 100 ms bursts.
pub const THROTTLE_PERIOD_US: u64 = 10_000;

/// One `[[slow_cores]]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlowCoreConfig {
    /// OS CPU numbers that become the slow kind.
    pub cpus: Vec<usize>,
    /// Fraction of a full core each of them delivers, in (0, 1).
    pub speed: f64,
    /// Name of the new kind (and its unit); default `slow-<percent>`.
    #[serde(default)]
    pub kind: Option<String>,
}

impl SlowCoreConfig {
    pub fn kind_name(&self) -> String {
        self.kind
            .clone()
            .unwrap_or_else(|| format!("slow-{}", (self.speed * 100.0).round() as u32))
    }

    fn invalid(&self, field: &'static str, reason: String) -> ConfigError {
        ConfigError::Invalid {
            unit: format!("slow_cores {}", self.kind_name()),
            field,
            reason,
        }
    }
}

/// Splits the configured CPUs out of their kinds into slow kinds, keeping
/// the topology's order (slowest kind first; kind id = unit id = position).
pub fn apply_slow_cores(
    topo: &mut CpuTopology,
    slow: &[SlowCoreConfig],
) -> Result<(), ConfigError> {
    if slow.is_empty() {
        return Ok(());
    }
    let mut taken: Vec<usize> = Vec::new();
    let mut new_kinds = Vec::new();
    for s in slow {
        if !(s.speed > 0.0 && s.speed < 1.0) {
            return Err(s.invalid("speed", format!("is {}; it must be in (0, 1)", s.speed)));
        }
        if s.cpus.is_empty() {
            return Err(s.invalid("cpus", "is empty".into()));
        }
        let name = s.kind_name();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        {
            return Err(s.invalid(
                "kind",
                format!("{name:?} must be lowercase letters, digits, '-' and '_'"),
            ));
        }
        if topo.kinds.iter().any(|k| k.name == name)
            || new_kinds.iter().any(|k: &CpuKind| k.name == name)
        {
            return Err(ConfigError::DuplicateName { name });
        }
        let mut origin: Option<&CpuKind> = None;
        for &cpu in &s.cpus {
            if taken.contains(&cpu) {
                return Err(s.invalid("cpus", format!("CPU {cpu} is listed twice")));
            }
            let Some(kind) = topo.kinds.iter().find(|k| k.os_indices.contains(&cpu)) else {
                return Err(s.invalid(
                    "cpus",
                    format!(
                        "CPU {cpu} does not exist (this machine has {} PUs)",
                        topo.cpus.len()
                    ),
                ));
            };
            match origin {
                Some(o) if o.name != kind.name => {
                    return Err(s.invalid(
                        "cpus",
                        format!(
                            "mixes kinds {} and {}; list one kind's CPUs per table",
                            o.name, kind.name
                        ),
                    ));
                }
                _ => origin = Some(kind),
            }
            taken.push(cpu);
        }
        let origin = origin.expect("cpus is not empty");
        let mut cpus = s.cpus.clone();
        cpus.sort_unstable();
        let mut infos = origin.infos.clone();
        infos.insert("EmulatedSpeed".into(), format!("{}", s.speed));
        new_kinds.push(CpuKind {
            name,
            unit: UnitId(0),
            kind: KindId(0),
            efficiency: None,
            infos,
            os_indices: cpus,
            relative_speed: origin.relative_speed * s.speed,
            caps: origin.caps,
        });
    }
    for k in &mut topo.kinds {
        k.os_indices.retain(|c| !taken.contains(c));
    }
    topo.kinds.retain(|k| !k.os_indices.is_empty());
    topo.kinds.extend(new_kinds);
    // Slowest first, as discovery orders kinds; stable for equal speeds.
    topo.kinds
        .sort_by(|a, b| a.relative_speed.total_cmp(&b.relative_speed));
    for (i, k) in topo.kinds.iter_mut().enumerate() {
        k.kind = KindId(i as u16);
        k.unit = UnitId(i as u16);
    }
    for cpu in &mut topo.cpus {
        if let Some(k) = topo
            .kinds
            .iter()
            .find(|k| k.os_indices.contains(&cpu.os_index))
        {
            cpu.kind = k.kind;
        }
    }
    Ok(())
}

/// The cgroup a slow kind's threads join.
pub fn throttle_dir(root: &Path, kind: &str) -> PathBuf {
    root.join("hetsched").join(kind)
}

/// Creates (or updates) the throttling cgroup of a slow kind: `speed` of
/// each of its `cores`, in slices of [`THROTTLE_PERIOD_US`].
pub fn set_up_throttle(
    root: &Path,
    kind: &str,
    speed: f64,
    cores: usize,
) -> std::io::Result<PathBuf> {
    if !root.join("cpu.cfs_quota_us").exists() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "no cgroup v1 cpu controller at {} (slow cores need CFS bandwidth control)",
                root.display()
            ),
        ));
    }
    let dir = throttle_dir(root, kind);
    std::fs::create_dir_all(&dir)?;
    let quota =
        ((speed * THROTTLE_PERIOD_US as f64 * cores.max(1) as f64).round() as u64).max(1000);
    std::fs::write(
        dir.join("cpu.cfs_period_us"),
        THROTTLE_PERIOD_US.to_string(),
    )?;
    std::fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string())?;
    Ok(dir)
}

/// Moves thread `tid` into a throttling cgroup.
pub fn join_throttle(dir: &Path, tid: u32) -> std::io::Result<()> {
    std::fs::write(dir.join("tasks"), tid.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::discover_cpus_from_sysfs;

    fn two_core_topology() -> CpuTopology {
        let dir = tempfile::tempdir().unwrap();
        crate::cpu::write_synthetic_sysfs(dir.path(), 2, |_| None).unwrap();
        discover_cpus_from_sysfs(dir.path())
    }

    #[test]
    fn slow_core_becomes_the_first_kind() {
        let mut topo = two_core_topology();
        assert_eq!(topo.kinds.len(), 1, "{topo:?}");
        let slow = SlowCoreConfig {
            cpus: vec![1],
            speed: 0.5,
            kind: Some("little".into()),
        };
        apply_slow_cores(&mut topo, &[slow]).unwrap();
        let names: Vec<&str> = topo.kinds.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["little", "cpu"]);
        assert_eq!(topo.kinds[0].os_indices, [1]);
        assert_eq!(topo.kinds[1].os_indices, [0]);
        assert_eq!(
            topo.kinds[0].relative_speed,
            topo.kinds[1].relative_speed * 0.5
        );
        assert_eq!(
            (topo.kinds[0].kind, topo.kinds[0].unit),
            (KindId(0), UnitId(0))
        );
        let cpu1 = topo.cpus.iter().find(|c| c.os_index == 1).unwrap();
        assert_eq!(cpu1.kind, KindId(0));
        let cpu0 = topo.cpus.iter().find(|c| c.os_index == 0).unwrap();
        assert_eq!(cpu0.kind, KindId(1));
    }

    #[test]
    fn bad_slow_core_tables_are_refused_with_the_field() {
        let cases = [
            (vec![1], 1.5, None, "speed"),
            (vec![1], 0.0, None, "speed"),
            (vec![], 0.5, None, "cpus"),
            (vec![7], 0.5, None, "cpus"),
            (vec![1, 1], 0.5, None, "cpus"),
            (vec![1], 0.5, Some("Big Core"), "kind"),
        ];
        for (cpus, speed, kind, field) in cases {
            let mut topo = two_core_topology();
            let err = apply_slow_cores(
                &mut topo,
                &[SlowCoreConfig {
                    cpus,
                    speed,
                    kind: kind.map(String::from),
                }],
            )
            .unwrap_err();
            assert!(err.to_string().contains(field), "{err}");
        }
        let mut topo = two_core_topology();
        let err = apply_slow_cores(
            &mut topo,
            &[SlowCoreConfig {
                cpus: vec![1],
                speed: 0.5,
                kind: Some("cpu".into()),
            }],
        )
        .unwrap_err();
        assert!(matches!(err, ConfigError::DuplicateName { .. }), "{err}");
    }

    #[test]
    fn throttle_writes_quota_and_period() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cpu.cfs_quota_us"), "-1").unwrap();
        let dir = set_up_throttle(root.path(), "little", 0.25, 2).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("cpu.cfs_period_us")).unwrap(),
            "10000"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("cpu.cfs_quota_us")).unwrap(),
            "5000"
        );
        join_throttle(&dir, 1234).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("tasks")).unwrap(), "1234");
        let missing = tempfile::tempdir().unwrap();
        let err = set_up_throttle(missing.path(), "little", 0.5, 1).unwrap_err();
        assert!(
            err.to_string().contains("cgroup v1 cpu controller"),
            "{err}"
        );
    }
}
