//! The optimizer thread (Rinnegan §3.2): every period it asks the
//! application's tracker how it is doing against its goal, lets
//! hetsched-core's [`Optimizer`] pick the remedy, and carries it out:
//! spreading calls over more units, asking the monitor for CUSTOM shares,
//! or calling the application back to change its work.

use crate::scheduler::{Backend, Scheduler};
use hetsched_core::ids::UnitId;
use hetsched_core::optimizer::{Action, Direction, Optimizer, OptimizerConfig};
use hetsched_protocol::{SettingsRequest, WireClass};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the optimizer tells the application's callback.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Adjustment {
    /// `Reduce`: below the goal with no other remedy left, do less work
    /// per unit of progress (lower quality, frame rate …). `Increase`: above
    /// it, more work is affordable.
    pub direction: Direction,
    pub achieved: f64,
    pub target: f64,
}

type Tracker = Box<dyn FnMut() -> f64 + Send>;
type Callback = Box<dyn FnMut(Adjustment) + Send>;

/// A performance goal: a target in the tracker's unit (MB/s, frames/s,
/// calls/s: higher is better) and the tracker that measures it.
pub struct PerformanceGoal {
    pub target: f64,
    tracker: Tracker,
    on_adjust: Option<Callback>,
    /// How often the tracker is asked (Rinnegan: 500 ms).
    pub period: Duration,
    pub config: OptimizerConfig,
}

impl std::fmt::Debug for PerformanceGoal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerformanceGoal")
            .field("target", &self.target)
            .field("period", &self.period)
            .field("config", &self.config)
            .finish()
    }
}

impl PerformanceGoal {
    /// `tracker` returns the application's current performance.
    pub fn new(target: f64, tracker: impl FnMut() -> f64 + Send + 'static) -> Self {
        PerformanceGoal {
            target,
            tracker: Box::new(tracker),
            on_adjust: None,
            period: Duration::from_millis(500),
            config: OptimizerConfig::default(),
        }
    }

    /// A rate goal over a progress counter the application increments
    /// (bytes processed, frames done): the tracker is the counter's rate
    /// over the last period.
    pub fn rate_of(target_per_s: f64, counter: Arc<AtomicU64>) -> Self {
        let mut last = (Instant::now(), counter.load(Ordering::Relaxed));
        Self::new(target_per_s, move || {
            let now = (Instant::now(), counter.load(Ordering::Relaxed));
            let dt = now.0.duration_since(last.0).as_secs_f64();
            let rate = now.1.saturating_sub(last.1) as f64 / dt.max(1e-9);
            last = now;
            rate
        })
    }

    /// The callback for the last rung (and its reverse).
    pub fn on_adjust(mut self, f: impl FnMut(Adjustment) + Send + 'static) -> Self {
        self.on_adjust = Some(Box::new(f));
        self
    }

    pub fn period(mut self, period: Duration) -> Self {
        self.period = period;
        self
    }

    pub fn config(mut self, config: OptimizerConfig) -> Self {
        self.config = config;
        self
    }
}

/// Where the optimizer stands, for status and tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GoalStatus {
    pub target: f64,
    /// The tracker's last answer.
    pub achieved: f64,
    pub spreading: bool,
    /// CUSTOM shares currently asked for (0: the starting class).
    pub shares: u32,
    /// Reductions asked of the application and not undone.
    pub reductions: u32,
    /// Periods measured so far.
    pub periods: u64,
}

/// A running optimizer thread; dropping it stops the thread.
pub(crate) struct OptimizerThread {
    stop: Option<mpsc::Sender<()>>,
    handle: Option<JoinHandle<()>>,
    pub status: Arc<Mutex<GoalStatus>>,
}

impl Drop for OptimizerThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

pub(crate) fn start(
    sched: &Arc<Scheduler>,
    mut goal: PerformanceGoal,
) -> std::io::Result<OptimizerThread> {
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let status = Arc::new(Mutex::new(GoalStatus {
        target: goal.target,
        ..GoalStatus::default()
    }));
    let thread_status = Arc::clone(&status);
    let sched = Arc::clone(sched);
    let handle = std::thread::Builder::new()
        .name("hetsched-optimizer".into())
        .spawn(move || {
            let mut opt = Optimizer::new(goal.config);
            // Each period ends early when the runtime drops the sender.
            while let Err(RecvTimeoutError::Timeout) = stop_rx.recv_timeout(goal.period) {
                let achieved = (goal.tracker)();
                let action = opt.step(achieved, goal.target);
                apply(&sched, &mut opt, &mut goal, action, achieved);
                let mut s = thread_status.lock().unwrap_or_else(|p| p.into_inner());
                s.achieved = achieved;
                s.spreading = opt.spreading();
                s.shares = opt.shares();
                s.reductions = opt.reductions();
                s.periods += 1;
            }
            // Leave the machine as we found it: no spreading, starting class.
            sched.set_spreading(false);
            if opt.shares() > 0 {
                let _ = set_shares(&sched, None);
            }
        })?;
    Ok(OptimizerThread {
        stop: Some(stop_tx),
        handle: Some(handle),
        status,
    })
}

fn apply(
    sched: &Scheduler,
    opt: &mut Optimizer,
    goal: &mut PerformanceGoal,
    action: Action,
    achieved: f64,
) {
    match action {
        Action::Hold => {}
        Action::Spread(on) => sched.set_spreading(on),
        Action::SetShares(shares) => {
            if let Err(e) = set_shares(sched, shares) {
                tracing::warn!("the monitor refused more shares ({e})");
                opt.shares_refused();
            }
        }
        Action::Notify(direction) => {
            if let Some(cb) = goal.on_adjust.as_mut() {
                cb(Adjustment {
                    direction,
                    achieved,
                    target: goal.target,
                });
            }
        }
    }
}

/// CUSTOM `shares` on every device unit the monitor arbitrates, or back to
/// the class this client started with (`None`).
fn set_shares(sched: &Scheduler, shares: Option<u32>) -> Result<(), String> {
    let client = sched.link.client();
    for (i, backend) in sched.backends.iter().enumerate() {
        if *backend != Backend::Emulated {
            continue;
        }
        let class = match shares {
            Some(n) => WireClass::Custom(n),
            None => match client.settings().get(i) {
                Some(s) => s.class,
                None => continue,
            },
        };
        let request = SettingsRequest {
            class: Some(class),
            priority: None,
        };
        client
            .set_settings(None, Some(UnitId(i as u16)), request)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
