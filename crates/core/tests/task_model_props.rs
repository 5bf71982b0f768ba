//! Behavioural properties of the task performance model: convergence to a
//! linear truth, Rinnegan's recalibration rule, rejection of bad
//! measurements, and persistence.

use hetsched_core::KindId;
use hetsched_core::task_model::{
    LinearFit, MODEL_FORMAT_VERSION, ModelSet, ModelSetError, ObserveError, PROFILE_SAMPLES,
    PerformanceModel, RECALIBRATE_AFTER, RECALIBRATE_ERROR, TaskModel,
};
use proptest::prelude::*;

const GPU: KindId = KindId(1);

/// Sizes spread log-uniformly over 1 B .. 1 GiB, the "wide range" a task's
/// inputs may span.
fn wide_bytes() -> impl Strategy<Value = u64> {
    (0.0f64..30.0).prop_map(|e| 2f64.powf(e) as u64)
}

fn truth(fixed: f64, per_byte: f64, bytes: u64) -> f64 {
    fixed + per_byte * bytes as f64
}

fn rel_err(pred: f64, actual: f64) -> f64 {
    (pred - actual).abs() / actual
}

proptest! {
    /// The requirement: with no noise, ≥ 20 observations make the
    /// model converge to a linear truth within 1 %, at observed and unseen
    /// sizes alike.
    #[test]
    fn converges_to_noise_free_linear_truth(
        fixed in 0.0f64..=1e6,
        per_byte in 1e-3f64..=100.0,
        sizes in prop::collection::vec(wide_bytes(), 20..80),
        queries in prop::collection::vec(wide_bytes(), 1..20),
    ) {
        prop_assume!(sizes.iter().any(|&s| s != sizes[0]));
        let mut model = TaskModel::new("t", 2);
        for &bytes in &sizes {
            model.try_observe(GPU, bytes, truth(fixed, per_byte, bytes)).unwrap();
        }
        prop_assert_eq!(model.recalibrations(GPU), 0);
        prop_assert!(!model.needs_profiling(GPU));
        for &bytes in sizes.iter().chain(&queries) {
            let pred = model.predict_ns(GPU, bytes).unwrap();
            let actual = truth(fixed, per_byte, bytes);
            prop_assert!(rel_err(pred, actual) <= 0.01,
                "bytes {} pred {} truth {}", bytes, pred, actual);
        }
    }

    /// With ±5 % multiplicative noise, 500 observations pin the prediction at
    /// the mean size within 3 %.
    #[test]
    fn converges_under_five_percent_noise(
        fixed in 0.0f64..=1e6,
        per_byte in 1e-3f64..=100.0,
        samples in prop::collection::vec(
            ((10.0f64..30.0).prop_map(|e| 2f64.powf(e) as u64), -0.05f64..=0.05),
            500,
        ),
    ) {
        let mut fit = LinearFit::new();
        for &(bytes, noise) in &samples {
            fit.observe(bytes, truth(fixed, per_byte, bytes) * (1.0 + noise)).unwrap();
        }
        prop_assert_eq!(fit.samples(), 500);
        let mean_size =
            (samples.iter().map(|&(b, _)| b as f64).sum::<f64>() / 500.0).round() as u64;
        let pred = fit.predict(mean_size);
        let actual = truth(fixed, per_byte, mean_size);
        prop_assert!(rel_err(pred, actual) <= 0.03, "pred {} truth {}", pred, actual);
    }

    /// Any stream of measurements, valid or not: invalid ones are rejected
    /// without being stored, and coefficients and predictions stay finite
    /// and non-negative.
    #[test]
    fn rejects_invalid_and_never_predicts_negative(
        stream in prop::collection::vec(
            (any::<u64>(), prop_oneof![
                0.0f64..1e12,
                any::<f64>(),
                Just(f64::NAN),
                Just(-1.0),
                Just(f64::INFINITY),
            ]),
            1..60,
        ),
        query in any::<u64>(),
    ) {
        let mut model = TaskModel::new("t", 1);
        let k = KindId(0);
        for (bytes, ns) in stream {
            let before = model.clone();
            let valid = ns.is_finite() && ns >= 0.0;
            match model.try_observe(k, bytes, ns) {
                Ok(_) => prop_assert!(valid),
                Err(ObserveError::InvalidTime(_)) => {
                    prop_assert!(!valid);
                    prop_assert_eq!(&model, &before);
                }
                Err(ObserveError::Overflow { .. }) => prop_assert_eq!(&model, &before),
                Err(e) => prop_assert!(false, "unexpected {}", e),
            }
            let (fixed, per_byte) = model.kind(k).unwrap().fit().coefficients();
            prop_assert!(fixed.is_finite() && fixed >= 0.0);
            prop_assert!(per_byte.is_finite() && per_byte >= 0.0);
            for b in [0, 1, bytes, query, u64::MAX] {
                if let Some(p) = model.predict_ns(k, b) {
                    prop_assert!(p >= 0.0, "predicted {} for {} bytes", p, b);
                }
            }
        }
    }
}

/// Rinnegan §3.2: when the truth doubles, every prediction is 50 % off; the
/// rule fires on exactly the 11th bad prediction, the fit is reset, and the
/// model re-converges to the new truth.
#[test]
fn recalibrates_after_eleven_bad_predictions_and_reconverges() {
    let (fixed, per_byte) = (5_000.0, 2.0);
    let size = |i: u64| 1_000 + (i * 7_919) % 100_000;
    let mut model = TaskModel::new("t", 2);
    for i in 0..100 {
        model.observe(GPU, size(i), truth(fixed, per_byte, size(i)));
    }
    assert!(model.mean_error(GPU).unwrap() < 1e-9);

    let (fixed2, per_byte2) = (2.0 * fixed, 2.0 * per_byte);
    for i in 1..=RECALIBRATE_AFTER as u64 {
        let bytes = size(100 + i);
        let obs = model
            .try_observe(GPU, bytes, truth(fixed2, per_byte2, bytes))
            .unwrap();
        assert!(obs.error.unwrap() > RECALIBRATE_ERROR, "prediction {i}");
        assert!(!obs.recalibrated, "fired early, at bad prediction {i}");
        assert_eq!(model.recalibrations(GPU), 0);
        assert!(!model.needs_profiling(GPU));
    }
    let bytes = size(111);
    let obs = model
        .try_observe(GPU, bytes, truth(fixed2, per_byte2, bytes))
        .unwrap();
    assert!(
        obs.recalibrated,
        "the 11th bad prediction must fire the rule"
    );
    assert_eq!(model.recalibrations(GPU), 1);
    assert!(model.needs_profiling(GPU));
    // The fit was reset; only the measurement that tripped the rule remains.
    let samples = model.kind(GPU).unwrap().fit().samples();
    assert_eq!(samples, 1);
    assert!(samples < PROFILE_SAMPLES);
    assert_eq!(model.mean_error(GPU), None);

    for i in 112..132 {
        model.observe(GPU, size(i), truth(fixed2, per_byte2, size(i)));
    }
    assert!(!model.needs_profiling(GPU));
    assert_eq!(model.recalibrations(GPU), 1);
    for bytes in [0, 1_000, 50_000, 1_000_000] {
        let pred = model.predict_ns(GPU, bytes).unwrap();
        assert!(rel_err(pred, truth(fixed2, per_byte2, bytes)) < 0.01);
    }
    // Other kinds are untouched by this kind's recalibration.
    assert_eq!(model.predict_ns(KindId(0), 1), None);
}

#[test]
fn serde_round_trip_preserves_predictions() {
    let mut set = ModelSet::new();
    let scan = set.get_or_insert("scan", 3);
    for i in 0..50u64 {
        let bytes = 4_096 * (i + 1);
        scan.observe(KindId(0), bytes, 10_000.0 + 3.5 * bytes as f64);
        scan.observe(
            KindId(2),
            bytes,
            250.0 + 0.125 * bytes as f64 * (1.0 + 0.01 * (i % 3) as f64),
        );
    }
    set.get_or_insert("sort", 3)
        .observe(KindId(1), 1_000, 7_777.0);

    let json = serde_json::to_string(&set).unwrap();
    let back: ModelSet = serde_json::from_str(&json).unwrap();
    assert_eq!(back.check_version(), Ok(()));
    assert_eq!(back.len(), 2);
    for name in ["scan", "sort"] {
        let (a, b) = (set.get(name).unwrap(), back.get(name).unwrap());
        assert_eq!(a.kind_count(), b.kind_count());
        for k in 0..3 {
            let kind = KindId(k);
            assert_eq!(a.needs_profiling(kind), b.needs_profiling(kind));
            for bytes in [0, 1, 4_096, 1 << 20, 1 << 30] {
                match (a.predict_ns(kind, bytes), b.predict_ns(kind, bytes)) {
                    (None, None) => {}
                    (Some(x), Some(y)) => assert!((y - x).abs() <= 1e-12 * x, "{x} vs {y}"),
                    other => panic!("prediction presence changed: {other:?}"),
                }
            }
        }
    }
}

#[test]
fn stale_format_version_is_reported_not_fatal() {
    let mut value = serde_json::to_value(ModelSet::new()).unwrap();
    value["version"] = serde_json::json!(MODEL_FORMAT_VERSION + 7);
    let loaded: ModelSet = serde_json::from_value(value).unwrap();
    assert_eq!(
        loaded.check_version(),
        Err(ModelSetError::VersionMismatch {
            found: MODEL_FORMAT_VERSION + 7,
            expected: MODEL_FORMAT_VERSION,
        })
    );
}

/// A hand-edited or corrupt file cannot inject a negative model: moments
/// that no valid measurements could produce load as an empty fit.
#[test]
fn corrupt_moments_load_as_empty_fit() {
    let mut set = ModelSet::new();
    set.get_or_insert("t", 1).observe(KindId(0), 100, 100.0);
    let mut value = serde_json::to_value(&set).unwrap();
    value["tasks"]["t"]["kinds"][0]["fit"]["mean_y"] = serde_json::json!(-1e9);
    let loaded: ModelSet = serde_json::from_value(value).unwrap();
    let t = loaded.get("t").unwrap();
    assert_eq!(t.predict_ns(KindId(0), 100), None);
    assert!(t.needs_profiling(KindId(0)));
}
