//! A Rinnegan-style mix on the runtime: AES-128-CTR, a byte histogram and
//! a D2Q9 lattice-Boltzmann stencil, each with a CPU and a CUDA
//! implementation, submitted together so the runtime spreads them over the
//! host's cores and the GPU. Every result is checked against the CPU
//! reference, whichever unit ran it.
//!
//!     cargo run --release -p hetsched-runtime --features cuda --example cuda_mix -- [CALLS] [KIB] [GRID] [STEPS]
//!
//! Without a usable CUDA device the runtime has no CUDA unit, and the
//! example says so and runs everything on the CPU.

use hetsched_core::ids::KindId;
use hetsched_core::task_model::PerformanceModel;
use hetsched_runtime::cuda::{kernels, probe, reference};
use hetsched_runtime::{Mode, Runtime, Task};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

const KEY: [u8; 16] = *b"hetsched example";
const IV: [u8; 16] = [7; 16];

/// `len` reproducible pseudo-random bytes from `seed`.
fn generate(len: usize, seed: u64) -> Vec<u8> {
    use rand::{RngCore, SeedableRng};
    let mut bytes = vec![0; len];
    rand_chacha::ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut bytes);
    bytes
}

fn arg(args: &mut impl Iterator<Item = String>, default: usize) -> Result<usize, String> {
    args.next()
        .map(|a| a.parse().map_err(|e| format!("{a:?}: {e}")))
        .transpose()
        .map(|v| v.unwrap_or(default))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let calls = arg(&mut args, 24)?;
    let kib = arg(&mut args, 1024)?;
    let side = arg(&mut args, 128)?;
    let steps = arg(&mut args, 20)? as u32;

    if let Err(why) = probe() {
        println!("no CUDA device ({why}): running CPU-only");
    }
    let rt = Runtime::connect("hetsched-cuda-mix")?;
    println!(
        "units: {}",
        rt.units()
            .iter()
            .map(|u| format!("{} ({})", u.name, u.kind))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !rt.units().iter().any(|u| u.name.starts_with("cuda")) {
        println!("the runtime has no CUDA unit: every call runs on the CPU");
    }
    for u in rt.units().iter().filter(|u| u.name.starts_with("cuda")) {
        // The unit's calibration, which placement charges on top of the
        // learned kernel time.
        println!(
            "{}: launch round trip {:.1} us, copy in {:.1} us + {:.2} GB/s, copy out {:.1} us + {:.2} GB/s",
            u.name,
            u.dispatch_ns as f64 / 1e3,
            u.copy_in.latency_ns as f64 / 1e3,
            u.copy_in.bytes_per_s() / 1e9,
            u.copy_out.latency_ns as f64 / 1e3,
            u.copy_out.bytes_per_s() / 1e9,
        );
    }

    let aes = Task::new("aes128-ctr")
        .cpu(|data: &Arc<Vec<u8>>| {
            let mut out = data.to_vec();
            reference::aes128_ctr(&KEY, &IV, &mut out);
            out
        })
        .cuda(|dev, data: &Arc<Vec<u8>>| kernels::aes128_ctr(dev, &KEY, &IV, data))
        .sizes(|data| (data.len() as u64, data.len() as u64));
    let histogram = Task::new("byte-histogram")
        .cpu(|data: &Arc<Vec<u8>>| reference::histogram(data))
        .cuda(|dev, data: &Arc<Vec<u8>>| kernels::histogram(dev, data))
        .sizes(|data| (data.len() as u64, 1024));
    let lbm = Task::new("lbm-d2q9")
        .cpu(move |g: &Arc<reference::LbmGrid>| reference::lbm_run(g, steps))
        .cuda(move |dev, g: &Arc<reference::LbmGrid>| kernels::lbm_run(dev, g, steps))
        .sizes(|g| (g.bytes() as u64, g.bytes() as u64));

    let inputs: Vec<Arc<Vec<u8>>> = (0..4)
        .map(|i| Arc::new(generate(kib * 1024, 0x5EED + i)))
        .collect();
    let grid = Arc::new(reference::LbmGrid::shear_wave(side, side, 1.2));

    let start = Instant::now();
    let mut aes_calls = Vec::new();
    let mut hist_calls = Vec::new();
    let mut lbm_calls = Vec::new();
    for i in 0..calls {
        let data = &inputs[i % inputs.len()];
        aes_calls.push((
            i % inputs.len(),
            rt.accelerate(&aes, Arc::clone(data), Mode::Async)?,
        ));
        hist_calls.push((
            i % inputs.len(),
            rt.accelerate(&histogram, Arc::clone(data), Mode::Async)?,
        ));
        lbm_calls.push(rt.accelerate(&lbm, Arc::clone(&grid), Mode::Async)?);
    }

    let mut mix: BTreeMap<(&str, String), usize> = BTreeMap::new();
    let mut wrong = 0;
    for (input, handle) in aes_calls {
        let (out, info) = handle.wait_with_info()?;
        let mut want = inputs[input].to_vec();
        reference::aes128_ctr(&KEY, &IV, &mut want);
        wrong += usize::from(out != want);
        *mix.entry(("aes128-ctr", info.unit_name.to_string()))
            .or_default() += 1;
    }
    for (input, handle) in hist_calls {
        let (counts, info) = handle.wait_with_info()?;
        wrong += usize::from(counts != reference::histogram(&inputs[input]));
        *mix.entry(("byte-histogram", info.unit_name.to_string()))
            .or_default() += 1;
    }
    let lbm_want = reference::lbm_run(&grid, steps);
    for handle in lbm_calls {
        let (f, info) = handle.wait_with_info()?;
        // Bit for bit: the kernel does the reference's float operations in
        // the same order, none fused.
        let same = f.len() == lbm_want.len()
            && f.iter()
                .zip(&lbm_want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
        wrong += usize::from(!same);
        *mix.entry(("lbm-d2q9", info.unit_name.to_string()))
            .or_default() += 1;
    }
    let elapsed = start.elapsed();

    for ((task, unit), n) in &mix {
        println!("{task:<15} {unit:<10} {n} calls");
    }
    let sizes = [
        ("aes128-ctr", (kib * 1024) as u64),
        ("byte-histogram", (kib * 1024) as u64),
        ("lbm-d2q9", grid.bytes() as u64),
    ];
    for (task, bytes) in sizes {
        if let Some(model) = rt.model_of(task) {
            for (k, kind) in rt.kinds().iter().enumerate() {
                let kind_id = KindId(k as u16);
                if let Some(ns) = model.predict_ns(kind_id, bytes) {
                    let error = model
                        .mean_error(kind_id)
                        .map_or("-".into(), |e| format!("{:.1} %", e * 100.0));
                    println!(
                        "{task:<15} model on {kind}: {:.3} ms per call (mean prediction error {error})",
                        ns / 1e6
                    );
                }
            }
        }
    }
    println!(
        "{} calls in {:.1} ms ({:.1} calls/s)",
        3 * calls,
        elapsed.as_secs_f64() * 1e3,
        (3 * calls) as f64 / elapsed.as_secs_f64()
    );
    if wrong > 0 {
        return Err(format!("{wrong} results differ from the CPU reference").into());
    }
    println!("all {} results equal the CPU reference", 3 * calls);
    Ok(())
}
