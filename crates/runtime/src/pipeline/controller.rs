//! The controller thread: admits chunks, executes the pipelining table one
//! step at a time, emits outputs in order, and between steps re-plans the
//! stage→unit assignment when the monitor's views say another one is
//! better (see the module docs of [`super`]).

use super::layout::{Devices, Done, Exec, Layout, Pool, pin_here, recv_spinning, run_guarded};
use super::{PipelineError, ReplanEvent, Shared, SharedStats, locked, unit_names};
use hetsched_core::ids::UnitId;
use hetsched_core::pipeline_replan::{Replanner, Verdict};
use hetsched_core::pipeline_table::{Step, Stepper};
use hetsched_protocol::{TaskEvent, TaskReply};
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError};
use std::time::{Duration, Instant};

/// How long a blocked controller waits before looking at the cancel flag.
const POLL: Duration = Duration::from_millis(20);

/// Everything `build` hands the controller.
pub(super) struct Setup<T> {
    pub layout: Layout<T>,
    pub profiling: Devices,
    pub assignment: Vec<UnitId>,
    pub stepper: Stepper,
    pub replanner: Option<Replanner>,
    pub replan_every: Duration,
    pub max_in_flight: usize,
    pub input: Receiver<T>,
    pub output: SyncSender<Result<T, PipelineError>>,
    pub cancel: Arc<AtomicBool>,
    pub stats: Arc<SharedStats>,
    pub shared: Arc<Shared>,
}

struct ChunkSlot<T> {
    data: Option<T>,
    error: Option<PipelineError>,
}

/// What one step spent waiting (for input, for results, for the
/// consumer) and running stages on this thread; the rest of its wall time
/// is the controller's own overhead.
#[derive(Default)]
struct StepTimes {
    waited_ns: u64,
    stage_ns: u64,
}

/// The entries of a step the controller started.
#[derive(Default)]
struct Dispatched {
    /// Started on lane workers or at the monitor: their results come back
    /// on the done channel.
    pending: usize,
    /// (chunk, stage) to run on this thread.
    inline: Vec<(u64, usize)>,
}

pub(super) struct Controller<T> {
    layout: Layout<T>,
    names: Vec<String>,
    exec: Vec<Exec<T>>,
    pool: Pool<T>,
    /// The CPU lane this thread runs stages of itself.
    inline: Option<UnitId>,
    stepper: Stepper,
    replanner: Option<Replanner>,
    replan_every: Duration,
    last_check: Instant,
    started: Instant,
    max_in_flight: usize,
    done_tx: Sender<Done<T>>,
    done_rx: Receiver<Done<T>>,
    /// Chunks received and not yet out, from chunk `emitted` on.
    chunks: VecDeque<ChunkSlot<T>>,
    emitted: u64,
    received: u64,
    input: Receiver<T>,
    output: SyncSender<Result<T, PipelineError>>,
    cancel: Arc<AtomicBool>,
    stats: Arc<SharedStats>,
    shared: Arc<Shared>,
}

fn reply_ok(reply: TaskReply) -> Result<(), String> {
    match reply {
        Ok(TaskEvent::DeviceDone(_)) => Ok(()),
        Ok(other) => Err(format!("the monitor answered {other:?} to device work")),
        Err(e) => Err(e.to_string()),
    }
}

fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

impl<T: Clone + Send + 'static> Controller<T> {
    pub fn new(s: Setup<T>, name: &str) -> Result<Controller<T>, PipelineError> {
        let (done_tx, done_rx) = mpsc::channel();
        let mut pool = Pool::new(done_tx.clone(), s.profiling, name);
        let inline = s.layout.inline_lane(&s.assignment);
        let exec = match s.layout.execs(&s.assignment, inline, &mut pool) {
            Ok(e) => e,
            Err(e) => {
                pool.shut_down();
                return Err(e);
            }
        };
        let now = Instant::now();
        Ok(Controller {
            names: s.layout.stages.iter().map(|st| st.name.clone()).collect(),
            layout: s.layout,
            exec,
            pool,
            inline,
            stepper: s.stepper,
            replanner: s.replanner,
            replan_every: s.replan_every,
            last_check: now,
            started: now,
            max_in_flight: s.max_in_flight,
            done_tx,
            done_rx,
            chunks: VecDeque::new(),
            emitted: 0,
            received: 0,
            input: s.input,
            output: s.output,
            cancel: s.cancel,
            stats: s.stats,
            shared: s.shared,
        })
    }

    pub fn run(mut self) {
        pin_here(self.inline.and_then(|id| self.layout.pin_of(id)));
        self.steps();
        // Lane workers end once their queues close.
        let Controller { pool, .. } = self;
        pool.shut_down();
    }

    /// The step loop: admit input, run one step of the table, emit what
    /// finished in order; until the input closes and everything is out,
    /// the consumer goes, or the pipeline is cancelled.
    fn steps(&mut self) {
        let mut step = Step::default();
        let mut input_closed = false;
        loop {
            if self.cancel.load(Ordering::Acquire) {
                return;
            }
            let started = Instant::now();
            let mut times = StepTimes::default();
            // Between steps nothing runs: the one place to move stages.
            if self.replanner.is_some() && started - self.last_check >= self.replan_every {
                self.last_check = started;
                self.replan();
            }
            if !self.admit(&mut input_closed, &mut times) {
                return;
            }
            if input_closed && self.received == self.emitted {
                return;
            }
            self.stepper
                .next_step_into(self.received as usize, &mut step);
            if step.is_empty() {
                continue;
            }
            let Dispatched { pending, inline } = self.dispatch(&step);
            self.count_copies(&step);
            for (chunk, stage) in inline {
                self.run_inline(chunk, stage, &mut times);
            }
            self.collect(pending, &mut times);
            add(&self.stats.steps, 1);
            add(&self.stats.stage_steps, step.compute.len() as u64);
            if !self.emit(&mut times) {
                return;
            }
            let total = started.elapsed().as_nanos() as u64;
            add(
                &self.stats.overhead_ns,
                total.saturating_sub(times.waited_ns + times.stage_ns),
            );
        }
    }

    /// Takes input while there is room for it; `false` when the pipeline
    /// was cancelled while it waited. With nothing in flight it waits for
    /// input (keeping the assignment current meanwhile); otherwise it takes
    /// only what is there.
    fn admit(&mut self, input_closed: &mut bool, times: &mut StepTimes) -> bool {
        while (self.received - self.emitted) < self.max_in_flight as u64 && !*input_closed {
            let idle = self.received == self.emitted;
            let got = if idle {
                let w = Instant::now();
                let r = match self.input.recv_timeout(POLL) {
                    Ok(x) => Ok(x),
                    Err(RecvTimeoutError::Timeout) => Err(TryRecvError::Empty),
                    Err(RecvTimeoutError::Disconnected) => Err(TryRecvError::Disconnected),
                };
                times.waited_ns += w.elapsed().as_nanos() as u64;
                r
            } else {
                self.input.try_recv()
            };
            match got {
                Ok(x) => {
                    self.chunks.push_back(ChunkSlot {
                        data: Some(x),
                        error: None,
                    });
                    self.received += 1;
                }
                Err(TryRecvError::Empty) if idle => {
                    if self.cancel.load(Ordering::Acquire) {
                        return false;
                    }
                    if self.replanner.is_some() && self.last_check.elapsed() >= self.replan_every {
                        self.last_check = Instant::now();
                        self.replan();
                    }
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => *input_closed = true,
            }
        }
        true
    }

    /// Starts the step's stage entries: to lane workers, to the monitor
    /// (device stages), or listed for this thread.
    fn dispatch(&mut self, step: &Step) -> Dispatched {
        let mut out = Dispatched::default();
        for e in &step.compute {
            let chunk = e.chunk as u64;
            if self.slot(chunk).error.is_some() {
                continue;
            }
            let started = match &self.exec[e.stage] {
                Exec::Inline(_) => {
                    out.inline.push((chunk, e.stage));
                    false
                }
                Exec::Worker(w) => {
                    let w = *w;
                    let data = self.slot(chunk).data.take().expect("chunk data present");
                    let sent = self.pool.send(w, (chunk, e.stage, data));
                    if !sent {
                        self.slot(chunk).error =
                            Some(self.failed(e.stage, chunk, "lane worker gone".into()));
                    }
                    sent
                }
                Exec::Device { .. } => self.submit_device(chunk, e.stage),
            };
            out.pending += usize::from(started);
        }
        out
    }

    /// Sends device stage `stage` of `chunk` to the monitor, its cost
    /// function giving the time; `false` (and the chunk failed) when it
    /// could not go.
    fn submit_device(&mut self, chunk: u64, stage: usize) -> bool {
        let Exec::Device {
            unit,
            cost,
            bytes_in,
            bytes_out,
            ..
        } = &self.exec[stage]
        else {
            return false;
        };
        let (unit, bytes_in, bytes_out) = (*unit, *bytes_in, *bytes_out);
        let data = self.chunks[(chunk - self.emitted) as usize]
            .data
            .as_ref()
            .expect("chunk data present");
        let ns = match catch_unwind(AssertUnwindSafe(|| cost(data))) {
            Ok(d) => u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            Err(p) => {
                let why = format!(
                    "its cost function panicked: {}",
                    crate::job::panic_message(&*p)
                );
                let err = self.failed(stage, chunk, why);
                let slot = self.slot(chunk);
                slot.data = None;
                slot.error = Some(err);
                return false;
            }
        };
        let tx = self.done_tx.clone();
        let sent = self.layout.sched.link.client().submit_device_with(
            unit,
            ns,
            bytes_in,
            bytes_out,
            Box::new(move |r| {
                let _ = tx.send(Done::Device {
                    chunk,
                    stage,
                    ok: reply_ok(r),
                });
            }),
        );
        match sent {
            Ok(_) => true,
            Err(err) => {
                let err = self.failed(stage, chunk, err.to_string());
                self.slot(chunk).error = Some(err);
                false
            }
        }
    }

    /// Counts the step's copies of chunks still alive. Copies to and from
    /// devices ride on the stage submissions (see `Layout::execs`);
    /// between CPU lanes there is nothing to move.
    fn count_copies(&self, step: &Step) {
        let copies = step
            .copies
            .iter()
            .filter(|c| {
                self.chunks[(c.chunk as u64 - self.emitted) as usize]
                    .error
                    .is_none()
            })
            .count();
        add(&self.stats.copies, copies as u64);
    }

    /// Runs stage `stage` of `chunk` on this thread.
    fn run_inline(&mut self, chunk: u64, stage: usize, times: &mut StepTimes) {
        let Exec::Inline(f) = &self.exec[stage] else {
            return;
        };
        let data = self.chunks[(chunk - self.emitted) as usize]
            .data
            .take()
            .expect("chunk data present");
        let t = Instant::now();
        let r = run_guarded(f, data);
        times.stage_ns += t.elapsed().as_nanos() as u64;
        self.store(chunk, stage, r);
    }

    /// Waits for the `pending` entries started elsewhere; a device stage's
    /// kernel runs here once the monitor says the device work is done.
    fn collect(&mut self, mut pending: usize, times: &mut StepTimes) {
        while pending > 0 {
            let w = Instant::now();
            let Ok(done) = recv_spinning(&self.done_rx) else {
                break;
            };
            times.waited_ns += w.elapsed().as_nanos() as u64;
            pending -= 1;
            match done {
                Done::Lane {
                    chunk,
                    stage,
                    result,
                } => self.store(chunk, stage, result),
                Done::Device { chunk, stage, ok } => {
                    let r = match ok {
                        Ok(()) => match (
                            &self.exec[stage],
                            self.chunks[(chunk - self.emitted) as usize].data.take(),
                        ) {
                            (Exec::Device { kernel, .. }, Some(data)) => {
                                let t = Instant::now();
                                let r = run_guarded(kernel, data);
                                times.stage_ns += t.elapsed().as_nanos() as u64;
                                r
                            }
                            _ => Err("device stage without its data".into()),
                        },
                        Err(why) => Err(why),
                    };
                    self.store(chunk, stage, r);
                }
            }
        }
    }

    /// Sends out, in order, every chunk the table has finished; `false`
    /// when the consumer has gone.
    fn emit(&mut self, times: &mut StepTimes) -> bool {
        while self.emitted < self.stepper.finished() as u64 {
            let slot = self.chunks.pop_front().expect("finished chunk present");
            self.emitted += 1;
            let out = match (slot.error, slot.data) {
                (Some(e), _) => {
                    add(&self.stats.failed, 1);
                    Err(e)
                }
                (None, Some(d)) => Ok(d),
                (None, None) => Err(PipelineError::Closed),
            };
            add(&self.stats.chunks_out, 1);
            let w = Instant::now();
            let sent = self.output.send(out).is_ok();
            times.waited_ns += w.elapsed().as_nanos() as u64;
            if !sent {
                return false;
            }
        }
        true
    }

    /// The slot of `chunk`, which is in flight.
    fn slot(&mut self, chunk: u64) -> &mut ChunkSlot<T> {
        &mut self.chunks[(chunk - self.emitted) as usize]
    }

    /// One re-plan check, between steps: the views, the pure decision, and
    /// on a switch the new stepper and executors. If the new executors
    /// cannot start (a lane thread), the old assignment stays.
    fn replan(&mut self) {
        let Some(replanner) = self.replanner.as_mut() else {
            return;
        };
        let t = Instant::now();
        let from = replanner.current().to_vec();
        let views = self.layout.views(&from);
        let verdict = replanner.check(&self.layout.specs, &self.layout.units, &views);
        add(&self.stats.replan_checks, 1);
        if let Ok(Verdict::Switch(sw)) = verdict {
            let switched = self
                .layout
                .execs(&sw.to, self.inline, &mut self.pool)
                .and_then(|exec| {
                    self.stepper
                        .reassign(&self.layout.specs, &self.layout.units, &sw.to)?;
                    Ok(exec)
                });
            match switched {
                Ok(exec) => {
                    self.exec = exec;
                    *locked(&self.shared.assignment) = sw.to.clone();
                    add(&self.stats.replans, 1);
                    let decide_ns = t.elapsed().as_nanos() as u64;
                    locked(&self.shared.replans).push(ReplanEvent {
                        step: self.stats.steps.load(Ordering::Relaxed),
                        chunks_out: self.emitted,
                        at: self.started.elapsed(),
                        from: unit_names(&self.layout.units, &sw.from),
                        to: unit_names(&self.layout.units, &sw.to),
                        from_period_ns: sw.from_period_ns,
                        to_period_ns: sw.to_period_ns,
                        decide_ns,
                    });
                }
                Err(e) => {
                    tracing::warn!("keeping the old assignment: {e}");
                    *replanner = Replanner::new(from, replanner.config());
                }
            }
        }
        add(&self.stats.replan_check_ns, t.elapsed().as_nanos() as u64);
    }

    fn failed(&self, stage: usize, chunk: u64, why: String) -> PipelineError {
        PipelineError::StageFailed {
            stage,
            name: self.names[stage].clone(),
            chunk,
            why,
        }
    }

    fn store(&mut self, chunk: u64, stage: usize, r: Result<T, String>) {
        let err = r
            .as_ref()
            .err()
            .map(|why| self.failed(stage, chunk, why.clone()));
        let slot = &mut self.chunks[(chunk - self.emitted) as usize];
        match r {
            Ok(d) => slot.data = Some(d),
            Err(_) => {
                slot.data = None;
                slot.error = err;
            }
        }
    }
}
