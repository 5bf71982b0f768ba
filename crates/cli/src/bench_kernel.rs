//! `hetsched bench served-kernel` (feature `opencl`): what a kernel costs
//! when the daemon runs it for a client (kernel ring, data region,
//! executor thread, the unit's policy) against the same kernel called in
//! this process on the same OpenCL device. The in-process call is the
//! anchor, measured in the same run, size by size, alternating rounds so
//! that drift on a shared machine hits both alike.

use crate::bench::{percentile, start_daemon_with};
use anyhow::{Context, Result, bail};
use clap::Args;
use hetsched_opencl::OpenClDevice;
use hetsched_opencl::kernels::Histogram;
use hetsched_protocol::kernel_call::{HISTOGRAM_OUT_BYTES, Kernel};
use hetsched_protocol::{Client, ClientOptions};
use rand::{RngCore, SeedableRng};
use serde::Serialize;
use std::time::Instant;

#[derive(Args)]
pub struct ServedKernelArgs {
    /// Input sizes, bytes.
    #[arg(long, value_delimiter = ',', default_value = "4096,65536,1048576")]
    bytes: Vec<u64>,
    /// Calls per size and way (served, in process).
    #[arg(long, default_value_t = 300)]
    calls: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct SizeReport {
    bytes: u64,
    /// Median wall time per call, µs: through the daemon (push to
    /// `DeviceDone`, output read back) and in this process.
    served_p50_us: f64,
    direct_p50_us: f64,
    served_p90_us: f64,
    direct_p90_us: f64,
    /// served / direct, of the medians.
    ratio: f64,
    /// served − direct, of the medians, µs.
    overhead_us: f64,
}

pub fn served_kernel(args: ServedKernelArgs) -> Result<()> {
    if args.calls == 0 || args.bytes.is_empty() || args.bytes.contains(&0) {
        bail!("--calls and every --bytes must be at least 1");
    }
    let device = OpenClDevice::open(0).context("opening OpenCL device 0 for the anchor")?;
    let histogram = Histogram::new(&device)?;
    let (_daemon, socket) = start_daemon_with("include_cpus = false\nopencl_units = true\n")?;
    let mut client = Client::connect(ClientOptions::application("bench-served")?.socket(&socket))?;
    let unit = client
        .unit_by_name("served-opencl0")
        .context("the daemon serves no OpenCL device")?
        .id;
    let largest = *args.bytes.iter().max().expect("checked non-empty");
    let out_at = largest.div_ceil(8) * 8;
    let mut ring = client.open_kernel_ring(unit, out_at + HISTOGRAM_OUT_BYTES)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut reports = Vec::new();
    let mut out = vec![0u8; HISTOGRAM_OUT_BYTES as usize];
    for &bytes in &args.bytes {
        let mut input = vec![0u8; bytes as usize];
        rng.fill_bytes(&mut input);
        ring.region().write(0, &input)?;
        let (mut served, mut direct) = (Vec::new(), Vec::new());
        // One warm-up call each way, then alternating rounds of 10.
        for round in 0..=args.calls.div_ceil(10) {
            let n = if round == 0 { 1 } else { 10 };
            for _ in 0..n {
                let t0 = Instant::now();
                let task = client
                    .push_kernel_call(
                        &mut ring,
                        Kernel::Histogram,
                        0..bytes,
                        out_at..out_at + HISTOGRAM_OUT_BYTES,
                        0,
                    )
                    .context("the kernel ring is full")?;
                client.wait_device(task)?;
                ring.region().read(out_at, &mut out)?;
                if round > 0 {
                    served.push(t0.elapsed().as_nanos() as u64);
                }
            }
            for _ in 0..n {
                let t0 = Instant::now();
                let (counts, _) = histogram.run(&device, &input)?;
                std::hint::black_box(counts);
                if round > 0 {
                    direct.push(t0.elapsed().as_nanos() as u64);
                }
            }
        }
        served.sort_unstable();
        direct.sort_unstable();
        let (s50, d50) = (percentile(&served, 0.5), percentile(&direct, 0.5));
        reports.push(SizeReport {
            bytes,
            served_p50_us: s50,
            direct_p50_us: d50,
            served_p90_us: percentile(&served, 0.9),
            direct_p90_us: percentile(&direct, 0.9),
            ratio: s50 / d50,
            overhead_us: s50 - d50,
        });
    }
    let _ = client.goodbye();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        println!(
            "histogram on {}: served by the daemon vs called in process, {} calls each",
            device.info().name.trim(),
            args.calls
        );
        for r in &reports {
            println!(
                "{:>9} B: served p50 {:>8.1} µs (p90 {:>8.1}), in process p50 {:>8.1} µs (p90 {:>8.1}); ratio {:.2}, overhead {:+.1} µs",
                r.bytes,
                r.served_p50_us,
                r.served_p90_us,
                r.direct_p50_us,
                r.direct_p90_us,
                r.ratio,
                r.overhead_us
            );
        }
    }
    Ok(())
}
