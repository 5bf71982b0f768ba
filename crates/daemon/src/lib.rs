//! The hetsched daemon: the monitor ([`hetsched_monitor`], whose modules
//! are re-exported here) run as the machine's service, with the parts only
//! a daemon has on its host:
//!
//! * [`host`] — the [`hetsched_monitor::host::Host`] it hands the server:
//!   the CPU agent's nice levels ([`renice`], from the monitor's
//!   [`nice_map`]) and cgroup weights ([`cpu_cgroups`]), and `/metrics`
//!   over HTTP ([`metrics::http`]);
//! * [`launch`] — the monitor's setup with those host parts;
//! * [`exclusive`] — device files only the daemon may open;
//! * [`activation`] — systemd socket activation.

pub use hetsched_monitor::{
    admission, agent, checked_dir, config, cpu_weights, devices, domains, kernel_exec, monitor,
    nice_map, outbox, page_rounds, privilege, procfs, server, status_page, store, store_writer,
    user_kernels,
};

pub mod activation;
pub mod cpu_cgroups;
pub mod exclusive;
pub mod host;
pub mod launch;
pub mod metrics;
pub mod renice;
