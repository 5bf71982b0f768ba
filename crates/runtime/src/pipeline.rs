//! Streaming pipelines (APC): a chain of stages, each with a CPU and/or
//! emulated-device implementation, fed a stream of chunks. The application
//! only pushes inputs and pulls outputs; a controller thread drives every
//! stage and copy step by step from hetsched-core's pipelining table
//! ([`hetsched_core::pipeline_table`]), with no call back into the
//! application and no round trip through the runtime's central queue per
//! stage.
//!
//! ```no_run
//! use hetsched_runtime::{Runtime, pipeline::{PipelineBuilder, Stage}};
//! let rt = Runtime::connect("pipe")?;
//! let mut p = PipelineBuilder::new("double-then-inc")
//!     .stage(Stage::new("double").cpu(|v: Vec<u32>| v.into_iter().map(|x| x * 2).collect()))
//!     .stage(Stage::new("inc").cpu(|v: Vec<u32>| v.into_iter().map(|x| x + 1).collect()))
//!     .build(&rt, &vec![0u32; 1024])?;
//! p.push(vec![1; 1024])?;
//! assert_eq!(p.pull().unwrap()?, vec![3; 1024]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! How it runs:
//! * **Plan.** `build` profiles each stage once on a sample chunk (CPU wall
//!   time; the emulated cost function for device kinds), then
//!   [`pipeline_table::assign`] places stages on units (CPU kinds and
//!   emulated devices of the monitor) and a [`Stepper`] generates steps.
//! * **Units.** The planner sees every emulated device of the monitor and
//!   one *lane* per core of each CPU kind (`cpu/0`, `cpu/1`, at most one
//!   per stage), so stages overlap on different cores as well as on
//!   devices. Lane `i` runs on the kind's `i`-th PU (pinned, best effort);
//!   lane workers and the controller poll for 50 µs before sleeping, so a
//!   busy pipeline pays no thread wake-up per step.
//! * **Steps.** In each step the controller submits the step's device
//!   entries to the monitor, hands entries of other CPU lanes to the
//!   pipeline's own worker threads (one per lane), runs the entries of the
//!   first CPU lane itself, then waits for the step. Copies to and from a
//!   device ride on its stage's submission (its bytes in and out, as in
//!   the runtime's device path), so the monitor holds the device's stream
//!   for them; the table still lists them in their own steps, for real
//!   devices with copy engines (later).
//! * **Bounds.** At most `max_in_flight` chunks are inside the controller;
//!   `push` blocks when another `max_in_flight` wait unread, and the
//!   controller stops when `max_in_flight` outputs wait unpulled
//!   (back-pressure, bounded memory).
//! * **Failures.** A stage that panics (or a device call the monitor
//!   refuses) fails that chunk only: its output is
//!   [`PipelineError::StageFailed`] naming the stage and chunk, in order,
//!   and the other chunks go on.
//! * **Shutdown.** [`Pipeline::finish`] drains (every pushed chunk comes
//!   out); dropping the pipeline cancels: the controller finishes the step
//!   under way, drops the chunks in flight and joins its threads.
//!
//! Not done yet: re-planning between steps on contention (the assignment is
//! fixed at `build`), OpenCL stages, CUDA streams/graphs (the table's
//! entries have the fields for them), joining a slow-core kind's throttle
//! cgroup from lane workers. Drop pipelines before their runtime: a
//! controller whose runtime is gone fails the chunks it still has.

use crate::runtime::Runtime;
use crate::scheduler::{Backend, Scheduler};
use hetsched_core::ids::UnitId;
use hetsched_core::pipeline_table::{
    self, PipelineTable, Place, PlanError, StageSpec, Step, Stepper,
};
use hetsched_core::unit::Unit;
use hetsched_protocol::{TaskEvent, TaskReply};
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

type StageFn<T> = Arc<dyn Fn(T) -> T + Send + Sync>;
type CostFn<T> = Arc<dyn Fn(&T) -> Duration + Send + Sync>;
type SizeFn<T> = Arc<dyn Fn(&T) -> (u64, u64) + Send + Sync>;
/// One chunk for a lane worker: (chunk, stage, data).
type LaneJob<T> = (u64, usize, T);

/// How long a blocked controller waits before looking at the cancel flag.
const POLL: Duration = Duration::from_millis(20);

/// One stage: a transformation of a chunk, implemented per unit kind.
pub struct Stage<T> {
    name: String,
    cpu: Option<StageFn<T>>,
    emulated: Vec<(String, CostFn<T>, StageFn<T>)>,
    sizes: Option<SizeFn<T>>,
}

impl<T> Clone for Stage<T> {
    fn clone(&self) -> Self {
        Stage {
            name: self.name.clone(),
            cpu: self.cpu.clone(),
            emulated: self.emulated.clone(),
            sizes: self.sizes.clone(),
        }
    }
}

impl<T: Send + 'static> Stage<T> {
    pub fn new(name: impl Into<String>) -> Self {
        Stage {
            name: name.into(),
            cpu: None,
            emulated: Vec::new(),
            sizes: None,
        }
    }

    /// The implementation on CPU cores (any CPU kind).
    pub fn cpu(mut self, f: impl Fn(T) -> T + Send + Sync + 'static) -> Self {
        self.cpu = Some(Arc::new(f));
        self
    }

    /// The implementation on emulated devices of kind `kind`: the monitor
    /// holds one of the device's streams for `cost`, then `kernel` computes
    /// the result on the host (as for [`crate::Task::emulated`]).
    pub fn emulated(
        mut self,
        kind: impl Into<String>,
        cost: impl Fn(&T) -> Duration + Send + Sync + 'static,
        kernel: impl Fn(T) -> T + Send + Sync + 'static,
    ) -> Self {
        let kind = kind.into();
        self.emulated.retain(|(k, _, _)| *k != kind);
        self.emulated.push((kind, Arc::new(cost), Arc::new(kernel)));
        self
    }

    /// Input and output bytes of one chunk (what copies move). Without it
    /// both are 0.
    pub fn sizes(mut self, f: impl Fn(&T) -> (u64, u64) + Send + Sync + 'static) -> Self {
        self.sizes = Some(Arc::new(f));
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PipelineError {
    #[error("stage {stage} ({name}) failed on chunk {chunk}: {why}")]
    StageFailed {
        stage: usize,
        name: String,
        chunk: u64,
        why: String,
    },
    #[error("stage {stage} ({name}) failed while profiling the sample chunk: {why}")]
    Profiling {
        stage: usize,
        name: String,
        why: String,
    },
    #[error("cannot plan the pipeline: {0}")]
    Plan(#[from] PlanError),
    #[error("no unit named {0} this pipeline can run on")]
    UnknownUnit(String),
    #[error("the pipeline is closed")]
    Closed,
    #[error("cannot start pipeline threads: {0}")]
    Threads(String),
}

/// Declares a pipeline.
pub struct PipelineBuilder<T> {
    name: String,
    stages: Vec<Stage<T>>,
    max_in_flight: usize,
    assign: Option<Vec<String>>,
    cpu_lanes: usize,
}

impl<T: Clone + Send + 'static> PipelineBuilder<T> {
    pub fn new(name: impl Into<String>) -> Self {
        PipelineBuilder {
            name: name.into(),
            stages: Vec::new(),
            max_in_flight: 0,
            assign: None,
            cpu_lanes: usize::MAX,
        }
    }

    pub fn stage(mut self, stage: Stage<T>) -> Self {
        self.stages.push(stage);
        self
    }

    /// Chunks inside the controller at most (default: twice the operations
    /// one chunk goes through, at least 4).
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }

    /// Lanes (cores, each a planner unit) per CPU kind at most (default:
    /// the kind's cores, at most one per stage; 1 runs every CPU stage on
    /// the controller thread).
    pub fn cpu_lanes(mut self, n: usize) -> Self {
        self.cpu_lanes = n.max(1);
        self
    }

    /// Puts stage `i` on the unit named `units[i]` instead of planning
    /// (`cpu` means lane `cpu/0`).
    pub fn assign(mut self, units: Vec<String>) -> Self {
        self.assign = Some(units);
        self
    }

    /// Profiles the stages on `sample`, plans, and starts the controller.
    pub fn build(self, rt: &Runtime, sample: &T) -> Result<Pipeline<T>, PipelineError> {
        let sched = Arc::clone(rt.scheduler());
        // Planner units: each emulated device of the monitor, and one lane
        // per core of each CPU kind (at most one per stage), so that stages
        // overlap on different cores. `lanes[planner id]` is the runtime
        // unit and lane behind it.
        let mut units: Vec<Unit> = Vec::new();
        let mut lanes: Vec<(usize, usize)> = Vec::new();
        for u in 0..sched.units.len() {
            let n = match sched.backends[u] {
                Backend::Cpu { cores, .. } => (cores as usize)
                    .min(self.cpu_lanes)
                    .min(self.stages.len())
                    .max(1),
                Backend::Emulated => 1,
                _ => continue,
            };
            for lane in 0..n {
                let mut unit = sched.units[u].clone();
                unit.id = UnitId(units.len() as u16);
                if n > 1 {
                    unit.name = format!("{}/{lane}", unit.name);
                }
                unit.slots = 1;
                units.push(unit);
                lanes.push((u, lane));
            }
        }
        let specs = profile(&sched, &self.stages, sample)?;
        let assignment: Vec<UnitId> = match &self.assign {
            Some(names) => names
                .iter()
                .map(|n| {
                    units
                        .iter()
                        .find(|u| u.name == *n || u.name == format!("{n}/0"))
                        .map(|u| u.id)
                        .ok_or_else(|| PipelineError::UnknownUnit(n.clone()))
                })
                .collect::<Result<_, _>>()?,
            None => pipeline_table::assign(&specs, &units)?,
        };
        let probe = Stepper::new(&specs, &units, &assignment, 1)?;
        let max_in_flight = if self.max_in_flight == 0 {
            (2 * probe.ops_per_chunk()).max(4)
        } else {
            self.max_in_flight
        };
        let stepper = Stepper::new(&specs, &units, &assignment, max_in_flight)?;

        // Copies to and from an emulated device ride on its stage's
        // submission (bytes in and out), as in the runtime's device path:
        // the monitor holds the device's stream for them.
        let is_device = |p: Place| match p {
            Place::Unit(id) => sched.backends[lanes[id.index()].0] == Backend::Emulated,
            Place::Host => false,
        };
        let mut fold = vec![(0u64, 0u64); self.stages.len()];
        let one = pipeline_table::plan_with(&specs, &units, &assignment, 1, 1)?;
        for c in one.steps.iter().flat_map(|s| &s.copies) {
            if is_device(c.dst) {
                fold[c.for_stage].0 += c.bytes;
            }
            if is_device(c.src) && c.for_stage > 0 {
                fold[c.for_stage - 1].1 += c.bytes;
            }
        }

        // Lane `i` of a CPU kind runs on the kind's `i`-th PU (best effort,
        // as the runtime's own workers).
        let pin_of = |id: UnitId| {
            let (u, lane) = lanes[id.index()];
            sched.infos[u].pus.get(lane).map(|&p| p as usize)
        };

        // How each stage runs: the first CPU lane on the controller thread,
        // other lanes on a worker thread each, devices at the monitor.
        let mut inline_unit = None;
        let mut worker_units: Vec<UnitId> = Vec::new();
        let mut exec = Vec::new();
        for (s, (stage, unit)) in self.stages.iter().zip(&assignment).enumerate() {
            let u = lanes[unit.index()].0;
            exec.push(match sched.backends[u] {
                Backend::Cpu { .. } => {
                    let f = stage.cpu.clone().ok_or(PlanError::BadAssignment {
                        stage: s,
                        unit: *unit,
                    })?;
                    if *inline_unit.get_or_insert(*unit) == *unit {
                        Exec::Inline(f)
                    } else {
                        let w = worker_units
                            .iter()
                            .position(|x| x == unit)
                            .unwrap_or_else(|| {
                                worker_units.push(*unit);
                                worker_units.len() - 1
                            });
                        Exec::Worker(w)
                    }
                }
                _ => {
                    let kind = &sched.infos[u].kind;
                    let (_, cost, kernel) =
                        stage.emulated.iter().find(|(k, _, _)| k == kind).ok_or(
                            PlanError::BadAssignment {
                                stage: s,
                                unit: *unit,
                            },
                        )?;
                    Exec::Device {
                        unit: sched.units[u].id,
                        cost: Arc::clone(cost),
                        kernel: Arc::clone(kernel),
                        bytes_in: fold[s].0,
                        bytes_out: fold[s].1,
                    }
                }
            });
        }
        let controller_pin = inline_unit.and_then(pin_of);
        let cpu_fns: Arc<Vec<Option<StageFn<T>>>> =
            Arc::new(self.stages.iter().map(|s| s.cpu.clone()).collect());
        let (done_tx, done_rx) = mpsc::channel();
        let mut workers = Vec::new();
        for (w, unit) in worker_units.iter().enumerate() {
            let (tx, rx) = mpsc::channel::<LaneJob<T>>();
            let fns = Arc::clone(&cpu_fns);
            let done = done_tx.clone();
            let pin = pin_of(*unit);
            let handle = std::thread::Builder::new()
                .name(format!("hetsched-pipe-{}-{w}", units[unit.index()].name))
                .spawn(move || {
                    pin_here(pin);
                    while let Ok((chunk, stage, data)) = recv_spinning(&rx) {
                        let f = fns[stage].as_ref().expect("worker stages run on CPU");
                        let result = run_guarded(f, data);
                        if done
                            .send(Done::Cpu {
                                chunk,
                                stage,
                                result,
                            })
                            .is_err()
                        {
                            return;
                        }
                    }
                })
                .map_err(|e| PipelineError::Threads(e.to_string()))?;
            workers.push((tx, handle));
        }

        let (in_tx, in_rx) = mpsc::sync_channel(max_in_flight);
        let (out_tx, out_rx) = mpsc::sync_channel(max_in_flight);
        let cancel = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(SharedStats::default());
        let controller = Controller {
            sched: Arc::clone(&sched),
            names: self.stages.iter().map(|s| s.name.clone()).collect(),
            exec,
            stepper,
            max_in_flight,
            workers: workers.iter().map(|(tx, _)| tx.clone()).collect(),
            done_tx,
            done_rx,
            chunks: VecDeque::new(),
            emitted: 0,
            received: 0,
            input: in_rx,
            output: out_tx,
            cancel: Arc::clone(&cancel),
            stats: Arc::clone(&stats),
        };
        let worker_handles = workers;
        let handle = std::thread::Builder::new()
            .name(format!("hetsched-pipe-{}", self.name))
            .spawn(move || {
                pin_here(controller_pin);
                controller.run();
                // The controller's senders are gone; workers end.
                for (tx, h) in worker_handles {
                    drop(tx);
                    let _ = h.join();
                }
            })
            .map_err(|e| PipelineError::Threads(e.to_string()))?;
        Ok(Pipeline {
            name: self.name,
            input: Some(in_tx),
            output: Some(out_rx),
            cancel,
            controller: Some(handle),
            stats,
            specs,
            units,
            assignment,
            max_in_flight,
        })
    }
}

/// Runs each stage once on the sample (chained), for the planner.
fn profile<T: Clone + Send + 'static>(
    sched: &Scheduler,
    stages: &[Stage<T>],
    sample: &T,
) -> Result<Vec<StageSpec>, PipelineError> {
    let kinds = sched.kinds.len();
    let mut x = sample.clone();
    let mut specs = Vec::new();
    for (s, stage) in stages.iter().enumerate() {
        let (bytes_in, bytes_out) = stage.sizes.as_ref().map_or((0, 0), |f| f(&x));
        let mut time_ns = vec![None; kinds];
        let fail = |why: String| PipelineError::Profiling {
            stage: s,
            name: stage.name.clone(),
            why,
        };
        for (u, unit) in sched.units.iter().enumerate() {
            let k = unit.kind.index();
            if sched.backends[u] != Backend::Emulated {
                continue;
            }
            if let Some((_, cost, _)) = stage
                .emulated
                .iter()
                .find(|(kind, _, _)| *kind == sched.infos[u].kind)
            {
                time_ns[k] = Some(cost(&x).as_nanos() as f64 + unit.dispatch_ns as f64);
            }
        }
        let next = if let Some(f) = &stage.cpu {
            // The best of three runs: the first one warms caches.
            let mut best = f64::INFINITY;
            let mut out = None;
            for _ in 0..3 {
                let started = Instant::now();
                let y = run_guarded(f, x.clone()).map_err(fail)?;
                best = best.min(started.elapsed().as_nanos() as f64);
                out = Some(y);
            }
            for (u, unit) in sched.units.iter().enumerate() {
                if matches!(sched.backends[u], Backend::Cpu { .. }) {
                    time_ns[unit.kind.index()] = Some(best.max(1.0));
                }
            }
            out.expect("ran three times")
        } else if let Some((_, _, kernel)) = stage.emulated.first() {
            run_guarded(kernel, x.clone()).map_err(fail)?
        } else {
            return Err(PlanError::NoImplementation {
                stage: s,
                name: stage.name.clone(),
            }
            .into());
        };
        specs.push(StageSpec {
            name: stage.name.clone(),
            time_ns,
            bytes_in,
            bytes_out,
        });
        x = next;
    }
    Ok(specs)
}

/// How long a lane worker, or the controller waiting for a step, polls
/// before it sleeps: in steady state the next message comes within a
/// step, and a thread that has not slept needs no wake-up (a futex call of
/// several microseconds, more than a small stage).
const SPIN: Duration = Duration::from_micros(50);

fn recv_spinning<M>(rx: &Receiver<M>) -> Result<M, mpsc::RecvError> {
    let mut since: Option<Instant> = None;
    loop {
        match rx.try_recv() {
            Ok(m) => return Ok(m),
            Err(TryRecvError::Disconnected) => return Err(mpsc::RecvError),
            Err(TryRecvError::Empty) => {}
        }
        let start = *since.get_or_insert_with(Instant::now);
        if start.elapsed() >= SPIN {
            return rx.recv();
        }
        for _ in 0..32 {
            std::hint::spin_loop();
        }
    }
}

fn pin_here(pu: Option<usize>) {
    if let Some(pu) = pu {
        hetsched_platform::thread::pin_current(pu);
    }
}

fn run_guarded<T>(f: &StageFn<T>, data: T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(|| f(data))).map_err(|p| crate::job::panic_message(&*p))
}

/// What the controller has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PipelineStats {
    /// Chunks that came out (failed ones included).
    pub chunks_out: u64,
    pub failed_chunks: u64,
    /// Steps executed.
    pub steps: u64,
    /// Stage executions (compute entries) over all steps.
    pub stage_steps: u64,
    /// Copies of the table executed (folded into device submissions).
    pub copies: u64,
    /// Controller time spent deciding and dispatching: its loop time minus
    /// the stages it ran itself and the time it waited (for input, for
    /// workers and devices, for the consumer), ns.
    pub controller_overhead_ns: u64,
}

impl PipelineStats {
    /// Controller overhead per stage step, ns.
    pub fn overhead_ns_per_stage_step(&self) -> f64 {
        self.controller_overhead_ns as f64 / self.stage_steps.max(1) as f64
    }
}

#[derive(Default)]
struct SharedStats {
    chunks_out: AtomicU64,
    failed: AtomicU64,
    steps: AtomicU64,
    stage_steps: AtomicU64,
    copies: AtomicU64,
    overhead_ns: AtomicU64,
}

/// A handle that pushes chunks from another thread.
pub struct Feeder<T> {
    tx: SyncSender<T>,
}

impl<T> Clone for Feeder<T> {
    fn clone(&self) -> Self {
        Feeder {
            tx: self.tx.clone(),
        }
    }
}

impl<T> Feeder<T> {
    /// Pushes one chunk; blocks while the pipeline's input is full.
    pub fn push(&self, chunk: T) -> Result<(), PipelineError> {
        self.tx.send(chunk).map_err(|_| PipelineError::Closed)
    }
}

/// A running pipeline. Outputs come out in push order.
pub struct Pipeline<T> {
    name: String,
    input: Option<SyncSender<T>>,
    output: Option<Receiver<Result<T, PipelineError>>>,
    cancel: Arc<AtomicBool>,
    controller: Option<JoinHandle<()>>,
    stats: Arc<SharedStats>,
    specs: Vec<StageSpec>,
    units: Vec<Unit>,
    assignment: Vec<UnitId>,
    max_in_flight: usize,
}

impl<T> std::fmt::Debug for Pipeline<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("name", &self.name)
            .field("stages", &self.specs.len())
            .field("assignment", &self.assignment)
            .finish()
    }
}

impl<T: Send + 'static> Pipeline<T> {
    /// Pushes one chunk. Blocks while `max_in_flight` chunks wait to enter
    /// the controller (back-pressure): with a consumer on the same thread,
    /// pull before pushing more than about `2 × max_in_flight` ahead.
    pub fn push(&self, chunk: T) -> Result<(), PipelineError> {
        let tx = self.input.as_ref().ok_or(PipelineError::Closed)?;
        tx.send(chunk).map_err(|_| PipelineError::Closed)
    }

    /// A handle to push from another thread.
    pub fn feeder(&self) -> Result<Feeder<T>, PipelineError> {
        let tx = self.input.as_ref().ok_or(PipelineError::Closed)?;
        Ok(Feeder { tx: tx.clone() })
    }

    /// The next output in push order; blocks. `None` once closed and
    /// drained.
    pub fn pull(&mut self) -> Option<Result<T, PipelineError>> {
        self.output.as_ref()?.recv().ok()
    }

    /// No more input (after feeders are dropped too, the controller ends
    /// once every chunk is out).
    pub fn close(&mut self) {
        self.input = None;
    }

    /// Closes the input and returns every remaining output, in order.
    pub fn finish(mut self) -> Vec<Result<T, PipelineError>> {
        self.close();
        let mut out = Vec::new();
        while let Some(r) = self.pull() {
            out.push(r);
        }
        out
    }

    pub fn stats(&self) -> PipelineStats {
        let s = &self.stats;
        PipelineStats {
            chunks_out: s.chunks_out.load(Ordering::Relaxed),
            failed_chunks: s.failed.load(Ordering::Relaxed),
            steps: s.steps.load(Ordering::Relaxed),
            stage_steps: s.stage_steps.load(Ordering::Relaxed),
            copies: s.copies.load(Ordering::Relaxed),
            controller_overhead_ns: s.overhead_ns.load(Ordering::Relaxed),
        }
    }

    /// The unit name each stage runs on.
    pub fn assignment(&self) -> Vec<String> {
        self.assignment
            .iter()
            .map(|id| {
                self.units
                    .iter()
                    .find(|u| u.id == *id)
                    .map_or_else(String::new, |u| u.name.clone())
            })
            .collect()
    }

    /// What the planner knows of each stage (profiled times, sizes).
    pub fn stage_specs(&self) -> &[StageSpec] {
        &self.specs
    }

    /// The pipelining table the controller follows, for `chunks` chunks
    /// all available at once.
    pub fn table(&self, chunks: usize) -> PipelineTable {
        pipeline_table::plan_with(
            &self.specs,
            &self.units,
            &self.assignment,
            chunks,
            self.max_in_flight,
        )
        .expect("the assignment was checked when the pipeline was built")
    }
}

impl<T> Drop for Pipeline<T> {
    /// Cancels: the step under way finishes, chunks in flight are dropped.
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Release);
        self.input = None;
        self.output = None;
        if let Some(h) = self.controller.take() {
            let _ = h.join();
        }
    }
}

enum Exec<T> {
    Inline(StageFn<T>),
    Worker(usize),
    Device {
        unit: UnitId,
        cost: CostFn<T>,
        kernel: StageFn<T>,
        bytes_in: u64,
        bytes_out: u64,
    },
}

enum Done<T> {
    Cpu {
        chunk: u64,
        stage: usize,
        result: Result<T, String>,
    },
    Device {
        chunk: u64,
        stage: usize,
        ok: Result<(), String>,
    },
}

struct ChunkSlot<T> {
    data: Option<T>,
    error: Option<PipelineError>,
}

struct Controller<T> {
    sched: Arc<Scheduler>,
    names: Vec<String>,
    exec: Vec<Exec<T>>,
    stepper: Stepper,
    max_in_flight: usize,
    workers: Vec<Sender<LaneJob<T>>>,
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
}

fn reply_ok(reply: TaskReply) -> Result<(), String> {
    match reply {
        Ok(TaskEvent::DeviceDone(_)) => Ok(()),
        Ok(other) => Err(format!("the monitor answered {other:?} to device work")),
        Err(e) => Err(e.to_string()),
    }
}

impl<T: Send + 'static> Controller<T> {
    fn run(mut self) {
        let mut step = Step::default();
        let mut closed = false;
        loop {
            if self.cancel.load(Ordering::Acquire) {
                return;
            }
            let started = Instant::now();
            let mut waited_ns = 0u64;
            let mut stage_ns = 0u64;
            // Admit input while there is room.
            while (self.received - self.emitted) < self.max_in_flight as u64 && !closed {
                let idle = self.received == self.emitted;
                let got = if idle {
                    let w = Instant::now();
                    let r = match self.input.recv_timeout(POLL) {
                        Ok(x) => Ok(x),
                        Err(RecvTimeoutError::Timeout) => Err(TryRecvError::Empty),
                        Err(RecvTimeoutError::Disconnected) => Err(TryRecvError::Disconnected),
                    };
                    waited_ns += w.elapsed().as_nanos() as u64;
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
                    Err(TryRecvError::Empty) => {
                        if idle && self.cancel.load(Ordering::Acquire) {
                            return;
                        }
                        if idle {
                            // Nothing to do yet; look again.
                            continue;
                        }
                        break;
                    }
                    Err(TryRecvError::Disconnected) => closed = true,
                }
            }
            if closed && self.received == self.emitted {
                return;
            }
            self.stepper
                .next_step_into(self.received as usize, &mut step);
            if step.is_empty() {
                continue;
            }
            let mut pending = 0usize;
            let mut inline: Vec<(u64, usize)> = Vec::new();
            for e in &step.compute {
                let chunk = e.chunk as u64;
                let slot = &mut self.chunks[(chunk - self.emitted) as usize];
                if slot.error.is_some() {
                    continue;
                }
                match &self.exec[e.stage] {
                    Exec::Inline(_) => inline.push((chunk, e.stage)),
                    Exec::Worker(w) => {
                        let data = slot.data.take().expect("chunk data present");
                        if self.workers[*w].send((chunk, e.stage, data)).is_err() {
                            slot.error = Some(PipelineError::StageFailed {
                                stage: e.stage,
                                name: self.names[e.stage].clone(),
                                chunk,
                                why: "worker gone".into(),
                            });
                        } else {
                            pending += 1;
                        }
                    }
                    Exec::Device {
                        unit,
                        cost,
                        bytes_in,
                        bytes_out,
                        ..
                    } => {
                        let data = slot.data.as_ref().expect("chunk data present");
                        let ns = match catch_unwind(AssertUnwindSafe(|| cost(data))) {
                            Ok(d) => u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
                            Err(p) => {
                                slot.data = None;
                                slot.error = Some(PipelineError::StageFailed {
                                    stage: e.stage,
                                    name: self.names[e.stage].clone(),
                                    chunk,
                                    why: format!(
                                        "its cost function panicked: {}",
                                        crate::job::panic_message(&*p)
                                    ),
                                });
                                continue;
                            }
                        };
                        let tx = self.done_tx.clone();
                        let stage = e.stage;
                        let sent = self.sched.link.client().submit_device_with(
                            *unit,
                            ns,
                            *bytes_in,
                            *bytes_out,
                            Box::new(move |r| {
                                let _ = tx.send(Done::Device {
                                    chunk,
                                    stage,
                                    ok: reply_ok(r),
                                });
                            }),
                        );
                        match sent {
                            Ok(_) => pending += 1,
                            Err(err) => {
                                let err = self.failed(e.stage, chunk, err.to_string());
                                self.chunks[(chunk - self.emitted) as usize].error = Some(err);
                            }
                        }
                    }
                }
            }
            // Copies to and from devices ride on the stage submissions (see
            // `build`); between CPU lanes there is nothing to move.
            let copies = step
                .copies
                .iter()
                .filter(|c| {
                    self.chunks[(c.chunk as u64 - self.emitted) as usize]
                        .error
                        .is_none()
                })
                .count();
            self.stats
                .copies
                .fetch_add(copies as u64, Ordering::Relaxed);
            for (chunk, stage) in inline {
                let Exec::Inline(f) = &self.exec[stage] else {
                    continue;
                };
                let i = (chunk - self.emitted) as usize;
                let data = self.chunks[i].data.take().expect("chunk data present");
                let t = Instant::now();
                let r = run_guarded(f, data);
                stage_ns += t.elapsed().as_nanos() as u64;
                self.store(chunk, stage, r);
            }
            while pending > 0 {
                let w = Instant::now();
                let Ok(done) = recv_spinning(&self.done_rx) else {
                    break;
                };
                waited_ns += w.elapsed().as_nanos() as u64;
                pending -= 1;
                match done {
                    Done::Cpu {
                        chunk,
                        stage,
                        result,
                    } => self.store(chunk, stage, result),
                    Done::Device { chunk, stage, ok } => {
                        let i = (chunk - self.emitted) as usize;
                        let r = match ok {
                            Ok(()) => match (&self.exec[stage], self.chunks[i].data.take()) {
                                (Exec::Device { kernel, .. }, Some(data)) => {
                                    let t = Instant::now();
                                    let r = run_guarded(kernel, data);
                                    stage_ns += t.elapsed().as_nanos() as u64;
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
            self.stats.steps.fetch_add(1, Ordering::Relaxed);
            self.stats
                .stage_steps
                .fetch_add(step.compute.len() as u64, Ordering::Relaxed);
            // Emit what finished, in order.
            while self.emitted < self.stepper.finished() as u64 {
                let slot = self.chunks.pop_front().expect("finished chunk present");
                self.emitted += 1;
                let out = match (slot.error, slot.data) {
                    (Some(e), _) => {
                        self.stats.failed.fetch_add(1, Ordering::Relaxed);
                        Err(e)
                    }
                    (None, Some(d)) => Ok(d),
                    (None, None) => Err(PipelineError::Closed),
                };
                self.stats.chunks_out.fetch_add(1, Ordering::Relaxed);
                let w = Instant::now();
                let sent = self.send_out(out);
                waited_ns += w.elapsed().as_nanos() as u64;
                if !sent {
                    return;
                }
            }
            let total = started.elapsed().as_nanos() as u64;
            self.stats.overhead_ns.fetch_add(
                total.saturating_sub(waited_ns + stage_ns),
                Ordering::Relaxed,
            );
        }
    }

    /// Sends one output; blocks while the consumer is behind (dropping the
    /// pipeline disconnects it). False when nobody will read it.
    fn send_out(&self, out: Result<T, PipelineError>) -> bool {
        self.output.send(out).is_ok()
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
