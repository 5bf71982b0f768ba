//! The record-keeping every unit policy does the same way around its own
//! ordering: a submitted request counted in the client's record, a
//! dispatch counted against it, a client's own queue of requests in
//! arrival order (the policies that keep one per client), and what is left
//! of a client's queue when it leaves. The policies (`fifo.rs`,
//! `priority.rs`, `share.rs`, `credit.rs`, and `time_share.rs` through
//! FIFO) call these and keep only what is theirs: the order.

use super::Request;
use super::accounting::{ClientLedger, ClientQueue, QueuedRequest};
use crate::ids::{ClientId, Ns};

/// Counts `request` as submitted by its client (registering the client if
/// it is new); the client's index in the ledger.
pub(super) fn record_submitted<Q: Default>(
    ledger: &mut ClientLedger<Q>,
    request: &Request,
    now: Ns,
) -> usize {
    let idx = ledger.ensure(request.client, now);
    ledger.record_submit(idx, request.expected_ns, now);
    idx
}

/// Counts a request of `client` as dispatched.
pub(super) fn record_dispatched<Q: Default>(
    ledger: &mut ClientLedger<Q>,
    client: ClientId,
    now: Ns,
) {
    let idx = ledger.ensure(client, now);
    ledger.record_dispatch(idx, now);
}

/// Per-client queues in the ledger, each in arrival order, with a sequence
/// number across all of them (the arrival order between clients).
#[derive(Debug, Default)]
pub(super) struct ArrivalSeq {
    next: u64,
}

impl ArrivalSeq {
    /// Counts `request` as submitted and queues it at the back of its
    /// client's queue.
    pub(super) fn submit(
        &mut self,
        ledger: &mut ClientLedger<ClientQueue>,
        request: Request,
        now: Ns,
    ) {
        let idx = record_submitted(ledger, &request, now);
        let seq = self.next;
        self.next += 1;
        ledger.clients_mut()[idx]
            .queue
            .push_back(QueuedRequest { request, seq });
    }

    /// Takes the request at the front of the queue of the client at `idx`
    /// and counts it as dispatched.
    pub(super) fn dispatch(
        ledger: &mut ClientLedger<ClientQueue>,
        idx: usize,
        now: Ns,
    ) -> Option<Request> {
        let queued = ledger.clients_mut()[idx].queue.pop_front()?;
        ledger.record_dispatch(idx, now);
        Some(queued.request)
    }
}

/// Forgets `client`; the requests it still had queued, in arrival order.
pub(super) fn remove_queued(
    ledger: &mut ClientLedger<ClientQueue>,
    client: ClientId,
    now: Ns,
) -> Vec<Request> {
    ledger
        .remove(client, now)
        .map(|c| c.queue.into_iter().map(|q| q.request).collect())
        .unwrap_or_default()
}
