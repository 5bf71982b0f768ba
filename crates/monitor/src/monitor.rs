//! The monitor: every agent and every connected client, and the rules
//! that tie them (privileges, limits, persistence). It is a state machine
//! driven by the server: each call takes `now` and returns messages in an
//! [`Outbox`], so it can be tested without sockets, threads or clocks.

use crate::agent::{Agent, AgentRefusal, UnitSetup, Work};
use crate::cpu_weights::{self, CgroupTarget, DomainTarget};
use crate::domains::{self, DomainSpec};
use crate::metrics::ledger::Ledger;
use crate::nice_map::nice_for_cpu_classes;
use crate::outbox::{Outbox, QueuedKernel};
use crate::privilege::{Peer, may_change};
use crate::processes::ProcessKey;
pub use crate::processes::ProcessTable;
use crate::store::SettingsStore;
use crate::user_kernels::UserKernelRegistry;
use hetsched_core::backend_policy::selection::{
    self, AcceleratorProfile, DynamicProfile, Need, StaticProfile,
};
use hetsched_core::ids::{ClientId, Ns, TaskId, UnitId};
use hetsched_core::min_funding::{CoreClaim, min_funding};
use hetsched_core::policy::{ClientSettings, MAX_CUSTOM_SHARES, ShareClass, SharedDomain};
use hetsched_core::unit::UnitClass;
use hetsched_core::view::{ClientUnitView, UnitView};
use hetsched_protocol::kernel_call::{Kernel, KernelCall, KernelCallError};
use hetsched_protocol::user_kernel::{KernelSignature, MAX_SOURCE_BYTES, UserKernelId};
use hetsched_protocol::{
    ClientStatus, ClientUnitStatus, CoordinationStatus, DaemonMsg, DaemonStatus, DomainInfo,
    ErrorCode, Role, STATUS_PAGE_BYTES, SettingsRequest, StatusPage, StatusReport,
    UnitSelectionStatus, UnitStatus, WireSettings,
};
use hetsched_views::data_region::DataRegion;
use std::collections::BTreeMap;
use std::sync::Arc;

pub(crate) mod config;
mod leases;
mod lineage;
pub use config::{
    AcceleratorLimits, DEFAULT_LEASE_NS, DEFAULT_MAX_REGION_MB, DeviceMemoryCaps, MonitorConfig,
};
pub use leases::InterceptState;

/// A client's accelerator (Pegasus's association of a domain with the
/// accelerator selection picked), held until it asks again or leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Association {
    /// Unit index.
    unit: usize,
    memory_bytes: u64,
}

#[derive(Clone, Debug)]
pub struct ClientEntry {
    pub id: ClientId,
    pub peer: Peer,
    pub name: String,
    pub role: Role,
    /// Per unit, in unit order (empty for observers).
    pub settings: Vec<ClientSettings>,
    pub connected_at: Ns,
    /// The configured domain it belongs to (index into the monitor's
    /// domains), from its cgroup when it connected.
    pub domain: Option<usize>,
    /// Its last request, completion or settings change.
    pub last_active: Ns,
    /// What an intercepted program (OpenCL layer, CUDA interposer) told
    /// about itself; `None` for programs written against hetsched.
    pub intercept: Option<leases::InterceptState>,
}

/// What a client's private views depend on besides the units' state:
/// quiet clients (nothing outstanding, nothing done lately) with equal
/// keys see equal views, so one view serves them all.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ViewKey {
    pub settings: Vec<ClientSettings>,
    pub domain: Option<usize>,
}

impl ClientEntry {
    fn key(&self) -> ProcessKey {
        ProcessKey {
            pid: self.peer.pid,
            start_time: self.peer.start_time,
        }
    }
}

/// A refusal to send back: code and words.
pub type Refusal = (ErrorCode, String);

/// Per unit, what the global page shows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UnitPublication {
    pub view: UnitView,
    pub queued_by_class: [u32; 3],
    pub busy_ns_total: u64,
}

#[derive(Debug)]
pub struct Monitor {
    cfg: MonitorConfig,
    agents: Vec<Agent>,
    clients: BTreeMap<ClientId, ClientEntry>,
    next_client: u32,
    store: SettingsStore,
    store_dirty: bool,
    /// Per unit, its memory and client cap if accelerator selection may
    /// choose it (the devices the daemon serves).
    accelerator_limits: Vec<Option<AcceleratorLimits>>,
    associations: BTreeMap<ClientId, Association>,
    /// Per served unit and kernel, the measured wall time per input byte
    /// (a moving average), so the policy is told what a call will cost.
    kernel_costs: BTreeMap<(usize, Kernel), f64>,
    /// Configured domains, with the credits and ceilings set since.
    domains: Vec<DomainSpec>,
    /// Kernels clients registered with served units.
    user_kernels: UserKernelRegistry,
    /// Clients that did something since [`Monitor::take_stirred`] was last
    /// called (repeats allowed).
    stirred: Vec<ClientId>,
    /// What departed clients were served, by name (`/metrics`).
    ledger: Ledger,
}

/// Weight of the newest measure in a kernel's cost per byte.
const KERNEL_COST_ALPHA: f64 = 0.2;
/// Cost per byte assumed before a kernel was measured on a unit.
const KERNEL_COST_PRIOR_NS_PER_BYTE: f64 = 1.0;

impl Monitor {
    pub fn new(units: Vec<UnitSetup>, cfg: MonitorConfig, store: SettingsStore) -> Monitor {
        let accelerator_limits = units
            .iter()
            .map(|u| {
                ((u.emulated || !u.kernels.is_empty()) && u.unit.class != UnitClass::Cpu)
                    .then(AcceleratorLimits::default)
            })
            .collect();
        let domains = cfg.domains.clone();
        let ledger = Ledger::new(units.len());
        let anticipation_ns = cfg.anticipation_ns;
        let agents = units
            .into_iter()
            .map(|u| {
                let limit = match cfg.max_hold_ns.get(&u.unit.name) {
                    Some(&ns) => Some(ns),
                    None if u.unit.class == UnitClass::Cpu => None,
                    None => Some(cfg.max_device_ns),
                };
                let mut agent = Agent::new(u, anticipation_ns);
                agent.set_hold_limit(limit);
                agent
            })
            .collect();
        Monitor {
            ledger,
            cfg,
            agents,
            clients: BTreeMap::new(),
            next_client: 1,
            store,
            store_dirty: false,
            accelerator_limits,
            associations: BTreeMap::new(),
            kernel_costs: BTreeMap::new(),
            domains,
            user_kernels: UserKernelRegistry::default(),
            stirred: Vec::new(),
        }
    }

    /// Memory and client caps of selectable units, by unit name (units
    /// not named keep the defaults; names of other units are ignored).
    pub fn set_accelerator_limits(&mut self, by_name: &BTreeMap<String, AcceleratorLimits>) {
        for (a, limits) in self.agents.iter().zip(&mut self.accelerator_limits) {
            if let (Some(l), Some(given)) = (limits.as_mut(), by_name.get(&a.setup.unit.name)) {
                *l = *given;
            }
        }
    }

    /// Every selectable unit's profile now, leaving out `except`'s own
    /// association (a client that asks again is placed as if it had none).
    fn accelerator_profiles(&self, except: Option<ClientId>) -> Vec<AcceleratorProfile> {
        self.agents
            .iter()
            .zip(&self.accelerator_limits)
            .enumerate()
            .filter_map(|(u, (a, limits))| {
                let l = limits.as_ref()?;
                let mut load = DynamicProfile::default();
                for (_, s) in self
                    .associations
                    .iter()
                    .filter(|(c, s)| Some(**c) != except && s.unit == u)
                {
                    load.allocated_bytes = load.allocated_bytes.saturating_add(s.memory_bytes);
                    load.clients += 1;
                }
                let unit = &a.setup.unit;
                Some(AcceleratorProfile {
                    unit: unit.id,
                    name: unit.name.clone(),
                    class: unit.class,
                    fixed: StaticProfile {
                        speed: unit.relative_speed,
                        streams: unit.slots,
                        memory_bytes: l.memory_bytes,
                        bandwidth_bytes_per_s: unit.copy_in.bytes_per_s(),
                        max_clients: l.max_clients,
                    },
                    load,
                })
            })
            .collect()
    }

    /// `SelectAccelerator`: associates `client` with the accelerator of
    /// highest weight that holds `memory_bytes` and is below its client
    /// cap. A refusal leaves an earlier association as it was.
    pub fn select_accelerator(
        &mut self,
        client: ClientId,
        memory_bytes: u64,
        class: Option<UnitClass>,
    ) -> Result<DaemonMsg, Refusal> {
        self.application(client)?;
        let profiles = self.accelerator_profiles(Some(client));
        let unit = selection::select(
            &profiles,
            &Need {
                memory_bytes,
                class,
            },
        )
        .map_err(|e| (ErrorCode::NoAcceleratorFits, e.to_string()))?;
        let weight = profiles
            .iter()
            .find(|p| p.unit == unit)
            .map_or(0.0, selection::weight);
        self.associations.insert(
            client,
            Association {
                unit: unit.index(),
                memory_bytes,
            },
        );
        Ok(DaemonMsg::AcceleratorSelected { unit, weight })
    }

    /// The unit `client` is associated with, if any.
    pub fn association(&self, client: ClientId) -> Option<UnitId> {
        self.associations
            .get(&client)
            .map(|s| self.agents[s.unit].id())
    }

    /// What departed clients were served, by name.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Whether connected applications named `name` were charged for
    /// something under `/metrics`' `(other)` (the name has no label):
    /// giving it one now would move their counts out of `(other)`, whose
    /// counters must not go down.
    fn counted_as_other(&self, name: &str) -> bool {
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

    pub fn agents(&self) -> &[Agent] {
        &self.agents
    }

    /// The coordinator's queue order for the unit at `index`
    /// (`UnitPolicy::set_short_first`: only a short-first unit has one).
    pub fn set_short_first(&mut self, index: usize, on: bool) {
        if let Some(agent) = self.agents.get_mut(index) {
            agent.policy_mut().set_short_first(on);
        }
    }

    /// Whether the coordinator places `client` (it follows published
    /// targets): every unit's policy is told (`UnitPolicy::set_coordinated`;
    /// the share policy serves such NORMAL clients as one pool in arrival
    /// order).
    pub fn set_coordinated(&mut self, client: ClientId, coordinated: bool) {
        for agent in &mut self.agents {
            agent.policy_mut().set_coordinated(client, coordinated);
        }
    }

    pub fn client(&self, id: ClientId) -> Option<&ClientEntry> {
        self.clients.get(&id)
    }

    pub fn clients(&self) -> impl Iterator<Item = &ClientEntry> {
        self.clients.values()
    }

    /// The store, if it changed since the last call (for the server to save).
    pub fn take_dirty_store(&mut self) -> Option<&SettingsStore> {
        if std::mem::take(&mut self.store_dirty) {
            Some(&self.store)
        } else {
            None
        }
    }

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

    fn unit_index(&self, unit: UnitId) -> Result<usize, Refusal> {
        let i = unit.index();
        if i < self.agents.len() {
            Ok(i)
        } else {
            Err((
                ErrorCode::UnknownUnit,
                format!(
                    "unit {} does not exist (this daemon has {} units, ids 0..{})",
                    unit.0,
                    self.agents.len(),
                    self.agents.len()
                ),
            ))
        }
    }

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
    fn inherit_settings(
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

    fn apply(
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
    fn store_pending(
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

    fn application(&self, client: ClientId) -> Result<&ClientEntry, Refusal> {
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

    fn outstanding(&self, client: ClientId) -> u32 {
        self.agents
            .iter()
            .map(|a| a.use_of(client).outstanding)
            .sum()
    }

    fn admit(&mut self, client: ClientId, unit: UnitId) -> Result<usize, Refusal> {
        self.application(client)?;
        let u = self.unit_index(unit)?;
        if self.cfg.accelerator_binding {
            self.check_binding(client, u)?;
        }
        if self.outstanding(client) >= self.cfg.max_outstanding {
            return Err((
                ErrorCode::TooManyOutstanding,
                format!(
                    "already {} requests outstanding (the limit); wait for some to finish",
                    self.cfg.max_outstanding
                ),
            ));
        }
        Ok(u)
    }

    /// Under `accelerator_binding`: a call on selectable unit `u` is
    /// admitted only from a client associated with `u`; a client with no
    /// association yet is associated with `u` if it has room for one more
    /// client (Pegasus associates a domain before it schedules it).
    fn check_binding(&mut self, client: ClientId, u: usize) -> Result<(), Refusal> {
        let Some(limits) = self.accelerator_limits[u] else {
            return Ok(());
        };
        let name = |m: &Monitor, i: usize| m.agents[i].setup.unit.name.clone();
        match self.associations.get(&client) {
            Some(a) if a.unit == u => Ok(()),
            Some(a) => Err((
                ErrorCode::NotAssociated,
                format!(
                    "this client is associated with {}; accelerator_binding refuses its calls on {}",
                    name(self, a.unit),
                    name(self, u)
                ),
            )),
            None => {
                let clients = self.associations.values().filter(|a| a.unit == u).count();
                if clients >= limits.max_clients as usize {
                    return Err((
                        ErrorCode::NoAcceleratorFits,
                        format!(
                            "{} already has its {} associated clients (max_clients); \
                             select another accelerator first",
                            name(self, u),
                            limits.max_clients
                        ),
                    ));
                }
                self.associations.insert(
                    client,
                    Association {
                        unit: u,
                        memory_bytes: 0,
                    },
                );
                Ok(())
            }
        }
    }

    /// Whether `client` may have a call ring on `unit`: an application,
    /// and a unit the daemon serves itself.
    pub fn check_call_ring(&self, client: ClientId, unit: UnitId) -> Result<(), Refusal> {
        self.application(client)?;
        let u = self.unit_index(unit)?;
        if !self.agents[u].setup.kernels.is_empty() {
            return Err((
                ErrorCode::NotEmulated,
                format!(
                    "unit {} runs real kernels: open a kernel ring (OpenKernelRing) for it",
                    self.agents[u].setup.unit.name
                ),
            ));
        }
        if !self.agents[u].setup.emulated {
            return Err((
                ErrorCode::NotEmulated,
                format!(
                    "unit {} is not served by the daemon: a call ring needs an emulated unit",
                    self.agents[u].setup.unit.name
                ),
            ));
        }
        Ok(())
    }

    /// The index of `unit` if `client` is an application and the daemon
    /// runs kernels on `unit` for clients.
    fn kernel_unit(&self, client: ClientId, unit: UnitId) -> Result<usize, Refusal> {
        self.application(client)?;
        let u = self.unit_index(unit)?;
        let setup = &self.agents[u].setup;
        if setup.kernels.is_empty() {
            return Err((
                ErrorCode::NotEmulated,
                format!(
                    "unit {} runs no kernels for clients; units that do list them in `hetsched units`",
                    setup.unit.name
                ),
            ));
        }
        Ok(u)
    }

    /// Whether `client` may have a kernel ring with a data region of
    /// `region_bytes` on `unit`: an application, a unit the daemon runs
    /// kernels on, and a region size in bounds.
    pub fn check_kernel_ring(
        &self,
        client: ClientId,
        unit: UnitId,
        region_bytes: u64,
    ) -> Result<(), Refusal> {
        self.kernel_unit(client, unit)?;
        let max = self.cfg.max_region_bytes;
        if region_bytes == 0 || region_bytes % 8 != 0 || region_bytes > max {
            return Err((
                ErrorCode::BadKernelCall,
                format!(
                    "a data region of {region_bytes} bytes: it must be a multiple of 8, at most {max} (max_region_mb)"
                ),
            ));
        }
        Ok(())
    }

    /// A kernel call from a client's ring, checked against `region`.
    pub fn submit_kernel(
        &mut self,
        client: ClientId,
        unit: UnitId,
        call: KernelCall,
        region: Arc<DataRegion>,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), Refusal> {
        let u = self.admit(client, unit)?;
        self.stir(client, now);
        let task = call.task;
        let runs = match call.kernel {
            Kernel::User(id) => self.user_kernels.signature(client, unit, id).is_ok(),
            k => self.agents[u].setup.kernels.contains(&k),
        };
        if !runs {
            return Err((
                ErrorCode::BadKernelCall,
                format!(
                    "unit {} does not run {} for this client",
                    self.agents[u].setup.unit.name, call.kernel
                ),
            ));
        }
        let per_unit = self
            .kernel_costs
            .get(&(u, call.kernel))
            .copied()
            .unwrap_or(KERNEL_COST_PRIOR_NS_PER_BYTE);
        let expected = per_unit * call.work() as f64;
        self.agents[u]
            .submit_kernel(client, QueuedKernel { call, region }, expected, now, out)
            .map_err(|r| refusal(r, task))
    }

    /// The executor of `unit` finished `call` after `ran_ns` of its own
    /// time; the agent charges the slot and tells the client.
    #[allow(clippy::too_many_arguments)]
    pub fn kernel_done(
        &mut self,
        unit: UnitId,
        client: ClientId,
        call: &KernelCall,
        ran_ns: u64,
        result: Result<(), String>,
        now: Ns,
        out: &mut Outbox,
    ) {
        let Ok(u) = self.unit_index(unit) else {
            return;
        };
        let mut result = result;
        if let (Kernel::User(id), true) = (call.kernel, ran_ns > self.cfg.max_device_ns) {
            // A kernel that overran was killed with its executor (which
            // says so), or ran to its end just past the limit: either way
            // it will not run again for this client.
            self.user_kernels.revoke(client, unit, id);
            result = result.and_then(|()| {
                Err(format!(
                    "{id} ran {:.3} s, over max_device_seconds ({:.3} s): it is revoked for this \
                 client (register it again to call it)",
                    ran_ns as f64 / 1e9,
                    self.cfg.max_device_ns as f64 / 1e9
                ))
            });
        }
        if result.is_ok() {
            let measured = ran_ns as f64 / call.work().max(1) as f64;
            self.kernel_costs
                .entry((u, call.kernel))
                .and_modify(|c| *c += KERNEL_COST_ALPHA * (measured - *c))
                .or_insert(measured);
        }
        self.stir(client, now);
        // Unknown only if the call was never started here: nothing to free.
        let _ = self.agents[u].complete_kernel(client, call.task, result, now, out);
    }

    /// Whether `client` may register kernel `entry` (of `source_bytes`) with
    /// `unit`: a user `kernel_users` or `kernel_groups` name (or root), an
    /// application, a unit the daemon runs kernels on, a source within
    /// `[kernels] max_source_kb`, and room under the client's
    /// `max_per_client`. The unit's executor then builds it
    /// ([`Monitor::kernel_registered`]).
    pub fn check_register_kernel(
        &self,
        client: ClientId,
        unit: UnitId,
        source_bytes: usize,
        entry: &str,
    ) -> Result<(), Refusal> {
        let entry_of = self.application(client)?;
        let policy = &self.cfg.kernels;
        if !policy.allows(&entry_of.peer) {
            return Err((
                ErrorCode::NotPermitted,
                format!(
                    "user {} may not register kernels with the daemon's units: the daemon's \
                     config names who may (kernel_users, kernel_groups; root always may)",
                    entry_of.peer.uid
                ),
            ));
        }
        self.kernel_unit(client, unit)?;
        let bad = |m: String| Err((ErrorCode::KernelBuildFailed, m));
        let max_source = policy.limits.max_source_bytes.min(MAX_SOURCE_BYTES);
        if source_bytes == 0 || source_bytes > max_source {
            return bad(format!(
                "a kernel source of {source_bytes} bytes: it must be 1..={max_source} \
                 ([kernels] max_source_kb)"
            ));
        }
        // A kernel name, or for CUDA units a declaration of its kinds.
        hetsched_protocol::user_kernel::check_entry(entry).or_else(bad)?;
        let max = policy.limits.max_per_client;
        if self.user_kernels.count(client) >= max {
            return bad(format!(
                "this client has {max} kernels registered already (the limit, [kernels] \
                 max_per_client)"
            ));
        }
        Ok(())
    }

    /// The user `client` runs as, and its group: its kernels run in that
    /// user's executor. `None` once it left.
    pub fn client_user(&self, client: ClientId) -> Option<(u32, u32)> {
        self.clients.get(&client).map(|c| (c.peer.uid, c.peer.gid))
    }

    /// The executor that built `clients`' kernels on `unit` ended: they
    /// may call them no more (until they register them again).
    pub fn kernel_executor_lost(&mut self, unit: UnitId, clients: &[ClientId]) {
        for &c in clients {
            self.user_kernels.revoke_unit(c, unit);
        }
    }

    /// The executor of `unit` built (or failed to build) `client`'s kernel
    /// `entry`, in `build_ns`: records it, charges the build to the
    /// client's share of the unit, and answers the client, if it is still
    /// here.
    #[allow(clippy::too_many_arguments)]
    pub fn kernel_registered(
        &mut self,
        unit: UnitId,
        client: ClientId,
        entry: &str,
        result: Result<crate::user_kernels::Registered, String>,
        build_ns: u64,
        now: Ns,
        out: &mut Outbox,
    ) {
        if !self.clients.contains_key(&client) {
            return;
        }
        if let Ok(u) = self.unit_index(unit) {
            self.agents[u].charge(client, build_ns, now);
        }
        match result {
            Ok(r) => {
                self.user_kernels
                    .add(unit, client, r.id, r.signature.clone());
                out.push(
                    client,
                    DaemonMsg::KernelRegistered {
                        unit,
                        kernel: r.id,
                        signature: r.signature,
                        build_log: r.log,
                        cached: r.cached,
                    },
                );
            }
            Err(message) => out.push(
                client,
                DaemonMsg::Error {
                    code: ErrorCode::KernelBuildFailed,
                    message: format!("kernel `{entry}` is not registered: {message}"),
                    task: None,
                },
            ),
        }
    }

    /// The signature of registered kernel `kernel` on `unit`, if `client`
    /// may call it.
    pub fn user_kernel_signature(
        &self,
        client: ClientId,
        unit: UnitId,
        kernel: UserKernelId,
    ) -> Result<Arc<KernelSignature>, KernelCallError> {
        self.user_kernels.signature(client, unit, kernel)
    }

    /// `RequestDispatch`: the dispatch gate.
    pub fn request_dispatch(
        &mut self,
        client: ClientId,
        unit: UnitId,
        task: TaskId,
        expected_ns: u64,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), Refusal> {
        let u = self.admit(client, unit)?;
        self.submit_client_driven(client, u, task, Work::Gate, expected_ns, now, out)
    }

    /// Queues work the client runs itself (a gate task or a lease) on
    /// unit index `u`, admitted already.
    #[allow(clippy::too_many_arguments)]
    fn submit_client_driven(
        &mut self,
        client: ClientId,
        u: usize,
        task: TaskId,
        work: Work,
        expected_ns: Ns,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), Refusal> {
        self.stir(client, now);
        self.agents[u]
            .submit(client, task, expected_ns as f64, work, now, out)
            .map_err(|r| refusal(r, task))
    }

    /// `TaskCompleted` for a granted task.
    pub fn task_completed(
        &mut self,
        client: ClientId,
        unit: UnitId,
        task: TaskId,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), Refusal> {
        self.application(client)?;
        let u = self.unit_index(unit)?;
        self.stir(client, now);
        self.agents[u]
            .complete_gate(client, task, now, out)
            .map(|_| ())
            .map_err(|r| refusal(r, task))
    }

    /// `SubmitDevice`: modelled work on an emulated device.
    #[allow(clippy::too_many_arguments)]
    pub fn submit_device(
        &mut self,
        client: ClientId,
        unit: UnitId,
        task: TaskId,
        exec_ns: u64,
        bytes_in: u64,
        bytes_out: u64,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), Refusal> {
        let u = self.admit(client, unit)?;
        self.stir(client, now);
        let setup = &self.agents[u].setup;
        if !setup.emulated {
            return Err((
                ErrorCode::NotEmulated,
                format!(
                    "unit {} is not emulated by the daemon; use the dispatch gate",
                    setup.unit.name
                ),
            ));
        }
        let hold = setup.unit.dispatch_ns as f64
            + setup.unit.copy_in_ns(bytes_in)
            + exec_ns as f64
            + setup.unit.copy_out_ns(bytes_out);
        if hold.is_nan() || hold > self.cfg.max_device_ns as f64 {
            return Err((
                ErrorCode::WorkTooLong,
                format!(
                    "device work of {:.3} s exceeds the {:.3} s limit per request",
                    hold / 1e9,
                    self.cfg.max_device_ns as f64 / 1e9
                ),
            ));
        }
        let hold_ns = hold.round() as Ns;
        self.agents[u]
            .submit(client, task, hold, Work::Device { hold_ns }, now, out)
            .map_err(|r| refusal(r, task))
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

    /// Finishes device work that is due and dispatches what can run.
    pub fn advance(&mut self, now: Ns, out: &mut Outbox) {
        for agent in &mut self.agents {
            agent.finish_due(now, out);
        }
    }

    /// Periodic accounting (every 10 ms).
    pub fn tick(&mut self, now: Ns, out: &mut Outbox) {
        for agent in &mut self.agents {
            agent.finish_due(now, out);
            agent.tick(now, out);
        }
    }

    /// When the server must call `advance` next, if anything is pending.
    pub fn next_deadline(&self, now: Ns) -> Option<Ns> {
        self.agents
            .iter()
            .filter_map(|a| a.next_deadline(now))
            .min()
    }

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

    fn class_of(&self, client: ClientId, unit: UnitId) -> ShareClass {
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
    fn stir(&mut self, client: ClientId, now: Ns) {
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
    fn cpu_classes(&self, c: &ClientEntry) -> Vec<(ShareClass, u32)> {
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
    fn refresh_cpu_credits(&mut self, client: ClientId) {
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
    fn tell_domain(&mut self, i: usize, clients: &[ClientId], now: Ns) {
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

    fn domain_info(&self, i: usize) -> DomainInfo {
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
    fn cpu_cores(&self) -> u32 {
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
    fn client_status(&self, c: &ClientEntry, now: Ns) -> ClientStatus {
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
}

/// Weight of a class in min-funding: CUSTOM and NORMAL by shares
/// (CUSTOM shares are percent, NORMAL relative: both count as given),
/// BACKGROUND only gets leftovers.
fn class_weight(class: ShareClass) -> f64 {
    match class {
        ShareClass::Custom { shares } | ShareClass::Normal { shares } => f64::from(shares),
        ShareClass::Background => 0.0,
    }
}

/// Settings no unit could ever accept.
fn check_sane(class: ShareClass) -> Result<(), Refusal> {
    match class {
        ShareClass::Custom { shares: 0 } | ShareClass::Normal { shares: 0 } => Err((
            ErrorCode::InvalidSettings,
            "shares must be at least 1; use the background class to run only on an idle unit"
                .into(),
        )),
        ShareClass::Custom { shares } if shares > MAX_CUSTOM_SHARES => Err((
            ErrorCode::InvalidSettings,
            format!("CUSTOM shares are percent of a unit: {shares} is over {MAX_CUSTOM_SHARES}"),
        )),
        _ => Ok(()),
    }
}

fn refusal(r: AgentRefusal, task: TaskId) -> Refusal {
    match r {
        AgentRefusal::Duplicate => (
            ErrorCode::DuplicateTask,
            format!("task {} is already outstanding on this unit", task.0),
        ),
        AgentRefusal::UnknownTask => (
            ErrorCode::UnknownTask,
            format!("task {} holds no grant on this unit", task.0),
        ),
    }
}
