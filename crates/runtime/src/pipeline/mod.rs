//! Streaming pipelines (APC): a chain of stages, each with a CPU,
//! emulated-device and/or OpenCL implementation, fed a stream of chunks.
//! The application only pushes inputs and pulls outputs; a controller
//! thread drives every stage and copy step by step from hetsched-core's
//! pipelining table ([`hetsched_core::pipeline_table`]), with no call back
//! into the application and no round trip through the runtime's central
//! queue per stage.
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
//! How it runs (modules by concern: `layout` — planner units, profiling,
//! how each stage runs on its unit, lane workers, contention views;
//! `controller` — the step loop):
//! * **Plan.** `build` profiles each stage once on a sample chunk (CPU wall
//!   time, scaled by a slow kind's relative speed; the emulated cost
//!   function for device kinds; the OpenCL implementation's wall time,
//!   copies included), then [`pipeline_table::assign`] places stages on
//!   units (CPU kinds, emulated devices of the monitor, OpenCL devices of
//!   this process) and a [`Stepper`] generates steps.
//! * **Units.** The planner sees every emulated device of the monitor,
//!   every OpenCL device (feature `opencl`) and one *lane* per core of each
//!   CPU kind (`cpu/0`, `cpu/1`, at most one per stage), so stages overlap
//!   on different cores as well as on devices. Lane `i` runs on the kind's
//!   `i`-th PU (pinned, best effort) and, on an emulated slow kind, in the
//!   kind's throttle cgroup, so it really runs at the kind's speed. Lane
//!   workers and the controller poll for 50 µs before sleeping, so a busy
//!   pipeline pays no thread wake-up per step.
//! * **Steps.** In each step the controller submits the step's device
//!   entries to the monitor, hands entries of other lanes (CPU cores,
//!   OpenCL devices) to the pipeline's own worker threads (one per lane),
//!   runs the entries of its own CPU lane itself, then waits for the step.
//!   Copies to and from an emulated device ride on its stage's submission
//!   (its bytes in and out, as in the runtime's device path), so the
//!   monitor holds the device's stream for them; an OpenCL stage makes its
//!   own explicit copies, and on a device the monitor arbitrates each of
//!   its calls waits for the unit's agent first
//!   (`gate_exec::run_granted`). The table still lists copies in their own steps,
//!   for devices with copy engines (later).
//! * **Re-planning.** Every `replan_every` (default 5 ms) between steps,
//!   the controller reads the monitor's views (the private page's wait per
//!   device, the global page's runnable threads per CPU kind), stretches
//!   each unit's stage times by them and asks hetsched-core's
//!   [`Replanner`] whether another assignment is better by the hysteresis
//!   margin, confirmed over checks. A switch happens between steps, when
//!   no stage is running: every chunk keeps the stages it has done and
//!   goes on under the new assignment ([`Stepper::reassign`]), so nothing
//!   is lost or reordered and the pipeline does not drain. Pipelines with
//!   an explicit [`PipelineBuilder::assign`] do not re-plan.
//! * **Bounds.** At most `max_in_flight` chunks are inside the controller;
//!   `push` blocks when another `max_in_flight` wait unread, and the
//!   controller stops when `max_in_flight` outputs wait unpulled
//!   (back-pressure, bounded memory).
//! * **Failures.** A stage that panics or returns an error (or a device
//!   call the monitor refuses) fails that chunk only: its output is
//!   [`PipelineError::StageFailed`] naming the stage and chunk, in order,
//!   and the other chunks go on.
//! * **Shutdown.** [`Pipeline::finish`] drains (every pushed chunk comes
//!   out); dropping the pipeline cancels: the controller finishes the step
//!   under way, drops the chunks in flight and joins its threads.
//!
//! Not done yet: CUDA streams/graphs (the table's entries have the fields
//! for them); an OpenCL stage's data goes back to the host between stages
//! (no device-resident hand-off between two OpenCL stages). Drop
//! pipelines before their runtime: a controller whose runtime is gone
//! fails the chunks it still has.

mod controller;
mod layout;

use crate::runtime::Runtime;
use hetsched_core::ids::UnitId;
pub use hetsched_core::pipeline_replan::ReplanConfig;
use hetsched_core::pipeline_replan::Replanner;
use hetsched_core::pipeline_table::{self, PipelineTable, PlanError, StageSpec, Stepper};
use hetsched_core::unit::Unit;
use layout::Layout;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

type StageFn<T> = Arc<dyn Fn(T) -> T + Send + Sync>;
type CostFn<T> = Arc<dyn Fn(&T) -> Duration + Send + Sync>;
type SizeFn<T> = Arc<dyn Fn(&T) -> (u64, u64) + Send + Sync>;
/// An OpenCL implementation: given the device (kernels built from source
/// are cached by it), it copies the chunk in, launches and reads back.
#[cfg(feature = "opencl")]
type OpenClStageFn<T> = Arc<
    dyn Fn(&hetsched_opencl::OpenClDevice, T) -> Result<T, hetsched_opencl::OpenClError>
        + Send
        + Sync,
>;

/// How often a controller re-plans by default.
const REPLAN_EVERY: Duration = Duration::from_millis(5);

/// One stage: a transformation of a chunk, implemented per unit kind.
pub struct Stage<T> {
    name: String,
    cpu: Option<StageFn<T>>,
    emulated: Vec<(String, CostFn<T>, StageFn<T>)>,
    #[cfg(feature = "opencl")]
    opencl: Option<OpenClStageFn<T>>,
    sizes: Option<SizeFn<T>>,
}

impl<T> Clone for Stage<T> {
    fn clone(&self) -> Self {
        Stage {
            name: self.name.clone(),
            cpu: self.cpu.clone(),
            emulated: self.emulated.clone(),
            #[cfg(feature = "opencl")]
            opencl: self.opencl.clone(),
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
            #[cfg(feature = "opencl")]
            opencl: None,
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

    /// The implementation on OpenCL devices (feature `opencl`): it gets the
    /// device and the chunk, makes its own explicit copies in and out and
    /// launches its kernels. It runs on a lane thread that owns the
    /// pipeline's handle on the device; its wall time, copies included, is
    /// what the planner sees. An error fails the chunk, like a panic.
    #[cfg(feature = "opencl")]
    pub fn opencl(
        mut self,
        f: impl Fn(&hetsched_opencl::OpenClDevice, T) -> Result<T, hetsched_opencl::OpenClError>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.opencl = Some(Arc::new(f));
        self
    }

    /// Like [`Stage::emulated`] for whatever OpenCL devices this build of
    /// the runtime drives: `source`'s kernel `entry`, taking the chunk
    /// (`__global const` in) and writing a chunk of the same size
    /// (`__global` out), one work-item per `item_bytes` bytes. In a build
    /// without OpenCL (the runtime's feature `opencl`) it adds nothing,
    /// and no OpenCL unit is offered ([`crate::Runtime::opencl_units`]),
    /// so a program that uses it behaves the same whichever features
    /// Cargo unified into its build.
    pub fn opencl_map(self, source: &'static str, entry: &'static str, item_bytes: usize) -> Self
    where
        T: AsRef<[u8]> + From<Vec<u8>>,
    {
        #[cfg(feature = "opencl")]
        {
            self.opencl(move |dev: &hetsched_opencl::OpenClDevice, chunk: T| {
                use hetsched_opencl::KernelArg;
                let bytes = chunk.as_ref();
                let kernel = dev.build(source, entry)?;
                let (input, _) = dev.buffer_from(bytes)?;
                let output = dev.buffer(bytes.len())?;
                dev.launch(
                    &kernel,
                    bytes.len() / item_bytes.max(1),
                    None,
                    &[KernelArg::Buffer(&input), KernelArg::Buffer(&output)],
                )?;
                let mut out = vec![0u8; bytes.len()];
                dev.read(&output, &mut out)?;
                Ok(T::from(out))
            })
        }
        #[cfg(not(feature = "opencl"))]
        {
            let _ = (source, entry, item_bytes);
            self
        }
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
    replan: Option<ReplanConfig>,
    replan_every: Duration,
}

impl<T: Clone + Send + 'static> PipelineBuilder<T> {
    pub fn new(name: impl Into<String>) -> Self {
        PipelineBuilder {
            name: name.into(),
            stages: Vec::new(),
            max_in_flight: 0,
            assign: None,
            cpu_lanes: usize::MAX,
            replan: Some(ReplanConfig::default()),
            replan_every: REPLAN_EVERY,
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
    /// (`cpu` means lane `cpu/0`). The assignment then stays as given: no
    /// re-planning.
    pub fn assign(mut self, units: Vec<String>) -> Self {
        self.assign = Some(units);
        self
    }

    /// How the controller re-plans under contention (`None`: never). The
    /// default is [`ReplanConfig::default`].
    pub fn replan(mut self, cfg: Option<ReplanConfig>) -> Self {
        self.replan = cfg;
        self
    }

    /// How often the controller reads the views and re-plans, at most once
    /// per step (default 5 ms; the monitor publishes every 10 ms or on
    /// change).
    pub fn replan_every(mut self, every: Duration) -> Self {
        self.replan_every = every;
        self
    }

    /// Profiles the stages on `sample`, plans, and starts the controller.
    pub fn build(self, rt: &Runtime, sample: &T) -> Result<Pipeline<T>, PipelineError> {
        let (mut layout, mut profiling) =
            Layout::new(Arc::clone(rt.scheduler()), self.stages, self.cpu_lanes)?;
        layout.profile(sample, &mut profiling)?;
        let (units, specs) = (layout.units.clone(), layout.specs.clone());
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
        let replanner = match (&self.assign, self.replan) {
            (None, Some(cfg)) => Some(Replanner::new(assignment.clone(), cfg)),
            _ => None,
        };

        let (in_tx, in_rx) = mpsc::sync_channel(max_in_flight);
        let (out_tx, out_rx) = mpsc::sync_channel(max_in_flight);
        let cancel = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(SharedStats::default());
        let shared = Arc::new(Shared {
            assignment: Mutex::new(assignment.clone()),
            replans: Mutex::new(Vec::new()),
        });
        let controller = controller::Controller::new(
            controller::Setup {
                layout,
                profiling,
                assignment: assignment.clone(),
                stepper,
                replanner,
                replan_every: self.replan_every,
                max_in_flight,
                input: in_rx,
                output: out_tx,
                cancel: Arc::clone(&cancel),
                stats: Arc::clone(&stats),
                shared: Arc::clone(&shared),
            },
            &self.name,
        )?;
        let handle = std::thread::Builder::new()
            .name(format!("hetsched-pipe-{}", self.name))
            .spawn(move || controller.run())
            .map_err(|e| PipelineError::Threads(e.to_string()))?;
        Ok(Pipeline {
            name: self.name,
            input: Some(in_tx),
            output: Some(out_rx),
            cancel,
            controller: Some(handle),
            stats,
            shared,
            specs,
            units,
            max_in_flight,
        })
    }
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
    /// workers and devices, for the consumer), ns. Re-plan checks count.
    pub controller_overhead_ns: u64,
    /// Times the views were read and the assignment re-planned.
    pub replan_checks: u64,
    /// Their time (views and planner), ns; part of the overhead above.
    pub replan_check_ns: u64,
    /// Times the controller moved stages to another assignment.
    pub replans: u64,
}

impl PipelineStats {
    /// Controller overhead per stage step, ns.
    pub fn overhead_ns_per_stage_step(&self) -> f64 {
        self.controller_overhead_ns as f64 / self.stage_steps.max(1) as f64
    }
}

/// One switch of assignment under contention.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplanEvent {
    /// Steps executed before the switch.
    pub step: u64,
    /// Chunks out before the switch.
    pub chunks_out: u64,
    /// Time since the pipeline started.
    pub at: Duration,
    /// Unit name of each stage, before and after.
    pub from: Vec<String>,
    pub to: Vec<String>,
    /// Predicted periods under the views that decided, ns.
    pub from_period_ns: f64,
    pub to_period_ns: f64,
    /// Time the deciding check took (views, planner, new stepper), ns.
    pub decide_ns: u64,
}

#[derive(Default)]
struct SharedStats {
    chunks_out: AtomicU64,
    failed: AtomicU64,
    steps: AtomicU64,
    stage_steps: AtomicU64,
    copies: AtomicU64,
    overhead_ns: AtomicU64,
    replan_checks: AtomicU64,
    replan_check_ns: AtomicU64,
    replans: AtomicU64,
}

/// What the controller changes and the application reads, rarely.
struct Shared {
    assignment: Mutex<Vec<UnitId>>,
    replans: Mutex<Vec<ReplanEvent>>,
}

fn locked<X>(m: &Mutex<X>) -> std::sync::MutexGuard<'_, X> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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
    shared: Arc<Shared>,
    specs: Vec<StageSpec>,
    units: Vec<Unit>,
    max_in_flight: usize,
}

impl<T> std::fmt::Debug for Pipeline<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("name", &self.name)
            .field("stages", &self.specs.len())
            .field("assignment", &*locked(&self.shared.assignment))
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
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PipelineStats {
            chunks_out: get(&s.chunks_out),
            failed_chunks: get(&s.failed),
            steps: get(&s.steps),
            stage_steps: get(&s.stage_steps),
            copies: get(&s.copies),
            controller_overhead_ns: get(&s.overhead_ns),
            replan_checks: get(&s.replan_checks),
            replan_check_ns: get(&s.replan_check_ns),
            replans: get(&s.replans),
        }
    }

    /// The switches of assignment so far, oldest first.
    pub fn replans(&self) -> Vec<ReplanEvent> {
        locked(&self.shared.replans).clone()
    }

    /// The unit name each stage runs on now.
    pub fn assignment(&self) -> Vec<String> {
        unit_names(&self.units, &locked(&self.shared.assignment))
    }

    /// What the planner knows of each stage (profiled times, sizes).
    pub fn stage_specs(&self) -> &[StageSpec] {
        &self.specs
    }

    /// The planner's units: CPU lanes, emulated devices, OpenCL devices.
    pub fn units(&self) -> &[Unit] {
        &self.units
    }

    /// The pipelining table the controller follows now, for `chunks`
    /// chunks all available at once.
    pub fn table(&self, chunks: usize) -> PipelineTable {
        let assignment = locked(&self.shared.assignment).clone();
        pipeline_table::plan_with(
            &self.specs,
            &self.units,
            &assignment,
            chunks,
            self.max_in_flight,
        )
        .expect("the assignment was checked when it was chosen")
    }
}

fn unit_names(units: &[Unit], ids: &[UnitId]) -> Vec<String> {
    ids.iter()
        .map(|id| {
            units
                .iter()
                .find(|u| u.id == *id)
                .map_or_else(String::new, |u| u.name.clone())
        })
        .collect()
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
