//! The only `unsafe` in the crate: mapping a shared-memory fd and viewing the
//! mapped bytes as `[AtomicU64]`.
//!
//! Everything else (creating the memfd, sealing it, checking a received fd,
//! the seqlock itself) is safe code on top of [`Mapping::slots`].
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64};

use rustix::mm::{MapFlags, ProtFlags, mmap, munmap};

/// A `MAP_SHARED` mapping of a whole shared-memory file, unmapped on drop.
///
/// Only ever accessed through [`Mapping::slots`], i.e. through atomics.
pub(crate) struct Mapping {
    ptr: NonNull<c_void>,
    /// Bytes mapped: a multiple of 8, at most the file's size.
    len: usize,
}

// SAFETY: `Mapping` owns its mapping (nothing else unmaps it) and hands out
// only `&[AtomicU64]`, which is `Sync`; moving or sharing the owner between
// threads is as sound as moving or sharing a `Box<[AtomicU64]>`.
unsafe impl Send for Mapping {}
// SAFETY: see `Send` above; all access through `&self` is atomic.
unsafe impl Sync for Mapping {}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapping")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

impl Mapping {
    /// Maps the first `len` bytes of `fd` shared, read-write when `writable`,
    /// read-only otherwise.
    ///
    /// The caller has checked (with `fstat` and the `F_SEAL_SHRINK` seal) that
    /// the file holds at least `len` bytes and cannot shrink, so no access
    /// through the mapping can fault with `SIGBUS`.
    pub(crate) fn map(fd: BorrowedFd<'_>, len: usize, writable: bool) -> rustix::io::Result<Self> {
        assert!(
            len > 0 && len % 8 == 0,
            "mapping length {len} must be a non-zero multiple of 8"
        );
        let prot = if writable {
            ProtFlags::READ | ProtFlags::WRITE
        } else {
            ProtFlags::READ
        };
        // SAFETY: a fresh mapping at an address the kernel chooses (null hint,
        // no MAP_FIXED) cannot alias or replace any memory Rust already owns.
        // The returned pointer is owned by the `Mapping` built below and
        // unmapped exactly once, in `Drop`.
        let ptr = unsafe { mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, fd, 0)? };
        let ptr = NonNull::new(ptr).expect("mmap returned a null mapping without an error");
        Ok(Mapping { ptr, len })
    }

    /// The mapped bytes as 64-bit atomic slots.
    #[inline]
    pub(crate) fn slots(&self) -> &[AtomicU64] {
        // SAFETY:
        // - Alignment and size: `mmap` returns a page-aligned address and
        //   `len` is a multiple of 8, so the region is exactly `len / 8`
        //   properly aligned `AtomicU64`s (same size and alignment as `u64`).
        // - Validity: every bit pattern is a valid `u64`; the bytes come from
        //   the kernel (zero-filled memfd pages or values a writer stored).
        // - Lifetime: the slice borrows `self`, and the mapping stays until
        //   `Drop` runs, which cannot happen while the borrow is alive. The
        //   file cannot shrink under us (`F_SEAL_SHRINK`, checked by the
        //   caller of `map`), so every page stays backed.
        // - Concurrency: the same pages are shared with another mapping,
        //   possibly in another process that writes while we read. All
        //   access in this crate goes through `AtomicU64` operations, which
        //   are lock-free, address-free single instructions on 64-bit Linux
        //   targets, so concurrent writes from another mapping or process
        //   are never a data race and never tear a slot; the seqlock built on
        //   top makes multi-slot reads consistent.
        // - Read-only mappings: readers only ever perform `Relaxed` loads
        //   (acquire ordering comes from separate fences), which the standard
        //   library documents as sound on read-only memory for sizes up to the
        //   target's pointer width; a reader never stores.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<AtomicU64>(), self.len / 8) }
    }
}

impl Mapping {
    /// The mapped bytes as 32-bit atomic words, for a mapping that is only
    /// ever accessed this way (never through [`Mapping::slots`]): futex
    /// words are 32 bits.
    #[inline]
    pub(crate) fn words32(&self) -> &[AtomicU32] {
        // SAFETY: as for `slots`, with 4-byte words: the page-aligned
        // mapping of `len` bytes (a multiple of 8, so of 4) is exactly
        // `len / 4` aligned `AtomicU32`s, every bit pattern is valid, the
        // borrow cannot outlive the mapping, the file cannot shrink, and all
        // access is atomic (lock-free 4-byte operations), so another
        // process's concurrent writes are never a data race. Callers use a
        // mapping either through this view or through `slots`, never both,
        // so no location is accessed with two sizes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<AtomicU32>(), self.len / 4) }
    }
}

impl Mapping {
    /// The first mapped byte, for a device that works on the mapping in
    /// place (a CPU OpenCL device). A pointer only: nothing in this crate
    /// reads or writes through it, and its users must not make a Rust
    /// reference from it, since the other side writes at any moment.
    pub(crate) fn base(&self) -> NonNull<u8> {
        self.ptr.cast()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what `mmap` returned and mapped;
        // no borrow of `slots()` can outlive `self`, so nothing refers to
        // the region any more. An error here would mean the region was not
        // mapped, which cannot happen; it is ignored, as in `Drop` for files.
        let _ = unsafe { munmap(self.ptr.as_ptr(), self.len) };
    }
}

/// Tries to map `fd` `PROT_READ | PROT_WRITE`, `MAP_SHARED`, and unmaps it
/// again at once. Tests use it to show that a sealed page cannot be mapped
/// writable by whoever receives its fd.
#[cfg(test)]
pub(crate) fn try_map_writable(fd: BorrowedFd<'_>, len: usize) -> rustix::io::Result<()> {
    Mapping::map(fd, len, true).map(drop)
}

/// Tries to make the read-only `mapping` writable with `mprotect`, restoring
/// it if that unexpectedly succeeds. Tests use it to show that a sealed page
/// mapped read-only stays read-only.
#[cfg(test)]
pub(crate) fn try_mprotect_writable(mapping: &Mapping) -> rustix::io::Result<()> {
    use rustix::mm::{MprotectFlags, mprotect};
    // SAFETY: the region is exactly one mapping we own; changing its
    // protection affects no Rust object's validity (all access is atomic
    // loads, and we restore read-only at once if the upgrade succeeded).
    unsafe {
        mprotect(
            mapping.ptr.as_ptr(),
            mapping.len,
            MprotectFlags::READ | MprotectFlags::WRITE,
        )?;
        mprotect(mapping.ptr.as_ptr(), mapping.len, MprotectFlags::READ)
    }
}
