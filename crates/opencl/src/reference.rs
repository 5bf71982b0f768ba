//! Plain-Rust CPU versions of the tasks in [`crate::kernels`]. They define
//! the expected answers: the OpenCL kernels must match them byte for byte, so
//! the runtime can place the same task on either kind of unit.
//!
//! The AES code follows FIPS-197 step by step (S-box derived from the field
//! inverse, textbook MixColumns) rather than the kernel's shortcuts, so the
//! two implementations check each other instead of sharing a mistake.

/// Number of occurrences of each byte value. Counts wrap past `u32::MAX`,
/// as the kernel's 32-bit atomics do.
pub fn histogram(data: &[u8]) -> [u32; 256] {
    let mut counts = [0_u32; 256];
    for &byte in data {
        counts[byte as usize] = counts[byte as usize].wrapping_add(1);
    }
    counts
}

/// Multiplication by x in GF(2⁸) modulo x⁸ + x⁴ + x³ + x + 1.
const fn xtime(a: u8) -> u8 {
    (a << 1) ^ if a & 0x80 != 0 { 0x1b } else { 0 }
}

const fn gf_mul(mut a: u8, mut b: u8) -> u8 {
    let mut product = 0;
    while b != 0 {
        if b & 1 != 0 {
            product ^= a;
        }
        a = xtime(a);
        b >>= 1;
    }
    product
}

/// a²⁵⁴, which is a⁻¹ for a ≠ 0 and 0 for a = 0, exactly as the S-box wants.
const fn gf_inverse(a: u8) -> u8 {
    let mut result = 1;
    let mut base = a;
    let mut exponent = 254_u8;
    while exponent != 0 {
        if exponent & 1 != 0 {
            result = gf_mul(result, base);
        }
        base = gf_mul(base, base);
        exponent >>= 1;
    }
    result
}

const fn build_sbox() -> [u8; 256] {
    let mut sbox = [0_u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = gf_inverse(i as u8);
        sbox[i] =
            b ^ b.rotate_left(1) ^ b.rotate_left(2) ^ b.rotate_left(3) ^ b.rotate_left(4) ^ 0x63;
        i += 1;
    }
    sbox
}

/// The AES S-box (FIPS-197 §5.1.1), computed at compile time. The OpenCL
/// kernel receives this same table as a buffer.
pub const AES_SBOX: [u8; 256] = build_sbox();

/// An AES-128 key, expanded into its eleven round keys.
#[derive(Clone)]
pub struct Aes128 {
    round_keys: [u8; 176],
}

impl std::fmt::Debug for Aes128 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Key material stays out of logs.
        f.write_str("Aes128 { .. }")
    }
}

impl Aes128 {
    pub fn new(key: &[u8; 16]) -> Self {
        let mut w = [0_u8; 176];
        w[..16].copy_from_slice(key);
        let mut rcon = 1_u8;
        for word in 4..44 {
            let prev = 4 * (word - 1);
            let mut t = [w[prev], w[prev + 1], w[prev + 2], w[prev + 3]];
            if word % 4 == 0 {
                // RotWord, SubWord, then the round constant on the first byte.
                t = [
                    AES_SBOX[t[1] as usize] ^ rcon,
                    AES_SBOX[t[2] as usize],
                    AES_SBOX[t[3] as usize],
                    AES_SBOX[t[0] as usize],
                ];
                rcon = xtime(rcon);
            }
            for j in 0..4 {
                w[4 * word + j] = w[4 * (word - 4) + j] ^ t[j];
            }
        }
        Self { round_keys: w }
    }

    /// Round key r occupies bytes 16r..16r+16, in the order FIPS-197 lists
    /// the words; this is the layout the OpenCL kernel expects.
    pub fn round_keys(&self) -> &[u8; 176] {
        &self.round_keys
    }

    fn add_round_key(&self, state: &mut [u8; 16], round: usize) {
        for (s, k) in state.iter_mut().zip(&self.round_keys[16 * round..]) {
            *s ^= k;
        }
    }

    /// Encrypts one block in place. The state is column-major: byte
    /// `r + 4c` is row r, column c, as in the FIPS-197 input mapping.
    pub fn encrypt_block(&self, block: &mut [u8; 16]) {
        self.add_round_key(block, 0);
        for round in 1..=10 {
            for b in block.iter_mut() {
                *b = AES_SBOX[*b as usize];
            }
            let shifted = *block;
            for c in 0..4 {
                for r in 1..4 {
                    block[r + 4 * c] = shifted[r + 4 * ((c + r) % 4)];
                }
            }
            if round != 10 {
                for c in 0..4 {
                    let a = [
                        block[4 * c],
                        block[4 * c + 1],
                        block[4 * c + 2],
                        block[4 * c + 3],
                    ];
                    for r in 0..4 {
                        block[4 * c + r] = gf_mul(a[r], 2)
                            ^ gf_mul(a[(r + 1) % 4], 3)
                            ^ a[(r + 2) % 4]
                            ^ a[(r + 3) % 4];
                    }
                }
            }
            self.add_round_key(block, round);
        }
    }

    /// Counter mode (NIST SP 800-38A): block i is XORed with the encryption
    /// of `iv + i`, the IV read as one big-endian 128-bit counter that wraps.
    /// Encrypting and decrypting are the same operation.
    pub fn ctr_apply(&self, iv: &[u8; 16], data: &mut [u8]) {
        let base = u128::from_be_bytes(*iv);
        for (i, chunk) in data.chunks_mut(16).enumerate() {
            let mut keystream = base.wrapping_add(i as u128).to_be_bytes();
            self.encrypt_block(&mut keystream);
            for (d, k) in chunk.iter_mut().zip(keystream) {
                *d ^= k;
            }
        }
    }
}

/// AES-128-CTR of `data` under `key` and `iv`, in place.
pub fn aes128_ctr(key: &[u8; 16], iv: &[u8; 16], data: &mut [u8]) {
    Aes128::new(key).ctr_apply(iv, data);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex<const N: usize>(s: &str) -> [u8; N] {
        let bytes: Vec<u8> = (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect();
        bytes.try_into().unwrap()
    }

    #[test]
    fn histogram_counts_every_byte() {
        let data: Vec<u8> = (0..=255_u8).chain([7, 7, 255]).collect();
        let counts = histogram(&data);
        assert_eq!(counts[7], 3);
        assert_eq!(counts[255], 2);
        assert_eq!(counts[0], 1);
        assert_eq!(
            counts.iter().map(|&c| c as usize).sum::<usize>(),
            data.len()
        );
        assert_eq!(histogram(&[]), [0; 256]);
    }

    #[test]
    fn sbox_matches_published_entries() {
        // Spot values from FIPS-197 Figure 7, and bijectivity.
        assert_eq!(AES_SBOX[0x00], 0x63);
        assert_eq!(AES_SBOX[0x01], 0x7c);
        assert_eq!(AES_SBOX[0x53], 0xed);
        assert_eq!(AES_SBOX[0xff], 0x16);
        let mut seen = [false; 256];
        for &b in &AES_SBOX {
            assert!(!seen[b as usize]);
            seen[b as usize] = true;
        }
    }

    #[test]
    fn fips197_known_answers() {
        // FIPS-197 Appendix B.
        let aes = Aes128::new(&hex("2b7e151628aed2a6abf7158809cf4f3c"));
        let mut block = hex("3243f6a8885a308d313198a2e0370734");
        aes.encrypt_block(&mut block);
        assert_eq!(block, hex::<16>("3925841d02dc09fbdc118597196a0b32"));
        assert_eq!(
            aes.round_keys()[160..],
            hex::<16>("d014f9a8c9ee2589e13f0cc8b6630ca6")
        );
        // FIPS-197 Appendix C.1.
        let aes = Aes128::new(&hex("000102030405060708090a0b0c0d0e0f"));
        let mut block = hex("00112233445566778899aabbccddeeff");
        aes.encrypt_block(&mut block);
        assert_eq!(block, hex::<16>("69c4e0d86a7b0430d8cdb78070b4c55a"));
    }

    #[test]
    fn sp800_38a_ctr_known_answer() {
        // NIST SP 800-38A F.5.1 (CTR-AES128.Encrypt); the second block's
        // counter carries across a byte boundary.
        let key = hex("2b7e151628aed2a6abf7158809cf4f3c");
        let iv = hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff");
        let mut data: Vec<u8> = [
            "6bc1bee22e409f96e93d7e117393172a",
            "ae2d8a571e03ac9c9eb76fac45af8e51",
            "30c81c46a35ce411e5fbc1191a0a52ef",
            "f69f2445df4f9b17ad2b417be66c3710",
        ]
        .iter()
        .flat_map(|h| hex::<16>(h))
        .collect();
        let plain = data.clone();
        aes128_ctr(&key, &iv, &mut data);
        let expected: Vec<u8> = [
            "874d6191b620e3261bef6864990db6ce",
            "9806f66b7970fdff8617187bb9fffdff",
            "5ae4df3edbd5d35e5b4f09020db03eab",
            "1e031dda2fbe03d1792170a0f3009cee",
        ]
        .iter()
        .flat_map(|h| hex::<16>(h))
        .collect();
        assert_eq!(data, expected);
        aes128_ctr(&key, &iv, &mut data);
        assert_eq!(data, plain, "CTR is its own inverse");
    }

    #[test]
    fn ctr_handles_a_partial_last_block() {
        let key = [9; 16];
        let iv = [0xff; 16]; // the counter wraps to zero after one block
        let mut full = vec![0_u8; 48];
        aes128_ctr(&key, &iv, &mut full);
        let mut short = vec![0_u8; 37];
        aes128_ctr(&key, &iv, &mut short);
        assert_eq!(short[..], full[..37]);
        let mut zero_block = [0_u8; 16];
        Aes128::new(&key).encrypt_block(&mut zero_block);
        assert_eq!(full[16..32], zero_block, "counter ff..ff + 1 wraps to 0");
    }
}
