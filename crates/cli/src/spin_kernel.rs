//! A real kernel whose length is set by an argument, for the device
//! benchmarks and tests, in OpenCL C and (feature `cuda`) CUDA C: every
//! work-item runs `iterations` rounds of an integer mix from a seed. The
//! CPU computes the same rounds, so every result can be checked.

use anyhow::{Result, bail};
use hetsched_runtime::Task;
use std::time::Instant;

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
    /// The name of its API, as unit names start with it.
    fn api(self) -> &'static str {
        match self {
            DeviceRef::OpenCl(_) => "opencl",
            DeviceRef::Cuda(_) => "cuda",
        }
    }

    /// Its index in its API's own numbering.
    fn index(self) -> usize {
        match self {
            DeviceRef::OpenCl(i) | DeviceRef::Cuda(i) => i,
        }
    }

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

/// A device API the spin kernel runs on.
trait SpinApi: Sync {
    /// Its name ([`DeviceRef::api`]).
    fn name(&self) -> &'static str;
    /// `task` with this API's implementation of the spin kernel.
    fn task(&self, task: Task<SpinCall, Vec<u32>>) -> Task<SpinCall, Vec<u32>>;
    /// One call on device `index`, timed by the device where it can;
    /// and the device's name.
    fn timed_run(&self, index: usize) -> Result<(TimedRun, String)>;
}

/// The APIs of this build: one line each.
const APIS: &[&dyn SpinApi] = &[
    #[cfg(feature = "opencl")]
    &opencl::OpenClSpin,
    #[cfg(feature = "cuda")]
    &cuda::CudaSpin,
];

// Paths from this file's folder, so that the tests that include this
// file by its path find them too.
#[cfg(feature = "opencl")]
#[path = "spin_kernel/opencl.rs"]
pub(crate) mod opencl;

#[cfg(feature = "cuda")]
#[path = "spin_kernel/cuda.rs"]
mod cuda;

/// The API of `device`, if this build has it.
fn api_of(device: DeviceRef) -> Result<&'static dyn SpinApi> {
    APIS.iter()
        .copied()
        .find(|a| a.name() == device.api())
        .ok_or_else(|| anyhow::anyhow!("this hetsched was built without support for {device:?}"))
}

/// The task the benchmarks place: the spin kernel with one
/// implementation, for `device`'s API, so calls go to its devices only.
pub fn spin_task(device: DeviceRef) -> Result<Task<SpinCall, Vec<u32>>> {
    let task = Task::new("spin")
        .sizes(|call: &SpinCall| (u64::from(call.iterations), (WORK_ITEMS * 4) as u64));
    Ok(api_of(device)?.task(task))
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
pub(crate) type TimedRun = Box<dyn Fn(&SpinCall) -> Result<(Vec<u32>, Option<u64>)>>;

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
    api_of(device)?.timed_run(device.index())
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
}
