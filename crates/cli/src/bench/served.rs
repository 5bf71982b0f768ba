//! What a histogram costs when the daemon runs it for a client (kernel
//! ring, data region, executor thread, the unit's policy) against the same
//! kernel called in this process on the same device: the measurement
//! behind `hetsched bench served-kernel` (OpenCL) and the `served` part of
//! `hetsched bench cuda-costs`. The in-process call is the anchor,
//! measured in the same run, size by size, alternating rounds so that
//! drift on a shared machine hits both alike.

use super::common::percentile;
use anyhow::{Context, Result, bail};
use hetsched_core::ids::TaskId;
use hetsched_protocol::kernel_call::{HISTOGRAM_OUT_BYTES, Kernel};
use hetsched_protocol::user_kernel::{ArgBlock, UserKernelId, flags};
use hetsched_protocol::{Client, ClientOptions, KernelRing};
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

/// The kernel a served call runs.
pub(crate) enum ServedKernel<'a> {
    /// The built-in histogram.
    Histogram,
    /// A kernel the benchmark registers: OpenCL C `source` whose `entry`
    /// takes (input buffer, output buffer of the same size, one `uint`)
    /// and runs one work-item per 4 bytes.
    User { source: &'a str, entry: &'a str },
}

/// What the registered kernel XORs each input byte with (its `uint`
/// argument is this byte four times).
const MIX_BYTE: u8 = 0x5a;

/// Where a call's input, output and argument block lie in the region.
struct Layout {
    out_at: u64,
    args_at: u64,
    region_bytes: u64,
}

impl ServedKernel<'_> {
    fn layout(&self, largest: u64) -> Layout {
        let out_at = largest.div_ceil(8) * 8;
        let out_len = match self {
            ServedKernel::Histogram => HISTOGRAM_OUT_BYTES,
            ServedKernel::User { .. } => out_at,
        };
        let args_at = out_at + out_len.div_ceil(8) * 8;
        Layout {
            out_at,
            args_at,
            region_bytes: args_at + 64,
        }
    }

    /// Whether `out` is what the kernel makes of `input`.
    fn is_right(&self, input: &[u8], out: &[u8]) -> bool {
        match self {
            ServedKernel::Histogram => {
                let mut counts = [0u32; 256];
                for &b in input {
                    counts[b as usize] += 1;
                }
                counts
                    .iter()
                    .flat_map(|c| c.to_le_bytes())
                    .eq(out.iter().copied())
            }
            ServedKernel::User { .. } => {
                input.len() == out.len() && input.iter().zip(out).all(|(i, o)| i ^ MIX_BYTE == *o)
            }
        }
    }

    fn out_len(&self, bytes: u64) -> u64 {
        match self {
            ServedKernel::Histogram => HISTOGRAM_OUT_BYTES,
            ServedKernel::User { .. } => bytes,
        }
    }
}

/// Pushes one call of `kernel` (`user`: its registered number) on `bytes`
/// of input at the region's start.
fn push(
    client: &mut Client,
    ring: &mut KernelRing,
    user: Option<UserKernelId>,
    layout: &Layout,
    bytes: u64,
) -> Result<TaskId> {
    let task = match user {
        None => client.push_kernel_call(
            ring,
            Kernel::Histogram,
            0..bytes,
            layout.out_at..layout.out_at + HISTOGRAM_OUT_BYTES,
            0,
        ),
        Some(kernel) => {
            let block = ArgBlock::new()
                .buffer(0..bytes, flags::COPY_IN)
                .buffer(layout.out_at..layout.out_at + bytes, flags::COPY_OUT)
                .u32(u32::from_ne_bytes([MIX_BYTE; 4]));
            ring.region().write(layout.args_at, block.bytes())?;
            let args = layout.args_at..layout.args_at + block.bytes().len() as u64;
            client.push_user_call(ring, kernel, args, bytes / 4, 0)
        }
    };
    task.context("the kernel ring is full")
}

/// Times `calls` calls of `kernel` for each size in `bytes` on `unit` of
/// the daemon at `socket`, and as many calls of `direct` (the same kernel
/// in this process) on the same random input. A registered kernel's sizes
/// must be multiples of 4.
pub(crate) fn served_vs_direct(
    socket: &Path,
    unit: &str,
    kernel: ServedKernel<'_>,
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
    if matches!(kernel, ServedKernel::User { .. }) && bytes.iter().any(|b| b % 4 != 0) {
        bail!("a registered kernel's sizes must be multiples of 4 bytes");
    }
    let user = match kernel {
        ServedKernel::Histogram => None,
        ServedKernel::User { source, entry } => {
            Some(client.register_kernel(unit, source, entry)?.kernel)
        }
    };
    let largest = *bytes.iter().max().expect("checked non-empty");
    let layout = kernel.layout(largest);
    let mut ring = client.open_kernel_ring(unit, layout.region_bytes)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut reports = Vec::new();
    for &bytes in bytes {
        let mut out = vec![0u8; kernel.out_len(bytes) as usize];
        let mut input = vec![0u8; bytes as usize];
        rng.fill_bytes(&mut input);
        ring.region().write(0, &input)?;
        let (mut served, mut by_direct) = (Vec::new(), Vec::new());
        // One warm-up call each way, then alternating rounds of 10.
        for round in 0..=calls.div_ceil(10) {
            let n = if round == 0 { 1 } else { 10 };
            for _ in 0..n {
                let t0 = Instant::now();
                let task = push(&mut client, &mut ring, user, &layout, bytes)?;
                client.wait_device(task)?;
                ring.region().read(layout.out_at, &mut out)?;
                let took = t0.elapsed().as_nanos() as u64;
                if !kernel.is_right(&input, &out) {
                    bail!("a served call of {bytes} bytes returned a wrong result");
                }
                if round > 0 {
                    served.push(took);
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
