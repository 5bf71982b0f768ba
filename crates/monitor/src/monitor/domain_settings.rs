//! Domains: a client joining the domain of its cgroup, and an
//! administrator changing a domain's credits and ceilings.

use super::*;

impl Monitor {
    /// Puts an application client in the configured domain its process
    /// is in: `cgroup` is the text of its `/proc/PID/cgroup` at connect
    /// time. Another connection of the same process that already has a
    /// domain decides instead (the daemon may have moved the process into
    /// the domain's cgroup since). Every unit's policy is told, so the
    /// backend policies serve the domain's clients as one domain.
    pub fn join_domain(&mut self, client: ClientId, cgroup: &str, now: Ns) -> Option<usize> {
        let entry = self
            .clients
            .get(&client)
            .filter(|c| c.role == Role::Application)?;
        let pid = entry.peer.pid;
        let found = self
            .clients
            .values()
            .filter(|c| c.peer.pid == pid && c.id != client)
            .find_map(|c| c.domain)
            .or_else(|| domains::domain_of(&self.domains, cgroup, std::process::id()))?;
        self.clients.get_mut(&client).expect("checked").domain = Some(found);
        self.stir(client, now);
        self.tell_domain(found, &[client], now);
        Some(found)
    }

    /// Tells every unit's policy that `clients` are in domain `i`, with
    /// the domain's credits on that unit.
    pub(super) fn tell_domain(&mut self, i: usize, clients: &[ClientId], now: Ns) {
        let spec = &self.domains[i];
        for agent in &mut self.agents {
            let shared = SharedDomain {
                key: i as u32,
                credits: spec.credits_on(&agent.setup.unit.name),
            };
            for &c in clients {
                agent.policy_mut().set_client_domain(c, Some(shared), now);
            }
        }
    }

    /// The name of the configured domain `client` belongs to.
    pub fn domain_name(&self, client: ClientId) -> Option<&str> {
        let i = self.clients.get(&client)?.domain?;
        Some(self.domains[i].name.as_str())
    }

    /// Every configured domain with its members, for `hetsched domains`.
    pub fn domain_list(&self) -> Vec<DomainInfo> {
        (0..self.domains.len())
            .map(|i| self.domain_info(i))
            .collect()
    }

    pub(super) fn domain_info(&self, i: usize) -> DomainInfo {
        let d = &self.domains[i];
        DomainInfo {
            name: d.name.clone(),
            cgroup: d.cgroup.clone(),
            credits: d.credits,
            unit_credits: d.unit_credits.clone().into_iter().collect(),
            cpu_cap: d.cpu_cap,
            members: self
                .clients
                .values()
                .filter(|c| c.domain == Some(i))
                .map(|c| (c.id, c.peer.pid))
                .collect(),
        }
    }

    /// Cores of the CPU units together: what a ceiling may not exceed.
    pub(super) fn cpu_cores(&self) -> u32 {
        self.agents
            .iter()
            .filter(|a| a.setup.unit.class == UnitClass::Cpu)
            .map(|a| a.setup.unit.slots)
            .sum()
    }

    /// `hetsched domains set`: new credits (on every unit, for every
    /// member) and CPU ceiling (`Some(0.0)` lifts it) of a configured
    /// domain. Root and the admin group only, as for others' shares.
    pub fn set_domain(
        &mut self,
        actor: ClientId,
        name: &str,
        credits: Option<u32>,
        cpu_cap: Option<f64>,
        now: Ns,
    ) -> Result<DaemonMsg, Refusal> {
        let actor = self.clients.get(&actor).ok_or((
            ErrorCode::BadSequence,
            "say Hello before anything else".to_string(),
        ))?;
        if !actor.peer.is_admin(self.cfg.admin_gid) {
            let who = match self.cfg.admin_gid {
                Some(g) => format!("root or members of the admin group (gid {g})"),
                None => "root".to_string(),
            };
            return Err((
                ErrorCode::NotPermitted,
                format!("only {who} may change a domain's credits or CPU ceiling"),
            ));
        }
        let i = self
            .domains
            .iter()
            .position(|d| d.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.domains.iter().map(|d| d.name.as_str()).collect();
                (
                    ErrorCode::UnknownDomain,
                    if names.is_empty() {
                        format!("no domain {name:?}: the daemon's config has no [[domains]]")
                    } else {
                        format!("no domain {name:?}; domains are: {}", names.join(", "))
                    },
                )
            })?;
        if credits.is_none() && cpu_cap.is_none() {
            return Err((
                ErrorCode::InvalidSettings,
                "nothing to change: give credits or a CPU ceiling".into(),
            ));
        }
        if credits == Some(0) {
            return Err((
                ErrorCode::InvalidSettings,
                "credits must be at least 1".into(),
            ));
        }
        let cap = match cpu_cap {
            None => self.domains[i].cpu_cap,
            Some(0.0) => None,
            Some(c) => {
                let cores = self.cpu_cores();
                if cores == 0 {
                    return Err((
                        ErrorCode::InvalidSettings,
                        "this daemon manages no CPUs, so it sets no CPU ceilings".into(),
                    ));
                }
                domains::check_cap(c, cores).map_err(|why| (ErrorCode::InvalidSettings, why))?;
                Some(c)
            }
        };
        self.domains[i].cpu_cap = cap;
        if let Some(c) = credits {
            // One figure for every unit from now on.
            self.domains[i].credits = c;
            self.domains[i].unit_credits.clear();
            let members: Vec<ClientId> = self
                .clients
                .values()
                .filter(|c| c.domain == Some(i))
                .map(|c| c.id)
                .collect();
            self.tell_domain(i, &members, now);
        }
        Ok(DaemonMsg::Domains(vec![self.domain_info(i)]))
    }
}
