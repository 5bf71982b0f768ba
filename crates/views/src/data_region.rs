//! A client's data buffer for calls the daemon executes (the bytes a
//! kernel reads and writes), shared between the client and the daemon.
//!
//! The daemon creates it (a memfd of a fixed size, sealed against
//! resizing, so a client can neither grow daemon memory nor make the
//! daemon fault by shrinking it) and passes the fd next to a call ring.
//! The client writes a call's input, pushes the call, and reads the
//! output once the call is done; the daemon copies input out before it
//! runs the call and output in after it.
//!
//! The other side may write at any moment, so every access goes through
//! the atomic slots of [`Mapping`]: a client that scribbles over a range
//! while the daemon copies it gets garbage in its own output, never a data
//! race. Partial words at either end of a range are written with masked
//! `fetch_and`/`fetch_or`, so neighbouring bytes are left as they were.

use crate::mapping::Mapping;
use rustix::fs::{FileType, MemfdFlags, SealFlags};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// Largest region the daemon makes or a client accepts: 1 GiB.
pub const MAX_REGION_BYTES: u64 = 1 << 30;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegionError {
    #[error("{call} failed: {errno}")]
    Sys {
        call: &'static str,
        errno: rustix::io::Errno,
    },
    #[error("a data region of {0} bytes: it must be a multiple of 8 in 8..={MAX_REGION_BYTES}")]
    BadSize(u64),
    #[error("not a data region (not a regular file sealed against resizing, or a bad size)")]
    NotARegion,
    #[error("bytes {offset}..{offset}+{len} lie outside the {size}-byte region")]
    OutOfRange { offset: u64, len: u64, size: u64 },
}

fn sys(call: &'static str) -> impl Fn(rustix::io::Errno) -> RegionError {
    move |errno| RegionError::Sys { call, errno }
}

/// One side of a shared data region (the daemon's or the client's: both
/// read and write).
#[derive(Debug)]
pub struct DataRegion {
    fd: OwnedFd,
    map: Mapping,
    size: u64,
}

impl DataRegion {
    /// The region's first byte and its length, for handing to a device
    /// that works on host memory in place. The bytes stay mapped for as long
    /// as this `DataRegion` lives and the file cannot shrink (it is sealed),
    /// so the range never faults; but the other side may write any of it at
    /// any moment, so the pointer must never become a Rust reference: only
    /// a device (or code that tolerates torn data) may use it.
    pub fn host_bytes(&self) -> (std::ptr::NonNull<u8>, usize) {
        (self.map.base(), self.map.len())
    }

    /// Creates a zero-filled region of `size` bytes (the daemon's side).
    pub fn create(size: u64) -> Result<DataRegion, RegionError> {
        if size == 0 || size % 8 != 0 || size > MAX_REGION_BYTES {
            return Err(RegionError::BadSize(size));
        }
        let fd = rustix::fs::memfd_create(
            "hetsched-data-region",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .map_err(sys("memfd_create"))?;
        rustix::fs::ftruncate(&fd, size).map_err(sys("ftruncate"))?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
            .map_err(sys("fcntl(F_ADD_SEALS)"))?;
        let map = Mapping::map(fd.as_fd(), size as usize, true).map_err(sys("mmap"))?;
        Ok(DataRegion { fd, map, size })
    }

    /// Maps a region received from the daemon, after checking that it is
    /// one: a regular file sealed against resizing, of a valid size.
    pub fn from_fd(fd: OwnedFd) -> Result<DataRegion, RegionError> {
        let stat = rustix::fs::fstat(&fd).map_err(sys("fstat"))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(RegionError::NotARegion);
        }
        let seals = rustix::fs::fcntl_get_seals(&fd).unwrap_or(SealFlags::empty());
        if !seals.contains(SealFlags::SHRINK | SealFlags::GROW) {
            return Err(RegionError::NotARegion);
        }
        let size = u64::try_from(stat.st_size).unwrap_or(0);
        if size == 0 || size % 8 != 0 || size > MAX_REGION_BYTES {
            return Err(RegionError::NotARegion);
        }
        let map = Mapping::map(fd.as_fd(), size as usize, true).map_err(sys("mmap"))?;
        Ok(DataRegion { fd, map, size })
    }

    /// The fd to pass to the client.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    fn check(&self, offset: u64, len: usize) -> Result<(), RegionError> {
        let len = len as u64;
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(RegionError::OutOfRange {
                offset,
                len,
                size: self.size,
            }),
        }
    }

    /// Copies `out.len()` bytes starting at `offset` into `out`.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), RegionError> {
        self.check(offset, out.len())?;
        let slots = self.map.slots();
        let pos = offset as usize;
        let end = pos + out.len();
        // A partial word first, whole words, then a partial word: the
        // middle is one load per 8 bytes with no per-byte bookkeeping.
        let head = ((8 - pos % 8) % 8).min(out.len());
        let (first, rest) = out.split_at_mut(head);
        if !first.is_empty() {
            let word = slots[pos / 8].load(Ordering::Relaxed).to_le_bytes();
            first.copy_from_slice(&word[pos % 8..pos % 8 + head]);
        }
        let start = (pos + head) / 8;
        let mut words = rest.chunks_exact_mut(8);
        for (dst, slot) in (&mut words).zip(&slots[start..]) {
            dst.copy_from_slice(&slot.load(Ordering::Relaxed).to_le_bytes());
        }
        let tail = words.into_remainder();
        if !tail.is_empty() {
            let word = slots[end / 8].load(Ordering::Relaxed).to_le_bytes();
            tail.copy_from_slice(&word[..tail.len()]);
        }
        Ok(())
    }

    /// Copies `data` into the region starting at `offset`, leaving the
    /// bytes around it untouched.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), RegionError> {
        self.check(offset, data.len())?;
        let slots = self.map.slots();
        let pos = offset as usize;
        let head = ((8 - pos % 8) % 8).min(data.len());
        let (first, rest) = data.split_at(head);
        if !first.is_empty() {
            let mut word = [0u8; 8];
            word[pos % 8..pos % 8 + head].copy_from_slice(first);
            store_bytes(&slots[pos / 8], u64::from_le_bytes(word), pos % 8, head);
        }
        let start = (pos + head) / 8;
        let mut words = rest.chunks_exact(8);
        for (src, slot) in (&mut words).zip(&slots[start..]) {
            let w = u64::from_le_bytes(src.try_into().expect("chunks of 8"));
            slot.store(w, Ordering::Relaxed);
        }
        let tail = words.remainder();
        if !tail.is_empty() {
            let last = (pos + data.len()) / 8;
            let mut word = [0u8; 8];
            word[..tail.len()].copy_from_slice(tail);
            store_bytes(&slots[last], u64::from_le_bytes(word), 0, tail.len());
        }
        Ok(())
    }
}

/// Stores bytes `within..within + take` of `value` (little-endian byte
/// order) into `slot`, keeping its other bytes.
fn store_bytes(slot: &AtomicU64, value: u64, within: usize, take: usize) {
    if take == 8 {
        slot.store(value, Ordering::Relaxed);
        return;
    }
    let mask = ((1u64 << (take * 8)) - 1) << (within * 8);
    slot.fetch_and(!mask, Ordering::Relaxed);
    slot.fetch_or(value & mask, Ordering::Relaxed);
}

/// A region and a second mapping of it, as a daemon and its client would
/// have (tests, benchmarks, an embedded monitor).
pub fn pair(size: u64) -> Result<(DataRegion, DataRegion), RegionError> {
    let daemon = DataRegion::create(size)?;
    let fd = daemon
        .fd()
        .try_clone_to_owned()
        .map_err(|e| RegionError::Sys {
            call: "dup",
            errno: rustix::io::Errno::from_io_error(&e).unwrap_or(rustix::io::Errno::IO),
        })?;
    let client = DataRegion::from_fd(fd)?;
    Ok((daemon, client))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes_that_are_not_whole_words_or_too_large_are_refused() {
        assert_eq!(DataRegion::create(0).unwrap_err(), RegionError::BadSize(0));
        assert_eq!(
            DataRegion::create(12).unwrap_err(),
            RegionError::BadSize(12)
        );
        assert_eq!(
            DataRegion::create(MAX_REGION_BYTES + 8).unwrap_err(),
            RegionError::BadSize(MAX_REGION_BYTES + 8)
        );
    }

    #[test]
    fn what_one_side_writes_the_other_reads() {
        let (daemon, client) = pair(4096).unwrap();
        client.write(3, b"hello, region").unwrap();
        let mut got = [0u8; 13];
        daemon.read(3, &mut got).unwrap();
        assert_eq!(&got, b"hello, region");
    }

    #[test]
    fn ranges_past_the_end_are_refused_and_change_nothing() {
        let (daemon, client) = pair(64).unwrap();
        client.write(0, &[7u8; 64]).unwrap();
        assert_eq!(
            daemon.write(60, &[1u8; 5]).unwrap_err(),
            RegionError::OutOfRange {
                offset: 60,
                len: 5,
                size: 64
            }
        );
        assert!(matches!(
            daemon.read(u64::MAX, &mut [0u8; 2]),
            Err(RegionError::OutOfRange { .. })
        ));
        let mut all = [0u8; 64];
        client.read(0, &mut all).unwrap();
        assert_eq!(all, [7u8; 64]);
    }

    #[test]
    fn a_file_that_is_not_sealed_is_not_a_region() {
        let fd = rustix::fs::memfd_create("not-a-region", MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, 4096).unwrap();
        assert_eq!(
            DataRegion::from_fd(fd).unwrap_err(),
            RegionError::NotARegion
        );
    }

    proptest! {
        /// A write changes exactly its own bytes, at any offset and length
        /// (whole words, partial words at either end, inside one word).
        #[test]
        fn writes_touch_exactly_their_bytes(
            offset in 0u64..200,
            data in proptest::collection::vec(any::<u8>(), 0..56),
        ) {
            let (daemon, client) = pair(256).unwrap();
            let before: Vec<u8> = (0..256u32).map(|i| (i * 7 + 1) as u8).collect();
            client.write(0, &before).unwrap();
            daemon.write(offset, &data).unwrap();
            let mut expect = before.clone();
            expect[offset as usize..offset as usize + data.len()].copy_from_slice(&data);
            let mut got = vec![0u8; 256];
            client.read(0, &mut got).unwrap();
            prop_assert_eq!(got, expect);
        }

        /// A read returns exactly the bytes at its offset, whatever the
        /// alignment of either end.
        #[test]
        fn reads_return_exactly_their_bytes(offset in 0u64..200, len in 0usize..56) {
            let (daemon, client) = pair(256).unwrap();
            let all: Vec<u8> = (0..256u32).map(|i| (i * 13 + 5) as u8).collect();
            client.write(0, &all).unwrap();
            let mut got = vec![0u8; len];
            daemon.read(offset, &mut got).unwrap();
            prop_assert_eq!(&got[..], &all[offset as usize..offset as usize + len]);
        }
    }
}
