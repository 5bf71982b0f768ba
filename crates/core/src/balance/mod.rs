//! Thread → core allocation policies (SmartBalance, Kinship, GTS, Linux
//! default), shared by the balancer and the simulator.
//!
//! A caller (the real balancer in `hetsched-balance`, or the simulator)
//! fills a [`BalanceInput`] every epoch from what it sensed — the cores, their
//! kinds, and per thread its measured or predicted IPS and power on every
//! core kind — and asks a policy for an [`Allocation`]:
//!
//! | policy | type | paper |
//! |---|---|---|
//! | `linux-default` | [`LinuxDefault`] | CFS load balancing, blind to core kinds |
//! | `gts` | [`Gts`] | ARM global task scheduling: up/down utilisation thresholds |
//! | `smartbalance` | [`SmartBalance`] | simulated annealing, SmartBalance Algorithm 1 |
//! | `kinship` | [`Kinship`] | K = E + F + C rematch, Kinship §3 |
//!
//! Every policy is deterministic: the same input, state and seed give the
//! same allocation. [`objective`] holds the model of what an allocation
//! yields (per-thread IPS, per-core power) that SmartBalance optimises and
//! the simulator measures with; [`hysteresis`] decides which proposed moves
//! are worth applying so threads do not bounce.

pub mod gts;
pub mod hysteresis;
pub mod kinship;
pub mod linux_default;
pub mod objective;
pub mod planted;
mod rng;
pub mod smartbalance;

pub use gts::Gts;
pub use hysteresis::{Hysteresis, HysteresisState};
pub use kinship::{Kinship, KinshipState, KinshipWeights};
pub use linux_default::LinuxDefault;
pub use objective::{
    Evaluator, Objective, PerCoreEfficiency, ProportionalFair, SystemEfficiency, Throughput,
};
pub use smartbalance::{AnnealParams, AnnealStats, SmartBalance};

use crate::unit::Capabilities;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The names the policies go by on the command line and in reports.
pub const POLICY_NAMES: [&str; 4] = ["linux-default", "gts", "smartbalance", "kinship"];

/// Power of one core of a kind, linear in the IPC of what it runs
/// (SmartBalance Eq. 9: `p = α1·IPC + α0`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PowerModel {
    /// α1: watts per unit of IPC while a thread runs.
    pub watts_per_ipc: f64,
    /// α0: watts the core draws whenever it has threads, running or
    /// stalled (leakage and clock tree).
    pub static_watts: f64,
    /// Watts while the core has no thread at all (power-gated or deep idle).
    pub sleep_watts: f64,
}

impl PowerModel {
    /// Power while running at `ipc`.
    #[inline]
    pub fn running_watts(&self, ipc: f64) -> f64 {
        self.watts_per_ipc * ipc + self.static_watts
    }
}

/// One kind of core (all cores of a kind share speed and power model).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoreKind {
    pub name: String,
    /// Throughput relative to the fastest kind for generic work, in (0, 1]
    /// (or any positive scale: only ratios are used). Policies that know no
    /// per-thread IPS (Kinship's speed term, GTS's big/little split) use it.
    pub relative_speed: f64,
    /// Clock frequency in Hz, to turn IPS into IPC for the power model.
    pub freq_hz: f64,
    pub power: PowerModel,
}

/// One core (one hardware thread the balancer can pin to).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Core {
    /// Index into [`BalanceInput::kinds`].
    pub kind: usize,
    /// ISA features of this core (AES, AVX-512 …), for functional kinship.
    pub caps: Capabilities,
    /// Whether the balancer may place threads here at all (offline or
    /// reserved cores are `false`).
    pub allowed: bool,
    /// Size of the last-level cache the core uses, when known (Kinship's
    /// cache term compares cores by it; unknown on every core turns the
    /// term off).
    #[serde(default)]
    pub llc_bytes: Option<u64>,
}

/// What a thread mostly uses, from a hint or an operator (Kinship §4.2.2:
/// `{GENERAL, VECTOR, CRYPTO, …}`, OR-able). GENERAL is the empty set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Category(pub u8);

impl Category {
    pub const GENERAL: Category = Category(0);
    /// SIMD-heavy: served by cores with AVX2, AVX-512 or FMA.
    pub const VECTOR: Category = Category(1 << 0);
    /// Cryptography: served by cores with AES or SHA instructions.
    pub const CRYPTO: Category = Category(1 << 1);
    /// Double-precision floating point: served by FP64 units.
    pub const FLOAT64: Category = Category(1 << 2);

    const SERVED_BY: [(Category, Capabilities); 3] = [
        (
            Self::VECTOR,
            Capabilities(Capabilities::AVX2.0 | Capabilities::AVX512.0 | Capabilities::FMA.0),
        ),
        (
            Self::CRYPTO,
            Capabilities(Capabilities::AES.0 | Capabilities::SHA.0),
        ),
        (Self::FLOAT64, Capabilities::FP64),
    ];

    pub fn union(self, other: Category) -> Category {
        Category(self.0 | other.0)
    }

    pub fn contains(self, other: Category) -> bool {
        self.0 & other.0 == other.0
    }

    /// The categories a core with `caps` serves (Kinship's CAP_p), so that
    /// matching is one AND of two small bitmaps.
    pub fn served_by(caps: Capabilities) -> Category {
        let mut out = Category::GENERAL;
        for (cat, needs) in Self::SERVED_BY {
            if caps.0 & needs.0 != 0 {
                out = out.union(cat);
            }
        }
        out
    }

    /// Parses `general`, `vector`, `crypto`, `float64`.
    pub fn parse(name: &str) -> Option<Category> {
        match name {
            "general" => Some(Self::GENERAL),
            "vector" => Some(Self::VECTOR),
            "crypto" => Some(Self::CRYPTO),
            "float64" => Some(Self::FLOAT64),
            _ => None,
        }
    }
}

/// Expected behaviour given by a user or operator (Kinship §4.2.2:
/// `{UNKNOWN, MOSTLY_CPU, MOSTLY_IO, …}`, OR-able). UNKNOWN is the empty set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Hint(pub u8);

impl Hint {
    pub const UNKNOWN: Hint = Hint(0);
    pub const MOSTLY_CPU: Hint = Hint(1 << 0);
    pub const MOSTLY_IO: Hint = Hint(1 << 1);
    pub const MOSTLY_MEM: Hint = Hint(1 << 2);

    /// The hint observed intensity gives when an operator gave none: a
    /// thread that wants most of a core (demand ≥ 0.7) is CPU-bound, one
    /// that sleeps most of the time (≤ 0.3) waits on something else (I/O,
    /// locks, a timer).
    pub fn from_demand(demand: f64) -> Hint {
        if demand >= 0.7 {
            Hint::MOSTLY_CPU
        } else if demand <= 0.3 {
            Hint::MOSTLY_IO
        } else {
            Hint::UNKNOWN
        }
    }

    pub fn contains(self, other: Hint) -> bool {
        other.0 != 0 && self.0 & other.0 == other.0
    }

    pub fn union(self, other: Hint) -> Hint {
        Hint(self.0 | other.0)
    }

    /// Parses `unknown`, `mostly-cpu`, `mostly-io`, `mostly-mem`.
    pub fn parse(name: &str) -> Option<Hint> {
        match name {
            "unknown" => Some(Self::UNKNOWN),
            "mostly-cpu" => Some(Self::MOSTLY_CPU),
            "mostly-io" => Some(Self::MOSTLY_IO),
            "mostly-mem" => Some(Self::MOSTLY_MEM),
            _ => None,
        }
    }
}

/// A set of core indices, as a bitmap (1024 cores fit in 16 words, and
/// membership is one shift and mask in the policies' inner loops).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CoreSet {
    words: Vec<u64>,
}

impl CoreSet {
    /// The empty set.
    pub fn new() -> Self {
        CoreSet::default()
    }

    /// Cores `0..n`.
    pub fn all(n: usize) -> Self {
        let mut s = CoreSet {
            words: vec![u64::MAX; n.div_ceil(64)],
        };
        if n % 64 != 0 {
            let last = s.words.len() - 1;
            s.words[last] = (1u64 << (n % 64)) - 1;
        }
        s
    }

    pub fn from_cores(cores: impl IntoIterator<Item = usize>) -> Self {
        let mut s = CoreSet::new();
        for c in cores {
            s.insert(c);
        }
        s
    }

    pub fn insert(&mut self, core: usize) {
        let w = core / 64;
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (core % 64);
    }

    #[inline]
    pub fn contains(&self, core: usize) -> bool {
        self.words
            .get(core / 64)
            .is_some_and(|w| w & (1 << (core % 64)) != 0)
    }

    /// Members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let bit = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(i * 64 + bit)
            })
        })
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }
}

/// What the balancer knows about one thread at the start of an epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadObs {
    /// The caller's id (a TID); policies only carry it through.
    pub id: u64,
    /// Core the thread ran on last epoch, if any (new threads have none).
    pub current: Option<usize>,
    /// Instructions per second *while running*, one entry per core kind:
    /// measured on the current kind, predicted on the others.
    pub ips: Vec<f64>,
    /// Watts drawn by a core of each kind while running this thread. Empty
    /// means "derive from the kind's power model at the thread's IPC".
    pub watts: Vec<f64>,
    /// Fraction of the epoch the thread wants to run, in [0, 1] (its CPU
    /// demand; an IO-bound thread sleeps the rest).
    pub utilisation: f64,
    pub category: Category,
    pub hint: Hint,
    /// Observed CPU intensity in [0, 1] (how much the thread gains from a
    /// faster core), when the caller measured it; `None` derives it from
    /// `ips` across kinds, or from the hint.
    pub cpu_intensity: Option<f64>,
    /// How much the thread depends on the last-level cache, in [0, 1]
    /// (Kinship's observed cache intensity `I_cache`), when the caller
    /// measured it; `None` falls back on the MOSTLY_MEM hint.
    #[serde(default)]
    pub cache_intensity: Option<f64>,
    /// Capability faults (unsupported instructions, or fallbacks to a
    /// software path) seen per core in the recent window, indexed like
    /// [`BalanceInput::cores`]; empty means none.
    pub faults: Vec<u32>,
    /// Cores this thread may run on (its affinity / cpuset); `None` = all.
    pub allowed: Option<CoreSet>,
}

impl ThreadObs {
    /// A thread with no hints, no faults, allowed everywhere.
    pub fn new(id: u64, ips: Vec<f64>, utilisation: f64) -> Self {
        ThreadObs {
            id,
            current: None,
            ips,
            watts: Vec::new(),
            utilisation,
            category: Category::GENERAL,
            hint: Hint::UNKNOWN,
            cpu_intensity: None,
            cache_intensity: None,
            faults: Vec::new(),
            allowed: None,
        }
    }

    /// Faults in the window on core `core`.
    #[inline]
    pub fn faults_on(&self, core: usize) -> u32 {
        self.faults.get(core).copied().unwrap_or(0)
    }
}

/// Everything a policy sees in one epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BalanceInput {
    pub kinds: Vec<CoreKind>,
    pub cores: Vec<Core>,
    pub threads: Vec<ThreadObs>,
    /// Watts of the rest of the platform (uncore, memory), the same under
    /// every allocation; it matters to whole-system IPS/W only.
    pub base_watts: f64,
}

/// A thread → core assignment: `core_of[i]` is the core of `threads[i]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Allocation {
    pub core_of: Vec<usize>,
}

impl Allocation {
    /// Threads whose core differs between `self` and `other`.
    pub fn moved(&self, other: &Allocation) -> usize {
        self.core_of
            .iter()
            .zip(&other.core_of)
            .filter(|(a, b)| a != b)
            .count()
    }
}

/// Why a policy cannot allocate.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum BalanceError {
    #[error("no core kinds")]
    NoKinds,
    #[error("core {core} has kind {kind}, but there are only {kinds} kinds")]
    BadKind {
        core: usize,
        kind: usize,
        kinds: usize,
    },
    #[error(
        "core kind {kind} ({name}) has a speed, frequency or power that is not positive and finite"
    )]
    BadKindFigures { kind: usize, name: String },
    #[error("thread {id} has {got} IPS entries, expected one per kind ({kinds})")]
    IpsLength { id: u64, got: usize, kinds: usize },
    #[error("thread {id} has {got} power entries, expected 0 or one per kind ({kinds})")]
    WattsLength { id: u64, got: usize, kinds: usize },
    #[error("thread {id} has a negative or non-finite IPS, power or utilisation")]
    BadThreadFigures { id: u64 },
    #[error("thread {id} may run on no allowed core")]
    NowhereToRun { id: u64 },
    #[error("allocation has {got} entries for {threads} threads")]
    AllocationLength { got: usize, threads: usize },
    #[error("allocation puts thread {id} on core {core}, which it may not use")]
    NotAllowed { id: u64, core: usize },
}

impl BalanceInput {
    /// Checks the shapes and figures every policy relies on. Policies call
    /// this first, so a caller with bad measurements gets an error instead
    /// of a panic or a NaN allocation.
    pub fn validate(&self) -> Result<(), BalanceError> {
        if self.kinds.is_empty() {
            return Err(BalanceError::NoKinds);
        }
        for (k, kind) in self.kinds.iter().enumerate() {
            let p = &kind.power;
            let ok = kind.relative_speed > 0.0
                && kind.relative_speed.is_finite()
                && kind.freq_hz > 0.0
                && kind.freq_hz.is_finite()
                && [p.watts_per_ipc, p.static_watts, p.sleep_watts]
                    .iter()
                    .all(|w| w.is_finite() && *w >= 0.0);
            if !ok {
                return Err(BalanceError::BadKindFigures {
                    kind: k,
                    name: kind.name.clone(),
                });
            }
        }
        for (c, core) in self.cores.iter().enumerate() {
            if core.kind >= self.kinds.len() {
                return Err(BalanceError::BadKind {
                    core: c,
                    kind: core.kind,
                    kinds: self.kinds.len(),
                });
            }
        }
        let kinds = self.kinds.len();
        for t in &self.threads {
            if t.ips.len() != kinds {
                return Err(BalanceError::IpsLength {
                    id: t.id,
                    got: t.ips.len(),
                    kinds,
                });
            }
            if !t.watts.is_empty() && t.watts.len() != kinds {
                return Err(BalanceError::WattsLength {
                    id: t.id,
                    got: t.watts.len(),
                    kinds,
                });
            }
            let finite = |x: &f64| x.is_finite() && *x >= 0.0;
            if !t.ips.iter().all(finite)
                || !t.watts.iter().all(finite)
                || !finite(&t.utilisation)
                || t.cpu_intensity.is_some_and(|i| !finite(&i))
                || t.cache_intensity.is_some_and(|i| !finite(&i))
            {
                return Err(BalanceError::BadThreadFigures { id: t.id });
            }
            if !(0..self.cores.len()).any(|c| self.may_run(t, c)) {
                return Err(BalanceError::NowhereToRun { id: t.id });
            }
        }
        Ok(())
    }

    /// Whether `thread` may run on `core`: the core is allowed and in the
    /// thread's set (Kinship's C term is −∞ exactly when this is false).
    #[inline]
    pub fn may_run(&self, thread: &ThreadObs, core: usize) -> bool {
        self.cores[core].allowed && thread.allowed.as_ref().is_none_or(|s| s.contains(core))
    }

    /// Cores thread `i` may run on, in increasing order.
    pub fn allowed_cores(&self, i: usize) -> Vec<usize> {
        let t = &self.threads[i];
        (0..self.cores.len())
            .filter(|&c| self.may_run(t, c))
            .collect()
    }

    /// Checks that `alloc` covers every thread and respects allowed sets.
    pub fn check(&self, alloc: &Allocation) -> Result<(), BalanceError> {
        if alloc.core_of.len() != self.threads.len() {
            return Err(BalanceError::AllocationLength {
                got: alloc.core_of.len(),
                threads: self.threads.len(),
            });
        }
        for (t, &c) in self.threads.iter().zip(&alloc.core_of) {
            if c >= self.cores.len() || !self.may_run(t, c) {
                return Err(BalanceError::NotAllowed { id: t.id, core: c });
            }
        }
        Ok(())
    }

    /// The current allocation where every thread has a usable current
    /// core; threads without one (or whose core is no longer allowed) go to
    /// their first allowed core. The starting point of annealing and of the
    /// Linux balancer.
    pub fn current_allocation(&self) -> Allocation {
        Allocation {
            core_of: (0..self.threads.len())
                .map(|i| {
                    let t = &self.threads[i];
                    match t.current {
                        Some(c) if c < self.cores.len() && self.may_run(t, c) => c,
                        _ => self.allowed_cores(i)[0],
                    }
                })
                .collect(),
        }
    }

    /// Power of a core of `kind` while running thread `i`: the measured
    /// figure when given, else the kind's model at the thread's IPC.
    #[inline]
    pub fn thread_watts(&self, i: usize, kind: usize) -> f64 {
        let t = &self.threads[i];
        match t.watts.get(kind) {
            Some(&w) => w,
            None => {
                let k = &self.kinds[kind];
                k.power.running_watts(t.ips[kind] / k.freq_hz)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_set_all_and_iter_agree() {
        for n in [0, 1, 63, 64, 65, 130] {
            let s = CoreSet::all(n);
            assert_eq!(s.iter().collect::<Vec<_>>(), (0..n).collect::<Vec<_>>());
            assert!(!s.contains(n));
        }
        let s = CoreSet::from_cores([3, 70, 5]);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![3, 5, 70]);
        assert!(CoreSet::new().is_empty());
    }

    #[test]
    fn categories_match_capabilities() {
        let aes = Category::served_by(Capabilities::AES);
        assert!(aes.contains(Category::CRYPTO));
        assert!(!aes.contains(Category::VECTOR));
        let both = Category::served_by(Capabilities::AES.union(Capabilities::AVX512));
        assert_eq!(both, Category::CRYPTO.union(Category::VECTOR));
        assert_eq!(
            Category::served_by(Capabilities::empty()),
            Category::GENERAL
        );
    }
}
