//! Calls the daemon executes itself on a unit it serves with real kernels
//! (an OpenCL device): what the seven payload words of a call-ring packet
//! mean, and the checks a packet must pass before the daemon touches the
//! client's data region for it.
//!
//! Packet words: `[task, kernel, in_offset, in_len, out_offset, out_len,
//! aux_offset]`, offsets and lengths in bytes of the client's data region.
//! The input is read from the region before the kernel runs; the output is
//! written to it after. `aux_offset` points at a kernel's small extra
//! argument (AES: the 16-byte key, then the 16-byte counter block).
//!
//! Everything here is outside input: a packet that names an unknown
//! kernel, a range outside the region, or sizes the kernel cannot take is
//! refused with a [`KernelCallError`] that says which, and nothing runs.

use crate::kernel_signature::UserKernelId;
use crate::user_kernel::UserPacket;
use hetsched_core::ids::TaskId;
use std::ops::Range;

pub use crate::kernel::{AES_AUX_BYTES, HISTOGRAM_OUT_BYTES, Kernel, KernelCall, KernelCallError};

/// A decoded call packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    /// A built-in kernel's call, checked.
    Builtin(KernelCall),
    /// A registered kernel's call: its argument block is checked once the
    /// daemon has read it ([`UserPacket::bind`]).
    User(UserPacket),
}

/// Checks a packet's words against a data region of `region` bytes:
/// built-in kernels as [`decode`] does, registered ones as far as the
/// words go.
pub fn decode_packet(words: &[u64; 7], region: u64) -> Result<Packet, KernelCallError> {
    match UserKernelId::from_word(words[1]) {
        Some(id) => UserPacket::decode(id, words, region).map(Packet::User),
        None => decode(words, region).map(Packet::Builtin),
    }
}

fn range_in(
    what: &'static str,
    offset: u64,
    len: u64,
    region: u64,
) -> Result<Range<u64>, KernelCallError> {
    match offset.checked_add(len) {
        Some(end) if end <= region => Ok(offset..end),
        _ => Err(KernelCallError::OutOfRegion {
            what,
            offset,
            len,
            region,
        }),
    }
}

fn overlap(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

/// Checks a packet's words against a data region of `region` bytes.
pub fn decode(words: &[u64; 7], region: u64) -> Result<KernelCall, KernelCallError> {
    let [task, kernel, in_off, in_len, out_off, out_len, aux_off] = *words;
    let kernel = Kernel::from_word(kernel).ok_or(KernelCallError::UnknownKernel(kernel))?;
    if in_len == 0 {
        return Err(KernelCallError::EmptyInput { kernel });
    }
    let input = range_in("input", in_off, in_len, region)?;
    let output = range_in("output", out_off, out_len, region)?;
    let want = kernel.out_len(in_len);
    if out_len != want {
        return Err(KernelCallError::OutputSize {
            kernel,
            want,
            got: out_len,
        });
    }
    // The daemon copies the whole input out before it writes any output,
    // so the same range works in place; a shifted overlap would make the
    // result depend on nothing the client can reason about.
    if input != output && overlap(&input, &output) {
        return Err(KernelCallError::PartialOverlap { kernel });
    }
    let aux = match kernel.aux_len() {
        // Word 7 unused must be 0, so a stray value is caught, not ignored.
        0 if aux_off != 0 => return Err(KernelCallError::UnusedAux { kernel, aux_off }),
        0 => 0..0,
        n => range_in("extra argument", aux_off, n, region)?,
    };
    Ok(KernelCall {
        task: TaskId(task),
        kernel,
        input,
        output,
        aux,
        user: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_histogram_call_round_trips() {
        let call = KernelCall {
            task: TaskId(9),
            kernel: Kernel::Histogram,
            input: 64..4160,
            output: 8192..9216,
            aux: 0..0,
            user: None,
        };
        assert_eq!(decode(&call.to_words(), 16384), Ok(call));
    }

    #[test]
    fn aes_in_place_is_allowed_but_a_shifted_overlap_is_not() {
        let words = [1, 2, 0, 4096, 0, 4096, 8192];
        assert!(decode(&words, 16384).is_ok());
        let shifted = [1, 2, 0, 4096, 16, 4096, 8192];
        assert_eq!(
            decode(&shifted, 16384),
            Err(KernelCallError::PartialOverlap {
                kernel: Kernel::Aes128Ctr
            })
        );
    }

    #[test]
    fn bad_packets_say_what_is_wrong() {
        assert_eq!(
            decode(&[1, 7, 0, 8, 8, 8, 0], 64),
            Err(KernelCallError::UnknownKernel(7))
        );
        assert_eq!(
            decode(&[1, 1, 0, 0, 8, 1024, 0], 4096),
            Err(KernelCallError::EmptyInput {
                kernel: Kernel::Histogram
            })
        );
        assert_eq!(
            decode(&[1, 1, 0, 64, 3500, 1024, 0], 4096),
            Err(KernelCallError::OutOfRegion {
                what: "output",
                offset: 3500,
                len: 1024,
                region: 4096
            })
        );
        assert_eq!(
            decode(&[1, 1, 0, 64, 1024, 1000, 0], 4096),
            Err(KernelCallError::OutputSize {
                kernel: Kernel::Histogram,
                want: 1024,
                got: 1000
            })
        );
        assert!(matches!(
            decode(&[1, 2, 0, 64, 64, 64, 4090], 4096),
            Err(KernelCallError::OutOfRegion {
                what: "extra argument",
                ..
            })
        ));
        assert_eq!(
            decode(&[1, 1, 0, 64, 1024, 1024, 77], 4096),
            Err(KernelCallError::UnusedAux {
                kernel: Kernel::Histogram,
                aux_off: 77
            })
        );
        // An offset near u64::MAX does not wrap into the region.
        assert!(matches!(
            decode(&[1, 1, u64::MAX - 4, 64, 0, 1024, 0], 4096),
            Err(KernelCallError::OutOfRegion { what: "input", .. })
        ));
    }

    #[test]
    fn kernel_names_round_trip() {
        for k in Kernel::ALL {
            assert_eq!(Kernel::from_name(k.name()), Some(k));
        }
        assert_eq!(Kernel::from_name("fft"), None);
    }

    proptest! {
        /// Whatever the words, a call that passes lies wholly inside the
        /// region, with the output size its kernel writes.
        #[test]
        fn accepted_calls_stay_inside_the_region(
            words in proptest::array::uniform7(prop_oneof![
                0u64..5000, Just(u64::MAX), Just(u64::MAX - 7), any::<u64>()
            ]),
            region in 1u64..5000,
        ) {
            if let Ok(call) = decode(&words, region) {
                prop_assert!(call.input.end <= region && call.input.start < call.input.end);
                prop_assert!(call.output.end <= region);
                prop_assert!(call.aux.end <= region);
                prop_assert_eq!(
                    call.output.end - call.output.start,
                    call.kernel.out_len(call.in_len())
                );
                prop_assert_eq!(call.to_words(), words);
            }
        }
    }
}
