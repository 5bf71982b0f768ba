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

/// How long before a lease's end the releaser asks to extend it, ns, so
/// that the round trip is not on the program's launch path.
pub const EXTEND_EARLY_NS: u64 = 300_000;

struct Held {
    lease: Lease,
    granted_at: u64,
    /// The daemon said another request waits: the lease goes back at its
    /// end, without asking again.
    due: bool,
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
    slot: Mutex<Slot>,
    pub memory: MemoryAccount,
}

impl Default for DeviceLease {
    fn default() -> Self {
        DeviceLease {
            until_ns: AtomicU64::new(0),
            launchers: AtomicU32::new(0),
            slot: Mutex::new(Slot {
                link: Link::Unconnected,
                held: None,
            }),
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
        if now_ns() < self.until_ns.load(Ordering::SeqCst) {
            return true;
        }
        self.launchers.fetch_sub(1, Ordering::SeqCst);
        false
    }

    #[inline]
    pub fn leave(&self) {
        self.launchers.fetch_sub(1, Ordering::SeqCst);
    }

    /// When the current lease (or pass-through) ends, ns; 0 if none.
    pub fn until(&self) -> u64 {
        self.until_ns.load(Ordering::SeqCst)
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

    /// Connects if needed and asks for the memory cap; the same as the
    /// first step of [`DeviceLease::renew`], for an allocation before any
    /// launch.
    pub fn ensure_connected(&self, cx: &Context<'_>) {
        let mut slot = self.lock();
        Self::connect_locked(&mut slot, cx, &self.memory);
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
        slot.link = Link::Unconnected;
        self.until_ns.store(0, Ordering::SeqCst);
        self.launchers.store(0, Ordering::SeqCst);
    }

    /// Sends the memory count if it changed since the last report.
    pub fn report_memory(&self) {
        let Ok(mut slot) = self.slot.try_lock() else {
            return;
        };
        let used = self.memory.used();
        if let Link::Up(c) = &mut slot.link
            && c.reported_memory != used
        {
            let unit = c.unit;
            if c.client.report_device_memory(unit, used).is_ok() {
                c.reported_memory = used;
            }
        }
    }

    /// A due lease: extended when `may_extend` and the daemon agrees
    /// (returns `true`, the lease lives on), else drained and given back.
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
        // Close: no launch may start, the ones in progress finish, then
        // what they queued drains.
        self.until_ns.store(0, Ordering::SeqCst);
        while self.launchers.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        (cx.drain)();
        let ran = now_ns().saturating_sub(held.granted_at);
        if let Link::Up(c) = &mut slot.link
            && let Err(e) = c.client.end_lease(held.lease, ran)
        {
            link::note_down(cx.api, &e.to_string());
            slot.link = Link::Down {
                retry_at: now_ns() + RETRY_NS,
            };
        }
        false
    }

    /// Asks the daemon to extend the held lease (once per lease, and not
    /// past [`MAX_HOLD_NS`]); `true` if it did, and the lease then lives
    /// another lease length from now. A daemon that is gone leaves no
    /// lease held and the link down.
    fn extend_locked(&self, slot: &mut Slot, cx: &Context<'_>) -> bool {
        let Some(held) = slot.held.as_mut() else {
            return false;
        };
        if held.due || now_ns().saturating_sub(held.granted_at) >= MAX_HOLD_NS {
            return false;
        }
        let Link::Up(c) = &mut slot.link else {
            return false;
        };
        match c.client.extend_lease(held.lease) {
            Ok(Some(l)) => {
                self.until_ns.store(now_ns() + l.lease_ns, Ordering::SeqCst);
                true
            }
            Ok(None) => {
                held.due = true;
                false
            }
            Err(e) => {
                link::note_down(cx.api, &e.to_string());
                let retry_at = now_ns() + RETRY_NS;
                slot.link = Link::Down { retry_at };
                slot.held = None;
                self.until_ns.store(retry_at, Ordering::SeqCst);
                false
            }
        }
    }

    /// The releaser's look shortly before the lease ends: asks to extend
    /// it now, off the program's launch path.
    pub fn extend_early(&self, cx: &Context<'_>) {
        let Ok(mut slot) = self.slot.try_lock() else {
            return;
        };
        let until = self.until_ns.load(Ordering::SeqCst);
        let now = now_ns();
        if slot.held.is_some() && now < until && now + EXTEND_EARLY_NS >= until {
            self.extend_locked(&mut slot, cx);
        }
    }

    /// Whether the held lease was refused an extension (it goes back at
    /// its end) or there is none.
    pub fn extension_settled(&self) -> bool {
        self.slot
            .try_lock()
            .map_or(true, |s| s.held.as_ref().is_none_or(|h| h.due))
    }

    fn connect_locked(slot: &mut Slot, cx: &Context<'_>, memory: &MemoryAccount) {
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
                slot.link = Link::Up(Box::new(c));
            }
            Err(why) => {
                // Without a daemon the cap the program was started with
                // still holds.
                memory.set_limit(cx.env_memory_limit);
                link::note_down(cx.api, &why);
                slot.link = Link::Down {
                    retry_at: now + RETRY_NS,
                };
            }
        }
    }

    fn acquire_locked(&self, slot: &mut Slot, cx: &Context<'_>) {
        Self::connect_locked(slot, cx, &self.memory);
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
                    due: false,
                });
                self.until_ns.store(now + lease.lease_ns, Ordering::SeqCst);
            }
            Err(why) => {
                link::note_down(cx.api, &why);
                let retry_at = now_ns() + RETRY_NS;
                slot.link = Link::Down { retry_at };
                self.until_ns.store(retry_at, Ordering::SeqCst);
            }
        }
    }
}
