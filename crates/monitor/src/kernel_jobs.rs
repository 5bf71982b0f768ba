//! Where each served unit's executor ([`crate::kernel_exec`]) takes its
//! jobs: one queue per unit, made when the server is bound, before any
//! thread starts, and never changed after. It needs no lock: the threads
//! share the queues' sending ends.

use crate::kernel_exec::{ExecJob, KernelBackend, SandboxSpec, Sandboxes, ServedBackend};
use hetsched_core::ids::{ClientId, UnitId};
use std::collections::HashMap;
use std::sync::mpsc::{Receiver, Sender, channel};

/// The sending ends, by unit.
#[derive(Default)]
pub(crate) struct KernelJobs {
    queues: HashMap<UnitId, Sender<ExecJob>>,
}

/// An executor not started yet: its unit, its device, the executor
/// processes of its registered kernels (none running yet) and its queue.
pub(crate) struct Executor {
    pub unit: UnitId,
    pub backend: Box<dyn KernelBackend>,
    pub sandboxes: Sandboxes,
    pub jobs: Receiver<ExecJob>,
}

impl KernelJobs {
    /// One queue for each served unit, and the executors that will take
    /// from them; `name` gives a unit's name, `sandbox` how registered
    /// kernels' executor processes start.
    pub fn new(
        backends: Vec<ServedBackend>,
        name: impl Fn(UnitId) -> String,
        sandbox: &SandboxSpec,
    ) -> (KernelJobs, Vec<Executor>) {
        let mut queues = HashMap::new();
        let mut executors = Vec::new();
        for (unit, backend) in backends {
            let (tx, rx) = channel();
            queues.insert(unit, tx);
            let sandboxes = Sandboxes::new(name(unit), backend.device_spec(), sandbox.clone());
            executors.push(Executor {
                unit,
                backend,
                sandboxes,
                jobs: rx,
            });
        }
        (KernelJobs { queues }, executors)
    }

    /// Whether `unit` has an executor (it may have stopped since).
    pub fn serves(&self, unit: UnitId) -> bool {
        self.queues.contains_key(&unit)
    }

    /// Queues `job` for `unit`'s executor; gives it back when the unit has
    /// none or it has ended.
    pub fn send(&self, unit: UnitId, job: ExecJob) -> Result<(), ExecJob> {
        match self.queues.get(&unit) {
            Some(tx) => tx.send(job).map_err(|e| e.0),
            None => Err(job),
        }
    }

    /// Tells every executor that `client` left.
    pub fn forget(&self, client: ClientId) {
        for tx in self.queues.values() {
            let _ = tx.send(ExecJob::Forget(client));
        }
    }

    /// Asks every executor to end once the jobs queued before are done.
    pub fn stop(&self) {
        for tx in self.queues.values() {
            let _ = tx.send(ExecJob::Stop);
        }
    }
}
