//! One agent per unit: it owns the unit's policy, its slots (streams of a
//! device, cores of a time-shared CPU kind), the requests waiting for a
//! slot and the work holding one. Agents never talk to sockets; they
//! return what must be told to whom through an [`Outbox`].

use crate::metrics::ledger::{UnitServed, WaitHistogram};
use crate::outbox::{KernelStart, Outbox, QueuedKernel};
use hetsched_core::ids::{ClientId, Ns, TaskId, UnitId};
use hetsched_core::policy::{PolicyKind, Request, ShareClass, UnitPolicy};
use hetsched_core::unit::Unit;
use hetsched_protocol::kernel_call::Kernel;
use hetsched_protocol::{DaemonMsg, ErrorCode, UnitInfo};
use std::collections::HashMap;

/// How a unit is set up when the daemon starts.
#[derive(Clone, Debug)]
pub struct UnitSetup {
    pub unit: Unit,
    pub kind_name: String,
    pub policy: PolicyKind,
    /// The daemon executes work for it (an emulated device).
    pub emulated: bool,
    /// Kernels the daemon runs on it for clients (a served device, see
    /// [`crate::kernel_exec`]); empty for other units.
    pub kernels: Vec<Kernel>,
    /// OS CPU numbers of a CPU kind; empty for other units.
    pub pus: Vec<u32>,
    /// Throttling cgroup of an emulated slow CPU kind.
    pub throttle: Option<std::path::PathBuf>,
}

impl UnitSetup {
    /// The set-up a unit was announced with: how a monitor that takes over
    /// from another (the runtime's embedded one) gets the same units.
    pub fn from_info(info: &UnitInfo) -> UnitSetup {
        UnitSetup {
            unit: info.to_unit(hetsched_core::ids::KindId(0)),
            kind_name: info.kind.clone(),
            policy: info.policy,
            emulated: info.emulated,
            kernels: info
                .kernels
                .iter()
                .filter_map(|k| Kernel::from_name(k))
                .collect(),
            pus: info.pus.clone(),
            throttle: info.throttle.as_ref().map(std::path::PathBuf::from),
        }
    }

    pub fn info(&self) -> UnitInfo {
        let u = &self.unit;
        UnitInfo {
            emulated: self.emulated,
            kernels: self.kernels.iter().map(|k| k.name().to_string()).collect(),
            pus: self.pus.clone(),
            throttle: self.throttle.as_ref().map(|p| p.display().to_string()),
            ..UnitInfo::from_unit(u, self.kind_name.clone(), self.policy)
        }
    }
}

/// What a request will do with its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// The client runs the task itself once granted (dispatch gate).
    Gate,
    /// The daemon holds a stream for this long (copy-in + exec + copy-out
    /// + dispatch), then reports completion.
    Device { hold_ns: Ns },
    /// A kernel call the unit's executor runs; it holds the slot until
    /// the executor reports back ([`Agent::complete_kernel`]).
    Kernel,
    /// A time-slice lease: the client launches freely for `lease_ns`,
    /// then drains and releases it as it would a gate task. Charged, like
    /// a gate task, the wall time from grant to release.
    Lease { lease_ns: Ns },
}

impl Work {
    /// Work the client runs itself and ends with `TaskCompleted`.
    fn client_driven(self) -> bool {
        matches!(self, Work::Gate | Work::Lease { .. })
    }
}

#[derive(Clone, Debug)]
struct Waiting {
    work: Work,
    submitted_at: Ns,
    /// The call, for `Work::Kernel`; handed to the executor at dispatch.
    call: Option<QueuedKernel>,
}

#[derive(Clone, Copy, Debug)]
struct Holding {
    work: Work,
    submitted_at: Ns,
    started_at: Ns,
    /// The client left; the slot frees when the work ends, and nobody is told.
    orphaned: bool,
    /// A lease whose holder was told that others wait (`LeaseDue`).
    told_due: bool,
}

impl Holding {
    /// When the daemon takes back a slot the client holds itself (a gate
    /// task or a lease) under hold limit `limit`.
    fn revoke_at(&self, limit: Option<Ns>) -> Option<Ns> {
        match (self.work.client_driven() && !self.orphaned, limit) {
            (true, Some(limit)) => Some(self.started_at.saturating_add(limit)),
            _ => None,
        }
    }

    fn finish_at(&self) -> Option<Ns> {
        match self.work {
            Work::Device { hold_ns } => Some(self.started_at + hold_ns),
            Work::Gate | Work::Kernel | Work::Lease { .. } => None,
        }
    }
}

/// Per-client counters on one unit.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientUse {
    /// Requests waiting or holding a slot.
    pub outstanding: u32,
    /// Slot time charged, ns.
    pub busy_ns: u64,
    /// Requests that finished (their slot time is in `busy_ns`).
    pub completed: u64,
    /// How long its requests waited for a slot.
    pub wait: WaitHistogram,
}

impl ClientUse {
    /// Its counters, as `/metrics` adds them up.
    pub fn served(&self) -> UnitServed {
        UnitServed {
            tasks: self.completed,
            busy_ns: self.busy_ns,
            wait: self.wait,
        }
    }
}

#[derive(Debug)]
pub struct Agent {
    pub setup: UnitSetup,
    policy: Box<dyn UnitPolicy>,
    free_slots: u32,
    waiting: HashMap<(ClientId, TaskId), Waiting>,
    holding: HashMap<(ClientId, TaskId), Holding>,
    uses: HashMap<ClientId, ClientUse>,
    busy_ns_total: u64,
    /// Requests that finished here, whoever sent them.
    tasks_total: u64,
    /// Longest a client may hold a slot it drives itself (gate task,
    /// lease) before the daemon takes it back; `None`: no limit.
    hold_limit_ns: Option<Ns>,
    /// Slots taken back since the daemon started.
    revoked_total: u64,
}

/// Why an agent refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentRefusal {
    Duplicate,
    UnknownTask,
}

impl Agent {
    /// Requests of `client` waiting or holding a slot here.
    pub fn outstanding_of(&self, client: ClientId) -> u32 {
        self.uses.get(&client).map_or(0, |u| u.outstanding)
    }

    /// `anticipation_ns`: the policy's anticipation window, if not its
    /// default.
    pub fn new(setup: UnitSetup, anticipation_ns: Option<Ns>) -> Agent {
        let slots = setup.unit.slots.max(1);
        let mut policy = setup.policy.build(slots);
        if let Some(ns) = anticipation_ns {
            policy.set_anticipation_ns(ns);
        }
        Agent {
            policy,
            free_slots: slots,
            setup,
            waiting: HashMap::new(),
            holding: HashMap::new(),
            uses: HashMap::new(),
            busy_ns_total: 0,
            tasks_total: 0,
            hold_limit_ns: None,
            revoked_total: 0,
        }
    }

    /// Sets the hold limit ([`Agent::revoke_overdue`]).
    pub fn set_hold_limit(&mut self, limit: Option<Ns>) {
        self.hold_limit_ns = limit.map(|l| l.max(1));
    }

    pub fn hold_limit_ns(&self) -> Option<Ns> {
        self.hold_limit_ns
    }

    /// Slots taken back past the hold limit since the daemon started.
    pub fn revoked_total(&self) -> u64 {
        self.revoked_total
    }

    pub fn id(&self) -> UnitId {
        self.setup.unit.id
    }

    pub fn policy(&self) -> &dyn UnitPolicy {
        self.policy.as_ref()
    }

    pub fn policy_mut(&mut self) -> &mut dyn UnitPolicy {
        self.policy.as_mut()
    }

    /// A time-shared unit admits everything; the kernel interleaves it.
    fn time_shared(&self) -> bool {
        self.setup.policy == PolicyKind::TimeShare
    }

    pub fn use_of(&self, client: ClientId) -> ClientUse {
        self.uses.get(&client).copied().unwrap_or_default()
    }

    pub fn busy_ns_total(&self) -> u64 {
        self.busy_ns_total
    }

    pub fn tasks_total(&self) -> u64 {
        self.tasks_total
    }

    /// Waiting requests by class (CUSTOM, NORMAL, BACKGROUND), given each
    /// client's class on this unit.
    pub fn queued_by_class(&self, class_of: impl Fn(ClientId) -> ShareClass) -> [u32; 3] {
        let mut out = [0u32; 3];
        for (client, _) in self.waiting.keys() {
            let i = match class_of(*client) {
                ShareClass::Custom { .. } => 0,
                ShareClass::Normal { .. } => 1,
                ShareClass::Background => 2,
            };
            out[i] += 1;
        }
        out
    }

    /// Queues a request, then dispatches whatever the policy lets run.
    pub fn submit(
        &mut self,
        client: ClientId,
        task: TaskId,
        expected_ns: f64,
        work: Work,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), AgentRefusal> {
        self.submit_with(client, task, expected_ns, work, None, now, out)
    }

    /// Queues a kernel call for the unit's executor.
    pub fn submit_kernel(
        &mut self,
        client: ClientId,
        call: QueuedKernel,
        expected_ns: f64,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), AgentRefusal> {
        let task = call.call.task;
        self.submit_with(
            client,
            task,
            expected_ns,
            Work::Kernel,
            Some(call),
            now,
            out,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn submit_with(
        &mut self,
        client: ClientId,
        task: TaskId,
        expected_ns: f64,
        work: Work,
        call: Option<QueuedKernel>,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<(), AgentRefusal> {
        let key = (client, task);
        if self.waiting.contains_key(&key) || self.holding.contains_key(&key) {
            return Err(AgentRefusal::Duplicate);
        }
        self.waiting.insert(
            key,
            Waiting {
                work,
                submitted_at: now,
                call,
            },
        );
        self.uses.entry(client).or_default().outstanding += 1;
        self.policy.submit(
            Request {
                client,
                task,
                expected_ns,
                submitted_at: now,
            },
            now,
        );
        self.dispatch(now, out);
        if self.waiting.contains_key(&key) {
            // Still waiting: say so, with how much is ahead of it.
            let ahead = self.waiting.len().saturating_sub(1) as u32;
            out.push(
                client,
                DaemonMsg::Delayed {
                    unit: self.id(),
                    task,
                    queued_ahead: ahead,
                },
            );
        }
        Ok(())
    }

    /// While requests wait, every lease holder not yet told is told
    /// (`LeaseDue`, once per lease): it keeps the lease to its end, then
    /// lets its work drain and gives it back instead of extending it.
    fn tell_lease_holders(&mut self, out: &mut Outbox) {
        if self.waiting.is_empty() {
            return;
        }
        let unit = self.id();
        for (&(client, task), h) in self.holding.iter_mut() {
            if matches!(h.work, Work::Lease { .. }) && !h.told_due && !h.orphaned {
                h.told_due = true;
                out.push(client, DaemonMsg::LeaseDue { unit, task });
            }
        }
    }

    /// Hands free slots to whatever the policy picks.
    pub fn dispatch(&mut self, now: Ns, out: &mut Outbox) {
        while self.time_shared() || self.free_slots > 0 {
            let Some(req) = self.policy.pick_next(now) else {
                break;
            };
            let key = (req.client, req.task);
            let Some(w) = self.waiting.remove(&key) else {
                // The policy and the agent disagree; the request is gone
                // (its client left). Nothing to run.
                continue;
            };
            if !self.time_shared() {
                self.free_slots -= 1;
            }
            if let Some(u) = self.uses.get_mut(&req.client) {
                u.wait.observe(now.saturating_sub(w.submitted_at));
            }
            self.holding.insert(
                key,
                Holding {
                    work: w.work,
                    submitted_at: w.submitted_at,
                    started_at: now,
                    orphaned: false,
                    told_due: false,
                },
            );
            match (w.work, w.call) {
                (Work::Gate, _) => out.push(
                    req.client,
                    DaemonMsg::Granted {
                        unit: self.id(),
                        task: req.task,
                        waited_ns: now - w.submitted_at,
                    },
                ),
                (Work::Lease { lease_ns }, _) => out.push(
                    req.client,
                    DaemonMsg::LeaseGranted {
                        unit: self.id(),
                        task: req.task,
                        waited_ns: now - w.submitted_at,
                        lease_ns,
                    },
                ),
                (Work::Kernel, Some(call)) => out.start_kernel(KernelStart {
                    unit: self.id(),
                    client: req.client,
                    call,
                }),
                _ => {}
            }
        }
        self.tell_lease_holders(out);
    }

    /// A gate task finished. The client is charged the wall time it held
    /// the slot, whatever it claims to have run (a lying client gains
    /// nothing by under-reporting).
    pub fn complete_gate(
        &mut self,
        client: ClientId,
        task: TaskId,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<Ns, AgentRefusal> {
        let key = (client, task);
        match self.holding.get(&key) {
            Some(h) if h.work.client_driven() => {}
            _ => return Err(AgentRefusal::UnknownTask),
        }
        let h = self.holding.remove(&key).expect("checked above");
        let held = now - h.started_at;
        self.release(client, held, h.orphaned, now);
        self.dispatch(now, out);
        Ok(held)
    }

    /// The executor finished kernel call `task` (`result`: whether it
    /// ran). The client is charged the wall time its call held the unit,
    /// from dispatch to now, and told: `DeviceDone` with its output in its
    /// region, or an error naming the task. Unknown calls are refused.
    pub fn complete_kernel(
        &mut self,
        client: ClientId,
        task: TaskId,
        result: Result<(), String>,
        now: Ns,
        out: &mut Outbox,
    ) -> Result<Ns, AgentRefusal> {
        let key = (client, task);
        match self.holding.get(&key) {
            Some(h) if h.work == Work::Kernel => {}
            _ => return Err(AgentRefusal::UnknownTask),
        }
        let h = self.holding.remove(&key).expect("checked above");
        let held = now.saturating_sub(h.started_at);
        self.release(client, held, h.orphaned, now);
        if !h.orphaned {
            let msg = match result {
                Ok(()) => DaemonMsg::DeviceDone {
                    unit: self.id(),
                    task,
                    waited_ns: h.started_at - h.submitted_at,
                    ran_ns: held,
                },
                Err(why) => DaemonMsg::Error {
                    code: ErrorCode::BadKernelCall,
                    message: format!(
                        "kernel call {} failed on {}: {why}",
                        task.0, self.setup.unit.name
                    ),
                    task: Some(task),
                },
            };
            out.push(client, msg);
        }
        self.dispatch(now, out);
        Ok(held)
    }

    /// Charges `client` `ns` of this unit's time that took no slot (a
    /// build of a kernel it registered): its share's usage and its busy
    /// time grow, as for a task of that length.
    pub fn charge(&mut self, client: ClientId, ns: Ns, now: Ns) {
        self.policy.charge(client, ns, now);
        self.busy_ns_total += ns;
        if let Some(u) = self.uses.get_mut(&client) {
            u.busy_ns += ns;
        }
    }

    fn release(&mut self, client: ClientId, held: Ns, orphaned: bool, now: Ns) {
        self.policy.complete(client, held, now);
        if !self.time_shared() {
            self.free_slots += 1;
        }
        self.busy_ns_total += held;
        self.tasks_total += 1;
        if !orphaned {
            let u = self.uses.entry(client).or_default();
            u.outstanding = u.outstanding.saturating_sub(1);
            u.busy_ns += held;
            u.completed += 1;
        }
    }

    /// Takes back every slot a client has held itself past the hold
    /// limit: the client is charged the whole time it held it, as if it
    /// had completed now, and told (`WorkTooLong`, naming the task); the
    /// slot goes to whoever the policy picks next. A later
    /// `TaskCompleted` for that task is refused as unknown.
    pub fn revoke_overdue(&mut self, now: Ns, out: &mut Outbox) {
        let limit = self.hold_limit_ns;
        let due: Vec<((ClientId, TaskId), Holding)> = self
            .holding
            .iter()
            .filter(|(_, h)| h.revoke_at(limit).is_some_and(|r| r <= now))
            .map(|(k, h)| (*k, *h))
            .collect();
        if due.is_empty() {
            return;
        }
        let limit_ms = limit.unwrap_or_default() as f64 / 1e6;
        for ((client, task), h) in due {
            self.holding.remove(&(client, task));
            let held = now.saturating_sub(h.started_at);
            self.release(client, held, false, now);
            self.revoked_total += 1;
            let what = match h.work {
                Work::Lease { .. } => "lease",
                _ => "slot",
            };
            out.push(
                client,
                DaemonMsg::Error {
                    code: ErrorCode::WorkTooLong,
                    message: format!(
                        "task {} held its {what} of unit {} for {:.0} ms, past the unit's hold \
                         limit of {limit_ms:.0} ms: the {what} was taken back and the time charged",
                        task.0,
                        self.setup.unit.name,
                        held as f64 / 1e6,
                    ),
                    task: Some(task),
                },
            );
        }
        self.dispatch(now, out);
    }

    /// Ends device work whose time is up, reporting to its clients, and
    /// takes back slots held past the hold limit ([`Agent::revoke_overdue`]).
    pub fn finish_due(&mut self, now: Ns, out: &mut Outbox) {
        self.revoke_overdue(now, out);
        let due: Vec<((ClientId, TaskId), Holding)> = self
            .holding
            .iter()
            .filter(|(_, h)| h.finish_at().is_some_and(|f| f <= now))
            .map(|(k, h)| (*k, *h))
            .collect();
        if due.is_empty() {
            return;
        }
        for ((client, task), h) in due {
            self.holding.remove(&(client, task));
            let hold = h.finish_at().expect("device work") - h.started_at;
            self.release(client, hold, h.orphaned, now);
            if !h.orphaned {
                out.push(
                    client,
                    DaemonMsg::DeviceDone {
                        unit: self.id(),
                        task,
                        waited_ns: h.started_at - h.submitted_at,
                        ran_ns: hold,
                    },
                );
            }
        }
        self.dispatch(now, out);
    }

    /// Earliest instant something needs the agent: device work ending, or
    /// held-back requests becoming eligible.
    pub fn next_deadline(&self, now: Ns) -> Option<Ns> {
        let limit = self.hold_limit_ns;
        let finish = self
            .holding
            .values()
            .filter_map(|h| match (h.finish_at(), h.revoke_at(limit)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            })
            .min();
        // A held-back request can only start in a free slot; while every
        // slot is held, the next completion dispatches instead. (Without
        // this, a policy whose slot ran out while a kernel call still runs
        // would ask for a retry at `now` over and over.)
        let retry = if self.waiting.is_empty() || (!self.time_shared() && self.free_slots == 0) {
            None
        } else {
            self.policy.retry_at(now)
        };
        match (finish, retry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Forgets a client: its waiting requests go, its gate grants are
    /// released now, its device work runs out (devices cannot be
    /// preempted) with nobody told.
    pub fn remove_client(&mut self, client: ClientId, now: Ns, out: &mut Outbox) {
        self.policy.remove_client(client, now);
        self.waiting.retain(|(c, _), _| *c != client);
        let gates: Vec<(ClientId, TaskId)> = self
            .holding
            .iter()
            .filter(|((c, _), h)| *c == client && h.work.client_driven())
            .map(|(k, _)| *k)
            .collect();
        for key in gates {
            let h = self.holding.remove(&key).expect("listed above");
            self.release(client, now - h.started_at, true, now);
        }
        for ((c, _), h) in self.holding.iter_mut() {
            if *c == client {
                h.orphaned = true;
            }
        }
        self.uses.remove(&client);
        self.dispatch(now, out);
    }

    pub fn tick(&mut self, now: Ns, out: &mut Outbox) {
        self.policy.tick(now);
        self.dispatch(now, out);
    }
}
