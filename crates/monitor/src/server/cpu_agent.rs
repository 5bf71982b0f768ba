//! The CPU agent's thread. While a unit runs CoSched or AugC, every
//! `cpu_schedule` (10 ms by default) it hands the units' policies the CPU
//! schedule (which applications have a runnable thread: Pegasus's `HS`);
//! otherwise only on full scans. Every `cpu_scan` it counts runnable threads per
//! nice level per CPU kind in /proc, works out the min-funding
//! exclusive-core hint, (with `cpu_nice_from_shares`) sets the nice
//! level of every application thread from its class, and (with
//! `cpu_cgroups`) keeps each application in a cgroup weighed by its CPU
//! credits ([`crate::cpu_weights`]). The last two are the host's
//! [`CpuControls`] (hetsched-daemon's `renice` and `cpu_cgroups`); a
//! monitor without them leaves nice levels and cgroups alone.
//!
//! It runs apart from the event loop because a /proc walk takes
//! milliseconds on a busy machine, and the dispatch gate must not wait
//! for it. It holds the state lock only to read the clients; the I/O
//! happens outside it, and its results go to a lock of their own
//! ([`crate::cpu_figures`]).

use crate::cpu_figures::CpuFigures;
use crate::host::{CpuControls, CpuControlsWanted, Renice};
use crate::procfs;
use crate::server::Shared;
use hetsched_protocol::Role;
use hetsched_views::CpuKindView;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// Scans until the process ends.
pub(crate) fn run(shared: Arc<Shared>) {
    let mut controls = match shared.setup.host.cpu_controls {
        Some(open) => open(CpuControlsWanted {
            renice: shared.setup.cpu_nice_from_shares,
            cgroups: shared.setup.cpu_cgroups,
        }),
        None => {
            if shared.setup.cpu_nice_from_shares {
                tracing::warn!(
                    "cpu_nice_from_shares: this monitor has no host controls \
                     (the daemon's); nice levels are left alone"
                );
            }
            if shared.setup.cpu_cgroups {
                tracing::warn!(
                    "cpu_cgroups: this monitor has no host controls (the \
                     daemon's); client CPU shares are not enforced through cgroups"
                );
            }
            CpuControls::default()
        }
    };
    let scan_every = shared.setup.cpu_scan;
    let schedule_every = shared.setup.cpu_schedule.min(scan_every);
    let mut since_scan = scan_every;
    loop {
        if since_scan >= scan_every {
            since_scan = std::time::Duration::ZERO;
            scan(&shared, controls.renice.as_mut());
            if let Some(apply) = controls.cgroups.as_mut() {
                let targets = shared.lock().monitor.cpu_cgroup_targets();
                apply(&targets);
            }
        }
        // Between full scans, only while some unit follows the schedule:
        // otherwise the agent sleeps until its next scan.
        let follows = shared.lock().monitor.follows_cpu_schedule();
        let pause = if follows {
            schedule_every
        } else {
            scan_every - since_scan
        };
        if !shared.stop.pause(pause) {
            return;
        }
        since_scan += pause;
        if follows && since_scan < scan_every {
            publish_cpu_schedule(&shared);
        }
    }
}

/// Credits Xen hands out per 30 ms accounting period, the scale of
/// Pegasus's "remaining credit".
const CPU_CREDITS_PER_PERIOD: u32 = 300;

/// Pegasus's `HS` from what the scan saw: the application clients with a
/// runnable thread are the ones whose CPU side runs next. This machine's
/// CFS has no credits to report, so each of them is given an equal part of
/// one accounting period's credit: what an equal-weight credit scheduler
/// would leave them at the start of the period.
fn cpu_schedule(
    state: &crate::server::State,
    runnable: &HashMap<u32, u32>,
) -> Vec<(hetsched_core::ids::ClientId, u32)> {
    let running: Vec<_> = state
        .monitor
        .clients()
        .filter(|c| c.role == Role::Application)
        .filter(|c| runnable.get(&c.peer.pid).copied().unwrap_or(0) > 0)
        .map(|c| c.id)
        .collect();
    let each = CPU_CREDITS_PER_PERIOD / (running.len().max(1) as u32);
    running.into_iter().map(|c| (c, each)).collect()
}

/// Lists which application clients have a runnable thread and hands that
/// to the units' policies as the CPU schedule.
fn publish_cpu_schedule(shared: &Shared) {
    let pids: BTreeSet<u32> = {
        let state = shared.lock();
        state
            .monitor
            .clients()
            .filter(|c| c.role == Role::Application)
            .map(|c| c.peer.pid)
            .collect()
    };
    let runnable: HashMap<u32, u32> = pids
        .into_iter()
        .map(|p| (p, procfs::runnable_threads(p)))
        .collect();
    let mut state = shared.lock();
    let schedule = cpu_schedule(&state, &runnable);
    state.monitor.set_cpu_schedule(&schedule);
}

fn scan(shared: &Shared, renicer: Option<&mut Renice>) {
    publish_cpu_schedule(shared);
    let kinds = shared.cpu_unit_slots.len();
    if kinds == 0 {
        return;
    }
    let by_nice = procfs::runnable_by_nice(&shared.setup.kind_of_cpu, kinds);
    let (pids, nice_targets) = {
        let state = shared.lock();
        let pids: BTreeSet<u32> = state
            .monitor
            .clients()
            .filter(|c| c.role == Role::Application)
            .map(|c| c.peer.pid)
            .collect();
        let targets = renicer.is_some().then(|| state.monitor.cpu_nice_targets());
        (pids, targets)
    };
    if let (Some(r), Some(targets)) = (renicer, nice_targets) {
        r(&targets);
    }
    let threads: HashMap<u32, u32> = pids.into_iter().map(|p| (p, procfs::threads(p))).collect();
    let exclusive = shared
        .lock()
        .monitor
        .exclusive_cores(|pid| threads.get(&pid).copied().unwrap_or(1));
    let mut used = vec![0u32; kinds];
    for cores in exclusive.values() {
        for (k, c) in cores.iter().enumerate() {
            used[k] += c;
        }
    }
    let kinds = (0..kinds)
        .map(|k| CpuKindView {
            threads_by_nice: by_nice[k],
            time_ratio_by_nice: procfs::time_ratios(&by_nice[k]),
            exclusive_cores_free: shared.cpu_unit_slots[k].saturating_sub(used[k]),
        })
        .collect();
    // The timer publishes them with its next pages.
    shared.cpu_figures.set(CpuFigures { kinds, exclusive });
}
