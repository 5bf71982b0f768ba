//! Kernels written to hurt: an unprivileged user (`nobody`) attacks a
//! daemon serving PoCL (`opencl_units`) while a root client keeps data on
//! the same unit. Each test asserts that the daemon survives, that the
//! victim's data and service are intact, and that the attacker gets a
//! clear refusal or error. Registered kernels run in an executor process
//! per unit and user, as that user, so what a kernel reads or breaks is
//! its own user's executor, never the daemon or root's data.
//!
//! The attacker is a thread of this (root) test that has set its own
//! user ids to `nobody` before it connects: the daemon knows a client by
//! the credentials of the thread that connected (SO_PEERCRED). These
//! tests need root and an OpenCL device (PoCL), and fail, saying so,
//! without them.
#![cfg(feature = "opencl")]

use hetsched_core::ids::UnitId;
use hetsched_protocol::user_kernel::{ArgBlock, UserKernelId, flags};
use hetsched_protocol::{Client, ClientError, ClientOptions, ErrorCode, KernelRing};
use std::time::{Duration, Instant};

mod common;
use common::TestDaemon;

const SERVED: &str = "served-opencl0";
const NOBODY: u32 = 65534;
const REGION: u64 = 64 << 10;
const ARGS_AT: u64 = 60 << 10;
/// What the victim keeps on the device.
const SECRET: u32 = 0x5EC2_E7A1;

/// Copies `n` words.
const COPY: &str = "__kernel void copy(__global const uint *src, __global uint *dst) {
    size_t i = get_global_id(0); dst[i] = src[i]; }";

/// Reads and writes `off` words away from its buffers.
const PEEK: &str = "__kernel void peek(__global const int *src, __global int *dst, int off) {
    dst[0] = src[off]; dst[off] = 7; }";

/// Reads and writes a few bytes above address 0 (an address made from
/// an integer, which the compiler cannot prove out of bounds).
const WILD: &str = "__kernel void wild(__global const int *src, __global int *dst) {
    __global const int *p = (__global const int *)((size_t)src & 0xF0);
    __global int *q = (__global int *)((size_t)dst & 0xF0);
    q[0] = p[0] + 1; }";

/// Looks for the victim's secret (given complemented, so that the
/// argument itself is not found) from `from` to `to` words around its
/// buffer.
const SCAN: &str = "__kernel void scan(__global const uint *buf, __global uint *out, int from,
    int to, uint magic) {
    for (int i = from; i < to; i++) {
        if (i >= 0 && i < 16) continue;
        if (buf[i] == ~magic) { out[0] = 1; out[1] = (uint)i; return; }
    }
    out[0] = 2; }";

/// Never ends (a volatile load each turn, so it cannot be optimised away).
const SPIN: &str = "__kernel void spin(__global volatile int *flag) {
    while (flag[0] != 12345) { } }";

fn daemon(name: &str, extra: &str) -> TestDaemon {
    match hetsched_opencl::devices() {
        Ok(d) if !d.is_empty() => {}
        other => panic!(
            "these tests need an OpenCL device (PoCL: scripts/install-deps.sh installs \
             pocl-opencl-icd): {other:?}"
        ),
    }
    assert!(
        rustix::process::geteuid().is_root(),
        "these tests run the attacker as `nobody`, which needs root"
    );
    TestDaemon::start_logged(
        name,
        &format!("include_cpus = false\nopencl_units = true\n{extra}"),
    )
}

fn unit(c: &Client) -> UnitId {
    c.unit_by_name(SERVED)
        .unwrap_or_else(|| panic!("the daemon does not serve {SERVED}: {:?}", c.units()))
        .id
}

/// Runs `attack` on a thread whose user and group are `nobody`: what it
/// connects is an unprivileged client.
fn as_nobody<T: Send>(attack: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            use rustix::process::{Gid, Uid};
            let (uid, gid) = (Uid::from_raw(NOBODY), Gid::from_raw(NOBODY));
            rustix::thread::set_thread_groups(&[]).unwrap();
            rustix::thread::set_thread_res_gid(gid, gid, gid).unwrap();
            rustix::thread::set_thread_res_uid(uid, uid, uid).unwrap();
            attack()
        })
        .join()
        .unwrap()
    })
}

fn connect(d: &TestDaemon, name: &str) -> Client {
    let mut opts = ClientOptions::application(name).unwrap().socket(&d.socket);
    opts.requested = Default::default();
    Client::connect(opts).unwrap()
}

fn words(ring: &KernelRing, at: u64, n: usize) -> Vec<u32> {
    let mut bytes = vec![0u8; n * 4];
    ring.region().read(at, &mut bytes).unwrap();
    bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn write_words(ring: &KernelRing, at: u64, v: &[u32]) {
    let bytes: Vec<u8> = v.iter().flat_map(|w| w.to_le_bytes()).collect();
    ring.region().write(at, &bytes).unwrap();
}

/// Pushes a call of `kernel` with arguments `block` over `global` items
/// and waits for its end.
fn call(
    c: &mut Client,
    ring: &mut KernelRing,
    kernel: UserKernelId,
    block: &ArgBlock,
    global: u64,
) -> Result<(), ClientError> {
    ring.region().write(ARGS_AT, block.bytes()).unwrap();
    let args = ARGS_AT..ARGS_AT + block.bytes().len() as u64;
    let task = c
        .push_user_call(ring, kernel, args, global, 0)
        .expect("the ring has room");
    c.wait_device(task).map(|_| ())
}

fn message(e: &ClientError) -> String {
    match e {
        ClientError::Refused { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Root's client: keeps 1,024 words of [`SECRET`] on the device (at
/// region bytes 0..4096, kept), and checks they are intact and that it
/// is still served.
struct Victim {
    c: Client,
    ring: KernelRing,
    copy: UserKernelId,
}

const N: usize = 1024;

impl Victim {
    fn new(d: &TestDaemon) -> Victim {
        let mut c = connect(d, "victim");
        let u = unit(&c);
        let copy = c.register_kernel(u, COPY, "copy").unwrap().kernel;
        let mut ring = c.open_kernel_ring(u, REGION).unwrap();
        write_words(&ring, 0, &[SECRET; N]);
        let block = ArgBlock::new()
            .buffer(0..4096, flags::COPY_IN | flags::KEEP)
            .buffer(4096..8192, flags::COPY_OUT);
        call(&mut c, &mut ring, copy, &block, N as u64).unwrap();
        // The secret is now only on the device.
        write_words(&ring, 0, &[0; N]);
        Victim { c, ring, copy }
    }

    /// Its kept buffer still holds the secret, and a call runs.
    fn intact(&mut self) {
        write_words(&self.ring, 4096, &[0; N]);
        let block = ArgBlock::new()
            .buffer(0..4096, flags::KEEP)
            .buffer(4096..8192, flags::COPY_OUT);
        call(&mut self.c, &mut self.ring, self.copy, &block, N as u64)
            .expect("the victim is still served");
        assert_eq!(words(&self.ring, 4096, N), vec![SECRET; N]);
    }
}

/// The daemon's process is alive and answers.
fn daemon_alive(d: &mut TestDaemon) {
    let child = d.child.as_mut().unwrap();
    assert!(child.try_wait().unwrap().is_none(), "the daemon died");
    d.observer().expect("the daemon answers");
}

/// Users of the daemon's child processes (its kernel executors).
fn executor_uids(d: &TestDaemon) -> Vec<u32> {
    let pid = d.child.as_ref().unwrap().id().to_string();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
        };
        if field("PPid:").as_deref() == Some(pid.as_str()) {
            out.extend(field("Uid:").and_then(|u| u.parse::<u32>().ok()));
        }
    }
    out.sort_unstable();
    out
}

const ALLOW_NOBODY: &str = "kernel_users = [\"nobody\"]\n";

#[test]
fn registering_without_permission_is_refused() {
    let mut d = daemon("hostile-perm", "");
    let mut victim = Victim::new(&d);
    let err = as_nobody(|| {
        let mut c = connect(&d, "attacker");
        let u = unit(&c);
        c.register_kernel(u, COPY, "copy").unwrap_err()
    });
    let ClientError::Refused { code, message } = &err else {
        panic!("not a refusal: {err:?}");
    };
    assert_eq!(*code, ErrorCode::NotPermitted, "{message}");
    assert!(
        message.contains("kernel_users") && message.contains(&NOBODY.to_string()),
        "{message}"
    );
    assert_eq!(executor_uids(&d), [0], "no executor was started for nobody");
    victim.intact();
    daemon_alive(&mut d);
}

/// Reads and writes out of bounds (the audit's 64 KB back and 32 KB
/// past, then near address 0) crash at most the attacker's executor,
/// which runs as nobody; its next registration starts a fresh one.
#[test]
fn out_of_bounds_reads_and_writes_crash_only_the_attackers_executor() {
    let mut d = daemon("hostile-oob", ALLOW_NOBODY);
    let mut victim = Victim::new(&d);
    let errors = as_nobody(|| {
        let mut c = connect(&d, "attacker");
        let u = unit(&c);
        let mut ring = c.open_kernel_ring(u, REGION).unwrap();
        let mut errors = Vec::new();
        let mut peek = c.register_kernel(u, PEEK, "peek").unwrap().kernel;
        for off in [-16384, 8192] {
            let block = ArgBlock::new()
                .buffer(0..4096, flags::COPY_IN)
                .buffer(4096..8192, flags::COPY_OUT)
                .i32(off);
            if let Err(e) = call(&mut c, &mut ring, peek, &block, 1) {
                errors.push(message(&e));
            }
            // A crash took the kernel with it: register it again (a
            // kernel that is still registered keeps its number).
            let again = c.register_kernel(u, PEEK, "peek").unwrap().kernel;
            assert!(again.0 >= peek.0);
            peek = again;
        }
        let wild = c.register_kernel(u, WILD, "wild").unwrap().kernel;
        let block = ArgBlock::new()
            .buffer(0..4096, flags::COPY_IN)
            .buffer(4096..8192, flags::COPY_OUT);
        let err = call(&mut c, &mut ring, wild, &block, 1).unwrap_err();
        errors.push(message(&err));
        // The crash revoked its kernels: calling one is refused by name.
        let err = call(&mut c, &mut ring, wild, &block, 1).unwrap_err();
        assert!(message(&err).contains("not registered"), "{err}");
        errors
    });
    let last = errors.last().unwrap();
    assert!(
        last.contains("kernel executor of user 65534")
            && last.contains("signal 11")
            && last.contains("registered again"),
        "{last}"
    );
    victim.intact();
    daemon_alive(&mut d);
    assert!(
        d.log_text().contains("kernel executor of user 65534"),
        "the daemon logs the executor's end"
    );
}

/// The audit found root's kept buffer about 1 MB from an attacker's
/// buffer. Now the attacker's kernel runs in nobody's executor: scanning
/// ±1 MB around its buffer finds no secret (or faults, in its own
/// process), and the executor runs as nobody.
#[test]
fn another_clients_buffer_is_not_readable() {
    let mut d = daemon("hostile-leak", ALLOW_NOBODY);
    let mut victim = Victim::new(&d);
    let (found, uids) = as_nobody(|| {
        let mut c = connect(&d, "attacker");
        let u = unit(&c);
        let scan = c.register_kernel(u, SCAN, "scan").unwrap().kernel;
        let uids = executor_uids(&d);
        let mut ring = c.open_kernel_ring(u, REGION).unwrap();
        let mut found = Vec::new();
        for (from, to) in [(16, 262_144), (-262_144, 0)] {
            let block = ArgBlock::new()
                .buffer(0..64, flags::COPY_IN | flags::KEEP)
                .buffer(4096..4104, flags::COPY_OUT)
                .i32(from)
                .i32(to)
                .u32(!SECRET);
            write_words(&ring, 4096, &[0, 0]);
            let ran = call(&mut c, &mut ring, scan, &block, 1);
            found.push((ran.map_err(|e| message(&e)), words(&ring, 4096, 2)));
            if found.last().unwrap().0.is_err() {
                c.register_kernel(u, SCAN, "scan").unwrap();
            }
        }
        (found, uids)
    });
    assert_eq!(uids, [0, NOBODY], "root's executor and nobody's");
    for (ran, out) in &found {
        match ran {
            Ok(()) => assert_eq!(out[0], 2, "the scan found the secret: {out:?}"),
            Err(e) => assert!(e.contains("kernel executor of user 65534"), "{e}"),
        }
    }
    victim.intact();
    daemon_alive(&mut d);
}

/// A kernel that never ends is killed at `max_device_seconds` with its
/// executor, and charged; the unit serves the victim right after. One
/// whose client left is killed all the same.
#[test]
fn a_spinning_kernel_is_killed_at_its_limit_and_the_unit_goes_on() {
    let mut d = daemon(
        "hostile-spin",
        &format!("max_device_seconds = 3.0\n{ALLOW_NOBODY}"),
    );
    let mut victim = Victim::new(&d);
    let started = Instant::now();
    let err = as_nobody(|| {
        let mut c = connect(&d, "spinner");
        let u = unit(&c);
        let spin = c.register_kernel(u, SPIN, "spin").unwrap().kernel;
        let mut ring = c.open_kernel_ring(u, REGION).unwrap();
        let block = ArgBlock::new().buffer(0..64, flags::COPY_IN | flags::COPY_OUT);
        call(&mut c, &mut ring, spin, &block, 1).unwrap_err()
    });
    let text = message(&err);
    assert!(
        text.contains("longer than its limit of 3.000 s") && text.contains("killed"),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "killed in time"
    );
    victim.intact();
    // Again, leaving as soon as the call is pushed.
    as_nobody(|| {
        let mut c = connect(&d, "spinner-gone");
        let u = unit(&c);
        let spin = c.register_kernel(u, SPIN, "spin").unwrap().kernel;
        let mut ring = c.open_kernel_ring(u, REGION).unwrap();
        let block = ArgBlock::new().buffer(0..64, flags::COPY_IN | flags::COPY_OUT);
        ring.region().write(ARGS_AT, block.bytes()).unwrap();
        let args = ARGS_AT..ARGS_AT + block.bytes().len() as u64;
        c.push_user_call(&mut ring, spin, args, 1, 0).unwrap();
        // Seen started by the unit before it goes.
        let deadline = Instant::now() + Duration::from_secs(10);
        while executor_uids(&d) != [0, NOBODY] {
            assert!(Instant::now() < deadline, "the spin never started");
            std::thread::yield_now();
        }
    });
    let left = Instant::now();
    victim.intact();
    assert!(
        left.elapsed() < Duration::from_secs(15),
        "the victim waited {:?}",
        left.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while executor_uids(&d) != [0] {
        assert!(Instant::now() < deadline, "nobody's executor still runs");
        std::thread::yield_now();
    }
    daemon_alive(&mut d);
}

/// Builds are limited per client (count, source size), and counted
/// against the client, not the unit: after the attacker leaves, it (and
/// root) may register again.
#[test]
fn build_count_and_source_size_are_limited_per_client() {
    let config = format!("{ALLOW_NOBODY}[kernels]\nmax_per_client = 3\nmax_source_kb = 1\n");
    let mut d = daemon("hostile-count", &config);
    let mut victim = Victim::new(&d);
    let source = |i: usize| format!("__kernel void k(__global int *o) {{ o[0] = {i}; }}");
    as_nobody(|| {
        for round in 0..2 {
            let mut c = connect(&d, "builder");
            let u = unit(&c);
            for i in 0..3 {
                c.register_kernel(u, &source(round * 10 + i), "k").unwrap();
            }
            let err = c
                .register_kernel(u, &source(round * 10 + 3), "k")
                .unwrap_err();
            let ClientError::Refused { code, message } = &err else {
                panic!("not a refusal: {err:?}");
            };
            assert_eq!(*code, ErrorCode::KernelBuildFailed);
            assert!(message.contains("max_per_client"), "{message}");
            let big = format!("{}\n{}", source(99), " ".repeat(2048));
            let err = c.register_kernel(u, &big, "k").unwrap_err();
            assert!(message_of(&err).contains("max_source_kb"), "{err}");
        }
    });
    // Root's client is not held to the attacker's count.
    let u = unit(&victim.c);
    victim.c.register_kernel(u, &source(1000), "k").unwrap();
    victim.intact();
    daemon_alive(&mut d);
}

fn message_of(e: &ClientError) -> String {
    message(e)
}

/// A source that expands to tens of millions of tokens (the audit's
/// 458 bytes took 22 s and 2.7 GB of the daemon) is stopped at
/// `compile_seconds` or `compile_memory_mb`, in the attacker's executor.
#[test]
fn a_build_past_its_time_or_memory_is_stopped() {
    let config =
        format!("{ALLOW_NOBODY}[kernels]\ncompile_seconds = 10.0\ncompile_memory_mb = 256\n");
    let mut d = daemon("hostile-build", &config);
    let mut victim = Victim::new(&d);
    let mut bomb = String::from("#define A0 x\n");
    for i in 1..=24 {
        bomb.push_str(&format!("#define A{i} A{p}+A{p}\n", p = i - 1));
    }
    bomb.push_str("__kernel void k(__global int *o) { int x = o[1]; o[0] = A24; }\n");
    let started = Instant::now();
    let err = as_nobody(|| {
        let mut c = connect(&d, "bomber");
        let u = unit(&c);
        c.register_kernel(u, &bomb, "k").unwrap_err()
    });
    let text = message(&err);
    assert!(
        text.contains("longer than its limit of 10.000 s")
            || (text.contains("failed while building") && text.contains("kernel executor")),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_secs(40));
    victim.intact();
    daemon_alive(&mut d);
}

/// A source whose optimisation takes long in little memory (a loop of a
/// million turns, unrolled whole) is killed at `compile_seconds`.
#[test]
fn a_build_past_its_time_is_killed() {
    let config =
        format!("{ALLOW_NOBODY}[kernels]\ncompile_seconds = 3.0\ncompile_memory_mb = 1024\n");
    let mut d = daemon("hostile-slow-build", &config);
    let mut victim = Victim::new(&d);
    let slow = "__kernel void k(__global uint *o) { uint x = o[0];
        __attribute__((opencl_unroll_hint(1048576)))
        for (uint i = 0; i < 1048576; i++) { x = x * 2654435761u + (x >> 13) + i; }
        o[0] = x; }";
    let err = as_nobody(|| {
        let mut c = connect(&d, "slow");
        let u = unit(&c);
        c.register_kernel(u, slow, "k").unwrap_err()
    });
    let text = message(&err);
    assert!(
        text.contains("longer than its limit of 3.000 s") && text.contains("killed"),
        "{text}"
    );
    victim.intact();
    daemon_alive(&mut d);
}
