//! The C ABI from Rust, as C would call it: bad input gets clear codes and
//! messages (never a crash), and real calls run on a real runtime and a
//! real daemon (served in-process on a private socket).

#![allow(unsafe_code)] // calling the C ABI is what these tests do

use hetsched::*;
use std::ffi::{CStr, c_char, c_void};
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

mod common;
use common::{c, last_error, start_daemon, write_config};

#[test]
fn null_pointers_are_refused_with_a_message() {
    let mut rt: HsRuntime = 0;
    // SAFETY: NULL and valid pointers only; that is what is under test.
    unsafe {
        assert_eq!(
            hs_runtime_connect(ptr::null(), &mut rt),
            HsStatus::HsErrNull
        );
        assert!(last_error().contains("name"));
        assert_eq!(
            hs_runtime_connect(c("x").as_ptr(), ptr::null_mut()),
            HsStatus::HsErrNull
        );
        assert_eq!(
            hs_runtime_connect_with(c("x").as_ptr(), ptr::null(), &mut rt),
            HsStatus::HsErrNull
        );
        let mut task: HsTask = 0;
        assert_eq!(hs_task_new(ptr::null(), &mut task), HsStatus::HsErrNull);
        assert_eq!(hs_task_new(c("t").as_ptr(), &mut task), HsStatus::HsOk);
        assert_eq!(
            hs_task_set_cpu(task, None, ptr::null_mut()),
            HsStatus::HsErrNull
        );
        assert_eq!(
            hs_task_add_emulated(task, ptr::null(), None, None, ptr::null_mut()),
            HsStatus::HsErrNull
        );
        assert_eq!(hs_task_name(task, ptr::null_mut(), 8), HsStatus::HsErrNull);
        assert_eq!(hs_task_free(task), HsStatus::HsOk);
        assert_eq!(
            hs_client_task_completed(1, ptr::null(), 0),
            HsStatus::HsErrNull
        );
    }
}

#[test]
fn invalid_utf8_is_refused() {
    let bad: &[u8] = b"\xff\xfe\0";
    let mut task: HsTask = 0;
    let mut client: HsClient = 0;
    // SAFETY: `bad` is NUL-terminated; out-pointers are locals.
    unsafe {
        assert_eq!(
            hs_task_new(bad.as_ptr().cast::<c_char>(), &mut task),
            HsStatus::HsErrUtf8
        );
        assert!(last_error().contains("UTF-8"));
        assert_eq!(
            hs_client_connect(c("x").as_ptr(), bad.as_ptr().cast(), &mut client),
            HsStatus::HsErrUtf8
        );
        let mut opts = hs_runtime_options_default();
        opts.config = bad.as_ptr().cast();
        let mut rt: HsRuntime = 0;
        assert_eq!(
            hs_runtime_connect_with(c("x").as_ptr(), &opts, &mut rt),
            HsStatus::HsErrUtf8
        );
    }
}

#[test]
fn bad_handles_are_refused_not_dereferenced() {
    assert_eq!(hs_runtime_wait_all(0), HsStatus::HsErrBadHandle);
    assert_eq!(hs_runtime_wait_all(u64::MAX), HsStatus::HsErrBadHandle);
    assert!(last_error().contains("runtime"));
    assert_eq!(hs_call_discard(12345), HsStatus::HsErrBadHandle);
    assert_eq!(hs_client_close(12345), HsStatus::HsErrBadHandle);
    let mut task: HsTask = 0;
    // SAFETY: valid string and out-pointer.
    assert_eq!(
        unsafe { hs_task_new(c("t").as_ptr(), &mut task) },
        HsStatus::HsOk
    );
    // A task handle is not a runtime handle.
    assert_eq!(hs_runtime_close(task), HsStatus::HsErrBadHandle);
    assert_eq!(hs_task_free(task), HsStatus::HsOk);
    assert_eq!(hs_task_free(task), HsStatus::HsErrBadHandle);
    assert!(last_error().contains("task"));
}

#[test]
fn status_names_are_static_strings() {
    // SAFETY: hs_status_name returns static NUL-terminated strings.
    let name = |s| {
        unsafe { CStr::from_ptr(hs_status_name(s)) }
            .to_str()
            .unwrap()
    };
    assert_eq!(name(HsStatus::HsOk as i32), "HS_OK");
    assert_eq!(name(HsStatus::HsErrBadHandle as i32), "HS_ERR_BAD_HANDLE");
    assert_eq!(name(99), "HS_UNKNOWN_STATUS");
}

static CPU_RUNS: AtomicU32 = AtomicU32::new(0);

unsafe extern "C" fn double_it(args: *mut c_void, _user: *mut c_void) {
    // SAFETY: the test passes a live, exclusive `*mut u64` per call.
    unsafe { *args.cast::<u64>() *= 2 };
    CPU_RUNS.fetch_add(1, Ordering::Relaxed);
}

unsafe extern "C" fn cost(_args: *const c_void, _user: *mut c_void) -> u64 {
    100_000
}

#[test]
fn an_embedded_runtime_runs_c_calls() {
    let dir = tempfile::tempdir().unwrap();
    let config = c(write_config(dir.path()).to_str().unwrap());
    let mut opts = hs_runtime_options_default();
    opts.monitor = HS_MONITOR_EMBEDDED;
    opts.config = config.as_ptr();
    opts.persist_models = false;
    let mut rt: HsRuntime = 0;
    let mut task: HsTask = 0;
    // SAFETY: every pointer is a live local or a CString kept alive above;
    // `values` outlives the calls (waited for before it drops).
    unsafe {
        assert_eq!(
            hs_runtime_connect_with(c("capi-rust").as_ptr(), &opts, &mut rt),
            HsStatus::HsOk,
            "{}",
            last_error()
        );
        let mut st = std::mem::zeroed::<HsRuntimeStatus>();
        assert_eq!(hs_runtime_status(rt, &mut st), HsStatus::HsOk);
        assert!(!st.monitor_is_daemon);
        assert!(st.units >= 2, "CPU kind and the emulated GPU");
        assert_eq!(hs_task_new(c("double").as_ptr(), &mut task), HsStatus::HsOk);
        assert_eq!(
            hs_task_set_cpu(task, Some(double_it), ptr::null_mut()),
            HsStatus::HsOk
        );
        assert_eq!(
            hs_task_add_emulated(
                task,
                c("emu-gpu").as_ptr(),
                Some(cost),
                Some(double_it),
                ptr::null_mut()
            ),
            HsStatus::HsOk
        );
        let mut values: Vec<u64> = (1..=16).collect();
        let mut calls = Vec::new();
        for v in values.iter_mut() {
            let mut call: HsCall = 0;
            let arg = (v as *mut u64).cast::<c_void>();
            assert_eq!(
                hs_accelerate(rt, task, arg, HS_ASYNC, &mut call),
                HsStatus::HsOk
            );
            calls.push(call);
        }
        let mut call: HsCall = 0;
        assert_eq!(
            hs_accelerate(rt, task, ptr::null_mut(), 5, &mut call),
            HsStatus::HsErrInvalid
        );
        for call in calls {
            let mut info = std::mem::zeroed::<HsRunInfo>();
            assert_eq!(hs_call_wait(call, &mut info), HsStatus::HsOk);
            assert!(info.unit < st.units);
            assert_eq!(
                hs_call_wait(call, ptr::null_mut()),
                HsStatus::HsErrBadHandle
            );
        }
        assert_eq!(values, (1..=16).map(|v| v * 2).collect::<Vec<u64>>());
        let mut done = 0;
        for u in 0..st.units {
            let mut info = std::mem::zeroed::<HsUnitInfo>();
            assert_eq!(hs_runtime_unit_info(rt, u, &mut info), HsStatus::HsOk);
            done += info.completed;
        }
        assert_eq!(done, 16);
        assert_eq!(hs_task_free(task), HsStatus::HsOk);
        assert_eq!(hs_runtime_close(rt), HsStatus::HsOk);
        assert_eq!(hs_runtime_close(rt), HsStatus::HsErrBadHandle);
    }
}

#[test]
fn the_daemon_client_sees_units_predicts_and_runs_device_work() {
    let dir = tempfile::tempdir().unwrap();
    let socket = c(start_daemon(dir.path()).socket.to_str().unwrap());
    let mut client: HsClient = 0;
    // SAFETY: live locals and CStrings only.
    unsafe {
        assert_eq!(
            hs_client_connect(c("capi-client").as_ptr(), socket.as_ptr(), &mut client),
            HsStatus::HsOk,
            "{}",
            last_error()
        );
        let mut gpu = 0u32;
        assert_eq!(
            hs_client_find_unit(client, c("emu-gpu").as_ptr(), &mut gpu),
            HsStatus::HsOk
        );
        assert_eq!(
            hs_client_find_unit(client, c("nope").as_ptr(), &mut gpu),
            HsStatus::HsErrInvalid
        );
        assert!(last_error().contains("emu-gpu0"), "lists the units");
        assert_eq!(
            hs_client_find_unit(client, c("emu-gpu0").as_ptr(), &mut gpu),
            HsStatus::HsOk
        );
        let mut n = 0u32;
        assert_eq!(hs_client_unit_count(client, &mut n), HsStatus::HsOk);
        let mut info = std::mem::zeroed::<HsUnitInfo>();
        assert_eq!(
            hs_client_unit_info(client, n, &mut info),
            HsStatus::HsErrInvalid
        );
        assert_eq!(hs_client_unit_info(client, gpu, &mut info), HsStatus::HsOk);
        assert!(info.emulated);
        let name = CStr::from_ptr(info.name.as_ptr()).to_str().unwrap();
        assert_eq!(name, "emu-gpu0");

        let (mut alone, mut behind) = (0.0, 0.0);
        assert_eq!(
            hs_client_predict_ns(client, gpu, 1e6, 0, 0, 0, 0.0, &mut alone),
            HsStatus::HsOk
        );
        assert!(alone >= 1e6);
        assert_eq!(
            hs_client_predict_ns(client, gpu, 1e6, 0, 0, 0, 4e6, &mut behind),
            HsStatus::HsOk
        );
        assert!(behind >= alone + 4e6 * 0.99, "{behind} vs {alone}");
        assert_eq!(
            hs_client_predict_ns(client, gpu, f64::NAN, 0, 0, 0, 0.0, &mut alone),
            HsStatus::HsErrInvalid
        );

        let mut done = std::mem::zeroed::<HsDeviceDone>();
        assert_eq!(
            hs_client_run_device(client, gpu, 3_000_000, 0, 0, &mut done),
            HsStatus::HsOk
        );
        assert!(done.ran_ns >= 3_000_000);
        let mut grant = std::mem::zeroed::<HsGrant>();
        assert_eq!(
            hs_client_request_dispatch(client, gpu, 1_000_000, &mut grant),
            HsStatus::HsOk
        );
        assert_eq!(
            hs_client_task_completed(client, &grant, 1_000_000),
            HsStatus::HsOk
        );

        let mut view = std::mem::zeroed::<HsUnitView>();
        assert_eq!(hs_client_unit_view(client, gpu, &mut view), HsStatus::HsOk);
        assert!(view.max_utilisation > 0.0);

        // A CPU kind is not an emulated device.
        let mut cpu = 0u32;
        if hs_client_find_unit(client, c("cpu").as_ptr(), &mut cpu) == HsStatus::HsOk {
            assert_eq!(
                hs_client_run_device(client, cpu, 1, 0, 0, ptr::null_mut()),
                HsStatus::HsErrInvalid
            );
        }
        assert_eq!(hs_client_close(client), HsStatus::HsOk);
        assert_eq!(
            hs_client_unit_count(client, &mut n),
            HsStatus::HsErrBadHandle
        );
    }
}

#[test]
fn no_daemon_is_a_connect_error_naming_the_socket() {
    let mut client: HsClient = 0;
    // SAFETY: live CStrings and local.
    let st = unsafe {
        hs_client_connect(
            c("x").as_ptr(),
            c("/nonexistent/hetsched.sock").as_ptr(),
            &mut client,
        )
    };
    assert_eq!(st, HsStatus::HsErrConnect);
    assert!(last_error().contains("/nonexistent/hetsched.sock"));
}

/// The `[workspace.package]` version of the root Cargo.toml, the one
/// version of every crate, the package and the wheel.
fn workspace_version() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let text = std::fs::read_to_string(&root).expect("the workspace's Cargo.toml");
    let section = text
        .split_once("[workspace.package]")
        .expect("a [workspace.package] table")
        .1;
    section
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("a version in [workspace.package]")
        .to_string()
}

#[test]
fn version_is_the_workspace_version() {
    // SAFETY: hs_version returns a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(hs_version()) }.to_str().unwrap();
    assert_eq!(v, workspace_version());
}
