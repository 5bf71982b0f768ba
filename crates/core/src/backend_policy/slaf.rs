//! SLAF's feedback (Pegasus §4.3): every window, each domain with an SLO
//! (expected accelerator time as a fraction of wall time) that was served
//! less than its SLO while it had work is in violation; while it is, it
//! gets one extra tick per scheduling turn, until the ticks owed for its
//! deficit are paid.

use super::{Domain, DomainId};
use crate::Ns;
use std::collections::BTreeMap;

/// Length of the SLO check window (Pegasus checks "ever so often"; one
/// second matches its example SLO of 0.5 s every second).
pub const SLO_WINDOW_NS: Ns = 1_000_000_000;

#[derive(Clone, Debug)]
pub struct SloWindow {
    tick_ns: Ns,
    start: Option<Ns>,
    /// Served in the current window.
    served: BTreeMap<DomainId, Ns>,
    /// Compensation ticks still owed.
    owed: BTreeMap<DomainId, u32>,
    /// Whether the last closed window met each SLO.
    met: BTreeMap<DomainId, bool>,
}

impl SloWindow {
    pub fn new(tick_ns: Ns) -> SloWindow {
        SloWindow {
            tick_ns: tick_ns.max(1),
            start: None,
            served: BTreeMap::new(),
            owed: BTreeMap::new(),
            met: BTreeMap::new(),
        }
    }

    pub fn tick_ns(&self) -> Ns {
        self.tick_ns
    }

    pub fn charge(&mut self, id: DomainId, ns: Ns) {
        *self.served.entry(id).or_insert(0) += ns;
    }

    pub fn remove(&mut self, id: DomainId) {
        self.served.remove(&id);
        self.owed.remove(&id);
        self.met.remove(&id);
    }

    /// Closes the window when it is over and sets what is owed. Domains
    /// with no queued call at the check are not in violation: an SLO
    /// promises time to a domain that asks for it.
    pub(crate) fn check(&mut self, now: Ns, domains: &BTreeMap<DomainId, Domain>) {
        let start = *self.start.get_or_insert(now);
        let elapsed = now.saturating_sub(start);
        if elapsed < SLO_WINDOW_NS {
            return;
        }
        for (id, d) in domains {
            let Some(slo) = d.cfg.slo else { continue };
            let want = (slo * elapsed as f64) as Ns;
            let got = self.served.get(id).copied().unwrap_or(0);
            let violated = d.ready && got < want;
            self.met.insert(*id, !violated);
            if violated {
                let deficit_ticks = (want - got).div_ceil(self.tick_ns);
                let owed = self.owed.entry(*id).or_insert(0);
                *owed = (*owed).max(u32::try_from(deficit_ticks).unwrap_or(u32::MAX));
            }
        }
        self.served.clear();
        self.start = Some(now);
    }

    /// One owed tick for `id`'s turn, if it is owed any.
    pub(crate) fn take_compensation(&mut self, id: DomainId) -> u32 {
        match self.owed.get_mut(&id) {
            Some(n) if *n > 0 => {
                *n -= 1;
                1
            }
            _ => 0,
        }
    }

    pub(crate) fn state(&self) -> Vec<(DomainId, bool)> {
        self.met.iter().map(|(&id, &m)| (id, m)).collect()
    }
}
