//! Messages decided under the monitor's lock, sent by the server.

use hetsched_core::ids::ClientId;
use hetsched_protocol::DaemonMsg;

#[derive(Debug, Default)]
pub struct Outbox {
    msgs: Vec<(ClientId, DaemonMsg)>,
}

impl Outbox {
    pub fn push(&mut self, to: ClientId, msg: DaemonMsg) {
        self.msgs.push((to, msg));
    }

    pub fn drain(&mut self) -> std::vec::Drain<'_, (ClientId, DaemonMsg)> {
        self.msgs.drain(..)
    }

    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
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
