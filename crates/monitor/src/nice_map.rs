//! The CPU agent's share → nice mapping (Rinnegan §3.1: the CPU agent
//! enforces shares with the kernel's own knob). Pure: the /proc and
//! `setpriority` side is hetsched-daemon's `renice`.
//!
//! The kernel divides a CPU among runnable threads in proportion to their
//! CFS weights, and a nice level is nothing but a weight. So a class maps
//! to the nice level whose weight, relative to nice 0, is closest to its
//! shares relative to the default standing (`Normal(10)`): a default
//! client runs like any other process, `Normal(5)` gets about half the
//! weight (nice 3), `Normal(20)` asks for about twice (nice -3).
//! BACKGROUND gets nice 19, the lowest weight the kernel has.
//!
//! The daemon never makes a thread more important than it was
//! ([`plan_thread`]): a requested level above a thread's own is capped at
//! its own, so shares above the default only take effect for threads that
//! already had that priority.

use crate::procfs::cfs_weight;
use hetsched_core::policy::{DEFAULT_NORMAL_SHARES, ShareClass};

/// Nice level of BACKGROUND clients: the lowest weight CFS has.
pub const BACKGROUND_NICE: i32 = 19;
/// Most favourable nice level.
pub const MIN_NICE: i32 = -20;
/// Least favourable level for a class with shares: one above BACKGROUND,
/// so BACKGROUND always ranks strictly lowest.
pub const MAX_SHARES_NICE: i32 = BACKGROUND_NICE - 1;

/// The nice level whose CFS weight is closest to `weight`, measured as a
/// ratio (weights are multiplicative: 2× off is as far as ½×). Ties go to
/// the lower priority, never granting more than asked.
pub fn nearest_nice(weight: f64) -> i32 {
    // Zero, negative or NaN: no weight at all, the least favourable level.
    if weight.is_nan() || weight <= 0.0 {
        return MAX_SHARES_NICE;
    }
    let want = weight.ln();
    let mut best = MAX_SHARES_NICE;
    let mut best_err = f64::INFINITY;
    // From the least favourable level up, so a tie keeps the lower one.
    for nice in (MIN_NICE..=MAX_SHARES_NICE).rev() {
        let err = (cfs_weight(nice).ln() - want).abs();
        if err < best_err - 1e-12 {
            best = nice;
            best_err = err;
        }
    }
    best
}

/// CFS weight a class asks for: its shares relative to the default
/// standing, on nice 0's weight. CUSTOM shares (percent of a unit) count
/// like NORMAL ones, as in the min-funding core hint. `None` for
/// BACKGROUND, which asks for no weight at all.
pub fn class_weight(class: ShareClass) -> Option<f64> {
    match class {
        ShareClass::Custom { shares } | ShareClass::Normal { shares } => {
            Some(cfs_weight(0) * f64::from(shares) / f64::from(DEFAULT_NORMAL_SHARES))
        }
        ShareClass::Background => None,
    }
}

/// The nice level a class maps to on its own.
pub fn nice_for_class(class: ShareClass) -> i32 {
    match class_weight(class) {
        Some(w) => nearest_nice(w),
        None => BACKGROUND_NICE,
    }
}

/// The nice level of a client from its classes on the CPU units, each with
/// its number of cores. A thread has one nice level wherever it runs, so
/// when the classes differ by CPU kind the level follows the weight the
/// client would get on an average core (BACKGROUND counting as nice 19's
/// weight). `None` when there are no CPU units.
pub fn nice_for_cpu_classes(classes: &[(ShareClass, u32)]) -> Option<i32> {
    if classes.is_empty() {
        return None;
    }
    if classes
        .iter()
        .all(|(c, _)| matches!(c, ShareClass::Background))
    {
        return Some(BACKGROUND_NICE);
    }
    if let [(class, _)] = classes {
        return Some(nice_for_class(*class));
    }
    let cores: f64 = classes.iter().map(|&(_, n)| f64::from(n.max(1))).sum();
    let weight: f64 = classes
        .iter()
        .map(|&(c, n)| {
            f64::from(n.max(1)) * class_weight(c).unwrap_or_else(|| cfs_weight(BACKGROUND_NICE))
        })
        .sum::<f64>()
        / cores;
    Some(nearest_nice(weight))
}

/// What the daemon remembers about one thread it manages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadNice {
    /// The thread's own level: what it had before the daemon changed it,
    /// or what somebody else set since. The daemon never goes below it.
    pub baseline: i32,
    /// What the daemon last left it at.
    pub applied: i32,
}

/// One thread's step: from what the daemon remembers (`None` on first
/// sight), the thread's `current` level and the level its class maps to,
/// the new memory and the level to set, if it must change.
///
/// A thread found at a level other than the one the daemon left it at was
/// changed by someone else (the program itself, an administrator): that
/// level becomes its baseline.
pub fn plan_thread(
    prev: Option<ThreadNice>,
    current: i32,
    mapped: i32,
) -> (ThreadNice, Option<i32>) {
    let baseline = match prev {
        Some(p) if p.applied == current => p.baseline,
        _ => current,
    };
    let target = mapped.clamp(MIN_NICE, BACKGROUND_NICE).max(baseline);
    (
        ThreadNice {
            baseline,
            applied: target,
        },
        (target != current).then_some(target),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn normal(shares: u32) -> ShareClass {
        ShareClass::Normal { shares }
    }

    #[test]
    fn default_standing_is_nice_zero_and_background_nineteen() {
        assert_eq!(nice_for_class(ShareClass::default()), 0);
        assert_eq!(nice_for_class(ShareClass::Background), 19);
    }

    #[test]
    fn share_ratios_become_weight_ratios() {
        // 1.25^3 ≈ 1.95: twice the shares is three levels up, half is three down.
        assert_eq!(nice_for_class(normal(20)), -3);
        assert_eq!(nice_for_class(normal(5)), 3);
        // 1.25^10 ≈ 9.3: a tenth of the default is ten levels down.
        assert_eq!(nice_for_class(normal(1)), 10);
        assert_eq!(nice_for_class(ShareClass::Custom { shares: 100 }), -10);
        // Weights beyond the table clamp to its ends.
        assert_eq!(nice_for_class(normal(u32::MAX)), MIN_NICE);
        assert_eq!(nice_for_class(normal(0)), MAX_SHARES_NICE);
    }

    #[test]
    fn the_chosen_level_is_the_closest_ratio() {
        for shares in 1..=400u32 {
            let want = (f64::from(shares) / 10.0).ln();
            let got = nice_for_class(normal(shares));
            let err = |n: i32| ((cfs_weight(n) / 1024.0).ln() - want).abs();
            for other in MIN_NICE..=MAX_SHARES_NICE {
                assert!(err(got) <= err(other) + 1e-9, "{shares}: {got} vs {other}");
            }
        }
    }

    #[test]
    fn cpu_kinds_with_different_classes_average_by_cores() {
        assert_eq!(nice_for_cpu_classes(&[]), None);
        let same = [(normal(5), 4), (normal(5), 8)];
        assert_eq!(nice_for_cpu_classes(&same), Some(3));
        let bg = [(ShareClass::Background, 4), (ShareClass::Background, 2)];
        assert_eq!(nice_for_cpu_classes(&bg), Some(BACKGROUND_NICE));
        // Half the cores at default weight, half at nice 19's: about half
        // the default weight, three levels down.
        let mixed = [(ShareClass::Background, 4), (normal(10), 4)];
        assert_eq!(nice_for_cpu_classes(&mixed), Some(3));
        // More cores pull harder.
        let big_default = [(normal(1), 2), (normal(10), 14)];
        let big_small = [(normal(1), 14), (normal(10), 2)];
        assert!(
            nice_for_cpu_classes(&big_default).unwrap() < nice_for_cpu_classes(&big_small).unwrap()
        );
    }

    #[test]
    fn threads_are_lowered_and_given_back_but_never_raised() {
        // A fresh nice-0 thread of a BACKGROUND client goes to 19.
        let (mem, set) = plan_thread(None, 0, 19);
        assert_eq!(set, Some(19));
        assert_eq!(
            mem,
            ThreadNice {
                baseline: 0,
                applied: 19
            }
        );
        // Still 19 next scan: nothing to do.
        assert_eq!(plan_thread(Some(mem), 19, 19), (mem, None));
        // Raised to the default class: back to its own 0, not to -3.
        let (mem, set) = plan_thread(Some(mem), 19, -3);
        assert_eq!(set, Some(0));
        assert_eq!(mem.baseline, 0);
        // A thread started at nice 5 keeps 5 under any class above it.
        assert_eq!(plan_thread(None, 5, 0).1, None);
        assert_eq!(plan_thread(None, 5, 12).1, Some(12));
    }

    #[test]
    fn a_level_set_by_someone_else_becomes_the_baseline() {
        let (mem, _) = plan_thread(None, 0, 10);
        // The program reniced itself to 15 meanwhile.
        let (mem, set) = plan_thread(Some(mem), 15, 10);
        assert_eq!(mem.baseline, 15);
        assert_eq!(set, None);
        // An administrator raised it to -5: the class still holds it at 10.
        let (mem, set) = plan_thread(Some(mem), -5, 10);
        assert_eq!((mem.baseline, set), (-5, Some(10)));
    }

    proptest! {
        #[test]
        fn more_shares_never_mean_a_higher_nice(a in 0u32..100_000, b in 0u32..100_000) {
            let (lo, hi) = (a.min(b), a.max(b));
            prop_assert!(nice_for_class(normal(hi)) <= nice_for_class(normal(lo)));
            let custom = |shares| nice_for_class(ShareClass::Custom { shares });
            prop_assert!(custom(hi) <= custom(lo));
        }

        #[test]
        fn background_ranks_strictly_lowest(shares in 0u32..=u32::MAX, custom in any::<bool>()) {
            let class = if custom {
                ShareClass::Custom { shares }
            } else {
                normal(shares)
            };
            let n = nice_for_class(class);
            prop_assert!((MIN_NICE..BACKGROUND_NICE).contains(&n));
            prop_assert!(n < nice_for_class(ShareClass::Background));
        }

        #[test]
        fn a_planned_level_is_never_above_the_threads_own(
            prev_base in -20i32..=19,
            prev_applied in -20i32..=19,
            remembered in any::<bool>(),
            current in -20i32..=19,
            mapped in -40i32..=40,
        ) {
            let prev = remembered.then_some(ThreadNice { baseline: prev_base, applied: prev_applied });
            let (mem, set) = plan_thread(prev, current, mapped);
            let target = set.unwrap_or(current);
            // Never more important than the baseline, which is the
            // thread's level when the daemon did not put it there.
            prop_assert!(target >= mem.baseline);
            prop_assert!((MIN_NICE..=BACKGROUND_NICE).contains(&target));
            prop_assert_eq!(mem.applied, target);
            if prev.is_none_or(|p| p.applied != current) {
                prop_assert!(target >= current);
            }
        }
    }
}
