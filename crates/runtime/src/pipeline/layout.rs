//! Where a pipeline's stages can run and how: the planner's units (CPU
//! lanes, emulated devices, OpenCL devices) and the runtime units behind
//! them, profiling, the way each stage runs on its unit (`Exec`), the lane
//! worker threads, and the contention views the controller re-plans with.

use super::{PipelineError, Stage, StageFn};
use crate::device_backend::OPENCL_API;
use crate::scheduler::{Backend, Scheduler};
use hetsched_core::ids::UnitId;
use hetsched_core::pipeline_replan::{device_lane_view, lane_view};
use hetsched_core::pipeline_table::{self, Place, PlanError, StageSpec};
use hetsched_core::unit::Unit;
use hetsched_core::view::ClientUnitView;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One chunk for a lane worker: (chunk, stage, data).
pub(super) type LaneJob<T> = (u64, usize, T);

/// What runs behind one planner unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lane {
    /// Core `lane` of CPU runtime unit `unit`.
    Cpu { unit: usize, lane: usize },
    /// An emulated device, served by the monitor.
    Emulated { unit: usize },
    /// An OpenCL device this process drives.
    OpenCl { unit: usize },
}

/// How one stage runs on its unit under the current assignment.
pub(super) enum Exec<T> {
    /// On the controller thread (its own CPU lane).
    Inline(StageFn<T>),
    /// On lane worker `usize` of the pool (another CPU lane, OpenCL).
    Worker(usize),
    /// At the monitor, then `kernel` on the controller.
    Device {
        unit: UnitId,
        cost: super::CostFn<T>,
        kernel: StageFn<T>,
        bytes_in: u64,
        bytes_out: u64,
    },
}

/// A stage finished off the controller thread.
pub(super) enum Done<T> {
    Lane {
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

/// Devices opened while profiling, handed to lane workers when a stage
/// first runs there (each worker owns its device: OpenCL queues here are
/// in-order and blocking).
#[derive(Default)]
pub(super) struct Devices {
    #[cfg(feature = "opencl")]
    opencl: Vec<Option<hetsched_opencl::OpenClDevice>>,
}

pub(super) struct Layout<T> {
    pub sched: Arc<Scheduler>,
    /// The planner's units; `units[i].id == UnitId(i)`.
    pub units: Vec<Unit>,
    pub lanes: Vec<Lane>,
    pub stages: Vec<Stage<T>>,
    /// Filled by [`Layout::profile`].
    pub specs: Vec<StageSpec>,
}

impl<T: Clone + Send + 'static> Layout<T> {
    /// Planner units: each emulated device of the monitor, each OpenCL
    /// device, and one lane per core of each CPU kind (at most one per
    /// stage and `cpu_lanes`), so that stages overlap on different cores.
    pub fn new(
        sched: Arc<Scheduler>,
        stages: Vec<Stage<T>>,
        cpu_lanes: usize,
    ) -> Result<(Layout<T>, Devices), PipelineError> {
        let mut units: Vec<Unit> = Vec::new();
        let mut lanes = Vec::new();
        for u in 0..sched.units.len() {
            let (n, kind) = match sched.backends[u] {
                Backend::Cpu { cores, .. } => {
                    ((cores as usize).min(cpu_lanes).min(stages.len()).max(1), 0)
                }
                Backend::Emulated => (1, 1),
                Backend::Device {
                    api: OPENCL_API, ..
                } if cfg!(feature = "opencl") => (1, 2),
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
                lanes.push(match kind {
                    0 => Lane::Cpu { unit: u, lane },
                    1 => Lane::Emulated { unit: u },
                    _ => Lane::OpenCl { unit: u },
                });
            }
        }
        #[allow(unused_mut)]
        let mut devices = Devices::default();
        #[cfg(feature = "opencl")]
        {
            let wanted = stages.iter().any(|s| s.opencl.is_some());
            devices.opencl = lanes
                .iter()
                .map(|l| match *l {
                    Lane::OpenCl { unit } if wanted => open_opencl(&sched.units[unit].name),
                    _ => None,
                })
                .collect();
        }
        Ok((
            Layout {
                sched,
                units,
                lanes,
                stages,
                specs: Vec::new(),
            },
            devices,
        ))
    }

    /// Runs each stage on the sample (chained) on every kind it has an
    /// implementation for, for the planner.
    pub fn profile(&mut self, sample: &T, devices: &mut Devices) -> Result<(), PipelineError> {
        let sched = &self.sched;
        let kinds = sched.kinds.len();
        // A CPU stage is timed on this thread; slower kinds (emulated slow
        // cores) take longer by their relative speed.
        let fastest = (0..sched.units.len())
            .filter(|&u| matches!(sched.backends[u], Backend::Cpu { .. }))
            .map(|u| sched.units[u].relative_speed)
            .fold(0.0f64, f64::max);
        let mut x = sample.clone();
        let mut specs = Vec::new();
        for (s, stage) in self.stages.iter().enumerate() {
            let (bytes_in, bytes_out) = stage.sizes.as_ref().map_or((0, 0), |f| f(&x));
            let mut time_ns = vec![None; kinds];
            let fail = |why: String| PipelineError::Profiling {
                stage: s,
                name: stage.name.clone(),
                why,
            };
            for (u, unit) in sched.units.iter().enumerate() {
                if sched.backends[u] != Backend::Emulated {
                    continue;
                }
                if let Some((_, cost, _)) = stage
                    .emulated
                    .iter()
                    .find(|(kind, _, _)| *kind == sched.infos[u].kind)
                {
                    time_ns[unit.kind.index()] =
                        Some(cost(&x).as_nanos() as f64 + unit.dispatch_ns as f64);
                }
            }
            #[allow(unused_mut)]
            let mut next: Option<T> = None;
            #[cfg(feature = "opencl")]
            if let Some(f) = &stage.opencl {
                for (i, lane) in self.lanes.iter().enumerate() {
                    let (Lane::OpenCl { unit }, Some(Some(dev))) = (*lane, devices.opencl.get(i))
                    else {
                        continue;
                    };
                    let (best, out) = best_of_three(|| {
                        catch_unwind(AssertUnwindSafe(|| f(dev, x.clone())))
                            .map_err(|p| crate::job::panic_message(&*p))
                            .and_then(|r| r.map_err(|e| e.to_string()))
                    })
                    .map_err(|why| fail(format!("on {}: {why}", sched.units[unit].name)))?;
                    time_ns[sched.units[unit].kind.index()] = Some(best);
                    next.get_or_insert(out);
                }
            }
            #[cfg(not(feature = "opencl"))]
            let _ = &devices;
            if let Some(f) = &stage.cpu {
                let (best, out) = best_of_three(|| run_guarded(f, x.clone())).map_err(fail)?;
                for (u, unit) in sched.units.iter().enumerate() {
                    if matches!(sched.backends[u], Backend::Cpu { .. }) {
                        let slower = if unit.relative_speed > 0.0 && fastest > 0.0 {
                            fastest / unit.relative_speed
                        } else {
                            1.0
                        };
                        time_ns[unit.kind.index()] = Some(best * slower);
                    }
                }
                // The CPU implementation is the reference for what flows on.
                next = Some(out);
            }
            let next = match next {
                Some(y) => y,
                None => match stage.emulated.first() {
                    Some((_, _, kernel)) => run_guarded(kernel, x.clone()).map_err(fail)?,
                    None => {
                        return Err(PlanError::NoImplementation {
                            stage: s,
                            name: stage.name.clone(),
                        }
                        .into());
                    }
                },
            };
            specs.push(StageSpec {
                name: stage.name.clone(),
                time_ns,
                bytes_in,
                bytes_out,
            });
            x = next;
        }
        self.specs = specs;
        Ok(())
    }

    pub fn lane(&self, id: UnitId) -> Lane {
        self.lanes[id.index()]
    }

    /// The PU a CPU lane runs on (lane `i` of a kind on its `i`-th PU).
    pub fn pin_of(&self, id: UnitId) -> Option<usize> {
        match self.lane(id) {
            Lane::Cpu { unit, lane } => self.sched.infos[unit].pus.get(lane).map(|&p| p as usize),
            _ => None,
        }
    }

    /// The throttle cgroup of a CPU lane's kind (an emulated slow core).
    pub fn throttle_of(&self, id: UnitId) -> Option<std::path::PathBuf> {
        match self.lane(id) {
            Lane::Cpu { unit, .. } => self.sched.infos[unit]
                .throttle
                .as_ref()
                .map(std::path::PathBuf::from),
            _ => None,
        }
    }

    /// The CPU lane the controller thread runs itself, for the pipeline's
    /// life: the first one of `assignment` on a kind that is not throttled
    /// (a controller in a slow kind's cgroup would slow every step, not
    /// just that lane's stages), else the first such lane at all, for
    /// stages a re-plan brings to the CPU.
    pub fn inline_lane(&self, assignment: &[UnitId]) -> Option<UnitId> {
        let fit = |id: UnitId| {
            matches!(self.lane(id), Lane::Cpu { .. }) && self.throttle_of(id).is_none()
        };
        assignment
            .iter()
            .copied()
            .find(|&id| fit(id))
            .or_else(|| self.units.iter().map(|u| u.id).find(|&id| fit(id)))
    }

    /// How each stage runs under `assignment`; starts lane workers it needs.
    pub fn execs(
        &self,
        assignment: &[UnitId],
        inline: Option<UnitId>,
        pool: &mut Pool<T>,
    ) -> Result<Vec<Exec<T>>, PipelineError> {
        // Copies to and from an emulated device ride on its stage's
        // submission (bytes in and out), as in the runtime's device path:
        // the monitor holds the device's stream for them.
        let is_device = |p: Place| match p {
            Place::Unit(id) => matches!(self.lane(id), Lane::Emulated { .. }),
            Place::Host => false,
        };
        let mut fold = vec![(0u64, 0u64); self.stages.len()];
        let one = pipeline_table::plan_with(&self.specs, &self.units, assignment, 1, 1)?;
        for c in one.steps.iter().flat_map(|s| &s.copies) {
            if is_device(c.dst) {
                fold[c.for_stage].0 += c.bytes;
            }
            if is_device(c.src) && c.for_stage > 0 {
                fold[c.for_stage - 1].1 += c.bytes;
            }
        }
        let mut exec = Vec::with_capacity(self.stages.len());
        for (s, (stage, &unit)) in self.stages.iter().zip(assignment).enumerate() {
            let bad = PlanError::BadAssignment { stage: s, unit };
            exec.push(match self.lane(unit) {
                Lane::Cpu { .. } => {
                    let f = stage.cpu.clone().ok_or(bad)?;
                    if inline == Some(unit) {
                        Exec::Inline(f)
                    } else {
                        Exec::Worker(pool.worker(self, unit)?)
                    }
                }
                Lane::OpenCl { .. } => Exec::Worker(pool.worker(self, unit)?),
                Lane::Emulated { unit: u } => {
                    let kind = &self.sched.infos[u].kind;
                    let (_, cost, kernel) = stage
                        .emulated
                        .iter()
                        .find(|(k, _, _)| k == kind)
                        .ok_or(bad)?;
                    Exec::Device {
                        unit: self.sched.units[u].id,
                        cost: Arc::clone(cost),
                        kernel: Arc::clone(kernel),
                        bytes_in: fold[s].0,
                        bytes_out: fold[s].1,
                    }
                }
            });
        }
        Ok(exec)
    }

    /// Each planner unit as the monitor's pages show it now, for the
    /// re-planner: a device's wait for a new call (our own possible call
    /// taken out), a CPU lane's share of its kind among runnable threads,
    /// an OpenCL device on the host CPU its kind's share.
    pub fn views(&self, assignment: &[UnitId]) -> Vec<ClientUnitView> {
        let client = self.sched.link.client();
        let global = client.global_view();
        let private = client.private_view();
        let runnable = |kind: usize| {
            global
                .and_then(|g| g.cpu_kind(kind))
                .map_or(0, |k| k.threads_by_nice.iter().sum::<u32>())
        };
        // Our busy lanes per CPU runtime unit.
        let mut ours = vec![0u32; self.sched.units.len()];
        let mut used: Vec<UnitId> = assignment.to_vec();
        used.sort_unstable_by_key(|id| id.0);
        used.dedup();
        for id in &used {
            if let Lane::Cpu { unit, .. } = self.lane(*id) {
                ours[unit] += 1;
            }
        }
        self.lanes
            .iter()
            .enumerate()
            .map(|(i, lane)| match *lane {
                Lane::Cpu { unit, .. } => match self.sched.backends[unit] {
                    Backend::Cpu { kind, cores } => lane_view(runnable(kind), cores, ours[unit]),
                    _ => ClientUnitView::default(),
                },
                Lane::Emulated { unit } => {
                    let published = private.and_then(|p| p.unit(unit)).unwrap_or_default();
                    let own = assignment
                        .iter()
                        .enumerate()
                        .filter(|(_, id)| id.index() == i)
                        .filter_map(|(s, _)| self.specs[s].time_on(&self.units[i]))
                        .fold(0.0, f64::max);
                    device_lane_view(published, own)
                }
                Lane::OpenCl { unit } => match self.sched.backends[unit] {
                    Backend::Device {
                        cpu_kind: Some(kind),
                        cores,
                        ..
                    } => lane_view(runnable(kind), cores, 0),
                    _ => ClientUnitView::default(),
                },
            })
            .collect()
    }
}

/// Opens the pipeline's own handle on the OpenCL device behind runtime
/// unit `name` (the runtime's worker keeps its own).
#[cfg(feature = "opencl")]
fn open_opencl(name: &str) -> Option<hetsched_opencl::OpenClDevice> {
    let index = crate::opencl_exec::device_index(name)?;
    match hetsched_opencl::OpenClDevice::open(index) {
        Ok(d) => Some(d),
        Err(e) => {
            tracing::warn!("cannot open {name} for its stages: {e}");
            None
        }
    }
}

/// Best wall time of three runs (the first warms caches and, for OpenCL,
/// builds the kernel) and the last output.
fn best_of_three<T>(mut run: impl FnMut() -> Result<T, String>) -> Result<(f64, T), String> {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..3 {
        let started = Instant::now();
        let y = run()?;
        best = best.min(started.elapsed().as_nanos() as f64);
        out = Some(y);
    }
    Ok((best.max(1.0), out.expect("ran three times")))
}

/// The pipeline's lane worker threads, started when a stage first runs on
/// their lane (a re-plan may move stages to a lane nobody used before).
pub(super) struct Pool<T> {
    workers: Vec<(UnitId, Sender<LaneJob<T>>, JoinHandle<()>)>,
    done: Sender<Done<T>>,
    /// Read only by OpenCL lanes.
    #[cfg_attr(not(feature = "opencl"), allow(dead_code))]
    devices: Devices,
    name: String,
}

impl<T: Clone + Send + 'static> Pool<T> {
    pub fn new(done: Sender<Done<T>>, devices: Devices, name: &str) -> Self {
        Pool {
            workers: Vec::new(),
            done,
            devices,
            name: name.to_string(),
        }
    }

    pub fn send(&self, worker: usize, job: LaneJob<T>) -> bool {
        self.workers[worker].1.send(job).is_ok()
    }

    /// The worker of lane `unit`, started if need be.
    fn worker(&mut self, layout: &Layout<T>, unit: UnitId) -> Result<usize, PipelineError> {
        if let Some(w) = self.workers.iter().position(|(u, _, _)| *u == unit) {
            return Ok(w);
        }
        let (tx, rx) = mpsc::channel::<LaneJob<T>>();
        let done = self.done.clone();
        let thread = std::thread::Builder::new().name(format!(
            "hetsched-pipe-{}-{}",
            self.name,
            layout.units[unit.index()].name
        ));
        let spawned = match layout.lane(unit) {
            Lane::Cpu { .. } => {
                let fns: Vec<Option<StageFn<T>>> =
                    layout.stages.iter().map(|s| s.cpu.clone()).collect();
                let pin = layout.pin_of(unit);
                let throttle = layout.throttle_of(unit);
                thread.spawn(move || {
                    pin_here(pin);
                    if let Some(dir) = &throttle {
                        join_throttle(dir);
                    }
                    serve(&rx, &done, |stage, data| match &fns[stage] {
                        Some(f) => run_guarded(f, data),
                        None => Err("no CPU implementation".into()),
                    });
                })
            }
            #[cfg(feature = "opencl")]
            Lane::OpenCl { unit: sched_unit } => {
                let fns: Vec<Option<super::OpenClStageFn<T>>> =
                    layout.stages.iter().map(|s| s.opencl.clone()).collect();
                // On a device the monitor arbitrates, each stage call waits
                // for the unit's agent like any other task of this process,
                // with the stage's profiled time as its expected time.
                let gate = layout.sched.backends[sched_unit].is_gated().then(|| {
                    let expected: Vec<f64> = layout
                        .specs
                        .iter()
                        .map(|s| s.time_on(&layout.units[unit.index()]).unwrap_or(0.0))
                        .collect();
                    (Arc::clone(&layout.sched), sched_unit, expected)
                });
                let device = self
                    .devices
                    .opencl
                    .get_mut(unit.index())
                    .and_then(Option::take)
                    .ok_or_else(|| {
                        PipelineError::Threads(format!(
                            "no OpenCL device open for {}",
                            layout.units[unit.index()].name
                        ))
                    })?;
                thread.spawn(move || {
                    serve(&rx, &done, |stage, data| {
                        let Some(f) = &fns[stage] else {
                            return Err("no OpenCL implementation".into());
                        };
                        let run = || {
                            catch_unwind(AssertUnwindSafe(|| f(&device, data)))
                                .map_err(|p| crate::job::panic_message(&*p))
                                .and_then(|r| r.map_err(|e| e.to_string()))
                        };
                        match &gate {
                            Some((sched, u, expected)) => crate::scheduler::gate_exec::run_granted(
                                sched,
                                *u,
                                expected[stage],
                                run,
                            )?,
                            None => run(),
                        }
                    });
                })
            }
            lane => {
                return Err(PipelineError::Threads(format!(
                    "{lane:?} has no lane worker"
                )));
            }
        }
        .map_err(|e| PipelineError::Threads(e.to_string()))?;
        self.workers.push((unit, tx, spawned));
        Ok(self.workers.len() - 1)
    }

    /// Ends every worker (their queues close) and waits for them; devices
    /// no lane took close with the pool.
    pub fn shut_down(self) {
        for (_, tx, h) in self.workers {
            drop(tx);
            let _ = h.join();
        }
    }
}

/// A lane worker's loop: run each job, report it, until the controller
/// goes.
fn serve<T>(
    rx: &Receiver<LaneJob<T>>,
    done: &Sender<Done<T>>,
    mut run: impl FnMut(usize, T) -> Result<T, String>,
) {
    while let Ok((chunk, stage, data)) = recv_spinning(rx) {
        let result = run(stage, data);
        if done
            .send(Done::Lane {
                chunk,
                stage,
                result,
            })
            .is_err()
        {
            return;
        }
    }
}

/// Puts this lane worker in its slow kind's throttle cgroup, so its stages
/// run at the kind's speed, as the runtime's own workers there do. Without
/// the privilege it runs at full speed and says so.
fn join_throttle(dir: &std::path::Path) {
    let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
    if let Err(e) = hetsched_platform::slow_cores::join_throttle(dir, tid) {
        tracing::warn!(
            "cannot join {} ({e}); this lane runs at full speed",
            dir.display()
        );
    }
}

/// How long a lane worker, or the controller waiting for a step, polls
/// before it sleeps: in steady state the next message comes within a
/// step, and a thread that has not slept needs no wake-up (a futex call of
/// several microseconds, more than a small stage).
const SPIN: Duration = Duration::from_micros(50);

pub(super) fn recv_spinning<M>(rx: &Receiver<M>) -> Result<M, mpsc::RecvError> {
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

pub(super) fn pin_here(pu: Option<usize>) {
    if let Some(pu) = pu {
        hetsched_platform::thread::pin_current(pu);
    }
}

pub(super) fn run_guarded<T>(f: &StageFn<T>, data: T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(|| f(data))).map_err(|p| crate::job::panic_message(&*p))
}
