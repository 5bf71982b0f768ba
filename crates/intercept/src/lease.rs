//! The lease of one device: the fast path a launch takes while the lease
//! lives, and the slow path that ends it and asks for the next.

use crate::clock::now_ns;
use crate::link::{self, Link, RETRY_NS, Target};
use crate::memory::MemoryAccount;
use hetsched_protocol::{InterceptApi, Lease};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Longest a lease is kept by extensions, ns: the daemon charges a lease
/// when it ends, so its accounting of the device is at most this far
/// behind.
const MAX_HOLD_NS: u64 = 100_000_000;

/// A program active on the device within a lease length (and at least
/// this long) of its lease's end is busy: it asks for its next lease
/// before giving this one back, so that the unit's policy chooses between
/// it and whoever waits (by their shares) rather than serving whoever
/// happened to be waiting, ns. See [`busy`].
const BUSY_NS: u64 = 2_000_000;

/// Whether a program whose lease of `lease_ns` ends now contends for the
/// device: it is inside a launch (`launching`, a driver that runs the
/// kernel in the call) or waiting for its work (`waiting`: `clFinish`,
/// `cuStreamSynchronize`), or it launched or finished waiting within
/// `since_active_ns`. A program that waits on every call and checks it on
/// the CPU is busy all along; judged by its launches alone it looked idle
/// whenever a lease ended during a wait longer than the lease, gave the
/// device back without asking, and two such programs took turns whatever
/// their shares (half each at CUSTOM 70 / 30 on an H200).
fn busy(since_active_ns: u64, lease_ns: u64, launching: u32, waiting: u32) -> bool {
    launching > 0 || waiting > 0 || since_active_ns < lease_ns.max(BUSY_NS)
}

/// Device memory is reported at most this often, ns (a program that
/// allocates on every call would otherwise send a report each look).
const REPORT_EVERY_NS: u64 = 100_000_000;

struct Held {
    lease: Lease,
    granted_at: u64,
}

/// Everything the slow path changes, under one lock. The lock is held
/// across the round trips to the daemon on purpose: it *is* the device's
/// lease, and a launch must wait while the lease is being renewed.
struct Slot {
    link: Link,
    held: Option<Held>,
}

/// One device's lease and memory account.
pub struct DeviceLease {
    /// While `now < until_ns` launches go ahead (a live lease, or pass
    /// through while the daemon is away); 0 when neither.
    until_ns: AtomicU64,
    /// Launches between their check of `until_ns` and their return.
    launchers: AtomicU32,
    /// Calls waiting for the program's work on the device
    /// ([`DeviceLease::wait_begins`]).
    waiters: AtomicU32,
    /// When a launch last went ahead or a wait last ended, ns.
    last_active_ns: AtomicU64,
    slot: Mutex<Slot>,
    /// When the link should be (re)tried, ns: 0 not yet tried, the retry
    /// time while the daemon is away, `u64::MAX` while connected. Lets an
    /// allocation skip the slot's lock once connected.
    connect_due_ns: AtomicU64,
    pub memory: MemoryAccount,
}

impl Default for DeviceLease {
    fn default() -> Self {
        DeviceLease {
            until_ns: AtomicU64::new(0),
            launchers: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
            last_active_ns: AtomicU64::new(0),
            slot: Mutex::new(Slot {
                link: Link::Unconnected,
                held: None,
            }),
            connect_due_ns: AtomicU64::new(0),
            memory: MemoryAccount::default(),
        }
    }
}

/// What the slow path needs from its governor.
pub struct Context<'a> {
    pub api: InterceptApi,
    pub unit_name: &'a str,
    pub env_memory_limit: Option<u64>,
    /// Waits for everything the program queued on this device.
    pub drain: &'a dyn Fn(),
}

impl DeviceLease {
    /// The fast path: `true` (and the launch counted) while the lease
    /// lives. The caller must call [`DeviceLease::leave`] after launching.
    #[inline]
    pub fn enter(&self) -> bool {
        self.launchers.fetch_add(1, Ordering::SeqCst);
        let now = now_ns();
        if now < self.until_ns.load(Ordering::SeqCst) {
            self.last_active_ns.store(now, Ordering::Relaxed);
            return true;
        }
        self.launchers.fetch_sub(1, Ordering::SeqCst);
        false
    }

    #[inline]
    pub fn leave(&self) {
        self.launchers.fetch_sub(1, Ordering::SeqCst);
    }

    /// The program starts waiting for its work on this device.
    pub fn wait_begins(&self) {
        self.waiters.fetch_add(1, Ordering::SeqCst);
    }

    /// A wait [`DeviceLease::wait_begins`] counted ended: the program is
    /// back, active as of now.
    pub fn wait_ends(&self) {
        self.last_active_ns.store(now_ns(), Ordering::Relaxed);
        let _ = self
            .waiters
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| w.checked_sub(1));
    }

    /// When the current lease (or pass-through) ends, ns; 0 if none.
    pub fn until(&self) -> u64 {
        self.until_ns.load(Ordering::SeqCst)
    }

    /// Sets when the lease ends, as a grant would (tests of the governor).
    #[cfg(test)]
    pub(crate) fn set_until(&self, ns: u64) {
        self.until_ns.store(ns, Ordering::SeqCst);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The slow path: makes the lease live again, blocking until the
    /// daemon grants one (or passing through if there is no daemon).
    pub fn renew(&self, cx: &Context<'_>) {
        let mut slot = self.lock();
        let now = now_ns();
        if now < self.until_ns.load(Ordering::SeqCst) {
            return;
        }
        if self.expire_locked(&mut slot, cx, true) {
            return;
        }
        self.acquire_locked(&mut slot, cx);
    }

    /// Whether the link should be tried now (not connected, and any retry
    /// time has come).
    #[inline]
    pub fn connect_due(&self) -> bool {
        now_ns() >= self.connect_due_ns.load(Ordering::Acquire)
    }

    /// Replaces the link, keeping [`DeviceLease::connect_due`] in step.
    fn set_link(&self, slot: &mut Slot, link: Link) {
        let due = match &link {
            Link::Unconnected => 0,
            Link::Up(_) => u64::MAX,
            Link::Down { retry_at } => *retry_at,
        };
        slot.link = link;
        self.connect_due_ns.store(due, Ordering::Release);
    }

    /// Connects if needed and asks for the memory cap; the same as the
    /// first step of [`DeviceLease::renew`], for an allocation before any
    /// launch.
    pub fn ensure_connected(&self, cx: &Context<'_>) {
        let mut slot = self.lock();
        self.connect_locked(&mut slot, cx);
    }

    /// The releaser's check: ends (or extends) the lease if it ran out.
    /// `false` if it could not look because a launch holds the slot.
    pub fn expire_if_due(&self, cx: &Context<'_>) -> bool {
        let Ok(mut slot) = self.slot.try_lock() else {
            return false;
        };
        if slot.held.is_some() && now_ns() >= self.until_ns.load(Ordering::SeqCst) {
            self.expire_locked(&mut slot, cx, true);
        }
        true
    }

    /// In a forked child: the parent's connection and lease are not this
    /// process's. Drops the child's copy of the connection (closing only
    /// the child's descriptor) and starts from nothing.
    pub fn forget_after_fork(&self) {
        let mut slot = self.lock();
        slot.held = None;
        self.set_link(&mut slot, Link::Unconnected);
        self.until_ns.store(0, Ordering::SeqCst);
        self.launchers.store(0, Ordering::SeqCst);
        self.waiters.store(0, Ordering::SeqCst);
    }

    /// Takes a new cap the daemon sent (`hetsched shares set
    /// --device-memory`), and sends the memory count if it changed since
    /// the last report, at most every [`REPORT_EVERY_NS`].
    pub fn report_memory(&self) {
        let Ok(mut slot) = self.slot.try_lock() else {
            return;
        };
        if let Link::Up(c) = &mut slot.link
            && let Ok(Some(limit)) = c.client.new_terms()
        {
            self.memory.set_limit(limit);
        }
        let used = self.memory.used();
        let now = now_ns();
        if let Link::Up(c) = &mut slot.link
            && c.reported_memory != used
            && now.saturating_sub(c.reported_at) >= REPORT_EVERY_NS
        {
            let unit = c.unit;
            if c.client.report_device_memory(unit, used).is_ok() {
                c.reported_memory = used;
                c.reported_at = now;
            }
        }
    }

    /// A due lease: extended when `may_extend` and nobody waits (returns
    /// `true`, the lease lives on), else drained and given back. A busy
    /// program queues for its next lease first and, once granted, holds
    /// it (also `true`).
    fn expire_locked(&self, slot: &mut Slot, cx: &Context<'_>, may_extend: bool) -> bool {
        if slot.held.is_none() {
            return false;
        }
        if may_extend && self.extend_locked(slot, cx) {
            return true;
        }
        let Some(held) = slot.held.take() else {
            // The daemon went away while asked: nothing to give back.
            return false;
        };
        let since_active = now_ns().saturating_sub(self.last_active_ns.load(Ordering::Relaxed));
        let busy = busy(
            since_active,
            held.lease.lease_ns,
            self.launchers.load(Ordering::SeqCst),
            self.waiters.load(Ordering::SeqCst),
        );
        let next = match &mut slot.link {
            Link::Up(c) if busy => c.client.ask_lease(held.lease.unit).ok(),
            _ => None,
        };
        // Close: no launch may start, the ones in progress finish, then
        // what they queued drains.
        self.until_ns.store(0, Ordering::SeqCst);
        while self.launchers.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        (cx.drain)();
        let ran = now_ns().saturating_sub(held.granted_at);
        let Link::Up(c) = &mut slot.link else {
            return false;
        };
        let result = c
            .client
            .end_lease(held.lease, ran)
            .and_then(|()| match next {
                Some(task) => c.client.wait_lease(held.lease.unit, task).map(Some),
                None => Ok(None),
            });
        match result {
            Ok(Some(lease)) => {
                let now = now_ns();
                slot.held = Some(Held {
                    lease,
                    granted_at: now,
                });
                self.until_ns.store(now + lease.lease_ns, Ordering::SeqCst);
                true
            }
            Ok(None) => false,
            Err(e) => {
                link::note_down(cx.api, &e.to_string());
                self.set_link(
                    slot,
                    Link::Down {
                        retry_at: now_ns() + RETRY_NS,
                    },
                );
                false
            }
        }
    }

    /// Extends the held lease by another lease length, with no round
    /// trip, unless the daemon said others wait (`LeaseDue`, read from
    /// what has arrived) or it was kept [`MAX_HOLD_NS`] already; `true` if
    /// it did. A daemon that is gone leaves no lease held and the link
    /// down.
    fn extend_locked(&self, slot: &mut Slot, cx: &Context<'_>) -> bool {
        let Some(held) = slot.held.as_mut() else {
            return false;
        };
        if now_ns().saturating_sub(held.granted_at) >= MAX_HOLD_NS {
            return false;
        }
        let Link::Up(c) = &mut slot.link else {
            return false;
        };
        match c.client.lease_due(held.lease) {
            Ok(false) => {
                self.until_ns
                    .store(now_ns() + held.lease.lease_ns, Ordering::SeqCst);
                true
            }
            Ok(true) => false,
            Err(e) => {
                link::note_down(cx.api, &e.to_string());
                let retry_at = now_ns() + RETRY_NS;
                self.set_link(slot, Link::Down { retry_at });
                slot.held = None;
                self.until_ns.store(retry_at, Ordering::SeqCst);
                false
            }
        }
    }

    fn connect_locked(&self, slot: &mut Slot, cx: &Context<'_>) {
        let memory = &self.memory;
        let now = now_ns();
        let due = match slot.link {
            Link::Unconnected => true,
            Link::Down { retry_at } => now >= retry_at,
            Link::Up(_) => false,
        };
        if !due {
            return;
        }
        let target = Target {
            api: cx.api,
            unit_name: cx.unit_name,
            memory_limit: cx.env_memory_limit,
        };
        match link::connect(&target) {
            Ok(c) => {
                memory.set_limit(c.memory_limit);
                self.set_link(slot, Link::Up(Box::new(c)));
            }
            Err(why) => {
                // Without a daemon the cap the program was started with
                // still holds.
                memory.set_limit(cx.env_memory_limit);
                link::note_down(cx.api, &why);
                self.set_link(
                    slot,
                    Link::Down {
                        retry_at: now + RETRY_NS,
                    },
                );
            }
        }
    }

    fn acquire_locked(&self, slot: &mut Slot, cx: &Context<'_>) {
        self.connect_locked(slot, cx);
        let granted = match &mut slot.link {
            Link::Up(c) => c.request_lease().map_err(|e| e.to_string()),
            Link::Down { retry_at } => {
                self.until_ns.store(*retry_at, Ordering::SeqCst);
                return;
            }
            Link::Unconnected => unreachable!("connect_locked leaves it up or down"),
        };
        match granted {
            Ok(lease) => {
                let now = now_ns();
                slot.held = Some(Held {
                    lease,
                    granted_at: now,
                });
                self.until_ns.store(now + lease.lease_ns, Ordering::SeqCst);
            }
            Err(why) => {
                link::note_down(cx.api, &why);
                let retry_at = now_ns() + RETRY_NS;
                self.set_link(slot, Link::Down { retry_at });
                self.until_ns.store(retry_at, Ordering::SeqCst);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_program_in_a_launch_or_a_wait_contends_whenever_it_last_launched() {
        // Launched 12 ms ago, a 5 ms lease: idle unless still in the launch
        // or waiting for its kernels.
        assert!(!busy(12 * MS, 5 * MS, 0, 0));
        assert!(busy(12 * MS, 5 * MS, 1, 0));
        assert!(busy(12 * MS, 5 * MS, 0, 1));
        // Active within the lease length, or within BUSY_NS of a short one.
        assert!(busy(4 * MS, 5 * MS, 0, 0));
        assert!(busy(MS, MS / 4, 0, 0));
        assert!(!busy(3 * MS, MS / 4, 0, 0));
    }

    #[test]
    fn a_wait_counts_until_it_ends_and_marks_the_program_active() {
        let lease = DeviceLease::default();
        lease.wait_begins();
        lease.wait_begins();
        assert_eq!(lease.waiters.load(Ordering::SeqCst), 2);
        lease.wait_ends();
        lease.wait_ends();
        // An end without a beginning (a wait after fork) stays at zero.
        lease.wait_ends();
        assert_eq!(lease.waiters.load(Ordering::SeqCst), 0);
        let since = now_ns() - lease.last_active_ns.load(Ordering::Relaxed);
        assert!(since < 1_000 * MS, "just now: {since} ns ago");
    }
}
