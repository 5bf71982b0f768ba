//! The daemon's doorbell: one shared page that ring producers (clients)
//! ring after they push a call, so the thread that polls the rings wakes
//! at once instead of at its next poll.
//!
//! Two 32-bit words: `parked`, which the consumer sets while it may sleep,
//! and `bell`, a counter it sleeps on with a futex. A producer that
//! pushed a call rings only when `parked` is set, so a busy daemon costs
//! its clients no system call per call. The consumer reads `bell`, sets
//! `parked`, then looks at every ring one last time and sleeps only while
//! `bell` still holds what it read; with a full fence between each side's
//! store and load, a call pushed after that last look always finds
//! `parked` set and rings (Dekker's pattern).
//!
//! Every client maps the page writable, so nothing in it is trusted: a
//! client that clears `parked` or stops ringing only makes calls wait for
//! the consumer's timeout (its polling period), and one that rings
//! without cause only wakes the poller early.

use crate::mapping::Mapping;
use rustix::fs::{FileType, MemfdFlags, SealFlags};
use rustix::thread::futex;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering, fence};
use std::time::Duration;

const BYTES: usize = 4096;
/// `"hsdb"`.
const MAGIC: u32 = u32::from_le_bytes(*b"hsdb");
const W_MAGIC: usize = 0;
/// Word indices, a cache line apart.
const W_PARKED: usize = 16;
const W_BELL: usize = 32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DoorbellError {
    #[error("{call} failed: {errno}")]
    Sys {
        call: &'static str,
        errno: rustix::io::Errno,
    },
    #[error("not a doorbell page (bad magic, size or seals)")]
    NotADoorbell,
}

fn sys(call: &'static str) -> impl Fn(rustix::io::Errno) -> DoorbellError {
    move |errno| DoorbellError::Sys { call, errno }
}

/// One mapping of the doorbell page: the daemon's (which sleeps on it) or
/// a client's (which rings it).
#[derive(Debug)]
pub struct Doorbell {
    fd: OwnedFd,
    map: Mapping,
}

impl Doorbell {
    /// Creates the page (the daemon's side).
    pub fn create() -> Result<Doorbell, DoorbellError> {
        let fd = rustix::fs::memfd_create(
            "hetsched-doorbell",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .map_err(sys("memfd_create"))?;
        rustix::fs::ftruncate(&fd, BYTES as u64).map_err(sys("ftruncate"))?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
            .map_err(sys("fcntl(F_ADD_SEALS)"))?;
        let map = Mapping::map(fd.as_fd(), BYTES, true).map_err(sys("mmap"))?;
        map.words32()[W_MAGIC].store(MAGIC, Ordering::Relaxed);
        Ok(Doorbell { fd, map })
    }

    /// Maps a page received from the daemon, after checking that it is
    /// one: a regular file of the right size, sealed against resizing.
    pub fn from_fd(fd: OwnedFd) -> Result<Doorbell, DoorbellError> {
        let stat = rustix::fs::fstat(&fd).map_err(sys("fstat"))?;
        let seals = rustix::fs::fcntl_get_seals(&fd).unwrap_or(SealFlags::empty());
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile
            || !seals.contains(SealFlags::SHRINK | SealFlags::GROW)
            || stat.st_size != BYTES as i64
        {
            return Err(DoorbellError::NotADoorbell);
        }
        let map = Mapping::map(fd.as_fd(), BYTES, true).map_err(sys("mmap"))?;
        if map.words32()[W_MAGIC].load(Ordering::Relaxed) != MAGIC {
            return Err(DoorbellError::NotADoorbell);
        }
        Ok(Doorbell { fd, map })
    }

    /// The fd to pass to clients.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn word(&self, i: usize) -> &AtomicU32 {
        &self.map.words32()[i]
    }

    /// Producer: call after publishing a call. Rings if the consumer may
    /// be asleep.
    pub fn ring_if_parked(&self) {
        // Orders the caller's tail store before the load of `parked`.
        fence(Ordering::SeqCst);
        if self.word(W_PARKED).load(Ordering::Relaxed) != 0 {
            self.ring();
        }
    }

    /// Wakes the consumer whether or not it is parked (the daemon's own
    /// threads, when they leave it work).
    pub fn ring(&self) {
        self.word(W_BELL).fetch_add(1, Ordering::SeqCst);
        // Not FUTEX_PRIVATE: the sleeper is in another process.
        let _ = futex::wake(self.word(W_BELL), futex::Flags::empty(), 1);
    }

    /// Consumer, step 1: before its last look at the rings. Returns what
    /// to pass to [`Doorbell::sleep`].
    pub fn park(&self) -> u32 {
        let seen = self.word(W_BELL).load(Ordering::SeqCst);
        self.word(W_PARKED).store(1, Ordering::Relaxed);
        // Orders the `parked` store before the loads of the rings' tails.
        fence(Ordering::SeqCst);
        seen
    }

    /// Consumer, step 2: sleeps until rung after [`Doorbell::park`]
    /// returned `seen`, or for `timeout`; then unparks.
    pub fn sleep(&self, seen: u32, timeout: Duration) {
        let ts = rustix::thread::futex::Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        // EAGAIN (rung already), ETIMEDOUT and EINTR all mean: look again.
        let _ = futex::wait(self.word(W_BELL), futex::Flags::empty(), seen, Some(&ts));
        self.word(W_PARKED).store(0, Ordering::Relaxed);
    }

    /// Consumer: not going to sleep after all (it found work).
    pub fn unpark(&self) {
        self.word(W_PARKED).store(0, Ordering::Relaxed);
    }
}

/// A page and a second mapping of it, as a daemon and a client would have.
pub fn pair() -> Result<(Doorbell, Doorbell), DoorbellError> {
    let daemon = Doorbell::create()?;
    let fd = daemon
        .fd()
        .try_clone_to_owned()
        .map_err(|e| DoorbellError::Sys {
            call: "dup",
            errno: rustix::io::Errno::from_io_error(&e).unwrap_or(rustix::io::Errno::IO),
        })?;
    let client = Doorbell::from_fd(fd)?;
    Ok((daemon, client))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    #[test]
    fn a_parked_consumer_wakes_when_rung_from_another_mapping() {
        let (daemon, client) = pair().unwrap();
        let client = Arc::new(client);
        let work = Arc::new(AtomicBool::new(false));
        let (c, w) = (Arc::clone(&client), Arc::clone(&work));
        let producer = std::thread::spawn(move || {
            // Wait until the consumer is parked, then publish and ring.
            let deadline = Instant::now() + Duration::from_secs(10);
            while c.word(W_PARKED).load(Ordering::Relaxed) == 0 {
                assert!(Instant::now() < deadline, "the consumer never parked");
                std::thread::yield_now();
            }
            w.store(true, Ordering::Relaxed);
            c.ring_if_parked();
        });
        let started = Instant::now();
        let seen = daemon.park();
        if !work.load(Ordering::Relaxed) {
            daemon.sleep(seen, Duration::from_secs(30));
        }
        producer.join().unwrap();
        assert!(work.load(Ordering::Relaxed));
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "woke by the bell, not the timeout"
        );
        assert_eq!(daemon.word(W_PARKED).load(Ordering::Relaxed), 0);
    }

    #[test]
    fn an_unparked_consumer_costs_producers_no_ring() {
        let (daemon, client) = pair().unwrap();
        let before = daemon.word(W_BELL).load(Ordering::Relaxed);
        client.ring_if_parked();
        assert_eq!(daemon.word(W_BELL).load(Ordering::Relaxed), before);
        let seen = daemon.park();
        client.ring_if_parked();
        assert_ne!(daemon.word(W_BELL).load(Ordering::Relaxed), seen);
        // Rung after `park`: sleep returns at once.
        let t = Instant::now();
        daemon.sleep(seen, Duration::from_secs(30));
        assert!(t.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn other_files_are_not_doorbells() {
        let region = crate::data_region::DataRegion::create(4096).unwrap();
        let fd = region.fd().try_clone_to_owned().unwrap();
        // A data region has no magic word.
        assert_eq!(
            Doorbell::from_fd(fd).unwrap_err(),
            DoorbellError::NotADoorbell
        );
        let file = tempfile_fd();
        assert_eq!(
            Doorbell::from_fd(file).unwrap_err(),
            DoorbellError::NotADoorbell
        );
    }

    fn tempfile_fd() -> OwnedFd {
        rustix::fs::memfd_create("not-sealed", MemfdFlags::CLOEXEC).unwrap()
    }
}
