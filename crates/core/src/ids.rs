//! Small copyable identifiers shared by every layer.
//!
//! Time in hetsched-core is always an argument: callers pass `now` in
//! nanoseconds from whatever clock they own (the daemon's monotonic clock, the
//! simulator's virtual clock), which keeps this crate free of clocks.

use serde::{Deserialize, Serialize};

/// Nanoseconds, used both for instants (since the caller's epoch) and durations.
pub type Ns = u64;

/// `ns as f64`, bit for bit, in fewer instructions on the placement path.
///
/// x86-64 without AVX-512 has no unsigned conversion: `u64 as f64` becomes
/// a five-instruction sequence, and the placer converts a latency or a
/// dispatch time several times per unit. Every duration below 2⁶³ ns (292
/// years) converts as a signed number in one instruction; the rest halve
/// first, keeping the dropped bit sticky so that doubling back rounds as
/// the direct conversion does. (Written with `ns as f64` in that arm, the
/// compiler folds the two arms back into the five-instruction sequence;
/// moved out of line, its call costs the placer more than it saves.)
#[inline(always)]
pub fn ns_as_f64(ns: Ns) -> f64 {
    if ns >> 63 == 0 {
        ns as i64 as f64
    } else {
        cold_path();
        (((ns >> 1) | (ns & 1)) as i64 as f64) * 2.0
    }
}

/// Marks the branch that calls it as rare, so that the common one falls
/// through instead of jumping over it: `std::hint::cold_path`, which is
/// younger than this crate's minimum Rust version.
#[cold]
#[inline]
fn cold_path() {}

/// Nanoseconds per millisecond, for readable conversions.
pub const NS_PER_MS: f64 = 1e6;

/// One application (a process connected to the monitor, or a simulated app).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ClientId(pub u32);

/// Index of a processing unit in its [`crate::unit::Machine`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UnitId(pub u16);

/// Index of a unit *kind* in its [`crate::unit::Machine`]: units of one kind
/// share one task model entry (two identical GPUs have one kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct KindId(pub u16);

/// One submitted task instance, unique per client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskId(pub u64);

impl UnitId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl KindId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn ns_converts_as_the_cast_does(ns in proptest::prelude::any::<u64>(), shift in 0u32..64) {
            for x in [ns, ns >> shift, ns | 1 << 63, u64::MAX - (ns >> shift)] {
                proptest::prop_assert_eq!(ns_as_f64(x).to_bits(), (x as f64).to_bits(), "{}", x);
            }
        }
    }

    #[test]
    fn ns_converts_at_the_edges() {
        for x in [
            0,
            1,
            (1 << 53) + 1,
            (1 << 63) - 1,
            1 << 63,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ] {
            assert_eq!(ns_as_f64(x).to_bits(), (x as f64).to_bits(), "{x}");
        }
    }
}
