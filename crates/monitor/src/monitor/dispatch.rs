//! Requests: admitting a client's task or device work under its limits
//! and accelerator binding, handing it to the unit's policy, and what
//! completes.

use super::*;

impl Monitor {
    pub(super) fn outstanding(&self, client: ClientId) -> u32 {
        self.agents
            .iter()
            .map(|a| a.use_of(client).outstanding)
            .sum()
    }

    pub(super) fn admit(&mut self, client: ClientId, unit: UnitId) -> Result<usize, Refusal> {
        self.application(client)?;
        let u = self.unit_index(unit)?;
        if self.cfg.accelerator_binding {
            self.check_binding(client, u)?;
        }
        if self.outstanding(client) >= self.cfg.max_outstanding {
            return Err((
                ErrorCode::TooManyOutstanding,
                format!(
                    "already {} requests outstanding (the limit); wait for some to finish",
                    self.cfg.max_outstanding
                ),
            ));
        }
        Ok(u)
    }

    /// Under `accelerator_binding`: a call on selectable unit `u` is
    /// admitted only from a client associated with `u`; a client with no
    /// association yet is associated with `u` if it has room for one more
    /// client (Pegasus associates a domain before it schedules it).
    pub(super) fn check_binding(&mut self, client: ClientId, u: usize) -> Result<(), Refusal> {
        let Some(limits) = self.accelerator_limits[u] else {
            return Ok(());
        };
        let name = |m: &Monitor, i: usize| m.agents[i].setup.unit.name.clone();
        match self.associations.get(&client) {
            Some(a) if a.unit == u => Ok(()),
            Some(a) => Err((
                ErrorCode::NotAssociated,
                format!(
                    "this client is associated with {}; accelerator_binding refuses its calls on {}",
                    name(self, a.unit),
                    name(self, u)
                ),
            )),
            None => {
                let clients = self.associations.values().filter(|a| a.unit == u).count();
                if clients >= limits.max_clients as usize {
                    return Err((
                        ErrorCode::NoAcceleratorFits,
                        format!(
                            "{} already has its {} associated clients (max_clients); \
                             select another accelerator first",
                            name(self, u),
                            limits.max_clients
                        ),
                    ));
                }
                self.associations.insert(
                    client,
                    Association {
                        unit: u,
                        memory_bytes: 0,
                    },
                );
                Ok(())
            }
        }
    }

    /// Whether `client` may have a call ring on `unit`: an application,
    /// and a unit the daemon serves itself.
    pub fn check_call_ring(&self, client: ClientId, unit: UnitId) -> Result<(), Refusal> {
        self.application(client)?;
        let u = self.unit_index(unit)?;
        if !self.agents[u].setup.kernels.is_empty() {
            return Err((
                ErrorCode::NotEmulated,
                format!(
                    "unit {} runs real kernels: open a kernel ring (OpenKernelRing) for it",
                    self.agents[u].setup.unit.name
                ),
            ));
        }
        if !self.agents[u].setup.emulated {
            return Err((
                ErrorCode::NotEmulated,
                format!(
                    "unit {} is not served by the daemon: a call ring needs an emulated unit",
                    self.agents[u].setup.unit.name
                ),
            ));
        }
        Ok(())
    }

    /// `RequestDispatch`: the dispatch gate.
    pub fn request_dispatch(
        &mut self,
        client: ClientId,
        unit: UnitId,
        task: TaskId,
        expected_ns: u64,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), Refusal> {
        let u = self.admit(client, unit)?;
        self.submit_client_driven(client, u, task, Work::Gate, expected_ns, now, out)
    }

    /// Queues work the client runs itself (a gate task or a lease) on
    /// unit index `u`, admitted already.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn submit_client_driven(
        &mut self,
        client: ClientId,
        u: usize,
        task: TaskId,
        work: Work,
        expected_ns: Ns,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), Refusal> {
        self.stir(client, now);
        self.agents[u]
            .submit(client, task, expected_ns as f64, work, now, out)
            .map_err(|r| refusal(r, task))
    }

    /// `TaskCompleted` for a granted task.
    pub fn task_completed(
        &mut self,
        client: ClientId,
        unit: UnitId,
        task: TaskId,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), Refusal> {
        self.application(client)?;
        let u = self.unit_index(unit)?;
        self.stir(client, now);
        self.agents[u]
            .complete_gate(client, task, now, out)
            .map(|_| ())
            .map_err(|r| refusal(r, task))
    }

    /// `SubmitDevice`: modelled work on an emulated device.
    #[allow(clippy::too_many_arguments)]
    pub fn submit_device(
        &mut self,
        client: ClientId,
        unit: UnitId,
        task: TaskId,
        exec_ns: u64,
        bytes_in: u64,
        bytes_out: u64,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), Refusal> {
        let u = self.admit(client, unit)?;
        self.stir(client, now);
        let setup = &self.agents[u].setup;
        if !setup.emulated {
            return Err((
                ErrorCode::NotEmulated,
                format!(
                    "unit {} is not emulated by the daemon; use the dispatch gate",
                    setup.unit.name
                ),
            ));
        }
        let hold = setup.unit.dispatch_ns as f64
            + setup.unit.copy_in_ns(bytes_in)
            + exec_ns as f64
            + setup.unit.copy_out_ns(bytes_out);
        if hold.is_nan() || hold > self.cfg.max_device_ns as f64 {
            return Err((
                ErrorCode::WorkTooLong,
                format!(
                    "device work of {:.3} s exceeds the {:.3} s limit per request",
                    hold / 1e9,
                    self.cfg.max_device_ns as f64 / 1e9
                ),
            ));
        }
        let hold_ns = hold.round() as Ns;
        self.agents[u]
            .submit(client, task, hold, Work::Device { hold_ns }, now, out)
            .map_err(|r| refusal(r, task))
    }
}
