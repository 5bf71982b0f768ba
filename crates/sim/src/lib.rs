//! hetsched-sim: a deterministic discrete-event simulator that drives
//! hetsched-core's unit policies and placement on paper-scale machines.
//!
//! A [`scenario::Scenario`] (machine + workload, from TOML) is run once per
//! placement strategy by the [`engine`]; [`run::run_scenario`] compares
//! them against the `native` baseline and the proportional-fair bound.
//! [`balance`] simulates thread → core balancing (SmartBalance, Kinship and
//! their baselines) epoch by epoch on the papers' machines.

pub mod balance;
pub mod catalog;
pub mod convergence;
pub mod engine;
pub mod goals;
pub mod metrics;
pub mod oracle;
pub mod output;
pub mod pegasus;
pub mod random_mix;
pub mod report;
pub mod run;
pub mod scenario;
pub mod strategy;
