//! Ready-made OpenCL tasks, each matching a CPU version in
//! [`crate::reference`]. `run` does the whole round trip (copy in, launch,
//! copy out) and reports each stage's time; `launch` works on buffers already
//! on the device, for callers that manage copies themselves.

use crate::device::{DeviceBuffer, Kernel, KernelArg, OpenClDevice, Timing};
use crate::error::{OpenClError, Result};
use crate::reference::{AES_SBOX, Aes128};

/// OpenCL C source of `histogram256`.
pub const HISTOGRAM_SOURCE: &str = include_str!("../kernels/histogram.cl");
/// OpenCL C source of `aes128_ctr`.
pub const AES128_CTR_SOURCE: &str = include_str!("../kernels/aes128_ctr.cl");

/// Bytes of the histogram's output buffer: 256 `u32` counts.
pub const HISTOGRAM_COUNTS_BYTES: usize = 256 * 4;
/// Bytes of an expanded AES-128 key.
pub const AES128_ROUND_KEYS_BYTES: usize = 176;

/// Time spent in each stage of one offloaded task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTiming {
    pub copy_in: Timing,
    pub exec: Timing,
    pub copy_out: Timing,
}

impl StageTiming {
    pub fn total(&self) -> Timing {
        self.copy_in + self.exec + self.copy_out
    }
}

fn bad_args(kernel: &Kernel, reason: String) -> OpenClError {
    OpenClError::BadArgs {
        kernel: kernel.name().to_owned(),
        reason,
    }
}

/// The 256-bin byte histogram; equals [`crate::reference::histogram`].
#[derive(Debug)]
pub struct Histogram {
    kernel: Kernel,
}

impl Histogram {
    /// Bytes each work-item should count at least; fewer items than this
    /// would spend more on group set-up and the final atomics than on counting.
    const BYTES_PER_ITEM: usize = 64;
    /// Work-groups per compute unit at most: enough to hide memory latency on
    /// GPUs, while each extra group costs 256 global atomics at the end.
    const GROUPS_PER_UNIT: usize = 8;

    pub fn new(device: &OpenClDevice) -> Result<Self> {
        Ok(Self {
            kernel: device.build(HISTOGRAM_SOURCE, "histogram256")?,
        })
    }

    /// Counts the bytes of `data` on the device.
    pub fn run(&self, device: &OpenClDevice, data: &[u8]) -> Result<([u32; 256], StageTiming)> {
        let (input, mut copy_in) = device.buffer_from(data)?;
        let (counts, zero) = device.buffer_from(&[0; HISTOGRAM_COUNTS_BYTES])?;
        copy_in = copy_in + zero;
        let exec = self.launch(device, &input, data.len(), &counts)?;
        let mut raw = [0_u8; HISTOGRAM_COUNTS_BYTES];
        let copy_out = device.read(&counts, &mut raw)?;
        let mut result = [0_u32; 256];
        for (count, bytes) in result.iter_mut().zip(raw.chunks_exact(4)) {
            *count = u32::from_ne_bytes(bytes.try_into().expect("chunks of 4"));
        }
        Ok((
            result,
            StageTiming {
                copy_in,
                exec,
                copy_out,
            },
        ))
    }

    /// Adds the histogram of the first `len` bytes of `input` to `counts`
    /// (256 native-endian `u32`; zero it first for a fresh count).
    pub fn launch(
        &self,
        device: &OpenClDevice,
        input: &DeviceBuffer,
        len: usize,
        counts: &DeviceBuffer,
    ) -> Result<Timing> {
        if len > input.len() {
            return Err(bad_args(
                &self.kernel,
                format!(
                    "{len} bytes asked for but the input buffer holds {}",
                    input.len()
                ),
            ));
        }
        if counts.len() != HISTOGRAM_COUNTS_BYTES {
            return Err(bad_args(
                &self.kernel,
                format!(
                    "the counts buffer must hold {HISTOGRAM_COUNTS_BYTES} bytes, not {}",
                    counts.len()
                ),
            ));
        }
        let local = self.kernel.max_work_group_size().clamp(1, 256);
        let max_groups = (device.info().compute_units as usize * Self::GROUPS_PER_UNIT).max(1);
        let groups = len
            .div_ceil(Self::BYTES_PER_ITEM * local)
            .clamp(1, max_groups);
        device.launch(
            &self.kernel,
            groups * local,
            Some(local),
            &[
                KernelArg::Buffer(input),
                KernelArg::U64(len as u64),
                KernelArg::Buffer(counts),
            ],
        )
    }
}

/// AES-128 in counter mode; equals [`crate::reference::aes128_ctr`].
#[derive(Debug)]
pub struct Aes128Ctr {
    kernel: Kernel,
    sbox: DeviceBuffer,
}

impl Aes128Ctr {
    pub fn new(device: &OpenClDevice) -> Result<Self> {
        let kernel = device.build(AES128_CTR_SOURCE, "aes128_ctr")?;
        let (sbox, _) = device.buffer_from(&AES_SBOX)?;
        Ok(Self { kernel, sbox })
    }

    /// Encrypts (or decrypts: it is the same) `data` on the device.
    pub fn run(
        &self,
        device: &OpenClDevice,
        key: &[u8; 16],
        iv: &[u8; 16],
        data: &[u8],
    ) -> Result<(Vec<u8>, StageTiming)> {
        let (round_keys, keys_in) = device.buffer_from(Aes128::new(key).round_keys())?;
        let (input, data_in) = device.buffer_from(data)?;
        let output = device.buffer(data.len())?;
        let exec = self.launch(device, &round_keys, iv, &input, &output, data.len())?;
        let mut result = vec![0_u8; data.len()];
        let copy_out = device.read(&output, &mut result)?;
        Ok((
            result,
            StageTiming {
                copy_in: keys_in + data_in,
                exec,
                copy_out,
            },
        ))
    }

    /// Writes AES-128-CTR of the first `len` bytes of `input` to `output`.
    /// `round_keys` holds [`Aes128::round_keys`]; `input` and `output` may be
    /// the same buffer.
    pub fn launch(
        &self,
        device: &OpenClDevice,
        round_keys: &DeviceBuffer,
        iv: &[u8; 16],
        input: &DeviceBuffer,
        output: &DeviceBuffer,
        len: usize,
    ) -> Result<Timing> {
        if round_keys.len() != AES128_ROUND_KEYS_BYTES {
            return Err(bad_args(
                &self.kernel,
                format!(
                    "the round-key buffer must hold {AES128_ROUND_KEYS_BYTES} bytes, not {}",
                    round_keys.len()
                ),
            ));
        }
        if len > input.len() || len > output.len() {
            return Err(bad_args(
                &self.kernel,
                format!(
                    "{len} bytes asked for but the buffers hold {} (input) and {} (output)",
                    input.len(),
                    output.len()
                ),
            ));
        }
        let (hi, lo) = iv.split_at(8);
        let iv_hi = u64::from_be_bytes(hi.try_into().expect("8 bytes"));
        let iv_lo = u64::from_be_bytes(lo.try_into().expect("8 bytes"));
        // Staging the tables costs each group 432 local loads: groups of up
        // to 128 items spread that thinly without starving small inputs.
        let local = self.kernel.max_work_group_size().clamp(1, 128);
        let blocks = len.div_ceil(16).max(1);
        device.launch(
            &self.kernel,
            blocks.div_ceil(local) * local,
            Some(local),
            &[
                KernelArg::Buffer(input),
                KernelArg::Buffer(output),
                KernelArg::U64(len as u64),
                KernelArg::U64(iv_hi),
                KernelArg::U64(iv_lo),
                KernelArg::Buffer(&self.sbox),
                KernelArg::Buffer(round_keys),
            ],
        )
    }
}
