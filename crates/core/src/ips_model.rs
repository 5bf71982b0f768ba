//! Cross-core-kind throughput prediction for threads (SmartBalance §4.2).
//!
//! A thread's counters measured on one core kind give a characterisation
//! vector `X` (its IPC, memory and branch shares, miss rates); its IPC on
//! another kind is predicted as `Θ·X` (SmartBalance Eq. 8), with one `Θ`
//! per ordered pair of kinds fitted by least squares from calibration runs.
//! Power follows Eq. 9: `p = α1·IPC + α0` per kind
//! ([`PowerModel`](crate::balance::PowerModel)). IPS is IPC times the
//! kind's effective frequency (for an emulated slow core: nominal frequency
//! times its duty fraction, since throttling leaves IPC while running
//! unchanged and takes away cycles).
//!
//! Counters a machine lacks (a VM without a PMU, an event the PMU does not
//! have) are `None`; the features built from them are left out of the fit
//! and of the prediction, so a model fitted without them still predicts.
//!
//! `Θ·X` can stand for the IPC on the target kind (Eq. 8 as written) or for
//! its CPI ([`FitTarget`]). Stall cycles add up (a miss costs the same
//! nanoseconds on every kind, so more cycles on a faster clock), which
//! makes CPI nearly linear in the source kind's CPI and miss rates (the
//! `cpi` and `llc_mpki` features) while IPC is not: memory-bound threads, whose IPC is small, are where an IPC
//! fit goes furthest wrong. [`fit_best`] fits both and keeps the one with
//! the smaller leave-one-out error.

use crate::balance::PowerModel;
use serde::{Deserialize, Serialize};

/// Raw counter deltas of one thread over one sensing window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadCounts {
    /// Time the thread was on a CPU (task clock), ns.
    pub task_ns: u64,
    pub instructions: Option<u64>,
    pub cycles: Option<u64>,
    pub cache_references: Option<u64>,
    pub cache_misses: Option<u64>,
    pub branches: Option<u64>,
    pub branch_misses: Option<u64>,
    pub l1d_misses: Option<u64>,
    pub dtlb_misses: Option<u64>,
}

/// Names of the entries of a [`Features`] vector, in order.
pub const FEATURE_NAMES: [&str; N_FEATURES] = [
    "bias",
    "ipc",
    "mem_share",
    "branch_share",
    "branch_miss_rate",
    "cache_miss_rate",
    "l1d_mpki",
    "dtlb_mpki",
    "llc_mpki",
    "cpi",
];
pub const N_FEATURES: usize = 10;

/// The characterisation vector `X` of Eq. 8; `None` where the counter
/// behind a feature was not measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Features(pub [Option<f64>; N_FEATURES]);

fn ratio(num: Option<u64>, den: Option<u64>) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0 => Some(n as f64 / d as f64),
        _ => None,
    }
}

/// LLC references per kilo-instruction at which a thread counts as wholly
/// cache-bound (Kinship's cache intensity 1): memory-bound PARSEC kernels
/// (streamcluster, canneal) make several tens, compute kernels a few.
pub const CACHE_BOUND_REFS_PKI: f64 = 30.0;

impl ThreadCounts {
    /// How much the thread depends on the last-level cache, in [0, 1]:
    /// its LLC references per kilo-instruction over
    /// [`CACHE_BOUND_REFS_PKI`]. `None` without both counts.
    pub fn cache_intensity(&self) -> Option<f64> {
        let instr = self.instructions.filter(|&i| i > 0)?;
        let refs = self.cache_references?;
        Some((refs as f64 * 1000.0 / instr as f64 / CACHE_BOUND_REFS_PKI).min(1.0))
    }

    /// Instructions per cycle while running, when both were counted.
    pub fn ipc(&self) -> Option<f64> {
        ratio(self.instructions, self.cycles)
    }

    /// The feature vector, or `None` when the thread retired no counted
    /// instruction (nothing to characterise).
    pub fn features(&self) -> Option<Features> {
        let instr = self.instructions.filter(|&i| i > 0)?;
        let per_kilo = |n: Option<u64>| n.map(|n| n as f64 * 1000.0 / instr as f64);
        // Cache references per instruction stand in for the share of
        // memory instructions: generic perf events have no load/store count.
        Some(Features([
            Some(1.0),
            self.ipc(),
            ratio(self.cache_references, Some(instr)),
            ratio(self.branches, Some(instr)),
            ratio(self.branch_misses, self.branches),
            ratio(self.cache_misses, self.cache_references),
            per_kilo(self.l1d_misses),
            per_kilo(self.dtlb_misses),
            per_kilo(self.cache_misses),
            ratio(self.cycles, Some(instr)),
        ]))
    }
}

/// What `Θ·X` predicts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FitTarget {
    /// Instructions per cycle on the target kind (SmartBalance Eq. 8).
    #[default]
    Ipc,
    /// Cycles per instruction on the target kind; the IPC is its inverse.
    Cpi,
}

/// Fitted `Θ` for one ordered pair of kinds: which features it uses and
/// their coefficients.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairModel {
    /// Indices into [`FEATURE_NAMES`].
    pub used: Vec<usize>,
    pub theta: Vec<f64>,
    /// Mean absolute relative error of leave-one-out predictions of the
    /// IPC on the calibration samples (the figure SmartBalance reports as
    /// 4.2 %).
    pub loo_error: Option<f64>,
    /// Models stored before the CPI fit existed predict IPC.
    #[serde(default)]
    pub target: FitTarget,
}

/// Smallest CPI a prediction may give: no core retires more than 16
/// instructions a cycle, so anything below is a fit gone wrong, not a
/// fast thread.
const MIN_CPI: f64 = 1.0 / 16.0;

impl PairModel {
    /// Predicted IPC on the target kind; `None` when a used feature is
    /// missing from `x`, or when a CPI fit predicts an impossible CPI.
    pub fn predict(&self, x: &Features) -> Option<f64> {
        let mut y = 0.0;
        for (&f, &t) in self.used.iter().zip(&self.theta) {
            y += t * x.0[f]?;
        }
        match self.target {
            FitTarget::Ipc => Some(y.max(0.0)),
            FitTarget::Cpi => (y >= MIN_CPI).then(|| 1.0 / y),
        }
    }
}

/// Why a fit failed.
#[derive(Clone, Debug, thiserror::Error, PartialEq)]
pub enum FitError {
    #[error("{samples} samples cannot fit {features} coefficients")]
    TooFewSamples { samples: usize, features: usize },
    #[error("no feature was measured in every sample")]
    NoFeatures,
}

/// Least-squares fit of `ipc ≈ Θ·X` (Eq. 8) over the features present in
/// every sample, with a small ridge term so collinear features (two
/// programs with the same branch share, say) do not make the system
/// singular. Each sample is a characterisation and the IPC it gave.
pub fn fit(samples: &[(Features, f64)], ridge: f64) -> Result<PairModel, FitError> {
    fit_for(samples, ridge, FitTarget::Ipc)
}

/// The IPC fit and the CPI fit, whichever predicts the IPC of a left-out
/// sample better; the IPC fit when neither has a leave-one-out error (too
/// few samples to tell) or when a sample's IPC is not positive (no CPI).
pub fn fit_best(samples: &[(Features, f64)], ridge: f64) -> Result<PairModel, FitError> {
    let ipc = fit_for(samples, ridge, FitTarget::Ipc)?;
    if samples.iter().any(|(_, y)| *y <= 0.0) {
        return Ok(ipc);
    }
    let cpi = fit_for(samples, ridge, FitTarget::Cpi)?;
    Ok(match (ipc.loo_error, cpi.loo_error) {
        (Some(a), Some(b)) if b < a => cpi,
        _ => ipc,
    })
}

/// `fit` for a chosen target; samples' values are IPCs either way.
pub fn fit_for(
    samples: &[(Features, f64)],
    ridge: f64,
    target: FitTarget,
) -> Result<PairModel, FitError> {
    let used: Vec<usize> = (0..N_FEATURES)
        .filter(|&f| {
            samples
                .iter()
                .all(|(x, _)| x.0[f].is_some_and(f64::is_finite))
        })
        .collect();
    if used.is_empty() {
        return Err(FitError::NoFeatures);
    }
    if samples.len() < used.len() {
        return Err(FitError::TooFewSamples {
            samples: samples.len(),
            features: used.len(),
        });
    }
    let regressed: Vec<(Features, f64)> = match target {
        FitTarget::Ipc => samples.to_vec(),
        FitTarget::Cpi => samples.iter().map(|(x, y)| (*x, 1.0 / y)).collect(),
    };
    let theta = solve_normal_equations(&regressed, &used, ridge, None);
    let loo_error = leave_one_out_error(samples, &regressed, &used, ridge, target);
    Ok(PairModel {
        used,
        theta,
        loo_error,
        target,
    })
}

fn row(x: &Features, used: &[usize]) -> Vec<f64> {
    used.iter().map(|&f| x.0[f].unwrap_or(0.0)).collect()
}

/// `(XᵀX + λI) Θ = Xᵀy`, skipping sample `skip`. The bias column is not
/// penalised. Solved by Gaussian elimination with partial pivoting: the
/// system is at most 8×8, which does not justify a linear-algebra crate.
/// The jitter makes the matrix positive definite, so no pivot is zero.
fn solve_normal_equations(
    samples: &[(Features, f64)],
    used: &[usize],
    ridge: f64,
    skip: Option<usize>,
) -> Vec<f64> {
    let n = used.len();
    let mut a = vec![vec![0.0; n + 1]; n];
    for (i, (x, y)) in samples.iter().enumerate() {
        if Some(i) == skip {
            continue;
        }
        let r = row(x, used);
        for (a_p, &r_p) in a.iter_mut().zip(&r) {
            for (a_pq, &r_q) in a_p.iter_mut().zip(&r) {
                *a_pq += r_p * r_q;
            }
            a_p[n] += r_p * y;
        }
    }
    // A feature that is a combination of others (a branch share equal in
    // every sample is collinear with the bias) makes XᵀX singular. A
    // relative jitter on the diagonal, far below any real signal and
    // independent of each feature's scale, keeps it positive definite;
    // predictions inside the samples' span are unaffected.
    for (p, &f) in used.iter().enumerate() {
        a[p][p] = a[p][p] * (1.0 + 1e-9) + 1e-12 + if f != 0 { ridge } else { 0.0 };
    }
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
            .unwrap_or(col);
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for (r, a_r) in a.iter_mut().enumerate() {
            let k = a_r[col] / pivot_row[col];
            if r != col && k != 0.0 {
                for (x, p) in a_r[col..].iter_mut().zip(&pivot_row[col..]) {
                    *x -= k * p;
                }
            }
        }
    }
    a.iter()
        .enumerate()
        .map(|(p, a_p)| a_p[n] / a_p[p])
        .collect()
}

/// Mean relative error of each sample's IPC predicted by the fit of the
/// others; `regressed` holds the values the fit regresses on (IPC or CPI).
fn leave_one_out_error(
    samples: &[(Features, f64)],
    regressed: &[(Features, f64)],
    used: &[usize],
    ridge: f64,
    target: FitTarget,
) -> Option<f64> {
    if samples.len() <= used.len() {
        return None;
    }
    let mut total = 0.0;
    let mut counted = 0usize;
    for (i, (x, y)) in samples.iter().enumerate() {
        if *y <= 0.0 {
            continue;
        }
        let theta = solve_normal_equations(regressed, used, ridge, Some(i));
        let m = PairModel {
            used: used.to_vec(),
            theta,
            loo_error: None,
            target,
        };
        // Every used feature is in every sample, so only an impossible CPI
        // gives no prediction: count it as wholly wrong.
        total += m.predict(x).map_or(1.0, |p| (p - y).abs() / y);
        counted += 1;
    }
    (counted > 0).then(|| total / counted as f64)
}

/// One calibration kernel's run on one kind: what its counters said and the
/// IPC it achieved there (instructions over the cycles the kind delivered).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelRun<'a> {
    pub kernel: &'a str,
    pub kind: usize,
    pub counts: ThreadCounts,
    pub ipc: f64,
}

/// An ordered pair of kinds whose `Θ` could not be fitted.
#[derive(Clone, Debug, PartialEq)]
pub struct PairFailure {
    pub from: usize,
    pub to: usize,
    pub error: FitError,
}

/// The fitted pairs of `kinds` kinds: `pairs[from][to]`, `None` on the
/// diagonal and where the fit failed.
#[derive(Clone, Debug, PartialEq)]
pub struct FittedPairs {
    pub pairs: Vec<Vec<Option<PairModel>>>,
    pub failures: Vec<PairFailure>,
}

/// `Θ` for every ordered pair of kinds from calibration runs: a kernel's
/// characterisation on `from` against the IPC it achieved on `to`, for
/// every kernel run on both; IPC or CPI target per pair by [`fit_best`].
pub fn fit_pairs(kinds: usize, runs: &[KernelRun<'_>], ridge: f64) -> FittedPairs {
    let mut pairs = vec![vec![None; kinds]; kinds];
    let mut failures = Vec::new();
    for (from, row) in pairs.iter_mut().enumerate() {
        for (to, slot) in row.iter_mut().enumerate() {
            if from == to {
                continue;
            }
            let samples: Vec<(Features, f64)> = runs
                .iter()
                .filter(|a| a.kind == from)
                .filter_map(|a| {
                    let b = runs.iter().find(|b| b.kind == to && b.kernel == a.kernel)?;
                    Some((a.counts.features()?, b.ipc))
                })
                .collect();
            match fit_best(&samples, ridge) {
                Ok(p) => *slot = Some(p),
                Err(error) => failures.push(PairFailure { from, to, error }),
            }
        }
    }
    FittedPairs { pairs, failures }
}

/// Θ for every ordered pair of kinds plus each kind's power model and
/// effective frequency: what `hetsched balance calibrate` stores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IpsModel {
    /// Kind names, in kind order.
    pub kinds: Vec<String>,
    /// Effective frequency of each kind, Hz (nominal × duty fraction).
    pub hz: Vec<f64>,
    /// `pairs[from][to]`; `None` where calibration could not fit one.
    pub pairs: Vec<Vec<Option<PairModel>>>,
    pub power: Vec<PowerModel>,
}

/// Why a stored model cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ModelError {
    #[error("{field} has {got} entries for {kinds} kinds")]
    Shape {
        field: &'static str,
        got: usize,
        kinds: usize,
    },
    #[error("pair {from} → {to}: {reason}")]
    Pair {
        from: usize,
        to: usize,
        reason: String,
    },
    #[error("kind {kind}: frequency or power is not finite and positive")]
    Figures { kind: usize },
}

impl IpsModel {
    /// Checks a model read from a file: every table sized by the kinds,
    /// feature indices in range, coefficients finite. Prediction relies on
    /// it (a feature index out of range would otherwise panic).
    pub fn validate(&self) -> Result<(), ModelError> {
        let kinds = self.kinds.len();
        let shape = |field, got| {
            if got == kinds {
                Ok(())
            } else {
                Err(ModelError::Shape { field, got, kinds })
            }
        };
        shape("hz", self.hz.len())?;
        shape("power", self.power.len())?;
        shape("pairs", self.pairs.len())?;
        for (from, row) in self.pairs.iter().enumerate() {
            shape("pairs row", row.len())?;
            for (to, p) in row.iter().enumerate() {
                let Some(p) = p else { continue };
                let bad = |reason: &str| ModelError::Pair {
                    from,
                    to,
                    reason: reason.into(),
                };
                if p.used.len() != p.theta.len() {
                    return Err(bad("as many coefficients as features are needed"));
                }
                if p.used.iter().any(|&f| f >= N_FEATURES) {
                    return Err(bad("unknown feature index"));
                }
                if !p.theta.iter().all(|t| t.is_finite()) {
                    return Err(bad("a coefficient is not finite"));
                }
            }
        }
        for (kind, (hz, pw)) in self.hz.iter().zip(&self.power).enumerate() {
            let figures = [pw.watts_per_ipc, pw.static_watts, pw.sleep_watts];
            if !(hz.is_finite() && *hz > 0.0 && figures.iter().all(|w| w.is_finite() && *w >= 0.0))
            {
                return Err(ModelError::Figures { kind });
            }
        }
        Ok(())
    }

    /// Predicted instructions per second of a thread characterised by
    /// `x` on kind `from`, if it ran alone on a core of kind `to`.
    pub fn predict_ips(&self, from: usize, to: usize, x: &Features) -> Option<f64> {
        let ipc = self.predict_ipc(from, to, x)?;
        Some(ipc * self.hz.get(to)?)
    }

    /// Predicted IPC on kind `to` (measured IPC itself when `to == from`).
    pub fn predict_ipc(&self, from: usize, to: usize, x: &Features) -> Option<f64> {
        if from == to {
            return x.0[1];
        }
        self.pairs.get(from)?.get(to)?.as_ref()?.predict(x)
    }

    /// Predicted power of that thread on kind `to`, watts.
    pub fn predict_watts(&self, from: usize, to: usize, x: &Features) -> Option<f64> {
        Some(
            self.power
                .get(to)?
                .running_watts(self.predict_ipc(from, to, x)?),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(instr: u64, cycles: u64, branches: u64, misses: u64) -> ThreadCounts {
        ThreadCounts {
            task_ns: 1_000_000,
            instructions: Some(instr),
            cycles: Some(cycles),
            branches: Some(branches),
            branch_misses: Some(misses),
            ..ThreadCounts::default()
        }
    }

    #[test]
    fn features_follow_the_counters_and_skip_missing_ones() {
        let x = counts(2000, 1000, 200, 20).features().unwrap();
        assert_eq!(x.0[1], Some(2.0));
        assert_eq!(x.0[3], Some(0.1));
        assert_eq!(x.0[4], Some(0.1));
        assert_eq!(x.0[2], None);
        assert!(counts(0, 1000, 0, 0).features().is_none());
    }

    #[test]
    fn a_linear_relation_is_recovered_and_predicted() {
        // Target IPC = 0.2 + 0.5·ipc − 2·branch_miss_rate, exactly.
        let mut samples = Vec::new();
        for (i, c) in [1000u64, 1300, 1700, 2500, 900, 1100, 4000]
            .iter()
            .enumerate()
        {
            let misses = (i as u64 * 7) % 30;
            let x = counts(2000, *c, 300, misses).features().unwrap();
            let y = 0.2 + 0.5 * x.0[1].unwrap() - 2.0 * x.0[4].unwrap();
            samples.push((x, y));
        }
        let m = fit(&samples, 0.0).unwrap();
        assert_eq!(m.used, vec![0, 1, 3, 4, 9]);
        let x = counts(2000, 1600, 300, 12).features().unwrap();
        let want = 0.2 + 0.5 * 2000.0 / 1600.0 - 2.0 * 0.04;
        assert!((m.predict(&x).unwrap() - want).abs() < 1e-6);
        assert!(m.loo_error.unwrap() < 1e-6, "{m:?}");
    }

    #[test]
    fn too_few_samples_is_an_error_not_a_guess() {
        let x = counts(2000, 1000, 200, 20).features().unwrap();
        assert!(matches!(
            fit(&[(x, 1.0)], 0.0),
            Err(FitError::TooFewSamples { .. })
        ));
    }

    #[test]
    fn the_model_turns_ipc_into_ips_and_watts() {
        let x = counts(2000, 1000, 200, 20).features().unwrap();
        let model = IpsModel {
            kinds: vec!["big".into(), "little".into()],
            hz: vec![2e9, 0.8e9],
            pairs: vec![
                vec![
                    None,
                    Some(PairModel {
                        used: vec![1],
                        theta: vec![0.5],
                        loo_error: None,
                        target: FitTarget::Ipc,
                    }),
                ],
                vec![None, None],
            ],
            power: vec![
                PowerModel {
                    watts_per_ipc: 1.0,
                    static_watts: 0.5,
                    sleep_watts: 0.0,
                },
                PowerModel {
                    watts_per_ipc: 0.2,
                    static_watts: 0.1,
                    sleep_watts: 0.0,
                },
            ],
        };
        assert_eq!(model.predict_ips(0, 0, &x), Some(4e9));
        assert_eq!(model.predict_ips(0, 1, &x), Some(0.8e9));
        assert!((model.predict_watts(0, 1, &x).unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(model.predict_ips(1, 0, &x), None);
        assert_eq!(model.validate(), Ok(()));
        let mut bad = model.clone();
        bad.pairs[0][1].as_mut().unwrap().used = vec![N_FEATURES];
        assert!(matches!(bad.validate(), Err(ModelError::Pair { .. })));
        let mut short = model;
        short.hz.pop();
        assert!(matches!(
            short.validate(),
            Err(ModelError::Shape { field: "hz", .. })
        ));
    }

    /// Counts of a thread whose CPI on a kind is `base_cpi + stall` per
    /// LLC miss: the additive-stall shape the CPI fit is for.
    fn stall_counts(base_cpi: f64, llc_mpki: f64, stall_cycles: f64) -> ThreadCounts {
        let instr = 1_000_000u64;
        let cpi = base_cpi + llc_mpki / 1000.0 * stall_cycles;
        ThreadCounts {
            task_ns: 1_000_000,
            instructions: Some(instr),
            cycles: Some((instr as f64 * cpi) as u64),
            cache_misses: Some((llc_mpki * 1000.0) as u64),
            ..ThreadCounts::default()
        }
    }

    #[test]
    fn the_cpi_fit_is_kept_where_stalls_add_up() {
        // Source kind: 40 stall cycles per miss; target: twice as wide
        // (half the base CPI) and 80 stall cycles (a faster clock).
        let mut runs = Vec::new();
        let names: Vec<String> = (0..12).map(|i| format!("k{i}")).collect();
        for (i, name) in names.iter().enumerate() {
            let base = 0.4 + 0.15 * (i % 4) as f64;
            let mpki = [0.5, 4.0, 15.0][i % 3] + i as f64;
            let src = stall_counts(base, mpki, 40.0);
            let dst = stall_counts(base / 2.0, mpki, 80.0);
            runs.push(KernelRun {
                kernel: name,
                kind: 0,
                ipc: src.ipc().unwrap(),
                counts: src,
            });
            runs.push(KernelRun {
                kernel: name,
                kind: 1,
                ipc: dst.ipc().unwrap(),
                counts: dst,
            });
        }
        let fitted = fit_pairs(2, &runs, 0.0);
        assert!(fitted.failures.is_empty(), "{:?}", fitted.failures);
        let there = fitted.pairs[0][1].as_ref().unwrap();
        assert_eq!(there.target, FitTarget::Cpi);
        assert!(there.loo_error.unwrap() < 0.01, "{there:?}");
        let ipc_only = fit(
            &runs
                .chunks(2)
                .map(|r| (r[0].counts.features().unwrap(), r[1].ipc))
                .collect::<Vec<_>>(),
            0.0,
        )
        .unwrap();
        assert!(ipc_only.loo_error.unwrap() > there.loo_error.unwrap());
        // A thread outside the calibration set.
        let x = stall_counts(0.55, 7.0, 40.0).features().unwrap();
        let want = stall_counts(0.275, 7.0, 80.0).ipc().unwrap();
        assert!((there.predict(&x).unwrap() / want - 1.0).abs() < 0.01);
        assert!(fitted.pairs[0][0].is_none());
    }

    #[test]
    fn a_model_stored_before_the_cpi_fit_predicts_ipc() {
        let old = r#"{"used":[0,1],"theta":[0.1,0.5],"loo_error":null}"#;
        let p: PairModel = serde_json::from_str(old).unwrap();
        assert_eq!(p.target, FitTarget::Ipc);
        // An impossible CPI is no prediction, not an absurd IPC.
        let cpi = PairModel {
            target: FitTarget::Cpi,
            ..p
        };
        let x = counts(2000, 1000, 200, 20).features().unwrap();
        assert_eq!(cpi.predict(&x), Some(1.0 / 1.1));
        let negative = PairModel {
            theta: vec![-1.0, 0.0],
            ..cpi
        };
        assert_eq!(negative.predict(&x), None);
    }
}
