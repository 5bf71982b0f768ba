//! `hetsched load --kernel`: keeps a unit the daemon runs real kernels on
//! busy through a kernel ring, and checks every output it gets back.
//!
//! Region layout: the input (`--bytes`, random but fixed for the run),
//! AES's key and counter block, then one output slot per call in flight,
//! so calls queued together never write over each other's results.

use anyhow::{Context, Result, bail};
use hetsched_core::ids::TaskId;
use hetsched_protocol::kernel_call::{AES_AUX_BYTES, Kernel};
use hetsched_protocol::{Client, UnitInfo};
use rand::{RngCore, SeedableRng};
use std::collections::VecDeque;
use std::time::Instant;

/// What a run got: the same counters as the other load loops, plus how
/// many outputs matched the reference.
#[derive(Default)]
pub struct KernelLoad {
    pub tasks: u64,
    pub unit_ns: u64,
    pub wait_ns: u64,
    pub waits: Vec<u64>,
    /// Per call, from its push to its result, ns.
    pub calls: Vec<u64>,
    pub verified: u64,
}

fn round8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}

/// The expected output of `kernel` on `input`, where this build can
/// compute it (AES needs the `opencl` or the `cuda` feature's reference;
/// the two agree, which the daemon's CUDA backend tests check).
pub(crate) fn reference(kernel: Kernel, input: &[u8], aux: &[u8]) -> Option<Vec<u8>> {
    match kernel {
        Kernel::Histogram => {
            let mut counts = [0u32; 256];
            for &b in input {
                counts[b as usize] += 1;
            }
            Some(counts.iter().flat_map(|c| c.to_le_bytes()).collect())
        }
        #[cfg(feature = "devices")]
        Kernel::Aes128Ctr => {
            let key: [u8; 16] = aux[..16].try_into().ok()?;
            let iv: [u8; 16] = aux[16..32].try_into().ok()?;
            let mut out = input.to_vec();
            #[cfg(feature = "opencl")]
            hetsched_opencl::reference::aes128_ctr(&key, &iv, &mut out);
            #[cfg(not(feature = "opencl"))]
            hetsched_cuda::reference::aes128_ctr(&key, &iv, &mut out);
            Some(out)
        }
        #[cfg(not(feature = "devices"))]
        Kernel::Aes128Ctr => {
            let _ = aux;
            None
        }
        Kernel::User(_) => None,
    }
}

/// Runs `kernel` on `unit` with `depth` calls in flight until `until`.
pub fn run(
    client: &mut Client,
    unit: &UnitInfo,
    kernel: Kernel,
    bytes: u64,
    depth: usize,
    until: Instant,
    think: impl Fn(),
) -> Result<KernelLoad> {
    if !unit.kernels.iter().any(|k| k == kernel.name()) {
        bail!(
            "unit {} does not run {kernel} (it runs: {})",
            unit.name,
            if unit.kernels.is_empty() {
                "no kernels".to_string()
            } else {
                unit.kernels.join(", ")
            }
        );
    }
    if bytes == 0 {
        bail!("--bytes must be at least 1");
    }
    let depth = depth.max(1);
    let out_len = kernel.out_len(bytes);
    let aux_at = round8(bytes);
    let outputs_at = aux_at + AES_AUX_BYTES;
    let slot = round8(out_len);
    let region_bytes = outputs_at + slot * depth as u64;
    let mut ring = client
        .open_kernel_ring(unit.id, region_bytes)
        .with_context(|| format!("opening a kernel ring of {region_bytes} bytes"))?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(u64::from(std::process::id()));
    let mut input = vec![0u8; bytes as usize];
    rng.fill_bytes(&mut input);
    let mut aux = [0u8; AES_AUX_BYTES as usize];
    rng.fill_bytes(&mut aux);
    ring.region().write(0, &input)?;
    ring.region().write(aux_at, &aux)?;
    let expect = reference(kernel, &input, &aux);
    let mut load = KernelLoad::default();
    let mut free: Vec<u64> = (0..depth as u64).collect();
    let mut inflight: VecDeque<(TaskId, u64, Instant)> = VecDeque::new();
    let mut got = vec![0u8; out_len as usize];
    while Instant::now() < until || !inflight.is_empty() {
        while Instant::now() < until {
            let Some(&s) = free.last() else { break };
            let out = outputs_at + s * slot;
            let aux_offset = if kernel.aux_len() > 0 { aux_at } else { 0 };
            match client.push_kernel_call(
                &mut ring,
                kernel,
                0..bytes,
                out..out + out_len,
                aux_offset,
            ) {
                Some(task) => {
                    free.pop();
                    inflight.push_back((task, s, Instant::now()));
                }
                None => break,
            }
        }
        let Some((task, s, pushed)) = inflight.pop_front() else {
            break;
        };
        let done = client.wait_device(task)?;
        load.calls.push(pushed.elapsed().as_nanos() as u64);
        ring.region().read(outputs_at + s * slot, &mut got)?;
        if let Some(want) = &expect {
            if got != *want {
                bail!(
                    "kernel call {} on {}: the output differs from the reference",
                    task.0,
                    unit.name
                );
            }
            load.verified += 1;
        }
        free.push(s);
        load.tasks += 1;
        load.unit_ns += done.ran_ns;
        load.wait_ns += done.waited_ns;
        load.waits.push(done.waited_ns);
        think();
    }
    Ok(load)
}
