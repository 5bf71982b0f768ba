use opencl3::error_codes::{ClError, error_text};

/// What to tell someone whose machine has no usable OpenCL at all.
pub(crate) const INSTALL_HINT: &str = "install an OpenCL driver: on Debian/Ubuntu \
     `apt-get install pocl-opencl-icd ocl-icd-opencl-dev` gives a CPU device; GPUs need \
     their vendor's OpenCL driver";

/// Everything that can go wrong in this crate. Messages are written for the
/// person running hetsched, not for someone reading the OpenCL headers.
#[derive(Debug, thiserror::Error)]
pub enum OpenClError {
    /// The OpenCL loader could not be found, or it found no platform.
    #[error("no OpenCL platform: {0}")]
    NoPlatform(String),

    /// Platforms exist but none of them offers a device.
    #[error("no OpenCL device: {0}")]
    NoDevice(String),

    /// `OpenClDevice::open(index)` past the end of `devices()`.
    #[error("there is no OpenCL device {index}: this machine has {count}")]
    NoSuchDevice { index: usize, count: usize },

    /// The OpenCL C compiler rejected a program; `log` is its output.
    #[error("OpenCL program failed to build on {device}:\n{log}")]
    Build { device: String, log: String },

    /// The program compiled but does not define the requested kernel.
    #[error("the OpenCL program has no kernel `{name}` (it defines: {available})")]
    NoSuchKernel { name: String, available: String },

    /// A kernel parameter has a type `launch` cannot pass (vectors, structs,
    /// images, …); detected when the kernel is built so it fails early.
    #[error(
        "kernel `{kernel}` parameter {index} `{param}` has type `{ty}`, which hetsched cannot pass (buffers, local memory, uint, int, ulong and float only)"
    )]
    UnsupportedParam {
        kernel: String,
        index: usize,
        param: String,
        ty: String,
    },

    /// The arguments given to `launch` do not match the kernel's parameters.
    #[error("bad arguments for kernel `{kernel}`: {reason}")]
    BadArgs { kernel: String, reason: String },

    /// The work sizes given to `launch` are not valid for the kernel.
    #[error("cannot launch kernel `{kernel}`: {reason}")]
    BadLaunch { kernel: String, reason: String },

    /// A host slice and a device buffer of different lengths.
    #[error("{op} size mismatch: device buffer holds {buffer} bytes, host slice has {host}")]
    SizeMismatch {
        op: &'static str,
        buffer: usize,
        host: usize,
    },

    /// A buffer larger than the device allows in one allocation.
    #[error("cannot allocate {bytes} bytes on {device}: one buffer may be at most {max} bytes")]
    TooLarge {
        device: String,
        bytes: usize,
        max: u64,
    },

    /// An in-place buffer asked of a device that does not work on host
    /// memory, or over a range outside the memory given.
    #[error("cannot use host memory in place: {0}")]
    NotInPlace(String),

    /// A buffer or kernel made by one `OpenClDevice` used with another.
    #[error("this {what} belongs to another OpenCL device (or another open of the same one)")]
    WrongDevice { what: &'static str },

    /// Any other failing OpenCL call.
    #[error("OpenCL {call} failed: {} ({code})", error_text(*.code))]
    Api { call: &'static str, code: i32 },
}

impl OpenClError {
    /// True when the machine simply has no OpenCL to offer, as opposed to a
    /// fault in using it: callers skip OpenCL work on these.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::NoPlatform(_) | Self::NoDevice(_))
    }

    /// Maps a failed OpenCL call; accepts both opencl3's `ClError` and the
    /// bare status code its low-level functions return.
    pub(crate) fn api<E: Into<ClError>>(call: &'static str) -> impl FnOnce(E) -> Self {
        move |e| Self::Api {
            call,
            code: e.into().0,
        }
    }
}

pub type Result<T, E = OpenClError> = std::result::Result<T, E>;
