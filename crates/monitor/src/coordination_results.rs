//! What the proportional-fair coordinator last decided: the targets the
//! timer publishes in the private pages, the summary `status` and
//! `/metrics` show, and how long its last solve took. The coordinator
//! thread replaces them after each tick (`crate::server::coordinator`, with the
//! `coordination` feature); they live apart from the state lock, in a
//! [`crate::latest::Latest`] of their own.

use hetsched_core::ids::ClientId;
use hetsched_protocol::CoordinationStatus;
use hetsched_views::Targets;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default)]
pub(crate) struct CoordinationResults {
    /// Targets per coordinated client, for the private pages.
    pub targets: BTreeMap<ClientId, Targets>,
    /// The coordinator's state for `status` (`None` when it is off or has
    /// not finished a tick yet).
    pub status: Option<CoordinationStatus>,
    /// How long the last solve took, ns (`/metrics`).
    pub last_solve_ns: Option<u64>,
    /// Solves made warm, in the last full pick's shape (`/metrics`).
    pub warm_solves: u64,
    /// Per CPU unit, the outside load and what is left (`/metrics`).
    pub cpu_supply: Vec<crate::metrics::snapshot::CpuSupply>,
}
