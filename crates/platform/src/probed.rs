//! What the CPU probes (hwloc, sysfs) report, before `cpu` settles the
//! kinds: a leaf both probes and `cpu` import, so neither probe imports
//! the module that calls it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Data (or unified) cache sizes seen by one PU, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheSizes {
    pub l1d: Option<u64>,
    pub l2: Option<u64>,
    pub l3: Option<u64>,
}

/// A PU as a probe saw it, before kinds are settled.
pub(crate) struct RawPu {
    pub os_index: usize,
    pub core: Option<usize>,
    pub package: Option<usize>,
    pub caches: CacheSizes,
    /// Index into the probe's kinds, when it reported kinds.
    pub hw_kind: Option<usize>,
}

/// A CPU kind as hwloc reported it.
pub(crate) struct RawKind {
    pub efficiency: Option<usize>,
    pub infos: BTreeMap<String, String>,
}
