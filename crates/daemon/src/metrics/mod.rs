//! The Prometheus endpoint (`metrics_listen`, `hetsched daemon --metrics
//! ADDR`): counters that only grow ([`ledger`]), a snapshot taken under the
//! state lock ([`snapshot`]), its text exposition ([`exposition`]) and the
//! HTTP listener that serves it ([`http`]).

pub mod exposition;
pub mod http;
pub mod ledger;
pub mod snapshot;
