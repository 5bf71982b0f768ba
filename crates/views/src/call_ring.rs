//! A client's accelerator call queue in shared memory (Pegasus's "aVCPU"
//! ring): one producer (the client) and one consumer (a backend thread in
//! the daemon), fixed-size packets, no locks and no system calls per call.
//!
//! The daemon creates the ring (a memfd sealed against resizing, so its
//! size is fixed for both sides and a client cannot grow daemon memory)
//! and passes the fd; the client maps it read-write. Each side keeps its
//! own index privately and only *publishes* it in the ring: the consumer
//! never trusts the shared head (the client could overwrite it) and checks
//! the shared tail against its own head, so a lying or broken client can
//! only corrupt its own calls, which the consumer detects and reports.
//!
//! Layout, in 64-bit slots: a header (magic, version, capacity, packet
//! words), the producer's tail and the consumer's head on cache lines of
//! their own, then `capacity` packets of [`PACKET_WORDS`] slots: the
//! packet's index, then its payload.

use crate::mapping::Mapping;
use crate::slots::Slots;
use rustix::fs::{FileType, MemfdFlags, SealFlags};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;

/// `"hs-ring1"`.
const MAGIC: u64 = u64::from_le_bytes(*b"hs-ring1");
const VERSION: u64 = 1;
const HDR_MAGIC: usize = 0;
const HDR_VERSION: usize = 1;
const HDR_CAPACITY: usize = 2;
const HDR_PACKET_WORDS: usize = 3;
/// Producer's published tail: packets pushed so far.
const TAIL: usize = 8;
/// Consumer's published head: packets popped so far.
const HEAD: usize = 16;
const DATA: usize = 24;

/// Payload words per packet (the index word comes on top).
pub const PAYLOAD_WORDS: usize = 7;
pub const PACKET_WORDS: usize = PAYLOAD_WORDS + 1;
/// Largest ring the daemon makes or a client accepts.
pub const MAX_CAPACITY: u64 = 1 << 16;

/// One call: what its words mean is the backend protocol's business.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallPacket(pub [u64; PAYLOAD_WORDS]);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RingError {
    #[error("{call} failed: {errno}")]
    Sys {
        call: &'static str,
        errno: rustix::io::Errno,
    },
    #[error("capacity {0} is not a power of two in 1..={MAX_CAPACITY}")]
    BadCapacity(u64),
    #[error("not a call ring (bad magic, version, size or seals)")]
    NotARing,
    /// The producer's published tail is behind the consumer or more than
    /// a ring ahead of it, or a packet carries the wrong index: the client
    /// wrote over the ring's bookkeeping.
    #[error("the ring's producer broke its protocol (tail {tail}, head {head})")]
    Corrupt { tail: u64, head: u64 },
}

fn sys(call: &'static str) -> impl Fn(rustix::io::Errno) -> RingError {
    move |errno| RingError::Sys { call, errno }
}

/// Slots of a ring of `capacity` packets.
pub(crate) fn ring_slots(capacity: u64) -> usize {
    DATA + capacity as usize * PACKET_WORDS
}

fn ring_bytes(capacity: u64) -> usize {
    ring_slots(capacity) * 8
}

/// The daemon's end.
#[derive(Debug)]
pub struct RingConsumer {
    fd: OwnedFd,
    map: Mapping,
    capacity: u64,
    /// Our own head; the shared copy is for the producer only.
    head: u64,
}

impl RingConsumer {
    /// Creates a ring of `capacity` packets (a power of two).
    pub fn create(capacity: u64) -> Result<RingConsumer, RingError> {
        if capacity == 0 || capacity > MAX_CAPACITY || !capacity.is_power_of_two() {
            return Err(RingError::BadCapacity(capacity));
        }
        let fd = rustix::fs::memfd_create(
            "hetsched-call-ring",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .map_err(sys("memfd_create"))?;
        let bytes = ring_bytes(capacity);
        rustix::fs::ftruncate(&fd, bytes as u64).map_err(sys("ftruncate"))?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
            .map_err(sys("fcntl(F_ADD_SEALS)"))?;
        let map = Mapping::map(fd.as_fd(), bytes, true).map_err(sys("mmap"))?;
        let s = map.slots();
        s[HDR_CAPACITY].store(capacity, Ordering::Relaxed);
        s[HDR_PACKET_WORDS].store(PACKET_WORDS as u64, Ordering::Relaxed);
        s[HDR_VERSION].store(VERSION, Ordering::Relaxed);
        s[HDR_MAGIC].store(MAGIC, Ordering::Release);
        Ok(RingConsumer {
            fd,
            map,
            capacity,
            head: 0,
        })
    }

    /// The fd to pass to the client.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Packets waiting, as the producer says; an error if what it says is
    /// impossible.
    pub fn len(&self) -> Result<u64, RingError> {
        waiting(self.map.slots(), self.head, self.capacity)
    }

    pub fn is_empty(&self) -> Result<bool, RingError> {
        Ok(self.len()? == 0)
    }

    /// The oldest packet, if any, left in the ring (a consumer that cannot
    /// take it yet leaves it there: back-pressure on the producer).
    pub fn peek(&self) -> Result<Option<CallPacket>, RingError> {
        self.read_head()
    }

    /// The oldest packet, if any.
    pub fn pop(&mut self) -> Result<Option<CallPacket>, RingError> {
        pop(self.map.slots(), &mut self.head, self.capacity)
    }

    /// The packet at our head, checked, without taking it.
    fn read_head(&self) -> Result<Option<CallPacket>, RingError> {
        read_head(self.map.slots(), self.head, self.capacity)
    }

    /// Drops everything queued (the client died or was cut off).
    pub fn clear(&mut self) {
        let s = self.map.slots();
        let tail = s.load(TAIL, Ordering::Acquire);
        if tail.wrapping_sub(self.head) <= self.capacity {
            self.head = tail;
            s.store(HEAD, self.head, Ordering::Release);
        }
    }
}

// The ring's protocol, over any slots: the mapping's here, loom's in the
// models (`loom_models`).

/// Packets waiting for a consumer at `head`, as the producer's published
/// tail says; an error if that is impossible.
fn waiting<S: Slots + ?Sized>(s: &S, head: u64, capacity: u64) -> Result<u64, RingError> {
    let tail = s.load(TAIL, Ordering::Acquire);
    let n = tail.wrapping_sub(head);
    if n > capacity {
        return Err(RingError::Corrupt { tail, head });
    }
    Ok(n)
}

/// The packet at `head`, checked, without taking it.
fn read_head<S: Slots + ?Sized>(
    s: &S,
    head: u64,
    capacity: u64,
) -> Result<Option<CallPacket>, RingError> {
    if waiting(s, head, capacity)? == 0 {
        return Ok(None);
    }
    // `waiting` loaded the tail with Acquire: the packet's words, stored
    // before the producer released that tail, are visible.
    let base = DATA + (head % capacity) as usize * PACKET_WORDS;
    let index = s.load(base, Ordering::Relaxed);
    if index != head {
        return Err(RingError::Corrupt {
            tail: s.load(TAIL, Ordering::Relaxed),
            head,
        });
    }
    let mut p = CallPacket::default();
    for (i, w) in p.0.iter_mut().enumerate() {
        *w = s.load(base + 1 + i, Ordering::Relaxed);
    }
    Ok(Some(p))
}

/// Takes the packet at `*head`, if any, and publishes the new head.
pub(crate) fn pop<S: Slots + ?Sized>(
    s: &S,
    head: &mut u64,
    capacity: u64,
) -> Result<Option<CallPacket>, RingError> {
    let Some(p) = read_head(s, *head, capacity)? else {
        return Ok(None);
    };
    *head += 1;
    // Release: our reads of the packet happen before the producer may
    // reuse its slot.
    s.store(HEAD, *head, Ordering::Release);
    Ok(Some(p))
}

/// Queues `p` at `*tail`; `false` when the ring is full.
pub(crate) fn push<S: Slots + ?Sized>(
    s: &S,
    tail: &mut u64,
    capacity: u64,
    p: &CallPacket,
) -> bool {
    let head = s.load(HEAD, Ordering::Acquire);
    if tail.wrapping_sub(head) >= capacity {
        return false;
    }
    let base = DATA + (*tail % capacity) as usize * PACKET_WORDS;
    s.store(base, *tail, Ordering::Relaxed);
    for (i, &w) in p.0.iter().enumerate() {
        s.store(base + 1 + i, w, Ordering::Relaxed);
    }
    *tail += 1;
    // Release: the packet's words are visible before the new tail.
    s.store(TAIL, *tail, Ordering::Release);
    true
}

/// The client's end.
#[derive(Debug)]
pub struct RingProducer {
    map: Mapping,
    capacity: u64,
    tail: u64,
}

impl RingProducer {
    /// Maps a ring received from the daemon, after checking that it is one:
    /// a regular file sealed against resizing, with a valid header and the
    /// size its capacity calls for.
    pub fn from_fd(fd: OwnedFd) -> Result<RingProducer, RingError> {
        let stat = rustix::fs::fstat(&fd).map_err(sys("fstat"))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(RingError::NotARing);
        }
        let seals = rustix::fs::fcntl_get_seals(&fd).unwrap_or(SealFlags::empty());
        if !seals.contains(SealFlags::SHRINK | SealFlags::GROW) {
            return Err(RingError::NotARing);
        }
        let size = u64::try_from(stat.st_size).unwrap_or(0);
        if size < (DATA * 8) as u64 || size > ring_bytes(MAX_CAPACITY) as u64 {
            return Err(RingError::NotARing);
        }
        let map = Mapping::map(fd.as_fd(), DATA * 8, false).map_err(sys("mmap"))?;
        let s = map.slots();
        let capacity = s[HDR_CAPACITY].load(Ordering::Relaxed);
        let ok = s[HDR_MAGIC].load(Ordering::Acquire) == MAGIC
            && s[HDR_VERSION].load(Ordering::Relaxed) == VERSION
            && s[HDR_PACKET_WORDS].load(Ordering::Relaxed) == PACKET_WORDS as u64
            && capacity.is_power_of_two()
            && capacity <= MAX_CAPACITY
            && ring_bytes(capacity) as u64 == size;
        if !ok {
            return Err(RingError::NotARing);
        }
        drop(map);
        let map = Mapping::map(fd.as_fd(), size as usize, true).map_err(sys("mmap"))?;
        let tail = map.slots()[TAIL].load(Ordering::Acquire);
        Ok(RingProducer {
            map,
            capacity,
            tail,
        })
    }

    /// Queues a call; `false` when the ring is full (the consumer is that
    /// far behind: back off or wait, the daemon will not queue more).
    pub fn push(&mut self, p: &CallPacket) -> bool {
        push(self.map.slots(), &mut self.tail, self.capacity, p)
    }

    /// Writes `tail` as the published tail, bypassing the protocol: for
    /// tests of the consumer's defences against a lying client.
    #[doc(hidden)]
    pub fn publish_raw_tail(&self, tail: u64) {
        self.map.slots()[TAIL].store(tail, Ordering::Release);
    }
}

/// Both ends in one process (tests, benchmarks, an embedded monitor).
pub fn pair(capacity: u64) -> Result<(RingProducer, RingConsumer), RingError> {
    let consumer = RingConsumer::create(capacity)?;
    let fd = consumer
        .fd()
        .try_clone_to_owned()
        .map_err(|e| RingError::Sys {
            call: "dup",
            errno: rustix::io::Errno::from_io_error(&e).unwrap_or(rustix::io::Errno::IO),
        })?;
    Ok((RingProducer::from_fd(fd)?, consumer))
}
