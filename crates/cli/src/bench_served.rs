//! What a histogram costs when the daemon runs it for a client (kernel
//! ring, data region, executor thread, the unit's policy) against the same
//! kernel called in this process on the same device: the measurement
//! behind `hetsched bench served-kernel` (OpenCL) and the `served` part of
//! `hetsched bench cuda-costs`. The in-process call is the anchor,
//! measured in the same run, size by size, alternating rounds so that
//! drift on a shared machine hits both alike.

use crate::bench::percentile;
use anyhow::{Context, Result, bail};
use hetsched_protocol::kernel_call::{HISTOGRAM_OUT_BYTES, Kernel};
use hetsched_protocol::{Client, ClientOptions};
use rand::{RngCore, SeedableRng};
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

#[derive(Serialize)]
pub(crate) struct SizeReport {
    pub bytes: u64,
    /// Median wall time per call, µs: through the daemon (push to
    /// `DeviceDone`, output read back) and in this process.
    pub served_p50_us: f64,
    pub direct_p50_us: f64,
    pub served_p90_us: f64,
    pub direct_p90_us: f64,
    /// served / direct, of the medians.
    pub ratio: f64,
    /// served − direct, of the medians, µs.
    pub overhead_us: f64,
}

/// Times `calls` histograms of each size in `bytes` on `unit` of the
/// daemon at `socket`, and as many calls of `direct` (the same kernel in
/// this process) on the same random input.
pub(crate) fn served_vs_direct(
    socket: &Path,
    unit: &str,
    bytes: &[u64],
    calls: usize,
    mut direct: impl FnMut(&[u8]) -> Result<()>,
) -> Result<Vec<SizeReport>> {
    if calls == 0 || bytes.is_empty() || bytes.contains(&0) {
        bail!("--calls and every --bytes must be at least 1");
    }
    let mut client = Client::connect(ClientOptions::application("bench-served")?.socket(socket))?;
    let unit = client
        .unit_by_name(unit)
        .with_context(|| format!("the daemon does not serve {unit}"))?
        .id;
    let largest = *bytes.iter().max().expect("checked non-empty");
    let out_at = largest.div_ceil(8) * 8;
    let mut ring = client.open_kernel_ring(unit, out_at + HISTOGRAM_OUT_BYTES)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut reports = Vec::new();
    let mut out = vec![0u8; HISTOGRAM_OUT_BYTES as usize];
    for &bytes in bytes {
        let mut input = vec![0u8; bytes as usize];
        rng.fill_bytes(&mut input);
        ring.region().write(0, &input)?;
        let (mut served, mut by_direct) = (Vec::new(), Vec::new());
        // One warm-up call each way, then alternating rounds of 10.
        for round in 0..=calls.div_ceil(10) {
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
                direct(&input)?;
                if round > 0 {
                    by_direct.push(t0.elapsed().as_nanos() as u64);
                }
            }
        }
        served.sort_unstable();
        by_direct.sort_unstable();
        let (s50, d50) = (percentile(&served, 0.5), percentile(&by_direct, 0.5));
        reports.push(SizeReport {
            bytes,
            served_p50_us: s50,
            direct_p50_us: d50,
            served_p90_us: percentile(&served, 0.9),
            direct_p90_us: percentile(&by_direct, 0.9),
            ratio: s50 / d50,
            overhead_us: s50 - d50,
        });
    }
    let _ = client.goodbye();
    Ok(reports)
}
