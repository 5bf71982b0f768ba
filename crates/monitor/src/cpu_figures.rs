//! What the CPU agent's last scan found, for the view pages: the figures
//! per CPU kind (global page) and the min-funding exclusive-core hint per
//! client (private pages). The agent replaces them after each scan
//! ([`crate::server::cpu_agent`]); the timer publishes the latest
//! ([`crate::server::timer`]). They live apart from the state lock, in a
//! [`crate::latest::Latest`] of their own.

use hetsched_core::ids::ClientId;
use hetsched_views::CpuKindView;
use std::collections::BTreeMap;

/// One scan's results.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CpuFigures {
    /// Per CPU kind, in CPU-unit order.
    pub kinds: Vec<CpuKindView>,
    /// Exclusive cores per CPU kind, per client that has any hint. A
    /// client that left keeps its entry until the next scan; only
    /// connected clients' pages are written.
    pub exclusive: BTreeMap<ClientId, Vec<u32>>,
}

impl CpuFigures {
    /// Before the first scan: nothing runnable, no hints.
    pub fn unscanned(kinds: usize) -> CpuFigures {
        CpuFigures {
            kinds: vec![CpuKindView::default(); kinds],
            exclusive: BTreeMap::new(),
        }
    }
}
