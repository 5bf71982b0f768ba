//! Drifted demands: what the benchmarks' warm re-solves start from.

use hetsched_core::coordination::AppDemand;

/// `demand` with every app's times drifted by a factor within `1 ± drift`
/// (app `i` by `1 + drift · ((i mod 5) − 2) / 2`): what a warm re-solve
/// starts from.
pub fn drifted(demand: &[AppDemand], drift: f64) -> Vec<AppDemand> {
    demand
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let factor = 1.0 + drift * ((i % 5) as f64 - 2.0) / 2.0;
            AppDemand {
                exec_ns: a.exec_ns.iter().map(|e| e.map(|e| e * factor)).collect(),
                ..a.clone()
            }
        })
        .collect()
}
