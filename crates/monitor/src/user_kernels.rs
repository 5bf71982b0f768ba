//! Which client registered which kernel on which unit
//! (`RegisterKernel`), and the kernels' signatures: the monitor checks a
//! registered kernel's call against them before it enters the policy.
//! A client's kernels are built by the executor of its unit and user
//! ([`crate::kernel_exec::sandbox`]), numbered by that executor; each
//! client may call only what it registered itself, until it leaves, the
//! kernel is revoked for it, or its executor ends.

use hetsched_core::ids::{ClientId, UnitId};
use hetsched_protocol::kernel_call::KernelCallError;
use hetsched_protocol::user_kernel::{KernelSignature, UserKernelId};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A kernel a backend built for a client.
#[derive(Clone, Debug)]
pub struct Registered {
    pub id: UserKernelId,
    pub signature: KernelSignature,
    /// The compiler's messages (warnings), if it gave any.
    pub log: String,
    /// It had been built before, for this client or another.
    pub cached: bool,
}

#[derive(Debug, Default)]
pub struct UserKernelRegistry {
    entries: BTreeMap<(ClientId, UnitId, UserKernelId), Arc<KernelSignature>>,
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
            .insert((client, unit, kernel), Arc::new(signature));
    }

    /// Kernels `client` has registered, over all units.
    pub fn count(&self, client: ClientId) -> usize {
        self.of(client).count()
    }

    fn of(
        &self,
        client: ClientId,
    ) -> impl Iterator<Item = (&(ClientId, UnitId, UserKernelId), &Arc<KernelSignature>)> {
        let first = (client, UnitId(0), UserKernelId(0));
        self.entries
            .range(first..)
            .take_while(move |((c, _, _), _)| *c == client)
    }

    /// The signature of `kernel` on `unit`, if `client` registered it.
    pub fn signature(
        &self,
        client: ClientId,
        unit: UnitId,
        kernel: UserKernelId,
    ) -> Result<Arc<KernelSignature>, KernelCallError> {
        self.entries
            .get(&(client, unit, kernel))
            .map(Arc::clone)
            .ok_or(KernelCallError::NotRegistered { kernel })
    }

    /// `client` may no longer call `kernel` on `unit`.
    pub fn revoke(&mut self, client: ClientId, unit: UnitId, kernel: UserKernelId) {
        self.entries.remove(&(client, unit, kernel));
    }

    /// `client` may no longer call anything it registered on `unit` (the
    /// executor that built them ended).
    pub fn revoke_unit(&mut self, client: ClientId, unit: UnitId) {
        self.entries
            .retain(|(c, u, _), _| !(*c == client && *u == unit));
    }

    /// `client` left.
    pub fn remove_client(&mut self, client: ClientId) {
        self.entries.retain(|(c, _, _), _| *c != client);
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
        // The same number from another user's executor is another kernel.
        r.add(u, b, k, sig("other"));
        assert_eq!(r.signature(b, u, k).unwrap().entry, "other");
        assert_eq!(r.signature(a, u, k).unwrap().entry, "scale");
        assert_eq!(r.count(b), 1);
        r.remove_client(a);
        assert!(r.signature(a, u, k).is_err());
        assert!(r.signature(b, u, k).is_ok(), "b's registration stays");
        r.revoke(b, u, k);
        assert!(r.signature(b, u, k).is_err());
        assert_eq!(r.count(b), 0);
        r.add(u, b, UserKernelId(1), sig("x"));
        r.add(UnitId(4), b, UserKernelId(1), sig("x"));
        r.revoke_unit(b, u);
        assert_eq!(r.count(b), 1, "only the other unit's is left");
    }
}
