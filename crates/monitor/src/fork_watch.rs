//! Who forked whom, as it happens: the kernel's process events (the proc
//! connector, a netlink socket; root only), so that a process orphaned
//! (reparented to init) a moment after it was forked still shows the
//! ancestors it had. `/proc` shows only the parent a process has now; the
//! once-a-second scan of `monitor::lineage` records the descendants of
//! processes with settings that live past it, and this log the ones that
//! do not: at each connection, the daemon adds the ancestors the log
//! recorded to those `/proc` shows ([`ForkWatch::ancestors`]).
//!
//! The log keeps the latest fork of each pid, at most [`MAX_FORKS`] of
//! them (the oldest go first): by the time one is dropped, the scan has
//! long recorded a descendant that still lives. A chain is followed only
//! back in time (each parent forked before its child), so a pid reused
//! meanwhile is never taken for the process that had it.
//!
//! Where the proc connector cannot be opened (not root, another network
//! namespace, a unit that forbids netlink sockets), the daemon says so
//! once and relies on the scan alone.

use crate::procfs;
use crate::store::ProcessKey;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use rustix::net::netlink::{self, SocketAddrNetlink};
use rustix::net::{AddressFamily, RecvFlags, SocketFlags, SocketType};
use std::collections::{HashMap, VecDeque};
use std::os::fd::OwnedFd;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Forks kept.
pub const MAX_FORKS: usize = 65_536;
/// Most ancestors followed from one process.
const MAX_DEPTH: usize = 64;
/// The socket's receive buffer, bytes: about 40,000 events.
const RECV_BUFFER: usize = 4 << 20;
/// Most datagrams (one event each, as the kernel sends them) read at once.
const MAX_DATAGRAMS_PER_DRAIN: usize = 1024;

// <linux/connector.h>, <linux/cn_proc.h>, <linux/netlink.h>.
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_EVENT_FORK: u32 = 1;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDR: usize = 16;
const CN_MSG: usize = 20;
const PROC_EVENT_HDR: usize = 16;

/// One fork: the new process, and the process that forked it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fork {
    parent: u32,
    /// The child's start time (`/proc/PID/stat`), when it could be read.
    start_time: Option<u64>,
    /// Order of arrival.
    seq: u64,
}

#[derive(Debug, Default)]
struct ForkLog {
    by_child: HashMap<u32, Fork>,
    order: VecDeque<(u32, u64)>,
    next_seq: u64,
}

impl ForkLog {
    fn record(&mut self, child: u32, parent: u32, start_time: Option<u64>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.by_child.insert(
            child,
            Fork {
                parent,
                start_time,
                seq,
            },
        );
        self.order.push_back((child, seq));
        while self.order.len() > MAX_FORKS {
            let Some((pid, seq)) = self.order.pop_front() else {
                break;
            };
            // Only if it was not forked again since.
            if self.by_child.get(&pid).is_some_and(|f| f.seq == seq) {
                self.by_child.remove(&pid);
            }
        }
    }

    /// The processes `pid` descends from by the recorded forks, nearest
    /// first: each forked before the one after it. A start time is given
    /// where it was read at the fork.
    fn chain(&self, pid: u32) -> Vec<(u32, Option<u64>)> {
        let mut out = Vec::new();
        let Some(mut at) = self.by_child.get(&pid).copied() else {
            return out;
        };
        while out.len() < MAX_DEPTH {
            let parent = at.parent;
            if parent <= 1 {
                break;
            }
            match self.by_child.get(&parent).copied() {
                Some(up) if up.seq < at.seq => {
                    out.push((parent, up.start_time));
                    at = up;
                }
                // Forked before the log began, or its pid was reused by a
                // later fork: the chain ends with it (its start time, if
                // it still lives, from /proc).
                _ => {
                    out.push((parent, None));
                    break;
                }
            }
        }
        out
    }
}

/// The proc connector's socket and the forks read from it.
#[derive(Debug)]
pub struct ForkWatch {
    socket: OwnedFd,
    log: Mutex<ForkLog>,
}

impl ForkWatch {
    /// Subscribes to the kernel's process events.
    pub fn open() -> std::io::Result<ForkWatch> {
        let socket = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            Some(netlink::CONNECTOR),
        )?;
        // Every process event of the machine arrives here; a burst of
        // them between two reads must not overflow the socket and lose a
        // fork (root may pass the system's limit; best effort).
        let _ = rustix::net::sockopt::set_socket_recv_buffer_size_force(&socket, RECV_BUFFER)
            .or_else(|_| rustix::net::sockopt::set_socket_recv_buffer_size(&socket, RECV_BUFFER));
        rustix::net::bind(&socket, &SocketAddrNetlink::new(0, CN_IDX_PROC))?;
        let mut msg = Vec::with_capacity(NLMSG_HDR + CN_MSG + 4);
        let len = (NLMSG_HDR + CN_MSG + 4) as u32;
        msg.extend_from_slice(&len.to_ne_bytes());
        msg.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        msg.extend_from_slice(&0u16.to_ne_bytes()); // flags
        msg.extend_from_slice(&0u32.to_ne_bytes()); // seq
        msg.extend_from_slice(&std::process::id().to_ne_bytes());
        msg.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
        msg.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
        msg.extend_from_slice(&0u32.to_ne_bytes()); // seq
        msg.extend_from_slice(&0u32.to_ne_bytes()); // ack
        msg.extend_from_slice(&4u16.to_ne_bytes()); // len
        msg.extend_from_slice(&0u16.to_ne_bytes()); // flags
        msg.extend_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
        rustix::net::send(&socket, &msg, rustix::net::SendFlags::empty())?;
        Ok(ForkWatch {
            socket,
            log: Mutex::new(ForkLog::default()),
        })
    }

    fn log(&self) -> MutexGuard<'_, ForkLog> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads every event that has arrived into the log. The log's lock is
    /// held meanwhile (a leaf: only this socket and `/proc/PID/stat` of
    /// the new processes are read under it), so that a caller that then
    /// reads the log sees every fork the kernel reported before.
    pub fn drain(&self) {
        let mut log = self.log();
        let mut buf = [0u8; 8192];
        // Bounded, so that a storm of forks cannot hold the lock (and a
        // connecting client) for long; what is left is read next time.
        for _ in 0..MAX_DATAGRAMS_PER_DRAIN {
            match rustix::net::recv(&self.socket, &mut buf, RecvFlags::DONTWAIT) {
                Ok((n, _)) => {
                    for (child, parent) in forks(&buf[..n.min(buf.len())]) {
                        log.record(child, parent, procfs::start_time(child));
                    }
                }
                Err(Errno::INTR) => {}
                // Nothing more; or the socket's buffer overflowed and
                // events were lost (the scan covers what lives on).
                Err(_) => return,
            }
        }
    }

    /// Waits up to `timeout` for events, then reads them.
    pub fn wait(&self, timeout: Duration) {
        let ts = Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        let mut fds = [PollFd::new(&self.socket, PollFlags::IN)];
        if poll(&mut fds, Some(&ts)).is_ok_and(|n| n > 0) {
            self.drain();
        }
    }

    /// The ancestors of process `key` that the recorded forks show,
    /// nearest first, with their start times (read from `/proc` for those
    /// whose fork was not recorded but still live). Events that arrived
    /// are read first.
    pub fn ancestors(&self, key: ProcessKey) -> Vec<ProcessKey> {
        self.drain();
        let chain = {
            let log = self.log();
            // The log's latest fork of this pid must be this process.
            match log.by_child.get(&key.pid) {
                Some(f) if f.start_time.is_none_or(|t| t == key.start_time) => log.chain(key.pid),
                _ => return Vec::new(),
            }
        };
        keys_of(chain, key.start_time, procfs::start_time)
    }
}

/// The ancestors of a chain as process keys, nearest first: each started
/// no later than the one below it (`younger` for the first). A start time
/// missing from the log is read with `start_time_of`; a process gone by
/// then is skipped.
fn keys_of(
    chain: Vec<(u32, Option<u64>)>,
    mut younger: u64,
    start_time_of: impl Fn(u32) -> Option<u64>,
) -> Vec<ProcessKey> {
    let mut out = Vec::new();
    for (pid, start_time) in chain {
        let Some(start_time) = start_time.or_else(|| start_time_of(pid)) else {
            // Gone before its fork was read (the middle process of a
            // double fork exits at once): it holds no settings, and the
            // log's order already vouches for the ones above it.
            continue;
        };
        if start_time > younger {
            break; // not the process that forked it
        }
        out.push(ProcessKey { pid, start_time });
        younger = start_time;
    }
    out
}

/// The process forks (child, parent) in one datagram of process events;
/// new threads and other events are left out.
fn forks(datagram: &[u8]) -> Vec<(u32, u32)> {
    let u32_at = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let mut out = Vec::new();
    let mut rest = datagram;
    while rest.len() >= NLMSG_HDR {
        let Some(len) = u32_at(rest, 0).map(|l| l as usize) else {
            break;
        };
        if len < NLMSG_HDR || len > rest.len() {
            break;
        }
        let msg = &rest[NLMSG_HDR..len];
        let event = msg.get(CN_MSG..).unwrap_or(&[]);
        if u32_at(event, 0) == Some(PROC_EVENT_FORK) {
            let data = &event[PROC_EVENT_HDR.min(event.len())..];
            // parent_pid, parent_tgid, child_pid, child_tgid
            if let (Some(parent_tgid), Some(child_pid), Some(child_tgid)) =
                (u32_at(data, 4), u32_at(data, 8), u32_at(data, 12))
                && child_pid == child_tgid
            {
                out.push((child_tgid, parent_tgid));
            }
        }
        let aligned = (len + 3) & !3;
        rest = rest.get(aligned..).unwrap_or(&[]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(what: u32, parent_tgid: u32, child_pid: u32, child_tgid: u32) -> Vec<u8> {
        let mut m = Vec::new();
        let len = (NLMSG_HDR + CN_MSG + PROC_EVENT_HDR + 16) as u32;
        m.extend_from_slice(&len.to_ne_bytes());
        m.extend_from_slice(&[0u8; 12]);
        m.extend_from_slice(&[0u8; CN_MSG]);
        m.extend_from_slice(&what.to_ne_bytes());
        m.extend_from_slice(&[0u8; 12]);
        for v in [parent_tgid, parent_tgid, child_pid, child_tgid] {
            m.extend_from_slice(&v.to_ne_bytes());
        }
        m
    }

    #[test]
    fn process_forks_are_read_and_threads_and_other_events_left_out() {
        let mut d = event(PROC_EVENT_FORK, 10, 11, 11);
        d.extend(event(PROC_EVENT_FORK, 10, 12, 10)); // a thread of 10
        d.extend(event(2, 10, 13, 13)); // exec
        d.extend(event(PROC_EVENT_FORK, 11, 14, 14));
        assert_eq!(forks(&d), vec![(11, 10), (14, 11)]);
        assert_eq!(forks(&d[..10]), vec![]);
    }

    #[test]
    fn a_middle_process_gone_before_its_fork_was_read_is_skipped() {
        // 20 forked 21, which forked 22 and exited before the daemon read
        // the forks: 21's start time is unknown and /proc has none.
        let chain = vec![(21, None), (20, Some(200))];
        let alive = |pid: u32| (pid == 20).then_some(200);
        assert_eq!(
            keys_of(chain, 220, alive),
            vec![ProcessKey {
                pid: 20,
                start_time: 200
            }]
        );
        // An ancestor younger than its descendant is a reused pid.
        assert_eq!(keys_of(vec![(20, Some(300))], 220, alive), vec![]);
    }

    #[test]
    fn chains_go_back_in_time_only() {
        let mut log = ForkLog::default();
        log.record(11, 10, Some(110));
        log.record(12, 11, Some(120));
        assert_eq!(log.chain(12), vec![(11, Some(110)), (10, None)]);
        // 11 exits and its pid is reused by a later fork elsewhere: 12's
        // chain stops at 11, whose record is now the later process's.
        log.record(11, 50, Some(130));
        assert_eq!(log.chain(12), vec![(11, None)]);
        assert_eq!(log.chain(99), vec![]);
    }

    #[test]
    fn the_log_keeps_the_latest_forks() {
        let mut log = ForkLog::default();
        for pid in 2..(MAX_FORKS as u32 + 12) {
            log.record(pid, 1, None);
        }
        assert_eq!(log.by_child.len(), MAX_FORKS);
        assert!(!log.by_child.contains_key(&2));
        assert!(log.by_child.contains_key(&(MAX_FORKS as u32 + 11)));
    }
}
