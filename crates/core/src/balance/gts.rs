//! A GTS-like baseline (ARM's global task scheduling for big.LITTLE): a
//! thread whose tracked utilisation rises above the *up* threshold goes to a
//! big core, one below the *down* threshold to a little core, and one in
//! between stays in the cluster it is in. Within a cluster the least loaded
//! core takes it; when every big core is full a heavy thread is offloaded to
//! an idle little core, as GTS does.
//!
//! GTS knows two clusters only. On machines with more kinds we call "big"
//! every kind at least as fast as the geometric midpoint of the fastest and
//! slowest speed, which on SmartBalance's Huge/Big/Medium/Small machine is
//! {Huge, Big} against {Medium, Small}.

use super::{Allocation, BalanceError, BalanceInput};

/// GTS's thresholds, as fractions of a core (ARM's defaults are 700/1024
/// up and 256/1024 down).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gts {
    pub up_threshold: f64,
    pub down_threshold: f64,
}

impl Default for Gts {
    fn default() -> Self {
        Gts {
            up_threshold: 700.0 / 1024.0,
            down_threshold: 256.0 / 1024.0,
        }
    }
}

impl Gts {
    /// Which kinds count as big.
    pub fn big_kinds(input: &BalanceInput) -> Vec<bool> {
        let speeds = input.kinds.iter().map(|k| k.relative_speed);
        let max = speeds.clone().fold(f64::MIN_POSITIVE, f64::max);
        let min = speeds.fold(f64::INFINITY, f64::min);
        let mid = (max * min).sqrt();
        input
            .kinds
            .iter()
            .map(|k| k.relative_speed >= mid * (1.0 - 1e-9))
            .collect()
    }

    pub fn allocate(&self, input: &BalanceInput) -> Result<Allocation, BalanceError> {
        input.validate()?;
        let big = Self::big_kinds(input);
        let is_big = |c: usize| big[input.cores[c].kind];
        let current = input.current_allocation();
        let m = input.threads.len();
        // Heaviest first, so they get the big cores when those run short,
        // as up-migration of the busiest task first would.
        let mut order: Vec<usize> = (0..m).collect();
        order.sort_by(|&a, &b| {
            input.threads[b]
                .utilisation
                .total_cmp(&input.threads[a].utilisation)
                .then(a.cmp(&b))
        });
        let mut load = vec![0.0f64; input.cores.len()];
        let mut core_of = vec![usize::MAX; m];
        for i in order {
            let t = &input.threads[i];
            let u = t.utilisation;
            let here = input.threads[i].current.map(|_| current.core_of[i]);
            let want_big = if u > self.up_threshold {
                true
            } else if u < self.down_threshold {
                false
            } else {
                here.is_some_and(is_big)
            };
            let allowed = input.allowed_cores(i);
            let least = |big_side: bool, load: &[f64]| {
                allowed
                    .iter()
                    .copied()
                    .filter(|&c| is_big(c) == big_side)
                    // Staying put wins ties, then the lowest index.
                    .min_by(|&a, &b| {
                        load[a]
                            .total_cmp(&load[b])
                            .then((Some(b) == here).cmp(&(Some(a) == here)))
                            .then(a.cmp(&b))
                    })
            };
            let preferred = least(want_big, &load);
            let other = least(!want_big, &load);
            let pick = match (preferred, other) {
                (Some(p), Some(o)) => {
                    let full = load[p] + u > 1.0 + 1e-9;
                    // Offload only a big-cluster overflow, and only onto a
                    // core that is emptier than the best big one.
                    if want_big && full && load[o] < load[p] {
                        o
                    } else {
                        p
                    }
                }
                (Some(p), None) | (None, Some(p)) => p,
                (None, None) => unreachable!("validate() guarantees an allowed core"),
            };
            core_of[i] = pick;
            load[pick] += u;
        }
        Ok(Allocation { core_of })
    }
}
