//! What the units offer the applications: [`UnitSupply`], and what is left
//! of it once other work is taken out ([`supply_left`]).

use super::*;

/// What one unit offers.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitSupply {
    /// Parallel slots.
    pub slots: f64,
    /// Processor sharing (a CPU group) rather than a queue (a device).
    pub time_shared: bool,
    /// A queue that runs short tasks first within a bound
    /// ([`crate::policy::short_first`]) rather than in arrival order.
    #[serde(default)]
    pub short_first: bool,
    /// The unit's agent splits its time among the apps by their
    /// entitlements (the share policy) rather than serving them in turn,
    /// so their native throughput there is estimated by their weights
    /// ([`super::native_split`]).
    #[serde(default)]
    pub splits_by_weight: bool,
}

impl UnitSupply {
    /// A device: a queue on `slots` servers, in arrival order.
    pub fn queue(slots: f64) -> Self {
        UnitSupply {
            slots,
            time_shared: false,
            short_first: false,
            splits_by_weight: false,
        }
    }

    /// A CPU group of `slots` cores under processor sharing.
    pub fn processor_shared(slots: f64) -> Self {
        UnitSupply {
            slots,
            time_shared: true,
            short_first: false,
            splits_by_weight: false,
        }
    }

    /// The same unit, its time split among the apps by their weights (a
    /// share-policy agent's).
    pub fn with_weight_split(self) -> Self {
        UnitSupply {
            splits_by_weight: true,
            ..self
        }
    }

    /// The same queue, able to run short-first.
    pub fn with_short_first(self) -> Self {
        UnitSupply {
            short_first: !self.time_shared,
            ..self
        }
    }
}

/// What of `supply` is left to the coordinated apps: each unit less
/// `reserved` (slots used there by apps the coordinator does not place),
/// and the processor-shared units less `host_slots` (cores the apps' host
/// sides keep busy, which share those units' cores), split by their slots.
/// Never below zero.
pub fn supply_left(supply: &[UnitSupply], reserved: &[f64], host_slots: f64) -> Vec<UnitSupply> {
    let cpu_slots: f64 = supply
        .iter()
        .filter(|s| s.time_shared)
        .map(|s| s.slots)
        .sum();
    supply
        .iter()
        .enumerate()
        .map(|(u, s)| {
            let mut taken = reserved.get(u).copied().unwrap_or(0.0);
            if s.time_shared && cpu_slots > 0.0 {
                taken += host_slots * s.slots / cpu_slots;
            }
            UnitSupply {
                slots: (s.slots - taken).max(0.0),
                ..*s
            }
        })
        .collect()
}
