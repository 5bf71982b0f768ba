//! The Prometheus endpoint: the monitor's counters, snapshot and text
//! exposition (`hetsched_monitor::metrics`, re-exported), served over HTTP
//! by [`http`] (one connection at a time per worker: [`exchange`]).

pub use hetsched_monitor::metrics::{exposition, ledger, snapshot};

mod exchange;
pub mod http;
