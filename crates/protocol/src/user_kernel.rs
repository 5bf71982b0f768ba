//! Kernels a client brings to a served unit: it registers OpenCL C source
//! (`RegisterKernel`), the daemon builds it and answers with the kernel's
//! number and signature, and the client then calls it through its kernel
//! ring like a built-in kernel.
//!
//! A call packet of a registered kernel is
//! `[task, kernel word, args_offset, args_len, global, local, 0]`:
//! the kernel's number ([`UserKernelId::word`]), where its *argument
//! block* lies in the client's data region, and the launch's work sizes
//! (one dimension; `local` 0 lets the driver choose).
//!
//! The argument block holds one entry per kernel parameter, in order, of
//! little-endian `u64` words:
//! - a buffer (`__global` / `__constant` pointer): three words, the byte
//!   offset and length of its data in the region, then [`flags`] saying
//!   whether the data is copied to the device before the launch, copied
//!   back after it, and kept on the device for the next call;
//! - `__local` memory: one word, its size in bytes;
//! - a scalar (`uint`, `int`, `ulong`, `float`): one word holding its
//!   bytes, little-endian, unused high bytes zero.
//!
//! The daemon copies the block out of the region once, then checks every
//! entry ([`UserPacket::bind`]) before anything runs: a buffer outside the
//! region is refused by the parameter's name. Everything here is outside
//! input and pure; `fuzz/fuzz_targets/user_kernel_args.rs` fuzzes it.

use crate::kernel::{Kernel, KernelCall, KernelCallError};
use hetsched_core::ids::TaskId;
use std::ops::Range;
use std::sync::Arc;

pub use crate::kernel::{UserArg, UserCall};
pub use crate::kernel_signature::{
    KernelSignature, MAX_ENTRY_BYTES, MAX_PARAMS, ParamKind, ParamSpec, USER_KERNEL_BASE,
    UserKernelId,
};

/// Largest OpenCL C source a client may register.
pub const MAX_SOURCE_BYTES: usize = 1 << 20;
/// Most `__local` memory one parameter may ask for, bytes.
pub const MAX_LOCAL_BYTES: u64 = 1 << 20;
/// Most work-items of one launch.
pub const MAX_GLOBAL: u64 = 1 << 32;

/// Checks the `entry` of a `RegisterKernel` before any unit sees it: a
/// kernel name (an identifier, for OpenCL units) or a declaration
/// `name(kind, ...)` (for CUDA units, [`crate::ptx`]). Which of the two a
/// unit takes, its backend says.
pub fn check_entry(entry: &str) -> Result<(), String> {
    if crate::ptx::is_declaration(entry) {
        return crate::ptx::parse_declaration(entry).map(|_| ());
    }
    if !crate::ptx::is_identifier(entry) || entry.len() > MAX_ENTRY_BYTES {
        return Err(format!(
            "{:?} is not a kernel name (an identifier of at most {MAX_ENTRY_BYTES} bytes)",
            entry.chars().take(MAX_ENTRY_BYTES).collect::<String>()
        ));
    }
    Ok(())
}

/// Buffer flags, the third word of a buffer's entry.
pub mod flags {
    /// Copy the region's bytes to the device before the launch.
    pub const COPY_IN: u64 = 1;
    /// Copy the device's bytes back into the region after the launch.
    pub const COPY_OUT: u64 = 2;
    /// Keep the device buffer after the call, for this client and this
    /// exact range: a later call naming the same range uses it (copying
    /// in again only with [`COPY_IN`]). A call naming it without `KEEP`
    /// uses it one last time.
    pub const KEEP: u64 = 4;
    /// Every flag defined.
    pub const ALL: u64 = COPY_IN | COPY_OUT | KEEP;
}

/// A call packet of a registered kernel, its words checked; its argument
/// block is still to be read and checked ([`UserPacket::bind`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserPacket {
    pub task: TaskId,
    pub kernel: UserKernelId,
    /// Where the argument block lies in the region.
    pub args: Range<u64>,
    pub global: u64,
    pub local: Option<u64>,
}

fn word_at(block: &[u8], index: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&block[index * 8..index * 8 + 8]);
    u64::from_le_bytes(w)
}

fn overlap(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end
}

impl UserPacket {
    /// Checks the words of a packet whose kernel word is `kernel` (at or
    /// above [`USER_KERNEL_BASE`]) against a region of `region` bytes.
    pub(crate) fn decode(
        kernel: UserKernelId,
        words: &[u64; 7],
        region: u64,
    ) -> Result<UserPacket, KernelCallError> {
        let [task, _, args_off, args_len, global, local, spare] = *words;
        let args = match args_off.checked_add(args_len) {
            Some(end) if end <= region => args_off..end,
            _ => {
                return Err(KernelCallError::OutOfRegion {
                    what: "argument block",
                    offset: args_off,
                    len: args_len,
                    region,
                });
            }
        };
        if global == 0 || global > MAX_GLOBAL {
            return Err(KernelCallError::WorkSize {
                kernel,
                reason: format!("the global work size {global} is outside 1..={MAX_GLOBAL}"),
            });
        }
        let local = match local {
            0 => None,
            l if global % l == 0 => Some(l),
            l => {
                return Err(KernelCallError::WorkSize {
                    kernel,
                    reason: format!(
                        "the global work size {global} is not a multiple of the local size {l}"
                    ),
                });
            }
        };
        if spare != 0 {
            return Err(KernelCallError::SpareWord {
                kernel,
                value: spare,
            });
        }
        Ok(UserPacket {
            task: TaskId(task),
            kernel,
            args,
            global,
            local,
        })
    }

    /// Checks `block`, the argument block as read from the region, against
    /// the kernel's `signature` and the region's `region` bytes: the
    /// checked call, or which parameter is wrong and why.
    pub fn bind(
        self,
        signature: &KernelSignature,
        block: &[u8],
        region: u64,
    ) -> Result<KernelCall, KernelCallError> {
        let kernel = self.kernel;
        let want = signature.block_bytes();
        if block.len() as u64 != want || self.args.end - self.args.start != want {
            return Err(KernelCallError::ArgBlockSize {
                kernel,
                entry: signature.entry.clone(),
                want,
                got: self.args.end - self.args.start,
            });
        }
        let bad = |index: usize, reason: String| KernelCallError::BadArg {
            kernel,
            entry: signature.entry.clone(),
            index,
            param: signature.params[index].name.clone(),
            reason,
        };
        let mut args = Vec::with_capacity(signature.params.len());
        let mut word = 0usize;
        let mut buffer_bytes = 0u64;
        for (index, param) in signature.params.iter().enumerate() {
            let arg = match param.kind {
                ParamKind::Buffer { read_only } => {
                    let (offset, len, flags) = (
                        word_at(block, word),
                        word_at(block, word + 1),
                        word_at(block, word + 2),
                    );
                    let range = match offset.checked_add(len) {
                        Some(end) if end <= region && len > 0 => offset..end,
                        _ => {
                            return Err(bad(
                                index,
                                format!(
                                    "its buffer (bytes {offset}..{offset}+{len}) lies outside the \
                                     {region}-byte data region or is empty"
                                ),
                            ));
                        }
                    };
                    if flags & !flags::ALL != 0 {
                        return Err(bad(index, format!("unknown buffer flags {flags:#x}")));
                    }
                    if read_only && flags & flags::COPY_OUT != 0 {
                        return Err(bad(
                            index,
                            format!("`{}` is read-only, so it cannot be copied out", param.ty),
                        ));
                    }
                    buffer_bytes += len;
                    UserArg::Buffer { range, flags }
                }
                ParamKind::Local => {
                    let bytes = word_at(block, word);
                    if bytes == 0 || bytes > MAX_LOCAL_BYTES {
                        return Err(bad(
                            index,
                            format!(
                                "{bytes} bytes of local memory: it takes 1..={MAX_LOCAL_BYTES}"
                            ),
                        ));
                    }
                    UserArg::Local(bytes)
                }
                ParamKind::U64 => UserArg::Scalar(word_at(block, word)),
                ParamKind::U32 | ParamKind::I32 | ParamKind::F32 => {
                    let value = word_at(block, word);
                    if value >> 32 != 0 {
                        return Err(bad(
                            index,
                            format!(
                                "{value:#x} does not fit its 4 bytes (`{}`; the high bytes must be 0)",
                                param.ty
                            ),
                        ));
                    }
                    UserArg::Scalar(value)
                }
            };
            word += param.kind.words() as usize;
            args.push(arg);
        }
        // The device holds a copy of every buffer: at most a region's worth.
        if buffer_bytes > region {
            return Err(KernelCallError::TooMuchData {
                kernel,
                bytes: buffer_bytes,
                region,
            });
        }
        // Buffers are copied to separate device buffers, so aliasing that a
        // kernel could see through one pointer is lost; a range copied out
        // must not overlap another argument's.
        for (i, a) in args.iter().enumerate() {
            let UserArg::Buffer {
                range: ra,
                flags: fa,
            } = a
            else {
                continue;
            };
            for (j, b) in args.iter().enumerate().skip(i + 1) {
                let UserArg::Buffer {
                    range: rb,
                    flags: fb,
                } = b
                else {
                    continue;
                };
                if (fa | fb) & flags::COPY_OUT != 0 && overlap(ra, rb) {
                    return Err(bad(
                        j,
                        format!(
                            "its buffer overlaps that of parameter {i} `{}`, and one is copied out",
                            signature.params[i].name
                        ),
                    ));
                }
            }
        }
        Ok(KernelCall {
            task: self.task,
            kernel: Kernel::User(kernel),
            input: self.args,
            output: 0..0,
            aux: 0..0,
            user: Some(Arc::new(UserCall {
                kernel,
                global: self.global,
                local: self.local,
                args,
            })),
        })
    }
}

/// Builds a call's argument block, for clients.
#[derive(Clone, Debug, Default)]
pub struct ArgBlock(Vec<u8>);

impl ArgBlock {
    pub fn new() -> ArgBlock {
        ArgBlock::default()
    }

    fn word(mut self, w: u64) -> ArgBlock {
        self.0.extend_from_slice(&w.to_le_bytes());
        self
    }

    /// A buffer argument: bytes `range` of the region, with [`flags`].
    pub fn buffer(self, range: Range<u64>, flags: u64) -> ArgBlock {
        self.word(range.start)
            .word(range.end.saturating_sub(range.start))
            .word(flags)
    }

    /// A `__local` argument of `bytes`.
    pub fn local(self, bytes: u64) -> ArgBlock {
        self.word(bytes)
    }

    pub fn u32(self, v: u32) -> ArgBlock {
        self.word(u64::from(v))
    }

    pub fn i32(self, v: i32) -> ArgBlock {
        self.word(u64::from(v as u32))
    }

    pub fn u64(self, v: u64) -> ArgBlock {
        self.word(v)
    }

    pub fn f32(self, v: f32) -> ArgBlock {
        self.word(u64::from(v.to_bits()))
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel_call::{Packet, decode_packet};
    use proptest::prelude::*;

    fn scale() -> KernelSignature {
        KernelSignature {
            entry: "scale".into(),
            params: vec![
                ParamSpec {
                    name: "src".into(),
                    ty: "float*".into(),
                    kind: ParamKind::Buffer { read_only: true },
                },
                ParamSpec {
                    name: "dst".into(),
                    ty: "float*".into(),
                    kind: ParamKind::Buffer { read_only: false },
                },
                ParamSpec {
                    name: "factor".into(),
                    ty: "float".into(),
                    kind: ParamKind::F32,
                },
            ],
        }
    }

    fn packet(block_at: u64, block_len: u64, global: u64) -> [u64; 7] {
        [9, UserKernelId(3).word(), block_at, block_len, global, 0, 0]
    }

    fn user(words: &[u64; 7], region: u64) -> Result<UserPacket, KernelCallError> {
        match decode_packet(words, region)? {
            Packet::User(p) => Ok(p),
            Packet::Builtin(c) => panic!("decoded as built-in: {c:?}"),
        }
    }

    #[test]
    fn a_good_call_binds_with_its_arguments() {
        let block = ArgBlock::new()
            .buffer(0..1024, flags::COPY_IN)
            .buffer(1024..2048, flags::COPY_OUT | flags::KEEP)
            .f32(2.5);
        let p = user(&packet(4096, 56, 256), 8192).unwrap();
        let call = p.bind(&scale(), block.bytes(), 8192).unwrap();
        assert_eq!(call.kernel, Kernel::User(UserKernelId(3)));
        let u = call.user.unwrap();
        assert_eq!(u.global, 256);
        assert_eq!(
            u.args,
            vec![
                UserArg::Buffer {
                    range: 0..1024,
                    flags: flags::COPY_IN
                },
                UserArg::Buffer {
                    range: 1024..2048,
                    flags: flags::COPY_OUT | flags::KEEP
                },
                UserArg::Scalar(u64::from(2.5f32.to_bits())),
            ]
        );
    }

    #[test]
    fn an_out_of_region_buffer_is_refused_by_name() {
        let block = ArgBlock::new()
            .buffer(0..1024, flags::COPY_IN)
            .buffer(8000..9024, flags::COPY_OUT)
            .f32(1.0);
        let p = user(&packet(4096, 56, 256), 8192).unwrap();
        let err = p.bind(&scale(), block.bytes(), 8192).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, KernelCallError::BadArg { index: 1, .. }),
            "{text}"
        );
        assert!(text.contains("`dst`") && text.contains("8000"), "{text}");
    }

    #[test]
    fn wrong_blocks_and_arguments_say_which() {
        let p = || user(&packet(4096, 56, 256), 8192).unwrap();
        // A block of the wrong size.
        let short = ArgBlock::new().buffer(0..8, flags::COPY_IN);
        assert!(matches!(
            user(&packet(4096, 24, 256), 8192)
                .unwrap()
                .bind(&scale(), short.bytes(), 8192),
            Err(KernelCallError::ArgBlockSize {
                want: 56,
                got: 24,
                ..
            })
        ));
        // Copying out a const buffer.
        let b = ArgBlock::new()
            .buffer(0..8, flags::COPY_OUT)
            .buffer(8..16, 0)
            .f32(1.0);
        assert!(matches!(
            p().bind(&scale(), b.bytes(), 8192),
            Err(KernelCallError::BadArg { index: 0, .. })
        ));
        // Unknown flags; a scalar wider than its type; overlapping output.
        let b = ArgBlock::new().buffer(0..8, 8).buffer(8..16, 0).f32(1.0);
        assert!(
            p().bind(&scale(), b.bytes(), 8192)
                .unwrap_err()
                .to_string()
                .contains("flags")
        );
        let b = ArgBlock::new()
            .buffer(0..8, 1)
            .buffer(8..16, 2)
            .u64(1 << 40);
        assert!(matches!(
            p().bind(&scale(), b.bytes(), 8192),
            Err(KernelCallError::BadArg { index: 2, .. })
        ));
        let b = ArgBlock::new().buffer(0..64, 1).buffer(32..96, 2).f32(1.0);
        assert!(
            p().bind(&scale(), b.bytes(), 8192)
                .unwrap_err()
                .to_string()
                .contains("overlaps")
        );
        // Reading the same range twice is fine.
        let b = ArgBlock::new().buffer(0..64, 1).buffer(0..64, 1).f32(1.0);
        assert!(p().bind(&scale(), b.bytes(), 8192).is_ok());
        // More buffer bytes than the region holds.
        let b = ArgBlock::new()
            .buffer(0..8000, 1)
            .buffer(0..8000, 0)
            .f32(1.0);
        assert!(matches!(
            p().bind(&scale(), b.bytes(), 8192),
            Err(KernelCallError::TooMuchData { .. })
        ));
    }

    #[test]
    fn bad_packet_words_are_refused() {
        assert!(matches!(
            user(&packet(8190, 56, 1), 8192),
            Err(KernelCallError::OutOfRegion {
                what: "argument block",
                ..
            })
        ));
        assert!(matches!(
            user(&packet(0, 56, 0), 8192),
            Err(KernelCallError::WorkSize { .. })
        ));
        let mut w = packet(0, 56, 100);
        w[5] = 7;
        assert!(matches!(
            user(&w, 8192),
            Err(KernelCallError::WorkSize { .. })
        ));
        w[5] = 0;
        w[6] = 1;
        assert!(matches!(
            user(&w, 8192),
            Err(KernelCallError::SpareWord { .. })
        ));
    }

    #[test]
    fn an_entry_is_a_name_or_a_declaration() {
        assert!(check_entry("scale").is_ok());
        assert!(check_entry("scale(const ptr, ptr, f32)").is_ok());
        assert!(
            check_entry("9scale")
                .unwrap_err()
                .contains("not a kernel name")
        );
        assert!(check_entry("").unwrap_err().contains("not a kernel name"));
        let e = check_entry("scale(ptr, float)").unwrap_err();
        assert!(e.contains("parameter 1") && e.contains("`float`"), "{e}");
        let long = "k".repeat(MAX_ENTRY_BYTES + 1);
        assert!(check_entry(&long).is_err());
    }

    #[test]
    fn kernel_words_round_trip() {
        for id in [0, 1, 77, u32::MAX] {
            assert_eq!(
                UserKernelId::from_word(UserKernelId(id).word()),
                Some(UserKernelId(id))
            );
        }
        assert_eq!(UserKernelId::from_word(2), None);
        assert_eq!(UserKernelId::from_word(u64::MAX), None);
    }

    proptest! {
        /// Whatever the block, a bound call's buffers lie inside the
        /// region, their total fits it, and no range copied out overlaps
        /// another.
        #[test]
        fn bound_calls_stay_inside_the_region(
            words in proptest::collection::vec(prop_oneof![
                0u64..9000, Just(u64::MAX), any::<u64>(), 0u64..8
            ], 7),
            region in 1u64..9000,
        ) {
            let block: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let p = UserPacket {
                task: TaskId(1),
                kernel: UserKernelId(0),
                args: 0..56,
                global: 1,
                local: None,
            };
            if let Ok(call) = p.bind(&scale(), &block, region) {
                let u = call.user.unwrap();
                let mut total = 0;
                for a in &u.args {
                    if let UserArg::Buffer { range, flags } = a {
                        prop_assert!(range.start < range.end && range.end <= region);
                        prop_assert_eq!(flags & !flags::ALL, 0);
                        total += range.end - range.start;
                    }
                }
                prop_assert!(total <= region);
            }
        }
    }
}
