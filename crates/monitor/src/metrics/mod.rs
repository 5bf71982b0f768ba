//! The Prometheus endpoint (`metrics_listen`, `hetsched daemon --metrics
//! ADDR`): counters that only grow ([`ledger`]), a snapshot of the monitor
//! ([`snapshot`]) and its text exposition ([`exposition`]). The HTTP
//! listener that serves it is the host's ([`crate::host::MetricsHttp`],
//! hetsched-daemon's `metrics::http`).
//!
//! A scrape never takes the state lock: the timer thread takes a snapshot
//! under the lock it already holds, at most every [`PUBLISH_EVERY`], and
//! publishes it ([`Published`], swapped whole through
//! [`crate::latest::Latest`]). The first scrape of each published
//! snapshot renders its text, with no lock held; later scrapes of the same
//! snapshot send that text again. However often `/metrics` is scraped,
//! the state lock is held for a snapshot at most once per interval.

pub mod exposition;
pub mod ledger;
pub mod snapshot;

use crate::coordination_results::CoordinationResults;
use crate::latest::Latest;
use crate::monitor::Monitor;
use hetsched_core::ids::Ns;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How often the timer publishes a snapshot while `/metrics` is served:
/// what a scrape shows is at most this old.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(1);

/// A snapshot the timer published, and its text once a scrape rendered it.
#[derive(Debug, Default)]
pub(crate) struct Published {
    snapshot: Option<snapshot::MetricsSnapshot>,
    text: OnceLock<Arc<str>>,
}

/// Takes a snapshot of `monitor` (the caller holds the state lock) and
/// the coordinator's latest `coordination` results, and publishes it to
/// `metrics` for the listener. Names charged since the last one get their
/// labels first ([`crate::monitor::Monitor::label_names_by_usage`]).
pub(crate) fn publish(
    metrics: &Latest<Published>,
    coordination: &Latest<CoordinationResults>,
    monitor: &mut Monitor,
    now: Ns,
) {
    let results = coordination.get();
    let coordination = results
        .status
        .as_ref()
        .map(|status| snapshot::CoordinationInput {
            status,
            last_solve_ns: results.last_solve_ns,
            warm_solves: results.warm_solves,
            cpu_supply: &results.cpu_supply,
        });
    monitor.label_names_by_usage();
    let snapshot = snapshot::MetricsSnapshot::of(monitor, coordination, now, now);
    metrics.set(Published {
        snapshot: Some(snapshot),
        text: OnceLock::new(),
    });
}

/// The text of `GET /metrics`: the latest snapshot published to
/// `metrics`, rendered by the first scrape that asks for it. `None` before
/// the first snapshot.
pub(crate) fn exposition_now(metrics: &Latest<Published>) -> Option<Arc<str>> {
    let published = metrics.get();
    let snapshot = published.snapshot.as_ref()?;
    Some(Arc::clone(
        published
            .text
            .get_or_init(|| exposition::render(snapshot).into()),
    ))
}
