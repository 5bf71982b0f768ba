//! hetsched-sim: a deterministic discrete-event simulator that drives
//! hetsched-core's unit policies and placement on paper-scale machines.

pub mod output;
pub mod report;
