//! The random mixes of issue 10's property test, shared by
//! `pf_mixes.rs` and the `pf_gap` diagnostic example.

use hetsched_sim::scenario::{Scenario, parse};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt::Write;

/// Mixes the property test runs.
pub const MIXES: u64 = 100;

/// One random mix: 2–5 units (the first a time-shared CPU group, the rest
/// FIFO devices behind a copy link), 3–10 apps with one task in flight,
/// base task times over two orders of magnitude (0.1–10 ms) and per-unit
/// speedups over two orders of magnitude (0.1×–10× the base).
pub fn random_mix(seed: u64) -> Scenario {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let units = rng.random_range(2..=5);
    let apps = rng.random_range(3..=10);
    let mut toml = String::new();
    writeln!(
        toml,
        "name = \"mix-{seed}\"\nduration_s = 2\nwarmup_s = 1\npolicies = [\"native\", \"hetsched\", \"hetsched-pf\"]"
    )
    .unwrap();
    for u in 0..units {
        if u == 0 {
            writeln!(
                toml,
                "[[units]]\nname = \"u0\"\nclass = \"cpu\"\npolicy = \"time-share\"\ndispatch_us = 5"
            )
            .unwrap();
        } else {
            writeln!(
                toml,
                "[[units]]\nname = \"u{u}\"\nclass = \"gpu\"\npolicy = \"fifo\"\ndispatch_us = 20\ncopy = {{ latency_us = 10, in_gb_s = 6, out_gb_s = 6 }}"
            )
            .unwrap();
        }
    }
    for a in 0..apps {
        let base_ms = 10f64.powf(rng.random_range(-1.0..1.0));
        let kib = rng.random_range(16..=512);
        let mut exec = Vec::new();
        for u in 0..units {
            // Every app runs on the CPU group; a device lacks an
            // implementation with probability 1/5.
            if u > 0 && rng.random_bool(0.2) {
                continue;
            }
            let ms = base_ms * 10f64.powf(rng.random_range(-1.0..1.0));
            exec.push(format!("u{u} = {ms:.5}"));
        }
        writeln!(
            toml,
            "[[apps]]\nname = \"a{a}\"\nbytes = {{ kib = {kib} }}\nexec_ms = {{ {} }}",
            exec.join(", ")
        )
        .unwrap();
    }
    parse("mix.toml", &toml).expect("generated scenario parses")
}
