//! Counters that only grow, for `/metrics`: per client name, what its
//! clients were served, including the clients that have left.
//!
//! Prometheus counters must not go down, but a client's own counters
//! vanish when it disconnects. The ledger keeps what departed clients were
//! served, by name, so that a name's totals (departed plus connected) only
//! ever grow. Names are chosen by clients, so the ledger holds at most
//! [`MAX_NAMES`] of them; the rest are counted under [`OTHER`].
//!
//! Label slots go by usage: a name gets one when a client of that name is
//! first charged for something, never merely for connecting, so that
//! clients that connect under throwaway names and do nothing take no
//! slot. Root's names and the configured ones (`metrics_names`) get one
//! as soon as they connect, from [`MAX_RESERVED_NAMES`] slots of their
//! own. A name keeps its slot; and since slots only fill, a client shown
//! under [`OTHER`] with usage stays there, so every series only grows.

use hetsched_core::ids::Ns;
use std::collections::BTreeMap;

/// Upper bounds of the wait-time buckets, ns (10 µs to 10 s, ×10 apart);
/// a last bucket takes everything above.
pub const WAIT_BOUNDS_NS: [Ns; 7] = [
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
];

/// Distinct client names the ledger keeps apart by usage.
pub const MAX_NAMES: usize = 256;
/// Further names kept apart as soon as they connect: root's, and the
/// configured ones.
pub const MAX_RESERVED_NAMES: usize = 64;
/// The name every further client name is counted under.
pub const OTHER: &str = "(other)";

/// How long requests waited between submission and their slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitHistogram {
    /// Requests per bucket (not cumulative); the last is above every bound.
    pub counts: [u64; WAIT_BOUNDS_NS.len() + 1],
    pub sum_ns: u64,
}

impl WaitHistogram {
    pub fn observe(&mut self, waited: Ns) {
        let bucket = WAIT_BOUNDS_NS
            .iter()
            .position(|&b| waited <= b)
            .unwrap_or(WAIT_BOUNDS_NS.len());
        self.counts[bucket] += 1;
        self.sum_ns = self.sum_ns.saturating_add(waited);
    }

    pub fn add(&mut self, other: &WaitHistogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a += b;
        }
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// What one unit served a client (or a name's clients).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnitServed {
    /// Requests that finished.
    pub tasks: u64,
    /// Slot time charged, ns.
    pub busy_ns: u64,
    pub wait: WaitHistogram,
}

impl UnitServed {
    pub fn add(&mut self, other: &UnitServed) {
        self.tasks += other.tasks;
        self.busy_ns = self.busy_ns.saturating_add(other.busy_ns);
        self.wait.add(&other.wait);
    }
}

/// Per client name, per unit (in unit order), what departed clients of
/// that name were served.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    units: usize,
    by_name: BTreeMap<String, Vec<UnitServed>>,
    /// Slots taken by usage, and from the reserved ones.
    by_usage: usize,
    reserved: usize,
}

impl Ledger {
    pub fn new(units: usize) -> Ledger {
        Ledger {
            units,
            by_name: BTreeMap::new(),
            by_usage: 0,
            reserved: 0,
        }
    }

    /// The name `name` is counted under: itself once it has a slot, else
    /// [`OTHER`].
    pub fn label<'a>(&self, name: &'a str) -> &'a str {
        if self.by_name.contains_key(name) {
            name
        } else {
            OTHER
        }
    }

    /// Whether `name` has a slot of its own.
    pub fn has(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Gives a name that was charged for something a slot of its own if
    /// one of the [`MAX_NAMES`] is left.
    pub fn label_by_usage(&mut self, name: &str) {
        if !self.has(name) && self.by_usage < MAX_NAMES && name != OTHER {
            self.by_usage += 1;
            self.insert(name);
        }
    }

    /// Gives root's or a configured name a slot as it connects, from the
    /// [`MAX_RESERVED_NAMES`], or from the others when those are gone.
    pub fn label_reserved(&mut self, name: &str) {
        if self.has(name) || name == OTHER {
            return;
        }
        if self.reserved < MAX_RESERVED_NAMES {
            self.reserved += 1;
            self.insert(name);
        } else {
            self.label_by_usage(name);
        }
    }

    fn insert(&mut self, name: &str) {
        self.by_name
            .insert(name.to_string(), vec![UnitServed::default(); self.units]);
    }

    /// Adds what a departing client was served on unit `unit` (its name
    /// gets a slot by usage if it has none and one is left).
    pub fn fold(&mut self, name: &str, unit: usize, served: &UnitServed) {
        if unit >= self.units || *served == UnitServed::default() {
            return;
        }
        self.label_by_usage(name);
        let label = self.label(name).to_string();
        let units = self.units;
        self.by_name
            .entry(label)
            .or_insert_with(|| vec![UnitServed::default(); units])[unit]
            .add(served);
    }

    /// Every name with what its departed clients were served.
    pub fn names(&self) -> impl Iterator<Item = (&str, &[UnitServed])> {
        self.by_name.iter().map(|(n, u)| (n.as_str(), u.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn waits_land_in_the_first_bucket_that_holds_them() {
        let mut h = WaitHistogram::default();
        for w in [0, 10_000, 10_001, 5_000_000, 20_000_000_000] {
            h.observe(w);
        }
        assert_eq!(h.counts, [2, 1, 0, 1, 0, 0, 0, 1]);
        assert_eq!(h.sum_ns, 20_005_020_001);
        assert_eq!(h.count(), 5);
    }

    #[test]
    fn names_past_the_cap_are_counted_as_other() {
        let mut l = Ledger::new(1);
        let one = UnitServed {
            tasks: 1,
            busy_ns: 10,
            wait: WaitHistogram::default(),
        };
        for i in 0..MAX_NAMES + 5 {
            l.fold(&format!("app{i}"), 0, &one);
        }
        l.fold("app0", 0, &one); // known: still its own
        let names: BTreeMap<_, _> = l
            .names()
            .map(|(n, u)| (n.to_string(), u[0].tasks))
            .collect();
        assert_eq!(names.len(), MAX_NAMES + 1);
        assert_eq!(names["app0"], 2);
        assert_eq!(names[OTHER], 5);
        assert_eq!(l.label("app1"), "app1");
        assert_eq!(l.label("new"), OTHER);
    }

    #[test]
    fn reserved_names_get_a_slot_after_the_others_are_full() {
        let mut l = Ledger::new(1);
        l.label_by_usage("first");
        for i in 0..MAX_NAMES + 300 {
            l.label_by_usage(&format!("app{i}"));
        }
        assert_eq!(l.label("first"), "first");
        assert_eq!(
            l.label(&format!("app{}", MAX_NAMES - 2)),
            format!("app{}", MAX_NAMES - 2)
        );
        assert_eq!(l.label(&format!("app{}", MAX_NAMES - 1)), OTHER);
        assert_eq!(l.names().count(), MAX_NAMES);
        // Root's job, after 300 throwaway names: its own slot.
        l.label_reserved("root-job");
        assert_eq!(l.label("root-job"), "root-job");
        for i in 0..MAX_RESERVED_NAMES + 5 {
            l.label_reserved(&format!("r{i}"));
        }
        assert_eq!(l.names().count(), MAX_NAMES + MAX_RESERVED_NAMES);
        assert_eq!(l.label("r70"), OTHER);
    }

    #[test]
    fn a_name_never_takes_the_label_of_the_rest() {
        let mut l = Ledger::new(1);
        l.label_by_usage(OTHER);
        l.label_reserved(OTHER);
        assert_eq!(l.names().count(), 0);
    }

    #[test]
    fn nothing_served_and_unknown_units_add_nothing() {
        let mut l = Ledger::new(2);
        l.fold("idle", 0, &UnitServed::default());
        l.fold(
            "x",
            7,
            &UnitServed {
                tasks: 1,
                ..Default::default()
            },
        );
        assert_eq!(l.names().count(), 0);
    }

    proptest! {
        /// Folding never lowers any name's totals.
        #[test]
        fn totals_only_grow(folds in proptest::collection::vec((0usize..300, 0usize..2, 0u64..5, 0u64..1000), 0..400)) {
            let mut l = Ledger::new(2);
            let mut seen: BTreeMap<(String, usize), (u64, u64)> = BTreeMap::new();
            for (name, unit, tasks, busy) in folds {
                let mut served = UnitServed { tasks, busy_ns: busy, ..Default::default() };
                served.wait.observe(busy);
                l.fold(&format!("n{name}"), unit, &served);
                for (n, units) in l.names() {
                    for (u, s) in units.iter().enumerate() {
                        let before = seen.entry((n.to_string(), u)).or_default();
                        prop_assert!(s.tasks >= before.0 && s.busy_ns >= before.1);
                        *before = (s.tasks, s.busy_ns);
                    }
                }
                prop_assert!(l.names().count() <= MAX_NAMES + 1);
                prop_assert!(l.names().all(|(n, _)| n == OTHER || l.has(n)));
            }
        }
    }
}
