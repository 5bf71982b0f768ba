//! CPU topology from hwloc: PUs with their core, package and caches, and the
//! CPU kinds hwloc ranks by efficiency (most efficient, i.e. slowest, first).
//!
//! hwloc merges the kernel's views (sysfs capacity, cpufreq, cpuid hybrid
//! leaves, device tree) into one answer, which is why it is the first choice.

use crate::cpu::{CacheSizes, RawKind, RawPu};
use hwlocality::Topology;
use hwlocality::object::TopologyObject;
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::ObjectType;
use std::collections::BTreeMap;

/// What hwloc reported.
pub(crate) struct HwlocProbe {
    pub pus: Vec<RawPu>,
    /// Empty when hwloc has no CPU-kind information.
    pub kinds: Vec<RawKind>,
}

fn cache_size(pu: &TopologyObject, ty: ObjectType) -> Option<u64> {
    match pu.first_ancestor_with_type(ty)?.attributes()? {
        ObjectAttributes::Cache(c) => c.size().map(|s| s.get()),
        _ => None,
    }
}

/// Loads this machine's topology; `Err` carries hwloc's message for the
/// platform notes.
pub(crate) fn probe() -> Result<HwlocProbe, String> {
    let topology = Topology::new().map_err(|e| format!("hwloc topology load failed: {e}"))?;
    Ok(probe_topology(&topology))
}

/// Reads PUs and CPU kinds from a loaded topology (this machine's, or a
/// synthetic one in tests).
pub(crate) fn probe_topology(topology: &Topology) -> HwlocProbe {
    let kinds: Vec<(RawKind, Vec<usize>)> = match topology.cpu_kinds() {
        Ok(kinds) => kinds
            .map(|k| {
                let infos: BTreeMap<String, String> = k
                    .infos
                    .iter()
                    .map(|i| {
                        (
                            i.name().to_string_lossy().into_owned(),
                            i.value().to_string_lossy().into_owned(),
                        )
                    })
                    .collect();
                let pus = k.cpuset.iter_set().map(usize::from).collect();
                (
                    RawKind {
                        efficiency: k.efficiency,
                        infos,
                    },
                    pus,
                )
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    let pus = topology
        .objects_with_type(ObjectType::PU)
        .filter_map(|pu| {
            let os_index = pu.os_index()?;
            Some(RawPu {
                os_index,
                core: pu
                    .first_ancestor_with_type(ObjectType::Core)
                    .map(|c| c.logical_index()),
                package: pu
                    .first_ancestor_with_type(ObjectType::Package)
                    .map(|p| p.logical_index()),
                caches: CacheSizes {
                    l1d: cache_size(pu, ObjectType::L1Cache),
                    l2: cache_size(pu, ObjectType::L2Cache),
                    l3: cache_size(pu, ObjectType::L3Cache),
                },
                hw_kind: kinds.iter().position(|(_, set)| set.contains(&os_index)),
            })
        })
        .collect();
    HwlocProbe {
        pus,
        kinds: kinds.into_iter().map(|(k, _)| k).collect(),
    }
}
