//! Synthetic allocation problems whose optimum is known, to measure how far
//! annealing lands from it (SmartBalance Fig. 8: "synthetic cases whose
//! optimal solution is known").
//!
//! Every core gets exactly `per_core` threads in the planted allocation,
//! each wanting `1 / per_core` of a core, so planted cores are exactly full.
//! Each thread has a *home* kind where it is fastest and most efficient;
//! every thread homed on kind `k` has the same efficiency `e_k` there and a
//! lower one elsewhere. Then:
//!
//! - [`Throughput`](super::Throughput): no thread can beat its home IPS and
//!   no core can give more than all of its time, so the planted allocation
//!   reaches the upper bound `Σ u_i · ips_i,home`;
//! - [`PerCoreEfficiency`](super::PerCoreEfficiency): a core's IPS/W is a
//!   time-weighted mediant of its threads' efficiencies, at most `e_k` on a
//!   kind-`k` core (less when partly idle, as static power then buys
//!   nothing), so `Σ_j e_kind(j)` bounds every allocation and the planted
//!   one reaches it.

use super::rng::Rng;
use super::{Allocation, BalanceInput, Core, CoreKind, PowerModel, ThreadObs};
use crate::unit::Capabilities;

/// A problem and its planted (optimal) allocation. The threads' `current`
/// cores are drawn at random, so a policy starting from them starts far
/// from the optimum.
pub fn planted(
    per_core: usize,
    cores: usize,
    kinds: usize,
    seed: u64,
) -> (BalanceInput, Allocation) {
    let per_core = per_core.max(1);
    let kinds = kinds.clamp(1, cores.max(1));
    let mut rng = Rng::new(seed);
    let kind_list = (0..kinds)
        .map(|k| CoreKind {
            name: format!("kind{k}"),
            relative_speed: 1.0 / (1 + k) as f64,
            freq_hz: 1e9,
            power: PowerModel {
                watts_per_ipc: 0.5,
                static_watts: 0.05,
                sleep_watts: 0.0,
            },
        })
        .collect();
    let core_list = (0..cores)
        .map(|c| Core {
            kind: c % kinds,
            caps: Capabilities::empty(),
            allowed: true,
            llc_bytes: None,
        })
        .collect::<Vec<_>>();
    // Home efficiency per kind, in IPS per watt.
    let home_eff: Vec<f64> = (0..kinds).map(|k| 1e9 * (1.0 + k as f64)).collect();
    let u = 1.0 / per_core as f64;
    let m = per_core * cores;
    let mut threads = Vec::with_capacity(m);
    let mut core_of = Vec::with_capacity(m);
    for i in 0..m {
        let home_core = i % cores;
        let home = core_list[home_core].kind;
        let base = 1e9 * (1.0 + 2.0 * rng.unit());
        let mut ips = Vec::with_capacity(kinds);
        let mut watts = Vec::with_capacity(kinds);
        for k in 0..kinds {
            if k == home {
                ips.push(base);
                watts.push(base / home_eff[k]);
            } else {
                // Slower and less efficient than at home on every other
                // kind, by a random margin of 20–70 %.
                let x = base * (0.3 + 0.5 * rng.unit());
                let e = home_eff[k].min(home_eff[home]) * (0.3 + 0.5 * rng.unit());
                ips.push(x);
                watts.push(x / e);
            }
        }
        let mut t = ThreadObs::new(i as u64, ips, u);
        t.watts = watts;
        t.current = Some(rng.below(cores.max(1)));
        threads.push(t);
        core_of.push(home_core);
    }
    (
        BalanceInput {
            kinds: kind_list,
            cores: core_list,
            threads,
            base_watts: 0.0,
        },
        Allocation { core_of },
    )
}
