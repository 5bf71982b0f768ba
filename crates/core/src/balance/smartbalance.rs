//! SmartBalance's allocation step: simulated annealing per its Algorithm 1.
//!
//! From the current allocation Ψ₀, each iteration perturbs Ψ (move one
//! thread to another core, or swap two threads' cores), evaluates the
//! objective incrementally ([`Evaluator`]), always accepts an improvement
//! and accepts a loss `diff` with probability `e^(diff / accept)`. The
//! perturbation radius and the acceptance temperature both shrink
//! geometrically per iteration (`Opt_Δperturb`, `Opt_Δaccept`), and the
//! loop stops after `Opt_max_iter` iterations. Unlike the paper's loop we
//! keep the best allocation seen and return it, so the result is never
//! worse than where the epoch started on the objective being optimised.
//!
//! Where Algorithm 1 indexes a flat `n·m` array, we pick a thread and then a
//! core (or a second thread) at an offset from the current one scaled by
//! `√perturb`: early iterations jump anywhere, late ones stay near, which
//! is the same schedule on the allocation itself.

use super::objective::{Evaluator, Objective};
use super::rng::Rng;
use super::{Allocation, BalanceError, BalanceInput};

/// Algorithm 1's tunables.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AnnealParams {
    /// `Opt_max_iter`: iterations per call.
    pub max_iter: u32,
    /// `Opt_perturb`: initial perturbation radius, as a fraction of the
    /// candidate range (1 = anywhere).
    pub initial_perturb: f64,
    /// `Opt_Δperturb`: radius multiplier per iteration.
    pub perturb_decay: f64,
    /// `Opt_accept`: initial temperature, in units of one thread's typical
    /// share of the objective ([`Objective::move_scale`]).
    pub initial_accept: f64,
    /// `Opt_Δaccept`: temperature multiplier per iteration.
    pub accept_decay: f64,
    /// Fraction of perturbations that swap two threads instead of moving
    /// one; swaps keep the number of threads per core, which single moves
    /// cannot do without first making things worse.
    pub swap_fraction: f64,
}

impl AnnealParams {
    /// Parameters for `threads` × `cores`: about a hundred perturbations
    /// per thread, capped at 20 000 so that 256 threads × 128 cores stays
    /// within a millisecond even on a loaded machine (the paper likewise
    /// caps iterations as the problem grows, Fig. 8(a), trading quality for
    /// time: on the planted 256 × 128 problems 25 000 iterations land
    /// 1.26 % from the optimum at worst, 20 000 land 1.53 %).
    pub fn for_size(threads: usize, cores: usize) -> Self {
        let per_thread = if cores > 1 { 100 } else { 1 };
        let max_iter = threads.saturating_mul(per_thread).clamp(1_000, 20_000) as u32;
        Self::with_iterations(max_iter)
    }

    /// Default schedules for a given iteration cap: the temperature starts
    /// at a tenth of one thread's typical share and falls to a thousandth
    /// of that; the perturbation radius narrows from the whole candidate
    /// range to about 70 % of it. Both were chosen on the planted problems
    /// of [`super::planted`] (256 × 128): hotter starts, or radii that
    /// shrink to a few cores, left 1–4 % on the table at the same cost.
    pub fn with_iterations(max_iter: u32) -> Self {
        let n = f64::from(max_iter.max(1));
        AnnealParams {
            max_iter,
            initial_perturb: 1.0,
            perturb_decay: 0.5f64.powf(1.0 / n),
            initial_accept: 0.1,
            accept_decay: 0.001f64.powf(1.0 / n),
            swap_fraction: 0.5,
        }
    }
}

/// What one annealing run did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AnnealStats {
    pub iterations: u32,
    pub accepted: u32,
    /// Accepted perturbations that made the objective worse.
    pub accepted_worse: u32,
    /// Objective value of the starting and of the returned allocation.
    pub start_value: f64,
    pub best_value: f64,
}

/// The SmartBalance policy: annealing on a pluggable objective.
#[derive(Clone, Debug, PartialEq)]
pub struct SmartBalance<O: Objective> {
    pub objective: O,
    pub params: AnnealParams,
}

impl<O: Objective> SmartBalance<O> {
    pub fn new(objective: O, params: AnnealParams) -> Self {
        SmartBalance { objective, params }
    }

    /// Anneals from the input's current allocation with randomness from
    /// `seed` only. Returns the best allocation seen.
    pub fn allocate(&self, input: &BalanceInput, seed: u64) -> Result<Allocation, BalanceError> {
        input.validate()?;
        let start = input.current_allocation();
        Ok(self.anneal_from(input, &start, seed).0)
    }

    /// Anneals from `start` (which must respect allowed sets).
    pub fn anneal_from(
        &self,
        input: &BalanceInput,
        start: &Allocation,
        seed: u64,
    ) -> (Allocation, AnnealStats) {
        let m = input.threads.len();
        let mut ev = Evaluator::new(input, &self.objective, start);
        let mut stats = AnnealStats {
            start_value: ev.value(),
            best_value: ev.value(),
            ..AnnealStats::default()
        };
        if m == 0 {
            return (start.clone(), stats);
        }
        let candidates = Candidates::new(input);
        let mut rng = Rng::new(seed);
        let mut best = ev.core_of().to_vec();
        let mut best_value = ev.value();
        let scale = self
            .objective
            .move_scale(ev.value(), m)
            .max(f64::MIN_POSITIVE);
        let p = &self.params;
        // √perturb, updated by √Δperturb per iteration: the same schedule
        // as Algorithm 1 without a square root per iteration.
        let mut radius = p.initial_perturb.max(0.0).sqrt();
        let radius_decay = p.perturb_decay.max(0.0).sqrt();
        let mut accept = p.initial_accept;
        let mut current = ev.value();
        for _ in 0..p.max_iter {
            stats.iterations += 1;
            let i = rng.below(m);
            let gain;
            let mut swap_with = None;
            let mut move_to = None;
            if m > 1 && rng.unit() < p.swap_fraction {
                // The partner is drawn from all threads: threads next to
                // each other in the input have nothing to do with each
                // other, so a "near" partner would not be a small step.
                let j = offset_pick(&mut rng, i, m, 1.0);
                let (ci, cj) = (ev.core_of()[i], ev.core_of()[j]);
                if ci == cj
                    || !input.may_run(&input.threads[i], cj)
                    || !input.may_run(&input.threads[j], ci)
                {
                    decay(&mut radius, &mut accept, radius_decay, p);
                    continue;
                }
                gain = ev.swap_gain(i, j);
                swap_with = Some(j);
            } else {
                let (list, at) = candidates.of(i, ev.core_of()[i]);
                if list.len() < 2 {
                    decay(&mut radius, &mut accept, radius_decay, p);
                    continue;
                }
                let to = list[offset_pick(&mut rng, at, list.len(), radius)];
                gain = ev.move_gain(i, to);
                move_to = Some(to);
            }
            let take = gain > 0.0 || {
                // Below e^-20 the chance is nil; skipping the exponential
                // there saves its cost on most late, clearly bad moves.
                let x = gain / (accept * scale);
                x > -20.0 && rng.unit() < x.exp()
            };
            if take {
                stats.accepted += 1;
                if gain < 0.0 {
                    stats.accepted_worse += 1;
                }
                match (move_to, swap_with) {
                    (Some(to), _) => ev.apply_move(i, to),
                    (None, Some(j)) => ev.apply_swap(i, j),
                    (None, None) => {}
                }
                current += gain;
                if current > best_value {
                    best_value = current;
                    best.copy_from_slice(ev.core_of());
                }
            }
            decay(&mut radius, &mut accept, radius_decay, p);
        }
        let best = Allocation { core_of: best };
        // Report the exact value (incremental sums drift in the last bits)
        // and guard the "never worse than the start" promise against that
        // drift too.
        let exact = Evaluator::new(input, &self.objective, &best).value();
        if exact < stats.start_value {
            stats.best_value = stats.start_value;
            return (start.clone(), stats);
        }
        stats.best_value = exact;
        (best, stats)
    }
}

#[inline]
fn decay(radius: &mut f64, accept: &mut f64, radius_decay: f64, p: &AnnealParams) {
    *radius *= radius_decay;
    *accept *= p.accept_decay;
}

/// An index in `0..len` other than `at`, at an offset from `at` drawn
/// uniformly over the whole range and scaled by `radius` (at least ±1).
#[inline]
fn offset_pick(rng: &mut Rng, at: usize, len: usize, radius: f64) -> usize {
    debug_assert!(len >= 2 && at < len);
    let raw = rng.below(len) as f64 - at as f64;
    let mut off = (raw * radius).round() as i64;
    if off == 0 {
        off = if raw >= 0.0 { 1 } else { -1 };
    }
    let target = at as i64 + off;
    if target < 0 || target >= len as i64 {
        // Reflect into range rather than clamp, so the ends are not
        // over-sampled.
        let reflected = at as i64 - off;
        return reflected.clamp(0, len as i64 - 1) as usize;
    }
    target as usize
}

/// Each thread's allowed cores ordered by kind speed, then index, so that
/// a small offset in a list is a step to a similar core (same kind, or the
/// next faster or slower one) whatever the machine's core numbering. Lists
/// are shared between threads with no set of their own (the common case)
/// so 1024 threads do not copy the core list 1024 times.
struct Candidates {
    lists: Vec<Vec<usize>>,
    /// Per list, each core's position in it (`u32::MAX` when absent).
    position: Vec<Vec<u32>>,
    of_thread: Vec<usize>,
}

impl Candidates {
    fn new(input: &BalanceInput) -> Self {
        let n = input.cores.len();
        let mut rank: Vec<usize> = (0..input.kinds.len()).collect();
        rank.sort_by(|&a, &b| {
            input.kinds[a]
                .relative_speed
                .total_cmp(&input.kinds[b].relative_speed)
                .then(a.cmp(&b))
        });
        let mut kind_rank = vec![0; input.kinds.len()];
        for (r, &k) in rank.iter().enumerate() {
            kind_rank[k] = r;
        }
        let order = |mut cores: Vec<usize>| {
            cores.sort_by_key(|&c| (kind_rank[input.cores[c].kind], c));
            let mut pos = vec![u32::MAX; n];
            for (p, &c) in cores.iter().enumerate() {
                pos[c] = p as u32;
            }
            (cores, pos)
        };
        let (everywhere, pos) = order((0..n).filter(|&c| input.cores[c].allowed).collect());
        let mut lists = vec![everywhere];
        let mut position = vec![pos];
        let of_thread = (0..input.threads.len())
            .map(|i| {
                if input.threads[i].allowed.is_none() {
                    0
                } else {
                    let (l, p) = order(input.allowed_cores(i));
                    lists.push(l);
                    position.push(p);
                    lists.len() - 1
                }
            })
            .collect();
        Candidates {
            lists,
            position,
            of_thread,
        }
    }

    /// Thread `i`'s candidate cores and the position of `core` among them.
    #[inline]
    fn of(&self, i: usize, core: usize) -> (&[usize], usize) {
        let l = self.of_thread[i];
        let at = self.position[l][core];
        (&self.lists[l], if at == u32::MAX { 0 } else { at as usize })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_pick_stays_in_range_and_moves() {
        let mut rng = Rng::new(3);
        for len in 2..20 {
            for at in 0..len {
                for radius in [1.0, 0.3, 0.01] {
                    let x = offset_pick(&mut rng, at, len, radius);
                    assert!(x < len);
                    assert_ne!(x, at);
                }
            }
        }
    }

    #[test]
    fn schedules_reach_their_floor() {
        let p = AnnealParams::with_iterations(1000);
        let end = p.accept_decay.powi(1000);
        assert!((end - 0.001).abs() < 1e-6);
        assert!(AnnealParams::for_size(256, 128).max_iter <= 20_000);
    }
}
