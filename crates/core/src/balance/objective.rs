//! What an allocation yields, and the objectives SmartBalance can maximise.
//!
//! The model (shared with the simulator, which measures with it):
//!
//! - thread *i* on core *j* of kind *k* wants `u_i` of the core's time and
//!   runs at `ips_ik` while running;
//! - a core whose threads want `D_j = Σ u_i > 1` is oversubscribed and CFS
//!   gives each thread the same fraction `s_j = 1 / max(1, D_j)` of what it
//!   wants, so the thread achieves `s_j · u_i · ips_ik`;
//! - a core with threads draws its static power `α0` all the time plus each
//!   thread's dynamic power for the time it runs:
//!   `P_j = α0 + s_j · Σ u_i · (p_ik − α0)`; a core with none sleeps.
//!
//! Every figure is a sum over threads, so moving one thread changes two
//! cores' aggregates in O(1): that is SmartBalance's incremental objective
//! ("obtaining a new evaluation only by performing computations induced by
//! the latest swap", §4.3).

use super::{Allocation, BalanceInput};

/// One core's outcome under an allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CoreOutput {
    /// Instructions per second, all its threads together.
    pub ips: f64,
    pub watts: f64,
    /// Σ over its threads of ln(achieved IPS), for proportional fairness.
    pub log_ips: f64,
    pub threads: u32,
}

/// A goal over allocations, written so it can be updated per core:
/// `value = combine(Σ_j core_term(j), Σ_j IPS_j, Σ_j P_j)`.
pub trait Objective {
    /// Whether [`CoreOutput::log_ips`] is used; computing it costs a
    /// logarithm per evaluated core, the most expensive step of a move.
    const USES_LOG: bool = false;
    /// Contribution of core `core` (0 for objectives that only use totals).
    fn core_term(&self, core: usize, out: &CoreOutput) -> f64;
    /// The objective from the summed core terms and the machine's totals
    /// (`total_watts` includes sleeping cores and `base_watts`).
    fn combine(&self, terms: f64, total_ips: f64, total_watts: f64) -> f64;
    /// How much one thread's move typically changes the value, so that
    /// annealing temperatures mean the same for every objective and size:
    /// `|value| / threads` for objectives that are ratios or sums of rates.
    fn move_scale(&self, value: f64, threads: usize) -> f64 {
        value.abs() / threads.max(1) as f64
    }
}

/// SmartBalance Eq. 11: `Σ_j ω_j · IPS_j / P_j` over cores with threads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerCoreEfficiency {
    /// ω_j per core; empty means 1 for every core (the paper's setting).
    pub weights: Vec<f64>,
}

impl Objective for PerCoreEfficiency {
    #[inline]
    fn core_term(&self, core: usize, out: &CoreOutput) -> f64 {
        if out.threads == 0 || out.watts <= 0.0 {
            return 0.0;
        }
        self.weights.get(core).copied().unwrap_or(1.0) * out.ips / out.watts
    }
    #[inline]
    fn combine(&self, terms: f64, _: f64, _: f64) -> f64 {
        terms
    }
}

/// Whole-machine energy efficiency: `Σ IPS / (Σ P + base)`, instructions per
/// joule. What the simulator reports as `ips_per_watt`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SystemEfficiency;

impl Objective for SystemEfficiency {
    #[inline]
    fn core_term(&self, _: usize, _: &CoreOutput) -> f64 {
        0.0
    }
    #[inline]
    fn combine(&self, _: f64, ips: f64, watts: f64) -> f64 {
        if watts > 0.0 { ips / watts } else { 0.0 }
    }
}

/// Total instructions per second.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Throughput;

impl Objective for Throughput {
    #[inline]
    fn core_term(&self, _: usize, _: &CoreOutput) -> f64 {
        0.0
    }
    #[inline]
    fn combine(&self, _: f64, ips: f64, _: f64) -> f64 {
        ips
    }
}

/// Σ over threads of ln(achieved IPS): the allocation that maximises the
/// geometric mean of every thread's speed, so nobody is starved for the
/// sake of the total.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProportionalFair;

impl Objective for ProportionalFair {
    const USES_LOG: bool = true;
    #[inline]
    fn core_term(&self, _: usize, out: &CoreOutput) -> f64 {
        out.log_ips
    }
    #[inline]
    fn combine(&self, terms: f64, _: f64, _: f64) -> f64 {
        terms
    }
    /// Already in log units: a difference of 0.1 is one thread 10 % faster.
    fn move_scale(&self, _: f64, _: usize) -> f64 {
        1.0
    }
}

/// Smallest IPS that enters a logarithm, so an idle thread (u = 0) costs a
/// large but finite amount instead of −∞.
const LOG_FLOOR_IPS: f64 = 1.0;

#[derive(Clone, Copy, Debug, Default)]
struct CoreAgg {
    /// Σ u_i.
    demand: f64,
    /// Σ u_i · ips_ik.
    ips: f64,
    /// Σ u_i · (p_ik − α0_k).
    dyn_watts: f64,
    /// Σ ln(u_i · ips_ik).
    log_ips: f64,
    threads: u32,
}

/// An allocation with its per-core aggregates, for O(1) "what if thread i
/// moved" questions. SmartBalance anneals on it; the real balancer can use
/// [`Evaluator::move_gain`] to tell the hysteresis how much each move buys.
pub struct Evaluator<'a, O: Objective> {
    input: &'a BalanceInput,
    objective: &'a O,
    kinds: usize,
    /// Per (thread, kind): u·ips, u·(p − α0), ln(u·ips).
    t_ips: Vec<f64>,
    t_dyn: Vec<f64>,
    t_log: Vec<f64>,
    util: Vec<f64>,
    /// Per core: kind, static and sleep watts (copied out of the kinds so
    /// the hot path does one load instead of two dependent ones).
    core_kind: Vec<usize>,
    core_static: Vec<f64>,
    core_sleep: Vec<f64>,
    core_of: Vec<usize>,
    agg: Vec<CoreAgg>,
    term: Vec<f64>,
    out: Vec<CoreOutput>,
    sum_term: f64,
    sum_ips: f64,
    sum_watts: f64,
}

impl<'a, O: Objective> Evaluator<'a, O> {
    /// Builds the aggregates of `alloc`, which must be valid for `input`
    /// (see [`BalanceInput::check`]).
    pub fn new(input: &'a BalanceInput, objective: &'a O, alloc: &Allocation) -> Self {
        let kinds = input.kinds.len();
        let m = input.threads.len();
        let mut t_ips = Vec::with_capacity(m * kinds);
        let mut t_dyn = Vec::with_capacity(m * kinds);
        let mut t_log = Vec::with_capacity(m * kinds);
        let mut util = Vec::with_capacity(m);
        for (i, t) in input.threads.iter().enumerate() {
            let u = t.utilisation;
            util.push(u);
            for k in 0..kinds {
                let a = u * t.ips[k];
                t_ips.push(a);
                t_dyn.push(u * (input.thread_watts(i, k) - input.kinds[k].power.static_watts));
                t_log.push(a.max(LOG_FLOOR_IPS).ln());
            }
        }
        let mut ev = Evaluator {
            input,
            objective,
            kinds,
            t_ips,
            t_dyn,
            t_log,
            util,
            core_kind: input.cores.iter().map(|c| c.kind).collect(),
            core_static: input
                .cores
                .iter()
                .map(|c| input.kinds[c.kind].power.static_watts)
                .collect(),
            core_sleep: input
                .cores
                .iter()
                .map(|c| input.kinds[c.kind].power.sleep_watts)
                .collect(),
            core_of: alloc.core_of.clone(),
            agg: vec![CoreAgg::default(); input.cores.len()],
            term: vec![0.0; input.cores.len()],
            out: vec![CoreOutput::default(); input.cores.len()],
            sum_term: 0.0,
            sum_ips: 0.0,
            sum_watts: 0.0,
        };
        for i in 0..m {
            let c = ev.core_of[i];
            let k = input.cores[c].kind;
            ev.add(c, i, k, 1.0);
        }
        ev.recompute_sums();
        ev
    }

    #[inline]
    fn add(&mut self, core: usize, i: usize, kind: usize, sign: f64) {
        let x = i * self.kinds + kind;
        let a = &mut self.agg[core];
        a.demand += sign * self.util[i];
        a.ips += sign * self.t_ips[x];
        a.dyn_watts += sign * self.t_dyn[x];
        a.log_ips += sign * self.t_log[x];
        if sign > 0.0 {
            a.threads += 1;
        } else {
            a.threads -= 1;
        }
    }

    /// One core's output from its aggregate.
    #[inline]
    fn output(&self, core: usize, a: &CoreAgg) -> CoreOutput {
        if a.threads == 0 {
            return CoreOutput {
                watts: self.core_sleep[core],
                ..CoreOutput::default()
            };
        }
        // Most cores are not oversubscribed: skip the division for them.
        let (over, share) = if a.demand <= 1.0 {
            (1.0, 1.0)
        } else {
            (a.demand, 1.0 / a.demand)
        };
        CoreOutput {
            ips: a.ips * share,
            watts: self.core_static[core] + a.dyn_watts * share,
            log_ips: if O::USES_LOG {
                a.log_ips - a.threads as f64 * over.ln()
            } else {
                0.0
            },
            threads: a.threads,
        }
    }

    /// Recomputes every core's output and the sums from the aggregates,
    /// clearing drift from many incremental updates.
    pub fn recompute_sums(&mut self) {
        self.sum_term = 0.0;
        self.sum_ips = 0.0;
        self.sum_watts = self.input.base_watts;
        for c in 0..self.agg.len() {
            let out = self.output(c, &self.agg[c]);
            let term = self.objective.core_term(c, &out);
            self.out[c] = out;
            self.term[c] = term;
            self.sum_term += term;
            self.sum_ips += out.ips;
            self.sum_watts += out.watts;
        }
    }

    /// The objective's value for the current allocation.
    #[inline]
    pub fn value(&self) -> f64 {
        self.objective
            .combine(self.sum_term, self.sum_ips, self.sum_watts)
    }

    /// Total instructions per second of the current allocation.
    pub fn total_ips(&self) -> f64 {
        self.sum_ips
    }

    /// Total watts (cores, sleeping cores and base) of the current allocation.
    pub fn total_watts(&self) -> f64 {
        self.sum_watts
    }

    /// Per-core outputs of the current allocation.
    pub fn cores(&self) -> &[CoreOutput] {
        &self.out
    }

    /// Achieved IPS of thread `i` under the current allocation.
    pub fn thread_ips(&self, i: usize) -> f64 {
        let c = self.core_of[i];
        let k = self.input.cores[c].kind;
        self.t_ips[i * self.kinds + k] / self.agg[c].demand.max(1.0)
    }

    pub fn core_of(&self) -> &[usize] {
        &self.core_of
    }

    pub fn allocation(&self) -> Allocation {
        Allocation {
            core_of: self.core_of.clone(),
        }
    }

    /// Objective value after moving thread `i` to `to` and (optionally)
    /// thread `j` to `i`'s core, without changing anything.
    #[inline]
    fn value_after(&self, i: usize, to: usize, swap_with: Option<usize>) -> f64 {
        let from = self.core_of[i];
        if from == to {
            return self.value();
        }
        let (kf, kt) = (self.core_kind[from], self.core_kind[to]);
        let mut af = self.agg[from];
        let mut at = self.agg[to];
        let shift = |a: &mut CoreAgg, t: usize, k: usize, sign: f64| {
            let x = t * self.kinds + k;
            a.demand += sign * self.util[t];
            a.ips += sign * self.t_ips[x];
            a.dyn_watts += sign * self.t_dyn[x];
            if O::USES_LOG {
                a.log_ips += sign * self.t_log[x];
            }
            if sign > 0.0 {
                a.threads += 1;
            } else {
                a.threads -= 1;
            }
        };
        shift(&mut af, i, kf, -1.0);
        shift(&mut at, i, kt, 1.0);
        if let Some(j) = swap_with {
            shift(&mut at, j, kt, -1.0);
            shift(&mut af, j, kf, 1.0);
        }
        let of = self.output(from, &af);
        let ot = self.output(to, &at);
        let term = self.sum_term - self.term[from] - self.term[to]
            + self.objective.core_term(from, &of)
            + self.objective.core_term(to, &ot);
        let ips = self.sum_ips - self.out[from].ips - self.out[to].ips + of.ips + ot.ips;
        let watts =
            self.sum_watts - self.out[from].watts - self.out[to].watts + of.watts + ot.watts;
        self.objective.combine(term, ips, watts)
    }

    /// Change in the objective if thread `i` moved to core `to`.
    #[inline]
    pub fn move_gain(&self, i: usize, to: usize) -> f64 {
        self.value_after(i, to, None) - self.value()
    }

    /// Change in the objective if threads `i` and `j` swapped cores.
    #[inline]
    pub fn swap_gain(&self, i: usize, j: usize) -> f64 {
        let (ci, cj) = (self.core_of[i], self.core_of[j]);
        if ci == cj {
            return 0.0;
        }
        self.value_after(i, cj, Some(j)) - self.value()
    }

    fn update_core(&mut self, c: usize) {
        let out = self.output(c, &self.agg[c]);
        let term = self.objective.core_term(c, &out);
        self.sum_term += term - self.term[c];
        self.sum_ips += out.ips - self.out[c].ips;
        self.sum_watts += out.watts - self.out[c].watts;
        self.out[c] = out;
        self.term[c] = term;
    }

    /// Moves thread `i` to core `to` (the caller checks it is allowed).
    pub fn apply_move(&mut self, i: usize, to: usize) {
        let from = self.core_of[i];
        if from == to {
            return;
        }
        let (kf, kt) = (self.input.cores[from].kind, self.input.cores[to].kind);
        self.add(from, i, kf, -1.0);
        self.add(to, i, kt, 1.0);
        self.core_of[i] = to;
        self.update_core(from);
        self.update_core(to);
    }

    /// Swaps the cores of threads `i` and `j`.
    pub fn apply_swap(&mut self, i: usize, j: usize) {
        let (ci, cj) = (self.core_of[i], self.core_of[j]);
        if ci == cj {
            return;
        }
        let (ki, kj) = (self.input.cores[ci].kind, self.input.cores[cj].kind);
        self.add(ci, i, ki, -1.0);
        self.add(cj, j, kj, -1.0);
        self.add(cj, i, kj, 1.0);
        self.add(ci, j, ki, 1.0);
        self.core_of.swap(i, j);
        self.update_core(ci);
        self.update_core(cj);
    }
}

/// The objective's value of `alloc`, computed from scratch.
pub fn evaluate<O: Objective>(input: &BalanceInput, objective: &O, alloc: &Allocation) -> f64 {
    Evaluator::new(input, objective, alloc).value()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::{Core, CoreKind, PowerModel, ThreadObs};
    use crate::unit::Capabilities;

    fn input() -> BalanceInput {
        let kind = |name: &str, speed: f64| CoreKind {
            name: name.into(),
            relative_speed: speed,
            freq_hz: 1e9,
            power: PowerModel {
                watts_per_ipc: 1.0,
                static_watts: 0.5,
                sleep_watts: 0.0,
            },
        };
        let core = |kind| Core {
            kind,
            caps: Capabilities::empty(),
            allowed: true,
            llc_bytes: None,
        };
        BalanceInput {
            kinds: vec![kind("fast", 1.0), kind("slow", 0.5)],
            cores: vec![core(0), core(1)],
            threads: vec![
                ThreadObs::new(1, vec![2e9, 1e9], 1.0),
                ThreadObs::new(2, vec![2e9, 1e9], 0.5),
            ],
            base_watts: 1.0,
        }
    }

    #[test]
    fn oversubscribed_core_shares_time_and_power_follows_ipc() {
        let inp = input();
        let both_fast = Allocation {
            core_of: vec![0, 0],
        };
        let ev = Evaluator::new(&inp, &Throughput, &both_fast);
        // Demand 1.5 on one core: each gets 2/3 of what it wants.
        assert!((ev.thread_ips(0) - 2e9 / 1.5).abs() < 1.0);
        assert!((ev.thread_ips(1) - 1e9 / 1.5).abs() < 1.0);
        assert!((ev.total_ips() - 2e9).abs() < 1.0);
        // Busy all the time at IPC 2: 0.5 + 2 W; slow core sleeps; base 1 W.
        assert!((ev.total_watts() - 3.5).abs() < 1e-9);
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn incremental_gains_match_recomputation() {
        let inp = input();
        let start = Allocation {
            core_of: vec![0, 0],
        };
        let obj = PerCoreEfficiency::default();
        let mut ev = Evaluator::new(&inp, &obj, &start);
        let gain = ev.move_gain(1, 1);
        let after = evaluate(
            &inp,
            &obj,
            &Allocation {
                core_of: vec![0, 1],
            },
        );
        assert!(close(ev.value() + gain, after));
        ev.apply_move(1, 1);
        assert!(close(ev.value(), after));
        let sg = ev.swap_gain(0, 1);
        ev.apply_swap(0, 1);
        let swapped = evaluate(
            &inp,
            &obj,
            &Allocation {
                core_of: vec![1, 0],
            },
        );
        assert!(close(ev.value(), swapped));
        assert!(close(after + sg, swapped));
    }
}
