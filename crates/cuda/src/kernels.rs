//! Ready-made CUDA tasks, each equal to a CPU version in
//! [`super::reference`]. `run` does the whole round trip on the device's
//! stream (upload through pinned memory, launch, download); the device's
//! [`CudaDevice::take_times`] then gives each stage's device time.
#![allow(unsafe_code)]

use super::device::{CudaDevice, CudaError};
use super::reference::LbmGrid;
use cudarc::driver::{LaunchConfig, PushKernelArg};

/// CUDA C source of `aes128_ctr`.
pub const AES128_CTR_SOURCE: &str = include_str!("cuda_kernels/aes128_ctr.cu");
/// CUDA C source of `histogram256`.
pub const HISTOGRAM_SOURCE: &str = include_str!("cuda_kernels/histogram.cu");
/// CUDA C source of `spin`.
pub const SPIN_SOURCE: &str = include_str!("cuda_kernels/spin.cu");
/// CUDA C source of `lbm_d2q9_step`.
pub const LBM_D2Q9_SOURCE: &str = include_str!("cuda_kernels/lbm_d2q9.cu");

/// A PTX module with one kernel, `scale(const float *src, float *dst,
/// float factor, unsigned n)` (`dst[i] = src[i] * factor` for `i < n`),
/// as `nvcc -ptx` writes it for `extern "C"` CUDA C: the example of a
/// kernel a client registers with a served CUDA unit, and its tests'.
pub const SCALE_PTX: &str = include_str!("cuda_kernels/scale.ptx");
/// The declaration a client registers [`SCALE_PTX`] with.
pub const SCALE_PTX_DECLARATION: &str = "scale(const ptr, ptr, f32, u32)";

/// Threads per block of the 1-D kernels: a multiple of the warp size that
/// leaves room for several resident blocks per SM.
const BLOCK: u32 = 256;

fn linear(grid: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// AES-128-CTR of `data` under `key` and `iv` on `device`; equals
/// [`super::reference::aes128_ctr`].
pub fn aes128_ctr(
    device: &CudaDevice,
    key: &[u8; 16],
    iv: &[u8; 16],
    data: &[u8],
) -> Result<Vec<u8>, CudaError> {
    let mut out = vec![0_u8; data.len()];
    if data.is_empty() {
        return Ok(out);
    }
    let func = device.function(AES128_CTR_SOURCE, "aes128_ctr")?;
    let input = device.upload(data)?;
    let mut output = device.zeros::<u8>(data.len())?;
    let len = data.len() as u64;
    let word = |b: &[u8]| u64::from_be_bytes(b.try_into().expect("8 bytes"));
    let (key_hi, key_lo) = (word(&key[..8]), word(&key[8..]));
    let (iv_hi, iv_lo) = (word(&iv[..8]), word(&iv[8..]));
    // Each block pays for its S-box and key schedule once, so blocks loop
    // over many counter blocks rather than being one-shot.
    let grid = device.grid_for(len.div_ceil(16), BLOCK, 8);
    {
        let mut args = device.stream().launch_builder(&func);
        args.arg(&input)
            .arg(&mut output)
            .arg(&len)
            .arg(&key_hi)
            .arg(&key_lo)
            .arg(&iv_hi)
            .arg(&iv_lo);
        // SAFETY: the arguments are aes128_ctr's (const u8*, u8*, u64,
        // u64 ×4) in order; both buffers hold `len` bytes and the kernel
        // touches only indices below `len`.
        unsafe { device.launch(&mut args, linear(grid)) }?;
    }
    device.download(&output, &mut out)?;
    Ok(out)
}

/// The 256-bin byte histogram of `data` on `device`; equals
/// [`super::reference::histogram`].
pub fn histogram(device: &CudaDevice, data: &[u8]) -> Result<[u32; 256], CudaError> {
    let mut counts = [0_u32; 256];
    if data.is_empty() {
        return Ok(counts);
    }
    let func = device.function(HISTOGRAM_SOURCE, "histogram256")?;
    // The kernel reads whole 32-bit words: a fresh allocation is aligned
    // far beyond 4 bytes, and words stop at len / 4.
    let input = device.upload(data)?;
    let mut dev_counts = device.zeros::<u32>(256)?;
    let len = data.len() as u64;
    // Few blocks per SM: each block ends with 256 global atomics.
    let grid = device.grid_for(len.div_ceil(4 * 16), BLOCK, 4);
    {
        let mut args = device.stream().launch_builder(&func);
        args.arg(&input).arg(&len).arg(&mut dev_counts);
        // SAFETY: histogram256 takes (const u8*, u64, u32*); the input
        // holds `len` bytes, the counts 256 u32.
        unsafe { device.launch(&mut args, linear(grid)) }?;
    }
    device.download(&dev_counts, &mut counts)?;
    Ok(counts)
}

/// `threads` work-items of `iterations` rounds of an integer mix each
/// (a kernel whose length the caller sets); equals
/// [`super::reference::spin`].
pub fn spin(
    device: &CudaDevice,
    threads: u32,
    iterations: u32,
    seed: u32,
) -> Result<Vec<u32>, CudaError> {
    let mut out = vec![0_u32; threads as usize];
    if threads == 0 {
        return Ok(out);
    }
    let func = device.function(SPIN_SOURCE, "spin")?;
    let mut dev_out = device.zeros::<u32>(threads as usize)?;
    {
        let mut args = device.stream().launch_builder(&func);
        args.arg(&mut dev_out)
            .arg(&threads)
            .arg(&iterations)
            .arg(&seed);
        // SAFETY: spin takes (u32*, u32, u32, u32); the output holds
        // `threads` u32 and the kernel writes only indices below it.
        unsafe { device.launch(&mut args, linear(threads.div_ceil(BLOCK))) }?;
    }
    device.download(&dev_out, &mut out)?;
    Ok(out)
}

/// `steps` D2Q9 steps of `grid` on `device`, one launch per step with the
/// populations ping-ponging between two device buffers; equals
/// [`super::reference::lbm_run`] bit for bit.
pub fn lbm_run(device: &CudaDevice, grid: &LbmGrid, steps: u32) -> Result<Vec<f32>, CudaError> {
    let cells = grid.nx * grid.ny;
    if grid.f.len() != 9 * cells || cells == 0 {
        return Err(CudaError::BadArgs {
            kernel: "lbm_d2q9_step",
            reason: format!(
                "{} populations for a {}×{} grid (want 9 per cell)",
                grid.f.len(),
                grid.nx,
                grid.ny
            ),
        });
    }
    let (nx, ny) = match (i32::try_from(grid.nx), i32::try_from(grid.ny)) {
        (Ok(a), Ok(b)) => (a, b),
        _ => {
            return Err(CudaError::BadArgs {
                kernel: "lbm_d2q9_step",
                reason: "grid sides must fit in i32".into(),
            });
        }
    };
    let func = device.function(LBM_D2Q9_SOURCE, "lbm_d2q9_step")?;
    let mut a = device.upload(&grid.f)?;
    let mut b = device.zeros::<f32>(grid.f.len())?;
    // 32 × 8 threads: a warp spans 32 consecutive x, so loads of each
    // population row are coalesced.
    let cfg = LaunchConfig {
        grid_dim: ((nx as u32).div_ceil(32), (ny as u32).div_ceil(8), 1),
        block_dim: (32, 8, 1),
        shared_mem_bytes: 0,
    };
    for _ in 0..steps {
        {
            let mut args = device.stream().launch_builder(&func);
            args.arg(&a).arg(&mut b).arg(&nx).arg(&ny).arg(&grid.omega);
            // SAFETY: lbm_d2q9_step takes (const f32*, f32*, i32, i32,
            // f32); both buffers hold 9·nx·ny floats and threads outside
            // nx × ny return before touching memory.
            unsafe { device.launch(&mut args, cfg) }?;
        }
        std::mem::swap(&mut a, &mut b);
    }
    let mut out = vec![0.0_f32; grid.f.len()];
    device.download(&a, &mut out)?;
    Ok(out)
}
