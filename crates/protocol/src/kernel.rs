//! The kernels a served unit runs and a checked call of one: the types
//! that both packet checkers ([`crate::kernel_call`] for built-in kernels,
//! [`crate::user_kernel`] for registered ones) produce, and why they
//! refuse a packet. The public paths are in those two modules.

use crate::kernel_signature::UserKernelId;
use hetsched_core::ids::TaskId;
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::sync::Arc;

/// Bytes of the histogram's output: 256 `u32` counts, little-endian.
pub const HISTOGRAM_OUT_BYTES: u64 = 1024;
/// Bytes of AES-CTR's extra argument: key, then initial counter block.
pub const AES_AUX_BYTES: u64 = 32;

/// The kernels a served unit runs: built-in ones, by their number in a
/// packet, and those clients registered ([`crate::user_kernel`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    /// 256-bin byte histogram of the input.
    Histogram,
    /// AES-128 in counter mode: output = input XOR keystream.
    Aes128Ctr,
    /// A kernel a client registered with the unit.
    User(UserKernelId),
}

impl Kernel {
    /// The built-in kernels.
    pub const ALL: [Kernel; 2] = [Kernel::Histogram, Kernel::Aes128Ctr];

    /// The name clients and `hetsched units` use (`"user kernel"` for
    /// every registered one; `Display` gives its number).
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Histogram => "histogram",
            Kernel::Aes128Ctr => "aes128-ctr",
            Kernel::User(_) => "user kernel",
        }
    }

    /// A built-in kernel by name.
    pub fn from_name(name: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Its word in a call packet.
    pub fn word(self) -> u64 {
        match self {
            Kernel::Histogram => 1,
            Kernel::Aes128Ctr => 2,
            Kernel::User(id) => id.word(),
        }
    }

    /// A built-in kernel by its word in a packet.
    pub(crate) fn from_word(w: u64) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.word() == w)
    }

    /// Output bytes the kernel writes for `in_len` bytes of input (0 for a
    /// registered kernel, whose arguments say what it writes).
    pub fn out_len(self, in_len: u64) -> u64 {
        match self {
            Kernel::Histogram => HISTOGRAM_OUT_BYTES,
            Kernel::Aes128Ctr => in_len,
            Kernel::User(_) => 0,
        }
    }

    /// Bytes of its extra argument at `aux_offset` (0: none).
    pub fn aux_len(self) -> u64 {
        match self {
            Kernel::Histogram | Kernel::User(_) => 0,
            Kernel::Aes128Ctr => AES_AUX_BYTES,
        }
    }
}

impl std::fmt::Display for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Kernel::User(id) => id.fmt(f),
            k => f.write_str(k.name()),
        }
    }
}

/// A checked call: every range lies inside the region it was checked
/// against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelCall {
    pub task: TaskId,
    pub kernel: Kernel,
    /// For a registered kernel, its argument block.
    pub input: Range<u64>,
    /// Empty for a registered kernel.
    pub output: Range<u64>,
    /// Empty for kernels without an extra argument.
    pub aux: Range<u64>,
    /// A registered kernel's launch and arguments, checked.
    pub user: Option<Arc<UserCall>>,
}

impl KernelCall {
    /// The packet words that encode this call.
    pub fn to_words(&self) -> [u64; 7] {
        [
            self.task.0,
            self.kernel.word(),
            self.input.start,
            self.input.end - self.input.start,
            self.output.start,
            self.output.end - self.output.start,
            self.aux.start,
        ]
    }

    /// Bytes of input.
    pub fn in_len(&self) -> u64 {
        self.input.end - self.input.start
    }

    /// What the unit's cost model scales with: bytes of input for a
    /// built-in kernel, work-items for a registered one.
    pub fn work(&self) -> u64 {
        match &self.user {
            Some(u) => u.global,
            None => self.in_len(),
        }
    }
}

/// Why a packet was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KernelCallError {
    #[error(
        "kernel number {0} is not one this unit runs (1 = histogram, 2 = aes128-ctr, 65536 and up: kernels registered with RegisterKernel)"
    )]
    UnknownKernel(u64),
    #[error(
        "the {what} (bytes {offset}..{offset}+{len}) lies outside the {region}-byte data region"
    )]
    OutOfRegion {
        what: &'static str,
        offset: u64,
        len: u64,
        region: u64,
    },
    #[error("{kernel} writes {want} bytes of output for this input; the call gives {got}")]
    OutputSize { kernel: Kernel, want: u64, got: u64 },
    #[error("{kernel} needs at least one byte of input")]
    EmptyInput { kernel: Kernel },
    #[error("{kernel} cannot read input in place of its output unless both ranges are the same")]
    PartialOverlap { kernel: Kernel },
    #[error("{kernel} takes no extra argument, so its offset must be 0, not {aux_off}")]
    UnusedAux { kernel: Kernel, aux_off: u64 },
    #[error("{kernel}: {reason}")]
    WorkSize {
        kernel: UserKernelId,
        reason: String,
    },
    #[error("{kernel}: the packet's last word must be 0, not {value}")]
    SpareWord { kernel: UserKernelId, value: u64 },
    #[error(
        "{kernel} (`{entry}`) takes a {want}-byte argument block (see its signature); the call gives {got}"
    )]
    ArgBlockSize {
        kernel: UserKernelId,
        entry: String,
        want: u64,
        got: u64,
    },
    #[error("{kernel} (`{entry}`), argument {index} `{param}`: {reason}")]
    BadArg {
        kernel: UserKernelId,
        entry: String,
        index: usize,
        param: String,
        reason: String,
    },
    #[error(
        "{kernel}: its buffers add up to {bytes} bytes, more than the {region}-byte data region"
    )]
    TooMuchData {
        kernel: UserKernelId,
        bytes: u64,
        region: u64,
    },
    #[error("{kernel} is not registered by this client on this unit (RegisterKernel first)")]
    NotRegistered { kernel: UserKernelId },
}

/// One argument of a call, checked against the kernel and the region.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum UserArg {
    /// Bytes `range` of the region, with [`flags`](crate::user_kernel::flags).
    Buffer { range: Range<u64>, flags: u64 },
    /// Bytes of local memory.
    Local(u64),
    /// A scalar's bytes, little-endian in the low bytes.
    Scalar(u64),
}

/// A checked call of a registered kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserCall {
    pub kernel: UserKernelId,
    pub global: u64,
    pub local: Option<u64>,
    /// One per parameter, in order.
    pub args: Vec<UserArg>,
}
