//! The heap the coordinator's solves hold at their peak, against the
//! number of applications and units: the same solves and mixes as
//! `coordination/solve_scaling` (the targets' program alone, the
//! fluid-judged pick and its warm re-solve, the replay-judged pick), and
//! Clarabel on the targets' program as the anchor.
//!
//! Criterion times; it does not weigh memory. Here every allocation goes
//! through a counting allocator ([`peak_alloc`]), each solve runs once
//! unmeasured (so that lazily built state is there already) and once with
//! the peak reset to what is held before it, and the line printed per
//! solve is the peak above that, and what the solve left held after its
//! answer was dropped (0: nothing kept). Run with
//! `cargo bench -p hetsched-core --bench solve_memory`; a filter argument
//! keeps the solves whose name contains it.

use hetsched_core::coordination::{
    JudgeBudget, pick_targets_waiting, solve_targets_replayed, solve_targets_waiting,
    solve_targets_warm,
};
use hetsched_core::fairness::{solve_no_loser_conic, solve_no_loser_weighted};
use peak_alloc::PeakAlloc;
use std::hint::black_box;

#[path = "common/mix.rs"]
mod mix;
use mix::mix;
#[path = "common/programs.rs"]
mod programs;
use programs::{PROGRAM_SIZES, program};
#[path = "common/args.rs"]
mod args;
use args::filter;
#[path = "common/drift.rs"]
mod drift;
use drift::drifted;

#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// What one solve held: its peak above the heap before it, and what it
/// left held after.
struct Held {
    peak: usize,
    left: isize,
}

fn held_by<T>(solve: &dyn Fn() -> T) -> Held {
    drop(black_box(solve()));
    let before = ALLOCATOR.current_usage();
    ALLOCATOR.reset_peak_usage();
    drop(black_box(solve()));
    Held {
        peak: ALLOCATOR.peak_usage().saturating_sub(before),
        left: ALLOCATOR.current_usage() as isize - before as isize,
    }
}

fn report(filter: Option<&str>, name: &str, solve: &dyn Fn() -> usize) {
    if filter.is_some_and(|f| !name.contains(f)) {
        return;
    }
    let held = held_by(solve);
    println!(
        "solve_memory/{name:<22} peak {:>10.1} KiB   left held {:>6} B",
        held.peak as f64 / 1024.0,
        held.left
    );
}

fn main() {
    let filter = filter(std::env::args().skip(1));
    let filter = filter.as_deref();
    for (apps, units) in PROGRAM_SIZES {
        let (p, weights) = program(apps, units);
        report(filter, &format!("pf/{apps}x{units}"), &|| {
            let s = solve_no_loser_weighted(&p, 1.05, &[], &weights).unwrap();
            s.solution.allocation.len()
        });
        // The anchor: Clarabel on the same program.
        report(filter, &format!("pf_conic/{apps}x{units}"), &|| {
            let s = solve_no_loser_conic(&p, 1.05, &[], &weights).unwrap();
            s.solution.allocation.len()
        });
    }
    for (apps, units) in [(32, 9), (64, 9), (128, 9)] {
        let (supply, demand) = mix(apps, units, 1);
        report(filter, &format!("fluid/{apps}x{units}"), &|| {
            let t = solve_targets_waiting(&demand, &supply, 1.05, 3, true).unwrap();
            t.fraction.len()
        });
        let (_, shape) = pick_targets_waiting(&demand, &supply, 1.05, 3, true).unwrap();
        let moved = drifted(&demand, 0.05);
        report(filter, &format!("fluid_warm/{apps}x{units}"), &|| {
            let out = solve_targets_warm(&moved, &supply, 1.05, &shape).unwrap();
            usize::from(matches!(
                out,
                hetsched_core::coordination::WarmOutcome::Solved(..)
            ))
        });
    }
    // The replay-judged pick at the simulator's budgets: the default up to
    // 32 apps, the 8 M events `hetsched sim random` sets from 33 on.
    for (apps, units, events) in [(8, 5, None), (32, 5, None), (128, 9, Some(8_000_000))] {
        let (supply, demand) = mix(apps, units, 1);
        let budget = events.map_or_else(JudgeBudget::default, |replay_events| JudgeBudget {
            replay_events,
        });
        report(filter, &format!("replay/{apps}x{units}"), &|| {
            let t = solve_targets_replayed(&demand, &supply, 1.05, 3, true, None, budget).unwrap();
            t.fraction.len()
        });
    }
}
