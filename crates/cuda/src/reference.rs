//! CPU versions of the tasks in [`super::kernels`]: they define the
//! expected answers, and the kernels must equal them exactly, so the
//! runtime may place the same task on a CPU or a GPU.

use aes::cipher::{BlockEncrypt, KeyInit, generic_array::GenericArray};

/// Number of occurrences of each byte value; counts wrap at `u32::MAX`,
/// as the kernel's 32-bit atomics do.
pub fn histogram(data: &[u8]) -> [u32; 256] {
    let mut counts = [0_u32; 256];
    for &b in data {
        counts[usize::from(b)] = counts[usize::from(b)].wrapping_add(1);
    }
    counts
}

/// AES-128 in counter mode (NIST SP 800-38A) of `data`, in place: block i
/// is XORed with the encryption of `iv + i`, the IV read as one big-endian
/// 128-bit counter that wraps. Encryption and decryption are the same.
///
/// The block cipher is the `aes` crate's (AES-NI where the CPU has it), a
/// separate implementation from the CUDA kernel's, so each checks the other.
pub fn aes128_ctr(key: &[u8; 16], iv: &[u8; 16], data: &mut [u8]) {
    let cipher = aes::Aes128::new(GenericArray::from_slice(key));
    let base = u128::from_be_bytes(*iv);
    // Batches of counter blocks let the cipher pipeline AES-NI rounds.
    const BATCH: usize = 64;
    let mut keystream = [GenericArray::<u8, aes::cipher::consts::U16>::default(); BATCH];
    for (b, chunk) in data.chunks_mut(16 * BATCH).enumerate() {
        let blocks = chunk.len().div_ceil(16);
        for (i, k) in keystream[..blocks].iter_mut().enumerate() {
            let counter = base.wrapping_add((b * BATCH + i) as u128);
            k.copy_from_slice(&counter.to_be_bytes());
        }
        cipher.encrypt_blocks(&mut keystream[..blocks]);
        for (d, k) in chunk.iter_mut().zip(keystream.iter().flatten()) {
            *d ^= k;
        }
    }
}

/// Lattice velocities of D2Q9 (rest, 4 axis, 4 diagonal) and their weights.
pub const LBM_EX: [i32; 9] = [0, 1, 0, -1, 0, 1, -1, -1, 1];
pub const LBM_EY: [i32; 9] = [0, 0, 1, 0, -1, 1, 1, -1, -1];
pub const LBM_W: [f32; 9] = [
    4.0 / 9.0,
    1.0 / 9.0,
    1.0 / 9.0,
    1.0 / 9.0,
    1.0 / 9.0,
    1.0 / 36.0,
    1.0 / 36.0,
    1.0 / 36.0,
    1.0 / 36.0,
];

/// A D2Q9 lattice-Boltzmann grid: 9 populations per cell, stored
/// population-major (`f[q * nx * ny + y * nx + x]`), periodic in both
/// directions.
#[derive(Clone, Debug, PartialEq)]
pub struct LbmGrid {
    pub nx: usize,
    pub ny: usize,
    /// BGK relaxation rate, 1/τ (stable for 0 < ω < 2).
    pub omega: f32,
    pub f: Vec<f32>,
}

/// Equilibrium population `q` for density `rho` and velocity (`ux`, `uy`),
/// in the kernel's operation order.
fn equilibrium(q: usize, rho: f32, ux: f32, uy: f32, usq: f32) -> f32 {
    let cu = LBM_EX[q] as f32 * ux + LBM_EY[q] as f32 * uy;
    LBM_W[q] * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - 1.5 * usq)
}

impl LbmGrid {
    /// A fluid at rest with a decaying shear wave (`ux` varies along y)
    /// and a density bump, at equilibrium: every population is non-trivial,
    /// so a wrong streaming direction or weight changes the answer.
    pub fn shear_wave(nx: usize, ny: usize, omega: f32) -> LbmGrid {
        let cells = nx * ny;
        let mut f = vec![0.0_f32; 9 * cells];
        for y in 0..ny {
            for x in 0..nx {
                let phase = 2.0 * std::f32::consts::PI * y as f32 / ny as f32;
                let ux = 0.05 * phase.sin();
                let uy = 0.0;
                let dx = x as f32 - nx as f32 / 2.0;
                let dy = y as f32 - ny as f32 / 2.0;
                let rho = 1.0 + 0.05 * (-(dx * dx + dy * dy) / (nx * ny) as f32 * 16.0).exp();
                let usq = ux * ux + uy * uy;
                for q in 0..9 {
                    f[q * cells + y * nx + x] = equilibrium(q, rho, ux, uy, usq);
                }
            }
        }
        LbmGrid { nx, ny, omega, f }
    }

    /// Bytes of the populations.
    pub fn bytes(&self) -> usize {
        self.f.len() * 4
    }

    /// Total mass (sum of all populations), which the scheme conserves up
    /// to rounding.
    pub fn mass(&self) -> f64 {
        self.f.iter().map(|&v| f64::from(v)).sum()
    }
}

/// One stream-and-collide step from `src` into `dst` (same shape as `g`).
pub fn lbm_step(g: &LbmGrid, src: &[f32], dst: &mut [f32]) {
    let (nx, ny) = (g.nx as i64, g.ny as i64);
    let cells = g.nx * g.ny;
    for y in 0..ny {
        for x in 0..nx {
            let mut f = [0.0_f32; 9];
            for q in 0..9 {
                let sx = (x - i64::from(LBM_EX[q])).rem_euclid(nx);
                let sy = (y - i64::from(LBM_EY[q])).rem_euclid(ny);
                f[q] = src[q * cells + (sy * nx + sx) as usize];
            }
            let mut rho = 0.0_f32;
            let mut mx = 0.0_f32;
            let mut my = 0.0_f32;
            for q in 0..9 {
                rho += f[q];
                mx += LBM_EX[q] as f32 * f[q];
                my += LBM_EY[q] as f32 * f[q];
            }
            let ux = mx / rho;
            let uy = my / rho;
            let usq = ux * ux + uy * uy;
            for q in 0..9 {
                let feq = equilibrium(q, rho, ux, uy, usq);
                dst[q * cells + (y * nx + x) as usize] = f[q] + g.omega * (feq - f[q]);
            }
        }
    }
}

/// `steps` steps of `g`; returns the final populations.
pub fn lbm_run(g: &LbmGrid, steps: u32) -> Vec<f32> {
    let mut a = g.f.clone();
    let mut b = vec![0.0_f32; a.len()];
    for _ in 0..steps {
        lbm_step(g, &a, &mut b);
        std::mem::swap(&mut a, &mut b);
    }
    a
}

/// What [`crate::kernels::spin`] computes: for each of `threads`
/// work-items, `iterations` rounds of an integer mix from `seed` and its
/// index.
pub fn spin(threads: u32, iterations: u32, seed: u32) -> Vec<u32> {
    (0..threads)
        .map(|id| {
            let mut x = seed ^ id.wrapping_mul(2_654_435_761);
            for _ in 0..iterations {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                x ^= x >> 13;
            }
            x
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn ctr_matches_sp800_38a() {
        // NIST SP 800-38A F.5.1, CTR-AES128.Encrypt, all four blocks.
        let key: [u8; 16] = hex("2b7e151628aed2a6abf7158809cf4f3c").try_into().unwrap();
        let iv: [u8; 16] = hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff").try_into().unwrap();
        let mut data = hex(concat!(
            "6bc1bee22e409f96e93d7e117393172a",
            "ae2d8a571e03ac9c9eb76fac45af8e51",
            "30c81c46a35ce411e5fbc1191a0a52ef",
            "f69f2445df4f9b17ad2b417be66c3710"
        ));
        let plain = data.clone();
        aes128_ctr(&key, &iv, &mut data);
        assert_eq!(
            data,
            hex(concat!(
                "874d6191b620e3261bef6864990db6ce",
                "9806f66b7970fdff8617187bb9fffdff",
                "5ae4df3edbd5d35e5b4f09020db03eab",
                "1e031dda2fbe03d1792170a0f3009cee"
            ))
        );
        aes128_ctr(&key, &iv, &mut data);
        assert_eq!(data, plain);
    }

    #[test]
    fn ctr_batches_and_partial_blocks_agree() {
        // Longer than one batch, a partial last block, a wrapping counter.
        let key = [3_u8; 16];
        let iv = [0xff_u8; 16];
        let mut long = vec![0_u8; 16 * 70 + 5];
        aes128_ctr(&key, &iv, &mut long);
        let mut short = vec![0_u8; 16 * 3];
        aes128_ctr(&key, &iv, &mut short);
        assert_eq!(long[..48], short[..]);
        // Block 1 uses counter 0 (ff..ff + 1 wraps).
        let mut zero = vec![0_u8; 16];
        aes128_ctr(&key, &[0; 16], &mut zero);
        assert_eq!(long[16..32], zero[..]);
    }

    #[test]
    fn histogram_counts() {
        let data: Vec<u8> = (0..=255).chain([9, 9]).collect();
        let h = histogram(&data);
        assert_eq!(h[9], 3);
        assert_eq!(h.iter().sum::<u32>() as usize, data.len());
    }

    #[test]
    fn lbm_conserves_mass_and_damps_the_shear_wave() {
        let g = LbmGrid::shear_wave(32, 24, 1.2);
        let f = lbm_run(&g, 50);
        let after = LbmGrid { f, ..g.clone() };
        assert!((after.mass() - g.mass()).abs() < 1e-3 * g.mass());
        // Viscosity damps the wave: the largest x-momentum shrinks.
        let momentum = |grid: &LbmGrid| {
            let cells = grid.nx * grid.ny;
            (0..cells)
                .map(|c| {
                    (0..9)
                        .map(|q| LBM_EX[q] as f32 * grid.f[q * cells + c])
                        .sum::<f32>()
                        .abs()
                })
                .fold(0.0_f32, f32::max)
        };
        assert!(momentum(&after) < 0.9 * momentum(&g));
        assert!(after.f.iter().all(|v| v.is_finite() && *v > 0.0));
    }

    #[test]
    fn lbm_equilibrium_at_rest_is_a_fixed_point() {
        let cells = 8 * 8;
        let mut f = vec![0.0; 9 * cells];
        for q in 0..9 {
            for c in 0..cells {
                f[q * cells + c] = LBM_W[q];
            }
        }
        let g = LbmGrid {
            nx: 8,
            ny: 8,
            omega: 1.0,
            f,
        };
        // Σw is 1 only up to f32 rounding, so the state moves by an ulp at most.
        let after = lbm_run(&g, 3);
        let worst = after
            .iter()
            .zip(&g.f)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0_f32, f32::max);
        assert!(worst < 1e-6, "moved by {worst}");
    }
}
