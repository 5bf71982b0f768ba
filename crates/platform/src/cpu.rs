//! CPU discovery: logical CPUs (PUs) grouped into CPU kinds.
//!
//! The scheduler sees one unit per CPU *kind* (big cores, little cores …),
//! because cores of one kind are interchangeable for task models; the daemon
//! and the balancer still need the PU list of each kind to pin threads, so
//! both views are kept.

use crate::isa::detect_cpu_caps;
pub use crate::probed::CacheSizes;
use crate::probed::{RawKind, RawPu};
use crate::sysfs;
use hetsched_core::ids::{KindId, UnitId};
use hetsched_core::unit::Capabilities;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// One logical CPU (hwloc PU).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuInfo {
    /// The OS number (`cpuN`, the index `sched_setaffinity` takes).
    pub os_index: usize,
    /// The PU's CPU kind; also its index in [`CpuTopology::kinds`].
    pub kind: KindId,
    /// Machine-wide core number (hwloc logical index, or sysfs `core_id`).
    pub core: Option<usize>,
    /// Package (socket) number.
    pub package: Option<usize>,
    /// Kernel capacity (`cpu_capacity`, 1024 = fastest), when reported.
    pub capacity: Option<u32>,
    /// `cpuinfo_max_freq` in kHz, when reported.
    pub max_freq_khz: Option<u64>,
    pub caches: CacheSizes,
}

/// What the relative speeds of CPU kinds were derived from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpeedBasis {
    /// Kernel capacity (hwloc `LinuxCapacity` or sysfs `cpu_capacity`).
    Capacity,
    /// Maximum frequency (hwloc `FrequencyMaxMHz` or cpufreq).
    Frequency,
    /// Nothing usable: every kind is assumed as fast as the others.
    Unknown,
}

impl SpeedBasis {
    /// Lowercase name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Capacity => "capacity",
            Self::Frequency => "frequency",
            Self::Unknown => "unknown",
        }
    }
}

/// One CPU kind: PUs that are interchangeable for scheduling.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuKind {
    /// Unit and kind name (`cpu` when there is one kind).
    pub name: String,
    /// The kind's unit: CPU kinds are the machine's first units, in order.
    pub unit: UnitId,
    /// The kind's id, equal to its position for the same reason.
    pub kind: KindId,
    /// hwloc efficiency rank (0 = most power-efficient), when known.
    pub efficiency: Option<usize>,
    /// hwloc info attributes (`CoreType`, `LinuxCapacity`, `FrequencyMaxMHz` …).
    pub infos: BTreeMap<String, String>,
    /// OS indices of this kind's PUs, ascending.
    pub os_indices: Vec<usize>,
    /// Per-core speed relative to the slowest kind (1.0).
    pub relative_speed: f64,
    pub caps: Capabilities,
}

/// Discovered CPUs and their kinds, ordered slowest (most efficient) kind first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuTopology {
    pub cpus: Vec<CpuInfo>,
    pub kinds: Vec<CpuKind>,
    pub speed_basis: SpeedBasis,
    /// Warnings (hwloc unavailable, files missing …).
    pub notes: Vec<String>,
}

/// Discovers the CPUs with hwloc, completed from sysfs; falls back to sysfs
/// alone (with a note) when hwloc cannot load a topology.
pub fn discover_cpus() -> CpuTopology {
    let root = Path::new(sysfs::SYSFS_CPU_ROOT);
    match crate::hwloc_probe::probe() {
        Ok(p) => from_probe(p, root),
        Err(e) => sysfs_fallback(root, e),
    }
}

fn from_probe(p: crate::hwloc_probe::HwlocProbe, root: &Path) -> CpuTopology {
    if p.pus.is_empty() {
        sysfs_fallback(root, "hwloc found no PUs".to_string())
    } else {
        build(p.pus, p.kinds, root, Vec::new())
    }
}

/// Writes a sysfs CPU directory for `cpus` single-threaded cores in one
/// package under `root`, with `capacity(cpu)` as `cpu_capacity` where it
/// gives one, so [`discover_cpus_from_sysfs`] sees a machine of that shape:
/// for tests and for benchmarks of machines other than this one.
pub fn write_synthetic_sysfs(
    root: &Path,
    cpus: usize,
    capacity: impl Fn(usize) -> Option<u32>,
) -> std::io::Result<()> {
    for cpu in 0..cpus {
        let d = root.join(format!("cpu{cpu}"));
        std::fs::create_dir_all(d.join("topology"))?;
        std::fs::write(d.join("topology/core_id"), cpu.to_string())?;
        std::fs::write(d.join("topology/physical_package_id"), "0")?;
        if let Some(c) = capacity(cpu) {
            std::fs::write(d.join("cpu_capacity"), c.to_string())?;
        }
    }
    let list = format!("0-{}", cpus.saturating_sub(1));
    std::fs::write(root.join("online"), &list)?;
    std::fs::write(root.join("possible"), &list)
}

/// Discovers the CPUs from a sysfs CPU directory alone (`root` is normally
/// [`sysfs::SYSFS_CPU_ROOT`]); kinds are PUs of equal capacity and frequency.
pub fn discover_cpus_from_sysfs(root: &Path) -> CpuTopology {
    let (pus, note) = sysfs::probe_pus(root);
    build(pus, Vec::new(), root, note.into_iter().collect())
}

fn sysfs_fallback(root: &Path, why: String) -> CpuTopology {
    let mut topo = discover_cpus_from_sysfs(root);
    topo.notes.insert(
        0,
        format!("hwloc unavailable ({why}); CPU topology from sysfs"),
    );
    topo
}

/// Settles kinds, completes PUs from sysfs and derives per-kind speeds.
fn build(
    mut pus: Vec<RawPu>,
    hw_kinds: Vec<RawKind>,
    root: &Path,
    mut notes: Vec<String>,
) -> CpuTopology {
    pus.sort_by_key(|p| p.os_index);
    let mut cpus: Vec<CpuInfo> = pus
        .iter()
        .map(|p| CpuInfo {
            os_index: p.os_index,
            kind: KindId(0),
            core: p.core,
            package: p.package,
            capacity: sysfs::capacity(root, p.os_index),
            max_freq_khz: sysfs::max_freq_khz(root, p.os_index),
            caches: p.caches,
        })
        .collect();

    let use_hw = !hw_kinds.is_empty() && pus.iter().all(|p| p.hw_kind.is_some());
    if !hw_kinds.is_empty() && !use_hw {
        notes.push("hwloc CPU kinds do not cover every PU; grouping by sysfs instead".into());
    }
    let mut raw_kinds: Vec<RawKind> = if use_hw {
        // Keep hwloc's order but drop kinds without any PU we know of.
        let mut remap = vec![None; hw_kinds.len()];
        let mut kept = Vec::new();
        for (i, k) in hw_kinds.into_iter().enumerate() {
            if pus.iter().any(|p| p.hw_kind == Some(i)) {
                remap[i] = Some(kept.len());
                kept.push(k);
            }
        }
        for (cpu, pu) in cpus.iter_mut().zip(&pus) {
            cpu.kind = kind_id(pu.hw_kind.and_then(|k| remap[k]).unwrap_or(0));
        }
        kept
    } else {
        group_by_sysfs(&mut cpus)
    };
    if raw_kinds.is_empty() {
        raw_kinds.push(RawKind {
            efficiency: None,
            infos: BTreeMap::new(),
        });
    }

    let caps = detect_cpu_caps();
    let (speeds, speed_basis) = kind_speeds(&raw_kinds, &cpus);
    let names = kind_names(&raw_kinds);
    let kinds = raw_kinds
        .into_iter()
        .zip(speeds)
        .zip(names)
        .enumerate()
        .map(|(i, ((k, relative_speed), name))| CpuKind {
            name,
            unit: UnitId(kind_id(i).0),
            kind: kind_id(i),
            efficiency: k.efficiency,
            infos: k.infos,
            os_indices: cpus
                .iter()
                .filter(|c| c.kind.index() == i)
                .map(|c| c.os_index)
                .collect(),
            relative_speed,
            caps,
        })
        .collect();
    CpuTopology {
        cpus,
        kinds,
        speed_basis,
        notes,
    }
}

/// CPU kind `i` as an id. Kinds are distinct core types or distinct
/// (capacity, frequency) pairs, a handful on any real machine, so the
/// saturation never happens; it only keeps a corrupt sysfs from wrapping.
fn kind_id(i: usize) -> KindId {
    KindId(u16::try_from(i).unwrap_or(u16::MAX))
}

/// Without hwloc kinds, PUs with equal (capacity, max frequency) form a kind;
/// kinds are ordered slowest first, like hwloc's efficiency ranking.
fn group_by_sysfs(cpus: &mut [CpuInfo]) -> Vec<RawKind> {
    let mut keys: Vec<(Option<u32>, Option<u64>)> =
        cpus.iter().map(|c| (c.capacity, c.max_freq_khz)).collect();
    keys.sort_unstable();
    keys.dedup();
    for c in cpus.iter_mut() {
        let i = keys
            .iter()
            .position(|k| *k == (c.capacity, c.max_freq_khz))
            .unwrap_or(0);
        c.kind = kind_id(i);
    }
    keys.iter()
        .map(|_| RawKind {
            efficiency: None,
            infos: BTreeMap::new(),
        })
        .collect()
}

fn mean<I: Iterator<Item = f64>>(it: I) -> Option<f64> {
    let (sum, n) = it.fold((0.0, 0u32), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / f64::from(n))
}

fn info_f64(k: &RawKind, key: &str) -> Option<f64> {
    k.infos
        .get(key)?
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| *v > 0.0)
}

/// Per-kind speed relative to the slowest kind: from capacity when every
/// kind has one, else from maximum frequency, else 1.0 for all.
fn kind_speeds(kinds: &[RawKind], cpus: &[CpuInfo]) -> (Vec<f64>, SpeedBasis) {
    let of_kind = |i: usize| cpus.iter().filter(move |c| c.kind.index() == i);
    let capacity: Option<Vec<f64>> = (0..kinds.len())
        .map(|i| {
            info_f64(&kinds[i], "LinuxCapacity")
                .or_else(|| mean(of_kind(i).filter_map(|c| c.capacity.map(f64::from))))
        })
        .collect();
    let frequency: Option<Vec<f64>> = (0..kinds.len())
        .map(|i| {
            info_f64(&kinds[i], "FrequencyMaxMHz")
                .map(|mhz| mhz * 1e3)
                .or_else(|| mean(of_kind(i).filter_map(|c| c.max_freq_khz.map(|f| f as f64))))
        })
        .collect();
    let (metric, basis) = match (capacity, frequency) {
        (Some(c), _) => (c, SpeedBasis::Capacity),
        (None, Some(f)) => (f, SpeedBasis::Frequency),
        (None, None) => return (vec![1.0; kinds.len()], SpeedBasis::Unknown),
    };
    let slowest = metric.iter().copied().fold(f64::INFINITY, f64::min);
    (metric.iter().map(|m| m / slowest).collect(), basis)
}

/// `cpu` for a single kind; otherwise `cpu-<coretype>` when hwloc names every
/// kind's core type distinctly, else `cpu-kind<i>`.
fn kind_names(kinds: &[RawKind]) -> Vec<String> {
    if kinds.len() == 1 {
        return vec!["cpu".to_string()];
    }
    let from_type: Vec<Option<String>> = kinds
        .iter()
        .map(|k| {
            let t: String = k
                .infos
                .get("CoreType")?
                .chars()
                .filter(|c| c.is_ascii_alphanumeric())
                .map(|c| c.to_ascii_lowercase())
                .collect();
            (!t.is_empty()).then(|| format!("cpu-{t}"))
        })
        .collect();
    let mut distinct: Vec<_> = from_type.iter().flatten().collect();
    distinct.sort();
    distinct.dedup();
    if distinct.len() == kinds.len() {
        from_type.into_iter().flatten().collect()
    } else {
        (0..kinds.len()).map(|i| format!("cpu-kind{i}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(infos: &[(&str, &str)]) -> RawKind {
        RawKind {
            efficiency: None,
            infos: infos
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
        }
    }

    fn cpu(os_index: usize, kind: u16) -> CpuInfo {
        CpuInfo {
            os_index,
            kind: KindId(kind),
            core: None,
            package: None,
            capacity: None,
            max_freq_khz: None,
            caches: CacheSizes::default(),
        }
    }

    /// A synthetic hybrid machine: 2 efficient cores (PUs 0-3) and 2
    /// performance cores (PUs 4-7), registered as hwloc CPU kinds.
    #[test]
    fn hwloc_kinds_become_cpu_kinds() {
        let topo = crate::hwloc_probe::synthetic(
            "pack:1 l3:1 core:4 l2:1 l1d:1 pu:2",
            &[
                (
                    0..=3,
                    0,
                    &[("CoreType", "IntelAtom"), ("FrequencyMaxMHz", "2000")],
                ),
                (
                    4..=7,
                    1,
                    &[("CoreType", "IntelCore"), ("FrequencyMaxMHz", "4000")],
                ),
            ],
        )
        .expect("hwloc (libhwloc.so.15) builds a synthetic machine");
        let empty_sysfs = std::env::temp_dir().join("hetsched-no-such-sysfs");
        let t = from_probe(crate::hwloc_probe::probe_topology(&topo), &empty_sysfs);
        let names: Vec<_> = t.kinds.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["cpu-intelatom", "cpu-intelcore"]);
        assert_eq!(t.kinds[0].os_indices, [0, 1, 2, 3]);
        assert_eq!(t.kinds[1].os_indices, [4, 5, 6, 7]);
        assert_eq!(t.speed_basis, SpeedBasis::Frequency);
        assert_eq!(t.kinds[1].relative_speed, 2.0);
        assert_eq!(t.kinds[1].efficiency, Some(1));
        assert_eq!(t.cpus[5].kind, KindId(1));
        assert_eq!(t.cpus[5].core, Some(2));
        assert!(t.cpus[0].caches.l1d.is_some() && t.cpus[0].caches.l3.is_some());
        assert!(t.notes.is_empty(), "{:?}", t.notes);
    }

    #[test]
    fn names_from_core_type() {
        let k = [
            kind(&[("CoreType", "IntelAtom")]),
            kind(&[("CoreType", "IntelCore")]),
        ];
        assert_eq!(kind_names(&k), ["cpu-intelatom", "cpu-intelcore"]);
        let k = [kind(&[("CoreType", "X")]), kind(&[])];
        assert_eq!(kind_names(&k), ["cpu-kind0", "cpu-kind1"]);
        assert_eq!(kind_names(&[kind(&[])]), ["cpu"]);
    }

    #[test]
    fn speeds_prefer_capacity_then_frequency() {
        let k = [
            kind(&[("LinuxCapacity", "512"), ("FrequencyMaxMHz", "2000")]),
            kind(&[("LinuxCapacity", "1024"), ("FrequencyMaxMHz", "3000")]),
        ];
        let cpus = [cpu(0, 0), cpu(1, 1)];
        let (s, b) = kind_speeds(&k, &cpus);
        assert_eq!((s, b), (vec![1.0, 2.0], SpeedBasis::Capacity));

        let k = [kind(&[("FrequencyMaxMHz", "2000")]), kind(&[])];
        let mut cpus = [cpu(0, 0), cpu(1, 1)];
        cpus[1].max_freq_khz = Some(3_000_000);
        let (s, b) = kind_speeds(&k, &cpus);
        assert_eq!((s, b), (vec![1.0, 1.5], SpeedBasis::Frequency));

        let (s, b) = kind_speeds(&[kind(&[]), kind(&[])], &[cpu(0, 0), cpu(1, 1)]);
        assert_eq!((s, b), (vec![1.0, 1.0], SpeedBasis::Unknown));
    }
}
