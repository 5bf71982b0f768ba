//! hetsched-pf with its picks spread over coordinator periods, as the
//! daemon runs them (`pick_slice_events`): each pick publishes a few
//! refreshes after it began instead of at once. On `rinnegan-contention`
//! (seed 1, release) that gave 3.707 with every app at 1.066 of native or
//! more, the same as whole picks; asserted a little below.

use hetsched_sim::catalog;
use hetsched_sim::run::run_scenario;
use hetsched_sim::strategy::StrategyKind;

#[test]
fn pf_in_slices_holds_the_floor_and_the_bound_on_rinnegan_contention() {
    let mut sc = catalog::load("rinnegan-contention").unwrap_or_else(|e| panic!("{e}"));
    // Native is the baseline; hetsched-pf alone besides.
    let pf = StrategyKind::parse("hetsched-pf").expect("a known policy");
    sc.strategies
        .retain(|s| *s == StrategyKind::Native || *s == pf);
    sc.pick_slice_events = Some(hetsched_core::coordination::DEFAULT_PICK_SLICE_EVENTS);
    let r = run_scenario(&sc, 1, &mut |_, _| {});
    let pf = r
        .results
        .iter()
        .find(|p| p.policy == "hetsched-pf")
        .expect("hetsched-pf ran");
    let of_queue_bound = pf.system_speedup / r.oracle_queue_aware_system_speedup;
    assert!(pf.min_relative >= 0.98, "{}", pf.min_relative);
    assert!(of_queue_bound >= 0.92, "{of_queue_bound:.3}");
    assert!(
        pf.coordination_solve_us_p99.is_some(),
        "the slices were timed"
    );
}
