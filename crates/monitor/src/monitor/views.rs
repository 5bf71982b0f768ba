//! What the pages show: each unit's publication, each client's views,
//! and which clients did something since the pages were last written.

use super::*;

impl Monitor {
    /// The global page, per unit.
    pub fn unit_publications(&self, now: Ns) -> Vec<UnitPublication> {
        self.agents
            .iter()
            .map(|a| UnitPublication {
                view: a.policy().unit_view(now),
                queued_by_class: a.queued_by_class(|c| self.class_of(c, a.id())),
                busy_ns_total: a.busy_ns_total(),
            })
            .collect()
    }

    pub(super) fn class_of(&self, client: ClientId, unit: UnitId) -> ShareClass {
        self.clients
            .get(&client)
            .and_then(|c| c.settings.get(unit.index()))
            .map(|s| s.class)
            .unwrap_or_default()
    }

    /// The private page of one client, per unit.
    pub fn client_views(&self, client: ClientId, now: Ns) -> Vec<ClientUnitView> {
        self.agents
            .iter()
            .map(|a| a.policy().client_view(client, now))
            .collect()
    }

    /// The private pages of `clients` (per client, per unit), each unit's
    /// computed in one round ([`UnitPolicy::client_views`]).
    pub fn client_views_round(&self, clients: &[ClientId], now: Ns) -> Vec<Vec<ClientUnitView>> {
        let mut pages: Vec<Vec<ClientUnitView>> = clients
            .iter()
            .map(|_| Vec::with_capacity(self.agents.len()))
            .collect();
        for agent in &self.agents {
            let views = agent.policy().client_views(clients, now);
            for (page, view) in pages.iter_mut().zip(views) {
                page.push(view);
            }
        }
        pages
    }

    /// Notes that `client` did something: its view is its own again (see
    /// [`Monitor::is_quiet`]).
    pub(super) fn stir(&mut self, client: ClientId, now: Ns) {
        if let Some(entry) = self.clients.get_mut(&client) {
            entry.last_active = now;
            self.stirred.push(client);
        }
    }

    /// `client` did something the monitor does not see otherwise (it
    /// reported its demand): it is not quiet.
    pub fn note_activity(&mut self, client: ClientId, now: Ns) {
        self.stir(client, now);
    }

    /// Clients that did something since the last call (repeats allowed).
    pub fn take_stirred(&mut self) -> Vec<ClientId> {
        std::mem::take(&mut self.stirred)
    }

    /// Whether `client` has nothing outstanding on any unit and did
    /// nothing for `after` ns: its view is then that of any other quiet
    /// client with the same [`ViewKey`] (its own decayed usage is below
    /// what a view shows).
    pub fn is_quiet(&self, client: ClientId, now: Ns, after: Ns) -> bool {
        self.clients.get(&client).is_some_and(|c| {
            now.saturating_sub(c.last_active) >= after
                && self.agents.iter().all(|a| a.outstanding_of(client) == 0)
        })
    }

    /// What `client`'s views depend on besides the units' state.
    pub fn view_key(&self, client: ClientId) -> Option<ViewKey> {
        self.clients.get(&client).map(|c| ViewKey {
            settings: c.settings.clone(),
            domain: c.domain,
        })
    }
}
