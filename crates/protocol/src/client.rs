//! The client library: one connection to the daemon, with blocking calls
//! for each request and automatic reconnection when the daemon restarts.
//!
//! A `Client` is used from one thread at a time (`&mut self`); a runtime
//! with many threads wraps it in its own synchronisation.

use crate::frame::{FrameError, FrameReader, decode_daemon, encode_frame};
use crate::kernel_call::{Kernel, KernelCall};
use crate::message::{
    ClientMsg, DaemonMsg, DomainInfo, ErrorCode, Role, SettingsRequest, StatusPage, StatusReport,
    UnitInfo, WireSettings,
};
use crate::paths::{
    check_socket_dir, default_socket_path, expected_daemon_uid_from_env,
    requested_settings_from_env,
};
use crate::socket::recv_with_fds;
use crate::user_kernel::{KernelSignature, UserKernelId};
use hetsched_core::ids::{ClientId, TaskId, UnitId};
use hetsched_core::unit::UnitClass;
use hetsched_views::call_ring::{CallPacket, RingProducer};
use hetsched_views::data_region::DataRegion;
use hetsched_views::doorbell::Doorbell;
use hetsched_views::{GlobalReader, PrivateReader, ViewError};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::ops::Range;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How to connect.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub socket: PathBuf,
    pub name: String,
    pub role: Role,
    /// Settings to ask for on every unit at `Hello` (again after a reconnect).
    pub requested: SettingsRequest,
    /// How long to keep retrying when the daemon goes away (a restart);
    /// zero fails at once.
    pub reconnect_for: Duration,
}

impl ClientOptions {
    /// An application at the default socket, with the settings the
    /// environment asks for (`HETSCHED_CLASS` …, see
    /// [`requested_settings_from_env`]).
    pub fn application(name: impl Into<String>) -> Result<Self, ClientError> {
        Ok(ClientOptions {
            socket: default_socket_path(),
            name: name.into(),
            role: Role::Application,
            requested: requested_settings_from_env().map_err(ClientError::Environment)?,
            reconnect_for: Duration::from_secs(5),
        })
    }

    /// A tool that only queries and administers (never runs work).
    pub fn observer(name: impl Into<String>) -> Self {
        ClientOptions {
            socket: default_socket_path(),
            name: name.into(),
            role: Role::Observer,
            requested: SettingsRequest::default(),
            reconnect_for: Duration::ZERO,
        }
    }

    pub fn socket(mut self, path: impl Into<PathBuf>) -> Self {
        self.socket = path.into();
        self
    }
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "cannot reach the hetsched daemon at {path}: {source} (is `hetsched daemon` running? \
         A daemon on another socket: --socket PATH or HETSCHED_SOCKET)"
    )]
    Connect { path: PathBuf, source: io::Error },
    /// The default socket's directory is missing or not safe to use.
    #[error("no safe place for the hetsched socket: {0}")]
    SocketDir(String),
    /// What listens on the socket runs as a user the client does not
    /// trust ([`check_daemon_uid`]).
    #[error("refusing the hetsched daemon at {path}: {reason}")]
    UntrustedDaemon { path: PathBuf, reason: String },
    #[error("connection to the daemon failed: {0}")]
    Io(#[from] io::Error),
    #[error("the daemon sent a bad frame: {0}")]
    Frame(#[from] FrameError),
    #[error("the daemon refused ({code:?}): {message}")]
    Refused { code: ErrorCode, message: String },
    #[error("unexpected reply from the daemon: {0}")]
    Unexpected(String),
    #[error("bad hetsched environment: {0}")]
    Environment(String),
    #[error("cannot map the daemon's view pages: {0}")]
    Views(#[from] ViewError),
}

impl ClientError {
    /// The connection is gone (daemon stopped or restarting).
    pub fn is_disconnect(&self) -> bool {
        match self {
            ClientError::Io(e) => matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::NotConnected
            ),
            _ => false,
        }
    }

    /// The daemon's refusal code, if this is a refusal.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// Whether a daemon running as `daemon_uid` may serve a client running as
/// `own_uid`: root's and the client's own are trusted, and so is
/// `expected` (`HETSCHED_DAEMON_UID`, for a daemon under a service
/// account). Any other user could have bound the socket first to see what
/// clients send and to feed them wrong grants and views. The error says
/// whose it is and how to accept it.
pub(crate) fn check_daemon_uid(
    daemon_uid: u32,
    own_uid: u32,
    expected: Option<u32>,
) -> Result<(), String> {
    if daemon_uid == 0 || daemon_uid == own_uid || expected == Some(daemon_uid) {
        return Ok(());
    }
    Err(match expected {
        Some(e) => format!(
            "it runs as uid {daemon_uid}, which is neither root, you (uid {own_uid}) nor \
             HETSCHED_DAEMON_UID={e}"
        ),
        None => format!(
            "it runs as uid {daemon_uid}, neither root nor you (uid {own_uid}), so another \
             user may have put it there; if a daemon of that user is the one you mean to use, \
             set HETSCHED_DAEMON_UID to its uid"
        ),
    })
}

/// Connects to `socket` and checks who listens there: the directory of the
/// default path first ([`check_socket_dir`]), then the daemon's uid from
/// the socket's peer credentials ([`check_daemon_uid`]).
fn connect_trusted(socket: &std::path::Path) -> Result<UnixStream, ClientError> {
    check_socket_dir(socket).map_err(ClientError::SocketDir)?;
    let expected = expected_daemon_uid_from_env().map_err(ClientError::Environment)?;
    let stream = UnixStream::connect(socket).map_err(|source| ClientError::Connect {
        path: socket.into(),
        source,
    })?;
    let daemon = rustix::net::sockopt::socket_peercred(&stream).map_err(io::Error::from)?;
    let own = rustix::process::getuid().as_raw();
    check_daemon_uid(daemon.uid.as_raw(), own, expected).map_err(|reason| {
        ClientError::UntrustedDaemon {
            path: socket.into(),
            reason,
        }
    })?;
    Ok(stream)
}

/// The daemon's refusal of the request `task` names (`None`: of the
/// pending settings or status request), if `msg` is one.
pub(crate) fn refusal(msg: &DaemonMsg, task: Option<TaskId>) -> Option<ClientError> {
    match msg {
        DaemonMsg::Error {
            code,
            message,
            task: t,
        } if *t == task => Some(ClientError::Refused {
            code: *code,
            message: message.clone(),
        }),
        _ => None,
    }
}

/// A dispatch the daemon allowed: run the task now, then call
/// [`Client::task_completed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    pub unit: UnitId,
    pub task: TaskId,
    pub waited_ns: u64,
}

/// A time-slice lease on a device the client drives itself: launch freely
/// until `lease_ns` after it was granted, then let the work drain and call
/// [`Client::end_lease`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    pub unit: UnitId,
    pub task: TaskId,
    pub waited_ns: u64,
    pub lease_ns: u64,
}

/// Work on an emulated device finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceDone {
    pub unit: UnitId,
    pub task: TaskId,
    pub waited_ns: u64,
    pub ran_ns: u64,
}

/// What the daemon said when a connection was made: who this client is,
/// the units, its settings and the mapped view pages. [`Client`] and
/// [`crate::SharedClient`] dereference to it.
#[derive(Debug)]
pub struct Session {
    pub(crate) client: ClientId,
    pub(crate) pid: u32,
    pub(crate) daemon_pid: u32,
    pub(crate) units: Vec<UnitInfo>,
    pub(crate) settings: Vec<WireSettings>,
    pub(crate) notice: Option<String>,
    /// The mapped pages, for applications.
    pub(crate) views: Option<Views>,
}

impl Session {
    pub fn client_id(&self) -> ClientId {
        self.client
    }

    /// This process's pid as the daemon saw it (SO_PEERCRED).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn daemon_pid(&self) -> u32 {
        self.daemon_pid
    }

    pub fn units(&self) -> &[UnitInfo] {
        &self.units
    }

    pub fn unit_by_name(&self, name: &str) -> Option<&UnitInfo> {
        self.units.iter().find(|u| u.name == name)
    }

    /// Effective settings per unit at connect time.
    pub fn settings(&self) -> &[WireSettings] {
        &self.settings
    }

    /// Why the daemon did not grant all of `requested`, if it did not.
    pub fn notice(&self) -> Option<&str> {
        self.notice.as_deref()
    }

    /// The global page (every unit's utilisation, queues, CPU kinds):
    /// a lock-free read of shared memory, no message to the daemon.
    /// `None` for observers.
    pub fn global_view(&self) -> Option<&GlobalReader> {
        self.views.as_ref().map(|v| &v.global)
    }

    /// This client's private page (what it can expect from each unit).
    pub fn private_view(&self) -> Option<&PrivateReader> {
        self.views.as_ref().map(|v| &v.private)
    }
}

/// Rinnegan's two pages, mapped read-only.
#[derive(Debug)]
pub(crate) struct Views {
    pub global: GlobalReader,
    pub private: PrivateReader,
}

impl Views {
    fn map(fds: Vec<OwnedFd>) -> Result<Views, ClientError> {
        let mut fds = fds.into_iter();
        match (fds.next(), fds.next()) {
            (Some(g), Some(p)) => Ok(Views {
                global: GlobalReader::from_fd(g)?,
                private: PrivateReader::from_fd(p)?,
            }),
            _ => Err(ClientError::Unexpected(
                "Welcome said views are attached but fewer than two descriptors came".into(),
            )),
        }
    }
}

/// A [`Client`] taken apart (see [`Client::into_parts`]).
#[derive(Debug)]
pub(crate) struct ClientParts {
    pub opts: ClientOptions,
    pub stream: UnixStream,
    pub reader: FrameReader,
    pub next_task: u64,
    pub session: Session,
}

impl std::ops::Deref for Client {
    type Target = Session;

    fn deref(&self) -> &Session {
        &self.session
    }
}

/// The kernel's name in `entry` as a client registers it, read as the
/// daemon reads it: `scale` of a CUDA declaration `scale(const ptr, ptr,
/// f32, u32)`, an OpenCL entry as it is. The daemon's answer names the
/// kernel so.
fn entry_name(entry: &str) -> String {
    if crate::ptx::is_declaration(entry)
        && let Ok(declaration) = crate::ptx::parse_declaration(entry)
    {
        return declaration.name;
    }
    entry.trim().to_string()
}

/// Whether `m` answers a registration of `entry` on `unit`, and how.
fn registration_answer(
    m: &DaemonMsg,
    unit: UnitId,
    entry: &str,
) -> Option<Result<RegisteredKernel, ClientError>> {
    match m {
        DaemonMsg::KernelRegistered {
            unit: u,
            kernel,
            signature,
            build_log,
            cached,
        } if *u == unit && signature.entry == entry_name(entry) => Some(Ok(RegisteredKernel {
            unit,
            kernel: *kernel,
            signature: signature.clone(),
            build_log: build_log.clone(),
            cached: *cached,
        })),
        other => refusal_of_request(other).map(Err),
    }
}

/// A refusal of a request that names no task (registering a kernel,
/// opening a ring).
fn refusal_of_request(m: &DaemonMsg) -> Option<ClientError> {
    match m {
        DaemonMsg::Error {
            code,
            message,
            task: None,
        } => Some(ClientError::Refused {
            code: *code,
            message: message.clone(),
        }),
        _ => None,
    }
}

/// The refusal a daemon sent on `stream` before closing it, if any.
fn refusal_sent(mut stream: &UnixStream) -> Option<ClientError> {
    use std::io::Read;
    let mut reader = FrameReader::default();
    let mut buf = [0u8; 4096];
    loop {
        if let Ok(Some(payload)) = reader.next_payload() {
            return match decode_daemon(&payload) {
                Ok(DaemonMsg::Error { code, message, .. }) => {
                    Some(ClientError::Refused { code, message })
                }
                _ => None,
            };
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => reader.push(&buf[..n]),
        }
    }
}

/// How long a client waits for the daemon's answer to Hello.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A connection to the daemon.
#[derive(Debug)]
pub struct Client {
    opts: ClientOptions,
    stream: UnixStream,
    reader: FrameReader,
    session: Session,
    /// Messages that arrived while waiting for something else.
    inbox: VecDeque<DaemonMsg>,
    /// Descriptors received with frames, oldest first.
    fds: VecDeque<std::os::fd::OwnedFd>,
    next_task: u64,
    reconnects: u32,
}

impl Client {
    /// Connects and says hello. Fails at once if no daemon listens.
    pub fn connect(opts: ClientOptions) -> Result<Client, ClientError> {
        let (stream, reader, session) = Self::handshake(&opts)?;
        Ok(Client {
            opts,
            stream,
            reader,
            session,
            inbox: VecDeque::new(),
            fds: VecDeque::new(),
            next_task: 1,
            reconnects: 0,
        })
    }

    fn handshake(opts: &ClientOptions) -> Result<(UnixStream, FrameReader, Session), ClientError> {
        let mut stream = connect_trusted(&opts.socket)?;
        // A daemon that accepts but never answers (hung, or a socket
        // something else listens on) must not hang the caller.
        stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
        let hello = encode_frame(&ClientMsg::Hello {
            name: opts.name.clone(),
            role: opts.role,
            requested: opts.requested,
        });
        if let Err(e) = stream.write_all(&hello) {
            // A daemon that refuses the connection (too many) says why and
            // closes at once, perhaps before Hello arrives.
            return Err(refusal_sent(&stream).unwrap_or(e.into()));
        }
        let mut reader = FrameReader::default();
        let mut fds = Vec::new();
        let msg = loop {
            if let Some(payload) = reader.next_payload()? {
                break decode_daemon(&payload)?;
            }
            let mut buf = [0u8; 16 * 1024];
            let (n, got) = recv_with_fds(&stream, &mut buf).map_err(|e| {
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) {
                    ClientError::Io(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "the daemon at {} did not answer Hello within {} s",
                            opts.socket.display(),
                            HANDSHAKE_TIMEOUT.as_secs()
                        ),
                    ))
                } else {
                    e.into()
                }
            })?;
            if n == 0 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
            }
            fds.extend(got);
            reader.push(&buf[..n]);
        };
        stream.set_read_timeout(None)?;
        match msg {
            DaemonMsg::Welcome {
                client,
                pid,
                daemon_pid,
                units,
                settings,
                notice,
                views_attached,
            } => Ok((
                stream,
                reader,
                Session {
                    client,
                    pid,
                    daemon_pid,
                    units,
                    settings,
                    notice,
                    views: if views_attached {
                        Some(Views::map(fds)?)
                    } else {
                        None
                    },
                },
            )),
            DaemonMsg::Error { code, message, .. } => Err(ClientError::Refused { code, message }),
            other => Err(ClientError::Unexpected(format!(
                "{other:?} instead of Welcome"
            ))),
        }
    }

    /// Reconnects after the daemon went away, retrying for
    /// `reconnect_for`. Outstanding requests are lost with the old daemon.
    pub fn reconnect(&mut self) -> Result<(), ClientError> {
        let deadline = Instant::now() + self.opts.reconnect_for;
        loop {
            match Self::handshake(&self.opts) {
                Ok((stream, reader, session)) => {
                    self.stream = stream;
                    self.reader = reader;
                    self.session = session;
                    self.inbox.clear();
                    self.fds.clear();
                    self.reconnects += 1;
                    return Ok(());
                }
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// Runs `op`; if the connection dropped, reconnects and runs it again.
    fn retrying<T>(
        &mut self,
        mut op: impl FnMut(&mut Self) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        match op(self) {
            Err(e) if e.is_disconnect() && !self.opts.reconnect_for.is_zero() => {
                self.reconnect()?;
                op(self)
            }
            other => other,
        }
    }

    /// Times this client reconnected after losing the daemon.
    pub fn reconnects(&self) -> u32 {
        self.reconnects
    }

    fn send(&mut self, msg: &ClientMsg) -> Result<(), ClientError> {
        self.stream.write_all(&encode_frame(msg))?;
        Ok(())
    }

    /// The next message from the daemon, blocking. Descriptors that come
    /// with a frame (a call ring's) are kept for whoever waits for it.
    fn read_msg(&mut self) -> Result<DaemonMsg, ClientError> {
        loop {
            if let Some(payload) = self.reader.next_payload()? {
                return Ok(decode_daemon(&payload)?);
            }
            let mut buf = [0u8; 16 * 1024];
            let (n, fds) = recv_with_fds(&self.stream, &mut buf)?;
            if n == 0 {
                return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
            }
            self.fds.extend(fds);
            self.reader.push(&buf[..n]);
        }
    }

    /// Opens a call ring on emulated `unit`: calls pushed with
    /// [`Client::push_call`] reach the daemon's backend without a system
    /// call each, and are answered with `DeviceDone` ([`Client::wait_device`]).
    pub fn open_call_ring(&mut self, unit: UnitId) -> Result<CallRing, ClientError> {
        self.send(&ClientMsg::OpenCallRing { unit })?;
        self.wait_opened(|m| matches!(m, DaemonMsg::CallRingOpened { unit: u, .. } if *u == unit))?;
        let fd = self.fds.pop_front().ok_or_else(|| {
            ClientError::Unexpected("CallRingOpened came without its descriptor".into())
        })?;
        let bell = self.fds.pop_front();
        CallRing::new(unit, fd, bell)
    }

    /// Queues modelled device work on `ring`; `None` when the ring is full
    /// (the backend is that far behind: wait for a `DeviceDone` first).
    pub fn push_call(
        &mut self,
        ring: &mut CallRing,
        exec_ns: u64,
        bytes_in: u64,
        bytes_out: u64,
    ) -> Option<TaskId> {
        self.push_words(ring, [0, exec_ns, bytes_in, bytes_out, 0, 0, 0])
    }

    /// Pushes `words` on `ring` under a fresh task id (word 0 is replaced
    /// by it); `None` when the ring is full.
    fn push_words(&mut self, ring: &mut CallRing, mut words: [u64; 7]) -> Option<TaskId> {
        let task = TaskId(self.next_task);
        words[0] = task.0;
        if !ring.push(&CallPacket(words)) {
            return None;
        }
        self.next_task += 1;
        Some(task)
    }

    /// Opens a kernel ring on `unit`, a unit the daemon runs real kernels
    /// on: a call ring plus a shared data region of `region_bytes` (a
    /// multiple of 8). Write a call's input into [`KernelRing::region`],
    /// push it with [`Client::push_kernel_call`], and read the output
    /// once [`Client::wait_device`] returns for it.
    pub fn open_kernel_ring(
        &mut self,
        unit: UnitId,
        region_bytes: u64,
    ) -> Result<KernelRing, ClientError> {
        self.send(&ClientMsg::OpenKernelRing { unit, region_bytes })?;
        self.wait_opened(
            |m| matches!(m, DaemonMsg::KernelRingOpened { unit: u, .. } if *u == unit),
        )?;
        let (Some(ring_fd), Some(region_fd)) = (self.fds.pop_front(), self.fds.pop_front()) else {
            return Err(ClientError::Unexpected(
                "KernelRingOpened came without its descriptors".into(),
            ));
        };
        let bell = self.fds.pop_front();
        let region = DataRegion::from_fd(region_fd)
            .map_err(|e| ClientError::Unexpected(format!("the daemon's data region: {e}")))?;
        Ok(KernelRing {
            ring: CallRing::new(unit, ring_fd, bell)?,
            region,
        })
    }

    /// Queues a kernel call on `ring` under a fresh task id; `None` when
    /// the ring is full. `aux_offset` is where the kernel's extra argument
    /// is (0 for kernels without one). The daemon checks the call against
    /// the region (`crate::kernel_call::decode`) before it runs it.
    pub fn push_kernel_call(
        &mut self,
        ring: &mut KernelRing,
        kernel: Kernel,
        input: Range<u64>,
        output: Range<u64>,
        aux_offset: u64,
    ) -> Option<TaskId> {
        let call = KernelCall {
            task: TaskId(0),
            kernel,
            input,
            output,
            aux: aux_offset..aux_offset + kernel.aux_len(),
            user: None,
        };
        self.push_words(&mut ring.ring, call.to_words())
    }

    /// Registers a kernel of this client's own, OpenCL C `source` and its
    /// kernel function `entry`, with `unit`; blocks while the unit builds
    /// it. A source that does not build is refused with
    /// `KernelBuildFailed` and the compiler's log in the message.
    pub fn register_kernel(
        &mut self,
        unit: UnitId,
        source: &str,
        entry: &str,
    ) -> Result<RegisteredKernel, ClientError> {
        self.send(&ClientMsg::RegisterKernel {
            unit,
            source: source.to_string(),
            entry: entry.to_string(),
        })?;
        self.wait_for(|m| registration_answer(m, unit, entry))
    }

    /// Queues a call of a registered kernel on `ring` under a fresh task
    /// id; `None` when the ring is full. `args` is where its argument
    /// block ([`crate::user_kernel::ArgBlock`]) lies in the region;
    /// `global` and `local` are the work sizes (`local` 0: the driver's
    /// choice).
    pub fn push_user_call(
        &mut self,
        ring: &mut KernelRing,
        kernel: UserKernelId,
        args: Range<u64>,
        global: u64,
        local: u64,
    ) -> Option<TaskId> {
        let words = [
            0,
            kernel.word(),
            args.start,
            args.end.saturating_sub(args.start),
            global,
            local,
            0,
        ];
        self.push_words(&mut ring.ring, words)
    }

    /// Queues raw packet words on a kernel ring under a fresh task id
    /// (word 0 is replaced by it), unchecked: for tests of the daemon's
    /// defences against malformed calls.
    #[doc(hidden)]
    pub fn push_raw_kernel_words(
        &mut self,
        ring: &mut KernelRing,
        words: [u64; 7],
    ) -> Option<TaskId> {
        self.push_words(&mut ring.ring, words)
    }

    /// Waits for the answer `is_it` recognises to a request that is
    /// refused with an `Error` naming no task (opening a ring).
    fn wait_opened(&mut self, is_it: impl Fn(&DaemonMsg) -> bool) -> Result<(), ClientError> {
        self.wait_for(|m| match m {
            m if is_it(m) => Some(Ok(())),
            other => refusal_of_request(other).map(Err),
        })
    }

    /// Waits for the message `pick` accepts, keeping others for later.
    fn wait_for<T>(
        &mut self,
        mut pick: impl FnMut(&DaemonMsg) -> Option<Result<T, ClientError>>,
    ) -> Result<T, ClientError> {
        if let Some(i) = self.inbox.iter().position(|m| pick(m).is_some()) {
            let msg = self.inbox.remove(i).expect("index from position");
            return pick(&msg).expect("matched above");
        }
        loop {
            let msg = self.read_msg()?;
            if let Some(result) = pick(&msg) {
                return result;
            }
            match msg {
                // Progress notes and errors about requests nobody waits
                // for carry nothing a later call needs.
                DaemonMsg::Delayed { .. } | DaemonMsg::Error { .. } => {}
                other => self.inbox.push_back(other),
            }
        }
    }

    fn fresh_task(&mut self) -> TaskId {
        let t = TaskId(self.next_task);
        self.next_task += 1;
        t
    }

    /// Asks to run a task on `unit` and blocks until the daemon allows it.
    /// Call [`Client::task_completed`] when the task is done.
    pub fn request_dispatch(
        &mut self,
        unit: UnitId,
        expected_ns: u64,
    ) -> Result<Grant, ClientError> {
        self.retrying(|c| {
            let task = c.fresh_task();
            c.send(&ClientMsg::RequestDispatch {
                unit,
                task,
                expected_ns,
            })?;
            c.wait_for(|m| match *m {
                DaemonMsg::Granted {
                    unit: u,
                    task: t,
                    waited_ns,
                } if u == unit && t == task => Some(Ok(Grant {
                    unit,
                    task,
                    waited_ns,
                })),
                ref other => refusal(other, Some(task)).map(Err),
            })
        })
    }

    /// Blocks until the daemon takes `grant`'s slot back (it was held past
    /// the unit's hold limit): the refusal it sent, `WorkTooLong` naming
    /// the task. For a client that holds a grant and has nothing else to
    /// wait for (with [`Client::set_reply_timeout`] to bound the wait).
    pub fn wait_revoked(&mut self, grant: Grant) -> Result<ClientError, ClientError> {
        self.wait_for(|m| match m {
            DaemonMsg::Error {
                code,
                message,
                task: Some(t),
            } if *t == grant.task => Some(Ok(ClientError::Refused {
                code: *code,
                message: message.clone(),
            })),
            _ => None,
        })
    }

    /// Tells the daemon a granted task finished after `ran_ns`. After a
    /// daemon restart the grant no longer exists and nothing is sent.
    pub fn task_completed(&mut self, grant: Grant, ran_ns: u64) -> Result<(), ClientError> {
        let msg = ClientMsg::TaskCompleted {
            unit: grant.unit,
            task: grant.task,
            ran_ns,
        };
        match self.send(&msg) {
            Err(e) if e.is_disconnect() && !self.opts.reconnect_for.is_zero() => self.reconnect(),
            other => other,
        }
    }

    /// Asks for a time-slice lease on `unit` and blocks until the daemon
    /// grants it. Unlike [`Client::request_dispatch`] this does not
    /// reconnect: an intercepted program decides itself what to do when
    /// the daemon is gone (it passes its calls through).
    pub fn request_lease(&mut self, unit: UnitId) -> Result<Lease, ClientError> {
        let task = self.ask_lease(unit)?;
        self.wait_lease(unit, task)
    }

    /// Queues a request for a lease on `unit` without waiting for it (to
    /// be in the unit's queue before giving back the lease held now);
    /// [`Client::wait_lease`] then waits for the grant.
    pub fn ask_lease(&mut self, unit: UnitId) -> Result<TaskId, ClientError> {
        let task = self.fresh_task();
        self.send(&ClientMsg::RequestLease { unit, task })?;
        Ok(task)
    }

    /// Waits for the grant of lease request `task` on `unit`.
    pub fn wait_lease(&mut self, unit: UnitId, task: TaskId) -> Result<Lease, ClientError> {
        self.wait_for(|m| match *m {
            DaemonMsg::LeaseGranted {
                unit: u,
                task: t,
                waited_ns,
                lease_ns,
            } if u == unit && t == task => Some(Ok(Lease {
                unit,
                task,
                waited_ns,
                lease_ns,
            })),
            ref other => refusal(other, Some(task)).map(Err),
        })
    }

    /// Whether the daemon said that others wait for `lease`'s unit
    /// (`LeaseDue`), or took the lease back (held past the unit's hold
    /// limit: `WorkTooLong` naming it): reads what has arrived without
    /// waiting for more. Notices about earlier leases of the unit are
    /// dropped.
    pub fn lease_due(&mut self, lease: Lease) -> Result<bool, ClientError> {
        self.read_pending()?;
        let mut due = false;
        self.inbox.retain(|m| match *m {
            DaemonMsg::LeaseDue { unit, task } if unit == lease.unit => {
                due |= task == lease.task;
                false
            }
            DaemonMsg::Error {
                code: ErrorCode::WorkTooLong,
                task: Some(task),
                ..
            } if task == lease.task => {
                due = true;
                false
            }
            _ => true,
        });
        Ok(due)
    }

    /// The device-memory cap the daemon sent since the last look
    /// (`InterceptTerms`, after `SetDeviceMemory`), if any; reads what has
    /// arrived without waiting for more.
    pub fn new_terms(&mut self) -> Result<Option<Option<u64>>, ClientError> {
        self.read_pending()?;
        let mut terms = None;
        self.inbox.retain(|m| match *m {
            DaemonMsg::InterceptTerms {
                device_memory_limit,
            } => {
                terms = Some(device_memory_limit);
                false
            }
            _ => true,
        });
        Ok(terms)
    }

    /// Caps the device memory of intercepted program `pid` at `limit`
    /// bytes per device; returns the cap now in force.
    pub fn set_device_memory(&mut self, pid: u32, limit: u64) -> Result<u64, ClientError> {
        self.send(&ClientMsg::SetDeviceMemory {
            target_pid: pid,
            limit,
        })?;
        self.wait_for(|m| match m {
            DaemonMsg::InterceptTerms {
                device_memory_limit,
            } => Some(Ok(device_memory_limit.unwrap_or(limit))),
            other => refusal_of_request(other).map(Err),
        })
    }

    /// Moves every message that has already arrived into the inbox,
    /// without blocking.
    fn read_pending(&mut self) -> Result<(), ClientError> {
        self.stream.set_nonblocking(true)?;
        let got = loop {
            if let Some(payload) = self.reader.next_payload()? {
                match decode_daemon(&payload) {
                    Ok(msg) => self.inbox.push_back(msg),
                    Err(e) => break Err(e.into()),
                }
                continue;
            }
            let mut buf = [0u8; 16 * 1024];
            match recv_with_fds(&self.stream, &mut buf) {
                Ok((0, _)) => {
                    break Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
                }
                Ok((n, fds)) => {
                    self.fds.extend(fds);
                    self.reader.push(&buf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break Ok(()),
                Err(e) => break Err(e.into()),
            }
        };
        self.stream.set_nonblocking(false)?;
        got
    }

    /// Ends a lease: what was launched under it has finished. `ran_ns` is
    /// the client's measurement; the daemon charges the wall time it held
    /// the lease.
    pub fn end_lease(&mut self, lease: Lease, ran_ns: u64) -> Result<(), ClientError> {
        self.send(&ClientMsg::TaskCompleted {
            unit: lease.unit,
            task: lease.task,
            ran_ns,
        })
    }

    /// Says this connection is an intercepted program's and returns the
    /// device-memory cap the daemon gives it (`None`: no cap).
    pub fn declare_intercepted(
        &mut self,
        api: crate::message::InterceptApi,
        device_memory_limit: Option<u64>,
    ) -> Result<Option<u64>, ClientError> {
        self.send(&ClientMsg::Intercepted {
            api,
            device_memory_limit,
        })?;
        self.wait_for(|m| match m {
            DaemonMsg::InterceptTerms {
                device_memory_limit,
            } => Some(Ok(*device_memory_limit)),
            other => refusal_of_request(other).map(Err),
        })
    }

    /// Reports the device memory this client holds on `unit`. Not answered.
    pub fn report_device_memory(&mut self, unit: UnitId, bytes: u64) -> Result<(), ClientError> {
        self.send(&ClientMsg::DeviceMemory { unit, bytes })
    }

    /// Tells the daemon what this client ran on units it drives itself
    /// (cumulative counters since it connected) and its mean calls in
    /// flight, for proportional-fair coordination. Not answered.
    pub fn report_demand(
        &mut self,
        units: Vec<crate::message::UnitDemand>,
        in_flight: f64,
        implemented: Vec<UnitId>,
        native: Option<UnitId>,
    ) -> Result<(), ClientError> {
        self.send(&ClientMsg::ReportDemand {
            units,
            in_flight,
            implemented,
            native,
        })
    }

    /// Queues modelled work on an emulated device; see [`Client::wait_device`].
    pub fn submit_device(
        &mut self,
        unit: UnitId,
        exec_ns: u64,
        bytes_in: u64,
        bytes_out: u64,
    ) -> Result<TaskId, ClientError> {
        let task = self.fresh_task();
        self.send(&ClientMsg::SubmitDevice {
            unit,
            task,
            exec_ns,
            bytes_in,
            bytes_out,
        })?;
        Ok(task)
    }

    /// Blocks until device work `task` finishes.
    pub fn wait_device(&mut self, task: TaskId) -> Result<DeviceDone, ClientError> {
        self.wait_for(|m| match *m {
            DaemonMsg::DeviceDone {
                unit,
                task: t,
                waited_ns,
                ran_ns,
            } if t == task => Some(Ok(DeviceDone {
                unit,
                task,
                waited_ns,
                ran_ns,
            })),
            // A broken call ring loses every call queued in it, this one
            // perhaps among them: no waiter may wait on.
            DaemonMsg::Error {
                code: ErrorCode::CallRingCorrupt,
                ref message,
                task: None,
            } => Some(Err(ClientError::Refused {
                code: ErrorCode::CallRingCorrupt,
                message: message.clone(),
            })),
            ref other => refusal(other, Some(task)).map(Err),
        })
    }

    /// Submits device work and waits for it (resubmitting after a daemon restart).
    pub fn run_device(
        &mut self,
        unit: UnitId,
        exec_ns: u64,
        bytes_in: u64,
        bytes_out: u64,
    ) -> Result<DeviceDone, ClientError> {
        self.retrying(|c| {
            let task = c.submit_device(unit, exec_ns, bytes_in, bytes_out)?;
            c.wait_device(task)
        })
    }

    /// Changes settings of this client (`target_pid: None`) or another.
    /// Returns the pid changed and the new settings per unit changed.
    pub fn set_settings(
        &mut self,
        target_pid: Option<u32>,
        unit: Option<UnitId>,
        settings: SettingsRequest,
    ) -> Result<(u32, Vec<(UnitId, WireSettings)>), ClientError> {
        self.retrying(|c| {
            c.send(&ClientMsg::SetSettings {
                target_pid,
                unit,
                settings,
            })?;
            c.wait_for(|m| match m {
                DaemonMsg::SettingsApplied {
                    pid,
                    units,
                    settings,
                } => Some(Ok((
                    *pid,
                    units
                        .iter()
                        .copied()
                        .zip(settings.iter().copied())
                        .collect(),
                ))),
                other => refusal(other, None).map(Err),
            })
        })
    }

    /// Accelerator selection: associates this client with the accelerator
    /// of highest weight that holds `memory_bytes` and has room for another
    /// client, only among units of `class` if given. Asking again replaces
    /// the association; leaving ends it. Refused with
    /// [`ErrorCode::NoAcceleratorFits`] when none does, with the reason.
    pub fn select_accelerator(
        &mut self,
        memory_bytes: u64,
        class: Option<UnitClass>,
    ) -> Result<UnitId, ClientError> {
        self.retrying(|c| {
            c.send(&ClientMsg::SelectAccelerator {
                memory_bytes,
                class,
            })?;
            c.wait_for(|m| match m {
                DaemonMsg::AcceleratorSelected { unit, .. } => Some(Ok(*unit)),
                other => refusal(other, None).map(Err),
            })
        })
    }

    /// The configured domains (containers), their credits, CPU ceilings
    /// and connected members.
    pub fn domains(&mut self) -> Result<Vec<DomainInfo>, ClientError> {
        self.retrying(|c| {
            c.send(&ClientMsg::ListDomains)?;
            c.wait_for(|m| match m {
                DaemonMsg::Domains(list) => Some(Ok(list.clone())),
                other => refusal(other, None).map(Err),
            })
        })
    }

    /// Changes a configured domain's credits and (with `cpu_cap`; `0.0`
    /// removes it) its CPU ceiling in cores. Root or the admin group only.
    pub fn set_domain(
        &mut self,
        name: &str,
        credits: Option<u32>,
        cpu_cap: Option<f64>,
    ) -> Result<Vec<DomainInfo>, ClientError> {
        self.retrying(|c| {
            c.send(&ClientMsg::SetDomain {
                name: name.to_string(),
                credits,
                cpu_cap,
            })?;
            c.wait_for(|m| match m {
                DaemonMsg::Domains(list) => Some(Ok(list.clone())),
                other => refusal(other, None).map(Err),
            })
        })
    }

    /// What the daemon is doing: units, every client, utilisation,
    /// queues. Asks for every page ([`Client::status_page`]) and puts
    /// them together; after a reconnect the walk starts over, so the
    /// report never mixes two daemons.
    pub fn status(&mut self) -> Result<StatusReport, ClientError> {
        self.retrying(|c| {
            crate::status_pages::walk(
                |first| c.ask_status_page(first, u32::MAX),
                ClientError::Unexpected,
            )
        })
    }

    /// One page of the status report: the clients from id `first_client`
    /// on, at most `max_clients` of them (fewer where the daemon's page
    /// fills up), and where the next page starts.
    pub fn status_page(
        &mut self,
        first_client: ClientId,
        max_clients: u32,
    ) -> Result<StatusPage, ClientError> {
        self.retrying(|c| c.ask_status_page(first_client, max_clients))
    }

    fn ask_status_page(
        &mut self,
        first_client: ClientId,
        max_clients: u32,
    ) -> Result<StatusPage, ClientError> {
        self.send(&ClientMsg::Status {
            first_client,
            max_clients,
        })?;
        self.wait_for(|m| match m {
            DaemonMsg::Status(page) => Some(Ok(page.clone())),
            other => refusal(other, None).map(Err),
        })
    }

    /// Hands the connection over to a [`crate::SharedClient`]: the stream,
    /// bytes already read past the last message, and what `Welcome` said.
    pub(crate) fn into_parts(self) -> ClientParts {
        ClientParts {
            opts: self.opts,
            stream: self.stream,
            reader: self.reader,
            next_task: self.next_task,
            session: self.session,
        }
    }

    /// Longest any call waits for the daemon's answer (`None`, the
    /// default: for ever). A call that waits longer fails with an I/O
    /// error of kind `TimedOut` or `WouldBlock`; an answer that comes later
    /// is read (and kept or dropped) by the next call.
    pub fn set_reply_timeout(&mut self, timeout: Option<Duration>) -> Result<(), ClientError> {
        self.stream.set_read_timeout(timeout)?;
        Ok(())
    }

    /// Says goodbye; the daemon releases everything this client held.
    pub fn goodbye(mut self) -> Result<(), ClientError> {
        self.send(&ClientMsg::Goodbye)
    }
}

/// A client's call ring on one emulated unit (see [`Client::open_call_ring`]).
#[derive(Debug)]
pub struct CallRing {
    pub unit: UnitId,
    producer: RingProducer,
    /// Rung after each push, so the daemon's poller wakes at once.
    doorbell: Doorbell,
}

impl CallRing {
    fn new(
        unit: UnitId,
        ring_fd: OwnedFd,
        bell_fd: Option<OwnedFd>,
    ) -> Result<CallRing, ClientError> {
        let producer = RingProducer::from_fd(ring_fd)
            .map_err(|e| ClientError::Unexpected(format!("the daemon's call ring: {e}")))?;
        let bell_fd = bell_fd.ok_or_else(|| {
            ClientError::Unexpected("the ring came without the daemon's doorbell".into())
        })?;
        let doorbell = Doorbell::from_fd(bell_fd)
            .map_err(|e| ClientError::Unexpected(format!("the daemon's doorbell: {e}")))?;
        Ok(CallRing {
            unit,
            producer,
            doorbell,
        })
    }

    /// Pushes `packet` and rings the daemon if its poller sleeps; `false`
    /// when the ring is full.
    fn push(&mut self, packet: &CallPacket) -> bool {
        let pushed = self.producer.push(packet);
        if pushed {
            self.doorbell.ring_if_parked();
        }
        pushed
    }
}

/// A kernel registered with a unit ([`Client::register_kernel`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisteredKernel {
    pub unit: UnitId,
    pub kernel: UserKernelId,
    /// Its parameters, as the unit's compiler saw them: what the argument
    /// block must hold.
    pub signature: KernelSignature,
    /// The compiler's log (warnings), if any.
    pub build_log: String,
    /// The unit had built the same source already.
    pub cached: bool,
}

/// A client's kernel ring on one served unit (see
/// [`Client::open_kernel_ring`]): the call ring and the data region the
/// calls' inputs and outputs live in.
#[derive(Debug)]
pub struct KernelRing {
    ring: CallRing,
    region: DataRegion,
}

impl KernelRing {
    pub fn unit(&self) -> UnitId {
        self.ring.unit
    }

    /// The shared data region: write inputs, read outputs.
    pub fn region(&self) -> &DataRegion {
        &self.region
    }
}

impl CallRing {
    /// Publishes `tail` as the ring's tail, breaking its protocol: only for
    /// tests of the daemon's defences against a lying client.
    #[doc(hidden)]
    pub fn publish_raw_tail(&self, tail: u64) {
        self.producer.publish_raw_tail(tail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The daemon names a registered kernel by its name alone; a CUDA
    /// client registers a declaration, and must know the answer for its
    /// own (one that did not waited for ever on a GPU).
    #[test]
    fn a_registration_is_answered_under_the_kernels_name() {
        let registered = |entry: &str| DaemonMsg::KernelRegistered {
            unit: UnitId(3),
            kernel: UserKernelId(7),
            signature: KernelSignature {
                entry: entry.into(),
                params: Vec::new(),
            },
            build_log: String::new(),
            cached: false,
        };
        let declaration = "scale(const ptr, ptr, f32, u32)";
        let got = registration_answer(&registered("scale"), UnitId(3), declaration);
        assert_eq!(got.unwrap().unwrap().kernel, UserKernelId(7));
        assert!(registration_answer(&registered("scale"), UnitId(3), "scale").is_some());
        assert!(registration_answer(&registered("scale"), UnitId(4), declaration).is_none());
        assert!(registration_answer(&registered("scaled"), UnitId(3), declaration).is_none());
        assert!(registration_answer(&registered("add"), UnitId(3), " add ").is_some());
    }

    #[test]
    fn root_and_the_clients_own_daemon_are_trusted_and_others_named() {
        assert_eq!(check_daemon_uid(0, 1000, None), Ok(()));
        assert_eq!(check_daemon_uid(1000, 1000, None), Ok(()));
        assert_eq!(check_daemon_uid(0, 0, None), Ok(()));
        let other = check_daemon_uid(1001, 1000, None).unwrap_err();
        assert!(
            other.contains("uid 1001")
                && other.contains("(uid 1000)")
                && other.contains("HETSCHED_DAEMON_UID"),
            "{other}"
        );
        // A root client trusts no other user's daemon either.
        assert!(check_daemon_uid(1000, 0, None).is_err());
        // HETSCHED_DAEMON_UID adds the service account it names.
        assert_eq!(check_daemon_uid(990, 1000, Some(990)), Ok(()));
        assert_eq!(check_daemon_uid(0, 1000, Some(990)), Ok(()));
        assert_eq!(check_daemon_uid(1000, 1000, Some(990)), Ok(()));
        let wrong = check_daemon_uid(1001, 1000, Some(990)).unwrap_err();
        assert!(wrong.contains("HETSCHED_DAEMON_UID=990"), "{wrong}");
    }

    /// A listener of this process's own user passes the check; nothing
    /// listening is a plain connect error naming the path.
    #[test]
    fn a_daemon_of_the_same_user_is_accepted() {
        let dir = std::env::temp_dir().join(format!("hetsched-peer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let missing = connect_trusted(&path).unwrap_err();
        assert!(
            matches!(&missing, ClientError::Connect { path: p, .. } if *p == path),
            "{missing}"
        );
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        connect_trusted(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
