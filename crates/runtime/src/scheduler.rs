//! The central queue, short per-unit queues, and placement.
//!
//! Calls enter the central queue undecided. A call is placed only when one
//! of the units it can run on has room in its short queue, so the decision
//! is taken on views that are still fresh when the call runs (Rinnegan
//! §3.2: long per-unit queues make predictions stale). Placement itself is
//! hetsched-core's [`Placer`](hetsched_core::placement::Placer) over the
//! monitor's views, the same code the simulator runs.
//!
//! One mutex guards the queues; it is held only to move calls between
//! queues and to decide, never while a call runs.
//!
//! The threads that take placed calls off the queues are files of
//! `scheduler/`: the worker loop ([`worker`]) and the worker threads of
//! devices this process drives ([`device_worker`]), the gate in front of
//! devices the monitor arbitrates ([`gate_exec`]), emulated devices the
//! monitor serves (`device_exec`), and the thread that follows the
//! daemon's coordination targets ([`coordination`]).

pub(crate) mod coordination;
mod device_exec;
pub(crate) mod device_worker;
pub(crate) mod gate_exec;
pub(crate) mod worker;

use crate::handle::{Outstanding, TaskError};
use crate::job::Job;
use crate::link::Link;
use crate::slot::TaskSlot;
use hetsched_core::ids::UnitId;
use hetsched_core::local_view::{OwnLoad, cpu_view, device_view};
use hetsched_core::placement::{
    DataLocation, Goal, ImplSet, PlacementConfig, PlacementError, Reason, TaskRequest,
};
use hetsched_core::unit::{Unit, UnitClass};
use hetsched_core::view::ClientUnitView;
use hetsched_protocol::UnitInfo;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// How deep `pump` looks into the central queue for a call it can place.
const CENTRAL_SCAN: usize = 256;

/// How a unit's calls are executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    /// Pinned worker threads; `kind` indexes CPU kinds on the global page.
    Cpu { kind: usize, cores: u32 },
    /// Served by the monitor (`SubmitDevice`).
    Emulated,
    /// A device this process drives with one worker thread, through the
    /// device backend named `api` ([`crate::device_backend`]). A device
    /// on the host CPU (PoCL) that the monitor does not arbitrate shares
    /// CPU kind `cpu_kind`'s cores with everything else, so its view is
    /// that kind's. `gated`: the unit is the monitor's, each run of calls
    /// waits for its agent ([`gate_exec`]), and its view is the monitor's
    /// private page.
    Device {
        api: &'static str,
        cpu_kind: Option<usize>,
        cores: u32,
        gated: bool,
    },
    /// A unit this runtime has no executor for yet.
    None,
}

impl Backend {
    /// Whether worker threads of this process pull the unit's calls.
    pub fn has_workers(self) -> bool {
        matches!(self, Backend::Cpu { .. } | Backend::Device { .. })
    }

    /// The same device as a unit the monitor arbitrates: its view comes
    /// from the monitor's page.
    pub fn gated(self) -> Backend {
        match self {
            Backend::Device { api, cores, .. } => Backend::Device {
                api,
                cpu_kind: None,
                cores,
                gated: true,
            },
            other => other,
        }
    }

    /// Whether the monitor's agent grants each run of this unit's calls.
    pub fn is_gated(self) -> bool {
        matches!(self, Backend::Device { gated: true, .. })
    }
}

/// A call that has been placed on a unit.
pub(crate) struct Placed {
    pub job: Box<dyn Job>,
    /// The call's input and output bytes (its `sizes`), asked once.
    pub bytes: (u64, u64),
    /// Predicted turnaround from placement (NaN while profiling).
    pub predicted_ns: f64,
    /// Predicted execution time (NaN while profiling).
    pub exec_ns: f64,
    pub profiling: bool,
    pub accepted_at: Instant,
    pub placed_at: Instant,
}

#[derive(Default)]
pub(crate) struct UnitQueue {
    pub waiting: VecDeque<Placed>,
    pub running: u32,
    pub idle_workers: u32,
    pub pending_ns: f64,
    pub completed: u64,
    pub exec_ns_total: f64,
    /// Slots the unit's agent granted (gated units): a round trip each.
    pub grants: u64,
}

pub(crate) struct Queues {
    pub central: VecDeque<(Box<dyn Job>, Instant)>,
    pub units: Vec<UnitQueue>,
    views: Vec<ClientUnitView>,
    /// Units with room and central-queue length when a scan last found
    /// nothing to place (saves rescanning an unchanged queue).
    failed_scan: Option<(u64, usize)>,
    pub shutdown: bool,
    /// Following the daemon's proportional-fair targets, when enabled.
    pub follow: Option<coordination::Following>,
}

/// What one finished call teaches the models.
pub(crate) struct Finished {
    pub unit: UnitId,
    pub bytes: u64,
    pub exec_ns: f64,
    pub predicted_ns: f64,
    pub exec_predicted_ns: f64,
    pub turnaround_ns: f64,
    pub profiling: bool,
}

pub(crate) struct Scheduler {
    /// The monitor's unit this application runs on without hetsched, if
    /// its options name one (sent with its demand reports).
    pub native_unit: Option<UnitId>,
    pub units: Vec<Unit>,
    /// Unit names, shared with every result that reports where it ran.
    pub unit_names: Vec<Arc<str>>,
    pub infos: Vec<UnitInfo>,
    pub kinds: Vec<String>,
    pub backends: Vec<Backend>,
    queues: Mutex<Queues>,
    /// Wakes idle workers (CPU, OpenCL), one condvar per unit.
    pub wake: Vec<Condvar>,
    /// Wakes the coordination thread (a call waits for the pacer).
    pub coord_wake: Condvar,
    /// Units some task of this runtime has an implementation for (an
    /// [`ImplSet`] mask), for the daemon's coordination.
    pub implemented_any: std::sync::atomic::AtomicU64,
    pub link: Link,
    pub outstanding: Outstanding,
    pub goal: Goal,
    /// The optimizer asked to spread calls over more units: place for
    /// throughput (latencies overlap across units) instead of the goal.
    spreading: AtomicBool,
    pub placement: PlacementConfig,
    queue_per_slot: u32,
    inflight_per_slot: u32,
}

impl Scheduler {
    /// `local` are units this process drives itself (devices of its
    /// device backends), numbered after the monitor's. `gated` are monitor units
    /// this process runs calls on once their agent grants it (its own
    /// description of the device, with the monitor's id and policy).
    pub fn new(
        link: Link,
        opts: &crate::RuntimeOptions,
        local: Vec<(UnitInfo, Backend)>,
        gated: Vec<(UnitInfo, Backend)>,
    ) -> Scheduler {
        let mut infos = link.units().to_vec();
        let mut gated_backends = vec![None; infos.len()];
        for (info, backend) in gated {
            let u = info.id.index();
            infos[u] = info;
            gated_backends[u] = Some(backend);
        }
        let mut local_backends = Vec::new();
        for (mut info, backend) in local {
            info.id = UnitId(infos.len() as u16);
            infos.push(info);
            local_backends.push(backend);
        }
        let n_monitor = link.units().len();
        let mut machine = hetsched_core::unit::Machine::default();
        let mut backends = Vec::new();
        let mut cpu_kinds = 0;
        for info in &infos {
            let kind = machine.intern_kind(&info.kind, info.class);
            machine.units.push(info.to_unit(kind));
            backends.push(if info.id.index() >= n_monitor {
                local_backends[info.id.index() - n_monitor]
            } else if let Some(backend) = gated_backends[info.id.index()] {
                backend
            } else if info.class == UnitClass::Cpu {
                cpu_kinds += 1;
                Backend::Cpu {
                    kind: cpu_kinds - 1,
                    cores: info.slots.max(1),
                }
            } else if info.emulated {
                Backend::Emulated
            } else {
                Backend::None
            });
        }
        let n = infos.len();
        let native_unit = opts.native_unit.as_deref().and_then(|name| {
            let found = infos[..n_monitor]
                .iter()
                .find(|u| u.name == name)
                .map(|u| u.id);
            if found.is_none() {
                let names: Vec<&str> = infos[..n_monitor].iter().map(|u| u.name.as_str()).collect();
                tracing::warn!(
                    "native unit {name:?} is not one of the monitor's units ({}); not declared",
                    names.join(", ")
                );
            }
            found
        });
        Scheduler {
            native_unit,
            kinds: machine.kinds.iter().map(|k| k.name.clone()).collect(),
            unit_names: machine
                .units
                .iter()
                .map(|u| Arc::from(u.name.as_str()))
                .collect(),
            units: machine.units,
            infos,
            backends,
            queues: Mutex::new(Queues {
                central: VecDeque::new(),
                units: (0..n).map(|_| UnitQueue::default()).collect(),
                views: vec![ClientUnitView::default(); n],
                failed_scan: None,
                shutdown: false,
                follow: opts.follow_coordination.then(coordination::Following::new),
            }),
            wake: (0..n).map(|_| Condvar::new()).collect(),
            coord_wake: Condvar::new(),
            implemented_any: std::sync::atomic::AtomicU64::new(0),
            link,
            outstanding: Outstanding::default(),
            goal: opts.goal,
            spreading: AtomicBool::new(false),
            placement: opts.placement,
            queue_per_slot: opts.queue_per_slot.max(1),
            inflight_per_slot: opts.inflight_per_slot.max(1),
        }
    }

    pub fn set_spreading(&self, on: bool) {
        self.spreading.store(on, Ordering::Relaxed);
    }

    fn placement_goal(&self) -> Goal {
        if self.spreading.load(Ordering::Relaxed) {
            Goal::MaxThroughput
        } else {
            self.goal
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn slots(&self, unit: usize) -> u32 {
        self.units[unit].slots.max(1)
    }

    /// Calls a unit may hold placed (waiting plus running).
    fn capacity(&self, unit: usize) -> u32 {
        let slots = self.slots(unit);
        match self.backends[unit] {
            Backend::Cpu { .. } | Backend::Device { .. } => slots * (1 + self.queue_per_slot),
            Backend::Emulated => slots * (self.inflight_per_slot + self.queue_per_slot),
            Backend::None => 0,
        }
    }

    /// Device calls a unit may have at the monitor at once.
    pub fn inflight_cap(&self, unit: usize) -> u32 {
        self.slots(unit) * self.inflight_per_slot
    }

    /// Units with room, as an [`ImplSet`] bit mask.
    fn units_with_room(&self, q: &Queues) -> u64 {
        (0..self.units.len().min(ImplSet::MAX_UNITS))
            .filter(|&u| self.has_room(q, u))
            .fold(0, |m, u| m | 1 << u)
    }

    fn has_room(&self, q: &Queues, unit: usize) -> bool {
        let u = &q.units[unit];
        let placed = u.waiting.len() as u32 + u.running;
        placed < self.capacity(unit)
            || (self.backends[unit].is_gated() && gate_exec::has_batch_room(placed, u.pending_ns))
    }

    /// Accepts a call into the central queue and places what can be placed.
    pub fn submit(self: &Arc<Self>, job: Box<dyn Job>) {
        self.outstanding.add();
        let mut q = self.lock();
        if q.shutdown {
            drop(q);
            let name = job.slot().name.clone();
            job.fail(TaskError::Cancelled { task: name });
            self.outstanding.done();
            return;
        }
        q.central.push_back((job, Instant::now()));
        self.pump(&mut q);
    }

    /// Hands the calls waiting on unit `u` that another unit could run back
    /// to the front of the central queue, in order, to be placed again on
    /// fresh views (the unit turned out far slower than predicted: its
    /// agent keeps them waiting). Returns how many went back.
    pub fn replace_waiting(self: &Arc<Self>, q: &mut Queues, u: usize) -> usize {
        let here = self.units[u].id;
        if here.index() >= ImplSet::MAX_UNITS {
            return 0;
        }
        let kind = self.units[u].kind;
        let (mut stay, mut back) = (VecDeque::new(), Vec::new());
        for placed in q.units[u].waiting.drain(..) {
            let elsewhere = placed.job.slot().implemented.0 & !ImplSet::default().with(here).0;
            if elsewhere == 0 {
                stay.push_back(placed);
            } else {
                back.push(placed);
            }
        }
        q.units[u].waiting = stay;
        let moved = back.len();
        for placed in back.into_iter().rev() {
            let unit = &mut q.units[u];
            unit.pending_ns = (unit.pending_ns - finite_or_zero(placed.exec_ns)).max(0.0);
            if placed.profiling {
                // Its profiling run did not happen.
                placed.job.slot().lock().profiling_ended(kind);
            }
            q.central.push_front((placed.job, placed.accepted_at));
        }
        if moved > 0 {
            self.pump(q);
        }
        moved
    }

    /// Places calls from the central queue while their units have room,
    /// then starts device work. Called with the queues locked.
    pub fn pump(self: &Arc<Self>, q: &mut Queues) {
        // Targets are read once per pump: they change every few hundred
        // ms at most, and the page read is a few ns per unit.
        let coordinated = match q.follow.as_mut() {
            Some(f) if f.paced_until.is_none() => f.refresh(self),
            // A call already waits for the pacer's next token: nothing is
            // placed until the coordination thread says it is due.
            Some(_) => return self.start_device_work(q),
            None => false,
        };
        // The first call (in arrival order) that one of its units has room
        // for; calls for full units keep their place without holding up
        // calls that could run elsewhere.
        loop {
            let room = self.units_with_room(q);
            if room == 0 || q.failed_scan == Some((room, q.central.len())) {
                break;
            }
            let Some(i) = q
                .central
                .iter()
                .take(CENTRAL_SCAN)
                .position(|(job, _)| job.slot().implemented.0 & room != 0)
            else {
                // Nothing queued fits the free units; until a unit frees
                // up or a call arrives, scanning again finds nothing.
                q.failed_scan = Some((room, q.central.len()));
                break;
            };
            if coordinated && !q.follow.as_mut().is_some_and(|f| f.admit(Instant::now())) {
                self.coord_wake.notify_one();
                break;
            }
            let Some((job, accepted_at)) = q.central.remove(i) else {
                break;
            };
            let bytes = job.bytes();
            match self.place(q, job.as_ref(), bytes, coordinated) {
                Ok((unit, predicted_ns, exec_ns, profiling)) => {
                    let u = unit.index();
                    let queue = &mut q.units[u];
                    queue.pending_ns += finite_or_zero(exec_ns);
                    queue.waiting.push_back(Placed {
                        job,
                        bytes,
                        predicted_ns,
                        exec_ns,
                        profiling,
                        accepted_at,
                        placed_at: Instant::now(),
                    });
                    if self.backends[u].has_workers() && queue.idle_workers > 0 {
                        self.wake[u].notify_one();
                    }
                }
                Err(e) => {
                    let task = job.slot().name.clone();
                    job.fail(TaskError::Unplaceable {
                        task,
                        why: e.to_string(),
                    });
                    self.outstanding.done();
                }
            }
        }
        self.start_device_work(q);
    }

    fn start_device_work(self: &Arc<Self>, q: &mut Queues) {
        for u in 0..self.units.len() {
            if self.backends[u] == Backend::Emulated {
                device_exec::start(self, q, u);
            }
        }
    }

    /// The unit the daemon's targets give a call of a task whose every
    /// unit has been profiled (a task still profiling places on its own).
    fn follow_targets(&self, q: &mut Queues, job: &dyn Job, bytes: u64) -> Option<(UnitId, f64)> {
        let slot = job.slot();
        let st = slot.lock();
        let implemented =
            |u: usize| u < ImplSet::MAX_UNITS && slot.implemented.contains(self.units[u].id);
        let profiled = (0..self.units.len())
            .filter(|&u| implemented(u))
            .all(|u| st.model.predict(self.units[u].kind, bytes).is_some());
        if !profiled {
            return None;
        }
        let room = self.units_with_room(q);
        let exec: Vec<f64> = (0..self.units.len())
            .map(|u| {
                st.model
                    .predict(self.units[u].kind, bytes)
                    .unwrap_or(f64::NAN)
            })
            .collect();
        let f = q.follow.as_mut()?;
        let u = f.pick(Instant::now(), &exec, |u| {
            implemented(u) && room & (1 << u) != 0
        })?;
        Some((self.units[u].id, exec[u]))
    }

    /// While a daemon that may coordinate has published no targets for this
    /// client: an implemented monitor unit with room this runtime has not
    /// run a call on yet. The daemon solves for an app only once it has
    /// figures for every unit the app implements, and a runtime that
    /// loaded its models from disk skips start-up profiling, so without
    /// this one call per unit its own placement might never go there and
    /// the app would never be coordinated.
    fn unmeasured_unit(&self, q: &Queues, job: &dyn Job) -> Option<UnitId> {
        q.follow.as_ref()?;
        if self.link.kind() != crate::link::LinkKind::Daemon {
            return None;
        }
        let slot = job.slot();
        (0..self.link.units().len().min(ImplSet::MAX_UNITS))
            .filter(|&u| slot.implemented.contains(self.units[u].id))
            .filter(|&u| self.backends[u] != Backend::None && self.has_room(q, u))
            .find(|&u| {
                let used = &q.units[u];
                used.completed == 0 && used.running == 0 && used.waiting.is_empty()
            })
            .map(|u| self.units[u].id)
    }

    /// Chooses the unit for one call: the daemon's targets when it
    /// coordinates, else views of every unit and the placer.
    fn place(
        &self,
        q: &mut Queues,
        job: &dyn Job,
        (bytes, out_bytes): (u64, u64),
        coordinated: bool,
    ) -> Result<(UnitId, f64, f64, bool), PlacementError> {
        if coordinated {
            if let Some((unit, exec_ns)) = self.follow_targets(q, job, bytes) {
                // No turnaround prediction: the placer's miss statistics
                // (ping-pong damping) only learn from its own decisions.
                return Ok((unit, f64::NAN, exec_ns, false));
            }
        } else if let Some(unit) = self.unmeasured_unit(q, job) {
            let kind = self.units[unit.index()].kind;
            let exec_ns = job
                .slot()
                .lock()
                .model
                .predict(kind, bytes)
                .unwrap_or(f64::NAN);
            return Ok((unit, f64::NAN, exec_ns, false));
        }
        let slot = job.slot();
        let buffer = job.buffer();
        let request = TaskRequest {
            bytes,
            out_bytes,
            data_at: buffer.as_ref().map_or(DataLocation::Host, |b| b.location()),
            persistent: buffer.is_some(),
            implemented: slot.implemented,
            goal: self.placement_goal(),
        };
        let mut guard = slot.lock();
        let st = &mut *guard;
        let client = self.link.client();
        let global = client.global_view();
        let private = client.private_view();
        for (i, backend) in self.backends.iter().enumerate() {
            let own = {
                let u = &q.units[i];
                OwnLoad {
                    waiting: u.waiting.len() as u32,
                    running: u.running,
                    pending_ns: u.pending_ns,
                }
            };
            q.views[i] = match *backend {
                Backend::Cpu { kind, cores }
                | Backend::Device {
                    cpu_kind: Some(kind),
                    cores,
                    ..
                } => {
                    let runnable = global
                        .and_then(|g| g.cpu_kind(kind))
                        .map_or(0, |k| k.threads_by_nice.iter().sum());
                    cpu_view(runnable, cores, own)
                }
                Backend::Emulated | Backend::Device { .. } | Backend::None => {
                    if !slot.implemented.contains(self.units[i].id) {
                        continue;
                    }
                    let published = private.and_then(|p| p.unit(i)).unwrap_or_default();
                    let exec = st.model.predict(self.units[i].kind, bytes);
                    device_view(published, own, self.slots(i), exec)
                }
            };
        }
        let decision = st.decide(&self.units, &q.views, &request)?;
        let kind = self.units[decision.unit.index()].kind;
        let profiling = decision.reason == Reason::Profiling;
        let exec_ns = st.model.predict(kind, bytes).unwrap_or(f64::NAN);
        Ok((decision.unit, decision.predicted_ns, exec_ns, profiling))
    }

    /// Feeds a finished call to its task's model and placer.
    pub fn learn(&self, slot: &TaskSlot, f: &Finished) {
        let kind = self.units[f.unit.index()].kind;
        let mut st = slot.lock();
        if f.profiling {
            st.profiling_ended(kind);
        }
        // A call that compiled its kernel first teaches nothing about the
        // next one; its kind is profiled again.
        if !f.exec_ns.is_nan() {
            let _ = st.model.learned.try_observe(kind, f.bytes, f.exec_ns);
        }
        st.placer
            .observe(f.unit, f.predicted_ns, f.turnaround_ns.max(1.0));
    }

    /// Bookkeeping once a call's unit is free again; places more work.
    /// The caller then completes the call and counts it done.
    pub fn release(self: &Arc<Self>, q: &mut Queues, f: &Finished) {
        let u = &mut q.units[f.unit.index()];
        u.running = u.running.saturating_sub(1);
        u.pending_ns = (u.pending_ns - finite_or_zero(f.exec_predicted_ns)).max(0.0);
        u.completed += 1;
        u.exec_ns_total += finite_or_zero(f.exec_ns);
        self.pump(q);
    }

    /// Brings a buffer's contents back to host memory if a device holds
    /// them: the monitor holds that device's stream for the copy out.
    pub fn fetch_to_host(&self, buffer: &crate::buffer::Buffer) {
        let DataLocation::Unit(at) = buffer.location() else {
            return;
        };
        if self.backends.get(at.index()) == Some(&Backend::Emulated) {
            let client = self.link.client();
            if let Err(e) = client.run_device(at, 0, 0, buffer.bytes()) {
                // The contents are host memory in emulation; only the
                // modelled transfer time is lost.
                tracing::warn!(
                    "copy back from {} not modelled: {e}",
                    self.units[at.index()].name
                );
            }
        }
        buffer.count_copy();
        buffer.set_location(DataLocation::Host);
    }

    /// Stops accepting calls and fails those never placed; placed ones run.
    pub fn shut_down(&self) -> Vec<Box<dyn Job>> {
        let mut q = self.lock();
        q.shutdown = true;
        for cv in &self.wake {
            cv.notify_all();
        }
        self.coord_wake.notify_all();
        q.central.drain(..).map(|(j, _)| j).collect()
    }
}

pub(crate) fn finite_or_zero(x: f64) -> f64 {
    if x.is_finite() { x } else { 0.0 }
}

pub(crate) fn elapsed_ns(since: Instant) -> f64 {
    since.elapsed().as_nanos() as f64
}
