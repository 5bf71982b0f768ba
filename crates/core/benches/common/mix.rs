//! The random mixes the coordination benchmark solves.

use hetsched_core::coordination::{AppDemand, UnitSupply};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub fn mix(apps: usize, units: usize, seed: u64) -> (Vec<UnitSupply>, Vec<AppDemand>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut log_uniform = |lo: f64, hi: f64| {
        let x: f64 = rng.random();
        (lo.ln() + x * (hi.ln() - lo.ln())).exp()
    };
    let supply = std::iter::once(UnitSupply::processor_shared(2.0))
        .chain((1..units).map(|_| UnitSupply::queue(1.0)))
        .collect();
    let demand = (0..apps)
        .map(|_| {
            let cpu_ms = log_uniform(1.0, 100.0);
            let speedup = log_uniform(0.5, 40.0);
            let copy_ms = log_uniform(0.05, 2.0);
            let exec_ns = (0..units)
                .map(|u| {
                    let kind = if u % 2 == 1 { 1.0 } else { 0.4 };
                    Some(
                        if u == 0 {
                            cpu_ms
                        } else {
                            cpu_ms / (speedup * kind)
                        } * 1e6,
                    )
                })
                .collect();
            let overhead_ns = (0..units)
                .map(|u| if u == 0 { 0.0 } else { copy_ms * 1e6 })
                .collect();
            AppDemand {
                exec_ns,
                overhead_ns,
                in_flight: 1.0,
                weight: 1.0,
                declared_native: None,
                native_trusted: false,
                native_in_flight: None,
                exec_samples: Vec::new(),
            }
        })
        .collect();
    (supply, demand)
}
