//! The hetsched daemon: Rinnegan's monitor and agents in user space.
//!
//! * [`monitor`] — the state machine: one [`agent::Agent`] per unit running
//!   a hetsched-core policy, the connected clients, privileges and limits;
//! * [`server`] — the Unix socket: one thread per connection, a timer
//!   thread that ends emulated device work and publishes the views every
//!   10 ms, and the CPU agent's thread (the /proc scan, the exclusive-core
//!   hint, and the share → nice mapping of [`nice_map`] applied by
//!   [`renice`]).

pub mod activation;
pub mod admission;
pub mod agent;
pub mod config;
mod connection;
mod coordinator;
mod cpu_agent;
pub mod cpu_cgroups;
pub mod devices;
pub mod domains;
pub mod exclusive;
pub mod kernel_exec;
pub mod launch;
pub mod metrics;
pub mod monitor;
pub mod nice_map;
pub mod outbox;
pub mod page_rounds;
pub mod privilege;
pub mod procfs;
mod reactor;
pub mod renice;
pub mod server;
pub mod status_page;
pub mod store;
pub mod store_writer;
mod timer;
pub mod user_kernels;
