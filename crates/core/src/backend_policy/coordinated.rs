//! Pegasus Algorithm 2: the accelerator follows the CPU side.
//!
//! - **CoSched** serves the highest-credit ready domain among those whose
//!   CPU threads run next; when none of them is ready, the highest-credit
//!   ready domain (so the accelerator does not idle). Domains the CPU
//!   schedule leaves out can wait: unfairness traded for latency, but
//!   only occasionally, as Pegasus puts it: a ready domain whose oldest
//!   call has waited [`COSCHED_MAX_WAIT_NS`] goes first, whatever the
//!   schedule (otherwise a client that is blocked on its call whenever
//!   the schedule is read, as every waiting client on Linux is, would
//!   never be served while scheduled ones have calls).
//! - **AugC** runs AccC's rounds — every ready domain gets one turn of
//!   `X / X_min` ticks per round — but orders each round by credits plus
//!   a temporary boost: the remaining CPU credit of domains the CPU
//!   schedule runs next. A boosted domain goes earlier in the round, so
//!   its CPU and accelerator sides meet; the round still ends with every
//!   ready domain served, so no one is denied their turn by a boost.

use super::{CpuSchedule, Decision, Domain, DomainId};
use crate::Ns;
use std::collections::{BTreeMap, BTreeSet};

/// Longest a ready domain's oldest call waits under CoSched before it is
/// served ahead of the CPU schedule: ten ticks.
pub const COSCHED_MAX_WAIT_NS: Ns = 100_000_000;

pub(crate) fn cosched(
    domains: &BTreeMap<DomainId, Domain>,
    hs: &CpuSchedule,
    now: Ns,
) -> Option<Decision> {
    let overdue = domains
        .iter()
        .filter_map(|(&id, d)| {
            let oldest = d.oldest_call.filter(|_| d.ready)?;
            (now.saturating_sub(oldest) >= COSCHED_MAX_WAIT_NS).then_some((oldest, id))
        })
        .min();
    if let Some((_, domain)) = overdue {
        return Some(Decision { domain, ticks: 1 });
    }
    let pick = |only_scheduled: bool| {
        domains
            .iter()
            .filter(|(id, d)| d.ready && (!only_scheduled || hs.remaining(**id).is_some()))
            .max_by_key(|(id, d)| (d.cfg.acc_credits, std::cmp::Reverse(**id)))
            .map(|(&domain, _)| Decision { domain, ticks: 1 })
    };
    pick(true).or_else(|| pick(false))
}

#[derive(Clone, Debug, Default)]
pub(crate) struct AugCredits {
    /// Domains that had their turn in the current round.
    served: BTreeSet<DomainId>,
}

impl AugCredits {
    pub fn remove(&mut self, id: DomainId) {
        self.served.remove(&id);
    }

    pub fn next(
        &mut self,
        domains: &BTreeMap<DomainId, Domain>,
        hs: &CpuSchedule,
    ) -> Option<Decision> {
        let pick = |served: &BTreeSet<DomainId>| {
            domains
                .iter()
                .filter(|(id, d)| d.ready && !served.contains(id))
                .max_by_key(|(id, d)| {
                    // Credits and remaining CPU credit are both in credit units.
                    let boost = hs.remaining(**id).unwrap_or(0);
                    (
                        u64::from(d.cfg.acc_credits) + u64::from(boost),
                        std::cmp::Reverse(**id),
                    )
                })
                .map(|(&id, d)| (id, d))
        };
        let (id, d) = match pick(&self.served) {
            Some(x) => x,
            None => {
                // Every ready domain has had its turn: a new round.
                self.served.clear();
                pick(&self.served)?
            }
        };
        self.served.insert(id);
        let min = domains
            .values()
            .map(|d| d.cfg.acc_credits.max(1))
            .min()
            .unwrap_or(1);
        let ticks = if d.context {
            (d.cfg.acc_credits / min).max(1)
        } else {
            1
        };
        Some(Decision { domain: id, ticks })
    }
}
