//! The systemd unit's sandbox (`packaging/systemd/hetsched.service`):
//! systemd rates it at most 4.0, the rating check fails a unit rated
//! worse, and the daemon still does its work inside it
//! (`packaging/sandbox-check.sh`).

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether `systemd-analyze` is here (else a line saying so, or a
/// failure where HETSCHED_TEST_REQUIRE names systemd).
fn analyze_found() -> bool {
    let found = match Command::new("systemd-analyze").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("systemd-analyze is not installed".to_string()),
    };
    hetsched_platform::test_support::available("systemd", found)
}

fn exposure(unit: &Path) -> std::process::Output {
    Command::new(repo().join("packaging/unit-exposure.sh"))
        .arg(unit)
        .arg("4.0")
        .output()
        .unwrap()
}

#[test]
fn the_unit_is_rated_at_most_4() {
    if !analyze_found() {
        return;
    }
    let out = exposure(&repo().join("packaging/systemd/hetsched.service"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("at most 4.0"), "{text}");
}

/// The check that `packaging/check-install.sh` runs fails a unit without
/// the sandbox (the unit as it was before it had one: 9.1) and says why.
#[test]
fn the_exposure_check_fails_an_unsandboxed_unit() {
    if !analyze_found() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("hetsched.service");
    std::fs::write(
        &unit,
        "[Unit]\nDescription=unsandboxed\n\n[Service]\nType=notify\n\
         ExecStart=/usr/local/bin/hetsched daemon\nNoNewPrivileges=yes\n\
         ProtectHome=read-only\nPrivateTmp=yes\n",
    )
    .unwrap();
    let out = exposure(&unit);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("above 4.0") && err.contains("ProtectSystem="),
        "{err}"
    );
}

/// The daemon under the unit's sandbox: started, serving a client,
/// moving it into its CPU cgroup, writing its state, removing its socket
/// on stop. Under systemd-run where systemd is PID 1, else in an
/// equivalent mount namespace with the unit's capabilities.
#[test]
fn the_daemon_works_inside_the_units_sandbox() {
    if !hetsched_platform::test_support::root_and_cgroup_v1() {
        return;
    }
    let out = Command::new(repo().join("packaging/sandbox-check.sh"))
        .arg(common::BIN)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("sandbox check: OK"), "{text}");
}
