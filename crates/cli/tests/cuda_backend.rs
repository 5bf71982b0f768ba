//! The daemon's CUDA backend (`cuda_units = true`, feature `cuda`): a real
//! daemon serves every CUDA device as `served-cuda<N>` and runs clients'
//! histogram and AES-CTR kernels on it through kernel rings.
//!
//! Without a usable CUDA device (no driver, no NVRTC, no GPU) the daemon
//! must still start, serve no CUDA unit and say why in one line; that is
//! checked here on every machine. The GPU part (`hetsched load` on
//! `served-cuda0`, every output checked against the reference) runs only
//! where a device opens, and otherwise prints why it is skipped.
#![cfg(feature = "cuda")]

use hetsched_protocol::Client;
use serde_json::Value;

mod common;
use common::{ONE_GPU, TestDaemon, load_report as report};

const SERVED: &str = "served-cuda0";

/// Why no CUDA device can be used here, or `None` where device 0 opens.
fn no_gpu() -> Option<String> {
    match hetsched_cuda::probe() {
        Ok(0) => Some("the CUDA driver reports no device".into()),
        Ok(_) => hetsched_cuda::CudaDevice::open(0)
            .err()
            .map(|e| e.to_string()),
        Err(e) => Some(e),
    }
}

fn served_cuda(c: &Client) -> Vec<String> {
    c.units()
        .iter()
        .filter(|u| u.name.starts_with("served-cuda"))
        .map(|u| u.name.clone())
        .collect()
}

/// `hetsched load` of `kernel` on `served-cuda0` for a second; every
/// output must equal the reference.
fn load_checked(d: &TestDaemon, kernel: &str) -> Value {
    let v = report(d.load(
        &[],
        &[
            "--unit",
            SERVED,
            "--kernel",
            kernel,
            "--bytes",
            "1048577",
            "--depth",
            "4",
            "--seconds",
            "1",
        ],
    ));
    eprintln!("served-cuda0 {kernel}: {v}");
    assert!(
        v["tasks"].as_u64().unwrap() > 0,
        "{kernel}: no call ran: {v}"
    );
    assert_eq!(
        v["verified"], v["tasks"],
        "{kernel}: every output checked: {v}"
    );
    v
}

#[test]
fn the_daemon_serves_cuda_devices_or_says_why_not() {
    // An emulated GPU as well, so the daemon has a unit to manage when
    // CUDA has none to offer.
    let config = format!("cuda_units = true\n{ONE_GPU}");
    let d = TestDaemon::start_logged("cuda-daemon", &config);
    let c = d.observer().unwrap();
    let served = served_cuda(&c);
    match no_gpu() {
        Some(why) => {
            assert!(served.is_empty(), "no CUDA here ({why}), yet {served:?}");
            assert!(c.unit_by_name("gpu0").is_some(), "{:?}", c.units());
            // The daemon printed its line before it listened.
            let log = d.log_text();
            let said = "cuda_units = true, but no CUDA device is served: ";
            let lines: Vec<&str> = log.lines().filter(|l| l.contains(said)).collect();
            assert_eq!(lines.len(), 1, "one line saying why: {log:?}");
            let reason = lines[0].split_once(said).map_or("", |(_, r)| r.trim());
            assert!(!reason.is_empty(), "the line says why: {:?}", lines[0]);
            hetsched_platform::test_support::available(
                "cuda",
                Err(format!("no CUDA device here; the daemon said: {reason}")),
            );
        }
        None => {
            assert!(
                !served.is_empty(),
                "device 0 opens here, but the daemon serves no CUDA unit: {}",
                d.log_text()
            );
            let unit = c.unit_by_name(SERVED).unwrap();
            assert_eq!(unit.class, hetsched_core::unit::UnitClass::Gpu);
            assert_eq!(unit.kernels, ["histogram", "aes128-ctr"]);
            load_checked(&d, "histogram");
            load_checked(&d, "aes128-ctr");
        }
    }
}

/// A client registers a PTX kernel with `served-cuda0`, declaring its
/// kinds, and runs it on its data region through its kernel ring; a
/// declaration that does not match the PTX is refused naming the
/// parameter. On a GPU only; elsewhere it says why it skips.
#[test]
fn a_registered_ptx_kernel_runs_through_the_daemon() {
    use hetsched_cuda::kernels::{SCALE_PTX, SCALE_PTX_DECLARATION};
    use hetsched_protocol::user_kernel::{ArgBlock, flags};
    if let Some(why) = no_gpu() {
        hetsched_platform::test_support::available("cuda", Err(why));
        return;
    }
    let d = TestDaemon::start_logged("cuda-ptx", "include_cpus = false\ncuda_units = true\n");
    let mut c = d.app("ptx");
    // A build or call that never answers fails the test, with the log.
    c.set_reply_timeout(Some(std::time::Duration::from_secs(90)))
        .unwrap();
    let log = |e: &dyn std::fmt::Display| format!("{e}; the daemon's log:\n{}", d.log_text());
    let unit = c
        .unit_by_name(SERVED)
        .unwrap_or_else(|| panic!("no {SERVED}: {}", d.log_text()))
        .id;
    let err = c
        .register_kernel(unit, SCALE_PTX, "scale(const ptr, ptr, f32)")
        .unwrap_err();
    assert!(err.to_string().contains("has 4"), "{}", log(&err));
    let err = c.register_kernel(unit, SCALE_PTX, "scale").unwrap_err();
    assert!(err.to_string().contains("parameter kinds"), "{}", log(&err));
    let k = c
        .register_kernel(unit, SCALE_PTX, SCALE_PTX_DECLARATION)
        .unwrap_or_else(|e| panic!("{}", log(&e)));
    let names: Vec<&str> = k.signature.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names[0], "scale_param_0");
    let mut ring = c.open_kernel_ring(unit, 64 << 10).unwrap();
    let n = 1000u64;
    let src: Vec<u8> = (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect();
    ring.region().write(0, &src).unwrap();
    let block = ArgBlock::new()
        .buffer(0..n * 4, flags::COPY_IN)
        .buffer(8192..8192 + n * 4, flags::COPY_OUT)
        .f32(0.5)
        .u32(n as u32);
    ring.region().write(32768, block.bytes()).unwrap();
    let args = 32768..32768 + block.bytes().len() as u64;
    let task = c
        .push_user_call(&mut ring, k.kernel, args, n, 0)
        .expect("the ring has room");
    c.wait_device(task)
        .unwrap_or_else(|e| panic!("{}", log(&e)));
    let mut out = vec![0u8; n as usize * 4];
    ring.region().read(8192, &mut out).unwrap();
    let got: Vec<f32> = out
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let want: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    assert_eq!(got, want);
}

/// Without the feature the same key is a config error (the other half is
/// in hetsched-daemon's config tests); with it, `hetsched units --json`
/// lists what `cuda_units` would serve.
#[test]
fn units_lists_served_cuda_devices() {
    let dir = std::env::temp_dir().join(format!(
        "hetsched-it-cuda-units-list-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("hetsched.toml");
    std::fs::write(&config, format!("cuda_units = true\n{ONE_GPU}")).unwrap();
    let out = std::process::Command::new(common::BIN)
        .args(["units", "--json", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let served: Vec<&str> = v["served"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["name"].as_str())
        .filter(|n| n.starts_with("served-cuda"))
        .collect();
    match no_gpu() {
        Some(why) => {
            assert!(served.is_empty(), "{served:?}");
            hetsched_platform::test_support::available("cuda", Err(why.to_string()));
        }
        None => assert!(served.contains(&SERVED), "{v}"),
    }
}
