//! The targets' programs the benchmarks solve alone: one per size, from
//! the mix of that size (`mix::mix`, seed 1), floor 1.05, equal weights.

use hetsched_core::coordination::{native_estimate, problem};
use hetsched_core::fairness::FairProblem;

/// Apps × units, up to the 256 × 16.
pub const PROGRAM_SIZES: [(usize, usize); 7] = [
    (8, 5),
    (32, 5),
    (32, 9),
    (64, 9),
    (128, 9),
    (256, 9),
    (256, 16),
];

/// The program of `apps` apps on `units` units, and its weights.
pub fn program(apps: usize, units: usize) -> (FairProblem, Vec<f64>) {
    let (supply, demand) = crate::mix::mix(apps, units, 1);
    let native = native_estimate(&demand, &supply);
    (problem(&demand, &supply, &native), vec![1.0; apps])
}
