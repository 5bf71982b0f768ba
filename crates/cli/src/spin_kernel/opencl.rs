//! The spin kernel in OpenCL C (feature `opencl`).

use super::{SpinApi, SpinCall, TimedRun, WORK_ITEMS};
use anyhow::{Context, Result};
use hetsched_opencl::{KernelArg, OpenClDevice, OpenClError};
use hetsched_runtime::Task;

/// The spin kernel in OpenCL C (also what `load --spin-us` launches).
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

impl SpinCall {
    /// Runs the call on OpenCL `device` and reads its result back.
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
}

/// OpenCL devices, timed by their profiling events.
pub(super) struct OpenClSpin;

impl SpinApi for OpenClSpin {
    fn name(&self) -> &'static str {
        "opencl"
    }

    fn task(&self, task: Task<SpinCall, Vec<u32>>) -> Task<SpinCall, Vec<u32>> {
        task.opencl(|device, call: &SpinCall| call.run(device))
    }

    fn timed_run(&self, index: usize) -> Result<(TimedRun, String)> {
        let dev =
            OpenClDevice::open(index).with_context(|| format!("opening OpenCL device {index}"))?;
        let name = dev.info().name.trim().to_string();
        let run = move |call: &SpinCall| -> Result<(Vec<u32>, Option<u64>)> {
            let before = dev.device_ns_total();
            let got = call.run(&dev)?;
            let spent = dev.device_ns_total() - before;
            Ok((got, (spent > 0).then_some(spent)))
        };
        Ok((Box::new(run), name))
    }
}
