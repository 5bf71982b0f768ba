//! Following targets on the client side: [`DeficitFollower`] (which unit
//! takes the next task) and [`Pacer`] (how fast to send).

use super::*;

/// The client's side: follows target fractions exactly in the long run
/// (smooth weighted round robin).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeficitFollower {
    credit: Vec<f64>,
}

/// Credits are clamped to this, so a target change is followed at once
/// instead of paying off an old debt.
pub(super) const CREDIT_LIMIT: f64 = 2.0;

impl DeficitFollower {
    pub fn new() -> Self {
        Self::default()
    }

    /// The unit for the next task: every unit with a target accrues its
    /// fraction, the one with most credit (lowest index on ties) runs the
    /// task and pays 1. `allowed(u)` can veto units (no implementation).
    /// `None` when no allowed unit has a positive target.
    pub fn pick(&mut self, target: &[f64], allowed: impl Fn(usize) -> bool) -> Option<usize> {
        if self.credit.len() != target.len() {
            self.credit = vec![0.0; target.len()];
        }
        // Allocation-free: the runtime and the replay pick once per task.
        let usable = |u: usize| target[u] > 0.0 && target[u].is_finite() && allowed(u);
        let total: f64 = (0..target.len())
            .filter(|&u| usable(u))
            .map(|u| target[u])
            .sum();
        if total <= 0.0 {
            return None;
        }
        for (u, c) in self.credit.iter_mut().enumerate() {
            if usable(u) {
                *c = (*c + target[u] / total).min(CREDIT_LIMIT);
            } else {
                *c = 0.0;
            }
        }
        let best = (0..target.len())
            .filter(|&u| usable(u))
            .max_by(|&a, &b| self.credit[a].total_cmp(&self.credit[b]).then(b.cmp(&a)))?;
        self.credit[best] = (self.credit[best] - 1.0).max(-CREDIT_LIMIT);
        Some(best)
    }
}

/// The client's pacing: a token bucket filled at the target rate (times
/// `1 + headroom`), holding at most `burst` tokens; each task takes one,
/// or the work it carries in tasks of the mean size ([`Pacer::take_work`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pacer {
    tokens: f64,
    last: Option<Ns>,
}

impl Pacer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes a token for a task issued at `now` (`Ok`), or says when the
    /// next token will be there (`Err(at)`, `at > now`). A rate that is
    /// not positive and finite does not pace.
    pub fn take(&mut self, now: Ns, rate: f64, burst: f64) -> Result<(), Ns> {
        self.take_work(now, rate, burst, 1.0)
    }

    /// As [`Pacer::take`], for a task that carries `work` tasks of the
    /// mean size: a rate in mean-size tasks per second then lets an app
    /// whose tasks are smaller for a while issue more of them, and holds
    /// it to the same work. A task of more work than `burst` waits for a
    /// full bucket and leaves it in debt.
    pub fn take_work(&mut self, now: Ns, rate: f64, burst: f64, work: f64) -> Result<(), Ns> {
        if !(rate.is_finite() && rate > 0.0) {
            return Ok(());
        }
        let burst = burst.max(1.0);
        let elapsed = self
            .last
            .map_or(burst / rate * 1e9, |t| now.saturating_sub(t) as f64);
        self.tokens = (self.tokens + elapsed * rate / 1e9).min(burst);
        self.last = Some(now);
        let need = work.min(burst);
        if self.tokens >= need {
            self.tokens -= work;
            Ok(())
        } else {
            let wait = ((need - self.tokens) / rate * 1e9).ceil().max(1.0);
            Err(now + wait as Ns)
        }
    }
}
