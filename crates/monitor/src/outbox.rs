//! Messages decided under the monitor's lock, sent by the server, and
//! kernel calls the units' policies started, handed to their executors.

use hetsched_core::ids::{ClientId, UnitId};
use hetsched_protocol::kernel_call::KernelCall;
use hetsched_protocol::{DaemonMsg, ErrorCode};
use hetsched_views::data_region::DataRegion;
use std::sync::Arc;

/// A kernel call whose unit's policy just gave it the unit.
#[derive(Debug)]
pub struct KernelStart {
    pub unit: UnitId,
    pub client: ClientId,
    pub call: QueuedKernel,
}

/// A checked kernel call and the data region it was checked against
/// (kept with the call: a ring the client replaces meanwhile has a new
/// region, which the call's ranges were never checked against).
#[derive(Debug, Clone)]
pub struct QueuedKernel {
    pub call: KernelCall,
    pub region: Arc<DataRegion>,
}

#[derive(Debug, Default)]
pub struct Outbox {
    msgs: Vec<(ClientId, DaemonMsg)>,
    kernel_starts: Vec<KernelStart>,
}

impl Outbox {
    pub fn start_kernel(&mut self, start: KernelStart) {
        self.kernel_starts.push(start);
    }

    pub fn take_kernel_starts(&mut self) -> Vec<KernelStart> {
        std::mem::take(&mut self.kernel_starts)
    }

    /// Kernel calls started and not yet handed on, for tests.
    pub fn kernel_starts(&self) -> &[KernelStart] {
        &self.kernel_starts
    }

    pub fn push(&mut self, to: ClientId, msg: DaemonMsg) {
        self.msgs.push((to, msg));
    }

    pub fn drain(&mut self) -> std::vec::Drain<'_, (ClientId, DaemonMsg)> {
        self.msgs.drain(..)
    }

    /// The errors decided so far for `client` (code and message), to log
    /// once the state lock is released.
    pub fn refusals_to(&self, client: ClientId) -> Vec<(ErrorCode, String)> {
        self.msgs
            .iter()
            .filter_map(|(to, m)| match m {
                DaemonMsg::Error { code, message, .. } if *to == client => {
                    Some((*code, message.clone()))
                }
                _ => None,
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty() && self.kernel_starts.is_empty()
    }

    pub fn len(&self) -> usize {
        self.msgs.len()
    }

    /// Messages for one client, for tests.
    pub fn for_client(&self, to: ClientId) -> Vec<&DaemonMsg> {
        self.msgs
            .iter()
            .filter(|(c, _)| *c == to)
            .map(|(_, m)| m)
            .collect()
    }
}
