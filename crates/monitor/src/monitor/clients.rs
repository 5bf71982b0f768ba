//! Clients and their settings: a client connecting (`Hello`), changing
//! its own or another's settings, the settings store that keeps them
//! across restarts, and a client leaving.

use super::*;

impl Monitor {
    /// Registers a new connection and builds its `Welcome`.
    pub fn hello(
        &mut self,
        peer: Peer,
        name: String,
        role: Role,
        requested: SettingsRequest,
        now: Ns,
    ) -> (ClientId, DaemonMsg) {
        let id = ClientId(self.next_client);
        self.next_client += 1;
        let mut notes = Vec::new();
        let mut settings = Vec::new();
        if role == Role::Application {
            let key = ProcessKey {
                pid: peer.pid,
                start_time: peer.start_time,
            };
            let stored = match self.store.settings_of(key) {
                Some(own) => own.clone(),
                None => self.inherit_settings(key, &peer, &name, &mut notes),
            };
            for agent in &mut self.agents {
                let want = stored
                    .get(&agent.setup.unit.name)
                    .copied()
                    .unwrap_or_default();
                // Every connection of one process draws from one share.
                agent
                    .policy_mut()
                    .set_client_account(id, Some(u64::from(peer.pid)));
                let got = match agent.policy_mut().set_client(id, want, now) {
                    Ok(()) => want,
                    Err(e) => {
                        notes.push(format!(
                            "stored settings for unit {} no longer fit ({e}); using defaults",
                            agent.setup.unit.name
                        ));
                        agent
                            .policy_mut()
                            .set_client(id, ClientSettings::default(), now)
                            .expect("default settings always fit");
                        ClientSettings::default()
                    }
                };
                settings.push(got);
            }
        }
        if role == Role::Application
            && (peer.uid == 0 || self.cfg.metrics_names.contains(&name))
            && !self.counted_as_other(&name)
        {
            self.ledger.label_reserved(&name);
        }
        self.clients.insert(
            id,
            ClientEntry {
                id,
                peer: peer.clone(),
                name,
                role,
                settings,
                connected_at: now,
                domain: None,
                last_active: now,
                intercept: None,
            },
        );
        self.stirred.push(id);
        if role == Role::Application && !requested.is_empty() {
            let all: Vec<usize> = (0..self.agents.len()).collect();
            if let Err((_, why)) = self.apply(&peer, &[id], &all, requested, now) {
                notes.push(format!("requested settings not applied: {why}"));
            }
        }
        self.refresh_cpu_credits(id);
        let entry = &self.clients[&id];
        let welcome = DaemonMsg::Welcome {
            client: id,
            pid: peer.pid,
            daemon_pid: std::process::id(),
            units: self.agents.iter().map(|a| a.setup.info()).collect(),
            settings: entry.settings.iter().map(|s| (*s).into()).collect(),
            views_attached: role == Role::Application,
            notice: if notes.is_empty() {
                None
            } else {
                Some(notes.join("; "))
            },
        };
        (id, welcome)
    }

    /// Changes settings; see [`hetsched_protocol::ClientMsg::SetSettings`].
    pub fn set_settings(
        &mut self,
        actor: ClientId,
        target_pid: Option<u32>,
        unit: Option<UnitId>,
        req: SettingsRequest,
        procs: &dyn ProcessTable,
        now: Ns,
    ) -> Result<DaemonMsg, Refusal> {
        if req.is_empty() {
            return Err((
                ErrorCode::InvalidSettings,
                "nothing to change: give a class, shares or a priority".into(),
            ));
        }
        let units: Vec<usize> = match unit {
            Some(u) => vec![self.unit_index(u)?],
            None => (0..self.agents.len()).collect(),
        };
        let actor_entry = self.clients.get(&actor).ok_or((
            ErrorCode::BadSequence,
            "say Hello before anything else".to_string(),
        ))?;
        let actor_peer = actor_entry.peer.clone();
        let (pid, targets): (u32, Vec<ClientId>) = match target_pid {
            None => {
                if actor_entry.role != Role::Application {
                    return Err((
                        ErrorCode::NotAnApplication,
                        "an observer has no settings of its own; name a --pid".into(),
                    ));
                }
                (actor_peer.pid, vec![actor])
            }
            Some(pid) => (
                pid,
                self.clients
                    .values()
                    .filter(|c| c.role == Role::Application && c.peer.pid == pid)
                    .map(|c| c.id)
                    .collect(),
            ),
        };
        if targets.is_empty() {
            return self.store_pending(&actor_peer, pid, &units, req, procs);
        }
        let changed = self.apply(&actor_peer, &targets, &units, req, now)?;
        let settings = changed.iter().map(|s| (*s).into()).collect();
        Ok(DaemonMsg::SettingsApplied {
            pid,
            units: units.iter().map(|&u| self.agents[u].id()).collect(),
            settings,
        })
    }

    /// Applies `req` to `targets` on `units` (indices), all or nothing.
    /// Returns the new settings per unit of the last target.
    /// The stored settings of `peer`'s nearest ancestor that has any
    /// (as a forked child inherits its parent's nice level), stored as its
    /// own from now on: a child cannot escape its parent's demotion. None
    /// stored: the defaults.
    pub(super) fn inherit_settings(
        &mut self,
        key: ProcessKey,
        peer: &Peer,
        name: &str,
        notes: &mut Vec<String>,
    ) -> BTreeMap<String, ClientSettings> {
        let Some((parent, settings)) = peer
            .ancestors
            .iter()
            .find_map(|a| self.store.settings_of(*a).map(|s| (*a, s.clone())))
        else {
            return BTreeMap::new();
        };
        for (unit, s) in &settings {
            self.store.set(key, name, unit, *s);
        }
        self.store_dirty = true;
        notes.push(format!(
            "settings inherited from ancestor process {}",
            parent.pid
        ));
        settings
    }

    pub(super) fn apply(
        &mut self,
        actor: &Peer,
        targets: &[ClientId],
        units: &[usize],
        req: SettingsRequest,
        now: Ns,
    ) -> Result<Vec<ClientSettings>, Refusal> {
        // Check every change before making any.
        let mut plan: Vec<(ClientId, usize, ClientSettings, ClientSettings)> = Vec::new();
        for &t in targets {
            let entry = &self.clients[&t];
            for &u in units {
                let old = entry.settings[u];
                let new = req.apply_to(old);
                may_change(actor, self.cfg.admin_gid, entry.peer.uid, old, new)
                    .map_err(|why| (ErrorCode::NotPermitted, why))?;
                // FIFO and priority units would accept any class; the
                // limits hold on every unit all the same.
                check_sane(new.class)?;
                plan.push((t, u, old, new));
            }
        }
        for (done, &(t, u, _, new)) in plan.iter().enumerate() {
            if let Err(e) = self.agents[u].policy_mut().set_client(t, new, now) {
                for &(t, u, old, _) in plan[..done].iter().rev() {
                    self.agents[u]
                        .policy_mut()
                        .set_client(t, old, now)
                        .expect("restoring settings that were accepted before");
                }
                return Err((
                    ErrorCode::InvalidSettings,
                    format!("unit {}: {e}", self.agents[u].setup.unit.name),
                ));
            }
        }
        let mut last = Vec::new();
        for &(t, u, _, new) in &plan {
            let entry = self.clients.get_mut(&t).expect("target exists");
            entry.settings[u] = new;
            let key = entry.key();
            let name = entry.name.clone();
            self.store
                .set(key, &name, &self.agents[u].setup.unit.name, new);
            self.store_dirty = true;
            if Some(&t) == targets.last() {
                last.push(new);
            }
        }
        for &t in targets {
            self.refresh_cpu_credits(t);
            self.stir(t, now);
        }
        Ok(last)
    }

    /// Settings for a process that has not connected yet: checked for
    /// privilege and sanity now, applied (and checked against the unit's
    /// CUSTOM total) when it says hello.
    pub(super) fn store_pending(
        &mut self,
        actor: &Peer,
        pid: u32,
        units: &[usize],
        req: SettingsRequest,
        procs: &dyn ProcessTable,
    ) -> Result<DaemonMsg, Refusal> {
        let (key, uid) = procs.lookup(pid).ok_or((
            ErrorCode::UnknownClient,
            format!("no process with pid {pid} exists"),
        ))?;
        let stored = self.store.settings_of(key).cloned().unwrap_or_default();
        let mut out = Vec::new();
        for &u in units {
            let name = &self.agents[u].setup.unit.name;
            let old = stored.get(name).copied().unwrap_or_default();
            let new = req.apply_to(old);
            may_change(actor, self.cfg.admin_gid, uid, old, new)
                .map_err(|why| (ErrorCode::NotPermitted, why))?;
            check_sane(new.class)?;
            out.push((u, new));
        }
        for &(u, new) in &out {
            let name = self.agents[u].setup.unit.name.clone();
            self.store.set(key, "", &name, new);
        }
        self.store_dirty = true;
        Ok(DaemonMsg::SettingsApplied {
            pid,
            units: out.iter().map(|&(u, _)| self.agents[u].id()).collect(),
            settings: out.iter().map(|&(_, s)| WireSettings::from(s)).collect(),
        })
    }

    pub(super) fn application(&self, client: ClientId) -> Result<&ClientEntry, Refusal> {
        match self.clients.get(&client) {
            Some(c) if c.role == Role::Application => Ok(c),
            Some(_) => Err((
                ErrorCode::NotAnApplication,
                "this connection said it is an observer; observers cannot run work".into(),
            )),
            None => Err((ErrorCode::BadSequence, "say Hello first".into())),
        }
    }

    /// Whether `client` said Hello as an application.
    pub fn check_application(&self, client: ClientId) -> Result<(), Refusal> {
        self.application(client).map(|_| ())
    }

    /// A connection ended. `process_gone`: the process exited, so its
    /// stored settings go too (a live process may reconnect).
    pub fn disconnect(&mut self, client: ClientId, process_gone: bool, now: Ns, out: &mut Outbox) {
        let Some(entry) = self.clients.remove(&client) else {
            return;
        };
        self.associations.remove(&client);
        self.user_kernels.remove_client(client);
        if entry.role == Role::Application {
            for (u, agent) in self.agents.iter_mut().enumerate() {
                self.ledger
                    .fold(&entry.name, u, &agent.use_of(client).served());
                agent.remove_client(client, now, out);
            }
            let still_connected = self
                .clients
                .values()
                .any(|c| c.peer.pid == entry.peer.pid && c.role == Role::Application);
            if process_gone && !still_connected && self.store.remove(entry.key()) {
                self.store_dirty = true;
            }
        }
    }

    /// The store, if it changed since the last call (for the server to save).
    pub fn take_dirty_store(&mut self) -> Option<&SettingsStore> {
        if std::mem::take(&mut self.store_dirty) {
            Some(&self.store)
        } else {
            None
        }
    }

    /// Forgets stored settings of processes that are gone.
    pub fn forget_dead(&mut self, alive: impl Fn(ProcessKey) -> bool) {
        if self.store.retain_alive(alive) {
            self.store_dirty = true;
        }
    }

    /// The processes whose settings are stored, for a caller that checks
    /// which are gone without holding whatever guards the monitor.
    pub fn stored_processes(&self) -> Vec<ProcessKey> {
        self.store.keys()
    }

    /// Forgets the stored settings of processes that are `gone` (a
    /// process's key is never reused, so a key found gone stays gone).
    pub fn forget_processes(&mut self, gone: &std::collections::BTreeSet<ProcessKey>) {
        self.forget_dead(|k| !gone.contains(&k));
    }
}
