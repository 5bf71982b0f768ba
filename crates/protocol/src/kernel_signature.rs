//! A registered kernel's number and signature: what the daemon tells a
//! client that registered a kernel, and what each call of it is checked
//! against. The OpenCL compiler's reflection and the PTX reader
//! ([`crate::ptx`]) both produce a [`KernelSignature`]; the public paths
//! are in [`crate::user_kernel`].

use serde::{Deserialize, Serialize};

/// Kernel words at or above this name registered kernels; below it,
/// built-in ones.
pub const USER_KERNEL_BASE: u64 = 1 << 16;
/// Longest kernel (entry point) name.
pub const MAX_ENTRY_BYTES: usize = 256;
/// Most parameters a registered kernel may have.
pub const MAX_PARAMS: usize = 64;

/// The number a unit gave a registered kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UserKernelId(pub u32);

impl UserKernelId {
    /// Its kernel word in a call packet.
    pub fn word(self) -> u64 {
        USER_KERNEL_BASE + u64::from(self.0)
    }

    pub fn from_word(word: u64) -> Option<UserKernelId> {
        let n = word.checked_sub(USER_KERNEL_BASE)?;
        u32::try_from(n).ok().map(UserKernelId)
    }
}

impl std::fmt::Display for UserKernelId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "user kernel {}", self.0)
    }
}

/// What a parameter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ParamKind {
    /// A `__global` or `__constant` pointer; `read_only` for `__constant`
    /// and pointers to `const`, which cannot be copied out.
    Buffer {
        read_only: bool,
    },
    /// A `__local` pointer: bytes of local memory.
    Local,
    U32,
    I32,
    U64,
    F32,
}

impl ParamKind {
    /// Words of its entry in the argument block.
    pub fn words(self) -> u64 {
        match self {
            ParamKind::Buffer { .. } => 3,
            _ => 1,
        }
    }
}

/// One parameter of a registered kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSpec {
    pub name: String,
    /// The type as the compiler reports it (`float*`, `uint`).
    pub ty: String,
    pub kind: ParamKind,
}

/// A registered kernel's name and parameters, as the daemon's compiler saw
/// them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSignature {
    pub entry: String,
    pub params: Vec<ParamSpec>,
}

impl KernelSignature {
    /// Bytes of a call's argument block.
    pub fn block_bytes(&self) -> u64 {
        self.params.iter().map(|p| p.kind.words() * 8).sum()
    }
}
