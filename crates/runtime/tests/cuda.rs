//! CUDA devices as runtime units (feature `cuda`).
//!
//! On a machine with a usable CUDA device (driver and NVRTC), these check
//! that the kernels equal their CPU references exactly, that the runtime
//! really places work on the GPU, and that calibration and the task model
//! produce physical figures. Where there is none, each prints
//! `skipping: no CUDA device (<reason>)` and returns, except
//! `without_cuda_tasks_fall_back_to_the_cpu`, which checks exactly that
//! case (on a GPU machine it re-runs itself with `HETSCHED_CUDA=0`).
#![cfg(feature = "cuda")]

use hetsched_core::ids::KindId;
use hetsched_core::task_model::PerformanceModel;
use hetsched_runtime::cuda::{CudaDevice, kernels, probe, reference};
use hetsched_runtime::{Mode, MonitorMode, Runtime, RuntimeOptions, Task};
use std::sync::Arc;

/// Device 0, or `None` after saying why the test is skipped.
fn gpu() -> Option<CudaDevice> {
    let why = match probe() {
        Ok(0) => "the CUDA driver reports no device".to_string(),
        Ok(_) => match CudaDevice::open(0) {
            Ok(d) => return Some(d),
            Err(e) => e.to_string(),
        },
        Err(e) => e,
    };
    hetsched_platform::test_support::available("cuda", Err(why));
    None
}

fn runtime(name: &str) -> Runtime {
    let opts = RuntimeOptions::new(name)
        .unwrap()
        .monitor(MonitorMode::Embedded)
        .persist_models(false);
    Runtime::with_options(opts).unwrap()
}

/// `len` reproducible pseudo-random bytes from `seed`.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    use rand::{RngCore, SeedableRng};
    let mut bytes = vec![0; len];
    rand_chacha::ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut bytes);
    bytes
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

const KEY: [u8; 16] = *b"0123456789abcdef";

#[test]
fn kernels_equal_the_cpu_references() {
    let Some(dev) = gpu() else { return };
    // Lengths around block, word and grid boundaries, and one large input
    // that makes every thread loop.
    for len in [0, 1, 3, 15, 16, 17, 4095, 4096, 65_537, (8 << 20) + 5] {
        let data = bytes(len, len as u64 + 1);
        // An IV whose low half wraps inside the input: the carry into the
        // high half must match.
        let iv = [0xff_u8; 16];
        let mut want = data.clone();
        reference::aes128_ctr(&KEY, &iv, &mut want);
        let got = kernels::aes128_ctr(&dev, &KEY, &iv, &data).unwrap();
        assert!(got == want, "AES-CTR differs for {len} bytes");
        assert_eq!(
            kernels::histogram(&dev, &data).unwrap(),
            reference::histogram(&data),
            "histogram differs for {len} bytes"
        );
    }
    // A grid that is no multiple of the 32 × 8 block.
    let grid = reference::LbmGrid::shear_wave(70, 45, 1.3);
    let got = kernels::lbm_run(&dev, &grid, 12).unwrap();
    assert!(
        same_bits(&got, &reference::lbm_run(&grid, 12)),
        "LBM populations differ from the CPU reference"
    );
    let t = dev.take_times().unwrap();
    assert!(t.kernels >= 21 && t.kernel_ns > 0.0 && t.copy_in_ns > 0.0 && t.copy_out_ns > 0.0);
}

#[test]
fn the_runtime_places_the_mix_on_the_gpu_and_gets_cpu_answers() {
    if gpu().is_none() {
        return;
    }
    let rt = runtime("cuda-mix-test");
    let Some(cuda) = rt.units().iter().find(|u| u.name == "cuda0") else {
        panic!(
            "a CUDA device exists but the runtime has no cuda0 unit: {:?}",
            rt.units()
        );
    };
    let cuda = cuda.id;
    let iv = [3_u8; 16];
    let aes = Task::new("aes")
        .cpu(move |d: &Arc<Vec<u8>>| {
            let mut out = d.to_vec();
            reference::aes128_ctr(&KEY, &iv, &mut out);
            out
        })
        .cuda(move |dev, d: &Arc<Vec<u8>>| kernels::aes128_ctr(dev, &KEY, &iv, d))
        .sizes(|d| (d.len() as u64, d.len() as u64));
    let hist = Task::new("hist")
        .cpu(|d: &Arc<Vec<u8>>| reference::histogram(d))
        .cuda(|dev, d: &Arc<Vec<u8>>| kernels::histogram(dev, d))
        .sizes(|d| (d.len() as u64, 1024));
    let lbm = Task::new("lbm")
        .cpu(|g: &Arc<reference::LbmGrid>| reference::lbm_run(g, 5))
        .cuda(|dev, g: &Arc<reference::LbmGrid>| kernels::lbm_run(dev, g, 5))
        .sizes(|g| (g.bytes() as u64, g.bytes() as u64));
    let inputs: Vec<Arc<Vec<u8>>> = (0..4).map(|i| Arc::new(bytes(1 << 20, i + 7))).collect();
    let grid = Arc::new(reference::LbmGrid::shear_wave(96, 64, 1.1));
    let lbm_want = reference::lbm_run(&grid, 5);
    let mut on_gpu = [0; 3];
    let mut handles = Vec::new();
    for i in 0..16 {
        let d = Arc::clone(&inputs[i % inputs.len()]);
        handles.push((
            i % inputs.len(),
            rt.accelerate(&aes, Arc::clone(&d), Mode::Async).unwrap(),
            rt.accelerate(&hist, d, Mode::Async).unwrap(),
            rt.accelerate(&lbm, Arc::clone(&grid), Mode::Async).unwrap(),
        ));
    }
    for (input, a, h, l) in handles {
        let (out, ia) = a.wait_with_info().unwrap();
        let mut want = inputs[input].to_vec();
        reference::aes128_ctr(&KEY, &iv, &mut want);
        assert!(out == want, "AES on {}", ia.unit_name);
        let (counts, ih) = h.wait_with_info().unwrap();
        assert_eq!(
            counts,
            reference::histogram(&inputs[input]),
            "on {}",
            ih.unit_name
        );
        let (f, il) = l.wait_with_info().unwrap();
        assert!(same_bits(&f, &lbm_want), "LBM on {}", il.unit_name);
        on_gpu[0] += usize::from(ia.unit == cuda);
        on_gpu[1] += usize::from(ih.unit == cuda);
        on_gpu[2] += usize::from(il.unit == cuda);
    }
    // Every task is profiled on every unit it has an implementation for.
    assert!(
        on_gpu.iter().all(|&n| n >= 1),
        "GPU calls per task: {on_gpu:?}"
    );
    let stats = rt.stats();
    let gpu_stats = stats.units.iter().find(|u| u.name == "cuda0").unwrap();
    assert!(gpu_stats.completed >= 3 && gpu_stats.exec_ns > 0.0);
}

#[test]
fn calibration_and_the_model_give_physical_figures() {
    let Some(dev) = gpu() else { return };
    drop(dev);
    let cal = hetsched_platform::gpu::calibrate(0, &Default::default()).unwrap();
    eprintln!("calibration of device 0: {cal:?}");
    // A launch round trip takes microseconds; a copy over PCIe or NVLink
    // moves more than 1 GB/s and has a latency under a millisecond.
    assert!(
        cal.launch_round_trip_ns > 500.0 && cal.launch_round_trip_ns < 1e6,
        "{cal:?}"
    );
    assert!(cal.launch_queued_ns > 0.0 && cal.launch_queued_ns <= cal.launch_round_trip_ns * 2.0);
    for link in [cal.copy_in, cal.copy_out] {
        assert!(
            link.latency_ns > 0 && link.latency_ns < 1_000_000,
            "{cal:?}"
        );
        assert!(link.bytes_per_s() > 1e9, "{cal:?}");
    }

    // The runtime's unit carries the calibration: placement charges it.
    let rt = runtime("cuda-model-test");
    let unit = rt.units().iter().find(|u| u.name == "cuda0").unwrap();
    assert!(
        unit.dispatch_ns > 0 && unit.copy_in.ns_per_byte > 0.0,
        "{unit:?}"
    );

    // A GPU-only task over a range of sizes: the model learns the kernel's
    // fixed cost (launch and ramp-up: above zero) and its per-byte cost,
    // and then predicts a size it has seen within 50 %.
    let hist = Task::new("hist-model")
        .cuda(|dev, d: &Arc<Vec<u8>>| kernels::histogram(dev, d))
        .sizes(|d| (d.len() as u64, 1024));
    let sizes = [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20];
    let inputs: Vec<Arc<Vec<u8>>> = sizes
        .iter()
        .map(|&n| Arc::new(bytes(n, n as u64)))
        .collect();
    for round in 0..6 {
        for d in &inputs {
            let h = rt.accelerate(&hist, Arc::clone(d), Mode::Sync).unwrap();
            assert_eq!(h.wait().unwrap(), reference::histogram(d), "round {round}");
        }
    }
    let kind = rt
        .kinds()
        .iter()
        .position(|k| k.starts_with("cuda:"))
        .unwrap();
    let kind = KindId(kind as u16);
    let model = rt.model_of("hist-model").unwrap();
    let fit = model.kind(kind).unwrap().fit();
    let (fixed, per_byte) = fit.coefficients();
    assert!(
        fixed > 0.0 && per_byte > 0.0,
        "fit {fixed} ns + {per_byte} ns/B"
    );
    let error = model.mean_error(kind).unwrap_or(f64::NAN);
    eprintln!("histogram on the GPU: {fixed:.0} ns + {per_byte:.5} ns/B, mean error {error:.3}");
    assert!(error < 0.5, "mean prediction error {error}");
    // The prediction for 16 MiB is the kernel's device time, far below a
    // CPU's (a single core counts about 1–2 GB/s).
    let ns = model.predict_ns(kind, 16 << 20).unwrap();
    assert!(ns > 0.0 && ns < 16e6, "predicted {ns} ns for 16 MiB");
}

#[test]
fn discovery_lists_the_gpu() {
    if gpu().is_none() {
        return;
    }
    let found = hetsched_platform::gpu::discover();
    let g = found
        .gpus
        .iter()
        .find(|g| g.cuda_ordinal == Some(0))
        .unwrap_or_else(|| panic!("no GPU with CUDA ordinal 0: {found:?}"));
    assert_eq!(g.class, "gpu");
    assert!(
        g.sm_count.unwrap_or(0) > 0 && g.memory_bytes > (1 << 30),
        "{g:?}"
    );
    assert!(!g.model.is_empty());
}

#[test]
fn without_cuda_tasks_fall_back_to_the_cpu() {
    let disabled = std::env::var("HETSCHED_CUDA").is_ok_and(|v| v == "0");
    if probe().is_ok_and(|n| n > 0) && !disabled {
        // A GPU is here: check the degradation in a child process that
        // has CUDA switched off, as an operator would.
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "without_cuda_tasks_fall_back_to_the_cpu",
                "--nocapture",
            ])
            .env("HETSCHED_CUDA", "0")
            .status()
            .unwrap();
        assert!(status.success(), "the CUDA-disabled run failed");
        return;
    }
    if let Err(why) = probe() {
        eprintln!("no CUDA here ({why}): checking the CPU fallback");
    }
    let rt = runtime("cuda-fallback-test");
    assert!(
        !rt.units().iter().any(|u| u.name.starts_with("cuda")),
        "a CUDA unit without CUDA: {:?}",
        rt.units()
    );
    let iv = [9_u8; 16];
    let aes = Task::new("aes-fallback")
        .cpu(move |d: &Vec<u8>| {
            let mut out = d.clone();
            reference::aes128_ctr(&KEY, &iv, &mut out);
            out
        })
        .cuda(move |dev, d: &Vec<u8>| kernels::aes128_ctr(dev, &KEY, &iv, d))
        .sizes(|d| (d.len() as u64, d.len() as u64));
    let lbm = Task::new("lbm-fallback")
        .cpu(|g: &reference::LbmGrid| reference::lbm_run(g, 3))
        .cuda(|dev, g: &reference::LbmGrid| kernels::lbm_run(dev, g, 3));
    let data = bytes(100_003, 5);
    let (out, info) = rt
        .accelerate(&aes, data.clone(), Mode::Sync)
        .unwrap()
        .wait_with_info()
        .unwrap();
    let mut want = data;
    reference::aes128_ctr(&KEY, &iv, &mut want);
    assert_eq!(out, want);
    let cpu_units: Vec<_> = rt
        .units()
        .iter()
        .filter(|u| u.class == hetsched_core::unit::UnitClass::Cpu)
        .map(|u| u.id)
        .collect();
    assert!(cpu_units.contains(&info.unit), "ran on {}", info.unit_name);
    let grid = reference::LbmGrid::shear_wave(20, 12, 1.0);
    let f = rt
        .accelerate(&lbm, grid.clone(), Mode::Sync)
        .unwrap()
        .wait()
        .unwrap();
    assert!(same_bits(&f, &reference::lbm_run(&grid, 3)));
    // A CUDA-only task has nowhere to run, and says so when first used.
    let only_gpu = Task::new("gpu-only").cuda(|dev, d: &Vec<u8>| kernels::histogram(dev, d));
    assert!(rt.accelerate(&only_gpu, vec![1, 2, 3], Mode::Sync).is_err());
}
