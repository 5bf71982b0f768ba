//! The spin kernel in CUDA C (feature `cuda`), from
//! `hetsched_runtime::cuda::kernels`.

use super::{SpinApi, SpinCall, TimedRun, WORK_ITEMS};
use anyhow::{Context, Result};
use hetsched_runtime::Task;
use hetsched_runtime::cuda::{CudaDevice, CudaError};

impl SpinCall {
    /// Runs the call on CUDA `device` and reads its result back.
    pub fn run_cuda(&self, device: &CudaDevice) -> Result<Vec<u32>, CudaError> {
        hetsched_runtime::cuda::kernels::spin(device, WORK_ITEMS as u32, self.iterations, self.seed)
    }
}

/// CUDA devices, timed by CUDA events.
pub(super) struct CudaSpin;

impl SpinApi for CudaSpin {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn task(&self, task: Task<SpinCall, Vec<u32>>) -> Task<SpinCall, Vec<u32>> {
        task.cuda(|device, call: &SpinCall| call.run_cuda(device))
    }

    fn timed_run(&self, ordinal: usize) -> Result<(TimedRun, String)> {
        let dev =
            CudaDevice::open(ordinal).with_context(|| format!("opening CUDA device {ordinal}"))?;
        let name = dev.info().name.trim().to_string();
        let run = move |call: &SpinCall| -> Result<(Vec<u32>, Option<u64>)> {
            let _ = dev.take_times();
            let got = call.run_cuda(&dev)?;
            let t = dev.take_times()?;
            Ok((got, (t.kernels > 0).then_some(t.kernel_ns as u64)))
        };
        Ok((Box::new(run), name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cuda_reference_is_the_same_computation() {
        let call = SpinCall::new(37, 5);
        assert_eq!(
            call.expected(),
            hetsched_runtime::cuda::reference::spin(WORK_ITEMS as u32, 37, 5)
        );
    }
}
