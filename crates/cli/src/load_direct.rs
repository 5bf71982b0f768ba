//! `hetsched load --direct-opencl N`: the same tightly coupled histogram
//! loop as `--kernel histogram` on a served unit, but calling OpenCL
//! device `N` in this process, without the daemon. Several of these side
//! by side share the device the way the driver alone shares it (its own
//! first come, first served): Pegasus's `none` baseline, against which
//! the served unit's policies are measured (`scripts/pegasus-served.sh`).

#[cfg(feature = "opencl")]
use anyhow::{Context, Result, bail};
#[cfg(feature = "opencl")]
use hetsched_opencl::{OpenClDevice, kernels::Histogram};
#[cfg(feature = "opencl")]
use hetsched_protocol::kernel_call::Kernel;
#[cfg(feature = "opencl")]
use rand::{RngCore, SeedableRng};
#[cfg(feature = "opencl")]
use std::time::{Duration, Instant};

/// What a direct run got.
#[derive(Default)]
pub struct DirectLoad {
    pub tasks: u64,
    /// The loop's wall time (from the first call, after the device is
    /// open and the kernel built), ns.
    pub wall_ns: u64,
    /// Device time the calls took (copies and kernel, by profiling
    /// events), ns.
    pub device_ns: u64,
    /// Per call, from the call to its result on the host, ns.
    pub calls: Vec<u64>,
    /// Per call, the part of that spent off the device (the driver's
    /// queue behind other processes, and the host side), ns.
    pub waits: Vec<u64>,
    pub verified: u64,
}

/// Runs the histogram of `bytes` random bytes on OpenCL device `index`
/// for `seconds`, one call at a time, checking every result; `think` runs
/// after each. The time starts once the device is open and the kernel
/// built, as a served unit's kernels are built before clients come.
#[cfg(feature = "opencl")]
pub fn run(index: usize, bytes: u64, seconds: Duration, think: impl Fn()) -> Result<DirectLoad> {
    if bytes == 0 {
        bail!("--bytes must be at least 1");
    }
    let device =
        OpenClDevice::open(index).with_context(|| format!("opening OpenCL device {index}"))?;
    let histogram = Histogram::new(&device)?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(u64::from(std::process::id()));
    let mut input = vec![0u8; bytes as usize];
    rng.fill_bytes(&mut input);
    let want = crate::load_kernel::reference(Kernel::Histogram, &input, &[])
        .expect("the histogram's reference needs no feature");
    let mut load = DirectLoad::default();
    let start = Instant::now();
    let until = start + seconds;
    while Instant::now() < until {
        let t0 = Instant::now();
        let (counts, timing) = histogram.run(&device, &input)?;
        let call = t0.elapsed().as_nanos() as u64;
        let got: Vec<u8> = counts.iter().flat_map(|c| c.to_le_bytes()).collect();
        if got != want {
            bail!(
                "histogram call {} on OpenCL device {index}: the output differs from the reference",
                load.tasks
            );
        }
        let on_device = timing.total().device_ns;
        load.verified += 1;
        load.tasks += 1;
        load.device_ns += on_device;
        load.calls.push(call);
        load.waits.push(call.saturating_sub(on_device));
        think();
    }
    load.wall_ns = start.elapsed().as_nanos() as u64;
    Ok(load)
}
