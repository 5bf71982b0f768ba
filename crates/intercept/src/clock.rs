//! One monotonic clock for every lease decision.

use std::sync::OnceLock;
use std::time::Instant;

static BASE: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since the first call in this process (monotonic, never 0
/// after the first call returns, so 0 can mean "no lease").
pub fn now_ns() -> u64 {
    let base = *BASE.get_or_init(Instant::now);
    base.elapsed().as_nanos() as u64 + 1
}
