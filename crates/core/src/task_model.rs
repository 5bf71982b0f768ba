//! Per-task performance models (Rinnegan §2.3 and §3.2).
//!
//! Rinnegan predicts a task's stand-alone execution time on each unit kind
//! from the amount of data it processes, measured while the application runs,
//! and recalibrates when predictions go stale ("off by more than 25 % for more
//! than 10 predictions"). Here that is:
//!
//! * [`LinearFit`]: an online least-squares fit of
//!   `time = fixed + per_byte × bytes`. The paper assumes plain
//!   proportionality; the fixed term absorbs dispatch/launch overhead, and
//!   the fit falls back to proportionality whenever the data cannot support
//!   two parameters.
//! * [`ErrorTracker`]: relative prediction error and the recalibration rule.
//! * [`KindModel`]: one fit plus one tracker, for one unit kind.
//! * [`TaskModel`]: one [`KindModel`] per unit kind, indexed by
//!   [`KindId::index`]; implements [`PerformanceModel`].
//! * [`FnModel`]: adapts an application-supplied closure into a
//!   [`PerformanceModel`] (§3.2: applications may bring their own model).
//! * [`ModelSet`]: the versioned, serialisable collection saved across
//!   program invocations.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ids::KindId;

/// Relative error above which a prediction counts as bad (Rinnegan: "off by
/// more than 25 %").
pub const RECALIBRATE_ERROR: f64 = 0.25;

/// Recalibration fires once *strictly more than* this many consecutive
/// predictions were bad, i.e. on the 11th bad prediction in a row (Rinnegan:
/// "for more than 10 predictions"). Requiring them to be consecutive keeps
/// one-off outliers (a page fault, a cold cache) from discarding a good model.
pub const RECALIBRATE_AFTER: u32 = 10;

/// A kind with fewer samples than this is still being profiled: two distinct
/// sizes are the least that pins down both coefficients of [`LinearFit`].
pub const PROFILE_SAMPLES: u64 = 2;

/// Version of the [`ModelSet`] persistence format; bump on any change to the
/// serialised shape or meaning so stale files are re-profiled, not misread.
pub const MODEL_FORMAT_VERSION: u32 = 1;

/// Below this relative spread of the observed sizes (variance / mean²) the
/// sizes are treated as all equal: a slope from sizes differing by one part in
/// a million is noise, so the fit falls back to proportionality.
const DEGENERATE_SPREAD: f64 = 1e-12;

/// A model of how long one task takes on each unit kind.
pub trait PerformanceModel {
    /// Predicted execution time in ns for `bytes` of input on `kind`, or
    /// `None` when the model knows nothing about that kind yet.
    fn predict_ns(&self, kind: KindId, bytes: u64) -> Option<f64>;
    /// Feeds one measured execution.
    fn observe(&mut self, kind: KindId, bytes: u64, actual_ns: f64);
}

/// Why a measurement was not taken into a model. Rejected measurements leave
/// the model exactly as it was.
#[derive(Clone, Copy, Debug, PartialEq, Error)]
pub enum ObserveError {
    /// The measured time was NaN, infinite or negative.
    #[error("measured time {0} ns is not a finite, non-negative number")]
    InvalidTime(f64),
    /// The measurement is finite but so large that the fit's running sums
    /// would overflow.
    #[error("measurement of {ns} ns for {bytes} bytes overflows the fit")]
    Overflow { bytes: u64, ns: f64 },
    /// The kind index is beyond the model's kinds (see [`TaskModel::set_kinds`]).
    #[error("unit kind {0:?} is not in this model")]
    UnknownKind(KindId),
}

/// What one accepted measurement did to a [`KindModel`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// Relative error of the prediction this measurement was scored against,
    /// if it was scored (see [`KindModel::observe`]).
    pub error: Option<f64>,
    /// The recalibration rule fired: the fit was reset and now holds only
    /// this measurement, so the kind needs profiling again.
    pub recalibrated: bool,
}

// ---------------------------------------------------------------------------
// LinearFit
// ---------------------------------------------------------------------------

/// Online least squares for `time_ns = fixed_ns + per_byte_ns × bytes`.
///
/// Keeps Welford-style running means and centred (co-)moments rather than raw
/// sums of squares, so sizes in the gigabytes do not cancel away the
/// precision of the slope. The coefficients are recomputed on every update
/// and cached, which keeps [`LinearFit::predict`] to one multiply-add.
///
/// Both coefficients are always finite and non-negative, so predictions for
/// any size are never negative:
/// * one sample, or all sizes (nearly) equal: proportional,
///   `per_byte = mean_y / mean_x`, or the mean time when every size was 0;
/// * unconstrained fit with a negative slope: the best constant (`fixed =
///   mean time`), which is the least-squares optimum under `per_byte ≥ 0`;
/// * unconstrained fit with a negative intercept: the best line through the
///   origin, the least-squares optimum under `fixed ≥ 0`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "FitMoments", into = "FitMoments")]
pub struct LinearFit {
    moments: FitMoments,
    fixed_ns: f64,
    per_byte_ns: f64,
}

/// The persistent state of a [`LinearFit`]; the coefficients are derived
/// from it, so a saved file cannot smuggle in negative ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
struct FitMoments {
    /// Accepted samples.
    n: u64,
    /// Running mean of sizes (bytes).
    mean_x: f64,
    /// Running mean of times (ns).
    mean_y: f64,
    /// Σ (x − mean_x)².
    m2_x: f64,
    /// Σ (x − mean_x)(y − mean_y).
    c_xy: f64,
}

impl FitMoments {
    fn is_sane(&self) -> bool {
        [self.mean_x, self.mean_y, self.m2_x, self.c_xy]
            .iter()
            .all(|v| v.is_finite())
            && self.mean_x >= 0.0
            && self.mean_y >= 0.0
            && self.m2_x >= 0.0
    }

    /// One Welford step: the means move first, and each co-moment update
    /// multiplies the deviation from the old mean by the deviation from the
    /// new one, which is exact in real arithmetic and stable in floating point.
    fn push(&self, x: f64, y: f64) -> FitMoments {
        let n = self.n + 1;
        let dx = x - self.mean_x;
        let mean_x = self.mean_x + dx / n as f64;
        let mean_y = self.mean_y + (y - self.mean_y) / n as f64;
        FitMoments {
            n,
            mean_x,
            mean_y,
            m2_x: self.m2_x + dx * (x - mean_x),
            c_xy: self.c_xy + dx * (y - mean_y),
        }
    }

    /// `(fixed_ns, per_byte_ns)`, both finite and non-negative when the
    /// moments are sane.
    fn coefficients(&self) -> (f64, f64) {
        if self.n == 0 {
            return (0.0, 0.0);
        }
        let n = self.n as f64;
        let constant = (self.mean_y, 0.0);
        let sizes_degenerate = self.m2_x <= DEGENERATE_SPREAD * n * self.mean_x * self.mean_x;
        let (fixed, per_byte) = if sizes_degenerate {
            if self.mean_x > 0.0 {
                (0.0, self.mean_y / self.mean_x)
            } else {
                constant
            }
        } else {
            let slope = self.c_xy / self.m2_x;
            let intercept = self.mean_y - slope * self.mean_x;
            if slope < 0.0 {
                constant
            } else if intercept < 0.0 {
                // Σxy / Σx², rebuilt from the centred moments.
                let sxy = self.c_xy + n * self.mean_x * self.mean_y;
                let sxx = self.m2_x + n * self.mean_x * self.mean_x;
                (0.0, (sxy / sxx).max(0.0))
            } else {
                (intercept, slope)
            }
        };
        if fixed.is_finite() && per_byte.is_finite() {
            (fixed, per_byte)
        } else {
            constant
        }
    }
}

impl From<FitMoments> for LinearFit {
    /// Rebuilds the cached coefficients; moments that could not have come
    /// from valid measurements (a corrupt file) yield an empty fit.
    fn from(moments: FitMoments) -> Self {
        if !moments.is_sane() {
            return LinearFit::default();
        }
        let (fixed_ns, per_byte_ns) = moments.coefficients();
        LinearFit {
            moments,
            fixed_ns,
            per_byte_ns,
        }
    }
}

impl From<LinearFit> for FitMoments {
    fn from(fit: LinearFit) -> Self {
        fit.moments
    }
}

impl LinearFit {
    /// An empty fit.
    pub fn new() -> Self {
        Self::default()
    }

    /// The fit with one more measurement, leaving `self` untouched; rejects
    /// NaN, infinite or negative times and measurements that would overflow.
    pub fn observed(&self, bytes: u64, ns: f64) -> Result<LinearFit, ObserveError> {
        validate_time(ns)?;
        let next = LinearFit::from(self.moments.push(bytes as f64, ns));
        // `from` empties insane moments; an empty result here means overflow.
        if next.moments.n == 0 {
            return Err(ObserveError::Overflow { bytes, ns });
        }
        Ok(next)
    }

    /// Adds one measurement; on error the fit is unchanged.
    pub fn observe(&mut self, bytes: u64, ns: f64) -> Result<(), ObserveError> {
        *self = self.observed(bytes, ns)?;
        Ok(())
    }

    /// Predicted ns for `bytes`; never negative. An empty fit predicts 0.
    #[inline]
    pub fn predict(&self, bytes: u64) -> f64 {
        self.fixed_ns + self.per_byte_ns * bytes as f64
    }

    /// `(fixed_ns, per_byte_ns)`, both finite and non-negative.
    pub fn coefficients(&self) -> (f64, f64) {
        (self.fixed_ns, self.per_byte_ns)
    }

    /// Accepted measurements since creation or the last [`Self::reset`].
    pub fn samples(&self) -> u64 {
        self.moments.n
    }

    /// Forgets every measurement.
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

fn validate_time(ns: f64) -> Result<(), ObserveError> {
    // `ns >= 0.0` is false for NaN, so this rejects NaN too.
    if ns.is_finite() && ns >= 0.0 {
        Ok(())
    } else {
        Err(ObserveError::InvalidTime(ns))
    }
}

// ---------------------------------------------------------------------------
// ErrorTracker
// ---------------------------------------------------------------------------

/// Tracks how far predictions land from measurements and applies Rinnegan's
/// recalibration rule: a prediction is bad when its relative error exceeds
/// [`RECALIBRATE_ERROR`], and recalibration is due once strictly more than
/// [`RECALIBRATE_AFTER`] consecutive predictions were bad.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorTracker {
    scored: u64,
    mean_error: f64,
    last_error: Option<f64>,
    consecutive_bad: u32,
}

impl ErrorTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Scores one prediction against its measurement and returns the relative
    /// error `|predicted − actual| / actual` (at most `f64::MAX`). Returns `None` and changes
    /// nothing when no relative error exists (`actual` not finite and
    /// positive, or `predicted` not finite).
    pub fn record(&mut self, predicted: f64, actual: f64) -> Option<f64> {
        if !(actual.is_finite() && actual > 0.0 && predicted.is_finite()) {
            return None;
        }
        // A subnormal `actual` can make the ratio infinite; clamping keeps
        // the running mean finite while still counting a bad prediction.
        let error = ((predicted - actual).abs() / actual).min(f64::MAX);
        self.scored += 1;
        self.mean_error += (error - self.mean_error) / self.scored as f64;
        self.last_error = Some(error);
        self.consecutive_bad = if error > RECALIBRATE_ERROR {
            self.consecutive_bad.saturating_add(1)
        } else {
            0
        };
        Some(error)
    }

    /// True once strictly more than [`RECALIBRATE_AFTER`] consecutive
    /// predictions had a relative error above [`RECALIBRATE_ERROR`].
    pub fn recalibration_due(&self) -> bool {
        self.consecutive_bad > RECALIBRATE_AFTER
    }

    /// Mean relative error over the predictions scored so far.
    pub fn mean_error(&self) -> Option<f64> {
        (self.scored > 0).then_some(self.mean_error)
    }

    /// Relative error of the latest scored prediction.
    pub fn last_error(&self) -> Option<f64> {
        self.last_error
    }

    /// Length of the current run of bad predictions.
    pub fn consecutive_bad(&self) -> u32 {
        self.consecutive_bad
    }

    /// Predictions scored so far.
    pub fn scored(&self) -> u64 {
        self.scored
    }

    /// Forgets all history.
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

// ---------------------------------------------------------------------------
// KindModel
// ---------------------------------------------------------------------------

/// The model of one task on one unit kind: a fit and its error tracker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KindModel {
    fit: LinearFit,
    errors: ErrorTracker,
    recalibrations: u32,
}

impl KindModel {
    pub fn new() -> Self {
        Self::default()
    }

    /// Predicted ns for `bytes`, or `None` before the first measurement.
    #[inline]
    pub fn predict(&self, bytes: u64) -> Option<f64> {
        (self.fit.samples() > 0).then(|| self.fit.predict(bytes))
    }

    /// Takes one measurement.
    ///
    /// The current prediction is scored first, but only once the kind is out
    /// of profiling: a one-sample fit is a bootstrap guess, and scoring it
    /// would pollute the mean error and the bad-prediction streak. If the
    /// recalibration rule then fires, the fit and tracker are reset and the
    /// measurement that tripped the rule becomes the first sample of the new
    /// fit (it is the freshest evidence of the changed behaviour); the kind
    /// is then back in profiling. On error nothing changes.
    pub fn observe(&mut self, bytes: u64, actual_ns: f64) -> Result<Observation, ObserveError> {
        let updated = self.fit.observed(bytes, actual_ns)?;
        let error = if self.needs_profiling() {
            None
        } else {
            self.errors.record(self.fit.predict(bytes), actual_ns)
        };
        let recalibrated = self.errors.recalibration_due();
        if recalibrated {
            self.errors.reset();
            self.recalibrations = self.recalibrations.saturating_add(1);
            // A single finite sample cannot overflow (its co-moments are 0),
            // so the default is unreachable; it avoids a panic path.
            self.fit = LinearFit::new()
                .observed(bytes, actual_ns)
                .unwrap_or_default();
        } else {
            self.fit = updated;
        }
        Ok(Observation {
            error,
            recalibrated,
        })
    }

    /// True while the kind has fewer than [`PROFILE_SAMPLES`] samples: the
    /// runtime should run the task there to (re-)build the model.
    pub fn needs_profiling(&self) -> bool {
        self.fit.samples() < PROFILE_SAMPLES
    }

    /// How many times the recalibration rule has fired.
    pub fn recalibrations(&self) -> u32 {
        self.recalibrations
    }

    /// Mean relative error since the last recalibration.
    pub fn mean_error(&self) -> Option<f64> {
        self.errors.mean_error()
    }

    pub fn fit(&self) -> &LinearFit {
        &self.fit
    }

    pub fn errors(&self) -> &ErrorTracker {
        &self.errors
    }
}

// ---------------------------------------------------------------------------
// TaskModel
// ---------------------------------------------------------------------------

/// The built-in model of one task: a [`KindModel`] per unit kind, indexed by
/// [`KindId::index`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskModel {
    pub name: String,
    kinds: Vec<KindModel>,
}

impl TaskModel {
    /// An empty model for `kinds` unit kinds.
    pub fn new(name: &str, kinds: usize) -> Self {
        TaskModel {
            name: name.into(),
            kinds: vec![KindModel::default(); kinds],
        }
    }

    /// Number of unit kinds modelled.
    pub fn kind_count(&self) -> usize {
        self.kinds.len()
    }

    /// Grows the model to at least `n` kinds (new kinds start empty). Never
    /// shrinks: a kind that disappears for one run keeps its data for the next.
    pub fn set_kinds(&mut self, n: usize) {
        if n > self.kinds.len() {
            self.kinds.resize(n, KindModel::default());
        }
    }

    pub fn kind(&self, kind: KindId) -> Option<&KindModel> {
        self.kinds.get(kind.index())
    }

    /// Like [`PerformanceModel::observe`], but says what happened.
    pub fn try_observe(
        &mut self,
        kind: KindId,
        bytes: u64,
        actual_ns: f64,
    ) -> Result<Observation, ObserveError> {
        self.kinds
            .get_mut(kind.index())
            .ok_or(ObserveError::UnknownKind(kind))?
            .observe(bytes, actual_ns)
    }

    /// True when `kind` needs (re-)profiling; false for unknown kinds, which
    /// cannot be profiled until [`Self::set_kinds`] adds them.
    pub fn needs_profiling(&self, kind: KindId) -> bool {
        self.kind(kind).is_some_and(KindModel::needs_profiling)
    }

    /// Times the recalibration rule fired for `kind` (0 for unknown kinds).
    pub fn recalibrations(&self, kind: KindId) -> u32 {
        self.kind(kind).map_or(0, KindModel::recalibrations)
    }

    /// Mean relative error of `kind`'s predictions since its last recalibration.
    pub fn mean_error(&self, kind: KindId) -> Option<f64> {
        self.kind(kind)?.mean_error()
    }
}

impl PerformanceModel for TaskModel {
    /// O(1) and allocation-free: one bounds-checked index and a multiply-add.
    #[inline]
    fn predict_ns(&self, kind: KindId, bytes: u64) -> Option<f64> {
        self.kinds.get(kind.index())?.predict(bytes)
    }

    /// Invalid measurements and unknown kinds are ignored; use
    /// [`TaskModel::try_observe`] to see why.
    fn observe(&mut self, kind: KindId, bytes: u64, actual_ns: f64) {
        let _ = self.try_observe(kind, bytes, actual_ns);
    }
}

// ---------------------------------------------------------------------------
// FnModel
// ---------------------------------------------------------------------------

/// An application-supplied model: any `Fn(KindId, u64) -> Option<f64>`.
///
/// Measurements are ignored (the application owns its model's state). The
/// closure's answers are sanitised: NaN, infinite or negative predictions
/// become `None`, so a buggy model cannot make placement see negative time.
#[derive(Clone, Copy, Debug)]
pub struct FnModel<F>(pub F);

impl<F> FnModel<F>
where
    F: Fn(KindId, u64) -> Option<f64>,
{
    pub fn new(predict: F) -> Self {
        FnModel(predict)
    }
}

impl<F> PerformanceModel for FnModel<F>
where
    F: Fn(KindId, u64) -> Option<f64>,
{
    fn predict_ns(&self, kind: KindId, bytes: u64) -> Option<f64> {
        (self.0)(kind, bytes).filter(|ns| ns.is_finite() && *ns >= 0.0)
    }

    fn observe(&mut self, _kind: KindId, _bytes: u64, _actual_ns: f64) {}
}

// ---------------------------------------------------------------------------
// ModelSet
// ---------------------------------------------------------------------------

/// Why a loaded [`ModelSet`] cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum ModelSetError {
    /// Saved by a different format version; the caller should warn and
    /// re-profile rather than trust it.
    #[error("model file has format version {found}, expected {expected}")]
    VersionMismatch { found: u32, expected: u32 },
}

/// Every task model of one application, saved across program invocations
/// (§3.2: "The model is saved for use across program invocations").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSet {
    pub version: u32,
    pub tasks: BTreeMap<String, TaskModel>,
}

impl Default for ModelSet {
    fn default() -> Self {
        ModelSet {
            version: MODEL_FORMAT_VERSION,
            tasks: BTreeMap::new(),
        }
    }
}

impl ModelSet {
    /// An empty set at the current format version.
    pub fn new() -> Self {
        Self::default()
    }

    /// `Ok` when this set was written in the current format version.
    pub fn check_version(&self) -> Result<(), ModelSetError> {
        if self.version == MODEL_FORMAT_VERSION {
            Ok(())
        } else {
            Err(ModelSetError::VersionMismatch {
                found: self.version,
                expected: MODEL_FORMAT_VERSION,
            })
        }
    }

    pub fn get(&self, name: &str) -> Option<&TaskModel> {
        self.tasks.get(name)
    }

    pub fn get_mut(&mut self, name: &str) -> Option<&mut TaskModel> {
        self.tasks.get_mut(name)
    }

    /// The model of `name`, created empty if absent, and grown to at least
    /// `kinds` kinds (the machine may have gained a kind since it was saved).
    pub fn get_or_insert(&mut self, name: &str, kinds: usize) -> &mut TaskModel {
        let model = self
            .tasks
            .entry(name.to_owned())
            .or_insert_with(|| TaskModel::new(name, kinds));
        model.set_kinds(kinds);
        model
    }

    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K0: KindId = KindId(0);

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-12)
    }

    #[test]
    fn empty_fit_predicts_zero_and_kind_predicts_none() {
        assert_eq!(LinearFit::new().predict(1000), 0.0);
        let m = TaskModel::new("t", 2);
        assert_eq!(m.predict_ns(K0, 1000), None);
        assert!(m.needs_profiling(K0));
    }

    #[test]
    fn one_sample_is_proportional() {
        let mut f = LinearFit::new();
        f.observe(1000, 500.0).unwrap();
        assert_eq!(f.coefficients(), (0.0, 0.5));
        assert_eq!(f.predict(4000), 2000.0);
    }

    #[test]
    fn zero_size_sample_gives_the_mean() {
        let mut f = LinearFit::new();
        f.observe(0, 300.0).unwrap();
        f.observe(0, 500.0).unwrap();
        assert_eq!(f.coefficients(), (400.0, 0.0));
        assert_eq!(f.predict(1 << 20), 400.0);
    }

    #[test]
    fn equal_sizes_are_proportional_to_the_mean() {
        let mut f = LinearFit::new();
        for y in [90.0, 100.0, 110.0] {
            f.observe(50, y).unwrap();
        }
        let (fixed, per_byte) = f.coefficients();
        assert_eq!(fixed, 0.0);
        assert!(close(per_byte, 2.0, 1e-12));
    }

    #[test]
    fn two_points_fit_exactly() {
        let mut f = LinearFit::new();
        f.observe(100, 1_100.0).unwrap();
        f.observe(1_000, 2_000.0).unwrap();
        let (fixed, per_byte) = f.coefficients();
        assert!(close(fixed, 1_000.0, 1e-12));
        assert!(close(per_byte, 1.0, 1e-12));
    }

    #[test]
    fn negative_intercept_falls_back_to_origin_line() {
        // Unconstrained line: y = 2x - 100; constrained to pass through 0.
        let mut f = LinearFit::new();
        for x in [100u64, 200, 300] {
            f.observe(x, 2.0 * x as f64 - 100.0).unwrap();
        }
        let (fixed, per_byte) = f.coefficients();
        assert_eq!(fixed, 0.0);
        // Σxy / Σx² = (100·100 + 200·300 + 300·500) / (100² + 200² + 300²)
        assert!(close(per_byte, 220_000.0 / 140_000.0, 1e-12));
        assert!(f.predict(0) >= 0.0);
    }

    #[test]
    fn negative_slope_falls_back_to_constant() {
        let mut f = LinearFit::new();
        f.observe(100, 1_000.0).unwrap();
        f.observe(1_000, 400.0).unwrap();
        assert_eq!(f.coefficients(), (700.0, 0.0));
        assert_eq!(f.predict(u64::MAX), 700.0);
    }

    #[test]
    fn invalid_times_are_rejected_and_not_stored() {
        let mut f = LinearFit::new();
        f.observe(10, 10.0).unwrap();
        let before = f;
        for bad in [f64::NAN, -1.0, f64::INFINITY, f64::NEG_INFINITY, -0.0001] {
            assert!(matches!(
                f.observe(10, bad),
                Err(ObserveError::InvalidTime(_))
            ));
            assert_eq!(f, before);
        }
    }

    #[test]
    fn overflowing_measurement_is_rejected() {
        let mut f = LinearFit::new();
        f.observe(0, 1.0).unwrap();
        let before = f;
        assert!(matches!(
            f.observe(u64::MAX, f64::MAX),
            Err(ObserveError::Overflow { .. })
        ));
        assert_eq!(f, before);
    }

    #[test]
    fn reset_empties_the_fit() {
        let mut f = LinearFit::new();
        f.observe(10, 10.0).unwrap();
        f.reset();
        assert_eq!(f.samples(), 0);
        assert_eq!(f.coefficients(), (0.0, 0.0));
    }

    #[test]
    fn tracker_fires_on_the_eleventh_consecutive_bad_prediction() {
        let mut t = ErrorTracker::new();
        for i in 1..=RECALIBRATE_AFTER {
            assert_eq!(t.record(150.0, 100.0), Some(0.5));
            assert_eq!(t.consecutive_bad(), i);
            assert!(!t.recalibration_due());
        }
        t.record(150.0, 100.0);
        assert!(t.recalibration_due());
    }

    #[test]
    fn a_good_prediction_breaks_the_streak() {
        let mut t = ErrorTracker::new();
        for _ in 0..RECALIBRATE_AFTER {
            t.record(200.0, 100.0);
        }
        t.record(101.0, 100.0);
        assert_eq!(t.consecutive_bad(), 0);
        t.record(200.0, 100.0);
        assert!(!t.recalibration_due());
    }

    #[test]
    fn exactly_the_threshold_is_not_bad() {
        let mut t = ErrorTracker::new();
        for _ in 0..=RECALIBRATE_AFTER {
            t.record(125.0, 100.0);
        }
        assert_eq!(t.consecutive_bad(), 0);
    }

    #[test]
    fn tracker_mean_and_last_error() {
        let mut t = ErrorTracker::new();
        assert_eq!(t.mean_error(), None);
        t.record(110.0, 100.0);
        t.record(70.0, 100.0);
        assert!(close(t.mean_error().unwrap(), 0.2, 1e-12));
        assert!(close(t.last_error().unwrap(), 0.3, 1e-12));
        // Zero time has no relative error and changes nothing.
        assert_eq!(t.record(5.0, 0.0), None);
        assert_eq!(t.scored(), 2);
    }

    #[test]
    fn profiling_predictions_are_not_scored() {
        let mut k = KindModel::new();
        assert_eq!(k.observe(100, 200.0).unwrap().error, None);
        assert!(k.needs_profiling());
        // The one-sample guess (2 ns/B → 400 ns) is 33 % off, yet not scored.
        assert_eq!(k.observe(200, 300.0).unwrap().error, None);
        assert!(!k.needs_profiling());
        let obs = k.observe(300, 400.0).unwrap();
        assert_eq!(obs.error, Some(0.0));
        assert_eq!(k.mean_error(), Some(0.0));
    }

    #[test]
    fn unknown_kind_is_none_and_rejected() {
        let mut m = TaskModel::new("t", 1);
        assert_eq!(m.predict_ns(KindId(5), 10), None);
        assert_eq!(
            m.try_observe(KindId(5), 10, 1.0),
            Err(ObserveError::UnknownKind(KindId(5)))
        );
        assert!(!m.needs_profiling(KindId(5)));
        assert_eq!(m.recalibrations(KindId(5)), 0);
        assert_eq!(m.mean_error(KindId(5)), None);
        m.observe(KindId(5), 10, 1.0); // trait path: silently ignored
    }

    #[test]
    fn set_kinds_grows_and_never_shrinks() {
        let mut m = TaskModel::new("t", 1);
        m.observe(K0, 10, 20.0);
        m.set_kinds(3);
        assert_eq!(m.kind_count(), 3);
        assert!(m.needs_profiling(KindId(2)));
        m.set_kinds(1);
        assert_eq!(m.kind_count(), 3);
        assert_eq!(m.predict_ns(K0, 10), Some(20.0));
    }

    #[test]
    fn fn_model_serves_and_sanitises_closures() {
        let mut m = FnModel::new(|kind: KindId, bytes: u64| match kind.0 {
            0 => Some(bytes as f64 * 2.0),
            1 => Some(-5.0),
            2 => Some(f64::NAN),
            _ => None,
        });
        assert_eq!(m.predict_ns(K0, 10), Some(20.0));
        assert_eq!(m.predict_ns(KindId(1), 10), None);
        assert_eq!(m.predict_ns(KindId(2), 10), None);
        assert_eq!(m.predict_ns(KindId(3), 10), None);
        m.observe(K0, 10, 1.0);
        assert_eq!(m.predict_ns(K0, 10), Some(20.0));
        let dynamic: &dyn PerformanceModel = &m;
        assert_eq!(dynamic.predict_ns(K0, 1), Some(2.0));
    }

    #[test]
    fn model_set_get_or_insert_and_version() {
        let mut set = ModelSet::new();
        assert!(set.is_empty());
        set.get_or_insert("scan", 2).observe(K0, 100, 50.0);
        assert_eq!(set.get_or_insert("scan", 3).kind_count(), 3);
        assert_eq!(set.len(), 1);
        assert_eq!(set.get("scan").unwrap().predict_ns(K0, 200), Some(100.0));
        assert!(set.get("other").is_none());
        assert_eq!(set.check_version(), Ok(()));
        set.version = MODEL_FORMAT_VERSION + 1;
        assert_eq!(
            set.check_version(),
            Err(ModelSetError::VersionMismatch {
                found: MODEL_FORMAT_VERSION + 1,
                expected: MODEL_FORMAT_VERSION,
            })
        );
    }
}
