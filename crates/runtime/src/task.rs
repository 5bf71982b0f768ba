//! Tasks: one computation with an implementation per kind of unit.
//!
//! A [`Task`] is a description, cheap to clone and shared by every call
//! that runs it. Its name keys the task model, so two tasks with the same
//! name share (and persist) one model.

use crate::buffer::Buffer;
use crate::slot::TaskSlot;
use std::any::Any;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use crate::slot::ModelFn;

/// What a CPU implementation learns about where it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuCtx {
    /// Cores of this CPU kind the client may use (the exclusive cores the
    /// monitor's private view grants, at least 1): a parallel
    /// implementation splits its work over this many threads.
    pub cores: usize,
}

pub(crate) type CpuFn<A, R> = Arc<dyn Fn(&A, &CpuCtx) -> R + Send + Sync>;
pub(crate) type CostFn<A> = Arc<dyn Fn(&A) -> Duration + Send + Sync>;
pub(crate) type KernelFn<A, R> = Arc<dyn Fn(&A) -> R + Send + Sync>;
pub(crate) type DataFn<A> = Arc<dyn Fn(&A) -> Buffer + Send + Sync>;
pub(crate) type SizeFn<A> = Arc<dyn Fn(&A) -> (u64, u64) + Send + Sync>;
/// An implementation on the devices of one device backend
/// ([`crate::device_backend`]): given the device as its runner hands it,
/// it moves the data, launches and reads back.
pub(crate) type DeviceFn<A, R> = Arc<dyn Fn(&dyn Any, &A) -> Result<R, String> + Send + Sync>;

/// A task's implementation for the devices of backend `api`.
pub(crate) struct DeviceImpl<A, R> {
    pub api: &'static str,
    pub run: DeviceFn<A, R>,
}

impl<A, R> Clone for DeviceImpl<A, R> {
    fn clone(&self) -> Self {
        DeviceImpl {
            api: self.api,
            run: Arc::clone(&self.run),
        }
    }
}

/// An implementation on an emulated device kind.
///
/// The monitor holds one of the device's streams for the modelled time
/// (`cost`, plus the unit's dispatch and copy costs), which is what makes
/// contention for the device between processes real. The result comes from
/// `kernel`, run on the host when the device reports completion: the
/// emulated device's answer must be the answer a real one would give, and
/// it is meant to be cheap next to `cost` (an emulated device has no
/// cycles of its own).
pub(crate) struct EmulatedImpl<A, R> {
    pub kind: String,
    pub cost: CostFn<A>,
    pub kernel: KernelFn<A, R>,
}

impl<A, R> Clone for EmulatedImpl<A, R> {
    fn clone(&self) -> Self {
        EmulatedImpl {
            kind: self.kind.clone(),
            cost: Arc::clone(&self.cost),
            kernel: Arc::clone(&self.kernel),
        }
    }
}

pub(crate) struct TaskDef<A, R> {
    pub name: String,
    pub cpu: Option<CpuFn<A, R>>,
    pub emulated: Vec<EmulatedImpl<A, R>>,
    /// Implementations on devices, one per device backend.
    pub devices: Vec<DeviceImpl<A, R>>,
    pub sizes: Option<SizeFn<A>>,
    pub data: Option<DataFn<A>>,
    pub model: Option<ModelFn>,
    /// The runtime this task was last bound to, and its placement state there.
    pub bound: OnceLock<(u64, Arc<TaskSlot>)>,
}

/// A task with implementations per unit kind; `A` is what one call takes,
/// `R` what it returns.
pub struct Task<A, R> {
    pub(crate) def: Arc<TaskDef<A, R>>,
}

impl<A, R> Clone for Task<A, R> {
    fn clone(&self) -> Self {
        Task {
            def: Arc::clone(&self.def),
        }
    }
}

impl<A, R> std::fmt::Debug for Task<A, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("name", &self.def.name)
            .field("cpu", &self.def.cpu.is_some())
            .field(
                "emulated",
                &self
                    .def
                    .emulated
                    .iter()
                    .map(|e| &e.kind)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<A: Send + 'static, R: Send + 'static> Task<A, R> {
    /// A task with no implementation yet. The name keys its model.
    pub fn new(name: impl Into<String>) -> Self {
        Task {
            def: Arc::new(TaskDef {
                name: name.into(),
                cpu: None,
                emulated: Vec::new(),
                devices: Vec::new(),
                sizes: None,
                data: None,
                model: None,
                bound: OnceLock::new(),
            }),
        }
    }

    /// Changes the definition. Builder calls come before the task is first
    /// run, so the task is not shared yet and no clone happens.
    fn edit(mut self, f: impl FnOnce(&mut TaskDef<A, R>)) -> Self {
        match Arc::get_mut(&mut self.def) {
            Some(def) => f(def),
            None => {
                let old = &self.def;
                let mut def = TaskDef {
                    name: old.name.clone(),
                    cpu: old.cpu.clone(),
                    emulated: old.emulated.clone(),
                    devices: old.devices.clone(),
                    sizes: old.sizes.clone(),
                    data: old.data.clone(),
                    model: old.model.clone(),
                    bound: OnceLock::new(),
                };
                f(&mut def);
                self.def = Arc::new(def);
            }
        }
        self
    }

    /// The implementation on CPU cores (any CPU kind).
    pub fn cpu(self, f: impl Fn(&A) -> R + Send + Sync + 'static) -> Self {
        self.cpu_parallel(move |a, _| f(a))
    }

    /// A CPU implementation that may split its work over
    /// [`CpuCtx::cores`] threads.
    pub fn cpu_parallel(self, f: impl Fn(&A, &CpuCtx) -> R + Send + Sync + 'static) -> Self {
        self.edit(|d| d.cpu = Some(Arc::new(f)))
    }

    /// The implementation on emulated devices of unit kind `kind` (the
    /// `kind` of an `[[emulated]]` unit in the monitor's config): `cost` is
    /// the device's execution time for these arguments, `kernel` computes
    /// the result (see the module docs of [`crate::task`]).
    pub fn emulated(
        self,
        kind: impl Into<String>,
        cost: impl Fn(&A) -> Duration + Send + Sync + 'static,
        kernel: impl Fn(&A) -> R + Send + Sync + 'static,
    ) -> Self {
        let imp = EmulatedImpl {
            kind: kind.into(),
            cost: Arc::new(cost),
            kernel: Arc::new(kernel),
        };
        self.edit(|d| {
            d.emulated.retain(|e| e.kind != imp.kind);
            d.emulated.push(imp);
        })
    }

    /// The implementation on the devices of device backend `api`
    /// ([`crate::device_backend::DeviceBackend::api`]; OpenCL's and
    /// CUDA's have their own builders, [`Task::opencl`] and
    /// [`Task::cuda`]). `f` gets the device as that backend's runner
    /// hands it, `&D`, and does its own copies and launches.
    pub fn on_device<D: 'static>(
        self,
        api: &'static str,
        f: impl Fn(&D, &A) -> Result<R, String> + Send + Sync + 'static,
    ) -> Self {
        let run: DeviceFn<A, R> = Arc::new(move |device: &dyn Any, a: &A| {
            match device.downcast_ref::<D>() {
                Some(d) => f(d, a),
                None => Err(format!(
                    "the {api} implementation takes another type of device than its backend runs"
                )),
            }
        });
        self.edit(|d| {
            d.devices.retain(|i| i.api != api);
            d.devices.push(DeviceImpl { api, run });
        })
    }

    /// Input and output bytes of one call: the task model's variable and
    /// what copies to and from a device cost. Without it both are 0.
    pub fn sizes(self, f: impl Fn(&A) -> (u64, u64) + Send + Sync + 'static) -> Self {
        self.edit(|d| d.sizes = Some(Arc::new(f)))
    }

    /// The buffer a call works on in place: its contents stay on the unit
    /// the call ran on, the next call there needs no copy, and placement
    /// weighs moving it (Rinnegan's speedup threshold and aggregation).
    /// Report the buffer's size as the call's input bytes in [`Task::sizes`].
    pub fn data(self, f: impl Fn(&A) -> Buffer + Send + Sync + 'static) -> Self {
        self.edit(|d| d.data = Some(Arc::new(f)))
    }

    /// Replaces the learned model with the application's own: given a unit
    /// kind name and the input bytes, the execution time (or `None` when
    /// it cannot tell, which makes the runtime profile that kind).
    pub fn model(self, f: impl Fn(&str, u64) -> Option<Duration> + Send + Sync + 'static) -> Self {
        self.edit(|d| d.model = Some(Arc::new(f)))
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }
}
