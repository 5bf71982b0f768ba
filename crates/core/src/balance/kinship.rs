//! Kinship rematch (Kinship §3, Montage §4.2.1): score every (thread, core)
//! pair by `K = E + F + C` and hand cores out in kinship order.
//!
//! - **E, performance kinship** (Eq. 4–6 with the correlations ρ set to 0,
//!   as the paper does): `w_E · (w_cpu · EXP_cpu · G_p + w_io · I_io ·
//!   EXP_io + w_cache · I_cache · EXP_cache · C_p) · L_p`. `I_cpu` is the observed CPU intensity: the fraction of
//!   the speed difference between the slowest and the fastest kind that
//!   shows in the thread's IPS; `G_p = s_min + I_cpu · (s_p − s_min)`, with
//!   speeds relative to the fastest core, is then the thread's expected
//!   speed on `p` (exact at the fastest and slowest kind). `I_io` is the
//!   fraction of time it waits, `EXP` comes from the hint (MOSTLY_CPU,
//!   MOSTLY_IO, …), `I_cache` the observed cache intensity (or 0.5 for a
//!   MOSTLY_MEM hint, else 0), `C_p` the core's last-level cache relative
//!   to the largest (0 where unknown, so the term is off on machines whose
//!   caches nobody reported), and the load factor
//!   `L_p = 1 / max(1, Σ u + u_v)` over threads already matched to `p` in
//!   this rematch is the core's remaining strength: the fraction of its
//!   demand the thread would get there.
//! - **F, functional kinship** (Eq. 9): `w_F · MF · FV`, with the match
//!   factor `MF = 1 + match_value · |CAT_v ∧ CAP_p|` and the fault value
//!   `FV = 1` without faults, else `faults_TW · (−1 + emulated / (1 +
//!   emulation_cost))`, which turns F negative and growing with the faults
//!   of the moving window. Faults are observed per core; a fault on one
//!   core counts on every core with the same capabilities, since the same
//!   instruction is missing there.
//! - **C, allowed set** (Eq. 2): 0 inside the thread's allowed cores, −∞
//!   outside; we skip those cores instead of adding −∞.
//!
//! Threads are matched from the highest kinship down (§3.7), so the
//! best-matched thread gets first pick; the holder of the round-robin
//! *fairness token* has its priority multiplied up so fast cores rotate
//! among threads over rematches. Cost: O(threads × cores) per rematch.
//!
//! Two deliberate departures: `G_p` is the thread's expected speed relative
//! to the fastest core (the paper's `I_cpu · S_p² / S_min` grows without
//! bound on very asymmetric machines and would drown F, whose scale is
//! fixed, and it credits a memory-bound thread with speed it cannot use),
//! and the load factor uses the threads' demand rather than Xen credits,
//! which a thread balancer does not have.

use super::{Allocation, BalanceError, BalanceInput, Category, Hint};
use crate::unit::Capabilities;

/// The weights of Eq. 2 and Eq. 4 and the fault model of Eq. 9b.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KinshipWeights {
    /// w_E: weight of performance kinship.
    pub performance: f64,
    /// w_F: weight of functional kinship.
    pub functional: f64,
    /// w_cpu, w_io and w_cache: relative importance of the resources in E.
    pub cpu: f64,
    pub io: f64,
    pub cache: f64,
    /// Added to the match factor per category the core serves for the
    /// thread (the paper uses the raw bitmap value, so higher bits weigh
    /// more; a weight says the same without tying it to bit positions).
    pub match_value: f64,
    /// Whether a faulting instruction is emulated (slow) rather than
    /// forcing a migration, and how many times slower emulation is.
    pub emulated: bool,
    pub emulation_cost: f64,
    /// Priority multiplier of the fairness-token holder, minus one.
    pub fairness_boost: f64,
}

impl Default for KinshipWeights {
    /// All weights 1 as in the paper's experiments (§5.2); a match is worth
    /// two units of F so that a category match outweighs a 2× speed
    /// difference in E. The token holder overtakes threads whose kinship is
    /// within 25 % of its own: enough to rotate fast cores among similar
    /// threads, not enough to hand a fast core to a thread that gains
    /// nothing from it (a doubling did that in kinship-usecase2, costing
    /// a migration cascade every rematch).
    fn default() -> Self {
        KinshipWeights {
            performance: 1.0,
            functional: 1.0,
            cpu: 1.0,
            io: 1.0,
            cache: 1.0,
            match_value: 2.0,
            emulated: false,
            emulation_cost: 1.0,
            fairness_boost: 0.25,
        }
    }
}

/// What Kinship keeps between rematches: who holds the fairness token.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KinshipState {
    /// Id of the thread holding the token (passed on every rematch).
    pub token: Option<u64>,
    /// Rematches run so far.
    pub rematches: u64,
}

/// The Kinship policy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kinship {
    pub weights: KinshipWeights,
}

/// Per-thread factors of K that do not depend on the core.
#[derive(Clone, Debug)]
struct ThreadTerms {
    /// w_E · w_cpu · EXP_cpu: multiplies the expected speed on the core.
    cpu: f64,
    /// I_cpu.
    intensity: f64,
    /// w_E · w_io · I_io · EXP_io: the same on every core.
    io: f64,
    /// w_E · w_cache · I_cache · EXP_cache: multiplies the core's relative
    /// last-level cache.
    cache: f64,
    category: Category,
    demand: f64,
    /// Per-fault value of Eq. 9b (negative), times w_F.
    fault_unit: f64,
    /// Faults of the window summed per capability set of the cores they
    /// were seen on; empty for the (usual) thread without faults.
    faults_by_caps: Vec<(Capabilities, u32)>,
}

/// A thread's faults per capability set: what a core of that set would
/// see. A handful of sets at most, so a list beats a map.
fn faults_by_caps(input: &BalanceInput, faults: &[u32]) -> Vec<(Capabilities, u32)> {
    let mut out: Vec<(Capabilities, u32)> = Vec::new();
    for (c, &n) in faults.iter().enumerate() {
        let Some(core) = input.cores.get(c) else {
            break;
        };
        if n == 0 {
            continue;
        }
        match out.iter_mut().find(|(caps, _)| *caps == core.caps) {
            Some((_, sum)) => *sum = sum.saturating_add(n),
            None => out.push((core.caps, n)),
        }
    }
    out
}

/// Expected CPU and IO use from the hint (the paper's EXP): MOSTLY_CPU
/// doubles the CPU expectation, MOSTLY_IO and MOSTLY_MEM cut it (memory-
/// and IO-bound work gains little from a faster core) and MOSTLY_IO adds an
/// IO expectation.
fn expectations(hint: Hint) -> (f64, f64) {
    let mut cpu = 1.0;
    let mut io = 0.0;
    if hint.contains(Hint::MOSTLY_CPU) {
        cpu = 2.0;
    }
    if hint.contains(Hint::MOSTLY_MEM) {
        cpu *= 0.5;
    }
    if hint.contains(Hint::MOSTLY_IO) {
        cpu *= 0.25;
        io = 1.0;
    }
    (cpu, io)
}

/// Observed CPU intensity: the caller's figure, else how much of the speed
/// difference between the fastest and slowest kind shows in the thread's
/// IPS, else a guess from the hint.
fn cpu_intensity(input: &BalanceInput, i: usize, fast: usize, slow: usize) -> f64 {
    let t = &input.threads[i];
    if let Some(x) = t.cpu_intensity {
        return x.clamp(0.0, 1.0);
    }
    let speed_ratio = input.kinds[fast].relative_speed / input.kinds[slow].relative_speed;
    if speed_ratio > 1.0 && t.ips[slow] > 0.0 {
        return ((t.ips[fast] / t.ips[slow] - 1.0) / (speed_ratio - 1.0)).clamp(0.0, 1.0);
    }
    if t.hint.contains(Hint::MOSTLY_CPU) {
        1.0
    } else if t.hint.contains(Hint::MOSTLY_IO) {
        0.1
    } else {
        0.5
    }
}

impl Kinship {
    pub fn new(weights: KinshipWeights) -> Self {
        Kinship { weights }
    }

    fn terms(&self, input: &BalanceInput) -> Vec<ThreadTerms> {
        let w = &self.weights;
        let by_speed = |a: &usize, b: &usize| {
            input.kinds[*a]
                .relative_speed
                .total_cmp(&input.kinds[*b].relative_speed)
        };
        let fast = (0..input.kinds.len()).max_by(by_speed).unwrap_or(0);
        let slow = (0..input.kinds.len()).min_by(by_speed).unwrap_or(0);
        let fault_unit = w.functional
            * (-1.0
                + if w.emulated {
                    1.0 / (1.0 + w.emulation_cost)
                } else {
                    0.0
                });
        input
            .threads
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let (exp_cpu, exp_io) = expectations(t.hint);
                let u = t.utilisation.clamp(0.0, 1.0);
                let mem = t.hint.contains(Hint::MOSTLY_MEM);
                let i_cache = t
                    .cache_intensity
                    .unwrap_or(if mem { 0.5 } else { 0.0 })
                    .clamp(0.0, 1.0);
                let exp_cache = if mem { 2.0 } else { 1.0 };
                ThreadTerms {
                    cpu: w.performance * w.cpu * exp_cpu,
                    intensity: cpu_intensity(input, i, fast, slow),
                    io: w.performance * w.io * (1.0 - u) * exp_io,
                    cache: w.performance * w.cache * i_cache * exp_cache,
                    category: t.category,
                    demand: u,
                    fault_unit,
                    faults_by_caps: faults_by_caps(input, &t.faults),
                }
            })
            .collect()
    }

    /// K for thread `i` on core `c` when the threads already matched to
    /// `c` want `load` of it (C is left out: callers skip disallowed cores).
    pub fn kinship(&self, input: &BalanceInput, i: usize, c: usize, load: f64) -> f64 {
        let terms = self.terms(input);
        let speeds = Speeds::of(input);
        let served = Category::served_by(input.cores[c].caps);
        self.k(&terms[i], input, c, served, speeds, load)
    }

    /// Total kinship of an allocation: Σ over threads of K(thread, its
    /// core) with the load the other threads put on that core. Rematches
    /// reorder threads (the fairness token), so a proposal often swaps
    /// threads of equal kinship between cores; the total does not change
    /// then, which lets a caller's hysteresis margin keep such swaps from
    /// being applied.
    pub fn total(&self, input: &BalanceInput, alloc: &Allocation) -> f64 {
        let terms = self.terms(input);
        let speeds = Speeds::of(input);
        let mut load = vec![0.0; input.cores.len()];
        for (t, &c) in terms.iter().zip(&alloc.core_of) {
            load[c] += t.demand;
        }
        terms
            .iter()
            .zip(&alloc.core_of)
            .map(|(t, &c)| {
                let served = Category::served_by(input.cores[c].caps);
                self.k(t, input, c, served, speeds, load[c] - t.demand)
            })
            .sum()
    }

    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn k(
        &self,
        t: &ThreadTerms,
        input: &BalanceInput,
        c: usize,
        served: Category,
        speeds: Speeds,
        load: f64,
    ) -> f64 {
        // The share of its demand the thread would get there: 1 while the
        // core has room for it, less as the core is oversubscribed.
        let e = self.performance(t, input, c, speeds) / (load + t.demand).max(1.0);
        e + self.functional(t, input.cores[c].caps, served)
    }

    /// E before the load factor: what the thread would make of core `c`
    /// alone.
    #[inline]
    fn performance(&self, t: &ThreadTerms, input: &BalanceInput, c: usize, speeds: Speeds) -> f64 {
        let core = &input.cores[c];
        let s = input.kinds[core.kind].relative_speed / speeds.fastest;
        let g = speeds.slowest_rel + t.intensity * (s - speeds.slowest_rel);
        let cache = match core.llc_bytes {
            Some(b) if speeds.llc_max > 0.0 => b as f64 / speeds.llc_max,
            _ => 0.0,
        };
        t.cpu * g + t.io + t.cache * cache
    }

    #[inline]
    fn functional(&self, t: &ThreadTerms, caps: Capabilities, served: Category) -> f64 {
        let matched = (t.category.0 & served.0).count_ones() as f64;
        let mf = 1.0 + self.weights.match_value * matched;
        let faults = t
            .faults_by_caps
            .iter()
            .find(|(c, _)| *c == caps)
            .map_or(0, |(_, n)| *n);
        if faults == 0 {
            self.weights.functional * mf
        } else {
            mf * faults as f64 * t.fault_unit
        }
    }

    /// One rematch: every thread gets the core of highest kinship given the
    /// load of the threads matched before it. Passes the fairness token on.
    pub fn allocate(
        &self,
        input: &BalanceInput,
        state: &mut KinshipState,
    ) -> Result<Allocation, BalanceError> {
        input.validate()?;
        let m = input.threads.len();
        let n = input.cores.len();
        let terms = self.terms(input);
        let speeds = Speeds::of(input);
        let served: Vec<Category> = input
            .cores
            .iter()
            .map(|c| Category::served_by(c.caps))
            .collect();

        // Priority: each thread's best kinship on an empty core. Cores of
        // the same kind and capabilities score alike, so one core per class
        // is enough (this keeps the ordering pass well below O(m·n)).
        let mut classes: Vec<usize> = Vec::new();
        for c in 0..n {
            if input.cores[c].allowed
                && !classes
                    .iter()
                    .any(|&d| input.cores[d].kind == input.cores[c].kind && served[d] == served[c])
            {
                classes.push(c);
            }
        }
        let token = self.next_token(input, state);
        let mut order: Vec<(f64, usize)> = (0..m)
            .map(|i| {
                let best = classes
                    .iter()
                    .map(|&c| self.k(&terms[i], input, c, served[c], speeds, 0.0))
                    .fold(f64::NEG_INFINITY, f64::max);
                let boost = if Some(input.threads[i].id) == token {
                    1.0 + self.weights.fairness_boost
                } else {
                    1.0
                };
                // A negative best (a thread faulting everywhere) must not
                // be "boosted" further down.
                (if best > 0.0 { best * boost } else { best }, i)
            })
            .collect();
        order.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));

        let mut load = vec![0.0f64; n];
        // 1 / max(1, load): the load factor of the threads matched so far.
        let mut factor = vec![1.0f64; n];
        // Σ over the threads matched to a core of their E before the load
        // factor: what a newcomer's load takes from them.
        let mut matched_e = vec![0.0f64; n];
        let mut core_of = vec![usize::MAX; m];
        for &(_, i) in &order {
            let t = &input.threads[i];
            let terms_i = &terms[i];
            let mut best = f64::NEG_INFINITY;
            let mut best_core = usize::MAX;
            for c in 0..n {
                if !input.may_run(t, c) {
                    continue;
                }
                // The change of the total: the newcomer's K, less what its
                // demand takes from the threads already there (their E
                // shrinks by the load factor too). One division.
                let after = 1.0 / (load[c] + terms_i.demand).max(1.0);
                let k = self.performance(terms_i, input, c, speeds) * after
                    + self.functional(terms_i, input.cores[c].caps, served[c])
                    - matched_e[c] * (factor[c] - after);
                // Ties go to the core the thread is on, then the lowest
                // index: a rematch that changes nothing moves nothing.
                if k > best || (k == best && t.current == Some(c)) {
                    best = k;
                    best_core = c;
                }
            }
            core_of[i] = best_core;
            load[best_core] += terms_i.demand;
            factor[best_core] = 1.0 / load[best_core].max(1.0);
            matched_e[best_core] += self.performance(terms_i, input, best_core, speeds);
        }
        state.token = token;
        state.rematches += 1;
        Ok(Allocation { core_of })
    }

    /// The thread after the current holder in id order (wrapping); the
    /// smallest id when nobody holds it or the holder has gone.
    fn next_token(&self, input: &BalanceInput, state: &KinshipState) -> Option<u64> {
        let ids = input.threads.iter().map(|t| t.id);
        match state.token {
            Some(holder) => ids
                .clone()
                .filter(|&id| id > holder)
                .min()
                .or_else(|| ids.min()),
            None => ids.min(),
        }
    }
}

/// The fastest kind's speed, and the slowest relative to it.
#[derive(Clone, Copy, Debug)]
struct Speeds {
    fastest: f64,
    slowest_rel: f64,
    /// Largest last-level cache of any core, bytes; 0 when none is known.
    llc_max: f64,
}

impl Speeds {
    fn of(input: &BalanceInput) -> Self {
        let speeds = input.kinds.iter().map(|k| k.relative_speed);
        let fastest = speeds.clone().fold(f64::MIN_POSITIVE, f64::max);
        let slowest = speeds.fold(f64::INFINITY, f64::min);
        Speeds {
            fastest,
            slowest_rel: (slowest / fastest).min(1.0),
            llc_max: input
                .cores
                .iter()
                .filter_map(|c| c.llc_bytes)
                .max()
                .unwrap_or(0) as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::{Core, CoreKind, PowerModel, ThreadObs};
    use crate::unit::Capabilities;

    fn machine() -> BalanceInput {
        let kind = |name: &str, speed: f64| CoreKind {
            name: name.into(),
            relative_speed: speed,
            freq_hz: 2e9 * speed,
            power: PowerModel {
                watts_per_ipc: 1.0,
                static_watts: 0.2,
                sleep_watts: 0.0,
            },
        };
        let core = |kind, caps| Core {
            kind,
            caps,
            allowed: true,
            llc_bytes: None,
        };
        BalanceInput {
            kinds: vec![kind("fast", 1.0), kind("slow", 0.6)],
            cores: vec![
                core(0, Capabilities::AES),
                core(1, Capabilities::AES),
                core(0, Capabilities::empty()),
                core(1, Capabilities::empty()),
            ],
            threads: Vec::new(),
            base_watts: 0.0,
        }
    }

    #[test]
    fn swapping_equal_threads_leaves_the_total_and_a_functional_match_raises_it() {
        let mut input = machine();
        input.threads = (0..2)
            .map(|i| ThreadObs::new(i, vec![2e9, 1.2e9], 1.0))
            .collect();
        let k = Kinship::new(KinshipWeights::default());
        let a = Allocation {
            core_of: vec![0, 1],
        };
        let swapped = Allocation {
            core_of: vec![1, 0],
        };
        assert!((k.total(&input, &a) - k.total(&input, &swapped)).abs() < 1e-12);
        // Sharing a core lowers the total: each gets half of what it wants.
        let shared = Allocation {
            core_of: vec![0, 0],
        };
        assert!(k.total(&input, &shared) < k.total(&input, &a));
        input.threads[0].category = Category::CRYPTO;
        let on_aes = Allocation {
            core_of: vec![0, 3],
        };
        let off_aes = Allocation {
            core_of: vec![2, 3],
        };
        assert!(k.total(&input, &on_aes) > k.total(&input, &off_aes));
    }

    #[test]
    fn crypto_threads_take_aes_cores_and_the_big_one_the_fast_aes_core() {
        let mut inp = machine();
        let mut t = |id, ips: [f64; 2], cat, hint| {
            let mut th = ThreadObs::new(id, ips.to_vec(), 1.0);
            th.category = cat;
            th.hint = hint;
            inp.threads.push(th);
        };
        t(1, [2e9, 1e9], Category::CRYPTO, Hint::MOSTLY_CPU); // aes-large
        t(2, [2e9, 1e9], Category::GENERAL, Hint::MOSTLY_CPU); // swaptions
        t(3, [1.1e9, 1e9], Category::CRYPTO, Hint::UNKNOWN); // aes-small
        t(4, [1.05e9, 1e9], Category::GENERAL, Hint::MOSTLY_IO); // dedup
        let alloc = Kinship::default()
            .allocate(&inp, &mut KinshipState::default())
            .unwrap();
        assert_eq!(alloc.core_of, vec![0, 2, 1, 3]);
    }

    #[test]
    fn faults_push_a_thread_off_the_cores_it_faulted_on() {
        // A fast core without AES and a slow one with it: a thread with no
        // declared category would take the fast core, until it faults there.
        let mut inp = machine();
        inp.cores = vec![inp.cores[2], inp.cores[1]];
        inp.threads.push(ThreadObs::new(1, vec![2e9, 1e9], 1.0));
        let k = Kinship::default();
        let alloc = |inp: &BalanceInput| {
            k.allocate(inp, &mut KinshipState::default())
                .unwrap()
                .core_of
        };
        assert_eq!(alloc(&inp), vec![0]);
        inp.threads[0].faults = vec![5, 0];
        assert_eq!(alloc(&inp), vec![1]);
    }

    #[test]
    fn a_cache_bound_thread_takes_the_core_with_the_larger_cache() {
        // Two equally fast cores, 3 MiB and 12 MiB of last-level cache; the
        // thread starts on the small one.
        let mut inp = machine();
        inp.cores = vec![inp.cores[0], inp.cores[0]];
        inp.cores[0].llc_bytes = Some(3 << 20);
        inp.cores[1].llc_bytes = Some(12 << 20);
        let mut th = ThreadObs::new(1, vec![1e9, 0.6e9], 1.0);
        th.current = Some(0);
        inp.threads.push(th);
        let k = Kinship::default();
        let total = |inp: &BalanceInput, c: usize| k.total(inp, &Allocation { core_of: vec![c] });
        // Nothing says it uses the cache: both cores are alike.
        assert_eq!(total(&inp, 0), total(&inp, 1));
        inp.threads[0].cache_intensity = Some(0.8);
        assert!(total(&inp, 1) > total(&inp, 0));
        let alloc = k.allocate(&inp, &mut KinshipState::default()).unwrap();
        assert_eq!(alloc.core_of, vec![1]);
        // The hint stands in for the measurement.
        inp.threads[0].cache_intensity = None;
        inp.threads[0].hint = Hint::MOSTLY_MEM;
        assert!(total(&inp, 1) > total(&inp, 0));
        // Caches nobody reported: the term is off.
        inp.cores[1].llc_bytes = None;
        inp.cores[0].llc_bytes = None;
        assert_eq!(total(&inp, 0), total(&inp, 1));
    }

    #[test]
    fn a_fault_on_one_core_counts_on_every_core_with_its_capabilities() {
        // Fast AES, slow AES, fast without, slow without. The thread
        // faulted on the slow core without AES: the fast one lacks the same
        // instruction, so it must score below both AES cores.
        let mut inp = machine();
        let mut th = ThreadObs::new(1, vec![2e9, 1e9], 1.0);
        th.current = Some(3);
        th.faults = vec![0, 0, 0, 4];
        inp.threads.push(th);
        let k = Kinship::default();
        let total = |c: usize| k.total(&inp, &Allocation { core_of: vec![c] });
        assert!(total(2) < total(1), "{} vs {}", total(2), total(1));
        assert!(total(3) < total(1));
        assert_eq!(
            k.allocate(&inp, &mut KinshipState::default())
                .unwrap()
                .core_of,
            vec![0]
        );
    }

    #[test]
    fn the_token_rotates_in_id_order() {
        let mut inp = machine();
        for id in [7, 3, 5] {
            inp.threads.push(ThreadObs::new(id, vec![1e9, 5e8], 1.0));
        }
        let k = Kinship::default();
        let mut st = KinshipState::default();
        let mut holders = Vec::new();
        for _ in 0..4 {
            k.allocate(&inp, &mut st).unwrap();
            holders.push(st.token.unwrap());
        }
        assert_eq!(holders, vec![3, 5, 7, 3]);
    }

    /// Issue 26 (b): an AES thread on the little core (0.4, no AES) and a
    /// CPU-bound thread on the big one. The rematch once scored only the
    /// newcomer's share of a core: half of the big core (2·1/2) beat the
    /// whole little core (2·0.4) for the second thread, whatever it took
    /// from the first, so both were stacked on the big core (its total
    /// kinship +25 %, throughput −28.6 %). It now weighs what a newcomer
    /// takes from the threads already matched, and swaps them instead; the
    /// balancer's guard still refuses a stacking plan such as the old one.
    #[test]
    fn the_rematch_swaps_instead_of_stacking_and_the_guard_refuses_a_stack() {
        use crate::balance::objective::evaluate;
        use crate::balance::{Hysteresis, HysteresisState, Throughput};
        let mut inp = machine();
        inp.kinds[1].relative_speed = 0.4;
        inp.cores = vec![inp.cores[0], inp.cores[3]]; // fast with AES, slow without
        let mut t = |id, on, cat, hint| {
            let mut th = ThreadObs::new(id, vec![1e9, 4e8], 1.0);
            th.current = Some(on);
            th.category = cat;
            th.hint = hint;
            inp.threads.push(th);
        };
        t(1, 1, Category::CRYPTO, Hint::UNKNOWN);
        t(2, 0, Category::GENERAL, Hint::MOSTLY_CPU);
        let k = Kinship::default();
        let now = inp.current_allocation();
        let plan = k.allocate(&inp, &mut KinshipState::default()).unwrap();
        assert_eq!(plan.core_of, vec![0, 1]);
        let stacked = Allocation {
            core_of: vec![0, 0],
        };
        let gain = |a: f64, b: f64| (b - a) / a.abs();
        assert!(k.total(&inp, &plan) > k.total(&inp, &stacked));
        let kinship_gain = gain(k.total(&inp, &now), k.total(&inp, &stacked));
        let throughput_gain = gain(
            evaluate(&inp, &Throughput, &now),
            evaluate(&inp, &Throughput, &stacked),
        );
        assert!(kinship_gain > 0.2 && throughput_gain < -0.28);
        let h = Hysteresis::default();
        let unguarded = h.filter_plan(
            &inp,
            &stacked,
            kinship_gain,
            10,
            &mut HysteresisState::default(),
        );
        assert_eq!(unguarded, stacked, "what the balancer applied before");
        let guarded = h.filter_plan_guarded(
            &inp,
            &stacked,
            kinship_gain,
            throughput_gain,
            10,
            &mut HysteresisState::default(),
        );
        assert_eq!(guarded, now);
    }
}
