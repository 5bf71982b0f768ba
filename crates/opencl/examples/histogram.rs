//! Byte histogram of a generated buffer on the CPU (plain Rust) and on the
//! first OpenCL device, checked equal, with each stage's time.
//!
//!     cargo run --release -p hetsched-opencl --example histogram -- [MiB]

use std::process::ExitCode;
use std::time::Instant;

use hetsched_opencl::kernels::Histogram;
use hetsched_opencl::{OpenClDevice, Timing, reference};
use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn show(stage: &str, t: Timing) {
    println!(
        "  {stage:<9} {:>9.3} ms wall  {:>9.3} ms on device",
        ms(t.wall_ns),
        ms(t.device_ns)
    );
}

fn main() -> ExitCode {
    let mib: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 64,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: histogram [MiB > 0]");
            return ExitCode::FAILURE;
        }
    };
    let mut data = vec![0_u8; mib << 20];
    StdRng::seed_from_u64(42).fill_bytes(&mut data);
    // A skewed tail, so the counts are not all alike.
    let tail = data.len() / 8;
    data[..tail].fill(b'e');

    let start = Instant::now();
    let cpu = reference::histogram(&data);
    let cpu_ns = start.elapsed().as_nanos() as u64;
    println!(
        "{mib} MiB, CPU reference (one thread): {:.3} ms",
        ms(cpu_ns)
    );

    let device = match OpenClDevice::first() {
        Ok(device) => device,
        Err(e) if e.is_unavailable() => {
            println!("skipping OpenCL: {e}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("OpenCL device: {}", device.info());
    let start = Instant::now();
    let histogram = match Histogram::new(&device) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "  build     {:>9.3} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    // The first launch pays for PoCL's per-work-group-size compile; time the
    // second, as a long-running executor would see it.
    let result = histogram
        .run(&device, &data)
        .and_then(|_| histogram.run(&device, &data));
    let (counts, timing) = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    show("copy in", timing.copy_in);
    show("kernel", timing.exec);
    show("copy out", timing.copy_out);
    show("total", timing.total());
    if counts != cpu {
        eprintln!("MISMATCH between the OpenCL and CPU histograms");
        return ExitCode::FAILURE;
    }
    println!(
        "results equal; OpenCL kernel is {:.2}x the CPU reference, {:.2}x with copies",
        cpu_ns as f64 / timing.exec.wall_ns.max(1) as f64,
        cpu_ns as f64 / timing.total().wall_ns.max(1) as f64
    );
    ExitCode::SUCCESS
}
