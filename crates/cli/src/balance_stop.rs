//! How `hetsched balance` stops: SIGINT or SIGTERM ends the epoch loop at
//! once (not after the epoch's sleep), so that the restore of every
//! changed thread runs before the process exits.

use anyhow::{Context, Result};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Set once by a signal; [`Stop::pause`] ends early when it is.
#[derive(Debug, Default)]
pub struct Stop {
    stopped: Mutex<Option<i32>>,
    changed: Condvar,
}

impl Stop {
    /// A stop set by SIGINT or SIGTERM (a handler thread waits for them;
    /// with the handlers installed, the signals no longer kill the process
    /// before it has restored what it changed).
    pub fn on_signals() -> Result<Arc<Stop>> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let stop = Arc::new(Stop::default());
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
            .context("installing the SIGINT and SIGTERM handlers")?;
        let s = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("balance-signals".into())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    s.stop(sig);
                }
            })?;
        Ok(stop)
    }

    pub fn stop(&self, signal: i32) {
        let mut s = self.stopped.lock().unwrap_or_else(PoisonError::into_inner);
        s.get_or_insert(signal);
        self.changed.notify_all();
    }

    /// The signal that stopped the loop, if one did.
    pub fn signal(&self) -> Option<i32> {
        *self.stopped.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps for `d` unless stopped first; whether to go on.
    pub fn pause(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut stopped = self.stopped.lock().unwrap_or_else(PoisonError::into_inner);
        while stopped.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            stopped = self
                .changed
                .wait_timeout(stopped, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_ends_a_long_pause_at_once() {
        let s = Arc::new(Stop::default());
        assert!(s.pause(Duration::from_millis(1)));
        let sleeper = {
            let s = Arc::clone(&s);
            std::thread::spawn(move || s.pause(Duration::from_secs(600)))
        };
        s.stop(15);
        assert!(!sleeper.join().unwrap());
        assert_eq!(s.signal(), Some(15));
        assert!(!s.pause(Duration::from_secs(600)));
    }
}
