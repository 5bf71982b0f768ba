//! Other processes as the monitor knows them: a key that tells a process
//! from a later one with the same pid, and the table it looks processes up
//! in. [`crate::procfs`] implements the table over `/proc`; tests supply
//! their own.

use serde::{Deserialize, Serialize};

/// One process, across daemon restarts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProcessKey {
    pub pid: u32,
    pub start_time: u64,
}

/// What the monitor needs to know about processes it does not talk to.
pub trait ProcessTable {
    /// Key and owner of a live process, `None` if there is none.
    fn lookup(&self, pid: u32) -> Option<(ProcessKey, u32)>;
}
