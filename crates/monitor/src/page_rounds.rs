//! Which private view pages to rewrite each tick, so that a tick costs
//! O(busy clients + groups), not O(clients).
//!
//! A client that has nothing outstanding and has done nothing for
//! [`QUIET_AFTER`] sees what any other such client with the same settings
//! and domain ([`ViewKey`]) sees: its decayed usage is gone and every
//! policy's view of it depends only on the others. Quiet clients are kept
//! in groups by key; each round computes one view per group (for any
//! member) and rewrites the members' pages only when that view moved by
//! more than a page reader could act on ([`moved`]). Busy clients are
//! computed one by one, all in one round per unit
//! ([`crate::monitor::Monitor::client_views_round`]), and rewritten when
//! theirs moved. Anything a client does ([`Monitor::take_stirred`]) makes it
//! busy again.
//!
//! A state machine: the timer feeds it the clients that came, left or were
//! stirred and writes the pages it names.

use crate::monitor::{Monitor, ViewKey};
use hetsched_core::ids::{ClientId, Ns};
use hetsched_core::policy::{DEFAULT_ACTIVITY_WINDOW_NS, DEFAULT_USAGE_HALF_LIFE_NS};
use hetsched_core::view::ClientUnitView;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// How long a client must have been idle to join its quiet group: its
/// activity window, then ten usage half-lives (what is left of its usage,
/// under 0.1 %, is below what [`moved`] tells apart).
pub const QUIET_AFTER: Ns = DEFAULT_ACTIVITY_WINDOW_NS + 10 * DEFAULT_USAGE_HALF_LIFE_NS;

/// Utilisations and guarantees closer than this are the same to a reader.
const FRACTION_SLACK: f64 = 0.002;
/// Waits closer than this fraction of the larger (or than
/// [`WAIT_SLACK_NS`]) are the same to a reader: placement compares
/// predicted turnarounds that are themselves estimates.
const WAIT_SLACK: f64 = 0.02;
const WAIT_SLACK_NS: f64 = 20_000.0;

/// Whether a reader of `shown` would decide differently with `now`.
pub fn moved(shown: &[ClientUnitView], now: &[ClientUnitView]) -> bool {
    shown.len() != now.len() || shown.iter().zip(now).any(|(a, b)| unit_moved(a, b))
}

fn unit_moved(a: &ClientUnitView, b: &ClientUnitView) -> bool {
    let fraction = |x: f64, y: f64| (x - y).abs() > FRACTION_SLACK;
    let wait = match (a.wait_ns.is_finite(), b.wait_ns.is_finite()) {
        (true, true) => {
            (a.wait_ns - b.wait_ns).abs() > WAIT_SLACK_NS.max(WAIT_SLACK * a.wait_ns.max(b.wait_ns))
        }
        (false, false) => false,
        _ => true,
    };
    a.throttled != b.throttled
        || wait
        || fraction(a.guaranteed, b.guaranteed)
        || fraction(a.current_utilisation, b.current_utilisation)
        || fraction(a.max_utilisation, b.max_utilisation)
}

/// A page to write.
#[derive(Debug, Clone, PartialEq)]
pub struct PageUpdate {
    pub client: ClientId,
    pub views: Vec<ClientUnitView>,
}

#[derive(Debug)]
struct QuietGroup {
    members: BTreeSet<ClientId>,
    /// What every member's page shows.
    shown: Vec<ClientUnitView>,
    /// Members that joined since the last round (their pages may still
    /// show their own last view).
    newcomers: Vec<ClientId>,
}

#[derive(Debug, Default)]
pub struct PageRounds {
    /// Busy clients and what their pages show.
    busy: HashMap<ClientId, Vec<ClientUnitView>>,
    /// Where each quiet client is, and its own last page (until its
    /// group's first round).
    quiet: HashMap<ClientId, (ViewKey, Vec<ClientUnitView>)>,
    groups: HashMap<ViewKey, QuietGroup>,
}

impl PageRounds {
    /// A client whose page was just written with `views`.
    pub fn joined(&mut self, client: ClientId, views: Vec<ClientUnitView>) {
        self.busy.insert(client, views);
    }

    pub fn left(&mut self, client: ClientId) {
        self.busy.remove(&client);
        self.leave_group(client);
    }

    /// `client` did something: its view is its own again.
    pub fn stirred(&mut self, client: ClientId) {
        if let Some(shown) = self.leave_group(client) {
            self.busy.insert(client, shown);
        }
    }

    /// `client`'s page must be rewritten next round whatever its views
    /// (its exclusive cores or coordination targets changed).
    pub fn force(&mut self, client: ClientId) {
        if self.busy.contains_key(&client) || self.leave_group(client).is_some() {
            self.busy.insert(client, Vec::new());
        }
    }

    /// The clients that are not quiet, in id order.
    pub fn busy_clients(&self) -> Vec<ClientId> {
        let mut busy: Vec<ClientId> = self.busy.keys().copied().collect();
        busy.sort_unstable();
        busy
    }

    /// [`PageRounds::force`] for every client whose entry differs between
    /// `before` and `after` (per-client extras of the page).
    pub fn force_changed<V: PartialEq>(
        &mut self,
        before: &BTreeMap<ClientId, V>,
        after: &BTreeMap<ClientId, V>,
    ) {
        let changed: Vec<ClientId> = before
            .iter()
            .filter(|(c, v)| after.get(c) != Some(v))
            .map(|(c, _)| *c)
            .chain(after.keys().filter(|c| !before.contains_key(c)).copied())
            .collect();
        for client in changed {
            self.force(client);
        }
    }

    /// Clients tracked now (busy and quiet).
    pub fn len(&self) -> usize {
        self.busy.len() + self.quiet.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Groups of quiet clients (each costs one view per round).
    pub fn quiet_groups(&self) -> usize {
        self.groups.len()
    }

    /// Takes `client` out of its quiet group, returning what its page
    /// shows, or `None` if it was not quiet.
    fn leave_group(&mut self, client: ClientId) -> Option<Vec<ClientUnitView>> {
        let (key, own) = self.quiet.remove(&client)?;
        let group = self
            .groups
            .get_mut(&key)
            .expect("a quiet client has a group");
        group.members.remove(&client);
        let was_newcomer = group.newcomers.contains(&client);
        group.newcomers.retain(|&c| c != client);
        let shown = if was_newcomer {
            own
        } else {
            group.shown.clone()
        };
        if group.members.is_empty() {
            self.groups.remove(&key);
        }
        Some(shown)
    }

    /// One round at `now`: settles busy clients that went quiet into their
    /// groups, computes the views that matter and returns the pages to
    /// write.
    pub fn round(&mut self, monitor: &mut Monitor, now: Ns) -> Vec<PageUpdate> {
        for client in monitor.take_stirred() {
            self.stirred(client);
        }
        self.settle(monitor, now);
        let busy: Vec<ClientId> = self.busy.keys().copied().collect();
        let reps: Vec<(ViewKey, ClientId)> = self
            .groups
            .iter()
            .filter_map(|(k, g)| g.members.first().map(|&c| (k.clone(), c)))
            .collect();
        let asked: Vec<ClientId> = busy
            .iter()
            .copied()
            .chain(reps.iter().map(|r| r.1))
            .collect();
        let mut pages = monitor.client_views_round(&asked, now).into_iter();
        let mut updates = Vec::new();
        for (client, views) in busy.iter().zip(pages.by_ref()) {
            let shown = self.busy.get_mut(client).expect("listed");
            if moved(shown, &views) {
                shown.clone_from(&views);
                updates.push(PageUpdate {
                    client: *client,
                    views,
                });
            }
        }
        for ((key, _), views) in reps.into_iter().zip(pages) {
            let group = self.groups.get_mut(&key).expect("listed");
            let newcomers = std::mem::take(&mut group.newcomers);
            let everyone = moved(&group.shown, &views);
            if everyone {
                group.shown = views;
                updates.extend(group.members.iter().map(|&client| PageUpdate {
                    client,
                    views: group.shown.clone(),
                }));
            }
            // From now on a newcomer's page shows the group's view.
            for client in newcomers {
                let own = std::mem::take(&mut self.quiet.get_mut(&client).expect("member").1);
                if !everyone && moved(&own, &group.shown) {
                    updates.push(PageUpdate {
                        client,
                        views: group.shown.clone(),
                    });
                }
            }
        }
        updates
    }

    /// Moves busy clients that have gone quiet into their groups.
    fn settle(&mut self, monitor: &Monitor, now: Ns) {
        let settling: Vec<ClientId> = self
            .busy
            .keys()
            .copied()
            .filter(|&c| monitor.is_quiet(c, now, QUIET_AFTER))
            .collect();
        for client in settling {
            let Some(key) = monitor.view_key(client) else {
                continue;
            };
            let own = self.busy.remove(&client).expect("listed");
            let group = self
                .groups
                .entry(key.clone())
                .or_insert_with(|| QuietGroup {
                    members: BTreeSet::new(),
                    shown: own.clone(),
                    newcomers: Vec::new(),
                });
            group.members.insert(client);
            group.newcomers.push(client);
            self.quiet.insert(client, (key, own));
        }
    }
}
