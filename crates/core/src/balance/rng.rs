//! A small seeded generator for annealing (xoshiro256++ seeded through
//! SplitMix64). Kept here rather than pulling `rand` into core: annealing
//! needs only uniform integers and floats, the stream must be stable across
//! dependency upgrades (a seed names a result in docs/PERFORMANCE.md), and
//! each draw costs about a nanosecond, which matters at 10⁵ draws per epoch.

pub(crate) struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        // SplitMix64 spreads any seed (0 included) over the full state.
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let out = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// Uniform in `0..n` (`n > 0`), by multiply-shift: the bias is below
    /// n / 2⁶⁴, far under anything annealing can notice.
    #[inline]
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Uniform in [0, 1).
    #[inline]
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn same_seed_same_stream_and_roughly_uniform() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut counts = [0u32; 8];
        for _ in 0..8000 {
            let x = a.below(8);
            assert_eq!(x, b.below(8));
            counts[x] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
        let u = Rng::new(1).unit();
        assert!((0.0..1.0).contains(&u));
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }
}
