//! The one error type of the crate.

use crate::layout::PageKind;

/// Why a page could not be created, accepted from an fd, or written.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// A system call failed (memfd_create, ftruncate, fcntl, fstat, mmap).
    #[error("{call} failed: {source}")]
    Sys {
        call: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The fd is not a regular (memfd or tmpfs) file: a socket, pipe, directory...
    #[error("view fd is not a regular shared-memory file (st_mode {mode:#o})")]
    NotRegularFile { mode: u32 },
    /// The fd is too small to even hold a header.
    #[error("view fd holds {actual} bytes, less than the {min}-byte header")]
    TooSmall { actual: u64, min: u64 },
    /// The fd is not sealed against shrinking, so the sender could truncate it
    /// and make every later read fault; only sealed memfds are accepted.
    #[error(
        "view fd is not sealed against shrinking (seals {seals:#x}); only sealed memfds are accepted"
    )]
    NotSealed { seals: u32 },
    /// The header does not start with the expected page's magic number.
    #[error("not a {expected} page: magic {found:#018x}")]
    BadMagic { expected: PageKind, found: u64 },
    /// The page was written with a different layout version.
    #[error("{kind} page has layout version {found}, this build reads version {expected}")]
    BadVersion {
        kind: PageKind,
        found: u64,
        expected: u64,
    },
    /// The header declares counts beyond what a page may hold.
    #[error(
        "{kind} page declares {n_units} units and {n_cpu_kinds} CPU kinds (at most {max_units} and {max_cpu_kinds})"
    )]
    BadCounts {
        kind: PageKind,
        n_units: u64,
        n_cpu_kinds: u64,
        max_units: u64,
        max_cpu_kinds: u64,
    },
    /// The fd's size is not the size the header's counts call for.
    #[error("{kind} page fd holds {actual} bytes, its header declares a {expected}-byte layout")]
    SizeMismatch {
        kind: PageKind,
        expected: u64,
        actual: u64,
    },
    /// A writer was given a slice whose length is not the page's count.
    #[error("publish got {got} {what}, the page holds {expected}")]
    LengthMismatch {
        what: &'static str,
        got: usize,
        expected: usize,
    },
    /// A writer was given an index past the page's count.
    #[error("{what} index {index} out of range (the page holds {len})")]
    OutOfRange {
        what: &'static str,
        index: usize,
        len: usize,
    },
    /// The writer started a publish and has not finished it within
    /// [`crate::STALL_TIMEOUT`]: it died or is stopped mid-write.
    #[error("the page's writer has been mid-publish for longer than the stall timeout")]
    WriterStalled,
}

impl ViewError {
    pub(crate) fn sys(call: &'static str) -> impl FnOnce(rustix::io::Errno) -> ViewError {
        move |errno| ViewError::Sys {
            call,
            source: errno.into(),
        }
    }
}
