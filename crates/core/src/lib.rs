//! hetsched-core: the pure policy layer of hetsched.
//!
//! Units, task models, unit policies, placement and the proportional-fair
//! bound live here, once. This crate does no I/O, reads no clock and starts
//! no thread: the daemon, the runtime, the balancer and the simulator all
//! drive the same code, passing time in as an argument.

pub mod backend_policy;
pub mod balance;
pub mod coordination;
pub mod demand_meter;
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
pub mod replay;
pub mod task_model;
pub mod unit;
pub mod view;

pub use ids::{ClientId, KindId, Ns, TaskId, UnitId};
