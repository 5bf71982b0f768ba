//! SmartBalance's predictor in the simulated loop: threads expose counter
//! readings, `Θ` is fitted from calibration kernels run on every kind (as
//! `hetsched balance calibrate` does on a real machine), and the balancer
//! sees the predictions of that fit, never the true rates.
//!
//! Counter readings follow the workload model ([`Profile`]): instructions
//! at the thread's IPS on the kind it ran on, cycles at its CPI, LLC
//! references and misses at its rates, branches at a fixed share. Each
//! event is read with a relative error: a PMU counts more events than it
//! has counters by time-multiplexing them and scaling the counts, and the
//! scaled counts of a short window are off by a few percent. Calibration
//! runs are long, so their error is smaller.
//!
//! So the error reported per scenario comes from two places: the fitted
//! `Θ` extrapolating from calibration kernels to the scenario's threads,
//! and the noise of one epoch's counters. It does not contain phase
//! changes between epochs (the profiles are steady) nor behaviour that no
//! counter sees, which a real machine adds.

use super::model::{Profile, SimKind};
use hetsched_core::ips_model::{IpsModel, KernelRun, ThreadCounts, fit_pairs};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Relative standard deviation of each event's count over one epoch.
pub const EPOCH_COUNTER_ERROR: f64 = 0.02;
/// The same over one calibration run (a second per kernel and kind).
pub const CALIBRATION_COUNTER_ERROR: f64 = 0.005;
/// Ridge term of the fit, as the real calibration uses.
const RIDGE: f64 = 1e-3;
/// Branches per instruction and mispredictions per branch: the same for
/// every simulated thread, since the model's IPC does not depend on them.
const BRANCH_SHARE: f64 = 0.15;
const BRANCH_MISS_RATE: f64 = 0.02;

/// `x` read with a uniform relative error of standard deviation `sd`.
fn read(x: f64, sd: f64, rng: &mut ChaCha8Rng) -> u64 {
    let half_width = sd * 3f64.sqrt();
    (x * (1.0 + half_width * (2.0 * rng.random::<f64>() - 1.0))).max(0.0) as u64
}

/// What a thread's counters read after running `seconds` on `kind`.
pub fn counts(
    p: &Profile,
    kind: &SimKind,
    seconds: f64,
    sd: f64,
    rng: &mut ChaCha8Rng,
) -> ThreadCounts {
    let instructions = p.ips(kind) * seconds;
    let cycles = instructions / p.ipc(kind);
    let refs = instructions * p.llc_refs_pki() / 1000.0;
    let branches = instructions * BRANCH_SHARE;
    ThreadCounts {
        task_ns: (seconds * 1e9) as u64,
        instructions: Some(read(instructions, sd, rng)),
        cycles: Some(read(cycles, sd, rng)),
        cache_references: Some(read(refs, sd, rng)),
        cache_misses: Some(read(instructions * p.mpki_on(kind) / 1000.0, sd, rng)),
        branches: Some(read(branches, sd, rng)),
        branch_misses: Some(read(branches * BRANCH_MISS_RATE, sd, rng)),
        l1d_misses: None,
        dtlb_misses: None,
    }
}

/// The calibration kernels: compute- to memory-bound, narrow to wide, as
/// the real balancer's kernels (integer and float chains, pointer chases
/// of growing footprints) span them. None of them is a scenario's thread.
fn calibration_kernels() -> Vec<(String, Profile)> {
    let mut out = Vec::new();
    for ilp in [0.3, 0.55, 0.8, 1.0] {
        for mpki in [0.1, 3.0, 12.0, 45.0] {
            let name = format!("cal-ilp{ilp}-mpki{mpki}");
            out.push((name, Profile::new("calibration", ilp, mpki, 1.0)));
        }
    }
    out
}

/// `Θ` for every ordered pair of a machine's kinds, fitted from counter
/// readings of the calibration kernels.
#[derive(Clone, Debug)]
pub struct Predictor {
    pub model: IpsModel,
    kinds: Vec<SimKind>,
}

impl Predictor {
    /// Runs every calibration kernel on every kind and fits `Θ`.
    pub fn calibrate(kinds: &[SimKind], rng: &mut ChaCha8Rng) -> Predictor {
        let kernels = calibration_kernels();
        let mut runs = Vec::new();
        for (k, kind) in kinds.iter().enumerate() {
            for (name, p) in &kernels {
                let c = counts(p, kind, 1.0, CALIBRATION_COUNTER_ERROR, rng);
                let ipc = match (c.instructions, c.cycles) {
                    (Some(i), Some(cy)) if cy > 0 => i as f64 / cy as f64,
                    _ => continue,
                };
                runs.push(KernelRun {
                    kernel: name,
                    kind: k,
                    counts: c,
                    ipc,
                });
            }
        }
        let fitted = fit_pairs(kinds.len(), &runs, RIDGE);
        Predictor {
            model: IpsModel {
                kinds: kinds.iter().map(|k| k.name.to_string()).collect(),
                hz: kinds.iter().map(|k| k.freq_hz).collect(),
                pairs: fitted.pairs,
                // Power is not predicted here: the simulated balancer
                // derives it from each kind's model at the predicted IPC.
                power: Vec::new(),
            },
            kinds: kinds.to_vec(),
        }
    }

    /// IPS while running on every kind, for a thread whose counters read
    /// `c` over `seconds` on kind `from`: measured there, predicted by `Θ`
    /// elsewhere, scaled by peak speed where the fit gives nothing.
    pub fn ips(&self, from: usize, c: &ThreadCounts, seconds: f64) -> Vec<f64> {
        let measured = c.instructions.unwrap_or(0) as f64 / seconds;
        let x = c.features();
        (0..self.kinds.len())
            .map(|to| {
                if to == from {
                    return measured;
                }
                x.as_ref()
                    .and_then(|x| self.model.predict_ips(from, to, x))
                    .unwrap_or_else(|| {
                        measured * self.kinds[to].peak_ips() / self.kinds[from].peak_ips()
                    })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::model::table2;
    use rand::SeedableRng;

    #[test]
    fn the_fitted_predictor_is_close_on_threads_it_was_not_fitted_on() {
        let kinds = table2().to_vec();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let pred = Predictor::calibrate(&kinds, &mut rng);
        let threads = [
            Profile::new("x264", 0.85, 3.0, 1.0),
            Profile::new("streamcluster", 0.5, 25.0, 1.0),
            Profile::new("canneal", 0.4, 35.0, 0.9),
        ];
        let mut errors = Vec::new();
        for p in &threads {
            for (from, kind) in kinds.iter().enumerate() {
                let c = counts(p, kind, 0.06, EPOCH_COUNTER_ERROR, &mut rng);
                let got = pred.ips(from, &c, 0.06);
                for (to, k) in kinds.iter().enumerate() {
                    if to != from {
                        errors.push((got[to] / p.ips(k) - 1.0).abs());
                    }
                }
            }
        }
        let mean = errors.iter().sum::<f64>() / errors.len() as f64;
        let worst = errors.iter().copied().fold(0.0, f64::max);
        // One epoch's counters are noisy and a single prediction can be
        // off by a tenth or more; on average the fit is within SmartBalance's
        // few percent.
        assert!(mean < 0.06, "mean relative error {mean}");
        assert!(worst < 0.3, "worst relative error {worst}");
        assert!(mean > 0.0, "counter noise must show in predictions");
    }
}
