//! `hetsched load --direct-cuda N`: the spin kernel on CUDA device `N`
//! through the driver API in this process, without the daemon: an
//! unmodified CUDA program, for the CUDA interposer
//! (`scripts/gpu-check.sh` runs two under `hetsched run`).

use crate::load_direct::DirectLoad;
use anyhow::{Context, Result, bail};
use std::time::{Duration, Instant};

/// Runs the spin kernel of `iterations` on CUDA device `ordinal` for
/// `seconds`, one call at a time, each result checked against the CPU
/// reference; `think` runs after each. No daemon: an unmodified CUDA
/// program (the driver API through cudarc), for the CUDA interposer.
pub fn run(
    ordinal: usize,
    iterations: u32,
    seconds: Duration,
    think: impl Fn(),
) -> Result<DirectLoad> {
    use crate::spin_kernel::SpinCall;
    let device = hetsched_runtime::cuda::CudaDevice::open(ordinal)
        .with_context(|| format!("opening CUDA device {ordinal}"))?;
    let mut load = DirectLoad::default();
    let start = Instant::now();
    let until = start + seconds;
    let mut seed = std::process::id();
    while Instant::now() < until {
        let call = SpinCall::new(iterations.max(1), seed);
        seed = seed.wrapping_add(1);
        let t0 = Instant::now();
        let got = call.run_cuda(&device)?;
        let took = t0.elapsed().as_nanos() as u64;
        if got != call.expected() {
            bail!(
                "spin call {} on CUDA device {ordinal}: the output differs from the reference",
                load.tasks
            );
        }
        load.verified += 1;
        load.tasks += 1;
        // No device timer here: the call's wall time stands for its
        // device time, and its wait is not known.
        load.device_ns += took;
        load.calls.push(took);
        load.waits.push(0);
        think();
    }
    load.wall_ns = start.elapsed().as_nanos() as u64;
    Ok(load)
}
