//! A program's governor: one lease and one memory account per device,
//! and the releaser thread that gives leases back when they run out while
//! the program is busy elsewhere.

use crate::clock::now_ns;
use crate::env::InterceptEnv;
use crate::fork;
use crate::lease::{Context, DeviceLease};
use hetsched_protocol::InterceptApi;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

/// Devices one program may use through an interposer; calls on devices
/// past this pass through.
pub const MAX_DEVICES: usize = 64;

/// How often the releaser looks even with no lease due (memory reports).
const IDLE_LOOK: Duration = Duration::from_millis(100);

/// What an interposer tells its governor about its API.
pub struct GovernorSetup {
    pub api: InterceptApi,
    /// The daemon's unit name of device `index` (`opencl0`, `cuda1`).
    pub unit_name: fn(usize) -> String,
    /// Waits for everything the program queued on device `index`.
    pub drain: Box<dyn Fn(usize) + Send + Sync>,
}

/// The program's leases and memory accounts. One per interposer library,
/// made on its first use.
pub struct Governor {
    setup: GovernorSetup,
    env: InterceptEnv,
    devices: Vec<OnceLock<Device>>,
    /// One past the highest device index used so far: the devices a
    /// lease can be held on.
    devices_used: AtomicUsize,
    /// The fork generation the connections and the releaser belong to (a
    /// forked child starts afresh).
    fork_generation: AtomicU64,
    releaser: Mutex<Option<JoinHandle<()>>>,
    /// Whether the releaser was started (checked without its lock).
    releaser_started: AtomicBool,
    stop: AtomicBool,
    bell: (Mutex<bool>, Condvar),
}

struct Device {
    lease: DeviceLease,
    unit_name: String,
}

/// A launch in progress under a live lease (or passing through); the
/// lease cannot be given back until it is dropped.
pub struct LaunchGuard<'a> {
    lease: Option<&'a DeviceLease>,
}

impl Drop for LaunchGuard<'_> {
    fn drop(&mut self) {
        if let Some(l) = self.lease {
            l.leave();
        }
    }
}

impl Governor {
    pub fn new(setup: GovernorSetup) -> Governor {
        Governor {
            setup,
            env: InterceptEnv::from_process(),
            devices: (0..MAX_DEVICES).map(|_| OnceLock::new()).collect(),
            devices_used: AtomicUsize::new(0),
            fork_generation: AtomicU64::new(fork::generation()),
            releaser: Mutex::new(None),
            releaser_started: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            bell: (Mutex::new(false), Condvar::new()),
        }
    }

    fn device(&self, index: usize) -> Option<&Device> {
        let slot = self.devices.get(index)?;
        Some(slot.get_or_init(|| {
            self.devices_used.fetch_max(index + 1, Ordering::SeqCst);
            Device {
                lease: DeviceLease::default(),
                unit_name: (self.setup.unit_name)(index),
            }
        }))
    }

    /// Whether the lease (or pass-through) of any device has run out: a
    /// wait that finds none due need not find out which device it was on.
    #[inline]
    pub fn any_lease_due(&self) -> bool {
        let used = self.devices_used.load(Ordering::SeqCst);
        let now = now_ns();
        self.devices[..used.min(MAX_DEVICES)]
            .iter()
            .filter_map(OnceLock::get)
            .any(|d| {
                let until = d.lease.until();
                until != 0 && now >= until
            })
    }

    fn context<'a>(&'a self, unit_name: &'a str, drain: &'a dyn Fn()) -> Context<'a> {
        Context {
            api: self.setup.api,
            unit_name,
            env_memory_limit: self.env.device_memory_limit,
            drain,
        }
    }

    /// Waits until the program may launch on device `index` and returns
    /// the guard to hold while launching. Costs two atomic operations, a
    /// clock read and a store while the lease lives.
    #[inline]
    pub fn launch(&'static self, index: usize) -> LaunchGuard<'static> {
        let Some(device) = self.device(index) else {
            return LaunchGuard { lease: None };
        };
        loop {
            if device.lease.enter() {
                return LaunchGuard {
                    lease: Some(&device.lease),
                };
            }
            self.slow_path(index, device);
        }
    }

    #[cold]
    fn slow_path(&'static self, index: usize, device: &Device) {
        self.check_fork();
        let drain = || (self.setup.drain)(index);
        device.lease.renew(&self.context(&device.unit_name, &drain));
        self.ensure_releaser();
        self.ring();
    }

    /// The program starts waiting for its work on device `index`
    /// (`clFinish`, `cuCtxSynchronize`): while it waits it contends for the
    /// device. [`Governor::synchronized`] ends the wait.
    pub fn wait_begins(&'static self, index: usize) {
        if let Some(device) = self.device(index) {
            device.lease.wait_begins();
        }
    }

    /// The program waited for its work on device `index` (`clFinish`,
    /// `cuCtxSynchronize`; `waited`: after [`Governor::wait_begins`]): it
    /// is active as of now, and a lease that is due goes back now rather
    /// than at the releaser's next look.
    pub fn synchronized(&'static self, index: usize, waited: bool) {
        let Some(device) = self.device(index) else {
            return;
        };
        if waited {
            device.lease.wait_ends();
        }
        if device.lease.until() != 0 && now_ns() >= device.lease.until() {
            let drain = || (self.setup.drain)(index);
            device
                .lease
                .expire_if_due(&self.context(&device.unit_name, &drain));
        }
    }

    /// Counts an allocation of `bytes` on device `index`; `false` if it
    /// would pass the cap (count nothing; answer with the API's
    /// out-of-memory code).
    pub fn try_allocate(&'static self, index: usize, bytes: u64) -> bool {
        let Some(device) = self.device(index) else {
            return true;
        };
        self.check_fork();
        if device.lease.connect_due() {
            let drain = || (self.setup.drain)(index);
            device
                .lease
                .ensure_connected(&self.context(&device.unit_name, &drain));
            self.ensure_releaser();
        }
        device.lease.memory.try_reserve(bytes)
    }

    /// Takes back an allocation (freed, or failed after it was counted).
    pub fn freed(&self, index: usize, bytes: u64) {
        if let Some(d) = self.devices.get(index).and_then(|d| d.get()) {
            d.lease.memory.release(bytes);
        }
    }

    /// Device memory counted on device `index`, bytes.
    pub fn memory_in_use(&self, index: usize) -> u64 {
        self.devices
            .get(index)
            .and_then(|d| d.get())
            .map_or(0, |d| d.lease.memory.used())
    }

    /// The cap on device `index`, once known.
    pub fn memory_limit(&self, index: usize) -> Option<u64> {
        self.devices
            .get(index)
            .and_then(|d| d.get())
            .and_then(|d| d.lease.memory.limit())
    }

    /// A forked child shares its parent's connections: it drops them (its
    /// copies only) and starts its own.
    fn check_fork(&self) {
        let generation = fork::generation();
        if self.fork_generation.swap(generation, Ordering::SeqCst) == generation {
            return;
        }
        // The parent's releaser does not exist here; its handle is not
        // joinable from the child.
        if let Ok(mut r) = self.releaser.lock() {
            std::mem::forget(r.take());
        }
        self.releaser_started.store(false, Ordering::SeqCst);
        for d in self.devices.iter().filter_map(|d| d.get()) {
            d.lease.forget_after_fork();
        }
    }

    fn ring(&self) {
        let (lock, cv) = &self.bell;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_one();
    }

    fn ensure_releaser(&'static self) {
        if self.releaser_started.load(Ordering::Acquire) {
            return;
        }
        let mut r = self.releaser.lock().unwrap_or_else(|e| e.into_inner());
        if r.is_some() || self.stop.load(Ordering::SeqCst) {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("hetsched-lease".into())
            .spawn(move || self.releaser_loop());
        match spawned {
            Ok(h) => {
                *r = Some(h);
                self.releaser_started.store(true, Ordering::Release);
            }
            Err(e) => crate::notice::once("thread", || {
                format!("no lease releaser thread ({e}); leases go back at the next launch")
            }),
        }
    }

    /// Gives back leases that ran out while the program launched nothing,
    /// and reports memory, until [`Governor::stop`].
    fn releaser_loop(&'static self) {
        while !self.stop.load(Ordering::SeqCst) {
            let now = now_ns();
            let mut next = now + IDLE_LOOK.as_nanos() as u64;
            for (index, d) in self.devices.iter().enumerate() {
                let Some(d) = d.get() else { continue };
                d.lease.report_memory();
                let until = d.lease.until();
                if until == 0 {
                    continue;
                }
                let drain = || (self.setup.drain)(index);
                let cx = self.context(&d.unit_name, &drain);
                if now >= until {
                    if !d.lease.expire_if_due(&cx) {
                        // A launch is renewing it; look again soon.
                        next = next.min(now + 200_000);
                    }
                } else {
                    next = next.min(until);
                }
            }
            let (lock, cv) = &self.bell;
            let mut rung = lock.lock().unwrap_or_else(|e| e.into_inner());
            if !*rung {
                let wait = Duration::from_nanos(next.saturating_sub(now_ns()).max(50_000));
                rung = cv
                    .wait_timeout(rung, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            *rung = false;
        }
    }

    /// Stops and joins the releaser (the program is exiting). Leases still
    /// held go back with the connection when the process ends.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.ring();
        let handle = self
            .releaser
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(h) = handle
            && self.fork_generation.load(Ordering::SeqCst) == fork::generation()
        {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn governor() -> Governor {
        Governor::new(GovernorSetup {
            api: InterceptApi::OpenCl,
            unit_name: |i| format!("opencl{i}"),
            drain: Box::new(|_| {}),
        })
    }

    #[test]
    fn a_lease_is_due_only_once_its_time_has_passed_on_some_device() {
        let g = governor();
        assert!(!g.any_lease_due(), "no device used yet");
        let first = &g.device(0).expect("device 0").lease;
        assert!(!g.any_lease_due(), "no lease held");
        first.set_until(now_ns() + 1_000_000_000);
        assert!(!g.any_lease_due(), "the lease lives for a second");
        let fourth = &g.device(3).expect("device 3").lease;
        fourth.set_until(1);
        assert!(g.any_lease_due(), "device 3's lease ran out");
        fourth.set_until(0);
        first.set_until(1);
        assert!(g.any_lease_due(), "device 0's lease ran out");
        assert!(g.device(MAX_DEVICES).is_none());
    }
}
