//! The hetsched monitor: Rinnegan's monitor and agents, run by the daemon
//! or embedded in an application.
//!
//! * [`monitor`] — the state machine (sans I/O): one [`agent::Agent`] per
//!   unit running a hetsched-core policy, the connected clients, privileges
//!   ([`privilege`]), the settings store's model ([`store`]), domains
//!   ([`domains`]) and limits; what it decides goes out through an
//!   [`outbox::Outbox`];
//! * [`config`] and [`launch`] — from a config file to a
//!   [`server::DaemonSetup`];
//! * [`server`] — the Unix socket: a few connection workers, a timer
//!   thread that ends emulated device work and publishes the views every
//!   10 ms, the CPU agent's thread (the /proc scan, the exclusive-core
//!   hint, the share → nice mapping of [`nice_map`] and the cgroup weights
//!   of [`cpu_weights`]), the kernel executors and (feature
//!   `coordination`, which brings hetsched-core's conic solver) the
//!   proportional-fair coordinator;
//! * [`embedded`] — the same server on threads of an application, behind
//!   a private socket: [`embedded::MonitorHandle`] stops and joins them
//!   all when dropped;
//! * [`host`] — what only a daemon does to its host (renice, cgroups,
//!   `/metrics` over HTTP): hetsched-daemon supplies it, an embedded
//!   monitor goes without.

pub mod admission;
pub mod agent;
pub mod checked_dir;
pub mod config;
mod coordination_results;
mod cpu_figures;
pub mod cpu_weights;
mod demand_report;
pub mod devices;
pub mod domains;
pub mod embedded;
mod fork_watch;
pub mod host;
pub mod kernel_config;
pub mod kernel_exec;
mod kernel_jobs;
mod latest;
pub mod launch;
pub mod metrics;
pub mod monitor;
pub mod nice_map;
pub mod outbox;
#[cfg(feature = "coordination")]
mod outside_load;
pub mod page_rounds;
pub mod privilege;
pub mod processes;
pub mod procfs;
pub mod server;
pub mod status_page;
pub mod store;
pub mod store_writer;
pub mod user_kernels;
