//! A real kernel whose length is set by an argument, for the device
//! benchmarks and tests, in OpenCL C and (feature `cuda`) CUDA C: every
//! work-item runs `iterations` rounds of an integer mix from a seed. The
//! CPU computes the same rounds, so every result can be checked.

use anyhow::{Context, Result, bail};
#[cfg(feature = "opencl")]
use hetsched_opencl::{KernelArg, OpenClDevice, OpenClError};
use hetsched_runtime::Task;
use std::time::Instant;

#[cfg(feature = "opencl")]
pub(crate) const SOURCE: &str = r"
__kernel void spin(__global uint *out, uint iterations, uint seed) {
    uint x = seed ^ ((uint)get_global_id(0) * 2654435761u);
    for (uint i = 0; i < iterations; i++) {
        x = x * 1664525u + 1013904223u;
        x ^= x >> 13;
    }
    out[get_global_id(0)] = x;
}
";

/// Work-items per call.
pub(crate) const WORK_ITEMS: usize = 1024;

/// One call of the spin kernel.
#[derive(Clone, Copy, Debug)]
pub struct SpinCall {
    pub iterations: u32,
    pub seed: u32,
}

impl SpinCall {
    pub fn new(iterations: u32, seed: u32) -> SpinCall {
        SpinCall { iterations, seed }
    }

    /// The same result one work-item and one round at a time, as a plain
    /// CPU implementation would compute it: each round passes through
    /// `black_box`, so the compiler cannot run the work-items side by side
    /// in vector registers as a device does.
    pub fn scalar(&self) -> Vec<u32> {
        self.compute(std::hint::black_box)
    }

    /// The result, computed on the CPU.
    pub fn expected(&self) -> Vec<u32> {
        self.compute(|x| x)
    }

    /// Every work-item's rounds, each round's value passed through `keep`.
    fn compute(&self, keep: impl Fn(u32) -> u32) -> Vec<u32> {
        (0..WORK_ITEMS as u32)
            .map(|id| {
                let mut x = self.seed ^ id.wrapping_mul(2_654_435_761);
                for _ in 0..self.iterations {
                    x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    x = keep(x ^ (x >> 13));
                }
                x
            })
            .collect()
    }

    /// Runs the call on OpenCL `device` and reads its result back.
    #[cfg(feature = "opencl")]
    pub fn run(&self, device: &OpenClDevice) -> Result<Vec<u32>, OpenClError> {
        let kernel = device.build(SOURCE, "spin")?;
        let out = device.buffer(WORK_ITEMS * 4)?;
        device.launch(
            &kernel,
            WORK_ITEMS,
            None,
            &[
                KernelArg::Buffer(&out),
                KernelArg::U32(self.iterations),
                KernelArg::U32(self.seed),
            ],
        )?;
        let mut bytes = vec![0u8; WORK_ITEMS * 4];
        device.read(&out, &mut bytes)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    /// Runs the call on CUDA `device` and reads its result back.
    #[cfg(feature = "cuda")]
    pub fn run_cuda(
        &self,
        device: &hetsched_runtime::cuda::CudaDevice,
    ) -> Result<Vec<u32>, hetsched_runtime::cuda::CudaError> {
        hetsched_runtime::cuda::kernels::spin(device, WORK_ITEMS as u32, self.iterations, self.seed)
    }
}

/// The device behind a unit name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceRef {
    /// `opencl<N>`: OpenCL device `N`.
    OpenCl(usize),
    /// `cuda<N>`: CUDA device `N`.
    Cuda(usize),
}

impl DeviceRef {
    /// The device behind unit name `opencl<N>` or `cuda<N>`.
    pub fn of_unit(unit: &str) -> Result<DeviceRef> {
        let index = |prefix: &str| unit.strip_prefix(prefix).and_then(|n| n.parse().ok());
        if let Some(i) = index("opencl") {
            Ok(DeviceRef::OpenCl(i))
        } else if let Some(i) = index("cuda") {
            Ok(DeviceRef::Cuda(i))
        } else {
            bail!("{unit:?} is not a device unit (opencl<N> or cuda<N>)")
        }
    }
}

/// The task the benchmarks place: the spin kernel with one
/// implementation, for `device`'s API, so calls go to its devices only.
pub fn spin_task(device: DeviceRef) -> Result<Task<SpinCall, Vec<u32>>> {
    let task = Task::new("spin")
        .sizes(|call: &SpinCall| (u64::from(call.iterations), (WORK_ITEMS * 4) as u64));
    match device {
        #[cfg(feature = "opencl")]
        DeviceRef::OpenCl(_) => Ok(task.opencl(|device, call: &SpinCall| call.run(device))),
        #[cfg(feature = "cuda")]
        DeviceRef::Cuda(_) => Ok(task.cuda(|device, call: &SpinCall| call.run_cuda(device))),
        #[allow(unreachable_patterns)]
        other => bail!("this hetsched was built without support for {other:?}"),
    }
}

/// Iterations that make one call take about `target_us` of device time on
/// `device`, measured here; and the device's name.
pub fn calibrate_iterations(device: DeviceRef, target_us: f64) -> Result<(u32, String)> {
    if !(target_us > 0.0 && target_us.is_finite()) {
        bail!("a kernel length must be a positive number of µs, not {target_us}");
    }
    let (mut timer, name) = kernel_timer(device)?;
    let mut iterations: u32 = 1000;
    for _ in 0..4 {
        let us = median_us(&mut *timer, iterations)?;
        let scaled = f64::from(iterations) * target_us / us.max(0.01);
        iterations = scaled.clamp(1.0, f64::from(u32::MAX / 2)) as u32;
    }
    Ok((iterations, name))
}

/// Runs one checked call of `iterations` and returns its device time, ns
/// (wall time where the device gives none).
type KernelTimer = Box<dyn FnMut(u32) -> Result<u64>>;

/// One call on a device: its result, and the device time it measured
/// (`None`: the device gave none).
type TimedRun = Box<dyn Fn(&SpinCall) -> Result<(Vec<u32>, Option<u64>)>>;

fn kernel_timer(device: DeviceRef) -> Result<(KernelTimer, String)> {
    let (run, name) = timed_run(device)?;
    let on = name.clone();
    let timer = move |iterations: u32| -> Result<u64> {
        let call = SpinCall::new(iterations, 7);
        let start = Instant::now();
        let (got, device_ns) = run(&call)?;
        let wall = start.elapsed().as_nanos() as u64;
        if got != call.expected() {
            bail!("the spin kernel gave a wrong result on {on}");
        }
        Ok(device_ns.unwrap_or(wall))
    };
    Ok((Box::new(timer), name))
}

fn timed_run(device: DeviceRef) -> Result<(TimedRun, String)> {
    match device {
        #[cfg(feature = "opencl")]
        DeviceRef::OpenCl(index) => {
            let dev = OpenClDevice::open(index)
                .with_context(|| format!("opening OpenCL device {index}"))?;
            let name = dev.info().name.trim().to_string();
            let run = move |call: &SpinCall| -> Result<(Vec<u32>, Option<u64>)> {
                let before = dev.device_ns_total();
                let got = call.run(&dev)?;
                let spent = dev.device_ns_total() - before;
                Ok((got, (spent > 0).then_some(spent)))
            };
            Ok((Box::new(run), name))
        }
        #[cfg(feature = "cuda")]
        DeviceRef::Cuda(ordinal) => {
            let dev = hetsched_runtime::cuda::CudaDevice::open(ordinal)
                .with_context(|| format!("opening CUDA device {ordinal}"))?;
            let name = dev.info().name.trim().to_string();
            let run = move |call: &SpinCall| -> Result<(Vec<u32>, Option<u64>)> {
                let _ = dev.take_times();
                let got = call.run_cuda(&dev)?;
                let t = dev.take_times()?;
                Ok((got, (t.kernels > 0).then_some(t.kernel_ns as u64)))
            };
            Ok((Box::new(run), name))
        }
        #[allow(unreachable_patterns)]
        other => bail!("this hetsched was built without support for {other:?}"),
    }
}

/// Median device time of 9 calls with `iterations`, µs.
fn median_us(timer: &mut dyn FnMut(u32) -> Result<u64>, iterations: u32) -> Result<f64> {
    let mut times = (0..9)
        .map(|_| timer(iterations).map(|ns| ns as f64 / 1e3))
        .collect::<Result<Vec<f64>>>()?;
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_depends_on_seed_iterations_and_work_item() {
        let a = SpinCall::new(10, 1).expected();
        assert_eq!(a.len(), WORK_ITEMS);
        assert_ne!(a, SpinCall::new(11, 1).expected());
        assert_ne!(a, SpinCall::new(10, 2).expected());
        assert_ne!(a[0], a[1]);
    }

    #[test]
    fn the_scalar_version_computes_the_same() {
        let call = SpinCall::new(25, 9);
        assert_eq!(call.scalar(), call.expected());
    }

    #[test]
    fn unit_names_map_to_devices() {
        assert_eq!(DeviceRef::of_unit("opencl3").unwrap(), DeviceRef::OpenCl(3));
        assert_eq!(DeviceRef::of_unit("cuda0").unwrap(), DeviceRef::Cuda(0));
        assert!(DeviceRef::of_unit("openclx").is_err());
        assert!(DeviceRef::of_unit("cpu").is_err());
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn the_cuda_reference_is_the_same_computation() {
        let call = SpinCall::new(37, 5);
        assert_eq!(
            call.expected(),
            hetsched_runtime::cuda::reference::spin(WORK_ITEMS as u32, 37, 5)
        );
    }
}
