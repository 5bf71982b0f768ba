//! Which side of a `fork` this process is on: a child must not use its
//! parent's connections or threads. Counted by a `pthread_atfork` handler,
//! so checking costs an atomic load rather than a `getpid` system call.

use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

static GENERATION: AtomicU64 = AtomicU64::new(0);
static REGISTER: Once = Once::new();

extern "C" fn in_child() {
    GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// Forks this process's line has gone through since the interposer was
/// loaded; it changes in a child.
#[allow(unsafe_code)]
pub fn generation() -> u64 {
    REGISTER.call_once(|| {
        // SAFETY: registers a handler that only increments an atomic,
        // which is safe in a freshly forked child.
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    });
    GENERATION.load(Ordering::SeqCst)
}
