//! The server: the Unix socket, one thread per connection, and one timer
//! thread that ends emulated device work on time, runs the agents' 10 ms
//! accounting, publishes the views and runs the CPU agent's /proc scan.
//!
//! All state sits behind one mutex. Replies are decided and sent under it
//! (sends never block: `MSG_DONTWAIT`), which keeps each client's messages
//! in the order the monitor decided them; a client that does not read its
//! socket is disconnected rather than allowed to stall the others.

use crate::agent::UnitSetup;
use crate::monitor::{Monitor, MonitorConfig};
use crate::outbox::Outbox;
use crate::privilege::Peer;
use crate::procfs;
use crate::store::{ProcessKey, SettingsStore, StoreError};
use hetsched_core::ids::{ClientId, Ns};
use hetsched_protocol::{
    ClientMsg, DaemonMsg, DaemonStatus, ErrorCode, FrameReader, Role, decode_client, encode_frame,
    send_with_fds,
};
use hetsched_views::{CpuKindView, GlobalUnit, GlobalWriter, PrivateWriter, ViewError};
use rustix::net::SendFlags;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Longest client name kept (longer ones are cut).
const MAX_NAME_CHARS: usize = 64;

/// How often stored settings of exited processes are dropped.
const STORE_GC_EVERY: Duration = Duration::from_secs(5);

/// Everything the server needs to start.
#[derive(Clone, Debug)]
pub struct DaemonSetup {
    pub socket: PathBuf,
    pub state_path: PathBuf,
    pub monitor: MonitorConfig,
    pub units: Vec<UnitSetup>,
    pub tick: Duration,
    pub cpu_scan: Duration,
    pub max_frame_bytes: usize,
    /// OS CPU number → index among the CPU units (for the CPU agent).
    pub kind_of_cpu: Vec<Option<usize>>,
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("another hetsched daemon is already listening on {0}")]
    AlreadyRunning(PathBuf),
    #[error("cannot use socket {path}: {source}")]
    Socket {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot create the shared-memory views: {0}")]
    Views(#[from] ViewError),
    #[error("no units to manage: enable CPU discovery or declare [[emulated]] units")]
    NoUnits,
}

struct Conn {
    stream: UnixStream,
    private: Option<PrivateWriter>,
}

struct State {
    monitor: Monitor,
    conns: HashMap<ClientId, Conn>,
    global: GlobalWriter,
    cpu_kinds: Vec<CpuKindView>,
    exclusive: BTreeMap<ClientId, Vec<u32>>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the timer thread when new work may move its next deadline.
    wake: Condvar,
    epoch: Instant,
    setup: DaemonSetup,
    cpu_unit_slots: Vec<u32>,
}

impl Shared {
    fn now(&self) -> Ns {
        self.epoch.elapsed().as_nanos() as Ns
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock is a bug; keep serving the others
        // with whatever state it left rather than failing every client.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn status_header(&self) -> DaemonStatus {
        DaemonStatus {
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            uptime_ns: self.now(),
            socket: self.setup.socket.display().to_string(),
        }
    }

    fn save_store(&self, state: &mut State) {
        if let Some(store) = state.monitor.take_dirty_store() {
            if let Err(e) = store.save(&self.setup.state_path) {
                eprintln!("hetsched daemon: {e}");
            }
        }
    }
}

/// A bound daemon, ready to serve.
pub struct Server {
    shared: Arc<Shared>,
    listener: UnixListener,
}

impl Server {
    /// Loads persisted settings, creates the views and binds the socket
    /// (replacing a stale socket file, refusing if a daemon answers on it).
    pub fn bind(setup: DaemonSetup) -> Result<Server, DaemonError> {
        if setup.units.is_empty() {
            return Err(DaemonError::NoUnits);
        }
        let mut store = SettingsStore::load(&setup.state_path)?;
        store.retain_alive(procfs::alive);
        let cpu_unit_slots: Vec<u32> = setup
            .units
            .iter()
            .filter(|u| u.unit.class == hetsched_core::unit::UnitClass::Cpu)
            .map(|u| u.unit.slots)
            .collect();
        let global = GlobalWriter::create(setup.units.len(), cpu_unit_slots.len())?;
        let listener = bind_socket(&setup.socket)?;
        let monitor = Monitor::new(setup.units.clone(), setup.monitor.clone(), store);
        let state = State {
            monitor,
            conns: HashMap::new(),
            global,
            cpu_kinds: vec![CpuKindView::default(); cpu_unit_slots.len()],
            exclusive: BTreeMap::new(),
        };
        Ok(Server {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                wake: Condvar::new(),
                epoch: Instant::now(),
                setup,
                cpu_unit_slots,
            }),
            listener,
        })
    }

    pub fn socket(&self) -> &std::path::Path {
        &self.shared.setup.socket
    }

    /// Serves until the process ends.
    pub fn run(self) -> std::io::Result<()> {
        let timer = Arc::clone(&self.shared);
        std::thread::Builder::new()
            .name("hetsched-timer".into())
            .spawn(move || run_timer(&timer))?;
        for stream in self.listener.incoming() {
            match stream {
                Ok(stream) => {
                    let shared = Arc::clone(&self.shared);
                    let spawned = std::thread::Builder::new()
                        .name("hetsched-conn".into())
                        .spawn(move || serve_connection(&shared, stream));
                    if let Err(e) = spawned {
                        eprintln!("hetsched daemon: cannot start a connection thread: {e}");
                    }
                }
                Err(e) => eprintln!("hetsched daemon: accept failed: {e}"),
            }
        }
        Ok(())
    }
}

fn bind_socket(path: &std::path::Path) -> Result<UnixListener, DaemonError> {
    let err = |source| DaemonError::Socket {
        path: path.into(),
        source,
    };
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(DaemonError::AlreadyRunning(path.into()));
        }
        // Left behind by a daemon that died: nobody answers on it.
        std::fs::remove_file(path).map_err(err)?;
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::create_dir_all(dir).map_err(err)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).map_err(err)?;
        }
    }
    let listener = UnixListener::bind(path).map_err(err)?;
    // Anyone may connect; what a client may do is decided from its
    // credentials (SO_PEERCRED), not from who could open the socket.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(err)?;
    Ok(listener)
}

/// Sends decided messages. A client whose socket cannot take a frame
/// whole right now is cut off (its reader thread then cleans up).
fn deliver(state: &mut State, out: &mut Outbox) {
    for (to, msg) in out.drain() {
        let Some(conn) = state.conns.get(&to) else {
            continue;
        };
        let frame = encode_frame(&msg);
        let sent = rustix::net::send(
            &conn.stream,
            &frame,
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        );
        if !matches!(sent, Ok(n) if n == frame.len()) {
            let _ = conn.stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

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
    })
}

/// One connection, from hello to goodbye (or death).
fn serve_connection(shared: &Shared, mut stream: UnixStream) {
    let peer = match peer_of(&stream) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("hetsched daemon: no peer credentials, dropping connection: {e}");
            return;
        }
    };
    let mut reader = FrameReader::new(shared.setup.max_frame_bytes);
    let mut client: Option<ClientId> = None;
    let mut said_goodbye = false;
    let mut buf = vec![0u8; 64 * 1024];
    'conn: loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        reader.push(&buf[..n]);
        loop {
            let msg = match reader.next_payload().and_then(|p| match p {
                Some(p) => decode_client(&p).map(Some),
                None => Ok(None),
            }) {
                Ok(Some(msg)) => msg,
                Ok(None) => break,
                Err(e) => {
                    // Framing is lost: say why and drop this client only.
                    send_now(
                        &stream,
                        &DaemonMsg::Error {
                            code: ErrorCode::BadFrame,
                            message: format!("{e}; closing the connection"),
                            task: None,
                        },
                    );
                    break 'conn;
                }
            };
            match (client, msg) {
                (
                    None,
                    ClientMsg::Hello {
                        name,
                        role,
                        requested,
                    },
                ) => match hello(shared, &stream, &peer, name, role, requested) {
                    Some(id) => client = Some(id),
                    None => break 'conn,
                },
                (None, _) => {
                    send_now(
                        &stream,
                        &DaemonMsg::Error {
                            code: ErrorCode::BadSequence,
                            message: "the first message must be Hello".into(),
                            task: None,
                        },
                    );
                    break 'conn;
                }
                (Some(_), ClientMsg::Goodbye) => {
                    said_goodbye = true;
                    break 'conn;
                }
                (Some(id), msg) => handle(shared, id, &peer, msg),
            }
        }
    }
    if let Some(id) = client {
        let gone = said_goodbye
            || !procfs::alive(ProcessKey {
                pid: peer.pid,
                start_time: peer.start_time,
            });
        let mut state = shared.lock();
        let mut out = Outbox::default();
        let now = shared.now();
        state.monitor.disconnect(id, gone, now, &mut out);
        state.conns.remove(&id);
        state.exclusive.remove(&id);
        deliver(&mut state, &mut out);
        shared.save_store(&mut state);
        drop(state);
        shared.wake.notify_one();
    }
}

/// Registers a client and sends its Welcome (with the view descriptors).
fn hello(
    shared: &Shared,
    stream: &UnixStream,
    peer: &Peer,
    name: String,
    role: Role,
    requested: hetsched_protocol::SettingsRequest,
) -> Option<ClientId> {
    let name: String = name.chars().take(MAX_NAME_CHARS).collect();
    let writer = stream.try_clone().ok()?;
    let mut state = shared.lock();
    let now = shared.now();
    let private = if role == Role::Application {
        let n_kinds = shared.cpu_unit_slots.len();
        match PrivateWriter::create(shared.setup.units.len(), n_kinds) {
            Ok(p) => Some(p),
            Err(e) => {
                drop(state);
                send_now(
                    stream,
                    &DaemonMsg::Error {
                        code: ErrorCode::BadSequence,
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
    let (id, welcome) = state
        .monitor
        .hello(peer.clone(), name, role, requested, now);
    let mut conn = Conn {
        stream: writer,
        private,
    };
    if let Some(p) = conn.private.as_mut() {
        let views = state.monitor.client_views(id, now);
        let _ = p.publish(now, id.0, &views, &vec![0; shared.cpu_unit_slots.len()]);
    }
    let frame = encode_frame(&welcome);
    let sent = match conn.private.as_ref() {
        Some(p) => send_with_fds(stream, &frame, &[state.global.fd(), p.fd()]),
        None => send_with_fds(stream, &frame, &[]),
    };
    state.conns.insert(id, conn);
    shared.save_store(&mut state);
    drop(state);
    if sent.is_err() {
        // Registered but unreachable: the read loop sees the closed socket
        // and disconnects it.
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }
    Some(id)
}

fn refuse(
    out: &mut Outbox,
    to: ClientId,
    (code, message): (ErrorCode, String),
    task: Option<hetsched_core::ids::TaskId>,
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

/// Everything after Hello.
fn handle(shared: &Shared, id: ClientId, _peer: &Peer, msg: ClientMsg) {
    let mut state = shared.lock();
    let now = shared.now();
    let mut out = Outbox::default();
    let mut wake = false;
    let st = &mut *state;
    match msg {
        ClientMsg::Hello { .. } => refuse(
            &mut out,
            id,
            (ErrorCode::BadSequence, "Hello may only be sent once".into()),
            None,
        ),
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
                Ok(reply) => out.push(id, reply),
                Err(r) => refuse(&mut out, id, r, None),
            }
            shared.save_store(st);
            wake = true;
        }
        ClientMsg::Status => {
            let report = st.monitor.status(shared.status_header(), now);
            out.push(id, DaemonMsg::Status(report));
        }
        ClientMsg::Goodbye => {}
    }
    deliver(st, &mut out);
    drop(state);
    if wake {
        shared.wake.notify_one();
    }
}

/// Publishes both pages of views.
fn publish(shared: &Shared, state: &mut State, now: Ns) {
    let units: Vec<GlobalUnit> = state
        .monitor
        .unit_publications(now)
        .into_iter()
        .map(|p| GlobalUnit {
            view: p.view,
            queued_by_class: p.queued_by_class,
            busy_ns_total: p.busy_ns_total,
        })
        .collect();
    let _ = state.global.publish(now, &units, &state.cpu_kinds);
    let n_kinds = shared.cpu_unit_slots.len();
    let zeros = vec![0u32; n_kinds];
    for (id, conn) in state.conns.iter_mut() {
        if let Some(p) = conn.private.as_mut() {
            let views = state.monitor.client_views(*id, now);
            let excl = state.exclusive.get(id).unwrap_or(&zeros);
            let _ = p.publish(now, id.0, &views, excl);
        }
    }
}

/// The CPU agent's scan: runnable threads per nice level per CPU kind
/// (I/O, done without the lock), then the min-funding hint.
fn scan_cpus(shared: &Shared) {
    let kinds = shared.cpu_unit_slots.len();
    if kinds == 0 {
        return;
    }
    let by_nice = procfs::runnable_by_nice(&shared.setup.kind_of_cpu, kinds);
    let pids: Vec<u32> = shared
        .lock()
        .monitor
        .clients()
        .filter(|c| c.role == Role::Application)
        .map(|c| c.peer.pid)
        .collect();
    let threads: HashMap<u32, u32> = pids.into_iter().map(|p| (p, procfs::threads(p))).collect();
    let mut state = shared.lock();
    let exclusive = state
        .monitor
        .exclusive_cores(|pid| threads.get(&pid).copied().unwrap_or(1));
    let mut used = vec![0u32; kinds];
    for cores in exclusive.values() {
        for (k, c) in cores.iter().enumerate() {
            used[k] += c;
        }
    }
    state.cpu_kinds = (0..kinds)
        .map(|k| CpuKindView {
            threads_by_nice: by_nice[k],
            time_ratio_by_nice: procfs::time_ratios(&by_nice[k]),
            exclusive_cores_free: shared.cpu_unit_slots[k].saturating_sub(used[k]),
        })
        .collect();
    state.exclusive = exclusive;
}

fn run_timer(shared: &Shared) {
    let tick = shared.setup.tick.as_nanos() as Ns;
    let scan_every = shared.setup.cpu_scan.as_nanos() as Ns;
    let gc_every = STORE_GC_EVERY.as_nanos() as Ns;
    let mut next_tick = shared.now() + tick;
    let mut next_scan = shared.now();
    let mut next_gc = shared.now() + gc_every;
    let mut out = Outbox::default();
    loop {
        let now = shared.now();
        if now >= next_scan {
            scan_cpus(shared);
            next_scan = now + scan_every;
        }
        let mut state = shared.lock();
        let now = shared.now();
        state.monitor.advance(now, &mut out);
        if now >= next_tick {
            state.monitor.tick(now, &mut out);
            publish(shared, &mut state, now);
            next_tick += tick;
            if next_tick <= now {
                next_tick = now + tick;
            }
        }
        if now >= next_gc {
            state.monitor.forget_dead(procfs::alive);
            shared.save_store(&mut state);
            next_gc = now + gc_every;
        }
        deliver(&mut state, &mut out);
        let deadline = state
            .monitor
            .next_deadline(now)
            .map_or(next_tick, |d| d.min(next_tick))
            .min(next_scan);
        let wait = Duration::from_nanos(deadline.saturating_sub(shared.now()));
        if !wait.is_zero() {
            let _ = shared.wake.wait_timeout(state, wait);
        }
    }
}
