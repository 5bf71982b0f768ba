//! How `hetsched balance` stops: SIGINT or SIGTERM ends the epoch loop at
//! once (not after the epoch's sleep), so that the restore of every
//! changed thread runs before the process exits.

use anyhow::{Context, Result};
use hetsched_platform::stop::StopSignal;
use signal_hook::iterator::Handle;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Set by the first SIGINT or SIGTERM. Owns the thread that waits for
/// them, and stops and joins it when dropped.
pub struct Stop {
    signal: Arc<StopSignal>,
    /// The signal that set it; 0 while none has.
    which: Arc<AtomicI32>,
    handle: Handle,
    waiter: Option<JoinHandle<()>>,
}

impl Stop {
    /// Installs the handlers (with them, the signals no longer kill the
    /// process before it has restored what it changed).
    pub fn on_signals() -> Result<Stop> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
            .context("installing the SIGINT and SIGTERM handlers")?;
        let handle = signals.handle();
        let signal = Arc::new(StopSignal::default());
        let which = Arc::new(AtomicI32::new(0));
        let (s, w) = (Arc::clone(&signal), Arc::clone(&which));
        let waiter = std::thread::Builder::new()
            .name("balance-signals".into())
            .spawn(move || {
                // Ends with the first signal, or when the handle closes.
                if let Some(sig) = signals.forever().next() {
                    w.store(sig, Ordering::SeqCst);
                    s.stop();
                }
            })?;
        Ok(Stop {
            signal,
            which,
            handle,
            waiter: Some(waiter),
        })
    }

    /// The signal that stopped the loop, if one did.
    pub fn signal(&self) -> Option<i32> {
        Some(self.which.load(Ordering::SeqCst)).filter(|&s| s != 0)
    }

    /// Sleeps for `d` unless a signal comes first; whether to go on.
    pub fn pause(&self, d: Duration) -> bool {
        self.signal.pause(d)
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(w) = self.waiter.take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_signal_a_pause_runs_and_dropping_joins_the_waiter() {
        let stop = Stop::on_signals().unwrap();
        assert!(stop.pause(Duration::from_millis(1)));
        assert_eq!(stop.signal(), None);
        // Returns only once the waiting thread has ended.
        drop(stop);
    }
}
