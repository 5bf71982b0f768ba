//! The Prometheus endpoint: the monitor's counters, snapshot and text
//! exposition (`hetsched_monitor::metrics`, re-exported), served over HTTP
//! by [`http`].

pub use hetsched_monitor::metrics::{exposition, ledger, snapshot};

pub mod http;
