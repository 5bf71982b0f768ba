//! The simulated hardware and threads: core kinds with a peak IPC, clock
//! and power (SmartBalance Table 2 and the Kinship platforms), and thread
//! profiles from which each thread's true IPC, useful work rate and power
//! on every kind follow.
//!
//! IPC of a thread on a kind is `1 / CPI` with
//! `CPI = 1 / (peak_IPC · ilp) + misses_per_instruction · memory_latency · f`:
//! a core's width helps only the thread's instruction-level parallelism,
//! and a memory miss costs the same nanoseconds on every core, hence more
//! cycles on a faster clock. So compute-bound threads gain the full speed
//! difference between kinds and memory-bound threads much less, which is
//! the diversity both papers exploit. Power is SmartBalance's Eq. 9,
//! linear in IPC, with `α0` a fixed fraction of the kind's peak power.

use hetsched_core::balance::{Category, CoreKind, Hint, PowerModel};
use hetsched_core::unit::Capabilities;

/// Memory latency seen by a last-level miss, the same on every kind.
pub const MEMORY_LATENCY_NS: f64 = 80.0;

/// Fraction of a kind's peak power that is static (α0), drawn whenever the
/// core has threads. Leakage at 22 nm is commonly put at a quarter to a
/// third of total power; we take a quarter.
pub const STATIC_FRACTION: f64 = 0.25;

/// Share of LLC references that miss even when the working set fits
/// (first touches, conflicts).
pub const COMPULSORY_MISS_FRACTION: f64 = 0.02;

/// One kind of simulated core.
#[derive(Clone, Debug)]
pub struct SimKind {
    pub name: &'static str,
    pub freq_hz: f64,
    pub peak_ipc: f64,
    /// Power at peak IPC.
    pub peak_watts: f64,
    pub caps: Capabilities,
    /// Last-level cache per core, MiB; `None` leaves every thread's miss
    /// rate as its profile gives it.
    pub llc_mb: Option<f64>,
}

impl SimKind {
    /// The kind as the policies see it: speed is peak IPS relative to
    /// the fastest kind of the machine, power the linear model.
    pub fn to_core_kind(&self, fastest_peak_ips: f64) -> CoreKind {
        let static_watts = STATIC_FRACTION * self.peak_watts;
        CoreKind {
            name: self.name.to_string(),
            relative_speed: self.peak_ipc * self.freq_hz / fastest_peak_ips,
            freq_hz: self.freq_hz,
            power: PowerModel {
                watts_per_ipc: (self.peak_watts - static_watts) / self.peak_ipc,
                static_watts,
                // Empty cores are power-gated (hotplugged), as mobile SoCs do.
                sleep_watts: 0.0,
            },
        }
    }

    pub fn peak_ips(&self) -> f64 {
        self.peak_ipc * self.freq_hz
    }
}

/// SmartBalance Table 2: Huge, Big, Medium and Small cores (issue width 8,
/// 4, 2, 1; 2000, 1500, 1000, 500 MHz; peak IPC and power from Gem5/McPAT).
pub fn table2() -> [SimKind; 4] {
    let kind = |name, mhz: f64, ipc, watts| SimKind {
        name,
        freq_hz: mhz * 1e6,
        peak_ipc: ipc,
        peak_watts: watts,
        caps: Capabilities::empty(),
        llc_mb: None,
    };
    [
        kind("huge", 2000.0, 4.18, 8.62),
        kind("big", 1500.0, 2.60, 4.41),
        kind("medium", 1000.0, 1.31, 0.53),
        kind("small", 500.0, 0.91, 0.095),
    ]
}

/// A kind of thread.
#[derive(Clone, Debug)]
pub struct Profile {
    pub name: &'static str,
    /// Fraction of a core's peak IPC the thread's parallelism can use.
    pub ilp: f64,
    /// Last-level misses per thousand instructions (where the working set
    /// and the cache size are not both known).
    pub mpki: f64,
    /// Memory the thread touches over and over, MiB: with a kind's cache
    /// size, it sets the miss rate on that kind.
    pub working_set_mb: Option<f64>,
    /// Fraction of the time the thread is runnable.
    pub util: f64,
    pub category: Category,
    pub hint: Hint,
    /// Useful work lost when a core lacks what `category` needs (the
    /// thread falls back to a software path this many times slower).
    pub emulation_slowdown: f64,
}

impl Profile {
    pub const fn new(name: &'static str, ilp: f64, mpki: f64, util: f64) -> Self {
        Profile {
            name,
            ilp,
            mpki,
            working_set_mb: None,
            util,
            category: Category::GENERAL,
            hint: Hint::UNKNOWN,
            emulation_slowdown: 1.0,
        }
    }

    pub const fn hinted(mut self, hint: Hint) -> Self {
        self.hint = hint;
        self
    }

    pub const fn working_set(mut self, mb: f64) -> Self {
        self.working_set_mb = Some(mb);
        self
    }

    /// LLC references per thousand instructions: every miss was one, and a
    /// thread makes at least ten.
    pub fn llc_refs_pki(&self) -> f64 {
        (self.mpki * 3.0).max(10.0)
    }

    /// Last-level misses per thousand instructions on `kind`. With a
    /// working set and a cache size, a reference hits with the chance the
    /// cache holds the block (accesses spread over the working set), and
    /// at least [`COMPULSORY_MISS_FRACTION`] of references miss.
    pub fn mpki_on(&self, kind: &SimKind) -> f64 {
        match (self.working_set_mb, kind.llc_mb) {
            (Some(ws), Some(llc)) if ws > 0.0 => {
                self.llc_refs_pki() * (1.0 - llc / ws).clamp(COMPULSORY_MISS_FRACTION, 1.0)
            }
            _ => self.mpki,
        }
    }

    pub const fn needs(mut self, category: Category, slowdown: f64) -> Self {
        self.category = category;
        self.emulation_slowdown = slowdown;
        self
    }

    /// Instructions per cycle while running on `kind`.
    pub fn ipc(&self, kind: &SimKind) -> f64 {
        let cpi = 1.0 / (kind.peak_ipc * self.ilp)
            + self.mpki_on(kind) / 1000.0 * MEMORY_LATENCY_NS * kind.freq_hz / 1e9;
        1.0 / cpi
    }

    /// Instructions per second while running on `kind` (what a counter
    /// sees, whether or not the instructions are an emulation path).
    pub fn ips(&self, kind: &SimKind) -> f64 {
        self.ipc(kind) * kind.freq_hz
    }

    /// Whether `kind` serves everything this thread needs.
    pub fn capable(&self, kind: &SimKind) -> bool {
        Category::served_by(kind.caps).contains(self.category)
    }

    /// Useful work per second while running on `kind`, in instructions of
    /// the native path.
    pub fn useful_ips(&self, kind: &SimKind) -> f64 {
        if self.capable(kind) {
            self.ips(kind)
        } else {
            self.ips(kind) / self.emulation_slowdown
        }
    }

    /// Watts of a `kind` core while running this thread.
    pub fn watts(&self, kind: &SimKind, fastest_peak_ips: f64) -> f64 {
        kind.to_core_kind(fastest_peak_ips)
            .power
            .running_watts(self.ipc(kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_bound_threads_gain_less_from_big_cores() {
        let [huge, _, _, small] = table2();
        let compute = Profile::new("c", 0.9, 0.5, 1.0);
        let memory = Profile::new("m", 0.5, 25.0, 1.0);
        let gain = |p: &Profile| p.ips(&huge) / p.ips(&small);
        assert!(gain(&compute) > 2.0 * gain(&memory));
        // At peak-like behaviour the model gives back Table 2's power.
        let peak = Profile::new("p", 1.0, 0.0, 1.0);
        let w = peak.watts(&huge, huge.peak_ips());
        assert!((w - 8.62).abs() < 1e-9);
    }
}
