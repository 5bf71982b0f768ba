//! Pegasus's backend with real work: the daemon serves an OpenCL device
//! (PoCL here) and runs clients' kernels from their kernel rings, one call
//! at a time, in the order the unit's policy picks. Each test skips, saying
//! why, where no OpenCL device opens.
#![cfg(feature = "opencl")]

use hetsched_core::ids::UnitId;
use hetsched_protocol::kernel_call::Kernel;
use hetsched_protocol::{Client, ClientError, ClientOptions, ErrorCode};
use serde_json::Value;
use std::process::Child;
use std::time::{Duration, Instant};

mod common;
use common::{Reaped, TestDaemon, load_report as report, unit_s};

const SERVED: &str = "served-opencl0";

/// A daemon serving the OpenCL devices under `policy`, or `None` (with a
/// line saying why) where OpenCL has no device.
fn served_daemon(name: &str, policy: &str) -> Option<TestDaemon> {
    if !opencl_device_opens() {
        return None;
    }
    let config =
        format!("include_cpus = false\nopencl_units = true\n[policies]\n{SERVED} = \"{policy}\"\n");
    Some(TestDaemon::start(name, &config))
}

/// Whether an OpenCL device is there to test with (a line saying why not
/// otherwise).
fn opencl_device_opens() -> bool {
    let found = match hetsched_opencl::devices() {
        Ok(d) if !d.is_empty() => Ok(()),
        Ok(_) => Err("OpenCL has no device here".to_string()),
        Err(e) => Err(format!("no OpenCL here: {e}")),
    };
    hetsched_platform::test_support::available("opencl", found)
}

fn served_unit(c: &Client) -> UnitId {
    c.unit_by_name(SERVED)
        .unwrap_or_else(|| panic!("the daemon does not serve {SERVED}: {:?}", c.units()))
        .id
}

/// Pegasus's real run with real kernels: four processes with credits
/// 256/512/1024/256 keep the served device busy with histograms, and the
/// device time each is charged follows its credits. Every output is
/// checked against the reference by `hetsched load`.
#[test]
fn kernel_calls_share_the_device_by_credits_under_accc() {
    let Some(d) = served_daemon("kernel-accc", "accc") else {
        return;
    };
    let load = [
        "--unit",
        SERVED,
        "--kernel",
        "histogram",
        "--bytes",
        "262144",
        "--seconds",
        "3",
        // Enough queued that checking one output never empties the queue
        // in the client's slot (which would end its turn early).
        "--depth",
        "4",
    ];
    let children: Vec<(f64, Child)> = [256.0, 512.0, 1024.0, 256.0]
        .into_iter()
        .map(|c: f64| {
            let shares = format!("{c}");
            (
                c,
                d.load(&["--class", "normal", "--shares", &shares], &load),
            )
        })
        .collect();
    let got: Vec<(f64, Value)> = children
        .into_iter()
        .map(|(c, ch)| (c, report(ch)))
        .collect();
    let total: f64 = got.iter().map(|(_, v)| unit_s(v)).sum();
    assert!(total > 2.5, "device mostly idle: {total} s of 3");
    for (credits, v) in &got {
        assert_eq!(v["verified"], v["tasks"], "every output checked: {v}");
        let want = 100.0 * credits / 2048.0;
        let pct = 100.0 * unit_s(v) / total;
        eprintln!("served accc: credits {credits}: {pct:.1} % (want {want:.1} %)");
        assert!(
            (pct - want).abs() <= 3.0,
            "credits {credits} got {pct:.1} % of the device, want {want:.1} % ({got:?})"
        );
    }
}

fn refused(e: ClientError) -> (ErrorCode, String) {
    match e {
        ClientError::Refused { code, message } => (code, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Malformed calls are refused one by one, with the reason, and the ring
/// goes on serving good calls; impossible ring requests are refused.
#[test]
fn bad_kernel_calls_are_refused_per_call_and_the_ring_keeps_serving() {
    let Some(d) = served_daemon("kernel-bad", "rr") else {
        return;
    };
    let mut c = Client::connect(
        ClientOptions::application("bad-calls")
            .unwrap()
            .socket(&d.socket),
    )
    .unwrap();
    let unit = served_unit(&c);
    let (code, msg) = refused(c.open_kernel_ring(unit, 12).unwrap_err());
    assert_eq!(code, ErrorCode::BadKernelCall, "{msg}");
    let (code, msg) = refused(c.open_kernel_ring(unit, 1 << 40).unwrap_err());
    assert_eq!(code, ErrorCode::BadKernelCall, "{msg}");
    let (code, msg) = refused(c.open_call_ring(unit).unwrap_err());
    assert_eq!(code, ErrorCode::NotEmulated, "{msg}");
    assert!(msg.contains("OpenKernelRing"), "{msg}");

    let mut ring = c.open_kernel_ring(unit, 8192).unwrap();
    let data: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    ring.region().write(0, &data).unwrap();
    let bad = [
        // Output past the end of the region.
        ([0, 1, 0, 4096, 7900, 1024, 0], "outside"),
        // A kernel nobody runs.
        ([0, 9, 0, 64, 4096, 1024, 0], "kernel number 9"),
        // The histogram writes 1024 bytes, not 16.
        ([0, 1, 0, 64, 4096, 16, 0], "1024 bytes"),
        // AES's key block past the end.
        ([0, 2, 0, 64, 4096, 64, 8180], "extra argument"),
    ];
    for (words, why) in bad {
        let task = c.push_raw_kernel_words(&mut ring, words).unwrap();
        let (code, msg) = refused(c.wait_device(task).unwrap_err());
        assert_eq!(code, ErrorCode::BadKernelCall, "{msg}");
        assert!(msg.contains(why), "{why:?} not in {msg:?}");
    }
    let task = c
        .push_kernel_call(&mut ring, Kernel::Histogram, 0..4096, 4096..5120, 0)
        .unwrap();
    let done = c.wait_device(task).unwrap();
    assert!(done.ran_ns > 0);
    let mut counts = vec![0u8; 1024];
    ring.region().read(4096, &mut counts).unwrap();
    let counts: Vec<u32> = counts
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let mut want = vec![0u32; 256];
    for &b in &data {
        want[b as usize] += 1;
    }
    assert_eq!(counts, want);
}

/// A `hetsched load` process keeping `depth` 1 MiB AES calls in flight
/// on the served unit for up to 30 s (killed when dropped).
fn aes_hog(d: &TestDaemon, depth: u32) -> Reaped {
    let depth = depth.to_string();
    Reaped(d.load(
        &[],
        &[
            "--unit",
            SERVED,
            "--kernel",
            "aes128-ctr",
            "--bytes",
            "1048576",
            "--depth",
            &depth,
            "--seconds",
            "30",
        ],
    ))
}

/// Waits (10 s at most) until calls are queued on `unit`.
fn wait_until_queued(c: &mut Client, unit: UnitId) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = c.status().unwrap();
        if st.units[unit.index()].queued_by_class.iter().sum::<u32>() > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "nothing was ever queued: {st:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A client killed with calls queued and one running frees the device:
/// another client's calls are served at once after the running one ends.
#[test]
fn a_client_killed_with_queued_kernel_calls_frees_the_device() {
    let Some(d) = served_daemon("kernel-kill", "fifo") else {
        return;
    };
    let mut hog = aes_hog(&d, 32);
    let mut c = Client::connect(
        ClientOptions::application("after")
            .unwrap()
            .socket(&d.socket),
    )
    .unwrap();
    let unit = served_unit(&c);
    wait_until_queued(&mut c, unit);
    hog.0.kill().unwrap();
    hog.0.wait().unwrap();
    // The daemon sees the connection close.
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.status().unwrap().clients.len() > 1 {
        assert!(
            Instant::now() < deadline,
            "the daemon still lists the dead hog"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut ring = c.open_kernel_ring(unit, 8192).unwrap();
    let t0 = Instant::now();
    let task = c
        .push_kernel_call(&mut ring, Kernel::Histogram, 0..1024, 4096..5120, 0)
        .unwrap();
    let done = c.wait_device(task).unwrap();
    // Behind at most the hog's running call (one 1 MiB AES), not its queue
    // of 31 more.
    let waited = t0.elapsed();
    eprintln!(
        "after the kill: waited {:.1} ms (daemon says {:.1} ms)",
        waited.as_secs_f64() * 1e3,
        done.waited_ns as f64 / 1e6
    );
    let st = c.status().unwrap();
    assert_eq!(
        st.units[unit.index()].queued_by_class.iter().sum::<u32>(),
        0,
        "{st:?}"
    );
    assert!(
        waited < Duration::from_millis(500),
        "waited {waited:?} behind a dead client's calls"
    );
}

/// A call queued before its client replaced the ring runs against the
/// region it was checked against, not the new one.
#[test]
fn a_queued_call_keeps_its_region_when_the_ring_is_replaced() {
    let Some(d) = served_daemon("kernel-replace", "fifo") else {
        return;
    };
    let _hog = aes_hog(&d, 4);
    let mut c = Client::connect(
        ClientOptions::application("replacer")
            .unwrap()
            .socket(&d.socket),
    )
    .unwrap();
    let unit = served_unit(&c);
    wait_until_queued(&mut c, unit);
    let mut old = c.open_kernel_ring(unit, 8192).unwrap();
    old.region().write(0, &[5u8; 4096]).unwrap();
    let task = c
        .push_kernel_call(&mut old, Kernel::Histogram, 0..4096, 4096..5120, 0)
        .unwrap();
    // Once the poller has taken the call into the (busy) unit's queue,
    // replace the ring with a region too small for the call's ranges.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let st = c.status().unwrap();
        let taken = st
            .clients
            .iter()
            .filter(|cl| cl.name == "replacer")
            .flat_map(|cl| &cl.units)
            .any(|u| u.unit == unit && u.outstanding > 0);
        if taken {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the ring call was never taken: {st:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let _new = c.open_kernel_ring(unit, 8).unwrap();
    c.wait_device(task).unwrap();
    let mut counts = [0u8; 1024];
    old.region().read(4096, &mut counts).unwrap();
    assert_eq!(
        &counts[20..24],
        &4096u32.to_le_bytes(),
        "bin 5 holds every byte"
    );
}

/// Pegasus's `none` baseline for real: `hetsched load --direct-opencl`
/// runs the same checked histogram loop on the OpenCL device in its own
/// process, without the daemon, and reports the same fields (with the
/// per-call latency that served kernel loads report too); a device that
/// does not exist is named in the error.
#[test]
fn the_direct_baseline_runs_the_served_loop_without_the_daemon() {
    if !opencl_device_opens() {
        return;
    }
    let run = |extra: &[&str]| {
        std::process::Command::new(common::BIN)
            .args(["load", "--bytes", "65536", "--seconds", "0.3", "--json"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&["--direct-opencl", "0"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tasks = v["tasks"].as_u64().unwrap();
    assert!(tasks > 0, "{v}");
    assert_eq!(v["verified"].as_u64(), Some(tasks), "{v}");
    assert_eq!(v["class"], "direct");
    assert!(v["unit_ns"].as_u64().unwrap() > 0, "{v}");
    let (p50, p99) = (
        v["p50_call_ns"].as_u64().unwrap(),
        v["p99_call_ns"].as_u64().unwrap(),
    );
    assert!(p50 > 0 && p99 >= p50, "{v}");
    let out = run(&["--direct-opencl", "99"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("there is no OpenCL device 99"), "{err}");
    // Short spin kernels back to back, every result checked, with the
    // time inside each launch's enqueue call.
    let out = run(&["--direct-opencl", "0", "--spin-us", "20"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tasks = v["tasks"].as_u64().unwrap();
    assert!(tasks > 0, "{v}");
    assert_eq!(v["verified"].as_u64(), Some(tasks), "{v}");
    let launch = v["p50_launch_ns"].as_u64().unwrap();
    assert!(
        launch > 0 && launch <= v["p50_call_ns"].as_u64().unwrap(),
        "a launch is part of its call: {v}"
    );
    for bad in [
        &["--direct-opencl", "0", "--spin-us", "0"][..],
        &["--spin-us", "20", "--unit", "opencl0"][..],
    ] {
        let out = run(bad);
        assert!(!out.status.success(), "{bad:?} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--spin-us"), "{bad:?}: {err}");
    }
    // The served loop reports the same latency.
    let Some(d) = served_daemon("kernel-direct", "none") else {
        return;
    };
    let v = report(d.load(
        &[],
        &["--unit", SERVED, "--bytes", "65536", "--seconds", "0.3"],
    ));
    assert!(
        v["p99_call_ns"].as_u64().unwrap() >= v["p50_call_ns"].as_u64().unwrap(),
        "{v}"
    );
    assert!(v["p50_call_ns"].as_u64().unwrap() > 0, "{v}");
}
