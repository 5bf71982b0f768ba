//! `hetsched load --direct-opencl N`: the same tightly coupled histogram
//! loop as `--kernel histogram` on a served unit, but calling OpenCL
//! device `N` in this process, without the daemon. Several of these side
//! by side share the device the way the driver alone shares it (its own
//! first come, first served): Pegasus's `none` baseline, against which
//! the served unit's policies are measured (`scripts/pegasus-served.sh`).
//!
//! `--spin-us T` runs the spin kernel of about `T` µs instead, back to
//! back: an unmodified program of short kernels, on which the OpenCL
//! layer's cost per launch shows (`hetsched bench intercept`).

#[cfg(feature = "opencl")]
use crate::spin_kernel::{self, DeviceRef, SpinCall};
#[cfg(feature = "opencl")]
use anyhow::{Context, Result, bail};
#[cfg(feature = "opencl")]
use hetsched_opencl::{KernelArg, OpenClDevice, Timing, kernels::Histogram};
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
    /// Per call, the host time inside its kernel's enqueue call, ns.
    pub launches: Vec<u64>,
    pub verified: u64,
}

/// One call's outcome: whether its output matched the reference, and
/// what it took.
#[cfg(feature = "opencl")]
struct Checked {
    right: bool,
    timing: Timing,
}

#[cfg(feature = "opencl")]
impl DirectLoad {
    /// Calls `call` until `seconds` have passed, one at a time; each
    /// returns whether its output matched the reference, and its timing.
    /// The first wrong output ends the run with an error.
    fn run(
        seconds: Duration,
        think: impl Fn(),
        mut call: impl FnMut(u64) -> Result<Checked>,
    ) -> Result<DirectLoad> {
        let mut load = DirectLoad::default();
        let start = Instant::now();
        let until = start + seconds;
        while Instant::now() < until {
            let t0 = Instant::now();
            let Checked { right, timing } = call(load.tasks)?;
            let took = t0.elapsed().as_nanos() as u64;
            if !right {
                bail!("call {}: the output differs from the reference", load.tasks);
            }
            load.verified += 1;
            load.tasks += 1;
            load.device_ns += timing.device_ns;
            load.calls.push(took);
            load.waits.push(took.saturating_sub(timing.device_ns));
            load.launches.push(timing.submit_ns);
            think();
        }
        load.wall_ns = start.elapsed().as_nanos() as u64;
        Ok(load)
    }
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
    DirectLoad::run(seconds, think, |_| {
        let (counts, timing) = histogram.run(&device, &input)?;
        let got: Vec<u8> = counts.iter().flat_map(|c| c.to_le_bytes()).collect();
        Ok(Checked {
            right: got == want,
            timing: timing.total(),
        })
    })
    .with_context(|| format!("the histogram on OpenCL device {index}"))
}

/// Runs the spin kernel, calibrated to about `kernel_us` of device time,
/// on OpenCL device `index` for `seconds`, back to back, reading every
/// result back and checking it. Calls alternate between two seeds, so a
/// result left over from the call before never passes for this one.
#[cfg(feature = "opencl")]
pub fn run_spin(
    index: usize,
    kernel_us: f64,
    seconds: Duration,
    think: impl Fn(),
) -> Result<DirectLoad> {
    let (iterations, _) = spin_kernel::calibrate_iterations(DeviceRef::OpenCl(index), kernel_us)?;
    let device =
        OpenClDevice::open(index).with_context(|| format!("opening OpenCL device {index}"))?;
    let kernel = device.build(spin_kernel::opencl::SOURCE, "spin")?;
    let out = device.buffer(spin_kernel::WORK_ITEMS * 4)?;
    let calls = [SpinCall::new(iterations, 1), SpinCall::new(iterations, 2)];
    let wants = calls.map(|c| c.expected());
    let mut bytes = vec![0u8; spin_kernel::WORK_ITEMS * 4];
    DirectLoad::run(seconds, think, |n| {
        let which = (n % 2) as usize;
        let timing = device.launch(
            &kernel,
            spin_kernel::WORK_ITEMS,
            None,
            &[
                KernelArg::Buffer(&out),
                KernelArg::U32(iterations),
                KernelArg::U32(calls[which].seed),
            ],
        )?;
        device.read(&out, &mut bytes)?;
        let got = bytes
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
        Ok(Checked {
            right: got.eq(wants[which].iter().copied()),
            timing,
        })
    })
    .with_context(|| format!("the spin kernel on OpenCL device {index}"))
}
