//! The demo's applications: Rinnegan Table 3 mapped onto this machine.
//!
//! Each app has a real kernel and three implementations: the CPU cores,
//! the emulated `gpu-big` and the emulated `gpu-wimpy`. Task costs come
//! from Table 3 (as in `scenarios/rinnegan-contention.toml`, halved so a
//! short run completes many tasks):
//!
//! * on a device, the monitor holds the device's stream for the Table 3
//!   device time (plus copies of the Table 3 payload), and the result is
//!   the kernel's output on the call's input;
//! * on a CPU core, the worker computes the kernel and keeps computing it
//!   until the call has used the Table 3 CPU time of *thread CPU time*,
//!   so a CPU call really occupies a core for that long and CFS
//!   contention between the processes is real.
//!
//! The kernels run on a 64 KiB sample so their host cost stays small next
//! to the modelled device times; every result is checked against a
//! reference computed once per input at start-up.

use hetsched_platform::thread::cpu_time as thread_cpu;
use std::hint::black_box;
use std::time::Duration;

/// Bytes the kernels actually process per call.
pub const SAMPLE_BYTES: usize = 64 * 1024;
/// Distinct inputs per app (calls cycle through them).
pub const INPUTS: usize = 8;
/// Table 3 times are scaled by this to fit more calls into a short run.
const TIME_SCALE: f64 = 0.5;

/// One application of the mix.
#[derive(Clone, Copy, Debug)]
pub struct AppSpec {
    pub name: &'static str,
    /// Table 3 execution time per call, ms: gpu-big, the CPU, gpu-wimpy.
    pub big_ms: f64,
    pub cpu_ms: f64,
    pub wimpy_ms: f64,
    /// Payload per call (Table 3 sizes): what device copies cost.
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub kernel: fn(&[u8]) -> u64,
}

impl AppSpec {
    pub fn big(&self) -> Duration {
        scaled(self.big_ms)
    }
    pub fn wimpy(&self) -> Duration {
        scaled(self.wimpy_ms)
    }
    pub fn cpu(&self) -> Duration {
        scaled(self.cpu_ms)
    }
}

fn scaled(ms: f64) -> Duration {
    Duration::from_secs_f64(ms * TIME_SCALE / 1e3)
}

const KIB: u64 = 1024;

/// The mix, as in Rinnegan §4.2 (all six Table 3 workloads).
pub const APPS: [AppSpec; 6] = [
    AppSpec {
        name: "aes",
        big_ms: 0.25,
        cpu_ms: 8.0,
        wimpy_ms: 0.3636,
        bytes_in: 1024 * KIB,
        bytes_out: 1024 * KIB,
        kernel: xor_stream,
    },
    AppSpec {
        name: "lbm",
        big_ms: 0.8325,
        cpu_ms: 1.1655,
        wimpy_ms: 2.331,
        bytes_in: 4096 * KIB,
        bytes_out: 0,
        kernel: stencil,
    },
    AppSpec {
        name: "dxt",
        big_ms: 1.4,
        cpu_ms: 22.4,
        wimpy_ms: 4.978,
        bytes_in: 1024 * KIB,
        bytes_out: 128 * KIB,
        kernel: block_average,
    },
    AppSpec {
        name: "lavamd",
        big_ms: 5.0,
        cpu_ms: 135.0,
        wimpy_ms: 18.0,
        bytes_in: 512 * KIB,
        bytes_out: 512 * KIB,
        kernel: pair_forces,
    },
    AppSpec {
        name: "grep",
        big_ms: 8.25,
        cpu_ms: 82.5,
        wimpy_ms: 25.0,
        bytes_in: 4096 * KIB,
        bytes_out: 40 * KIB,
        kernel: pattern_count,
    },
    AppSpec {
        name: "histogram",
        big_ms: 20.75,
        cpu_ms: 249.0,
        wimpy_ms: 62.25,
        bytes_in: 8192 * KIB,
        bytes_out: 80 * KIB,
        kernel: histogram,
    },
];

pub fn find(name: &str) -> Option<AppSpec> {
    APPS.iter().copied().find(|a| a.name == name)
}

/// A deterministic input: xorshift bytes from `seed`.
pub fn input(app: &str, index: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64
        ^ (index as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9)
        ^ app
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(131).wrapping_add(u64::from(b)));
    (0..SAMPLE_BYTES)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// The CPU implementation: the kernel, then more rounds of it until the
/// calling thread has used `cpu` of CPU time.
pub fn run_on_cpu(kernel: fn(&[u8]) -> u64, data: &[u8], cpu: Duration) -> u64 {
    let start = thread_cpu();
    let result = kernel(data);
    while thread_cpu().saturating_sub(start) < cpu {
        black_box(kernel(black_box(data)));
    }
    result
}

// ---------------------------------------------------------------------------
// Kernels: small, real computations whose results are easy to check.
// ---------------------------------------------------------------------------

/// XOR with a keystream (xorshift), folded into a checksum.
fn xor_stream(data: &[u8]) -> u64 {
    let mut k = 0x2545_F491_4F6C_DD1Du64;
    let mut sum = 0u64;
    for chunk in data.chunks(8) {
        k ^= k << 13;
        k ^= k >> 7;
        k ^= k << 17;
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        sum = sum.rotate_left(5) ^ (u64::from_le_bytes(word) ^ k);
    }
    sum
}

/// Three-point smoothing of the bytes as a 1-D grid, three sweeps.
fn stencil(data: &[u8]) -> u64 {
    let mut grid: Vec<u32> = data.iter().map(|&b| u32::from(b)).collect();
    let mut next = grid.clone();
    for _ in 0..3 {
        for i in 1..grid.len().saturating_sub(1) {
            next[i] = (grid[i - 1] + 2 * grid[i] + grid[i + 1]) / 4;
        }
        std::mem::swap(&mut grid, &mut next);
    }
    grid.iter().map(|&v| u64::from(v)).sum()
}

/// Mean of each 16-byte block (as DXT compresses 4×4 texel blocks).
fn block_average(data: &[u8]) -> u64 {
    data.chunks(16)
        .map(|b| b.iter().map(|&v| u64::from(v)).sum::<u64>() / b.len() as u64)
        .fold(0u64, |h, m| h.wrapping_mul(31).wrapping_add(m))
}

/// Sum of inverse squared distances between nearby "particles" (bytes as
/// 1-D positions), as lavaMD sums forces within a neighbourhood.
fn pair_forces(data: &[u8]) -> u64 {
    let mut total = 0u64;
    for (i, &a) in data.iter().enumerate().step_by(64) {
        for &b in data.iter().skip(i + 1).take(32) {
            let d = u64::from(a.abs_diff(b)) + 1;
            total += 1_000_000 / (d * d);
        }
    }
    total
}

/// Occurrences of a two-byte pattern.
fn pattern_count(data: &[u8]) -> u64 {
    data.windows(2)
        .filter(|w| w[0] == 0x2a && w[1] < 0x40)
        .count() as u64
}

/// 256-bin histogram, folded into one number.
fn histogram(data: &[u8]) -> u64 {
    let mut bins = [0u64; 256];
    for &b in data {
        bins[usize::from(b)] += 1;
    }
    bins.iter().enumerate().fold(0u64, |h, (i, &c)| {
        h.wrapping_mul(1_000_003).wrapping_add(c * (i as u64 + 1))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_are_deterministic_and_input_dependent() {
        for app in APPS {
            let a = input(app.name, 0);
            let b = input(app.name, 1);
            assert_eq!((app.kernel)(&a), (app.kernel)(&a), "{}", app.name);
            assert_ne!((app.kernel)(&a), (app.kernel)(&b), "{}", app.name);
        }
    }

    #[test]
    fn cpu_implementation_uses_its_cpu_time_and_keeps_the_result() {
        let app = find("dxt").unwrap();
        let data = input(app.name, 3);
        let start = thread_cpu();
        let got = run_on_cpu(app.kernel, &data, Duration::from_millis(5));
        assert!(thread_cpu() - start >= Duration::from_millis(5));
        assert_eq!(got, (app.kernel)(&data));
    }

    #[test]
    fn gpu_big_is_every_apps_fastest_unit() {
        // "native" sends each app to its fastest unit; the demo relies on
        // that being gpu-big for all of them, as in Table 3.
        for app in APPS {
            assert!(
                app.big_ms <= app.cpu_ms && app.big_ms <= app.wimpy_ms,
                "{}",
                app.name
            );
        }
    }
}
