//! A page in sealed shared memory: created and written by one writer,
//! checked and mapped read-only by readers that receive its fd.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{FileType, MemfdFlags, SealFlags};

use crate::error::ViewError;
use crate::layout::{LAYOUT_VERSION, Layout, MAX_CPU_KINDS, MAX_UNITS, PageKind, header};
use crate::mapping::Mapping;
use crate::seqlock;

/// Seals every page carries once shared: fixed size, no new writable
/// mappings or `write(2)`s (the writer's existing mapping keeps working),
/// and no seal can be removed or added.
pub(crate) const PAGE_SEALS: SealFlags = SealFlags::SHRINK
    .union(SealFlags::GROW)
    .union(SealFlags::FUTURE_WRITE)
    .union(SealFlags::SEAL);

/// The writer's side: the memfd, its read-write mapping and the sequence.
#[derive(Debug)]
pub(crate) struct PageWriter {
    /// `None` once released: every reader has it mapped, and the mapping
    /// here outlives the descriptor.
    fd: Option<OwnedFd>,
    map: Mapping,
    layout: Layout,
    seq: u64,
}

impl PageWriter {
    /// Creates the memfd, sizes and maps it, writes the header and then
    /// `init` (with `seq` 0: "never published"), and seals it.
    pub(crate) fn create(
        kind: PageKind,
        n_units: usize,
        n_cpu_kinds: usize,
        init: impl FnOnce(&Layout, &[AtomicU64]),
    ) -> Result<Self, ViewError> {
        let layout = Layout::new(kind, n_units, n_cpu_kinds).ok_or(ViewError::BadCounts {
            kind,
            n_units: n_units as u64,
            n_cpu_kinds: n_cpu_kinds as u64,
            max_units: MAX_UNITS as u64,
            max_cpu_kinds: MAX_CPU_KINDS as u64,
        })?;
        let name = match kind {
            PageKind::Global => "hetsched-global",
            PageKind::Private => "hetsched-private",
        };
        let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
            .map_err(ViewError::sys("memfd_create"))?;
        rustix::fs::ftruncate(&fd, layout.bytes() as u64).map_err(ViewError::sys("ftruncate"))?;
        let map = Mapping::map(fd.as_fd(), layout.bytes(), true).map_err(ViewError::sys("mmap"))?;
        let slots = map.slots();
        slots[header::MAGIC].store(kind.magic(), Ordering::Relaxed);
        slots[header::VERSION].store(LAYOUT_VERSION, Ordering::Relaxed);
        slots[header::N_UNITS].store(n_units as u64, Ordering::Relaxed);
        slots[header::N_CPU_KINDS].store(n_cpu_kinds as u64, Ordering::Relaxed);
        init(&layout, slots);
        // After this, whoever gets the fd can only map it read-only; our
        // mapping above stays writable (F_SEAL_FUTURE_WRITE, unlike
        // F_SEAL_WRITE, allows existing writable mappings).
        rustix::fs::fcntl_add_seals(&fd, PAGE_SEALS)
            .map_err(ViewError::sys("fcntl(F_ADD_SEALS)"))?;
        Ok(PageWriter {
            fd: Some(fd),
            map,
            layout,
            seq: 0,
        })
    }

    pub(crate) fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(|fd| fd.as_fd())
    }

    /// Closes the descriptor (the mapping stays): a page sent to its one
    /// reader need not hold a descriptor for the rest of its life.
    pub(crate) fn release_fd(&mut self) {
        self.fd = None;
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// One seqlock publish.
    #[inline]
    pub(crate) fn publish(&mut self, now_ns: u64, write: impl FnOnce(&Layout, &[AtomicU64])) {
        let layout = &self.layout;
        seqlock::publish(self.map.slots(), &mut self.seq, now_ns, |slots| {
            write(layout, slots)
        });
    }
}

/// A reader's side: a checked, read-only mapping.
#[derive(Debug)]
pub(crate) struct PageReader {
    map: Mapping,
    layout: Layout,
}

impl PageReader {
    /// Checks `fd` (regular file, sealed against shrinking, big enough for a
    /// header), maps it read-only, and checks the header (magic, version,
    /// counts) and that the size is exactly what the counts call for.
    pub(crate) fn from_fd(kind: PageKind, fd: OwnedFd) -> Result<Self, ViewError> {
        let stat = rustix::fs::fstat(&fd).map_err(ViewError::sys("fstat"))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(ViewError::NotRegularFile { mode: stat.st_mode });
        }
        let size = u64::try_from(stat.st_size).unwrap_or(0);
        let min = (header::SLOTS * 8) as u64;
        if size < min {
            return Err(ViewError::TooSmall { actual: size, min });
        }
        // Without F_SEAL_SHRINK the sender could truncate the file after our
        // size check and make our reads fault. Non-memfd files have no seals
        // (EINVAL): the same answer.
        let seals = rustix::fs::fcntl_get_seals(&fd).unwrap_or(SealFlags::empty());
        if !seals.contains(SealFlags::SHRINK) {
            return Err(ViewError::NotSealed {
                seals: seals.bits(),
            });
        }
        // No valid page is larger than the largest layout: refuse to map more.
        let max = Layout::new(kind, MAX_UNITS, MAX_CPU_KINDS)
            .expect("the largest layout is a layout")
            .bytes() as u64;
        if size > max {
            return Err(ViewError::SizeMismatch {
                kind,
                expected: max,
                actual: size,
            });
        }
        // Map the whole file (rounded down to whole slots), then check that
        // the header's layout is exactly that size before using any payload.
        let map_len = usize::try_from(size & !7).map_err(|_| ViewError::SizeMismatch {
            kind,
            expected: 0,
            actual: size,
        })?;
        let map = Mapping::map(fd.as_fd(), map_len, false).map_err(ViewError::sys("mmap"))?;
        let slots = map.slots();
        let read = |i: usize| slots[i].load(Ordering::Relaxed);
        let magic = read(header::MAGIC);
        if magic != kind.magic() {
            return Err(ViewError::BadMagic {
                expected: kind,
                found: magic,
            });
        }
        let version = read(header::VERSION);
        if version != LAYOUT_VERSION {
            return Err(ViewError::BadVersion {
                kind,
                found: version,
                expected: LAYOUT_VERSION,
            });
        }
        let (n_units, n_cpu_kinds) = (read(header::N_UNITS), read(header::N_CPU_KINDS));
        let layout = usize::try_from(n_units)
            .ok()
            .zip(usize::try_from(n_cpu_kinds).ok())
            .and_then(|(u, k)| Layout::new(kind, u, k))
            .ok_or(ViewError::BadCounts {
                kind,
                n_units,
                n_cpu_kinds,
                max_units: MAX_UNITS as u64,
                max_cpu_kinds: MAX_CPU_KINDS as u64,
            })?;
        if layout.bytes() as u64 != size {
            return Err(ViewError::SizeMismatch {
                kind,
                expected: layout.bytes() as u64,
                actual: size,
            });
        }
        Ok(PageReader { map, layout })
    }

    #[inline]
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// A consistent read of whatever `read` loads; see [`seqlock::read`].
    #[inline]
    pub(crate) fn read<T>(
        &self,
        mut read: impl FnMut(&Layout, &[AtomicU64]) -> T,
    ) -> Result<(T, u64), ViewError> {
        let layout = &self.layout;
        seqlock::read(self.map.slots(), |slots| read(layout, slots))
    }

    #[cfg(test)]
    pub(crate) fn mapping(&self) -> &Mapping {
        &self.map
    }
}

/// Loads slot `i` (relaxed; the caller is inside a seqlock read).
#[inline(always)]
pub(crate) fn load(slots: &[AtomicU64], i: usize) -> u64 {
    slots[i].load(Ordering::Relaxed)
}

/// Loads slot `i` as an `f64`.
#[inline(always)]
pub(crate) fn load_f64(slots: &[AtomicU64], i: usize) -> f64 {
    f64::from_bits(load(slots, i))
}

/// Stores `v` in slot `i` (relaxed; the caller is inside a seqlock publish).
#[inline(always)]
pub(crate) fn store(slots: &[AtomicU64], i: usize, v: u64) {
    slots[i].store(v, Ordering::Relaxed)
}

/// Stores `v` in slot `i` as its bits.
#[inline(always)]
pub(crate) fn store_f64(slots: &[AtomicU64], i: usize, v: f64) {
    store(slots, i, v.to_bits())
}
