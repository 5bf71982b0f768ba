//! The calibration cache: reused when it fits, re-measured when it does not.

use hetsched_platform::calibrate::{CALIBRATION_VERSION, read_cache, write_cache};
use hetsched_platform::{CalibrationOrigin, PlatformConfig, calibrate, discover};
use std::fs;

fn config(path: &std::path::Path) -> PlatformConfig {
    PlatformConfig {
        calibration_cache: Some(path.to_path_buf()),
        ..PlatformConfig::default()
    }
}

#[test]
fn measured_once_then_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/calibration.json");
    let first = discover(&config(&path)).unwrap();
    assert_eq!(first.calibration_origin, CalibrationOrigin::Measured);
    let stored = read_cache(&path).unwrap().expect("cache written");
    assert_eq!(Some(&stored), first.calibration.as_ref());
    // Only the cache file is left: the temporary was renamed over it.
    let names: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().collect();
    assert_eq!(names.len(), 1);

    // A doctored figure proves the second discovery read the cache.
    let mut doctored = stored.clone();
    doctored.kinds[0].dispatch_ns = 4242;
    write_cache(&path, &doctored).unwrap();
    let second = discover(&config(&path)).unwrap();
    assert_eq!(
        second.calibration_origin,
        CalibrationOrigin::Cache(path.clone())
    );
    assert_eq!(second.machine.units[0].dispatch_ns, 4242);
}

#[test]
fn fingerprint_mismatch_is_remeasured() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calibration.json");
    let p = discover(&config(&path)).unwrap();
    let mut foreign = p.calibration.clone().unwrap();
    foreign.fingerprint.cpu_model = "Some Other CPU".into();
    foreign.kinds[0].dispatch_ns = 999_999_999;
    write_cache(&path, &foreign).unwrap();

    let again = discover(&config(&path)).unwrap();
    assert_eq!(again.calibration_origin, CalibrationOrigin::Measured);
    assert_ne!(again.machine.units[0].dispatch_ns, 999_999_999);
    assert!(
        again.notes.iter().any(|n| n.contains("another CPU set")),
        "{:?}",
        again.notes
    );
    let rewritten = read_cache(&path).unwrap().unwrap();
    assert_eq!(rewritten.fingerprint, again.fingerprint());
    assert_eq!(rewritten.version, CALIBRATION_VERSION);
}

#[test]
fn corrupt_cache_is_remeasured_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calibration.json");
    fs::write(&path, "{ not json").unwrap();
    assert!(read_cache(&path).is_err());
    let p = discover(&config(&path)).unwrap();
    assert_eq!(p.calibration_origin, CalibrationOrigin::Measured);
    assert!(
        p.notes.iter().any(|n| n.contains("calibration.json")),
        "{:?}",
        p.notes
    );
    assert!(read_cache(&path).unwrap().unwrap().fits(&p.fingerprint()));
}

#[test]
fn calibrate_forces_a_new_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calibration.json");
    let mut p = discover(&config(&path)).unwrap();
    let mut doctored = p.calibration.clone().unwrap();
    doctored.kinds[0].dispatch_ns = 1;
    write_cache(&path, &doctored).unwrap();
    let mut p2 = discover(&config(&path)).unwrap();
    assert_eq!(p2.machine.units[0].dispatch_ns, 1);
    calibrate(&mut p2).unwrap();
    assert_eq!(p2.calibration_origin, CalibrationOrigin::Measured);
    assert!(p2.machine.units[0].dispatch_ns > 1);
    assert_ne!(read_cache(&path).unwrap().unwrap().kinds[0].dispatch_ns, 1);
    calibrate(&mut p).unwrap();
}

#[test]
fn missing_cache_is_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(read_cache(&dir.path().join("absent.json")).unwrap(), None);
}

#[test]
fn unwritable_cache_is_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    fs::write(&blocker, "x").unwrap();
    // A path under a regular file cannot be created.
    let p = discover(&config(&blocker.join("cal.json"))).unwrap();
    assert_eq!(p.calibration_origin, CalibrationOrigin::Measured);
    assert!(
        p.notes.iter().any(|n| n.contains("not cached")),
        "{:?}",
        p.notes
    );
}
