//! The hetsched daemon: Rinnegan's monitor and agents in user space.
//!
//! * [`monitor`] — the state machine: one [`agent::Agent`] per unit running
//!   a hetsched-core policy, the connected clients, privileges and limits;
//! * `server` — the Unix socket, one thread per connection, the timer that
//!   ends emulated device work and publishes the views every 10 ms.

pub mod agent;
pub mod config;
pub mod launch;
pub mod monitor;
pub mod outbox;
pub mod privilege;
pub mod procfs;
pub mod server;
pub mod store;
