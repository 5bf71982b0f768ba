//! Random application mixes: a scenario for a machine of one CPU and `G`
//! GPUs of `K` kinds, running `N` applications drawn from stated ranges
//! (`hetsched sim random`). The result is an ordinary scenario file, so a
//! user can edit it to the shape of their own machine and run it with
//! `hetsched sim run`.
//!
//! Every draw comes from one seeded ChaCha stream, in a fixed order, so the
//! same arguments give the same file byte for byte.
//!
//! The ranges (documented in `docs/sim.md`, "Random mixes"):
//! - **GPU kinds.** The first kind is the reference; every other kind runs
//!   at a speed factor drawn uniformly in [`KIND_SPEED`] of it. Each kind
//!   has its own copy bandwidth, uniform in [`COPY_GB_S`]. GPUs are dealt
//!   to kinds in turn (`gpu0` is kind a, `gpu1` kind b, ...).
//! - **Applications.** Input bytes per task log-uniform in [`TASK_KIB`]
//!   (a quarter of the apps draw each task's size from a range instead);
//!   output a fraction of input from [`OUT_RATIOS`]; CPU time per task
//!   log-uniform in [`CPU_MS`]; a GPU speedup over the CPU log-uniform in
//!   [`SPEEDUP`] on the reference kind, times the kind's factor, times an
//!   affinity of the app for the kind log-uniform in [`AFFINITY`]. With
//!   probability [`NO_IMPL`] an app has no implementation on a given kind
//!   (functional asymmetry); the CPU implementation always exists.
//!
//! Units of one kind are equally fast for a given application: the time
//! of an app is drawn per kind, never per unit.

use crate::scenario::{self, ScenarioError};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt::Write as _;

/// The most GPUs a mix may have: a scenario's units, less the CPU.
pub const MAX_GPUS: u32 = hetsched_core::placement::ImplSet::MAX_UNITS as u32 - 1;
/// Input KiB per task, log-uniform.
pub const TASK_KIB: (f64, f64) = (64.0, 8192.0);
/// Output bytes as a fraction of input bytes, one drawn per app.
pub const OUT_RATIOS: [f64; 4] = [0.01, 0.125, 0.5, 1.0];
/// CPU milliseconds per task at the mean size, log-uniform.
pub const CPU_MS: (f64, f64) = (1.0, 100.0);
/// GPU speedup over the CPU on the reference kind, log-uniform.
pub const SPEEDUP: (f64, f64) = (0.5, 40.0);
/// Speed of a kind relative to the reference kind, uniform.
pub const KIND_SPEED: (f64, f64) = (0.25, 1.0);
/// An app's affinity for a kind (a factor on its speedup), log-uniform.
pub const AFFINITY: (f64, f64) = (0.5, 2.0);
/// Host ↔ device bandwidth of a kind, GB/s, uniform.
pub const COPY_GB_S: (f64, f64) = (3.0, 12.0);
/// Probability that an app has no implementation on a kind.
pub const NO_IMPL: f64 = 0.1;
/// Most GPU kinds a mix may have (named `a` to `h`).
pub const MAX_KINDS: u32 = 8;

/// What to generate.
#[derive(Clone, Debug)]
pub struct MixSpec {
    pub apps: u32,
    pub gpus: u32,
    pub kinds: u32,
    pub seed: u64,
    /// Simulated seconds measured, after the warm-up (`None`:
    /// [`default_duration_s`]).
    pub duration_s: Option<f64>,
    /// Simulated seconds of warm-up (`None`: [`default_warmup_s`]).
    pub warmup_s: Option<f64>,
}

/// Mixes up to this many applications measure 5 s (the shipped 8- and
/// 32-app mixes); larger ones scale the window with the number of
/// applications.
pub const SMALL_MIX_APPS: u32 = 32;

/// Seconds measured by default: 5, and above [`SMALL_MIX_APPS`] 5 per 32
/// applications (20 s at 128). At 128 applications an app of long tasks
/// completes about two a second natively, so 5 s would judge it on ten.
pub fn default_duration_s(apps: u32) -> f64 {
    if apps <= SMALL_MIX_APPS {
        5.0
    } else {
        5.0 * f64::from(apps) / 32.0
    }
}

/// Seconds of warm-up by default: 10 per 128 applications, and at least 1
/// (so 1 s up to 12 applications, 2.5 s at 32, 10 s at 128). Every app
/// first profiles every unit it can use, each behind the others' queues,
/// so profiling takes longer the more apps share the units. At 128
/// applications on five units hetsched-pf measured 2.82× with a second of
/// warm-up, most of it profiling placement, and 1.05× (native placement)
/// once settled; at 32 a long-task app was still profiling after 1 s, and
/// its one 413 ms profiling task on a GPU held another app's queue inside
/// the window.
pub fn default_warmup_s(apps: u32) -> f64 {
    (10.0 * f64::from(apps) / 128.0).max(1.0)
}

/// The coordinator's replay budget written into mixes above
/// [`SMALL_MIX_APPS`]: its own default (64 M events a solve) lets one
/// solve of 128 applications take seconds, and a run take most of an hour.
pub const LARGE_MIX_REPLAY_EVENTS: u64 = 8_000_000;

/// Why a mix cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum MixError {
    #[error("a mix needs at least one application")]
    NoApps,
    #[error("a mix needs at least one GPU")]
    NoGpus,
    #[error(
        "--gpus must be at most {MAX_GPUS} (a scenario holds 64 units, one of them the CPU); got {0}"
    )]
    TooManyGpus(u32),
    #[error("--kinds must be between 1 and {MAX_KINDS} and at most --gpus ({gpus}); got {kinds}")]
    Kinds { kinds: u32, gpus: u32 },
    #[error("--duration-s must be a positive number of seconds; got {0}")]
    Duration(f64),
    #[error("--warmup-s must be zero or a positive number of seconds; got {0}")]
    Warmup(f64),
    #[error("the generated scenario does not parse (a bug): {0}")]
    Invalid(#[from] ScenarioError),
}

/// One GPU kind as drawn.
struct Kind {
    letter: char,
    speed: f64,
    copy_gb_s: f64,
    busy_watts: f64,
    idle_watts: f64,
}

/// Draws log-uniformly in `[lo, hi]`.
fn log_uniform(rng: &mut ChaCha8Rng, (lo, hi): (f64, f64)) -> f64 {
    (lo.ln() + rng.random::<f64>() * (hi.ln() - lo.ln())).exp()
}

fn uniform(rng: &mut ChaCha8Rng, (lo, hi): (f64, f64)) -> f64 {
    lo + rng.random::<f64>() * (hi - lo)
}

/// Rounds to four significant digits, so the file reads well and parses
/// back to the value it shows.
fn round4(x: f64) -> f64 {
    if x == 0.0 {
        return 0.0;
    }
    let scale = 10f64.powi(3 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// The scenario's name for `spec`.
pub fn name(spec: &MixSpec) -> String {
    format!(
        "random-{}apps-{}gpus-{}kinds-seed{}",
        spec.apps, spec.gpus, spec.kinds, spec.seed
    )
}

/// Generates the scenario file's text and checks that it parses.
pub fn generate(spec: &MixSpec) -> Result<String, MixError> {
    if spec.apps == 0 {
        return Err(MixError::NoApps);
    }
    if spec.gpus == 0 {
        return Err(MixError::NoGpus);
    }
    if spec.gpus > MAX_GPUS {
        return Err(MixError::TooManyGpus(spec.gpus));
    }
    if spec.kinds == 0 || spec.kinds > MAX_KINDS || spec.kinds > spec.gpus {
        return Err(MixError::Kinds {
            kinds: spec.kinds,
            gpus: spec.gpus,
        });
    }
    let duration_s = spec
        .duration_s
        .unwrap_or_else(|| default_duration_s(spec.apps));
    if !(duration_s.is_finite() && duration_s > 0.0) {
        return Err(MixError::Duration(duration_s));
    }
    let warmup_s = spec.warmup_s.unwrap_or_else(|| default_warmup_s(spec.apps));
    if !(warmup_s.is_finite() && warmup_s >= 0.0) {
        return Err(MixError::Warmup(warmup_s));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let kinds: Vec<Kind> = (0..spec.kinds)
        .map(|k| Kind {
            letter: char::from(b'a' + k as u8),
            speed: if k == 0 {
                1.0
            } else {
                round4(uniform(&mut rng, KIND_SPEED))
            },
            copy_gb_s: round4(uniform(&mut rng, COPY_GB_S)),
            busy_watts: uniform(&mut rng, (65.0, 250.0)).round(),
            idle_watts: uniform(&mut rng, (8.0, 25.0)).round(),
        })
        .collect();
    let name = name(spec);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# Generated by `hetsched sim random --apps {} --gpus {} --kinds {} --seed {}`:\n\
         # one CPU and {} GPUs of {} kinds, {} applications drawn from the ranges in\n\
         # docs/sim.md (\"Random mixes\"). Edit it to the shape of your own machine.",
        spec.apps, spec.gpus, spec.kinds, spec.seed, spec.gpus, spec.kinds, spec.apps
    );
    let _ = writeln!(out, "name = \"{name}\"");
    let _ = writeln!(
        out,
        "description = \"{} random apps on a CPU and {} GPUs of {} kinds (seed {})\"",
        spec.apps, spec.gpus, spec.kinds, spec.seed
    );
    let _ = writeln!(out, "duration_s = {duration_s}");
    let _ = writeln!(out, "warmup_s = {warmup_s}");
    if spec.apps > SMALL_MIX_APPS {
        let _ = writeln!(
            out,
            "# hetsched-pf's replay budget per solve (docs/sim.md, \"The solver at scale\")."
        );
        let _ = writeln!(out, "replay_events_per_solve = {LARGE_MIX_REPLAY_EVENTS}");
    }
    let _ = writeln!(
        out,
        "policies = [\"native\", \"hetsched\", \"hetsched-pf\"]"
    );
    let _ = writeln!(
        out,
        "\n[[units]]\nname = \"cpu\"\nclass = \"cpu\"\nkind = \"cpu\"\npolicy = \"time-share\"\n\
         dispatch_us = 5\nbusy_watts = 190\nidle_watts = 60"
    );
    for g in 0..spec.gpus {
        let kind = &kinds[(g % spec.kinds) as usize];
        let _ = writeln!(
            out,
            "\n[[units]]\nname = \"gpu{g}\"\nclass = \"gpu\"\nkind = \"gpu-{}\"\npolicy = \"fifo\"\n\
             dispatch_us = 20\ncopy = {{ latency_us = 10, in_gb_s = {}, out_gb_s = {} }}\n\
             busy_watts = {}\nidle_watts = {}",
            kind.letter, kind.copy_gb_s, kind.copy_gb_s, kind.busy_watts, kind.idle_watts
        );
    }
    for a in 0..spec.apps {
        write_app(&mut out, &mut rng, a, spec, &kinds);
    }
    scenario::parse(&format!("{name}.toml"), &out)?;
    Ok(out)
}

/// Draws app `a` and writes its table.
fn write_app(out: &mut String, rng: &mut ChaCha8Rng, a: u32, spec: &MixSpec, kinds: &[Kind]) {
    let kib = log_uniform(rng, TASK_KIB).round() as u64;
    let ranged = rng.random::<f64>() < 0.25;
    let out_ratio = OUT_RATIOS[rng.random_range(0..OUT_RATIOS.len())];
    let cpu_ms = round4(log_uniform(rng, CPU_MS));
    let speedup = log_uniform(rng, SPEEDUP);
    // Drawn for every kind, used or not, so the draws of one kind do not
    // depend on whether another kind has an implementation.
    let per_kind: Vec<Option<f64>> = kinds
        .iter()
        .map(|kind| {
            let affinity = log_uniform(rng, AFFINITY);
            let missing = rng.random::<f64>() < NO_IMPL;
            (!missing).then(|| round4(cpu_ms / (speedup * kind.speed * affinity)))
        })
        .collect();
    let _ = writeln!(out, "\n[[apps]]\nname = \"app{a}\"");
    if ranged {
        let _ = writeln!(
            out,
            "bytes = {{ min_kib = {}, max_kib = {} }}",
            (kib / 4).max(1),
            kib
        );
    } else {
        let _ = writeln!(out, "bytes = {{ kib = {kib} }}");
    }
    let _ = writeln!(out, "out_ratio = {out_ratio}");
    let mut times = vec![format!("cpu = {cpu_ms}")];
    for g in 0..spec.gpus {
        if let Some(ms) = per_kind[(g % spec.kinds) as usize] {
            times.push(format!("gpu{g} = {ms}"));
        }
    }
    let _ = writeln!(out, "exec_ms = {{ {} }}", times.join(", "));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn spec(apps: u32, gpus: u32, kinds: u32, seed: u64) -> MixSpec {
        MixSpec {
            apps,
            gpus,
            kinds,
            seed,
            duration_s: None,
            warmup_s: None,
        }
    }

    #[test]
    fn the_same_arguments_give_the_same_file() {
        let a = generate(&spec(8, 4, 2, 7)).unwrap();
        let b = generate(&spec(8, 4, 2, 7)).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, generate(&spec(8, 4, 2, 8)).unwrap());
    }

    #[test]
    fn impossible_shapes_are_refused_with_the_reason() {
        assert!(matches!(generate(&spec(0, 4, 2, 1)), Err(MixError::NoApps)));
        assert!(matches!(generate(&spec(8, 0, 1, 1)), Err(MixError::NoGpus)));
        let e = generate(&spec(8, MAX_GPUS + 1, 2, 1)).unwrap_err();
        assert!(matches!(e, MixError::TooManyGpus(_)), "{e}");
        assert!(e.to_string().contains("at most 63"), "{e}");
        assert!(generate(&spec(8, MAX_GPUS, 2, 1)).is_ok());
        let e = generate(&spec(8, 2, 3, 1)).unwrap_err();
        assert!(e.to_string().contains("--kinds"), "{e}");
        assert!(matches!(
            generate(&spec(8, 4, 0, 1)),
            Err(MixError::Kinds { .. })
        ));
        let mut s = spec(8, 4, 2, 1);
        s.duration_s = Some(f64::NAN);
        assert!(matches!(generate(&s), Err(MixError::Duration(_))));
        let mut s = spec(8, 4, 2, 1);
        s.warmup_s = Some(-1.0);
        assert!(matches!(generate(&s), Err(MixError::Warmup(_))));
    }

    #[test]
    fn large_mixes_warm_up_longer_and_bound_the_replay() {
        let small = generate(&spec(8, 4, 2, 1)).unwrap();
        assert!(small.contains("duration_s = 5\nwarmup_s = 1\n"), "{small}");
        let middle = generate(&spec(32, 4, 2, 1)).unwrap();
        assert!(
            middle.contains("duration_s = 5\nwarmup_s = 2.5\n"),
            "{middle}"
        );
        assert!(!middle.contains("replay_events_per_solve"));
        let large = generate(&spec(128, 4, 2, 1)).unwrap();
        assert!(
            large.contains("duration_s = 20\nwarmup_s = 10\n"),
            "{large}"
        );
        let sc = crate::scenario::parse("mix", &large).unwrap();
        assert_eq!(sc.replay_events_per_solve, Some(LARGE_MIX_REPLAY_EVENTS));
        assert_eq!(sc.warmup_ns, 10_000_000_000);
    }

    /// The mixes shipped under `scenarios/` are what the generator writes
    /// for the arguments their names give.
    #[test]
    fn built_in_mixes_are_the_generators_output() {
        let mut seen = 0;
        for (name, text) in crate::catalog::BUILTIN {
            let Some(rest) = name.strip_prefix("random-") else {
                continue;
            };
            let number = |suffix: &str| -> u64 {
                rest.split('-')
                    .find_map(|part| part.strip_suffix(suffix)?.parse().ok())
                    .or_else(|| {
                        rest.split('-')
                            .find_map(|part| part.strip_prefix(suffix)?.parse().ok())
                    })
                    .unwrap_or_else(|| panic!("{name}: no {suffix}"))
            };
            let spec = MixSpec {
                apps: number("apps") as u32,
                gpus: number("gpus") as u32,
                kinds: number("kinds") as u32,
                seed: number("seed"),
                duration_s: None,
                warmup_s: None,
            };
            assert_eq!(super::name(&spec), *name);
            assert_eq!(generate(&spec).unwrap(), *text, "{name}");
            seen += 1;
        }
        assert!(seen >= 4, "{seen} built-in mixes");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Every mix parses; every app runs on the CPU; units of one kind
        /// are equally fast for each app; times lie in the stated ranges.
        #[test]
        fn mixes_are_runnable_and_consistent_per_kind(
            apps in 1u32..40, gpus in 1u32..9, kinds in 1u32..5, seed in any::<u64>()
        ) {
            prop_assume!(kinds <= gpus);
            let text = generate(&spec(apps, gpus, kinds, seed)).unwrap();
            let sc = scenario::parse("mix.toml", &text).unwrap();
            prop_assert_eq!(sc.apps.len(), apps as usize);
            prop_assert_eq!(sc.machine.units.len(), 1 + gpus as usize);
            let fastest = CPU_MS.0 / (SPEEDUP.1 * AFFINITY.1) * 0.999;
            let slowest = CPU_MS.1 / (SPEEDUP.0 * KIND_SPEED.0 * AFFINITY.0) * 1.001;
            for app in &sc.apps {
                prop_assert!(app.exec_ns[0].is_some(), "{} has no CPU implementation", app.name);
                for g in 0..gpus as usize {
                    let here = app.exec_ns[1 + g];
                    prop_assert_eq!(here, app.exec_ns[1 + g % kinds as usize]);
                    if let Some(ns) = here {
                        let ms = ns / 1e6;
                        prop_assert!(ms >= fastest && ms <= slowest, "{} ms", ms);
                    }
                }
            }
        }
    }
}
