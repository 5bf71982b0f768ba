//! One connection: its frames are read as they arrive (the reactor's
//! workers call [`ConnIo::on_readable`]), each message runs through the
//! monitor under the state lock, and on the way out (goodbye, EOF, a bad
//! frame, the handshake deadline, or being cut off for not reading)
//! [`ConnIo::close`] releases everything the client held.

use crate::config::Coordination;
use crate::kernel_exec::ExecJob;
use crate::outbox::Outbox;
use crate::privilege::Peer;
use crate::procfs;
use crate::server::OpenRing;
use crate::server::{Conn, Shared};
use crate::store::ProcessKey;
use hetsched_core::ids::{ClientId, TaskId, UnitId};
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

fn peer_of(stream: &UnixStream) -> std::io::Result<Peer> {
    let cred = rustix::net::sockopt::socket_peercred(stream)?;
    let pid = cred.pid.as_raw_nonzero().get() as u32;
    Ok(Peer {
        pid,
        uid: cred.uid.as_raw(),
        gid: cred.gid.as_raw(),
        groups: procfs::groups(pid),
        start_time: procfs::start_time(pid).unwrap_or(0),
        ancestors: procfs::ancestors(pid),
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
/// driven by the reactor ([`crate::reactor`]): [`ConnIo::on_readable`] when
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
    ) -> std::io::Result<ConnIo> {
        let peer = peer_of(&stream)?;
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
        for executor in state.kernel_jobs.values() {
            let _ = executor.send(ExecJob::Forget(id));
        }
        state.conns.remove(&id);
        state.exclusive.remove(&id);
        state.pages.left(id);
        state.deliver(&mut out);
        shared.save_store(&mut state);
        drop(state);
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

/// Creates a call ring for `id` on `unit` and sends its fd with
/// `CallRingOpened`. One ring per client and unit: asking again replaces
/// the old one (and drops what was queued in it).
fn open_call_ring(
    st: &mut crate::server::State,
    bell: BorrowedFd<'_>,
    id: ClientId,
    unit: UnitId,
) -> Result<(), (ErrorCode, String)> {
    st.monitor.check_call_ring(id, unit)?;
    let ring =
        RingConsumer::create(CALL_RING_CAPACITY).map_err(|e| unavailable("call ring", &e))?;
    let opened = DaemonMsg::CallRingOpened {
        unit,
        capacity: ring.capacity(),
    };
    install_ring(st, bell, id, unit, opened, ring, None);
    Ok(())
}

/// Creates a kernel ring for `id` on served `unit`: a call ring and a
/// data region of `region_bytes`, both fds sent with `KernelRingOpened`.
/// One ring per client and unit, as for call rings. A call already
/// queued or running keeps the region it was checked against.
fn open_kernel_ring(
    st: &mut crate::server::State,
    bell: BorrowedFd<'_>,
    id: ClientId,
    unit: UnitId,
    region_bytes: u64,
) -> Result<(), (ErrorCode, String)> {
    st.monitor.check_kernel_ring(id, unit, region_bytes)?;
    let ring =
        RingConsumer::create(CALL_RING_CAPACITY).map_err(|e| unavailable("call ring", &e))?;
    let region = DataRegion::create(region_bytes).map_err(|e| unavailable("data region", &e))?;
    let opened = DaemonMsg::KernelRingOpened {
        unit,
        capacity: ring.capacity(),
        region_bytes,
    };
    install_ring(st, bell, id, unit, opened, ring, Some(Arc::new(region)));
    Ok(())
}

/// Hands a `RegisterKernel` to the unit's executor, which builds it
/// between calls and answers the client ([`crate::monitor::Monitor::kernel_registered`]).
fn register_kernel(
    st: &mut crate::server::State,
    id: ClientId,
    unit: UnitId,
    source: String,
    entry: String,
) -> Result<(), (ErrorCode, String)> {
    st.monitor
        .check_register_kernel(id, unit, source.len(), &entry)?;
    let executor = st.kernel_jobs.get(&unit).ok_or_else(|| {
        (
            ErrorCode::KernelBuildFailed,
            format!("unit {} has no executor running", unit.0),
        )
    })?;
    executor
        .send(ExecJob::Register {
            client: id,
            source,
            entry,
        })
        .map_err(|_| {
            (
                ErrorCode::KernelBuildFailed,
                format!("the executor of unit {} has stopped", unit.0),
            )
        })
}

fn unavailable(what: &str, e: &dyn std::fmt::Display) -> (ErrorCode, String) {
    (
        ErrorCode::ViewsUnavailable,
        format!("the daemon cannot create a {what}: {e}"),
    )
}

/// Sends `opened` with the ring's fd (and the region's), then the
/// doorbell's, then keeps the ring in place of any the client had on
/// `unit`. A client whose socket cannot take the frame is cut off instead.
fn install_ring(
    st: &mut crate::server::State,
    bell: BorrowedFd<'_>,
    id: ClientId,
    unit: UnitId,
    opened: DaemonMsg,
    ring: RingConsumer,
    region: Option<Arc<DataRegion>>,
) {
    let conn = st
        .conns
        .get_mut(&id)
        .expect("a served client has a connection");
    let frame = encode_frame(&opened);
    let mut fds = vec![ring.fd()];
    fds.extend(region.as_ref().map(|r| r.fd()));
    fds.push(bell);
    if send_with_fds(&*conn.stream, &frame, &fds).is_err() {
        conn.cut_off = true;
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
        return;
    }
    drop(fds);
    conn.rings.retain(|r| r.unit != unit);
    conn.rings.push(OpenRing { unit, ring, region });
    st.ring_holders.insert(id);
}

fn refuse(
    out: &mut Outbox,
    to: ClientId,
    (code, message): (ErrorCode, String),
    task: Option<TaskId>,
) {
    out.push(
        to,
        DaemonMsg::Error {
            code,
            message,
            task,
        },
    );
}

/// Everything after Hello, except Goodbye. `false` once the client has
/// been cut off: what it sent after that is not served.
fn handle(shared: &Shared, id: ClientId, msg: ClientMsg) -> bool {
    let mut state = shared.lock();
    if state.conns.get(&id).is_none_or(|c| c.cut_off) {
        return false;
    }
    let now = shared.now();
    let mut out = Outbox::default();
    let mut wake = false;
    // Logged once the lock is released.
    let mut changed: Option<String> = None;
    let st = &mut *state;
    match msg {
        ClientMsg::Hello { .. } => refuse(
            &mut out,
            id,
            (ErrorCode::BadSequence, "Hello may only be sent once".into()),
            None,
        ),
        ClientMsg::OpenCallRing { unit } => {
            if let Err(r) = open_call_ring(st, shared.doorbell.fd(), id, unit) {
                refuse(&mut out, id, r, None);
            }
            wake = true;
        }
        ClientMsg::OpenKernelRing { unit, region_bytes } => {
            if let Err(r) = open_kernel_ring(st, shared.doorbell.fd(), id, unit, region_bytes) {
                refuse(&mut out, id, r, None);
            }
            wake = true;
        }
        ClientMsg::RegisterKernel {
            unit,
            source,
            entry,
        } => {
            if let Err(r) = register_kernel(st, id, unit, source, entry) {
                refuse(&mut out, id, r, None);
            }
        }
        ClientMsg::RequestDispatch {
            unit,
            task,
            expected_ns,
        } => {
            if let Err(r) = st
                .monitor
                .request_dispatch(id, unit, task, expected_ns, now, &mut out)
            {
                refuse(&mut out, id, r, Some(task));
            }
            // A request granted at once needs no timer; one left waiting
            // may be held back by the policy until its `retry_at`.
            wake = !out.is_empty()
                && !out
                    .for_client(id)
                    .iter()
                    .any(|m| matches!(m, DaemonMsg::Granted { task: t, .. } if *t == task));
        }
        ClientMsg::TaskCompleted { unit, task, .. } => {
            if let Err(r) = st.monitor.task_completed(id, unit, task, now, &mut out) {
                refuse(&mut out, id, r, Some(task));
            }
        }
        ClientMsg::SubmitDevice {
            unit,
            task,
            exec_ns,
            bytes_in,
            bytes_out,
        } => {
            if let Err(r) = st
                .monitor
                .submit_device(id, unit, task, exec_ns, bytes_in, bytes_out, now, &mut out)
            {
                refuse(&mut out, id, r, Some(task));
            }
            wake = true;
        }
        ClientMsg::SetSettings {
            target_pid,
            unit,
            settings,
        } => {
            match st.monitor.set_settings(
                id,
                target_pid,
                unit,
                settings,
                &procfs::LiveProcesses,
                now,
            ) {
                Ok(reply) => {
                    changed = Some(format!(
                        "{settings:?} for pid {} on {}",
                        target_pid.map_or_else(|| "(own)".into(), |p| p.to_string()),
                        unit.map_or_else(|| "every unit".into(), |u| format!("unit {}", u.0))
                    ));
                    out.push(id, reply);
                }
                Err(r) => refuse(&mut out, id, r, None),
            }
            shared.save_store(st);
            wake = true;
        }
        ClientMsg::Status {
            first_client,
            max_clients,
        } => {
            let page = st.monitor.status_page(
                shared.status_header(),
                st.coordination.as_ref(),
                first_client,
                max_clients,
                now,
            );
            out.push(id, DaemonMsg::Status(page));
        }
        ClientMsg::ReportDemand {
            units,
            in_flight,
            implemented,
            native,
        } => {
            let checked = st.monitor.check_application(id).and_then(|()| {
                let named: Vec<UnitId> = implemented.iter().copied().chain(native).collect();
                crate::demand_report::check_report(&units, &named, st.monitor.agents().len())
                    .map_err(|m| (ErrorCode::UnknownUnit, m))
            });
            match checked {
                Ok(()) if shared.setup.coordination == Coordination::Off => {}
                // Cumulative counters: the latest report is all that matters.
                Ok(()) => {
                    // An application that reports demand is not idle, even
                    // if it runs everything on its own CPU threads.
                    st.monitor.note_activity(id, now);
                    st.demand_reports.insert(
                        id,
                        crate::demand_report::DemandReport {
                            units,
                            in_flight,
                            implemented,
                            native,
                        },
                    );
                }
                Err(r) => refuse(&mut out, id, r, None),
            }
        }
        ClientMsg::SelectAccelerator {
            memory_bytes,
            class,
        } => match st.monitor.select_accelerator(id, memory_bytes, class) {
            Ok(reply) => out.push(id, reply),
            Err(r) => refuse(&mut out, id, r, None),
        },
        ClientMsg::ListDomains => out.push(id, DaemonMsg::Domains(st.monitor.domain_list())),
        ClientMsg::SetDomain {
            name,
            credits,
            cpu_cap,
        } => {
            match st.monitor.set_domain(id, &name, credits, cpu_cap, now) {
                Ok(reply) => out.push(id, reply),
                Err(r) => refuse(&mut out, id, r, None),
            }
            wake = true;
        }
        ClientMsg::Goodbye => {}
    }
    let refused = out.refusals_to(id);
    let pid = if refused.is_empty() && changed.is_none() {
        0
    } else {
        st.monitor.client(id).map_or(0, |c| c.peer.pid)
    };
    st.deliver(&mut out);
    let served = st.conns.get(&id).is_some_and(|c| !c.cut_off);
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
