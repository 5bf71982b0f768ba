//! The epoch loop: sense → allocate → run, with hetsched-core's policies.
//!
//! Each epoch (60 ms, SmartBalance's epoch length) the engine builds what a
//! real balancer would have sensed — the IPS of every thread counted on the
//! kind it ran on, the predictions of a `Θ` fitted from calibration runs on
//! the other kinds ([`super::predictor`]), utilisation, hints and the
//! capability faults of a moving window — asks the policy for an allocation, and then
//! runs the epoch on the *true* figures: useful work (a CRYPTO thread on a
//! core without AES runs a slow software path, which a counter-based
//! predictor cannot see) and power. A migrated thread loses 1 ms of its
//! epoch to cold caches. Every case is run from several random initial
//! placements (the same ones for every policy) because where an
//! asymmetry-blind scheduler happens to start is luck, and the expected
//! value over that luck is the fair baseline.

use super::model::{Profile, SimKind};
use super::predictor::{EPOCH_COUNTER_ERROR, Predictor, counts};
use hetsched_core::balance::objective::{Evaluator, Objective};
use hetsched_core::balance::{
    Allocation, AnnealParams, BalanceInput, Core, Gts, Hysteresis, HysteresisState, Kinship,
    KinshipState, LinuxDefault, PerCoreEfficiency, ProportionalFair, SmartBalance,
    SystemEfficiency, ThreadObs, Throughput,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub const EPOCH_S: f64 = 0.060;
pub const EPOCHS: usize = 40;
/// Epochs run before measuring, so policies reach their steady state.
pub const WARMUP_EPOCHS: usize = 10;
pub const REPLICAS: u64 = 8;
pub const MIGRATION_COST_S: f64 = 0.001;
/// Faults a thread takes per epoch on a core lacking what it needs, and the
/// moving window (in epochs) over which Kinship counts them.
pub const FAULTS_PER_EPOCH: u32 = 64;
pub const FAULT_WINDOW: usize = 4;

/// The policies, by their report names. SmartBalance runs twice, once per
/// objective: whole-machine IPS/W (what the reports measure) and the
/// paper's Eq. 11.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    LinuxDefault,
    Gts,
    SmartBalance,
    /// SmartBalance maximising Eq. 11, the sum of per-core IPS/W.
    SmartBalanceEq11,
    Kinship,
}

impl Policy {
    pub const ALL: [Policy; 5] = [
        Policy::LinuxDefault,
        Policy::Gts,
        Policy::SmartBalance,
        Policy::SmartBalanceEq11,
        Policy::Kinship,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::LinuxDefault => "linux-default",
            Policy::Gts => "gts",
            Policy::SmartBalance => "smartbalance",
            Policy::SmartBalanceEq11 => "smartbalance-eq11",
            Policy::Kinship => "kinship",
        }
    }
}

/// One machine and the threads on it.
#[derive(Clone, Debug)]
pub struct Case {
    /// Row name when a scenario reports one row per case.
    pub label: String,
    /// Machine name, prefixed to core names.
    pub machine: String,
    pub kinds: Vec<SimKind>,
    /// (kind index, core name).
    pub cores: Vec<(usize, String)>,
    /// (thread name, profile).
    pub threads: Vec<(String, Profile)>,
    /// Whether the threads' hints and categories reach the balancer.
    pub hints_given: bool,
    pub base_watts: f64,
}

impl Case {
    fn fastest_peak_ips(&self) -> f64 {
        self.kinds
            .iter()
            .map(SimKind::peak_ips)
            .fold(f64::MIN_POSITIVE, f64::max)
    }

    fn cores(&self) -> Vec<Core> {
        self.cores
            .iter()
            .map(|&(kind, _)| Core {
                kind,
                caps: self.kinds[kind].caps,
                allowed: true,
                llc_bytes: self.kinds[kind].llc_mb.map(|mb| (mb * 1048576.0) as u64),
            })
            .collect()
    }

    /// The machine and threads with their true useful rates and power, for
    /// running an epoch.
    pub fn truth(&self) -> BalanceInput {
        let fastest = self.fastest_peak_ips();
        BalanceInput {
            kinds: self.kinds.iter().map(|k| k.to_core_kind(fastest)).collect(),
            cores: self.cores(),
            threads: self
                .threads
                .iter()
                .enumerate()
                .map(|(i, (_, p))| {
                    let mut t = ThreadObs::new(
                        i as u64,
                        self.kinds.iter().map(|k| p.useful_ips(k)).collect(),
                        p.util,
                    );
                    t.watts = self.kinds.iter().map(|k| p.watts(k, fastest)).collect();
                    t
                })
                .collect(),
            base_watts: self.base_watts,
        }
    }
}

/// What one policy did on one case, summed over replicas and measured epochs.
#[derive(Clone, Debug)]
pub struct CaseOutcome {
    /// Per thread: useful instructions retired while measured.
    pub instructions: Vec<f64>,
    /// Joules over the measured epochs (cores, sleeping cores and base).
    pub energy_j: f64,
    /// Simulated seconds measured (all replicas together).
    pub measured_s: f64,
    /// Per thread: migrations while measured.
    pub migrations: Vec<u64>,
    /// Per thread, per core: seconds of core time used while measured.
    pub core_seconds: Vec<Vec<f64>>,
    /// Per thread, per core: measured epochs spent there.
    pub epochs_on: Vec<Vec<u64>>,
    /// Per thread: epochs (of replica 0) before its first run of 10
    /// consecutive epochs on one core.
    pub settled_after: Vec<u64>,
    /// Replica 0's core per thread per epoch, for the timeline.
    pub trace: Vec<Vec<usize>>,
    /// |predicted − true| / true IPS of every prediction the policy was
    /// given while measured (every thread, every kind it was not on).
    pub prediction_errors: Vec<f64>,
}

/// Per-policy state carried across epochs.
struct PolicyState {
    kinship: KinshipState,
    hysteresis: HysteresisState,
}

/// Runs `policy` on `case`.
pub fn run_case(case: &Case, policy: Policy, seed: u64) -> CaseOutcome {
    let m = case.threads.len();
    let n = case.cores.len();
    let truth = case.truth();
    let mut out = CaseOutcome {
        instructions: vec![0.0; m],
        energy_j: 0.0,
        measured_s: 0.0,
        migrations: vec![0; m],
        core_seconds: vec![vec![0.0; n]; m],
        epochs_on: vec![vec![0; n]; m],
        settled_after: vec![0; m],
        trace: Vec::new(),
        prediction_errors: Vec::new(),
    };
    let base_input = observed_template(case);
    // Calibration does not depend on the policy: the same `Θ` for all.
    let predictor = Predictor::calibrate(
        &case.kinds,
        &mut ChaCha8Rng::seed_from_u64(seed ^ 0xCA11_B0A7),
    );
    for replica in 0..REPLICAS {
        // The start and the noise depend on the replica only, so every
        // policy faces the same luck.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (replica.wrapping_mul(0x9E37_79B9)));
        let mut current: Vec<usize> = (0..m).map(|_| rng.random_range(0..n)).collect();
        let mut fault_window: Vec<Vec<[u32; FAULT_WINDOW]>> = vec![vec![[0; FAULT_WINDOW]; n]; m];
        let mut state = PolicyState {
            kinship: KinshipState::default(),
            hysteresis: HysteresisState::default(),
        };
        let mut run_len = vec![0u64; m];
        let mut settled = vec![None::<u64>; m];
        for epoch in 0..EPOCHS {
            let input = observe(
                case,
                &base_input,
                &predictor,
                &current,
                &fault_window,
                &mut rng,
            );
            let measuring = epoch >= WARMUP_EPOCHS;
            if measuring {
                record_prediction_errors(case, &input, &current, &mut out.prediction_errors);
            }
            let next = decide(policy, &input, &mut state, seed, replica, epoch as u64);
            let moved: Vec<bool> = (0..m).map(|i| next[i] != current[i]).collect();
            // Run the epoch on the true figures.
            let alloc = Allocation {
                core_of: next.clone(),
            };
            let ev = Evaluator::new(&truth, &Throughput, &alloc);
            let mut demand = vec![0.0f64; n];
            for i in 0..m {
                demand[next[i]] += truth.threads[i].utilisation;
            }
            for i in 0..m {
                let c = next[i];
                let kind = case.cores[c].0;
                let profile = &case.threads[i].1;
                // The window's slot for this epoch: faults on the core it
                // ran on when that lacks what it needs, nothing elsewhere.
                let lacking = !profile.capable(&case.kinds[kind]);
                for (core, w) in fault_window[i].iter_mut().enumerate() {
                    w[epoch % FAULT_WINDOW] = if core == c && lacking {
                        FAULTS_PER_EPOCH
                    } else {
                        0
                    };
                }
                if replica == 0 {
                    run_len[i] = if moved[i] || epoch == 0 {
                        1
                    } else {
                        run_len[i] + 1
                    };
                    if run_len[i] >= 10 && settled[i].is_none() {
                        settled[i] = Some(epoch as u64 + 1 - 10);
                    }
                }
                if measuring {
                    let penalty = if moved[i] {
                        1.0 - MIGRATION_COST_S / EPOCH_S
                    } else {
                        1.0
                    };
                    out.instructions[i] += ev.thread_ips(i) * EPOCH_S * penalty;
                    out.migrations[i] += u64::from(moved[i]);
                    let share = truth.threads[i].utilisation / demand[c].max(1.0);
                    out.core_seconds[i][c] += share * EPOCH_S;
                    out.epochs_on[i][c] += 1;
                }
            }
            if measuring {
                out.energy_j += ev.total_watts() * EPOCH_S;
                out.measured_s += EPOCH_S;
            }
            if replica == 0 {
                out.trace.push(next.clone());
            }
            current = next;
        }
        if replica == 0 {
            out.settled_after = settled.iter().map(|s| s.unwrap_or(EPOCHS as u64)).collect();
        }
    }
    out
}

/// The parts of the sensed input that do not change between epochs.
fn observed_template(case: &Case) -> BalanceInput {
    let fastest = case.fastest_peak_ips();
    BalanceInput {
        kinds: case.kinds.iter().map(|k| k.to_core_kind(fastest)).collect(),
        cores: case.cores(),
        threads: case
            .threads
            .iter()
            .enumerate()
            .map(|(i, (_, p))| {
                let mut t = ThreadObs::new(i as u64, vec![0.0; case.kinds.len()], p.util);
                if case.hints_given {
                    t.category = p.category;
                    t.hint = p.hint;
                }
                t
            })
            .collect(),
        base_watts: case.base_watts,
    }
}

/// What the balancer senses at the start of an epoch: IPS counted on the
/// current kind (instructions, emulation path included), predicted by `Θ`
/// from the epoch's counters on the others, and the fault counts of the
/// window.
fn observe(
    case: &Case,
    template: &BalanceInput,
    predictor: &Predictor,
    current: &[usize],
    faults: &[Vec<[u32; FAULT_WINDOW]>],
    rng: &mut ChaCha8Rng,
) -> BalanceInput {
    let mut input = template.clone();
    for (i, t) in input.threads.iter_mut().enumerate() {
        let here = case.cores[current[i]].0;
        let profile = &case.threads[i].1;
        t.current = Some(current[i]);
        let c = counts(
            profile,
            &case.kinds[here],
            EPOCH_S,
            EPOCH_COUNTER_ERROR,
            rng,
        );
        t.ips = predictor.ips(here, &c, EPOCH_S);
        t.cache_intensity = c.cache_intensity();
        let window: Vec<u32> = faults[i].iter().map(|w| w.iter().sum()).collect();
        if window.iter().any(|&f| f > 0) {
            t.faults = window;
        }
    }
    input
}

/// |predicted − true| / true for every thread on every kind it did not run
/// on: the predictor's error, whatever the policy does with it.
fn record_prediction_errors(
    case: &Case,
    input: &BalanceInput,
    current: &[usize],
    out: &mut Vec<f64>,
) {
    for (i, t) in input.threads.iter().enumerate() {
        let here = case.cores[current[i]].0;
        for (k, kind) in case.kinds.iter().enumerate() {
            let actual = case.threads[i].1.ips(kind);
            if k != here && actual > 0.0 {
                out.push((t.ips[k] - actual).abs() / actual);
            }
        }
    }
}

fn decide(
    policy: Policy,
    input: &BalanceInput,
    state: &mut PolicyState,
    seed: u64,
    replica: u64,
    epoch: u64,
) -> Vec<usize> {
    let alloc = match policy {
        Policy::LinuxDefault => LinuxDefault::default().allocate(input),
        Policy::Gts => Gts::default().allocate(input),
        Policy::Kinship => {
            // Through the same hysteresis as the real balancer: a rematch
            // is applied when its total kinship gains the margin.
            let k = Kinship::default();
            k.allocate(input, &mut state.kinship).map(|proposed| {
                let before = k.total(input, &input.current_allocation());
                let gain = if before.abs() > f64::MIN_POSITIVE {
                    (k.total(input, &proposed) - before) / before.abs()
                } else {
                    0.0
                };
                Hysteresis::default().filter_plan(
                    input,
                    &proposed,
                    gain,
                    epoch,
                    &mut state.hysteresis,
                )
            })
        }
        Policy::SmartBalance | Policy::SmartBalanceEq11 => {
            let params = AnnealParams::for_size(input.threads.len(), input.cores.len());
            let seed = seed ^ (replica << 32) ^ epoch.wrapping_mul(0x2545_F491);
            let current = input.current_allocation();
            // `smartbalance` maximises the whole-machine IPS/W the reports
            // measure; `smartbalance-eq11` the paper's sum over cores.
            let (proposed, stats) = if policy == Policy::SmartBalance {
                SmartBalance::new(SystemEfficiency, params).anneal_from(input, &current, seed)
            } else {
                SmartBalance::new(PerCoreEfficiency::default(), params)
                    .anneal_from(input, &current, seed)
            };
            let gain = if stats.start_value > 0.0 {
                stats.best_value / stats.start_value - 1.0
            } else {
                f64::INFINITY
            };
            // Predictions carry a few percent of error: demand a gain above
            // that before moving anyone, so noise alone does not migrate
            // threads.
            Ok(Hysteresis::default().filter_plan(
                input,
                &proposed,
                gain,
                epoch,
                &mut state.hysteresis,
            ))
        }
    };
    alloc
        .expect("simulated inputs are valid by construction")
        .core_of
}

/// The proportional-fair allocation of the true figures: per thread, its
/// useful IPS there. The bound the reports call the oracle. Exact (every
/// allocation tried) when there are at most [`EXHAUSTIVE_LIMIT`]
/// allocations, else the best of long, hot annealing runs from Linux's and
/// GTS's allocations (near-optimal, not proven).
pub fn oracle(case: &Case, seed: u64) -> Vec<f64> {
    let truth = case.truth();
    let best = best_static(case, &ProportionalFair, seed);
    let ev = Evaluator::new(&truth, &ProportionalFair, &best);
    (0..case.threads.len()).map(|i| ev.thread_ips(i)).collect()
}

/// The static allocation that maximises `objective` on the case's *true*
/// figures (no prediction error, no hysteresis, no migration): what a
/// policy optimising `objective` would reach with perfect knowledge. Exact
/// within [`EXHAUSTIVE_LIMIT`] allocations, else annealed as for
/// [`oracle`].
pub fn best_static<O: Objective + Clone>(case: &Case, objective: &O, seed: u64) -> Allocation {
    let truth = case.truth();
    exhaustive_best(&truth, objective).unwrap_or_else(|| annealed_best(&truth, objective, seed))
}

/// Useful IPS and whole-machine useful IPS/W (cores, sleeping cores and
/// base power) of a static allocation on the true figures.
pub fn static_figures(case: &Case, alloc: &Allocation) -> (f64, f64) {
    let truth = case.truth();
    let ev = Evaluator::new(&truth, &SystemEfficiency, alloc);
    (ev.total_ips(), ev.value())
}

/// Largest number of allocations the oracle enumerates.
pub const EXHAUSTIVE_LIMIT: u64 = 1 << 16;

fn exhaustive_best<O: Objective>(truth: &BalanceInput, objective: &O) -> Option<Allocation> {
    let (m, n) = (truth.threads.len(), truth.cores.len());
    let total = (n as u64).checked_pow(m as u32)?;
    if total > EXHAUSTIVE_LIMIT {
        return None;
    }
    let start = Allocation {
        core_of: vec![0; m],
    };
    let mut ev = Evaluator::new(truth, objective, &start);
    let mut best = (ev.value(), start.clone());
    // An odometer over core indices: each step moves one thread, and a
    // carry a few more, each an O(1) update.
    let mut digits = vec![0usize; m];
    for _ in 1..total {
        for (i, d) in digits.iter_mut().enumerate() {
            *d += 1;
            if *d < n {
                ev.apply_move(i, *d);
                break;
            }
            *d = 0;
            ev.apply_move(i, 0);
        }
        if ev.value() > best.0 {
            best = (ev.value(), ev.allocation());
        }
    }
    Some(best.1)
}

fn annealed_best<O: Objective + Clone>(
    truth: &BalanceInput,
    objective: &O,
    seed: u64,
) -> Allocation {
    let mut placed = truth.clone();
    for (i, t) in placed.threads.iter_mut().enumerate() {
        t.current = Some(i % truth.cores.len());
    }
    let starts = [
        LinuxDefault::default().allocate(&placed),
        Gts::default().allocate(&placed),
    ];
    // Hotter than the per-epoch policy: the search has time to climb out
    // of the local optimum it starts in.
    let mut params = AnnealParams::with_iterations(20_000);
    params.initial_accept = 2.0;
    let sb = SmartBalance::new(objective.clone(), params);
    starts
        .into_iter()
        .map(|s| s.expect("valid by construction"))
        .enumerate()
        .map(|(k, s)| sb.anneal_from(truth, &s, seed.wrapping_add(k as u64)))
        .max_by(|a, b| a.1.best_value.total_cmp(&b.1.best_value))
        .map(|(a, _)| a)
        .expect("two starts")
}
