//! The Prometheus endpoint (`metrics_listen`, `hetsched daemon --metrics
//! ADDR`): counters that only grow ([`ledger`]), a snapshot taken under the
//! state lock (with the coordinator's latest results, taken before it:
//! [`snapshot`]) and its text exposition ([`exposition`]). The
//! HTTP listener that serves it is the host's ([`crate::host::MetricsHttp`],
//! hetsched-daemon's `metrics::http`).

pub mod exposition;
pub mod ledger;
pub mod snapshot;

use crate::server::Shared;

/// The text of `GET /metrics` now: a snapshot under the state lock,
/// rendered after it is dropped.
pub(crate) fn exposition_now(shared: &Shared) -> String {
    let results = shared.coordination.get();
    let coordination = results
        .status
        .as_ref()
        .map(|status| snapshot::CoordinationInput {
            status,
            last_solve_ns: results.last_solve_ns,
            cpu_supply: &results.cpu_supply,
        });
    let snapshot = {
        let st = shared.lock();
        let now = shared.now();
        snapshot::MetricsSnapshot::of(&st.monitor, coordination, now, now)
    };
    exposition::render(snapshot)
}
