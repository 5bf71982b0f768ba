//! Shares belong to the process, not the connection: clients the caller
//! puts in one account (the connections of one process) that hold the same
//! class form one *standing*, with one entitlement and their usage summed.
//! A process that opens four connections then gets what one connection
//! would, and its connections divide it by use.
//!
//! Accounts are bookkeeping only; the share policy asks
//! [`Accounts::shared_standing`] for each client and groups the clients
//! whose standing is shared. While every account has a
//! single client nothing is grouped and decisions cost what they did.

use super::ShareClass;
use crate::ids::ClientId;
use rustc_hash::FxHashMap;

/// Who holds a share: an account with a class, or a client on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Standing {
    holder: Holder,
    /// The class as an ordered key: (0 custom | 1 normal | 2 background,
    /// shares).
    class: (u8, u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Holder {
    Account(u64),
    Alone(ClientId),
}

fn class_key(class: ShareClass) -> (u8, u32) {
    match class {
        ShareClass::Custom { shares } => (0, shares),
        ShareClass::Normal { shares } => (1, shares),
        ShareClass::Background => (2, 0),
    }
}

/// Looked up for every client of every decision: a fast hash (the keys are
/// the daemon's client ids and the kernel's pids).
#[derive(Debug, Default)]
pub(crate) struct Accounts {
    /// Each client's account, and whether that account has other clients.
    of: FxHashMap<ClientId, (u64, bool)>,
    members: FxHashMap<u64, Vec<ClientId>>,
}

impl Accounts {
    /// Puts `client` in `account`, or with `None` on its own.
    pub fn set(&mut self, client: ClientId, account: Option<u64>) {
        self.remove(client);
        let Some(a) = account else {
            return;
        };
        let members = self.members.entry(a).or_default();
        members.push(client);
        let shared = members.len() > 1;
        let first = members[0];
        self.of.insert(client, (a, shared));
        if shared {
            self.of.get_mut(&first).expect("a member has an account").1 = true;
        }
    }

    pub fn remove(&mut self, client: ClientId) {
        let Some((old, _)) = self.of.remove(&client) else {
            return;
        };
        let members = self
            .members
            .get_mut(&old)
            .expect("a member's account is listed");
        members.retain(|&c| c != client);
        match members[..] {
            [] => {
                self.members.remove(&old);
            }
            [last] => {
                self.of.get_mut(&last).expect("a member has an account").1 = false;
            }
            _ => {}
        }
    }

    /// Whether any account has more than one client.
    pub fn any_shared(&self) -> bool {
        self.members.values().any(|m| m.len() > 1)
    }

    pub fn standing(&self, client: ClientId, class: ShareClass) -> Standing {
        Standing {
            holder: self
                .of
                .get(&client)
                .map_or(Holder::Alone(client), |&(a, _)| Holder::Account(a)),
            class: class_key(class),
        }
    }

    /// `client`'s standing if its account has other clients (one lookup).
    pub fn shared_standing(&self, client: ClientId, class: ShareClass) -> Option<Standing> {
        match self.of.get(&client) {
            Some(&(account, true)) => Some(Standing {
                holder: Holder::Account(account),
                class: class_key(class),
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NORMAL: ShareClass = ShareClass::Normal { shares: 10 };

    fn is_shared(a: &Accounts, c: u32) -> bool {
        a.shared_standing(ClientId(c), NORMAL).is_some()
    }

    #[test]
    fn clients_of_one_account_with_one_class_share_a_standing() {
        let mut a = Accounts::default();
        a.set(ClientId(1), Some(7));
        a.set(ClientId(2), Some(7));
        a.set(ClientId(3), Some(8));
        assert!(is_shared(&a, 1) && !is_shared(&a, 3));
        assert!(!is_shared(&a, 4));
        assert_eq!(
            a.standing(ClientId(1), NORMAL),
            a.standing(ClientId(2), NORMAL)
        );
        assert_ne!(
            a.standing(ClientId(1), NORMAL),
            a.standing(ClientId(2), ShareClass::Background)
        );
        assert_ne!(
            a.standing(ClientId(1), NORMAL),
            a.standing(ClientId(3), NORMAL)
        );
        assert_ne!(
            a.standing(ClientId(4), NORMAL),
            a.standing(ClientId(5), NORMAL)
        );
        assert_eq!(a.shared_standing(ClientId(3), NORMAL), None);
        assert_eq!(
            a.shared_standing(ClientId(2), NORMAL),
            Some(a.standing(ClientId(1), NORMAL))
        );
        a.remove(ClientId(2));
        assert!(!is_shared(&a, 1) && !a.any_shared());
        a.set(ClientId(3), Some(7));
        assert!(is_shared(&a, 1) && a.any_shared());
        a.set(ClientId(3), None);
        assert!(!a.any_shared());
    }
}
