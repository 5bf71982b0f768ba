//! A real program on the runtime: AES-128-CTR and a byte histogram over
//! generated data, each with a CPU and an OpenCL implementation. Every
//! result is checked against the CPU reference, whichever unit ran it.
//!
//!     cargo run --release -p hetsched-runtime --features opencl --example aes_histogram -- [CALLS] [KIB]
//!
//! Without an OpenCL platform the runtime simply has no OpenCL unit and
//! every call runs on the CPU.

use hetsched_runtime::opencl::kernels::{Aes128Ctr, Histogram};
use hetsched_runtime::opencl::reference;
use hetsched_runtime::{Mode, Runtime, Task};
use std::collections::BTreeMap;
use std::sync::Arc;

const KEY: [u8; 16] = *b"hetsched example";
const IV: [u8; 16] = [7; 16];

/// `len` reproducible pseudo-random bytes from `seed`.
fn generate(len: usize, seed: u64) -> Vec<u8> {
    use rand::{RngCore, SeedableRng};
    let mut bytes = vec![0; len];
    rand_chacha::ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut bytes);
    bytes
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let calls: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(40);
    let kib: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(256);

    let rt = Runtime::connect("hetsched-example")?;
    println!(
        "units: {}",
        rt.units()
            .iter()
            .map(|u| format!("{} ({})", u.name, u.kind))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let aes = Task::new("aes128-ctr")
        .cpu(|data: &Arc<Vec<u8>>| {
            let mut out = data.to_vec();
            reference::aes128_ctr(&KEY, &IV, &mut out);
            out
        })
        .opencl(|device, data: &Arc<Vec<u8>>| {
            Ok(Aes128Ctr::new(device)?.run(device, &KEY, &IV, data)?.0)
        })
        .sizes(|data| (data.len() as u64, data.len() as u64));
    let histogram = Task::new("byte-histogram")
        .cpu(|data: &Arc<Vec<u8>>| reference::histogram(data))
        .opencl(|device, data: &Arc<Vec<u8>>| Ok(Histogram::new(device)?.run(device, data)?.0))
        .sizes(|data| (data.len() as u64, 1024));

    let inputs: Vec<Arc<Vec<u8>>> = (0..4)
        .map(|i| Arc::new(generate(kib * 1024, 0x5EED + i)))
        .collect();
    let mut aes_calls = Vec::new();
    let mut hist_calls = Vec::new();
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
    }

    let mut mix: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut wrong = 0;
    for (input, handle) in aes_calls {
        let (out, info) = handle.wait_with_info()?;
        let mut want = inputs[input].to_vec();
        reference::aes128_ctr(&KEY, &IV, &mut want);
        wrong += usize::from(out != want);
        *mix.entry(("aes128-ctr".into(), info.unit_name.to_string()))
            .or_default() += 1;
    }
    for (input, handle) in hist_calls {
        let (counts, info) = handle.wait_with_info()?;
        wrong += usize::from(counts != reference::histogram(&inputs[input]));
        *mix.entry(("byte-histogram".into(), info.unit_name.to_string()))
            .or_default() += 1;
    }
    for ((task, unit), n) in &mix {
        println!("{task:<15} {unit:<10} {n} calls");
    }
    for task in ["aes128-ctr", "byte-histogram"] {
        if let Some(model) = rt.model_of(task) {
            for (k, kind) in rt.kinds().iter().enumerate() {
                let kind_id = hetsched_core::ids::KindId(k as u16);
                use hetsched_core::task_model::PerformanceModel;
                if let Some(ns) = model.predict_ns(kind_id, (kib * 1024) as u64) {
                    println!(
                        "{task:<15} model on {kind}: {:.2} ms per {kib} KiB",
                        ns / 1e6
                    );
                }
            }
        }
    }
    if wrong > 0 {
        return Err(format!("{wrong} results differ from the CPU reference").into());
    }
    println!("all {} results equal the CPU reference", 2 * calls);
    Ok(())
}
