//! CPU time that work outside coordination takes from the CPU units:
//! programs the monitor does not schedule, the monitor itself, clients
//! that never report. The monitor measures it (busy CPU time per CPU kind
//! less what the coordinated apps' processes used, smoothed) and hands it
//! to the `Coordinator`, which takes it out of the
//! processor-shared units' supply through an [`OutsideLoad`].
//!
//! The figure is noisy (10 ms clock ticks, bursts of other programs), and
//! every change of supply is a re-solve and new targets for every app. So
//! the supply follows it with hysteresis: the load it is held at moves
//! only when the measured figure is [`CoordinatorConfig::outside_load_step`]
//! or more away from it, and then to the measured figure. The held figure
//! is never further than one step from the measured one, and a figure
//! that wanders within a step of where it was held never re-solves.

use super::*;

/// Cores of outside load below which, and changes of it within which, the
/// supply stays as it is ([`CoordinatorConfig::outside_load_step`]'s
/// default). A quarter of a core is well above the noise of a 10 ms clock
/// tick measured over a fraction of a second, and below what costs an app
/// that runs a share of its calls on the CPU its floor.
pub const OUTSIDE_LOAD_STEP: f64 = 0.25;

/// The least part of a processor-shared unit's configured slots outside
/// load may leave it. What a program that takes every idle cycle (a
/// parallel build, `stress-ng`) gets depends on what the apps leave it:
/// the more the supply yields, the more such a program gets and the more
/// outside load is measured, so without a bound the supply would slide
/// towards nothing. CFS meanwhile gives the apps' runnable threads their
/// fair share next to it. Half the cores kept every app of `make demo` at
/// its floor in the median of its runs beside `stress-ng` and other
/// users' builds (a quarter too, at half the CPU-bound app's throughput;
/// docs/PERFORMANCE.md, 2026-11-27).
pub const OUTSIDE_LOAD_MIN_LEFT: f64 = 0.5;

pub(super) fn default_outside_load_step() -> f64 {
    OUTSIDE_LOAD_STEP
}

/// Per unit, the outside load (cores) the supply is held at.
#[derive(Clone, Debug, PartialEq)]
pub struct OutsideLoad {
    held: Vec<f64>,
    step: f64,
}

impl OutsideLoad {
    /// No outside load on any of `units` units; changes of less than `step`
    /// cores are held back.
    pub fn new(units: usize, step: f64) -> Self {
        OutsideLoad {
            held: vec![0.0; units],
            step: if step.is_finite() { step.max(0.0) } else { 0.0 },
        }
    }

    /// Records unit `u`'s measured (smoothed) outside load, cores. Returns
    /// whether the held figure moved: it does when the measured one is a
    /// step or more away from it. Negative figures count as none; a
    /// figure that is not finite, or a unit out of range, changes nothing.
    pub fn observe(&mut self, u: usize, cores: f64) -> bool {
        if !cores.is_finite() {
            return false;
        }
        let cores = cores.max(0.0);
        let Some(held) = self.held.get_mut(u) else {
            return false;
        };
        if (cores - *held).abs() < self.step || cores == *held {
            return false;
        }
        *held = cores;
        true
    }

    /// The load unit `u`'s supply is held at (0 out of range).
    pub fn held(&self, u: usize) -> f64 {
        self.held.get(u).copied().unwrap_or(0.0)
    }

    /// `given` (each unit's supply before outside load) with the held load
    /// taken out of the processor-shared units, leaving each at least
    /// [`OUTSIDE_LOAD_MIN_LEFT`] of its `configured` slots (or what
    /// `given` has, if less). Queues keep what `given` says.
    pub fn apply(&self, given: &[UnitSupply], configured: &[UnitSupply]) -> Vec<UnitSupply> {
        given
            .iter()
            .enumerate()
            .map(|(u, s)| {
                if !s.time_shared {
                    return *s;
                }
                let least = configured
                    .get(u)
                    .map_or(s.slots, |c| c.slots * OUTSIDE_LOAD_MIN_LEFT)
                    .min(s.slots);
                UnitSupply {
                    slots: (s.slots - self.held(u)).max(least),
                    ..*s
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_loads_and_small_changes_are_held_back() {
        let mut o = OutsideLoad::new(2, 0.25);
        // Noise around nothing (the monitor's own threads, a shell).
        for cores in [0.05, 0.2, 0.1, -0.3, f64::NAN] {
            assert!(!o.observe(0, cores), "{cores}");
        }
        assert_eq!(o.held(0), 0.0);
        // A program that takes a core.
        assert!(o.observe(0, 0.97));
        assert_eq!(o.held(0), 0.97);
        assert!(!o.observe(0, 0.8));
        assert!(!o.observe(0, 1.1));
        // It ends.
        assert!(o.observe(0, 0.1));
        assert_eq!(o.held(0), 0.1);
        assert!(!o.observe(5, 3.0));
        assert_eq!(o.held(1), 0.0);
    }

    #[test]
    fn outside_load_leaves_queues_alone_and_a_cpu_unit_at_least_half() {
        let configured = [UnitSupply::processor_shared(2.0), UnitSupply::queue(1.0)];
        let mut o = OutsideLoad::new(2, 0.25);
        o.observe(0, 0.5);
        o.observe(1, 0.5);
        // 0.3 already taken by the apps' host side.
        let given = [UnitSupply::processor_shared(1.7), UnitSupply::queue(1.0)];
        let slots: Vec<f64> = o
            .apply(&given, &configured)
            .iter()
            .map(|s| s.slots)
            .collect();
        assert!((slots[0] - 1.2).abs() < 1e-12, "{slots:?}");
        assert_eq!(slots[1], 1.0);
        o.observe(0, 5.0);
        assert_eq!(o.apply(&given, &configured)[0].slots, 1.0);
        // Less than the floor given: kept as given.
        let given = [UnitSupply::processor_shared(0.2), UnitSupply::queue(1.0)];
        assert_eq!(o.apply(&given, &configured)[0].slots, 0.2);
    }

    proptest! {
        /// The held figure is always within a step of the last measured
        /// one, and it moves at most once per step of the measured
        /// figure's total movement (plus the first move off zero).
        #[test]
        fn the_held_load_tracks_within_a_step_and_moves_rarely(
            loads in proptest::collection::vec(0.0f64..4.0, 1..200),
            step in 0.05f64..1.0,
        ) {
            let mut o = OutsideLoad::new(1, step);
            let mut moves = 0u32;
            for &l in &loads {
                if o.observe(0, l) {
                    moves += 1;
                    prop_assert_eq!(o.held(0), l);
                }
                prop_assert!((o.held(0) - l).abs() < step + 1e-12);
            }
            let travel: f64 = std::iter::once(0.0)
                .chain(loads.iter().copied())
                .collect::<Vec<_>>()
                .windows(2)
                .map(|w| (w[1] - w[0]).abs())
                .sum();
            prop_assert!(f64::from(moves) <= travel / step + 1.0, "{moves} moves, travel {travel}");
        }

        /// Noise within half a step around a level moves the held figure
        /// at most once (onto the level).
        #[test]
        fn noise_around_a_level_moves_it_at_most_once(
            level in 0.0f64..2.0,
            noise in proptest::collection::vec(-0.5f64..0.5, 1..200),
            step in 0.05f64..1.0,
        ) {
            let mut o = OutsideLoad::new(1, step);
            let moves = noise
                .iter()
                .filter(|n| o.observe(0, level + *n * step * 0.999))
                .count();
            prop_assert!(moves <= 1, "{moves}");
        }

        /// The supply left is between the floor and what was given, and
        /// never more than a step of load away from given − measured.
        #[test]
        fn the_supply_left_stays_between_the_floor_and_the_given(
            configured in 0.5f64..16.0,
            taken in 0.0f64..1.0,
            load in -1.0f64..20.0,
        ) {
            let c = [UnitSupply::processor_shared(configured)];
            let given = [UnitSupply::processor_shared(configured * (1.0 - taken))];
            let mut o = OutsideLoad::new(1, OUTSIDE_LOAD_STEP);
            o.observe(0, load);
            let left = o.apply(&given, &c)[0].slots;
            let least = (configured * OUTSIDE_LOAD_MIN_LEFT).min(given[0].slots);
            prop_assert!(left >= least - 1e-12 && left <= given[0].slots + 1e-12);
            let exact = (given[0].slots - load.max(0.0)).max(least);
            prop_assert!((left - exact).abs() < OUTSIDE_LOAD_STEP + 1e-12);
        }
    }
}
