//! The application's handle on hetsched: connect, accelerate, wait.

use crate::device_backend::OPENCL_API;
use crate::device_units::DeviceUnits;
use crate::handle::{Handle, TaskError, pair};
use crate::job::Call;
use crate::link::{Link, LinkError, LinkKind};
use crate::model_store;
use crate::optimizer::{GoalStatus, OptimizerThread, PerformanceGoal};
use crate::options::RuntimeOptions;
use crate::scheduler::device_worker::spawn_device_workers;
use crate::scheduler::{Backend, Scheduler};
use crate::slot::{SlotModel, TaskSlot};
use crate::task::Task;
use hetsched_core::ids::UnitId;
use hetsched_core::placement::{ImplSet, Placer};
use hetsched_core::task_model::{ModelSet, TaskModel};
use hetsched_protocol::UnitInfo;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Whether `accelerate` returns at once or after the call has run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Return when the call has run (its handle is ready).
    Sync,
    /// Return at once; the handle gives the result later.
    Async,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("bad hetsched environment: {0}")]
    Environment(String),
    #[error("cannot reach a monitor: {0}")]
    Link(#[from] LinkError),
    #[error("cannot start executor threads: {0}")]
    Threads(#[from] std::io::Error),
    #[error(
        "task {task} has no implementation for any unit of this machine (units: {units}); add .cpu(..) or an implementation for one of these kinds"
    )]
    NoImplementation { task: String, units: String },
    #[error(transparent)]
    Task(#[from] TaskError),
}

/// Per-unit counters since the runtime started.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitStats {
    pub name: String,
    pub kind: String,
    /// Calls this unit finished.
    pub completed: u64,
    /// Their execution time, ns (thread CPU time on CPUs, device time on devices).
    pub exec_ns: f64,
    /// Slots the monitor's agent granted this runtime on the unit, one
    /// round trip each (units whose agent arbitrates the device; 0 on
    /// the others).
    pub grants: u64,
}

/// What the runtime has done so far.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeStats {
    pub units: Vec<UnitStats>,
    /// `"daemon"` or `"embedded"`.
    pub monitor: &'static str,
    /// Times the link moved to another monitor.
    pub failovers: u32,
    /// Calls accepted and not finished.
    pub outstanding: u64,
}

static NEXT_RUNTIME: AtomicU64 = AtomicU64::new(1);

/// An application's runtime. Dropping it waits for every accepted call,
/// stops the workers and saves the task models.
pub struct Runtime {
    id: u64,
    sched: Arc<Scheduler>,
    workers: Vec<JoinHandle<()>>,
    slots: Mutex<HashMap<String, Arc<TaskSlot>>>,
    /// Models loaded at start, handed to tasks as they first run.
    loaded: Mutex<ModelSet>,
    model_path: Option<PathBuf>,
    optimizer: Mutex<Option<OptimizerThread>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("id", &self.id)
            .field("units", &self.sched.infos.len())
            .field("monitor", &self.sched.link.kind())
            .finish()
    }
}

impl Runtime {
    /// Connects with default options: the daemon if it runs, else an
    /// embedded monitor; settings from the environment (`hetsched run`).
    pub fn connect(name: impl Into<String>) -> Result<Runtime, RuntimeError> {
        Self::with_options(RuntimeOptions::new(name).map_err(RuntimeError::Environment)?)
    }

    pub fn with_options(opts: RuntimeOptions) -> Result<Runtime, RuntimeError> {
        let link = Link::open(&opts)?;
        let monitor_infos = link.units().to_vec();
        let mut devices = DeviceUnits::new(&monitor_infos);
        // Each backend's devices follow the previous backend's.
        let mut device_workers = Vec::new();
        for backend in crate::device_backends::registered(&opts) {
            for opened in backend.open() {
                let on = Backend::Device {
                    api: backend.api(),
                    cpu_kind: opened.host_cpu_kind,
                    cores: opened.cores,
                    gated: false,
                };
                device_workers.push(devices.assign(opened.info, on, opened.runner));
            }
        }
        let sched = Arc::new(Scheduler::new(link, &opts, devices.local, devices.gated));
        let (loaded, model_path) = if opts.persist_models {
            let path = model_store::model_path(&opts.resolved_model_dir(), &opts.name);
            let got = model_store::load(&path, &sched.kinds);
            if let Some(w) = &got.warning {
                tracing::warn!("{w}");
            }
            (got.models, Some(path))
        } else {
            (ModelSet::new(), None)
        };
        let mut workers = crate::cpu_exec::spawn_workers(&sched)?;
        workers.extend(spawn_device_workers(&sched, device_workers)?);
        if opts.follow_coordination {
            workers.push(crate::scheduler::coordination::spawn(&sched)?);
        }
        Ok(Runtime {
            id: NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed),
            sched,
            workers,
            slots: Mutex::new(HashMap::new()),
            loaded: Mutex::new(loaded),
            model_path,
            optimizer: Mutex::new(None),
        })
    }

    /// The units this runtime can place on.
    pub fn units(&self) -> &[UnitInfo] {
        &self.sched.infos
    }

    /// The units this runtime runs OpenCL code on (a stage's
    /// [`crate::pipeline::Stage::opencl_map`], a task's OpenCL
    /// implementation). Empty in a build without OpenCL (the feature
    /// `opencl`), even where the monitor lists OpenCL devices: those are
    /// not offered to a program that cannot drive them.
    pub fn opencl_units(&self) -> Vec<&UnitInfo> {
        self.sched
            .infos
            .iter()
            .zip(&self.sched.backends)
            .filter(|(_, b)| {
                matches!(
                    b,
                    Backend::Device {
                        api: OPENCL_API,
                        ..
                    }
                )
            })
            .map(|(info, _)| info)
            .collect()
    }

    /// The scheduler: units, backends and the monitor link, for the
    /// pipeline controller (`crate::pipeline`), which drives units itself.
    pub(crate) fn scheduler(&self) -> &Arc<Scheduler> {
        &self.sched
    }

    /// Whether the monitor is the daemon or embedded, now.
    pub fn monitor_is_daemon(&self) -> bool {
        self.sched.link.kind() == LinkKind::Daemon
    }

    /// Runs `task` on `args` where it is predicted to finish soonest.
    pub fn accelerate<A: Send + 'static, R: Send + 'static>(
        &self,
        task: &Task<A, R>,
        args: A,
        mode: Mode,
    ) -> Result<Handle<R>, RuntimeError> {
        let slot = self.bind(task)?;
        let (handle, completer) = pair();
        self.sched.submit(Box::new(Call {
            args,
            def: Arc::clone(&task.def),
            slot,
            completer,
            outcome: None,
        }));
        if mode == Mode::Sync {
            handle.block();
        }
        Ok(handle)
    }

    /// Starts the optimizer on a performance goal (replacing any earlier
    /// goal): every period it compares the tracker with the target and
    /// spreads calls, asks for shares or calls the application back.
    pub fn set_goal(&self, goal: PerformanceGoal) -> Result<(), RuntimeError> {
        let mut slot = self.optimizer.lock().unwrap_or_else(|p| p.into_inner());
        // The old thread undoes what it did before the new one starts.
        drop(slot.take());
        *slot = Some(crate::optimizer::start(&self.sched, goal)?);
        Ok(())
    }

    /// Stops the optimizer and gives back what it took.
    pub fn clear_goal(&self) {
        drop(
            self.optimizer
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
    }

    /// Where the optimizer stands, if a goal is set.
    pub fn goal_status(&self) -> Option<GoalStatus> {
        let slot = self.optimizer.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()
            .map(|o| o.status.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }

    /// Brings `buffer`'s contents back to host memory (a copy only if a
    /// device holds them), e.g. before the application reads it.
    pub fn fetch(&self, buffer: &crate::buffer::Buffer) {
        self.sched.fetch_to_host(buffer);
    }

    /// Blocks until every call accepted so far has finished.
    pub fn wait_all(&self) {
        self.sched.outstanding.wait_zero();
    }

    pub fn stats(&self) -> RuntimeStats {
        let q = self.sched.lock();
        RuntimeStats {
            units: self
                .sched
                .infos
                .iter()
                .zip(&q.units)
                .map(|(info, u)| UnitStats {
                    name: info.name.clone(),
                    kind: info.kind.clone(),
                    completed: u.completed,
                    exec_ns: u.exec_ns_total,
                    grants: u.grants,
                })
                .collect(),
            monitor: match self.sched.link.kind() {
                LinkKind::Daemon => "daemon",
                LinkKind::Embedded => "embedded",
            },
            failovers: self.sched.link.failovers(),
            outstanding: self.sched.outstanding.get(),
        }
    }

    /// The learned model of a task: as it stands if the task has run here,
    /// else as loaded from the model file. `None` for a task that brings
    /// its own model, or that this runtime knows nothing about.
    pub fn model_of(&self, task: &str) -> Option<TaskModel> {
        if let Some(slot) = self.slots().get(task).cloned() {
            let st = slot.lock();
            return st.model.app.is_none().then(|| st.model.learned.clone());
        }
        let loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        loaded.get(task).cloned()
    }

    /// Unit kind names in model order (a model's `KindId` indexes this).
    pub fn kinds(&self) -> &[String] {
        &self.sched.kinds
    }

    /// Writes the learned models now (also done when the runtime drops).
    pub fn save_models(&self) -> std::io::Result<()> {
        let Some(path) = &self.model_path else {
            return Ok(());
        };
        let mut set = self
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for (name, slot) in self.slots().iter() {
            set.tasks
                .insert(name.clone(), slot.lock().model.learned.clone());
        }
        model_store::save(path, &self.sched.kinds, &set)
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<TaskSlot>>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This runtime's state for `task`, made on first use.
    fn bind<A: Send + 'static, R: Send + 'static>(
        &self,
        task: &Task<A, R>,
    ) -> Result<Arc<TaskSlot>, RuntimeError> {
        if let Some((rt, slot)) = task.def.bound.get()
            && *rt == self.id
        {
            return Ok(Arc::clone(slot));
        }
        let mut slots = self.slots();
        if let Some(slot) = slots.get(&task.def.name) {
            return Ok(Arc::clone(slot));
        }
        let implemented = self.implemented(task)?;
        self.sched
            .implemented_any
            .fetch_or(implemented.0, Ordering::Relaxed);
        let kinds = self.sched.kinds.len();
        let learned = self
            .loaded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(&task.def.name, kinds)
            .clone();
        let model = SlotModel {
            learned,
            app: task
                .def
                .model
                .as_ref()
                .map(|f| (Arc::clone(f), self.sched.kinds.clone())),
        };
        let slot = Arc::new(TaskSlot::new(
            task.def.name.clone(),
            implemented,
            model,
            Placer::new(self.sched.placement, self.sched.units.len()),
        ));
        slots.insert(task.def.name.clone(), Arc::clone(&slot));
        let _ = task.def.bound.set((self.id, Arc::clone(&slot)));
        Ok(slot)
    }

    fn implemented<A, R>(&self, task: &Task<A, R>) -> Result<ImplSet, RuntimeError> {
        let mut set = ImplSet::default();
        for (info, backend) in self.sched.infos.iter().zip(&self.sched.backends) {
            let has = match backend {
                Backend::Cpu { .. } => task.def.cpu.is_some(),
                Backend::Emulated => task.def.emulated.iter().any(|e| e.kind == info.kind),
                Backend::Device { api, .. } => task.def.devices.iter().any(|d| d.api == *api),
                Backend::None => false,
            };
            if has && (info.id.index()) < ImplSet::MAX_UNITS {
                set = set.with(UnitId(info.id.0));
            }
        }
        if set.is_empty() {
            return Err(RuntimeError::NoImplementation {
                task: task.def.name.clone(),
                units: self
                    .sched
                    .infos
                    .iter()
                    .map(|u| format!("{} ({})", u.name, u.kind))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        Ok(set)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.clear_goal();
        self.wait_all();
        for job in self.sched.shut_down() {
            let task = job.slot().name.clone();
            job.fail(TaskError::Cancelled { task });
            self.sched.outstanding.done();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        if let Err(e) = self.save_models() {
            tracing::warn!("cannot save task models: {e}");
        }
    }
}
