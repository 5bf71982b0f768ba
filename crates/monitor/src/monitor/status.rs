//! The status report and the ledger of what clients were served.

use super::*;

impl Monitor {
    /// One page of the status report (`ClientMsg::Status`): the
    /// application clients from id `first` on, at most `max_clients` and
    /// no more than fit [`STATUS_PAGE_BYTES`], with `coordination` (the
    /// coordinator thread's state, if it runs) and the units
    /// ([`crate::status_page::fill`]).
    pub fn status_page(
        &self,
        daemon: DaemonStatus,
        coordination: Option<&CoordinationStatus>,
        first: ClientId,
        max_clients: u32,
        now: Ns,
    ) -> StatusPage {
        let pubs = self.unit_publications(now);
        let mut profiles = self.accelerator_profiles(None).into_iter().peekable();
        let head = StatusReport {
            daemon,
            units: self
                .agents
                .iter()
                .zip(pubs)
                .map(|(a, p)| UnitStatus {
                    info: a.setup.info(),
                    view: p.view,
                    queued_by_class: p.queued_by_class,
                    busy_ns_total: p.busy_ns_total,
                    // Profiles come in unit order, one per selectable unit.
                    selection: profiles.next_if(|q| q.unit == a.id()).map(|q| {
                        UnitSelectionStatus {
                            memory_bytes: q.fixed.memory_bytes,
                            allocated_bytes: q.load.allocated_bytes,
                            max_clients: q.fixed.max_clients,
                            // Paged with the clients.
                            clients: Vec::new(),
                            weight: selection::weight(&q),
                        }
                    }),
                })
                .collect(),
            clients: Vec::new(),
            coordination: coordination.map(|c| CoordinationStatus {
                solves: c.solves,
                floor: c.floor,
                floor_feasible: c.floor_feasible,
                // Paged with the clients.
                apps: Vec::new(),
                short_first: c.short_first.clone(),
            }),
        };
        let applications = |c: &&ClientEntry| c.role == Role::Application;
        let clients = self
            .clients
            .range(first..)
            .map(|(_, c)| c)
            .filter(applications)
            .map(|c| self.client_status(c, now));
        // The coordinator lists its apps in id order (a map of them).
        let apps = coordination
            .into_iter()
            .flat_map(|c| c.apps.iter())
            .filter(|a| a.client >= first)
            .cloned();
        let associated = self.associations.range(first..).map(|(&c, s)| (c, s.unit));
        let total = self.clients.values().filter(applications).count();
        crate::status_page::fill(
            head,
            clients,
            apps,
            associated,
            u32::try_from(total).unwrap_or(u32::MAX),
            first,
            max_clients,
            STATUS_PAGE_BYTES,
        )
    }

    /// One application's line of the status report.
    pub(super) fn client_status(&self, c: &ClientEntry, now: Ns) -> ClientStatus {
        ClientStatus {
            id: c.id,
            pid: c.peer.pid,
            uid: c.peer.uid,
            name: c.name.clone(),
            connected_ns: now.saturating_sub(c.connected_at),
            intercepted: c.intercept.as_ref().map(|i| i.api),
            device_memory_bytes: c.intercept.as_ref().map_or(0, |i| i.device_memory_bytes()),
            device_memory_limit: c.intercept.as_ref().and_then(|i| i.device_memory_limit),
            units: self
                .agents
                .iter()
                .enumerate()
                .map(|(u, a)| {
                    let use_ = a.use_of(c.id);
                    ClientUnitStatus {
                        unit: a.id(),
                        settings: c.settings[u].into(),
                        view: a.policy().client_view(c.id, now),
                        busy_ns_total: use_.busy_ns,
                        outstanding: use_.outstanding,
                        backend: a.policy().backend_state(c.id),
                    }
                })
                .collect(),
        }
    }

    /// What departed clients were served, by name.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Whether connected applications named `name` were charged for
    /// something under `/metrics`' `(other)` (the name has no label):
    /// giving it one now would move their counts out of `(other)`, whose
    /// counters must not go down.
    pub(super) fn counted_as_other(&self, name: &str) -> bool {
        !self.ledger.has(name)
            && self.clients.values().any(|c| {
                c.role == Role::Application
                    && c.name == name
                    && self
                        .agents
                        .iter()
                        .any(|a| a.use_of(c.id).served() != Default::default())
            })
    }

    /// Gives the names of connected applications that were charged for
    /// something a `/metrics` label of their own, while any is left
    /// ([`Ledger::label_by_usage`]).
    pub fn label_names_by_usage(&mut self) {
        let Monitor {
            clients,
            agents,
            ledger,
            ..
        } = self;
        for c in clients.values() {
            if c.role != Role::Application || ledger.has(&c.name) {
                continue;
            }
            let used = agents
                .iter()
                .any(|a| a.use_of(c.id).served() != Default::default());
            if used {
                ledger.label_by_usage(&c.name);
            }
        }
    }
}
