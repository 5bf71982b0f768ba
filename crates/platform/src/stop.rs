//! A stop signal: set once, seen by every thread that checks it, and a
//! sleep that ends early when it is set (the daemon's threads, the
//! balancer's epoch loop).

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub struct StopSignal {
    stopped: Mutex<bool>,
    changed: Condvar,
}

impl StopSignal {
    pub fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.changed.notify_all();
    }

    pub fn is_stopped(&self) -> bool {
        *self.stopped.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps for `d` unless stopped first; whether to go on (not stopped).
    pub fn pause(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut stopped = self.stopped.lock().unwrap_or_else(PoisonError::into_inner);
        while !*stopped {
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
    use std::sync::Arc;

    #[test]
    fn a_pause_runs_its_length_unless_stopped() {
        let s = StopSignal::default();
        assert!(s.pause(Duration::from_millis(1)));
        let s = Arc::new(s);
        let sleeper = {
            let s = Arc::clone(&s);
            std::thread::spawn(move || s.pause(Duration::from_secs(600)))
        };
        s.stop();
        assert!(!sleeper.join().unwrap(), "the pause ended by the stop");
        assert!(s.is_stopped());
        assert!(!s.pause(Duration::from_secs(600)));
    }
}
