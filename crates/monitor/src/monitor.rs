//! The monitor: every agent and every connected client, and the rules
//! that tie them (privileges, limits, persistence). It is a state machine
//! driven by the server: each call takes `now` and returns messages in an
//! [`Outbox`], so it can be tested without sockets, threads or clocks.
//!
//! This file holds the types, the constructor and the clock (`advance`,
//! `tick`, `next_deadline`); the methods are grouped by concern in the
//! files of `monitor/`, each an `impl Monitor` of its own:
//! - `clients.rs`: connecting, settings, their store, leaving;
//! - `dispatch.rs`: admitting and dispatching tasks and device work;
//! - `kernels.rs`: kernel calls on served units and registered kernels;
//! - `accelerators.rs`: accelerator selection and associations;
//! - `leases.rs`: intercepted programs' time-slice leases;
//! - `views.rs`: what the global and private pages show;
//! - `cpu_plans.rs`: the CPU schedule, exclusive cores, nice levels and
//!   cgroup weights;
//! - `domain_settings.rs`: domain membership, credits and ceilings;
//! - `status.rs`: the status report and the served-work ledger;
//! - `config.rs`: [`MonitorConfig`] and its defaults;
//! - `lineage.rs`: settings a process inherits from its ancestors.

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

mod accelerators;
mod clients;
pub(crate) mod config;
mod cpu_plans;
mod dispatch;
mod domain_settings;
mod kernels;
mod leases;
mod lineage;
mod status;
mod views;
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
