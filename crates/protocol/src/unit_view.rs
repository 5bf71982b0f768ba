//! What a client can expect from one unit now, read from the two view
//! pages (no message to the daemon): the C API's `hs_client_unit_view` and
//! the Python `Client.view` return it.

use crate::client::Session;
use hetsched_core::unit::UnitClass;

/// One unit seen from this client, from its private page and the global one.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UnitView {
    /// Fraction of the unit's time this client is guaranteed under contention.
    pub guaranteed: f64,
    /// Expected wait of a new task before it runs, ns (may be infinite).
    pub wait_ns: f64,
    /// Fraction of the unit this client used recently.
    pub current_utilisation: f64,
    /// Most of the unit this client may get (1 when uncapped).
    pub max_utilisation: f64,
    /// The policy holds this client back now.
    pub throttled: bool,
    /// Unit-wide: fraction of capacity in use (moving average).
    pub busy_fraction: f64,
    /// Unit-wide: clients active on it.
    pub active_clients: u32,
    /// Unit-wide: requests waiting and running.
    pub queued: u32,
    pub running: u32,
    /// CPU kinds: runnable threads on the kind's cores (all processes).
    pub runnable_threads: u32,
}

impl Session {
    /// Unit `index` as this client sees it now; `None` when there is no
    /// such unit. An observer (no pages) gets zeros.
    pub fn unit_view(&self, index: usize) -> Option<UnitView> {
        let u = self.units().get(index)?;
        let private = self
            .private_view()
            .and_then(|p| p.unit(index))
            .unwrap_or_default();
        let global = self.global_view();
        let g = global.and_then(|g| g.unit(index)).unwrap_or_default();
        let runnable = if u.class == UnitClass::Cpu {
            // The global page numbers CPU kinds in unit order.
            let kind = self.units()[..index]
                .iter()
                .filter(|u| u.class == UnitClass::Cpu)
                .count();
            global
                .and_then(|g| g.cpu_kind(kind))
                .map_or(0, |k| k.threads_by_nice.iter().sum())
        } else {
            0
        };
        Some(UnitView {
            guaranteed: private.guaranteed,
            wait_ns: private.wait_ns,
            current_utilisation: private.current_utilisation,
            max_utilisation: private.max_utilisation,
            throttled: private.throttled,
            busy_fraction: g.view.busy_fraction,
            active_clients: g.view.active_clients,
            queued: g.view.queued,
            running: g.view.running,
            runnable_threads: runnable,
        })
    }
}
