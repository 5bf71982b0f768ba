//! One connection: its frames are read as they arrive (the reactor's
//! workers call [`ConnIo::on_readable`]), each message runs through the
//! monitor under the state lock, and on the way out (goodbye, EOF, a bad
//! frame, the handshake deadline, or being cut off for not reading)
//! [`ConnIo::close`] releases everything the client held.

use crate::config::Coordination;
use crate::demand_report::DemandReport;
use crate::kernel_exec::ExecJob;
use crate::monitor::{ProcessTable, Refusal};
use crate::outbox::Outbox;
use crate::privilege::Peer;
use crate::procfs;
use crate::server::{Conn, OpenRing, Shared, State};
use crate::store::ProcessKey;
use hetsched_core::ids::{ClientId, Ns, TaskId, UnitId};
use hetsched_protocol::{
    ClientMsg, DaemonMsg, ErrorCode, FrameReader, Role, SettingsRequest, decode_client,
    encode_frame, send_with_fds,
};
use hetsched_views::PrivateWriter;
use hetsched_views::call_ring::RingConsumer;
use hetsched_views::data_region::DataRegion;
use rustix::net::SendFlags;
use std::io::Read;
use std::os::fd::BorrowedFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

/// Longest client name kept (longer ones are cut).
const MAX_NAME_CHARS: usize = 64;

/// Bytes read from the socket at a time.
pub(crate) const READ_CHUNK: usize = 64 * 1024;
/// How long a new connection may take to say Hello before it is closed
/// (a connection that never speaks would otherwise hold its place for
/// ever).
pub(crate) const HANDSHAKE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// Sends one frame on a connection the state does not know (yet): the
/// refusals that end a connection before or at `Hello`.
fn send_now(stream: &UnixStream, msg: &DaemonMsg) {
    let frame = encode_frame(msg);
    let _ = rustix::net::send(stream, &frame, SendFlags::DONTWAIT | SendFlags::NOSIGNAL);
}

/// Who is at the other end: its credentials, and its ancestors as `/proc`
/// shows them, then those the fork log recorded (a process reparented to
/// init since: [`crate::fork_watch`]).
fn peer_of(
    stream: &UnixStream,
    forks: Option<&crate::fork_watch::ForkWatch>,
) -> std::io::Result<Peer> {
    let cred = rustix::net::sockopt::socket_peercred(stream)?;
    let pid = cred.pid.as_raw_nonzero().get() as u32;
    let start_time = procfs::start_time(pid).unwrap_or(0);
    let mut ancestors = procfs::ancestors(pid);
    if let Some(forks) = forks {
        for a in forks.ancestors(crate::store::ProcessKey { pid, start_time }) {
            if !ancestors.contains(&a) {
                ancestors.push(a);
            }
        }
    }
    Ok(Peer {
        pid,
        uid: cred.uid.as_raw(),
        gid: cred.gid.as_raw(),
        groups: procfs::groups(pid),
        start_time,
        ancestors,
    })
}

/// Whether a connection is still served after what it sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Served {
    /// Everything that arrived is handled; wait for more.
    Open,
    /// Goodbye, EOF, a bad frame or a cut-off: release it ([`ConnIo::close`]).
    Closed,
}

/// Most bytes read from one connection per readiness event, so that a
/// client that keeps sending cannot hold a worker from the others.
const READ_BUDGET: usize = 16 * READ_CHUNK;

/// One connection's reading side, from hello to goodbye (or death). It is
/// driven by the reactor ([`crate::server::reactor`]): [`ConnIo::on_readable`] when
/// the socket has bytes, [`ConnIo::close`] once it is done. An idle
/// connection is this struct and its socket, no thread.
pub(crate) struct ConnIo {
    stream: Arc<UnixStream>,
    peer: Peer,
    reader: FrameReader,
    client: Option<ClientId>,
    said_goodbye: bool,
    /// Its place under the connection limits, given back when it closes.
    _ticket: crate::admission::Admitted,
}

impl ConnIo {
    /// A connection just accepted (made non-blocking here).
    pub fn new(
        stream: UnixStream,
        ticket: crate::admission::Admitted,
        max_frame_bytes: usize,
        forks: Option<&crate::fork_watch::ForkWatch>,
    ) -> std::io::Result<ConnIo> {
        let peer = peer_of(&stream, forks)?;
        stream.set_nonblocking(true)?;
        Ok(ConnIo {
            stream: Arc::new(stream),
            peer,
            reader: FrameReader::new(max_frame_bytes),
            client: None,
            said_goodbye: false,
            _ticket: ticket,
        })
    }

    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }

    /// Said Hello (a connection that has not is closed after
    /// [`HANDSHAKE_DEADLINE`]).
    pub fn said_hello(&self) -> bool {
        self.client.is_some()
    }

    /// Ends the connection from outside (the handshake deadline): the
    /// reactor then sees it closed and releases it as usual.
    pub fn shut_down(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }

    /// Reads what has arrived (up to [`READ_BUDGET`]) and serves every
    /// whole frame, in order. `buf` is the worker's read buffer.
    pub fn on_readable(&mut self, shared: &Shared, buf: &mut [u8]) -> Served {
        let mut read = 0;
        while read < READ_BUDGET {
            let n = match (&*self.stream).read(buf) {
                Ok(0) => return Served::Closed,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Served::Open,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return Served::Closed,
            };
            read += n;
            self.reader.push(&buf[..n]);
            if self.serve_frames(shared) == Served::Closed {
                return Served::Closed;
            }
            if n < buf.len() {
                // Drained (almost surely): re-arming reports anything that
                // came meanwhile, without another read to find EAGAIN.
                return Served::Open;
            }
        }
        Served::Open
    }

    /// Serves the whole frames read so far.
    fn serve_frames(&mut self, shared: &Shared) -> Served {
        loop {
            let msg = match self.reader.next_payload().and_then(|p| match p {
                Some(p) => decode_client(&p).map(Some),
                None => Ok(None),
            }) {
                Ok(Some(msg)) => msg,
                Ok(None) => return Served::Open,
                Err(e) => {
                    // Framing is lost: say why and drop this client only.
                    tracing::info!(
                        client = self.client.map(|c| c.0),
                        pid = self.peer.pid,
                        "bad frame, closing the connection: {e}"
                    );
                    send_now(
                        &self.stream,
                        &DaemonMsg::Error {
                            code: ErrorCode::BadFrame,
                            message: format!("{e}; closing the connection"),
                            task: None,
                        },
                    );
                    return Served::Closed;
                }
            };
            match (self.client, msg) {
                (
                    None,
                    ClientMsg::Hello {
                        name,
                        role,
                        requested,
                    },
                ) => match hello(shared, &self.stream, &self.peer, name, role, requested) {
                    Some(id) => self.client = Some(id),
                    None => return Served::Closed,
                },
                (None, _) => {
                    send_now(
                        &self.stream,
                        &DaemonMsg::Error {
                            code: ErrorCode::BadSequence,
                            message: "the first message must be Hello".into(),
                            task: None,
                        },
                    );
                    return Served::Closed;
                }
                (Some(_), ClientMsg::Goodbye) => {
                    self.said_goodbye = true;
                    return Served::Closed;
                }
                (Some(id), msg) => {
                    if !handle(shared, id, msg) {
                        return Served::Closed;
                    }
                }
            }
        }
    }

    /// Releases everything the client held. Its settings are forgotten
    /// when it said goodbye or its process is gone (a client that lost
    /// its connection may come back).
    pub fn close(self, shared: &Shared) {
        let Some(id) = self.client else {
            return;
        };
        let gone = self.said_goodbye
            || !procfs::alive(ProcessKey {
                pid: self.peer.pid,
                start_time: self.peer.start_time,
            });
        let mut state = shared.lock();
        let mut out = Outbox::default();
        let now = shared.now();
        let name = state.monitor.client(id).map(|c| c.name.clone());
        state.monitor.disconnect(id, gone, now, &mut out);
        state.conns.remove(&id);
        state.pages.left(id);
        shared.deliver(&mut state, &mut out);
        shared.save_store(&mut state);
        drop(state);
        // The monitor starts no more of its calls, so the executors see
        // this after any of them.
        shared.kernel_jobs.forget(id);
        shared.wake();
        tracing::info!(
            client = id.0,
            pid = self.peer.pid,
            name = ?name.unwrap_or_default(),
            goodbye = self.said_goodbye,
            process_gone = gone,
            "client disconnected"
        );
    }
}

/// Registers a client and sends its Welcome (with the view descriptors).
fn hello(
    shared: &Shared,
    stream: &Arc<UnixStream>,
    peer: &Peer,
    name: String,
    role: Role,
    requested: SettingsRequest,
) -> Option<ClientId> {
    let name: String = name.chars().take(MAX_NAME_CHARS).collect();
    let n_kinds = shared.cpu_unit_slots.len();
    // The page comes first: if it cannot be made, nothing is registered.
    let private = if role == Role::Application {
        match PrivateWriter::create(shared.setup.units.len(), n_kinds) {
            Ok(p) => Some(p),
            Err(e) => {
                send_now(
                    stream,
                    &DaemonMsg::Error {
                        code: ErrorCode::ViewsUnavailable,
                        message: format!("the daemon cannot create your view page: {e}"),
                        task: None,
                    },
                );
                return None;
            }
        }
    } else {
        None
    };
    // Which configured domain (container) it is in, if the config has any.
    let cgroup = if role == Role::Application && !shared.setup.monitor.domains.is_empty() {
        procfs::cgroup_text(peer.pid)
    } else {
        String::new()
    };
    let mut state = shared.lock();
    let now = shared.now();
    let logged_name = name.clone();
    let asked = (!requested.is_empty()).then(|| format!("{requested:?}"));
    let (id, welcome) = state
        .monitor
        .hello(peer.clone(), name, role, requested, now);
    state.monitor.join_domain(id, &cgroup, now);
    let mut conn = Conn {
        stream: Arc::clone(stream),
        private,
        cut_off: false,
        rings: Vec::new(),
    };
    if let Some(p) = conn.private.as_mut() {
        let views = state.monitor.client_views(id, now);
        let _ = p.publish(now, id.0, &views, &vec![0; n_kinds]);
        state.pages.joined(id, views);
    }
    let frame = encode_frame(&welcome);
    let sent = match conn.private.as_mut() {
        Some(p) => {
            let fds: Vec<BorrowedFd<'_>> =
                std::iter::once(state.global.fd()).chain(p.fd()).collect();
            let sent = send_with_fds(stream, &frame, &fds);
            drop(fds);
            p.release_fd();
            sent
        }
        None => send_with_fds(stream, &frame, &[]),
    };
    state.conns.insert(id, conn);
    shared.save_store(&mut state);
    drop(state);
    tracing::info!(
        client = id.0,
        pid = peer.pid,
        uid = peer.uid,
        name = ?logged_name,
        ?role,
        asked = asked.as_deref(),
        "client connected"
    );
    if sent.is_err() {
        // Registered but unreachable: the read loop sees the closed socket
        // and disconnects it.
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }
    Some(id)
}

/// Calls a client may have queued in one ring; with `max_outstanding`
/// per client taken from it at a time, a flooding client cannot hold
/// more than this much daemon memory or crowd out others.
const CALL_RING_CAPACITY: u64 = 256;

/// Everything after Hello, except Goodbye: each kind of message has its
/// function below, run under the state lock by [`locked`]; what is done
/// before the lock (reading /proc, taking the coordinator's latest
/// results) is done here. `false` once the client has been cut off: what
/// it sent after that is not served.
fn handle(shared: &Shared, id: ClientId, msg: ClientMsg) -> bool {
    match msg {
        ClientMsg::Hello { .. } => locked(shared, id, |t| {
            t.refuse(
                (ErrorCode::BadSequence, "Hello may only be sent once".into()),
                None,
            )
        }),
        ClientMsg::OpenCallRing { unit } => locked(shared, id, |t| open_call_ring(t, unit)),
        ClientMsg::OpenKernelRing { unit, region_bytes } => {
            locked(shared, id, |t| open_kernel_ring(t, unit, region_bytes))
        }
        ClientMsg::RegisterKernel {
            unit,
            source,
            entry,
        } => locked(shared, id, |t| register_kernel(t, unit, source, entry)),
        ClientMsg::RequestDispatch {
            unit,
            task,
            expected_ns,
        } => locked(shared, id, |t| request_dispatch(t, unit, task, expected_ns)),
        ClientMsg::TaskCompleted { unit, task, .. } => {
            locked(shared, id, |t| task_completed(t, unit, task))
        }
        ClientMsg::SubmitDevice {
            unit,
            task,
            exec_ns,
            bytes_in,
            bytes_out,
        } => locked(shared, id, |t| {
            submit_device(t, unit, task, [exec_ns, bytes_in, bytes_out])
        }),
        ClientMsg::SetSettings {
            target_pid,
            unit,
            settings,
        } => {
            let procs = procfs::ReadBefore::read(target_pid);
            locked(shared, id, |t| {
                set_settings(t, target_pid, unit, settings, &procs)
            })
        }
        ClientMsg::Status {
            first_client,
            max_clients,
        } => {
            let coordination = shared.coordination.get();
            locked(shared, id, |t| {
                let page = t.st.monitor.status_page(
                    t.shared.status_header(),
                    coordination.status.as_ref(),
                    first_client,
                    max_clients,
                    t.now,
                );
                t.out.push(t.id, DaemonMsg::Status(page));
            })
        }
        ClientMsg::ReportDemand {
            units,
            in_flight,
            implemented,
            native,
        } => locked(shared, id, |t| {
            report_demand(
                t,
                DemandReport {
                    units,
                    in_flight,
                    implemented,
                    native,
                },
            )
        }),
        ClientMsg::SelectAccelerator {
            memory_bytes,
            class,
        } => locked(shared, id, |t| {
            let reply = t.st.monitor.select_accelerator(t.id, memory_bytes, class);
            t.reply(reply)
        }),
        ClientMsg::ListDomains => locked(shared, id, |t| {
            let domains = t.st.monitor.domain_list();
            t.out.push(t.id, DaemonMsg::Domains(domains));
        }),
        ClientMsg::SetDomain {
            name,
            credits,
            cpu_cap,
        } => locked(shared, id, |t| {
            let reply =
                t.st.monitor
                    .set_domain(t.id, &name, credits, cpu_cap, t.now);
            t.reply(reply);
            t.wake = true;
        }),
        ClientMsg::RequestLease { unit, task } => locked(shared, id, |t| {
            let result =
                t.st.monitor
                    .request_lease(t.id, unit, task, t.now, &mut t.out);
            t.refuse_if(result, Some(task));
            t.wake = true;
        }),
        ClientMsg::Intercepted {
            api,
            device_memory_limit,
        } => locked(shared, id, |t| {
            match t
                .st
                .monitor
                .declare_intercepted(t.id, api, device_memory_limit)
            {
                Ok(limit) => t.out.push(
                    t.id,
                    DaemonMsg::InterceptTerms {
                        device_memory_limit: limit,
                    },
                ),
                Err(r) => t.refuse(r, None),
            }
        }),
        ClientMsg::SetDeviceMemory { target_pid, limit } => locked(shared, id, |t| {
            let reply =
                t.st.monitor
                    .set_device_memory(t.id, target_pid, limit, &mut t.out);
            t.reply(reply);
        }),
        ClientMsg::DeviceMemory { unit, bytes } => locked(shared, id, |t| {
            let result = t.st.monitor.report_device_memory(t.id, unit, bytes);
            t.refuse_if(result, None);
        }),
        ClientMsg::Goodbye => locked(shared, id, |_| {}),
    }
}

/// One message's turn under the state lock: what its function decides
/// with, and what it leaves for [`locked`] to do.
struct Turn<'a> {
    shared: &'a Shared,
    st: &'a mut State,
    /// The sender.
    id: ClientId,
    now: Ns,
    out: Outbox,
    /// New work may move the timer's next deadline: ring its bell.
    wake: bool,
    /// A settings change, logged once the lock is released.
    changed: Option<String>,
}

impl Turn<'_> {
    /// Answers the sender with an `Error`.
    fn refuse(&mut self, refusal: Refusal, task: Option<TaskId>) {
        let (code, message) = refusal;
        self.out.push(
            self.id,
            DaemonMsg::Error {
                code,
                message,
                task,
            },
        );
    }

    /// Answers the sender with `Error` if `result` is a refusal.
    fn refuse_if(&mut self, result: Result<(), Refusal>, task: Option<TaskId>) {
        if let Err(r) = result {
            self.refuse(r, task);
        }
    }

    /// Answers the sender with the reply or the refusal.
    fn reply(&mut self, result: Result<DaemonMsg, Refusal>) {
        match result {
            Ok(reply) => self.out.push(self.id, reply),
            Err(r) => self.refuse(r, None),
        }
    }
}

/// Serves one message of `id`: takes the state lock, lets `serve` decide,
/// sends what was decided (in order, under the lock), releases it, then
/// wakes the timer and logs as `serve` asked. `false` if the client has
/// been cut off, before this message or by it.
fn locked(shared: &Shared, id: ClientId, serve: impl FnOnce(&mut Turn<'_>)) -> bool {
    let mut state = shared.lock();
    if state.conns.get(&id).is_none_or(|c| c.cut_off) {
        return false;
    }
    let mut turn = Turn {
        shared,
        st: &mut state,
        id,
        now: shared.now(),
        out: Outbox::default(),
        wake: false,
        changed: None,
    };
    serve(&mut turn);
    let Turn {
        mut out,
        wake,
        changed,
        ..
    } = turn;
    let refused = out.refusals_to(id);
    let pid = if refused.is_empty() && changed.is_none() {
        0
    } else {
        state.monitor.client(id).map_or(0, |c| c.peer.pid)
    };
    shared.deliver(&mut state, &mut out);
    let served = state.conns.get(&id).is_some_and(|c| !c.cut_off);
    drop(state);
    if wake {
        shared.wake();
    }
    if let Some(change) = changed {
        tracing::info!(client = id.0, pid, "settings changed: {change}");
    }
    for (code, message) in refused {
        // Debug: a client that keeps asking wrongly must not fill the log.
        tracing::debug!(client = id.0, pid, ?code, "refused: {message}");
    }
    served
}

fn request_dispatch(t: &mut Turn<'_>, unit: UnitId, task: TaskId, expected_ns: u64) {
    let result =
        t.st.monitor
            .request_dispatch(t.id, unit, task, expected_ns, t.now, &mut t.out);
    t.refuse_if(result, Some(task));
    // A request granted at once needs no timer; one left waiting may be
    // held back by the policy until its `retry_at`.
    t.wake = !t.out.is_empty()
        && !t
            .out
            .for_client(t.id)
            .iter()
            .any(|m| matches!(m, DaemonMsg::Granted { task: g, .. } if *g == task));
}

fn task_completed(t: &mut Turn<'_>, unit: UnitId, task: TaskId) {
    let result =
        t.st.monitor
            .task_completed(t.id, unit, task, t.now, &mut t.out);
    t.refuse_if(result, Some(task));
}

/// Emulated device work: `exec_ns`, `bytes_in`, `bytes_out`.
fn submit_device(
    t: &mut Turn<'_>,
    unit: UnitId,
    task: TaskId,
    [exec, bytes_in, bytes_out]: [u64; 3],
) {
    let result = t.st.monitor.submit_device(
        t.id, unit, task, exec, bytes_in, bytes_out, t.now, &mut t.out,
    );
    t.refuse_if(result, Some(task));
    t.wake = true;
}

/// `procs` holds the target process, read from /proc before the lock.
fn set_settings(
    t: &mut Turn<'_>,
    target_pid: Option<u32>,
    unit: Option<UnitId>,
    settings: SettingsRequest,
    procs: &dyn ProcessTable,
) {
    match t
        .st
        .monitor
        .set_settings(t.id, target_pid, unit, settings, procs, t.now)
    {
        Ok(reply) => {
            t.changed = Some(format!(
                "{settings:?} for pid {} on {}",
                target_pid.map_or_else(|| "(own)".into(), |p| p.to_string()),
                unit.map_or_else(|| "every unit".into(), |u| format!("unit {}", u.0))
            ));
            t.out.push(t.id, reply);
        }
        Err(r) => t.refuse(r, None),
    }
    t.shared.save_store(t.st);
    t.wake = true;
}

/// Keeps the report for the coordinator (when it runs).
fn report_demand(t: &mut Turn<'_>, report: DemandReport) {
    let checked = t.st.monitor.check_application(t.id).and_then(|()| {
        let named: Vec<UnitId> = report
            .implemented
            .iter()
            .copied()
            .chain(report.native)
            .collect();
        crate::demand_report::check_report(&report.units, &named, t.st.monitor.agents().len())
            .map_err(|m| (ErrorCode::UnknownUnit, m))
    });
    match checked {
        Ok(()) if t.shared.setup.coordination == Coordination::Off => {}
        Ok(()) => {
            // An application that reports demand is not idle, even if it
            // runs everything on its own CPU threads.
            t.st.monitor.note_activity(t.id, t.now);
            t.shared.demand_reports.put(t.id, report);
        }
        Err(r) => t.refuse(r, None),
    }
}

/// Creates a call ring for the sender on `unit` and sends its fd with
/// `CallRingOpened`. One ring per client and unit: asking again replaces
/// the old one (and drops what was queued in it).
fn open_call_ring(t: &mut Turn<'_>, unit: UnitId) {
    let opened = t.st.monitor.check_call_ring(t.id, unit).and_then(|()| {
        let ring =
            RingConsumer::create(CALL_RING_CAPACITY).map_err(|e| unavailable("call ring", &e))?;
        let opened = DaemonMsg::CallRingOpened {
            unit,
            capacity: ring.capacity(),
        };
        Ok((opened, ring, None))
    });
    install_ring(t, unit, opened);
}

/// Creates a kernel ring for the sender on served `unit`: a call ring and
/// a data region of `region_bytes`, both fds sent with `KernelRingOpened`.
/// One ring per client and unit, as for call rings. A call already
/// queued or running keeps the region it was checked against.
fn open_kernel_ring(t: &mut Turn<'_>, unit: UnitId, region_bytes: u64) {
    let opened =
        t.st.monitor
            .check_kernel_ring(t.id, unit, region_bytes)
            .and_then(|()| {
                let ring = RingConsumer::create(CALL_RING_CAPACITY)
                    .map_err(|e| unavailable("call ring", &e))?;
                let region =
                    DataRegion::create(region_bytes).map_err(|e| unavailable("data region", &e))?;
                let opened = DaemonMsg::KernelRingOpened {
                    unit,
                    capacity: ring.capacity(),
                    region_bytes,
                };
                Ok((opened, ring, Some(Arc::new(region))))
            });
    install_ring(t, unit, opened);
}

/// Hands a `RegisterKernel` to the unit's executor, which builds it
/// between calls and answers the client ([`crate::monitor::Monitor::kernel_registered`]).
fn register_kernel(t: &mut Turn<'_>, unit: UnitId, source: String, entry: String) {
    let result =
        t.st.monitor
            .check_register_kernel(t.id, unit, source.len(), &entry)
            .and_then(|()| {
                if !t.shared.kernel_jobs.serves(unit) {
                    return Err((
                        ErrorCode::KernelBuildFailed,
                        format!("unit {} has no executor running", unit.0),
                    ));
                }
                let (uid, gid) =
                    t.st.monitor
                        .client_user(t.id)
                        .ok_or((ErrorCode::BadSequence, "say Hello first".to_string()))?;
                let job = ExecJob::Register {
                    owner: crate::kernel_exec::Owner {
                        client: t.id,
                        uid,
                        gid,
                    },
                    source,
                    entry,
                };
                t.shared.kernel_jobs.send(unit, job).map_err(|_| {
                    (
                        ErrorCode::KernelBuildFailed,
                        format!("the executor of unit {} has stopped", unit.0),
                    )
                })
            });
    t.refuse_if(result, None);
}

fn unavailable(what: &str, e: &dyn std::fmt::Display) -> (ErrorCode, String) {
    (
        ErrorCode::ViewsUnavailable,
        format!("the daemon cannot create a {what}: {e}"),
    )
}

/// A ring made for a client: the message that announces it, the ring, and
/// for a kernel ring its data region.
type NewRing = (DaemonMsg, RingConsumer, Option<Arc<DataRegion>>);

/// Sends the announcement with the ring's fd (and the region's), then the
/// doorbell's, then keeps the ring in place of any the client had on
/// `unit`; or refuses, if the ring could not be made. A client whose
/// socket cannot take the frame is cut off instead. Either way the timer
/// is woken (its ring polling may start).
fn install_ring(t: &mut Turn<'_>, unit: UnitId, made: Result<NewRing, Refusal>) {
    t.wake = true;
    let (opened, ring, region) = match made {
        Ok(made) => made,
        Err(r) => return t.refuse(r, None),
    };
    let conn =
        t.st.conns
            .get_mut(&t.id)
            .expect("a served client has a connection");
    let frame = encode_frame(&opened);
    let mut fds = vec![ring.fd()];
    fds.extend(region.as_ref().map(|r| r.fd()));
    fds.push(t.shared.doorbell.fd());
    if send_with_fds(&*conn.stream, &frame, &fds).is_err() {
        conn.cut_off = true;
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
        return;
    }
    drop(fds);
    conn.rings.retain(|r| r.unit != unit);
    conn.rings.push(OpenRing { unit, ring, region });
    t.st.ring_holders.insert(t.id);
}
