//! Unit policies: how one unit's agent orders and gates the tasks that
//! clients want to run on it, and what it tells each client to expect.
//!
//! Every policy implements [`UnitPolicy`]; the daemon's agents and the
//! simulator's units drive the same objects.

mod accounting;
mod accounts;
mod credit;
mod fifo;
mod priority;
mod records;
mod share;
pub(crate) use share::ClassTotals;
pub mod short_first;
mod time_share;

pub use accounting::{
    ClientLedger, ClientQueue, ClientRecord, DEFAULT_ACTIVITY_WINDOW_NS,
    DEFAULT_USAGE_HALF_LIFE_NS, LedgerConfig, QueuedRequest, UsageAt,
};
pub use credit::{CREDIT_TICK_NS, CreditPolicy, SharedDomain, domain_config};
pub use fifo::FifoPolicy;
pub use priority::PriorityPolicy;
pub use share::{SHARE_ANTICIPATION_NS, SharePolicy, ShareWindow};
pub use short_first::{SHORT_FIRST_STRETCH, short_first_key};
pub use time_share::TimeSharePolicy;

use crate::backend_policy::BackendPolicy;
use crate::ids::{ClientId, Ns, TaskId};
use crate::view::{ClientUnitView, UnitView};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Which policy a unit runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyKind {
    /// One queue in arrival order (what GPU drivers do).
    Fifo,
    /// Higher priority first, FIFO within a priority; no preemption.
    Priority,
    /// Rinnegan's default: CUSTOM / NORMAL / BACKGROUND share classes.
    Share,
    /// A time-shared CPU: the kernel (CFS) interleaves every runnable task,
    /// the agent only admits and reports.
    TimeShare,
    // Pegasus's backend policies (appended: the wire format sends the
    // variant index, so older indices keep their meaning). See
    // [`crate::backend_policy`].
    #[serde(rename = "none")]
    BackendNone,
    #[serde(rename = "rr")]
    BackendRr,
    #[serde(rename = "accc")]
    BackendAccC,
    #[serde(rename = "xc")]
    BackendXc,
    #[serde(rename = "slaf")]
    BackendSlaf,
    #[serde(rename = "augc")]
    BackendAugC,
    #[serde(rename = "cosched")]
    BackendCoSched,
    /// Short tasks may pass long ones queued shortly before them (bounded:
    /// see [`short_first`]). What `hetsched-pf` runs a
    /// FIFO device as.
    ShortFirst,
}

impl PolicyKind {
    pub const ALL: [PolicyKind; 12] = [
        Self::Fifo,
        Self::Priority,
        Self::Share,
        Self::TimeShare,
        Self::BackendNone,
        Self::BackendRr,
        Self::BackendAccC,
        Self::BackendXc,
        Self::BackendSlaf,
        Self::BackendAugC,
        Self::BackendCoSched,
        Self::ShortFirst,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Fifo => "fifo",
            Self::Priority => "priority",
            Self::Share => "share",
            Self::TimeShare => "time-share",
            Self::ShortFirst => "short-first",
            other => other
                .backend()
                .expect("the rest are backend policies")
                .name(),
        }
    }

    /// The Pegasus policy this kind runs, for the backend kinds.
    pub fn backend(self) -> Option<BackendPolicy> {
        Some(match self {
            Self::BackendNone => BackendPolicy::None,
            Self::BackendRr => BackendPolicy::Rr,
            Self::BackendAccC => BackendPolicy::AccC,
            Self::BackendXc => BackendPolicy::Xc,
            Self::BackendSlaf => BackendPolicy::Slaf,
            Self::BackendAugC => BackendPolicy::AugC,
            Self::BackendCoSched => BackendPolicy::CoSched,
            _ => return None,
        })
    }

    /// Whether the apps the coordinator places meet on a unit of this kind
    /// in the order its models assume: arrival (or the short-first order
    /// it picks) on a queue, processor sharing on a CPU. The share policy
    /// pools them ([`UnitPolicy::set_coordinated`]) and the priority one
    /// sees them all at the default priority; Pegasus's credit and ring
    /// policies interleave clients by their own rules.
    pub fn keeps_coordination_order(self) -> bool {
        matches!(
            self,
            Self::Fifo
                | Self::ShortFirst
                | Self::Priority
                | Self::Share
                | Self::TimeShare
                | Self::BackendNone
        )
    }

    pub fn from_backend(b: BackendPolicy) -> PolicyKind {
        match b {
            BackendPolicy::None => Self::BackendNone,
            BackendPolicy::Rr => Self::BackendRr,
            BackendPolicy::AccC => Self::BackendAccC,
            BackendPolicy::Xc => Self::BackendXc,
            BackendPolicy::Slaf => Self::BackendSlaf,
            BackendPolicy::AugC => Self::BackendAugC,
            BackendPolicy::CoSched => Self::BackendCoSched,
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Builds a fresh policy of this kind for a unit with `slots` parallel slots.
    pub fn build(self, slots: u32) -> Box<dyn UnitPolicy> {
        match self {
            Self::Fifo => Box::new(FifoPolicy::new(slots)),
            Self::Priority => Box::new(PriorityPolicy::new(slots)),
            Self::Share => Box::new(SharePolicy::new(slots, ShareWindow::default())),
            Self::TimeShare => Box::new(TimeSharePolicy::new(slots)),
            Self::ShortFirst => Box::new(FifoPolicy::short_first(slots)),
            other => Box::new(CreditPolicy::new(
                other.backend().expect("the rest are backend policies"),
                slots,
            )),
        }
    }
}

/// Rinnegan's share classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "class", rename_all = "kebab-case")]
pub enum ShareClass {
    /// Absolute shares (percent of the unit); the CUSTOM total per unit is at most 100.
    Custom { shares: u32 },
    /// Shares of whatever CUSTOM clients leave, split in proportion.
    Normal { shares: u32 },
    /// Runs only when no CUSTOM or NORMAL client wants the unit.
    Background,
}

impl Default for ShareClass {
    fn default() -> Self {
        ShareClass::Normal {
            shares: DEFAULT_NORMAL_SHARES,
        }
    }
}

/// Shares a NORMAL client gets when nobody says otherwise.
pub const DEFAULT_NORMAL_SHARES: u32 = 10;

/// Most CUSTOM shares one unit can hand out.
pub const MAX_CUSTOM_SHARES: u32 = 100;

/// Everything a policy knows about a client's standing on one unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClientSettings {
    pub class: ShareClass,
    /// Larger runs first under [`PolicyKind::Priority`].
    pub priority: i32,
}

/// A task waiting to run on the unit.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub client: ClientId,
    pub task: TaskId,
    /// The client's estimate of the execution time, ns (used for views only;
    /// accounting always uses the measured duration at completion).
    pub expected_ns: f64,
    pub submitted_at: Ns,
}

/// Why a policy refused a settings change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "CUSTOM shares on this unit would total {requested_total} (limit {MAX_CUSTOM_SHARES}): {available} shares are still free"
    )]
    CustomSharesExceeded {
        requested_total: u32,
        available: u32,
    },
    #[error(
        "shares must be at least 1 (got 0); use the BACKGROUND class to run only on an idle unit"
    )]
    ZeroShares,
    #[error("unknown client {0:?}: it never registered with this unit")]
    UnknownClient(ClientId),
}

/// One unit's scheduling policy.
///
/// Call order for a task: `submit` → (`pick_next` returns it) → `complete`.
/// `tick` runs periodically (every 10 ms in daemon and simulator) and updates
/// moving averages and windows.
pub trait UnitPolicy: fmt::Debug + Send {
    fn kind(&self) -> PolicyKind;

    /// Registers a client (or replaces its settings). Rejects impossible
    /// settings without changing anything.
    fn set_client(
        &mut self,
        client: ClientId,
        settings: ClientSettings,
        now: Ns,
    ) -> Result<(), PolicyError>;

    /// Forgets a client: drops its queued requests (returned to the caller)
    /// and its accounting; a running task of it still calls `complete`.
    fn remove_client(&mut self, client: ClientId, now: Ns) -> Vec<Request>;

    /// Queues a request. Unknown clients are registered with default settings.
    fn submit(&mut self, request: Request, now: Ns);

    /// The request to dispatch now, if the policy lets one run. `None` with
    /// requests queued means they are held back (see `retry_at`). The caller
    /// only asks when the unit has a free slot, except for time-shared units,
    /// which admit everything.
    fn pick_next(&mut self, now: Ns) -> Option<Request>;

    /// A task of `client` finished after running `ran_ns`.
    fn complete(&mut self, client: ClientId, ran_ns: Ns, now: Ns);

    /// `client` used the unit for `ran_ns` outside any slot (a build of a
    /// kernel it registered): charged to its usage as a task of that
    /// length would be. Policies that keep no usage ignore it.
    fn charge(&mut self, _client: ClientId, _ran_ns: Ns, _now: Ns) {}

    /// Periodic accounting.
    fn tick(&mut self, now: Ns);

    /// When held-back requests may become eligible (for a caller that must
    /// wake up to dispatch them), or `None` if nothing is held back.
    fn retry_at(&self, now: Ns) -> Option<Ns>;

    /// What this client can expect from the unit (the private page): its
    /// entry of [`UnitPolicy::client_views`] for a round of one.
    fn client_view(&self, client: ClientId, now: Ns) -> ClientUnitView {
        self.client_views(std::slice::from_ref(&client), now)
            .pop()
            .unwrap_or_default()
    }

    /// The views of `clients` at `now`, in their order. Each policy gives
    /// the whole round at once, so that a view that depends on the other
    /// clients scans them once per round, not once per client (the daemon
    /// refreshes every client's page each tick).
    fn client_views(&self, clients: &[ClientId], now: Ns) -> Vec<ClientUnitView>;

    /// A backend-served unit's credits, ticks and SLO state for `client`
    /// (Pegasus policies); `None` for other policies.
    fn backend_state(&self, _client: ClientId) -> Option<crate::backend_policy::DomainState> {
        None
    }

    /// What everyone can see about the unit (the global page).
    fn unit_view(&self, now: Ns) -> UnitView;

    /// Requests waiting to be dispatched.
    fn queued(&self) -> usize;

    /// The CPU side's schedule for the next period: the clients whose CPU
    /// threads run next, with the CPU credit each has left (Pegasus's
    /// `HS`). Only the co-scheduling backend policies use it.
    fn set_cpu_schedule(&mut self, _scheduled: &[(ClientId, u32)]) {}

    /// The client's CPU credits (its weight on the CPU side), which XC
    /// gives accelerator ticks by. Only the backend policies use them.
    fn set_cpu_credits(&mut self, _client: ClientId, _credits: u32) {}

    /// Puts `client` in a domain it shares with others (a container's
    /// cgroup), or with `None` makes it its own domain again. Only the
    /// backend policies group clients; the others keep serving clients
    /// one by one.
    fn set_client_domain(&mut self, _client: ClientId, _domain: Option<SharedDomain>, _now: Ns) {}

    /// Whether short tasks may pass long ones in the queue (the
    /// coordinator's choice per unit). Only a short-first [`FifoPolicy`] has a
    /// choice; the others keep their order.
    fn set_short_first(&mut self, _on: bool) {}

    /// How long a free slot may stay free for a client expected back soon
    /// while others wait (the share policy's and Pegasus's turns'
    /// anticipation window), ns; 0 makes the policy strictly
    /// work-conserving. Policies without a window ignore it.
    fn set_anticipation_ns(&mut self, _ns: Ns) {}

    /// Whether the coordinator places `client` (it follows published
    /// targets that already weigh its NORMAL shares). The share policy
    /// serves the NORMAL clients it places as one pool, in arrival order
    /// among themselves (the order the coordinator's model assumes), still
    /// against CUSTOM and BACKGROUND clients by class; the others ignore it.
    fn set_coordinated(&mut self, _client: ClientId, _coordinated: bool) {}

    /// Puts `client` in an account (the process it belongs to), or with
    /// `None` on its own. The share policy gives the clients of one
    /// account that hold the same class one entitlement between them,
    /// their usage summed; the others ignore it.
    fn set_client_account(&mut self, _client: ClientId, _account: Option<u64>) {}
}
