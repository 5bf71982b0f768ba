//! The baseline: Linux's load balancer as the papers compare against it,
//! blind to core kinds. Threads stay where they are unless the busiest core
//! carries more than `imbalance` times the load of a core a thread could
//! move to; then the thread whose move best evens the two goes, and this
//! repeats. New threads go to the least loaded core. Load is the sum of the
//! threads' utilisations, every core counting as capacity 1 — which is
//! exactly why it spreads threads evenly over cores of very different
//! speed and power.

use super::{Allocation, BalanceError, BalanceInput};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinuxDefault {
    /// The sched-domain `imbalance_pct` as a ratio (125 % → 1.25).
    pub imbalance: f64,
}

impl Default for LinuxDefault {
    fn default() -> Self {
        LinuxDefault { imbalance: 1.25 }
    }
}

impl LinuxDefault {
    pub fn allocate(&self, input: &BalanceInput) -> Result<Allocation, BalanceError> {
        input.validate()?;
        let m = input.threads.len();
        let n = input.cores.len();
        let mut load = vec![0.0f64; n];
        let mut count = vec![0usize; n];
        let mut core_of = vec![usize::MAX; m];
        let placed = |i: usize| {
            let t = &input.threads[i];
            t.current.filter(|&c| c < n && input.may_run(t, c))
        };
        for (i, slot) in core_of.iter_mut().enumerate() {
            if let Some(c) = placed(i) {
                *slot = c;
                load[c] += input.threads[i].utilisation;
                count[c] += 1;
            }
        }
        // Fork balancing: a new thread goes to the least loaded allowed core
        // (fewest threads on a tie, then the lowest index).
        for (i, slot) in core_of.iter_mut().enumerate() {
            if *slot == usize::MAX {
                let c = input
                    .allowed_cores(i)
                    .into_iter()
                    .min_by(|&a, &b| {
                        load[a]
                            .total_cmp(&load[b])
                            .then(count[a].cmp(&count[b]))
                            .then(a.cmp(&b))
                    })
                    .expect("validate() guarantees an allowed core");
                *slot = c;
                load[c] += input.threads[i].utilisation;
                count[c] += 1;
            }
        }
        // Periodic balancing: pull from the busiest core while it helps.
        // Each move lowers the busiest load strictly, so this ends; the cap
        // is a guard against float ties.
        for _ in 0..(4 * m + 4) {
            let Some(busiest) = (0..n)
                .filter(|&c| count[c] >= 2)
                .max_by(|&a, &b| load[a].total_cmp(&load[b]).then(b.cmp(&a)))
            else {
                break;
            };
            let mut best: Option<(f64, usize, usize)> = None;
            for i in (0..m).filter(|&i| core_of[i] == busiest) {
                let u = input.threads[i].utilisation;
                let target = (0..n)
                    .filter(|&c| c != busiest && input.may_run(&input.threads[i], c))
                    .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)));
                let Some(target) = target else { continue };
                let imbalanced = load[busiest] > self.imbalance * load[target];
                let new_max = (load[busiest] - u).max(load[target] + u);
                if imbalanced && new_max < load[busiest] - 1e-12 {
                    let better = best.is_none_or(|(bm, _, _)| new_max < bm);
                    if better {
                        best = Some((new_max, i, target));
                    }
                }
            }
            let Some((_, i, target)) = best else { break };
            let u = input.threads[i].utilisation;
            load[busiest] -= u;
            count[busiest] -= 1;
            load[target] += u;
            count[target] += 1;
            core_of[i] = target;
        }
        Ok(Allocation { core_of })
    }
}
