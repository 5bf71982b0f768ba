//! How much CPU each application is owed, in the kernel's units: its CPU
//! credits (Pegasus's CPU-side weight), the cgroup v1 `cpu.shares` and v2
//! `cpu.weight` they map to, and the cgroup the CPU agent wants each
//! client process in ([`CgroupTarget`]). Pure: the monitor computes these
//! targets; hetsched-daemon's `cpu_cgroups` writes them into the host's
//! cgroups (an embedded monitor writes nothing).

use crate::procfs::cfs_weight;
use hetsched_core::policy::{DEFAULT_NORMAL_SHARES, ShareClass};

/// Name of a daemon's parent cgroup, before its pid.
pub const PARENT_PREFIX: &str = "hetsched-cpu-";
/// Name of a configured domain's shared cgroup, before the domain's name.
pub const DOMAIN_PREFIX: &str = "domain-";
/// CFS bandwidth period the daemon sets with a ceiling, µs (the kernel's
/// default).
pub const CFS_PERIOD_US: u64 = 100_000;

/// cgroup v1 `cpu.shares` bounds (kernel `MIN_SHARES`, `MAX_SHARES`).
pub const V1_MIN_SHARES: u64 = 2;
pub const V1_MAX_SHARES: u64 = 262_144;
/// cgroup v2 `cpu.weight` bounds and the weight of a nice-0 thread.
pub const V2_MIN_WEIGHT: u64 = 1;
pub const V2_MAX_WEIGHT: u64 = 10_000;
pub const V2_DEFAULT_WEIGHT: u64 = 100;

/// A client's CPU credits (Pegasus's CPU-side weight) from its classes on
/// the CPU units, each with its number of cores: the core-weighted mean of
/// its shares, BACKGROUND counting 1. `None` without CPU units.
pub fn cpu_credits(classes: &[(ShareClass, u32)]) -> Option<u32> {
    weighted_mean(classes, |c| match c {
        ShareClass::Custom { shares } | ShareClass::Normal { shares } => f64::from(shares.max(1)),
        ShareClass::Background => 1.0,
    })
    .map(|m| (m.round() as u32).max(1))
}

/// The cgroup v1 `cpu.shares` of a client from its classes on the CPU
/// units: the default class gets nice 0's weight (1024) and other shares
/// in proportion, BACKGROUND the minimum; the core-weighted mean across
/// CPU kinds, within the kernel's bounds. `None` without CPU units.
pub fn cpu_shares(classes: &[(ShareClass, u32)]) -> Option<u64> {
    let nice0 = cfs_weight(0);
    weighted_mean(classes, |c| match c {
        ShareClass::Custom { shares } | ShareClass::Normal { shares } => {
            nice0 * f64::from(shares) / f64::from(DEFAULT_NORMAL_SHARES)
        }
        ShareClass::Background => V1_MIN_SHARES as f64,
    })
    .map(|m| (m.round() as u64).clamp(V1_MIN_SHARES, V1_MAX_SHARES))
}

/// cgroup v2 `cpu.weight` for a v1 `cpu.shares` value (1024 ↔ 100).
pub fn v2_weight(shares: u64) -> u64 {
    ((shares as f64 * V2_DEFAULT_WEIGHT as f64 / 1024.0).round() as u64)
        .clamp(V2_MIN_WEIGHT, V2_MAX_WEIGHT)
}

fn weighted_mean(classes: &[(ShareClass, u32)], value: impl Fn(ShareClass) -> f64) -> Option<f64> {
    if classes.is_empty() {
        return None;
    }
    let cores: f64 = classes.iter().map(|&(_, n)| f64::from(n.max(1))).sum();
    let sum: f64 = classes
        .iter()
        .map(|&(c, n)| f64::from(n.max(1)) * value(c))
        .sum();
    Some(sum / cores)
}

/// CFS quota per `period_us` for a ceiling of `cores` (at least the
/// kernel's 1 ms).
pub fn quota_us(cores: f64, period_us: u64) -> u64 {
    ((cores * period_us as f64).round() as u64).max(1000)
}

/// What the CPU agent wants for one client process.
#[derive(Clone, Debug, PartialEq)]
pub struct CgroupTarget {
    /// Its `cpu.shares` (v1 scale), from its CPU credits.
    pub shares: u64,
    /// The configured domain it belongs to: it then shares the domain's
    /// cgroup, weighed by its members' shares together and held to the
    /// domain's ceiling.
    pub domain: Option<DomainTarget>,
}

/// A configured domain's cgroup.
#[derive(Clone, Debug, PartialEq)]
pub struct DomainTarget {
    pub name: String,
    /// Ceiling in cores.
    pub cpu_cap: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const N10: ShareClass = ShareClass::Normal { shares: 10 };

    #[test]
    fn credits_are_the_shares_on_the_cpu_units() {
        assert_eq!(cpu_credits(&[]), None);
        assert_eq!(cpu_credits(&[(N10, 4)]), Some(10));
        assert_eq!(
            cpu_credits(&[(ShareClass::Normal { shares: 512 }, 8)]),
            Some(512)
        );
        assert_eq!(cpu_credits(&[(ShareClass::Background, 2)]), Some(1));
        // Two kinds: the mean weighted by cores.
        assert_eq!(
            cpu_credits(&[
                (ShareClass::Normal { shares: 30 }, 3),
                (ShareClass::Custom { shares: 10 }, 1)
            ]),
            Some(25)
        );
    }

    #[test]
    fn the_default_class_weighs_like_a_nice_0_thread() {
        assert_eq!(cpu_shares(&[(N10, 4)]), Some(1024));
        assert_eq!(
            cpu_shares(&[(ShareClass::Normal { shares: 30 }, 4)]),
            Some(3072)
        );
        assert_eq!(
            cpu_shares(&[(ShareClass::Background, 4)]),
            Some(V1_MIN_SHARES)
        );
        assert_eq!(
            cpu_shares(&[(ShareClass::Normal { shares: 1 << 20 }, 1)]),
            Some(V1_MAX_SHARES)
        );
        assert_eq!(cpu_shares(&[]), None);
        assert_eq!(v2_weight(1024), 100);
        assert_eq!(v2_weight(3072), 300);
        assert_eq!(v2_weight(2), 1);
        assert_eq!(v2_weight(V1_MAX_SHARES), V2_MAX_WEIGHT);
    }
}
