//! OpenCL and CUDA implementations from C (`hs_task_set_opencl`,
//! `hs_task_set_cuda`): bad input, the unsupported answer of a build
//! without the feature, and (with `opencl`, where OpenCL has a device) calls
//! placed on the OpenCL unit with the device's handles, a failing status
//! failing only its own call.

#![allow(unsafe_code)] // calling the C ABI is what these tests do

use hetsched::*;
use std::ffi::{CStr, c_int, c_void};
use std::ptr;

mod common;
use common::{c, last_error};

fn new_task(name: &str) -> HsTask {
    let mut task: HsTask = 0;
    // SAFETY: a live CString and a local out-pointer.
    assert_eq!(
        unsafe { hs_task_new(c(name).as_ptr(), &mut task) },
        HsStatus::HsOk
    );
    task
}

/// The call's arguments: `fail` is the status to return; the function
/// writes what it saw of the device.
#[repr(C)]
struct Probe {
    input: u64,
    output: u64,
    fail: c_int,
    handles_set: bool,
    index: u32,
}

unsafe extern "C" fn opencl_probe(
    args: *mut c_void,
    _user: *mut c_void,
    device: *const HsOpenClDevice,
) -> c_int {
    // SAFETY: the test passes a live, exclusive `Probe` per call; the
    // runtime passes a live device description.
    let (p, d) = unsafe { (&mut *args.cast::<Probe>(), &*device) };
    p.handles_set = !d.device.is_null() && !d.context.is_null() && !d.queue.is_null();
    p.index = d.index;
    p.output = p.input * 3;
    p.fail
}

unsafe extern "C" fn cuda_probe(
    args: *mut c_void,
    _user: *mut c_void,
    device: *const HsCudaDevice,
) -> c_int {
    // SAFETY: as in `opencl_probe`.
    let (p, d) = unsafe { (&mut *args.cast::<Probe>(), &*device) };
    p.handles_set = !d.context.is_null() && !d.stream.is_null();
    p.index = d.ordinal as u32;
    p.output = p.input * 3;
    p.fail
}

#[test]
fn null_functions_and_bad_tasks_are_refused_in_every_build() {
    let task = new_task("devices-bad-input");
    assert_eq!(
        hs_task_set_opencl(task, None, ptr::null_mut()),
        HsStatus::HsErrNull
    );
    assert!(last_error().contains("opencl function is NULL"));
    assert_eq!(
        hs_task_set_cuda(task, None, ptr::null_mut()),
        HsStatus::HsErrNull
    );
    assert!(last_error().contains("cuda function is NULL"));
    assert_eq!(hs_task_free(task), HsStatus::HsOk);
    // A freed task, a made-up one, and no task at all.
    for bad in [task, 0, u64::MAX] {
        assert_eq!(
            hs_task_set_opencl(bad, Some(opencl_probe), ptr::null_mut()),
            HsStatus::HsErrBadHandle
        );
        assert!(last_error().contains("task"));
        assert_eq!(
            hs_task_set_cuda(bad, Some(cuda_probe), ptr::null_mut()),
            HsStatus::HsErrBadHandle
        );
    }
    // SAFETY: hs_status_name returns static NUL-terminated strings.
    let name = unsafe { CStr::from_ptr(hs_status_name(HsStatus::HsErrUnsupported as i32)) };
    assert_eq!(name.to_str().unwrap(), "HS_ERR_UNSUPPORTED");
}

#[test]
fn a_build_without_the_feature_says_so() {
    let task = new_task("devices-feature");
    let opencl = hs_task_set_opencl(task, Some(opencl_probe), ptr::null_mut());
    if cfg!(feature = "opencl") {
        assert_eq!(opencl, HsStatus::HsOk, "{}", last_error());
    } else {
        assert_eq!(opencl, HsStatus::HsErrUnsupported);
        assert!(
            last_error().contains("`opencl` feature"),
            "{}",
            last_error()
        );
    }
    let cuda = hs_task_set_cuda(task, Some(cuda_probe), ptr::null_mut());
    if cfg!(feature = "cuda") {
        assert_eq!(cuda, HsStatus::HsOk, "{}", last_error());
    } else {
        assert_eq!(cuda, HsStatus::HsErrUnsupported);
        assert!(last_error().contains("`cuda` feature"), "{}", last_error());
    }
    assert_eq!(hs_task_free(task), HsStatus::HsOk);
}

/// An embedded runtime with CPUs only (besides whatever devices the build
/// drives), models not persisted.
fn embedded_runtime(dir: &std::path::Path) -> HsRuntime {
    let config = dir.join("hetsched.toml");
    std::fs::write(
        &config,
        format!("state_file = \"{}\"\n", dir.join("state.json").display()),
    )
    .unwrap();
    let config = c(config.to_str().unwrap());
    let mut opts = hs_runtime_options_default();
    opts.monitor = HS_MONITOR_EMBEDDED;
    opts.config = config.as_ptr();
    opts.persist_models = false;
    let mut rt: HsRuntime = 0;
    // SAFETY: `opts` and the CStrings it points to live across the call.
    let st = unsafe { hs_runtime_connect_with(c("capi-devices").as_ptr(), &opts, &mut rt) };
    assert_eq!(st, HsStatus::HsOk, "{}", last_error());
    rt
}

/// Runs `probe` through `hs_accelerate`; `None` when no unit can take it
/// (the machine has no `device`: a skip, or a failure where required).
fn run(
    rt: HsRuntime,
    task: HsTask,
    probe: &mut Probe,
    device: &str,
) -> Option<(HsStatus, HsRunInfo)> {
    let mut call: HsCall = 0;
    let args = (probe as *mut Probe).cast::<c_void>();
    // SAFETY: `probe` outlives the call, which is waited for below.
    let st = unsafe { hs_accelerate(rt, task, args, HS_SYNC, &mut call) };
    if st == HsStatus::HsErrNoImplementation {
        hetsched_platform::test_support::available(device, Err(last_error()));
        return None;
    }
    assert_eq!(st, HsStatus::HsOk, "{}", last_error());
    // SAFETY: a zeroed HsRunInfo is valid; `info` is a live local.
    let mut info = unsafe { std::mem::zeroed::<HsRunInfo>() };
    // SAFETY: as above.
    let st = unsafe { hs_call_wait(call, &mut info) };
    Some((st, info))
}

fn unit_name(rt: HsRuntime, unit: u32) -> String {
    // SAFETY: a zeroed HsUnitInfo is valid; it is a live local.
    let mut info = unsafe { std::mem::zeroed::<HsUnitInfo>() };
    // SAFETY: as above.
    assert_eq!(
        unsafe { hs_runtime_unit_info(rt, unit, &mut info) },
        HsStatus::HsOk
    );
    // SAFETY: fill_name NUL-terminates the array.
    unsafe { CStr::from_ptr(info.name.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Places calls of a task whose only implementation is `set`'s on the
/// device units, checks the handles reached C, and that a non-zero status
/// fails its call alone with a message containing `failure`. In a build
/// without the device's feature, `set` is refused
/// ([`a_build_without_the_feature_says_so`]) and this skips, saying so.
fn runs_on_the_device(
    prefix: &str,
    set: impl Fn(HsTask) -> HsStatus,
    fail_with: c_int,
    failure: &str,
) {
    let task = new_task(&format!("devices-{prefix}"));
    let st = set(task);
    if st == HsStatus::HsErrUnsupported {
        hetsched_platform::test_support::available(prefix, Err(last_error()));
        assert_eq!(hs_task_free(task), HsStatus::HsOk);
        return;
    }
    assert_eq!(st, HsStatus::HsOk, "{}", last_error());
    let dir = tempfile::tempdir().unwrap();
    let rt = embedded_runtime(dir.path());
    for i in 0..3u64 {
        let mut p = Probe {
            input: 7 + i,
            output: 0,
            fail: 0,
            handles_set: false,
            index: u32::MAX,
        };
        let Some((st, info)) = run(rt, task, &mut p, prefix) else {
            assert_eq!(hs_runtime_close(rt), HsStatus::HsOk);
            return;
        };
        assert_eq!(st, HsStatus::HsOk, "{}", last_error());
        assert_eq!(p.output, (7 + i) * 3);
        assert!(p.handles_set, "the device's handles reach C");
        let name = unit_name(rt, info.unit);
        assert!(name.starts_with(prefix), "ran on {name}");
        assert!(name.contains(&p.index.to_string()), "{name} vs {}", p.index);
    }
    let mut p = Probe {
        input: 1,
        output: 0,
        fail: fail_with,
        handles_set: false,
        index: 0,
    };
    let (st, _) = run(rt, task, &mut p, prefix).expect("the device is still there");
    assert_eq!(st, HsStatus::HsErrTaskFailed);
    let msg = last_error();
    assert!(msg.contains(failure), "{msg}");
    assert!(msg.contains(&format!("devices-{prefix}")), "{msg}");
    // Only that call failed: the next one runs.
    p.fail = 0;
    let (st, _) = run(rt, task, &mut p, prefix).expect("the device is still there");
    assert_eq!(st, HsStatus::HsOk, "{}", last_error());
    assert_eq!(p.output, 3);
    assert_eq!(hs_task_free(task), HsStatus::HsOk);
    assert_eq!(hs_runtime_close(rt), HsStatus::HsOk);
}

#[test]
fn opencl_implementations_run_on_the_opencl_unit() {
    // -5 is CL_OUT_OF_RESOURCES.
    runs_on_the_device(
        "opencl",
        |t| hs_task_set_opencl(t, Some(opencl_probe), ptr::null_mut()),
        -5,
        "CL_OUT_OF_RESOURCES (-5)",
    );
}

#[test]
fn cuda_implementations_run_on_the_cuda_unit() {
    runs_on_the_device(
        "cuda",
        |t| hs_task_set_cuda(t, Some(cuda_probe), ptr::null_mut()),
        700,
        "status 700",
    );
}
