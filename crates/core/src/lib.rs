//! hetsched-core: the pure policy layer of hetsched.
//!
//! Units, task models, unit policies, placement and the proportional-fair
//! bound live here, once. This crate does no I/O, reads no clock and starts
//! no thread: the daemon, the runtime, the balancer and the simulator all
//! drive the same code, passing time in as an argument.

/// The version of every JSON document hetsched writes for people's
/// scripts (`schema_version`: `hetsched status --json`, `units --json`, the
/// simulator's and the demo's reports). Within one version, fields are only
/// added, never removed or changed in meaning.
pub const JSON_SCHEMA_VERSION: u32 = 1;

pub mod backend_policy;
pub mod balance;
pub mod coordination;
pub mod demand_meter;
#[cfg(feature = "solver")]
pub mod fairness;
pub mod ids;
pub mod ips_model;
pub mod local_view;
pub mod min_funding;
pub mod optimizer;
pub mod pipeline_replan;
pub mod pipeline_table;
pub mod placement;
pub mod policy;
/// Task loops replayed to judge allocations (part of [`coordination`]).
#[cfg(feature = "solver")]
pub use coordination::replay;
pub mod task_model;
pub mod turnaround;
pub mod unit;
pub mod view;

pub use ids::{ClientId, KindId, Ns, TaskId, UnitId};
