//! Notes about optional drivers that are absent (no CUDA, no OpenCL):
//! said once per process at info level, however many runtimes it starts.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

static SAID: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

/// Logs `message()` under `topic` unless this process already did;
/// whether this was the first time. (The message is only built when info
/// is logged at all.)
pub(crate) fn once(topic: &'static str, message: impl FnOnce() -> String) -> bool {
    let first = SAID
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(topic);
    if first {
        tracing::info!("{}", message());
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_is_said_once() {
        let said: Vec<bool> = (0..3)
            .map(|_| once("notes-test-topic", || "said".into()))
            .collect();
        assert_eq!(said, [true, false, false]);
        assert!(once("notes-test-other-topic", || "said".into()));
    }
}
