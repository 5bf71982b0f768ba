//! Who may hold a connection: at most `max_connections_per_uid` per user
//! and `max_connections` in all, so one local user cannot take every
//! descriptor and thread the daemon has and lock the others out. Root's
//! connections (and the daemon's own user's) are always admitted, beyond
//! the total: an administrator can reach a daemon that others have filled.
//!
//! A state machine: the server asks [`Admission::admit`] for each accepted
//! connection and keeps the [`Admitted`] ticket until the connection ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Limits from the config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub per_uid: u32,
    pub total: u32,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            per_uid: 256,
            total: 4096,
        }
    }
}

/// Why a connection was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "user {uid} already holds {limit} connections to the daemon (max_connections_per_uid); \
         close some and try again"
    )]
    PerUid { uid: u32, limit: u32 },
    #[error(
        "the daemon holds {limit} connections already (max_connections); try again later, or \
         ask an administrator (root is always let in)"
    )]
    Total { limit: u32 },
}

#[derive(Debug, Default)]
struct Counts {
    by_uid: HashMap<u32, u32>,
    /// Connections that count against the total (not privileged ones).
    total: u32,
}

/// The connections held now, per user.
#[derive(Debug, Clone)]
pub struct Admission {
    limits: ConnectionLimits,
    /// Users always admitted: root, and the daemon's own.
    privileged: [u32; 2],
    counts: Arc<Mutex<Counts>>,
}

/// A connection's place; it is given back when dropped.
#[derive(Debug)]
pub struct Admitted {
    uid: u32,
    counted: bool,
    counts: Arc<Mutex<Counts>>,
}

impl Admission {
    pub fn new(limits: ConnectionLimits, daemon_uid: u32) -> Admission {
        Admission {
            limits,
            privileged: [0, daemon_uid],
            counts: Arc::default(),
        }
    }

    /// Admits a connection of `uid`, or says why not.
    pub fn admit(&self, uid: u32) -> Result<Admitted, Refused> {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let privileged = self.privileged.contains(&uid);
        let held = c.by_uid.get(&uid).copied().unwrap_or(0);
        if !privileged {
            if held >= self.limits.per_uid {
                return Err(Refused::PerUid {
                    uid,
                    limit: self.limits.per_uid,
                });
            }
            if c.total >= self.limits.total {
                return Err(Refused::Total {
                    limit: self.limits.total,
                });
            }
            c.total += 1;
        }
        *c.by_uid.entry(uid).or_insert(0) += 1;
        Ok(Admitted {
            uid,
            counted: !privileged,
            counts: Arc::clone(&self.counts),
        })
    }

    /// Connections `uid` holds now.
    pub fn held_by(&self, uid: u32) -> u32 {
        let c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        c.by_uid.get(&uid).copied().unwrap_or(0)
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = c.by_uid.get_mut(&self.uid) {
            *n -= 1;
            if *n == 0 {
                c.by_uid.remove(&self.uid);
            }
        }
        if self.counted {
            c.total -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission() -> Admission {
        Admission::new(
            ConnectionLimits {
                per_uid: 2,
                total: 3,
            },
            999,
        )
    }

    #[test]
    fn one_user_cannot_take_more_than_its_share() {
        let a = admission();
        let held: Vec<_> = (0..2).map(|_| a.admit(1000).unwrap()).collect();
        assert_eq!(
            a.admit(1000).unwrap_err(),
            Refused::PerUid {
                uid: 1000,
                limit: 2
            }
        );
        // Another user still gets in.
        let other = a.admit(1001).unwrap();
        // The total is reached for everyone but root and the daemon's user.
        assert_eq!(a.admit(1002).unwrap_err(), Refused::Total { limit: 3 });
        let root: Vec<_> = (0..10).map(|_| a.admit(0).unwrap()).collect();
        let own = a.admit(999).unwrap();
        assert_eq!(a.held_by(0), 10);
        drop((root, own, other));
        drop(held);
        assert_eq!(a.held_by(1000), 0);
        // Everything given back: all can connect again.
        let _again: Vec<_> = (0..2).map(|_| a.admit(1000).unwrap()).collect();
        let _third = a.admit(1002).unwrap();
    }
}
