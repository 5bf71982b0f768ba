//! Pegasus Algorithm 1: a ready queue sorted by credit that the scheduler
//! walks round and round, giving each domain `X / X_min` ticks per turn
//! (one tick while it has no context on the accelerator). RR is the same
//! walk with one tick each; XC uses CPU credits as `X`; SLAF adds
//! compensation ticks.

use super::{Decision, Domain, DomainId};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default)]
pub(crate) struct CreditRing {
    /// `(weight, id)`, weight descending, then id.
    entries: Vec<(u32, DomainId)>,
    /// Index of the entry to consider next.
    pos: usize,
}

impl CreditRing {
    pub fn insert(&mut self, id: DomainId, weight: u32) {
        self.remove(id);
        let at = self
            .entries
            .partition_point(|&(w, d)| w > weight || (w == weight && d < id));
        self.entries.insert(at, (weight, id));
        if at < self.pos {
            self.pos += 1;
        }
    }

    pub fn remove(&mut self, id: DomainId) {
        if let Some(at) = self.entries.iter().position(|&(_, d)| d == id) {
            self.entries.remove(at);
            if at < self.pos {
                self.pos -= 1;
            }
            if self.pos >= self.entries.len() {
                self.pos = 0;
            }
        }
    }

    fn min_weight(&self) -> u32 {
        self.entries.last().map_or(1, |&(w, _)| w.max(1))
    }

    /// The next ready domain in ring order and its ticks: `1` when `flat`
    /// or without a context, `X / X_min` otherwise, plus `extra(id)`.
    pub fn next(
        &mut self,
        domains: &BTreeMap<DomainId, Domain>,
        flat: bool,
        mut extra: impl FnMut(DomainId) -> u32,
    ) -> Option<Decision> {
        let n = self.entries.len();
        let min = self.min_weight();
        for step in 0..n {
            let i = (self.pos + step) % n;
            let (w, id) = self.entries[i];
            let Some(d) = domains.get(&id).filter(|d| d.ready) else {
                continue;
            };
            self.pos = (i + 1) % n;
            let base = if flat || !d.context {
                1
            } else {
                (w / min).max(1)
            };
            return Some(Decision {
                domain: id,
                ticks: base + extra(id),
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(ids: &[u32]) -> BTreeMap<DomainId, Domain> {
        ids.iter()
            .map(|&i| {
                (
                    DomainId(i),
                    Domain {
                        cfg: Default::default(),
                        ready: true,
                        context: true,
                        oldest_call: Some(0),
                        served_ns: 0,
                        ticks_granted: 0,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn the_papers_example_gives_4_2_1_2_ticks() {
        // (Dom1,1024), (Dom2,512), (Dom3,256), (Dom4,512) → 4, 2, 1, 2.
        let mut r = CreditRing::default();
        for (id, w) in [(1, 1024), (2, 512), (3, 256), (4, 512)] {
            r.insert(DomainId(id), w);
        }
        let doms = ready(&[1, 2, 3, 4]);
        let mut got = BTreeMap::new();
        for _ in 0..4 {
            let d = r.next(&doms, false, |_| 0).unwrap();
            got.insert(d.domain.0, d.ticks);
        }
        assert_eq!(got, BTreeMap::from([(1, 4), (2, 2), (3, 1), (4, 2)]));
    }

    #[test]
    fn removing_the_current_entry_keeps_the_walk_going() {
        let mut r = CreditRing::default();
        for id in 1..=3 {
            r.insert(DomainId(id), 256);
        }
        let doms = ready(&[1, 2, 3]);
        assert_eq!(r.next(&doms, true, |_| 0).unwrap().domain, DomainId(1));
        r.remove(DomainId(2));
        assert_eq!(r.next(&doms, true, |_| 0).unwrap().domain, DomainId(3));
        assert_eq!(r.next(&doms, true, |_| 0).unwrap().domain, DomainId(1));
    }
}
