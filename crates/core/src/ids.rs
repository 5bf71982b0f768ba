//! Small copyable identifiers shared by every layer.
//!
//! Time in hetsched-core is always an argument: callers pass `now` in
//! nanoseconds from whatever clock they own (the daemon's monotonic clock, the
//! simulator's virtual clock), which keeps this crate free of clocks.

use serde::{Deserialize, Serialize};

/// Nanoseconds, used both for instants (since the caller's epoch) and durations.
pub type Ns = u64;

/// Nanoseconds per millisecond, for readable conversions.
pub const NS_PER_MS: f64 = 1e6;

/// One application (a process connected to the monitor, or a simulated app).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ClientId(pub u32);

/// Index of a processing unit in its [`crate::unit::Machine`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UnitId(pub u16);

/// Index of a unit *kind* in its [`crate::unit::Machine`]: units of one kind
/// share one task model entry (two identical GPUs have one kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct KindId(pub u16);

/// One submitted task instance, unique per client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskId(pub u64);

impl UnitId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl KindId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}
