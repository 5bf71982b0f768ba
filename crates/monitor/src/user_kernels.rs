//! Which client registered which kernel on which unit
//! (`RegisterKernel`), and the kernels' signatures: the monitor checks a
//! registered kernel's call against them before it enters the policy.
//! A unit builds a kernel once and gives it one number for every client
//! that registers the same source; each client may call only what it
//! registered itself, until it leaves or the kernel is revoked for it.

use hetsched_core::ids::{ClientId, UnitId};
use hetsched_protocol::kernel_call::KernelCallError;
use hetsched_protocol::user_kernel::{KernelSignature, UserKernelId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Most kernels one client may have registered at once, over all units.
pub const MAX_KERNELS_PER_CLIENT: usize = 32;

#[derive(Debug)]
struct Entry {
    signature: Arc<KernelSignature>,
    clients: BTreeSet<ClientId>,
}

#[derive(Debug, Default)]
pub struct UserKernelRegistry {
    entries: BTreeMap<(UnitId, UserKernelId), Entry>,
}

impl UserKernelRegistry {
    /// `client` may call `kernel` on `unit`, of this `signature`.
    pub fn add(
        &mut self,
        unit: UnitId,
        client: ClientId,
        kernel: UserKernelId,
        signature: KernelSignature,
    ) {
        self.entries
            .entry((unit, kernel))
            .or_insert_with(|| Entry {
                signature: Arc::new(signature),
                clients: BTreeSet::new(),
            })
            .clients
            .insert(client);
    }

    /// Kernels `client` has registered, over all units.
    pub fn count(&self, client: ClientId) -> usize {
        self.entries
            .values()
            .filter(|e| e.clients.contains(&client))
            .count()
    }

    /// The signature of `kernel` on `unit`, if `client` registered it.
    pub fn signature(
        &self,
        client: ClientId,
        unit: UnitId,
        kernel: UserKernelId,
    ) -> Result<Arc<KernelSignature>, KernelCallError> {
        self.entries
            .get(&(unit, kernel))
            .filter(|e| e.clients.contains(&client))
            .map(|e| Arc::clone(&e.signature))
            .ok_or(KernelCallError::NotRegistered { kernel })
    }

    /// `client` may no longer call `kernel` on `unit`.
    pub fn revoke(&mut self, client: ClientId, unit: UnitId, kernel: UserKernelId) {
        if let Some(e) = self.entries.get_mut(&(unit, kernel)) {
            e.clients.remove(&client);
        }
    }

    /// `client` left.
    pub fn remove_client(&mut self, client: ClientId) {
        for e in self.entries.values_mut() {
            e.clients.remove(&client);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(entry: &str) -> KernelSignature {
        KernelSignature {
            entry: entry.into(),
            params: Vec::new(),
        }
    }

    #[test]
    fn a_client_calls_only_what_it_registered_until_it_leaves() {
        let mut r = UserKernelRegistry::default();
        let (a, b) = (ClientId(1), ClientId(2));
        let (u, k) = (UnitId(3), UserKernelId(0));
        r.add(u, a, k, sig("scale"));
        assert_eq!(r.signature(a, u, k).unwrap().entry, "scale");
        assert_eq!(
            r.signature(b, u, k),
            Err(KernelCallError::NotRegistered { kernel: k })
        );
        assert!(r.signature(a, UnitId(4), k).is_err(), "another unit");
        r.add(u, b, k, sig("scale"));
        assert_eq!(r.count(b), 1);
        r.remove_client(a);
        assert!(r.signature(a, u, k).is_err());
        assert!(r.signature(b, u, k).is_ok(), "b's registration stays");
        r.revoke(b, u, k);
        assert!(r.signature(b, u, k).is_err());
        assert_eq!(r.count(b), 0);
    }
}
