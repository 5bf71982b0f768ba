//! Parity of the placement formula: the C API's `hs_turnaround`,
//! `hs_client_turnaround` and `hs_client_predict_ns` give the core's
//! figures (`hetsched_core::turnaround::turnaround`), over the shared table
//! of cases and over a live daemon's views.

#![allow(unsafe_code)] // calling the C ABI is what these tests do

#[path = "../../core/tests/parity/cases.rs"]
mod cases;
mod common;

use common::{c, last_error, start_daemon};
use hetsched::*;
use hetsched_core::turnaround::{TurnaroundInput, UnitLoad, turnaround};
use hetsched_core::unit::UnitClass;
use hetsched_core::view::ClientUnitView;
use std::ffi::CStr;

fn no_view() -> HsUnitView {
    HsUnitView {
        guaranteed: 0.0,
        wait_ns: 0.0,
        current_utilisation: 0.0,
        max_utilisation: 1.0,
        throttled: false,
        busy_fraction: 0.0,
        active_clients: 0,
        queued: 0,
        running: 0,
        runnable_threads: 0,
    }
}

/// The case's input as C fills it.
fn c_input(i: &TurnaroundInput) -> HsTurnaroundInput {
    let (load, load_amount, view) = match i.load {
        UnitLoad::View(v) => (
            HS_LOAD_VIEW,
            0.0,
            HsUnitView {
                guaranteed: v.guaranteed,
                wait_ns: v.wait_ns,
                current_utilisation: v.current_utilisation,
                max_utilisation: v.max_utilisation,
                throttled: v.throttled,
                ..no_view()
            },
        ),
        UnitLoad::RunnableThreads(n) => (HS_LOAD_RUNNABLE_THREADS, n, no_view()),
        UnitLoad::Backlog(n) => (HS_LOAD_BACKLOG, n, no_view()),
    };
    HsTurnaroundInput {
        exec_ns: i.exec_ns,
        dispatch_ns: i.dispatch_ns,
        copy_ns: i.copy_ns,
        ahead_ns: i.ahead_ns,
        slots: i.slots,
        load,
        load_amount,
        view,
    }
}

#[test]
fn hs_turnaround_gives_the_cores_figures_for_every_case() {
    for case in cases::cases() {
        let mut got = HsTurnaround::default();
        // SAFETY: live locals.
        let status = unsafe { hs_turnaround(&c_input(&case.input), &mut got) };
        match case.expected {
            None => {
                assert_eq!(status, HsStatus::HsErrInvalid, "{}", case.name);
                assert!(last_error().contains("exec_ns"), "{}", case.name);
            }
            Some(want) => {
                assert_eq!(status, HsStatus::HsOk, "{}: {}", case.name, last_error());
                let core = turnaround(&case.input).expect("the core gives a figure");
                assert_eq!(got.turnaround_ns, core.turnaround_ns, "{}", case.name);
                assert_eq!(got.stretch, core.stretch, "{}", case.name);
                assert_eq!(got.ahead_ns, core.ahead_ns, "{}", case.name);
                assert_eq!(got.rate_per_s, core.rate_per_s, "{}", case.name);
                assert!(
                    cases::close(got.turnaround_ns, want.turnaround_ns),
                    "{}: {} vs {}",
                    case.name,
                    got.turnaround_ns,
                    want.turnaround_ns
                );
            }
        }
    }
}

#[test]
fn hs_turnaround_refuses_null_and_unknown_loads() {
    let mut input = c_input(&cases::cases()[0].input);
    let mut out = HsTurnaround::default();
    // SAFETY: NULL pointers and live locals only.
    unsafe {
        assert_eq!(
            hs_turnaround(std::ptr::null(), &mut out),
            HsStatus::HsErrNull
        );
        assert_eq!(
            hs_turnaround(&input, std::ptr::null_mut()),
            HsStatus::HsErrNull
        );
        input.load = 7;
        assert_eq!(hs_turnaround(&input, &mut out), HsStatus::HsErrInvalid);
        assert!(last_error().contains("HS_LOAD_VIEW"));
    }
}

#[test]
fn client_predictions_are_the_cores_formula_over_the_live_view() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start_daemon(dir.path());
    let socket = c(daemon.socket.to_str().unwrap());
    let mut client: HsClient = 0;
    // SAFETY: live locals and CStrings only.
    unsafe {
        assert_eq!(
            hs_client_connect(c("parity").as_ptr(), socket.as_ptr(), &mut client),
            HsStatus::HsOk,
            "{}",
            last_error()
        );
        let mut n = 0u32;
        assert_eq!(hs_client_unit_count(client, &mut n), HsStatus::HsOk);
        let mut seen_cpu = false;
        let mut seen_device = false;
        for index in 0..n {
            let mut info = std::mem::zeroed::<HsUnitInfo>();
            assert_eq!(
                hs_client_unit_info(client, index, &mut info),
                HsStatus::HsOk
            );
            let name = CStr::from_ptr(info.name.as_ptr()).to_str().unwrap();
            let unit = daemon
                .units
                .iter()
                .find(|u| u.name == name)
                .unwrap_or_else(|| panic!("unit {name} is not the daemon's"));
            let (exec, bytes_in, bytes_out, extra, ahead) = (2e6, 1 << 20, 1 << 16, 3, 5e6);
            let mut t = HsTurnaround::default();
            assert_eq!(
                hs_client_turnaround(
                    client, index, exec, bytes_in, bytes_out, extra, ahead, &mut t
                ),
                HsStatus::HsOk,
                "{}",
                last_error()
            );
            let mut predicted = 0.0;
            assert_eq!(
                hs_client_predict_ns(
                    client,
                    index,
                    exec,
                    bytes_in,
                    bytes_out,
                    extra,
                    ahead * f64::from(unit.slots.max(1)),
                    &mut predicted
                ),
                HsStatus::HsOk
            );
            // The view an idle daemon publishes holds still between reads.
            let mut v = no_view();
            assert_eq!(hs_client_unit_view(client, index, &mut v), HsStatus::HsOk);
            let load = if unit.class == UnitClass::Cpu {
                seen_cpu = true;
                UnitLoad::RunnableThreads(f64::from(v.runnable_threads) + f64::from(extra))
            } else {
                seen_device = true;
                UnitLoad::View(ClientUnitView {
                    guaranteed: v.guaranteed,
                    wait_ns: v.wait_ns,
                    current_utilisation: v.current_utilisation,
                    throttled: v.throttled,
                    max_utilisation: v.max_utilisation,
                })
            };
            let core = turnaround(&TurnaroundInput {
                exec_ns: exec,
                dispatch_ns: unit.dispatch_ns as f64,
                copy_ns: unit.copy_in_ns(bytes_in) + unit.copy_out_ns(bytes_out),
                ahead_ns: ahead,
                slots: unit.slots,
                load,
            })
            .unwrap();
            assert!(
                cases::close(t.turnaround_ns, core.turnaround_ns),
                "{name}: {t:?} vs {core:?}"
            );
            assert!(
                t.ahead_ns >= ahead,
                "{name}: work ahead is stretched, never shrunk"
            );
            if unit.class == UnitClass::Cpu {
                // Own pending work counts on devices only.
                let alone = core.turnaround_ns - core.ahead_ns;
                assert!(
                    cases::close(predicted, alone),
                    "{name}: {predicted} vs {alone}"
                );
            } else {
                assert!(
                    cases::close(predicted, core.turnaround_ns),
                    "{name}: {predicted} vs {core:?}"
                );
            }
        }
        assert!(seen_cpu && seen_device, "the test daemon has both classes");
        assert_eq!(hs_client_close(client), HsStatus::HsOk);
    }
}
