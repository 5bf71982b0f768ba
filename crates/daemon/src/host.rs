//! The daemon's host parts, handed to the monitor's server through
//! [`Host`]: the CPU agent's nice levels ([`crate::renice`]) and cgroup
//! weights ([`crate::cpu_cgroups`]), the `/metrics` listener
//! ([`crate::metrics::http`]), and the kernel's process events.

use crate::cpu_cgroups::CpuCgroups;
use crate::metrics::http::MetricsListener;
use crate::renice::{Renicer, may_renice};
use hetsched_monitor::host::{
    CpuControls, CpuControlsWanted, Host, MetricsBindError, MetricsHttp, Renice, WeighCgroups,
};
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// What [`crate::launch::prepare`] puts in every daemon setup.
pub const HOST: Host = Host {
    cpu_controls: Some(open_cpu_controls),
    metrics: Some(bind_metrics),
    fork_events: true,
};

/// Opens what `cpu_nice_from_shares` and `cpu_cgroups` ask for, saying
/// why when it cannot (then the daemon goes on without it).
fn open_cpu_controls(wanted: CpuControlsWanted) -> CpuControls {
    let renice = if !wanted.renice {
        None
    } else if may_renice() {
        let mut renicer = Renicer::default();
        let apply = move |targets: &BTreeMap<u32, i32>| {
            renicer.apply(targets);
        };
        Some(Box::new(apply) as Renice)
    } else {
        tracing::warn!(
            "cpu_nice_from_shares needs root (only root can give a thread \
             its priority back); nice levels are left alone"
        );
        None
    };
    let cgroups = if wanted.cgroups {
        match CpuCgroups::open() {
            Ok(mut cg) => {
                tracing::info!("cpu_cgroups: {}", cg.describe());
                let apply = move |targets: &BTreeMap<u32, _>| {
                    cg.apply(targets);
                };
                Some(Box::new(apply) as WeighCgroups)
            }
            Err(why) => {
                tracing::warn!(
                    "cpu_cgroups: {why}; client CPU shares are not enforced \
                     through cgroups"
                );
                None
            }
        }
    } else {
        None
    };
    CpuControls { renice, cgroups }
}

fn bind_metrics(addr: SocketAddr) -> Result<Box<dyn MetricsHttp>, MetricsBindError> {
    Ok(Box::new(MetricsListener::bind(addr)?))
}
