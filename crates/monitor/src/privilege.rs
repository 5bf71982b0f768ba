//! Who may change what (DESIGN "Rules of the road"): root and members of
//! the admin group may set anything on anyone; others may only *lower*
//! the standing of their own processes, and never into CUSTOM.

use hetsched_core::policy::{ClientSettings, ShareClass};

/// The credentials of a connected process, from SO_PEERCRED and /proc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (from `/proc/PID/status`).
    pub groups: Vec<u32>,
    /// Start time of the process in clock ticks since boot
    /// (`/proc/PID/stat` field 22): with the pid, it names one process
    /// across daemon restarts even when pids are reused.
    pub start_time: u64,
    /// Its parent, grandparent and so on (nearest first, init left out):
    /// a process without settings of its own inherits its nearest
    /// ancestor's, as it inherits its nice level.
    pub ancestors: Vec<crate::store::ProcessKey>,
}

impl Peer {
    pub fn is_admin(&self, admin_gid: Option<u32>) -> bool {
        self.uid == 0 || admin_gid.is_some_and(|g| self.gid == g || self.groups.contains(&g))
    }
}

/// Rank of a class: higher gets the unit first.
fn rank(class: ShareClass) -> (u8, u32) {
    match class {
        ShareClass::Background => (0, 0),
        ShareClass::Normal { shares } => (1, shares),
        ShareClass::Custom { shares } => (2, shares),
    }
}

/// Whether `actor` may move `target` (a process of `target_uid`) from
/// `old` to `new`. `Err` says why not, in words for the user.
pub fn may_change(
    actor: &Peer,
    admin_gid: Option<u32>,
    target_uid: u32,
    old: ClientSettings,
    new: ClientSettings,
) -> Result<(), String> {
    if actor.is_admin(admin_gid) {
        return Ok(());
    }
    let admins = match admin_gid {
        Some(g) => format!("root or members of the admin group (gid {g})"),
        None => "root".to_string(),
    };
    if actor.uid != target_uid {
        return Err(format!(
            "only {admins} may change the settings of another user's process"
        ));
    }
    let entering_custom = matches!(new.class, ShareClass::Custom { .. })
        && !matches!(old.class, ShareClass::Custom { .. });
    if entering_custom {
        return Err(format!(
            "only {admins} may put a process in the CUSTOM class"
        ));
    }
    if rank(new.class) > rank(old.class) {
        return Err(format!(
            "a process may only lower its own class or shares ({} → {} is a raise); ask {admins}",
            describe(old.class),
            describe(new.class)
        ));
    }
    if new.priority > old.priority {
        return Err(format!(
            "a process may only lower its own priority ({} → {}); ask {admins}",
            old.priority, new.priority
        ));
    }
    Ok(())
}

fn describe(class: ShareClass) -> String {
    match class {
        ShareClass::Custom { shares } => format!("custom:{shares}"),
        ShareClass::Normal { shares } => format!("normal:{shares}"),
        ShareClass::Background => "background".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gid: u32, groups: &[u32]) -> Peer {
        Peer {
            pid: 100,
            uid,
            gid,
            groups: groups.to_vec(),
            start_time: 1,
            ancestors: Vec::new(),
        }
    }

    fn normal(shares: u32) -> ClientSettings {
        ClientSettings {
            class: ShareClass::Normal { shares },
            priority: 0,
        }
    }

    #[test]
    fn root_and_admin_group_may_do_anything() {
        let custom = ClientSettings {
            class: ShareClass::Custom { shares: 60 },
            priority: 5,
        };
        assert!(may_change(&peer(0, 0, &[]), None, 1000, normal(10), custom).is_ok());
        assert!(may_change(&peer(1000, 1000, &[50]), Some(50), 2000, normal(10), custom).is_ok());
    }

    #[test]
    fn users_may_only_lower_their_own() {
        let user = peer(1000, 1000, &[]);
        assert!(may_change(&user, None, 1000, normal(10), normal(5)).is_ok());
        let bg = ClientSettings {
            class: ShareClass::Background,
            priority: 0,
        };
        assert!(may_change(&user, None, 1000, normal(10), bg).is_ok());
        let err = may_change(&user, None, 1000, normal(10), normal(20)).unwrap_err();
        assert!(err.contains("only lower"), "{err}");
        let err = may_change(&user, None, 1000, bg, normal(1)).unwrap_err();
        assert!(err.contains("raise"), "{err}");
        let custom = ClientSettings {
            class: ShareClass::Custom { shares: 1 },
            priority: 0,
        };
        let err = may_change(&user, Some(7), 1000, normal(10), custom).unwrap_err();
        assert!(err.contains("CUSTOM") && err.contains("gid 7"), "{err}");
        let err = may_change(&user, None, 2000, normal(10), normal(5)).unwrap_err();
        assert!(err.contains("another user's"), "{err}");
        let up = ClientSettings {
            priority: 3,
            ..normal(10)
        };
        assert!(
            may_change(&user, None, 1000, normal(10), up)
                .unwrap_err()
                .contains("priority")
        );
    }
}
