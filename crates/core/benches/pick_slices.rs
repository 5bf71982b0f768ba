//! What one coordinator update spends when the replay-judged pick runs in
//! slices (`CoordinatorConfig::pick_slice_events`), against the number of
//! applications and units: the same mixes and budgets as
//! `coordination/solve_scaling` and `solve_memory`.
//!
//! Criterion times one thing many times; a sliced pick is a few hundred
//! different updates. Here each mix's pick runs whole (the anchor), then in
//! slices of the coordinator's default size, each slice timed; the line
//! printed per mix gives the slices' count, median, 99th percentile and
//! longest, and both totals. The sliced pick must publish the whole pick's
//! targets (checked). Run with
//! `cargo bench -p hetsched-core --bench pick_slices`; a filter argument
//! keeps the mixes whose name contains it.

use hetsched_core::coordination::{
    DEFAULT_PICK_SLICE_EVENTS, Journal, JudgeBudget, ReplayedPick, Targets,
};
use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "common/mix.rs"]
mod mix;
use mix::mix;
#[path = "common/args.rs"]
mod args;
use args::filter;

/// Runs `pick` in slices of `events`; the targets, and each slice's time.
fn sliced(pick: &ReplayedPick<'_>, events: u64) -> (Targets, Vec<Duration>) {
    let mut journal = Journal::sliced(events);
    let mut took = Vec::new();
    loop {
        let started = Instant::now();
        let t = black_box(pick.run(&mut journal));
        took.push(started.elapsed());
        if !journal.paused() {
            return (t.expect("the pick solves"), took);
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let filter = filter(std::env::args().skip(1));
    for (apps, units, events) in [(8, 5, None), (32, 5, None), (128, 9, Some(8_000_000))] {
        let name = format!("{apps}x{units}");
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let (supply, demand) = mix(apps, units, 1);
        let budget = events.map_or_else(JudgeBudget::default, |replay_events| JudgeBudget {
            replay_events,
        });
        let pick = ReplayedPick {
            apps: &demand,
            units: &supply,
            floor_goal: 1.05,
            rounds: 3,
            exclusion: true,
            incumbent: None,
            budget,
        };
        let started = Instant::now();
        let whole = black_box(pick.run(&mut Journal::whole())).expect("the pick solves");
        let whole_took = started.elapsed();
        let (found, mut took) = sliced(&pick, DEFAULT_PICK_SLICE_EVENTS);
        assert_eq!(found, whole, "{name}: the slices published another pick");
        let total: Duration = took.iter().sum();
        took.sort_unstable();
        let at = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
        println!(
            "pick_slices/{name:<6} {:>4} slices  p50 {:>6.2} ms  p99 {:>6.2} ms  max {:>6.2} ms   \
             sliced total {:>7.1} ms, whole {:>7.1} ms",
            took.len(),
            ms(at(0.5)),
            ms(at(0.99)),
            ms(at(1.0)),
            ms(total),
            ms(whole_took),
        );
    }
}
