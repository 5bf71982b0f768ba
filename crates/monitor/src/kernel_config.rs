//! Who may register kernels with the units the daemon serves
//! (`kernel_users`, `kernel_groups`), and what one client's builds may
//! cost (`[kernels]`). Resolved from the config at launch
//! ([`KernelPolicy::resolve`]) into numbers the monitor checks each
//! `RegisterKernel` against.

use crate::privilege::Peer;
use serde::Deserialize;

/// `[kernels]`: what one client's registered kernels may cost.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KernelsConfig {
    /// Kernels one client may have registered at once, over all units
    /// (1..=1024, default 32). Counted against the client, freed when it
    /// leaves.
    pub max_per_client: usize,
    /// Largest kernel source one client may register, KiB (1..=1024,
    /// default 256).
    pub max_source_kb: usize,
    /// Longest one build may take, s (a number in (0, 3600], default
    /// 30): past it the client's executor is killed and the build refused.
    pub compile_seconds: f64,
    /// Most memory one build may add to its executor, MiB (16..=1048576,
    /// default 2048): past it the build fails and the executor goes.
    pub compile_memory_mb: u64,
}

impl Default for KernelsConfig {
    fn default() -> Self {
        KernelsConfig {
            max_per_client: 32,
            max_source_kb: 256,
            compile_seconds: 30.0,
            compile_memory_mb: 2048,
        }
    }
}

impl KernelsConfig {
    /// The keys within their documented ranges.
    pub fn check(&self) -> Result<(), String> {
        let within = |key: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("kernels.{key} = {v} is outside {lo}..={hi}"))
            }
        };
        within("max_per_client", self.max_per_client as u64, 1, 1024)?;
        within("max_source_kb", self.max_source_kb as u64, 1, 1024)?;
        within("compile_memory_mb", self.compile_memory_mb, 16, 1 << 20)?;
        if !(self.compile_seconds > 0.0 && self.compile_seconds <= 3600.0) {
            return Err(format!(
                "kernels.compile_seconds = {} is outside (0, 3600]",
                self.compile_seconds
            ));
        }
        Ok(())
    }
}

/// The limits of one client's builds, in the units the checks use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelLimits {
    pub max_per_client: usize,
    pub max_source_bytes: usize,
    pub compile_ns: u64,
    pub compile_memory_bytes: u64,
}

impl Default for KernelLimits {
    fn default() -> Self {
        KernelLimits::from(&KernelsConfig::default())
    }
}

impl From<&KernelsConfig> for KernelLimits {
    fn from(c: &KernelsConfig) -> Self {
        KernelLimits {
            max_per_client: c.max_per_client,
            max_source_bytes: c.max_source_kb << 10,
            compile_ns: (c.compile_seconds * 1e9) as u64,
            compile_memory_bytes: c.compile_memory_mb << 20,
        }
    }
}

/// Who may register kernels: root always, and the configured users and
/// groups (a member by primary or supplementary group).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelPolicy {
    pub uids: Vec<u32>,
    pub gids: Vec<u32>,
    pub limits: KernelLimits,
}

impl KernelPolicy {
    /// The config's names (or numbers) as ids; an error names one that
    /// this machine does not know.
    pub fn resolve(
        users: &[String],
        groups: &[String],
        kernels: &KernelsConfig,
    ) -> Result<KernelPolicy, String> {
        let uids = users
            .iter()
            .map(|u| {
                u.parse()
                    .ok()
                    .or_else(|| crate::procfs::user_uid(u))
                    .ok_or_else(|| format!("kernel_users: no user named {u:?}"))
            })
            .collect::<Result<_, _>>()?;
        let gids = groups
            .iter()
            .map(|g| {
                g.parse()
                    .ok()
                    .or_else(|| crate::procfs::group_gid(g))
                    .ok_or_else(|| format!("kernel_groups: no group named {g:?}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(KernelPolicy {
            uids,
            gids,
            limits: KernelLimits::from(kernels),
        })
    }

    /// Whether `peer` may register kernels.
    pub fn allows(&self, peer: &Peer) -> bool {
        peer.uid == 0
            || self.uids.contains(&peer.uid)
            || self
                .gids
                .iter()
                .any(|g| peer.gid == *g || peer.groups.contains(g))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gid: u32, groups: &[u32]) -> Peer {
        Peer {
            pid: 1,
            uid,
            gid,
            groups: groups.to_vec(),
            start_time: 0,
            ancestors: Vec::new(),
        }
    }

    #[test]
    fn root_only_unless_configured() {
        let p = KernelPolicy::default();
        assert!(p.allows(&peer(0, 0, &[])));
        assert!(!p.allows(&peer(1000, 1000, &[])));
        let p = KernelPolicy::resolve(&["1000".into()], &["27".into()], &KernelsConfig::default())
            .unwrap();
        assert!(p.allows(&peer(1000, 1000, &[])));
        assert!(p.allows(&peer(1001, 1001, &[27])), "a supplementary group");
        assert!(p.allows(&peer(1002, 27, &[])), "the primary group");
        assert!(!p.allows(&peer(1003, 1003, &[4])));
        let err = KernelPolicy::resolve(&["no-such-user-x".into()], &[], &KernelsConfig::default())
            .unwrap_err();
        assert!(err.contains("no-such-user-x"), "{err}");
    }

    #[test]
    fn limits_are_bounded() {
        assert!(KernelsConfig::default().check().is_ok());
        let bad = KernelsConfig {
            compile_seconds: f64::NAN,
            ..Default::default()
        };
        assert!(bad.check().unwrap_err().contains("compile_seconds"));
        let bad = KernelsConfig {
            max_per_client: 0,
            ..Default::default()
        };
        assert!(bad.check().unwrap_err().contains("max_per_client"));
    }
}
