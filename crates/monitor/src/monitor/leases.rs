//! Unmodified programs under the agents: time-slice leases on the devices
//! they drive themselves, and what their interposer reports (the API it
//! sits on, the device memory they hold). The interposers themselves are
//! in `hetsched-intercept`.

use super::{Monitor, Refusal};
use crate::agent::Work;
use crate::outbox::Outbox;
use hetsched_core::ids::{ClientId, Ns, TaskId, UnitId};
use hetsched_core::policy::ShareClass;
use hetsched_protocol::{DaemonMsg, ErrorCode, InterceptApi};
use std::collections::BTreeMap;

/// What an intercepted program told the daemon about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterceptState {
    pub api: InterceptApi,
    /// The cap it runs under (the smaller of what it was started with and
    /// its class's `[device_memory]`), bytes.
    pub device_memory_limit: Option<u64>,
    /// Device memory it holds, by unit index, bytes.
    pub device_memory: BTreeMap<usize, u64>,
}

impl InterceptState {
    /// Device memory it holds on every unit together.
    pub fn device_memory_bytes(&self) -> u64 {
        self.device_memory
            .values()
            .fold(0, |a, b| a.saturating_add(*b))
    }
}

impl Monitor {
    /// `RequestLease`: a time-slice lease on a device the client drives
    /// itself. It waits in the unit's policy like a gate task; its length
    /// is the configured lease for CUSTOM and NORMAL clients and a quarter
    /// of it for BACKGROUND ones, which so give the device back sooner to
    /// whoever arrives.
    pub fn request_lease(
        &mut self,
        client: ClientId,
        unit: UnitId,
        task: TaskId,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), Refusal> {
        let u = self.admit(client, unit)?;
        let lease_ns = self.lease_ns(client, u);
        self.submit_client_driven(
            client,
            u,
            task,
            Work::Lease { lease_ns },
            lease_ns,
            now,
            out,
        )
    }

    /// The lease length `client` gets on unit index `u`, ns.
    pub fn lease_ns(&self, client: ClientId, u: usize) -> Ns {
        let base = self.cfg.lease_ns.max(1);
        match self.clients.get(&client).and_then(|c| c.settings.get(u)) {
            Some(s) if s.class == ShareClass::Background => (base / 4).max(1),
            _ => base,
        }
    }

    /// `Intercepted`: marks the client as an intercepted program of `api`
    /// and returns the device-memory cap it runs under: the smaller of
    /// `asked` and its class's cap (the strictest class it has on any
    /// unit).
    pub fn declare_intercepted(
        &mut self,
        client: ClientId,
        api: InterceptApi,
        asked: Option<u64>,
    ) -> Result<Option<u64>, Refusal> {
        self.application(client)?;
        let caps = self.cfg.device_memory;
        let entry = self.clients.get_mut(&client).expect("checked above");
        let by_class = entry
            .settings
            .iter()
            .filter_map(|s| match s.class {
                ShareClass::Custom { .. } => caps.custom,
                ShareClass::Normal { .. } => caps.normal,
                ShareClass::Background => caps.background,
            })
            .min();
        let limit = match (asked, by_class) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if limit == Some(0) {
            return Err((
                ErrorCode::InvalidSettings,
                "a device-memory cap of 0 bytes leaves the program nothing".into(),
            ));
        }
        let held = entry.intercept.take().map(|i| i.device_memory);
        entry.intercept = Some(InterceptState {
            api,
            device_memory_limit: limit,
            device_memory: held.unwrap_or_default(),
        });
        Ok(limit)
    }

    /// `SetDeviceMemory`: caps the device memory of the intercepted
    /// clients of process `pid` at `limit`, and tells each
    /// (`InterceptTerms`). Root or the admin group may set any cap; a user
    /// may only lower the cap of a process of their own.
    pub fn set_device_memory(
        &mut self,
        actor: ClientId,
        pid: u32,
        limit: u64,
        out: &mut Outbox,
    ) -> Result<DaemonMsg, Refusal> {
        let actor_peer = self
            .clients
            .get(&actor)
            .map(|c| c.peer.clone())
            .ok_or((ErrorCode::BadSequence, "say Hello first".to_string()))?;
        if limit == 0 {
            return Err((
                ErrorCode::InvalidSettings,
                "a device-memory cap of 0 bytes leaves the program nothing".into(),
            ));
        }
        let targets: Vec<ClientId> = self
            .clients
            .values()
            .filter(|c| c.peer.pid == pid && c.intercept.is_some())
            .map(|c| c.id)
            .collect();
        if targets.is_empty() {
            return Err((
                ErrorCode::UnknownClient,
                format!("no program under the OpenCL layer or the CUDA interposer has pid {pid}"),
            ));
        }
        if !actor_peer.is_admin(self.cfg.admin_gid) {
            for id in &targets {
                let c = &self.clients[id];
                let current = c.intercept.as_ref().and_then(|i| i.device_memory_limit);
                if c.peer.uid != actor_peer.uid {
                    return Err((
                        ErrorCode::NotPermitted,
                        "only root or the admin group may cap another user's process".into(),
                    ));
                }
                if current.is_none_or(|cur| limit > cur) {
                    return Err((
                        ErrorCode::NotPermitted,
                        "only root or the admin group may raise or add a device-memory cap; \
                         a user may lower one"
                            .into(),
                    ));
                }
            }
        }
        for id in targets {
            if let Some(state) = self.clients.get_mut(&id).and_then(|c| c.intercept.as_mut()) {
                state.device_memory_limit = Some(limit);
            }
            out.push(
                id,
                DaemonMsg::InterceptTerms {
                    device_memory_limit: Some(limit),
                },
            );
        }
        Ok(DaemonMsg::InterceptTerms {
            device_memory_limit: Some(limit),
        })
    }

    /// `DeviceMemory`: what an intercepted client holds on `unit` now.
    pub fn report_device_memory(
        &mut self,
        client: ClientId,
        unit: UnitId,
        bytes: u64,
    ) -> Result<(), Refusal> {
        self.application(client)?;
        let u = self.unit_index(unit)?;
        let entry = self.clients.get_mut(&client).expect("checked above");
        let Some(state) = entry.intercept.as_mut() else {
            return Err((
                ErrorCode::BadSequence,
                "only an intercepted program reports device memory (send Intercepted first)".into(),
            ));
        };
        if bytes == 0 {
            state.device_memory.remove(&u);
        } else {
            state.device_memory.insert(u, bytes);
        }
        Ok(())
    }
}
