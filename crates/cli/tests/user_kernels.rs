//! Kernels clients bring: a real daemon serving PoCL (`opencl_units`)
//! builds a client's OpenCL C kernel, checks every call's arguments
//! against the client's data region, and runs it. These tests need an
//! OpenCL device (`scripts/install-deps.sh` installs PoCL) and fail,
//! saying so, without one.
#![cfg(feature = "opencl")]

use hetsched_core::ids::{TaskId, UnitId};
use hetsched_protocol::user_kernel::{ArgBlock, UserKernelId, flags};
use hetsched_protocol::{Client, ClientError, ErrorCode, KernelRing};

mod common;
use common::TestDaemon;

const SERVED: &str = "served-opencl0";

const SAXPY: &str = "
__kernel void saxpy(__global const float *x, __global float *y, float a, uint n) {
    size_t i = get_global_id(0);
    if (i < n) y[i] = a * x[i] + y[i];
}";

/// Where things lie in the tests' 64 KiB region.
const X_AT: u64 = 0;
const Y_AT: u64 = 4096;
const ARGS_AT: u64 = 16384;
const N: u64 = 256;

fn served_daemon(name: &str) -> TestDaemon {
    match hetsched_opencl::devices() {
        Ok(d) if !d.is_empty() => {}
        other => panic!(
            "these tests need an OpenCL device (PoCL: scripts/install-deps.sh installs \
             pocl-opencl-icd): {other:?}"
        ),
    }
    TestDaemon::start(name, "include_cpus = false\nopencl_units = true\n")
}

fn served_unit(c: &Client) -> UnitId {
    c.unit_by_name(SERVED)
        .unwrap_or_else(|| panic!("the daemon does not serve {SERVED}: {:?}", c.units()))
        .id
}

fn write_floats(ring: &KernelRing, at: u64, v: &[f32]) {
    let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
    ring.region().write(at, &bytes).unwrap();
}

fn read_floats(ring: &KernelRing, at: u64, n: u64) -> Vec<f32> {
    let mut bytes = vec![0u8; n as usize * 4];
    ring.region().read(at, &mut bytes).unwrap();
    bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Pushes a saxpy call with `block` as its arguments and waits for it.
fn call(
    c: &mut Client,
    ring: &mut KernelRing,
    kernel: UserKernelId,
    block: &ArgBlock,
) -> Result<TaskId, ClientError> {
    ring.region().write(ARGS_AT, block.bytes()).unwrap();
    let args = ARGS_AT..ARGS_AT + block.bytes().len() as u64;
    let task = c
        .push_user_call(ring, kernel, args, N, 0)
        .expect("the ring has room");
    c.wait_device(task).map(|_| task)
}

fn saxpy_args(x_flags: u64, y: std::ops::Range<u64>, a: f32) -> ArgBlock {
    ArgBlock::new()
        .buffer(X_AT..X_AT + N * 4, x_flags)
        .buffer(y, flags::COPY_IN | flags::COPY_OUT)
        .f32(a)
        .u32(N as u32)
}

/// A client registers saxpy and runs it; a second client registering the
/// same source gets the build the unit has already, and the kernel's
/// parameters as the compiler saw them.
#[test]
fn a_registered_kernel_runs_on_the_clients_data() {
    let d = served_daemon("user-kernel-run");
    let mut c = d.app("saxpy");
    let unit = served_unit(&c);
    let k = c.register_kernel(unit, SAXPY, "saxpy").unwrap();
    assert!(!k.cached);
    let names: Vec<&str> = k.signature.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["x", "y", "a", "n"]);
    let mut ring = c.open_kernel_ring(unit, 64 << 10).unwrap();
    let x: Vec<f32> = (0..N).map(|i| i as f32).collect();
    write_floats(&ring, X_AT, &x);
    write_floats(&ring, Y_AT, &vec![1.0; N as usize]);
    call(
        &mut c,
        &mut ring,
        k.kernel,
        &saxpy_args(flags::COPY_IN, Y_AT..Y_AT + N * 4, 2.0),
    )
    .unwrap();
    let want: Vec<f32> = x.iter().map(|v| 2.0 * v + 1.0).collect();
    assert_eq!(read_floats(&ring, Y_AT, N), want);

    let mut other = d.app("saxpy-too");
    let again = other.register_kernel(unit, SAXPY, "saxpy").unwrap();
    assert!(again.cached, "the same source is built once");
    assert_eq!(again.kernel, k.kernel);
}

/// A call whose buffer lies outside the region is refused naming the
/// parameter, and runs nothing; the ring goes on with the next call. A
/// kernel the client did not register is refused too.
#[test]
fn out_of_region_arguments_are_refused_by_name() {
    let d = served_daemon("user-kernel-oob");
    let mut c = d.app("oob");
    let unit = served_unit(&c);
    let k = c.register_kernel(unit, SAXPY, "saxpy").unwrap();
    let mut ring = c.open_kernel_ring(unit, 64 << 10).unwrap();
    write_floats(&ring, X_AT, &vec![1.0; N as usize]);
    write_floats(&ring, Y_AT, &vec![0.0; N as usize]);
    let beyond = (64 << 10) - 16..(64 << 10) - 16 + N * 4;
    let err = call(
        &mut c,
        &mut ring,
        k.kernel,
        &saxpy_args(flags::COPY_IN, beyond, 2.0),
    )
    .unwrap_err();
    let ClientError::Refused { code, message } = &err else {
        panic!("not a refusal: {err:?}");
    };
    assert_eq!(*code, ErrorCode::BadKernelCall, "{message}");
    assert!(
        message.contains("`y`") && message.contains("outside"),
        "{message}"
    );
    // Copying out a `const` buffer is refused by name as well.
    let err = call(
        &mut c,
        &mut ring,
        k.kernel,
        &saxpy_args(flags::COPY_OUT, Y_AT..Y_AT + N * 4, 2.0),
    )
    .unwrap_err();
    assert!(err.to_string().contains("`x`"), "{err}");
    // Nothing ran: y is as it was, and the next good call runs.
    assert_eq!(read_floats(&ring, Y_AT, N), vec![0.0; N as usize]);
    call(
        &mut c,
        &mut ring,
        k.kernel,
        &saxpy_args(flags::COPY_IN, Y_AT..Y_AT + N * 4, 3.0),
    )
    .unwrap();
    assert_eq!(read_floats(&ring, Y_AT, N), vec![3.0; N as usize]);
    // A kernel number this client never registered.
    let err = call(
        &mut c,
        &mut ring,
        UserKernelId(k.kernel.0 + 7),
        &saxpy_args(flags::COPY_IN, Y_AT..Y_AT + N * 4, 1.0),
    )
    .unwrap_err();
    assert!(err.to_string().contains("not registered"), "{err}");
}

/// A source that does not compile is refused with the compiler's log; so
/// is an entry point the source does not define. The client stays
/// connected and can register a good kernel next.
#[test]
fn a_kernel_that_does_not_compile_is_refused_with_the_compilers_log() {
    let d = served_daemon("user-kernel-build");
    let mut c = d.app("broken");
    let unit = served_unit(&c);
    let broken = "__kernel void broken(__global int *out) { out[0] = undeclared_thing; }";
    let err = c.register_kernel(unit, broken, "broken").unwrap_err();
    let ClientError::Refused { code, message } = &err else {
        panic!("not a refusal: {err:?}");
    };
    assert_eq!(*code, ErrorCode::KernelBuildFailed);
    assert!(
        message.contains("undeclared_thing") && message.contains("compiler"),
        "the log is in the message: {message}"
    );
    let err = c.register_kernel(unit, SAXPY, "saxpyy").unwrap_err();
    assert!(err.to_string().contains("saxpy"), "{err}");
    let err = c
        .register_kernel(unit, SAXPY, "not a name; rm -rf")
        .unwrap_err();
    assert!(err.to_string().contains("not a kernel name"), "{err}");
    assert!(c.register_kernel(unit, SAXPY, "saxpy").is_ok());
}

/// A declaration (`name(kind, ...)`) is for CUDA units' PTX: an OpenCL
/// unit refuses it, saying to register by name; one that does not parse
/// is refused before any unit sees it, naming the parameter. The client
/// stays connected.
#[test]
fn an_opencl_unit_refuses_a_ptx_declaration() {
    let d = served_daemon("user-kernel-decl");
    let mut c = d.app("decl");
    let unit = served_unit(&c);
    let err = c
        .register_kernel(unit, SAXPY, "saxpy(const ptr, ptr, f32, u32)")
        .unwrap_err();
    assert!(err.to_string().contains("by name alone"), "{err}");
    let err = c
        .register_kernel(unit, SAXPY, "saxpy(const ptr, float)")
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("parameter 1") && text.contains("`float`"),
        "{text}"
    );
    assert!(c.register_kernel(unit, SAXPY, "saxpy").is_ok());
}

/// A buffer kept on the device (`KEEP`) is used by the next call without
/// copying it again: the call sees the device's copy, not the region.
#[test]
fn a_kept_buffer_is_not_copied_again() {
    let d = served_daemon("user-kernel-keep");
    let mut c = d.app("keep");
    let unit = served_unit(&c);
    let k = c.register_kernel(unit, SAXPY, "saxpy").unwrap();
    let mut ring = c.open_kernel_ring(unit, 64 << 10).unwrap();
    write_floats(&ring, X_AT, &vec![2.0; N as usize]);
    write_floats(&ring, Y_AT, &vec![0.0; N as usize]);
    let y = Y_AT..Y_AT + N * 4;
    call(
        &mut c,
        &mut ring,
        k.kernel,
        &saxpy_args(flags::COPY_IN | flags::KEEP, y.clone(), 1.0),
    )
    .unwrap();
    assert_eq!(read_floats(&ring, Y_AT, N), vec![2.0; N as usize]);
    // x changes in the region, but the kept copy on the device does not.
    write_floats(&ring, X_AT, &vec![100.0; N as usize]);
    write_floats(&ring, Y_AT, &vec![0.0; N as usize]);
    call(
        &mut c,
        &mut ring,
        k.kernel,
        &saxpy_args(flags::KEEP, y, 1.0),
    )
    .unwrap();
    assert_eq!(read_floats(&ring, Y_AT, N), vec![2.0; N as usize]);
}

/// A client that opens a new kernel ring (a new data region) has its next
/// calls run on the new region: the kernel executor, which keeps a
/// client's region mapped between calls, is handed the new one.
#[test]
fn a_new_ring_is_the_region_calls_run_on() {
    let d = served_daemon("user-kernel-new-ring");
    let mut c = d.app("rings");
    let unit = served_unit(&c);
    let k = c.register_kernel(unit, SAXPY, "saxpy").unwrap();
    for (round, a) in [(0, 2.0f32), (1, 3.0), (2, 5.0)] {
        let mut ring = c.open_kernel_ring(unit, 64 << 10).unwrap();
        write_floats(&ring, X_AT, &vec![1.0; N as usize]);
        write_floats(&ring, Y_AT, &vec![round as f32; N as usize]);
        for _ in 0..2 {
            call(
                &mut c,
                &mut ring,
                k.kernel,
                &saxpy_args(flags::COPY_IN, Y_AT..Y_AT + N * 4, a),
            )
            .unwrap();
        }
        let want = round as f32 + 2.0 * a;
        assert_eq!(
            read_floats(&ring, Y_AT, N),
            vec![want; N as usize],
            "ring {round}"
        );
    }
}
