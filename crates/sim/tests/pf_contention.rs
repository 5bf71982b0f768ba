//! Issue 10's `rinnegan-contention` evidence: hetsched-pf against the
//! no-loser bound, with nobody below native. Measured (seeds 1–3, release):
//! 3.800 / 3.799 / 3.812, which is 0.836 / 0.834 / 0.833 of the no-loser
//! bound and 0.957 / 0.955 / 0.955 of the queue-aware one, min rᵢ 1.02 /
//! 1.02 / 1.02, no placement changes. The 90 % of the
//! no-loser bound is above the queue-aware bound (3.97), which no placement
//! on these FIFO devices exceeds; see docs/sim.md. Asserted a little below
//! what is reached, and against selfish hetsched.

use hetsched_sim::catalog;
use hetsched_sim::report::PolicyResult;
use hetsched_sim::run::run_scenario;

#[test]
fn pf_holds_the_floor_and_most_of_the_bound_on_rinnegan_contention() {
    let sc = catalog::load("rinnegan-contention").unwrap_or_else(|e| panic!("{e}"));
    for seed in 1..=3 {
        let r = run_scenario(&sc, seed, &mut |_, _| {});
        let policy = |name: &str| -> &PolicyResult {
            r.results
                .iter()
                .find(|p| p.policy == name)
                .unwrap_or_else(|| panic!("no policy {name}"))
        };
        let (pf, selfish) = (policy("hetsched-pf"), policy("hetsched"));
        let of_bound = pf.system_speedup / r.oracle_no_loser_system_speedup;
        let of_queue_bound = pf.system_speedup / r.oracle_queue_aware_system_speedup;
        assert!(r.oracle_no_loser_floor_feasible, "seed {seed}");
        assert!(pf.min_relative >= 0.98, "seed {seed}: {}", pf.min_relative);
        assert!(of_bound >= 0.80, "seed {seed}: {of_bound:.3}");
        assert!(of_queue_bound >= 0.95, "seed {seed}: {of_queue_bound:.3}");
        assert!(
            pf.system_speedup > selfish.system_speedup,
            "seed {seed}: {} vs {}",
            pf.system_speedup,
            selfish.system_speedup
        );
    }
}

/// Seeds where the best plan the pick found unpaced put DXT on GPU-B
/// (3.56–3.61, 89.5–90.7 % of the queue-aware bound) while DXT on GPU-W
/// beside AES, paced, does better: the pick refines the best plan of the
/// other shape too (`refine_the_leading_shapes`). Measured (release):
/// 3.742 / 3.702 / 3.788 / 3.699, 93.1–94.7 % of the queue-aware bound,
/// min rᵢ 1.04–1.08.
#[test]
fn pf_refines_the_runner_up_shape_on_rinnegan_contention() {
    let sc = catalog::load("rinnegan-contention").unwrap_or_else(|e| panic!("{e}"));
    for seed in [8, 12, 16, 19] {
        let r = run_scenario(&sc, seed, &mut |_, _| {});
        let pf = r
            .results
            .iter()
            .find(|p| p.policy == "hetsched-pf")
            .expect("hetsched-pf runs");
        let of_queue_bound = pf.system_speedup / r.oracle_queue_aware_system_speedup;
        assert!(pf.min_relative >= 0.98, "seed {seed}: {}", pf.min_relative);
        assert!(of_queue_bound >= 0.92, "seed {seed}: {of_queue_bound:.3}");
    }
}
