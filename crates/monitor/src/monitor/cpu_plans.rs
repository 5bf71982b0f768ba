//! The CPU side's plans: the CPU schedule, exclusive cores, nice levels
//! from shares and cgroup weights from CPU credits.

use super::*;

impl Monitor {
    /// The CPU side's schedule for the next period (Pegasus's `HS`), for
    /// the units whose policy co-schedules with the CPU.
    /// Whether some unit's policy reads the CPU schedule (CoSched, AugC),
    /// so the CPU agent publishes it at `cpu_schedule_ms`, not only on
    /// its full scans.
    pub fn follows_cpu_schedule(&self) -> bool {
        self.agents.iter().any(|a| {
            a.policy().kind().backend().is_some_and(|b| {
                matches!(
                    b,
                    hetsched_core::backend_policy::BackendPolicy::CoSched
                        | hetsched_core::backend_policy::BackendPolicy::AugC
                )
            })
        })
    }

    pub fn set_cpu_schedule(&mut self, scheduled: &[(ClientId, u32)]) {
        for agent in &mut self.agents {
            agent.policy_mut().set_cpu_schedule(scheduled);
        }
    }

    /// Cores of each CPU unit that each application may use exclusively
    /// (min-funding by shares, capped at its runnable threads).
    pub fn exclusive_cores(&self, threads_of: impl Fn(u32) -> u32) -> BTreeMap<ClientId, Vec<u32>> {
        let apps: Vec<&ClientEntry> = self
            .clients
            .values()
            .filter(|c| c.role == Role::Application)
            .collect();
        let demands: Vec<u32> = apps.iter().map(|c| threads_of(c.peer.pid)).collect();
        let mut out: BTreeMap<ClientId, Vec<u32>> =
            apps.iter().map(|c| (c.id, Vec::new())).collect();
        for (u, agent) in self.agents.iter().enumerate() {
            if agent.setup.unit.class != UnitClass::Cpu {
                continue;
            }
            let claims: Vec<CoreClaim> = apps
                .iter()
                .zip(&demands)
                .map(|(c, &demand)| CoreClaim {
                    weight: class_weight(c.settings[u].class),
                    demand,
                })
                .collect();
            let given = min_funding(agent.setup.unit.slots, &claims);
            for (c, g) in apps.iter().zip(given) {
                out.get_mut(&c.id).expect("listed").push(g);
            }
        }
        out
    }

    /// The nice level each application process's threads should have,
    /// from its classes on the CPU units ([`nice_for_cpu_classes`]). A
    /// process with several connections gets the best level any of them
    /// maps to: each was granted its standing. Empty without CPU units.
    pub fn cpu_nice_targets(&self) -> BTreeMap<u32, i32> {
        let cpu_units: Vec<(usize, u32)> = self
            .agents
            .iter()
            .enumerate()
            .filter(|(_, a)| a.setup.unit.class == UnitClass::Cpu)
            .map(|(u, a)| (u, a.setup.unit.slots))
            .collect();
        let mut out: BTreeMap<u32, i32> = BTreeMap::new();
        for c in self
            .clients
            .values()
            .filter(|c| c.role == Role::Application)
        {
            let classes: Vec<(ShareClass, u32)> = cpu_units
                .iter()
                .map(|&(u, cores)| (c.settings[u].class, cores))
                .collect();
            if let Some(nice) = nice_for_cpu_classes(&classes) {
                let level = out.entry(c.peer.pid).or_insert(nice);
                *level = (*level).min(nice);
            }
        }
        out
    }

    /// A client's classes on the CPU units, each with its cores.
    pub(super) fn cpu_classes(&self, c: &ClientEntry) -> Vec<(ShareClass, u32)> {
        self.agents
            .iter()
            .enumerate()
            .filter(|(_, a)| a.setup.unit.class == UnitClass::Cpu)
            .filter_map(|(u, a)| Some((c.settings.get(u)?.class, a.setup.unit.slots)))
            .collect()
    }

    /// The `cpu.shares` (cgroup v1 scale) of each application process's
    /// cgroup, from its classes on the CPU units
    /// ([`cpu_weights::cpu_shares`]); a process with several connections
    /// gets the largest. Empty without CPU units.
    ///
    /// A process in a configured domain shares the domain's cgroup, with
    /// its ceiling.
    pub fn cpu_cgroup_targets(&self) -> BTreeMap<u32, CgroupTarget> {
        let mut out: BTreeMap<u32, CgroupTarget> = BTreeMap::new();
        for c in self
            .clients
            .values()
            .filter(|c| c.role == Role::Application)
        {
            if let Some(shares) = cpu_weights::cpu_shares(&self.cpu_classes(c)) {
                let domain = c.domain.map(|i| DomainTarget {
                    name: self.domains[i].name.clone(),
                    cpu_cap: self.domains[i].cpu_cap,
                });
                let t = out.entry(c.peer.pid).or_insert(CgroupTarget {
                    shares,
                    domain: None,
                });
                t.shares = t.shares.max(shares);
                t.domain = t.domain.take().or(domain);
            }
        }
        out
    }

    /// Tells every unit's policy `client`'s CPU credits, from the same
    /// classes its CPU cgroup is weighed by: XC gives accelerator ticks by
    /// them. Without CPU units there are none, and XC keeps using the
    /// accelerator credits.
    pub(super) fn refresh_cpu_credits(&mut self, client: ClientId) {
        let Some(credits) = self
            .clients
            .get(&client)
            .filter(|c| c.role == Role::Application)
            .and_then(|c| cpu_weights::cpu_credits(&self.cpu_classes(c)))
        else {
            return;
        };
        for agent in &mut self.agents {
            agent.policy_mut().set_cpu_credits(client, credits);
        }
    }
}
