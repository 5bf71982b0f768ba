//! Kernels on served units: checking kernel rings and calls, what each
//! call costs, registering clients' kernels and what the executors
//! report back.

use super::*;

impl Monitor {
    /// The index of `unit` if `client` is an application and the daemon
    /// runs kernels on `unit` for clients.
    pub(super) fn kernel_unit(&self, client: ClientId, unit: UnitId) -> Result<usize, Refusal> {
        self.application(client)?;
        let u = self.unit_index(unit)?;
        let setup = &self.agents[u].setup;
        if setup.kernels.is_empty() {
            return Err((
                ErrorCode::NotEmulated,
                format!(
                    "unit {} runs no kernels for clients; units that do list them in `hetsched units`",
                    setup.unit.name
                ),
            ));
        }
        Ok(u)
    }

    /// Whether `client` may have a kernel ring with a data region of
    /// `region_bytes` on `unit`: an application, a unit the daemon runs
    /// kernels on, and a region size in bounds.
    pub fn check_kernel_ring(
        &self,
        client: ClientId,
        unit: UnitId,
        region_bytes: u64,
    ) -> Result<(), Refusal> {
        self.kernel_unit(client, unit)?;
        let max = self.cfg.max_region_bytes;
        if region_bytes == 0 || region_bytes % 8 != 0 || region_bytes > max {
            return Err((
                ErrorCode::BadKernelCall,
                format!(
                    "a data region of {region_bytes} bytes: it must be a multiple of 8, at most {max} (max_region_mb)"
                ),
            ));
        }
        Ok(())
    }

    /// A kernel call from a client's ring, checked against `region`.
    pub fn submit_kernel(
        &mut self,
        client: ClientId,
        unit: UnitId,
        call: KernelCall,
        region: Arc<DataRegion>,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), Refusal> {
        let u = self.admit(client, unit)?;
        self.stir(client, now);
        let task = call.task;
        let runs = match call.kernel {
            Kernel::User(id) => self.user_kernels.signature(client, unit, id).is_ok(),
            k => self.agents[u].setup.kernels.contains(&k),
        };
        if !runs {
            return Err((
                ErrorCode::BadKernelCall,
                format!(
                    "unit {} does not run {} for this client",
                    self.agents[u].setup.unit.name, call.kernel
                ),
            ));
        }
        let per_unit = self
            .kernel_costs
            .get(&(u, call.kernel))
            .copied()
            .unwrap_or(KERNEL_COST_PRIOR_NS_PER_BYTE);
        let expected = per_unit * call.work() as f64;
        self.agents[u]
            .submit_kernel(client, QueuedKernel { call, region }, expected, now, out)
            .map_err(|r| refusal(r, task))
    }

    /// The executor of `unit` finished `call` after `ran_ns` of its own
    /// time; the agent charges the slot and tells the client.
    #[allow(clippy::too_many_arguments)]
    pub fn kernel_done(
        &mut self,
        unit: UnitId,
        client: ClientId,
        call: &KernelCall,
        ran_ns: u64,
        result: Result<(), String>,
        now: Ns,
        out: &mut Outbox,
    ) {
        let Ok(u) = self.unit_index(unit) else {
            return;
        };
        let mut result = result;
        if let (Kernel::User(id), true) = (call.kernel, ran_ns > self.cfg.max_device_ns) {
            // A kernel that overran was killed with its executor (which
            // says so), or ran to its end just past the limit: either way
            // it will not run again for this client.
            self.user_kernels.revoke(client, unit, id);
            result = result.and_then(|()| {
                Err(format!(
                    "{id} ran {:.3} s, over max_device_seconds ({:.3} s): it is revoked for this \
                 client (register it again to call it)",
                    ran_ns as f64 / 1e9,
                    self.cfg.max_device_ns as f64 / 1e9
                ))
            });
        }
        if result.is_ok() {
            let measured = ran_ns as f64 / call.work().max(1) as f64;
            self.kernel_costs
                .entry((u, call.kernel))
                .and_modify(|c| *c += KERNEL_COST_ALPHA * (measured - *c))
                .or_insert(measured);
        }
        self.stir(client, now);
        // Unknown only if the call was never started here: nothing to free.
        let _ = self.agents[u].complete_kernel(client, call.task, result, now, out);
    }

    /// Whether `client` may register kernel `entry` (of `source_bytes`) with
    /// `unit`: a user `kernel_users` or `kernel_groups` name (or root), an
    /// application, a unit the daemon runs kernels on, a source within
    /// `[kernels] max_source_kb`, and room under the client's
    /// `max_per_client`. The unit's executor then builds it
    /// ([`Monitor::kernel_registered`]).
    pub fn check_register_kernel(
        &self,
        client: ClientId,
        unit: UnitId,
        source_bytes: usize,
        entry: &str,
    ) -> Result<(), Refusal> {
        let entry_of = self.application(client)?;
        let policy = &self.cfg.kernels;
        if !policy.allows(&entry_of.peer) {
            return Err((
                ErrorCode::NotPermitted,
                format!(
                    "user {} may not register kernels with the daemon's units: the daemon's \
                     config names who may (kernel_users, kernel_groups; root always may)",
                    entry_of.peer.uid
                ),
            ));
        }
        self.kernel_unit(client, unit)?;
        let bad = |m: String| Err((ErrorCode::KernelBuildFailed, m));
        let max_source = policy.limits.max_source_bytes.min(MAX_SOURCE_BYTES);
        if source_bytes == 0 || source_bytes > max_source {
            return bad(format!(
                "a kernel source of {source_bytes} bytes: it must be 1..={max_source} \
                 ([kernels] max_source_kb)"
            ));
        }
        // A kernel name, or for CUDA units a declaration of its kinds.
        hetsched_protocol::user_kernel::check_entry(entry).or_else(bad)?;
        let max = policy.limits.max_per_client;
        if self.user_kernels.count(client) >= max {
            return bad(format!(
                "this client has {max} kernels registered already (the limit, [kernels] \
                 max_per_client)"
            ));
        }
        Ok(())
    }

    /// The user `client` runs as, and its group: its kernels run in that
    /// user's executor. `None` once it left.
    pub fn client_user(&self, client: ClientId) -> Option<(u32, u32)> {
        self.clients.get(&client).map(|c| (c.peer.uid, c.peer.gid))
    }

    /// The executor that built `clients`' kernels on `unit` ended: they
    /// may call them no more (until they register them again).
    pub fn kernel_executor_lost(&mut self, unit: UnitId, clients: &[ClientId]) {
        for &c in clients {
            self.user_kernels.revoke_unit(c, unit);
        }
    }

    /// The executor of `unit` built (or failed to build) `client`'s kernel
    /// `entry`, in `build_ns`: records it, charges the build to the
    /// client's share of the unit, and answers the client, if it is still
    /// here.
    #[allow(clippy::too_many_arguments)]
    pub fn kernel_registered(
        &mut self,
        unit: UnitId,
        client: ClientId,
        entry: &str,
        result: Result<crate::user_kernels::Registered, String>,
        build_ns: u64,
        now: Ns,
        out: &mut Outbox,
    ) {
        if !self.clients.contains_key(&client) {
            return;
        }
        if let Ok(u) = self.unit_index(unit) {
            self.agents[u].charge(client, build_ns, now);
        }
        match result {
            Ok(r) => {
                self.user_kernels
                    .add(unit, client, r.id, r.signature.clone());
                out.push(
                    client,
                    DaemonMsg::KernelRegistered {
                        unit,
                        kernel: r.id,
                        signature: r.signature,
                        build_log: r.log,
                        cached: r.cached,
                    },
                );
            }
            Err(message) => out.push(
                client,
                DaemonMsg::Error {
                    code: ErrorCode::KernelBuildFailed,
                    message: format!("kernel `{entry}` is not registered: {message}"),
                    task: None,
                },
            ),
        }
    }

    /// The signature of registered kernel `kernel` on `unit`, if `client`
    /// may call it.
    pub fn user_kernel_signature(
        &self,
        client: ClientId,
        unit: UnitId,
        kernel: UserKernelId,
    ) -> Result<Arc<KernelSignature>, KernelCallError> {
        self.user_kernels.signature(client, unit, kernel)
    }
}
