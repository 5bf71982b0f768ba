//! The server: binds the socket and serves its connections from a few
//! worker threads ([`crate::server::reactor`], [`crate::server::connection`]), one timer
//! thread ([`crate::server::timer`]: emulated device work, the 10 ms tick, view
//! publication) and the CPU agent's thread ([`crate::server::cpu_agent`]: the
//! /proc scan).
//!
//! The state lock ([`Shared::lock`], [`State`]) holds only what must be
//! decided in one order: the monitor, the connections (with their pages
//! and rings) and the global page. Replies are decided and sent under it
//! (sends never block: `MSG_DONTWAIT`), which keeps each client's messages
//! in the order the monitor decided them; a client that does not read its
//! socket is disconnected rather than allowed to stall the others.
//! (Sending outside the lock was tried and was not faster; a single-thread
//! epoll loop was 2.3× slower than a thread per connection, and the
//! workers that replaced both cost 1.4× at p50 for 64 bursty clients and
//! nothing for idle ones: docs/PERFORMANCE.md, "Dispatch gate" and
//! "Thousands of clients".)
//!
//! Everything else lives in [`Shared`], outside it:
//! - built before any thread starts and never changed: the set-up, the
//!   executors' queues ([`crate::kernel_jobs::KernelJobs`]);
//! - results of threads that work apart, each under a small lock of its
//!   own: the CPU agent's figures ([`crate::cpu_figures::CpuFigures`]),
//!   the coordinator's targets and summary
//!   ([`crate::coordination_results::CoordinationResults`]), the
//!   applications' demand reports ([`crate::demand_report::DemandReports`]),
//!   the settings store waiting to be written
//!   ([`crate::store_writer::StoreWriter`]).
//!
//! # Lock order
//!
//! 1. A connection's slot in the reactor ([`crate::server::reactor`]): held by the
//!    one worker serving that connection while it reads the connection's
//!    non-blocking socket and serves what came, a Hello's /proc reads
//!    included (the handshake sweep is the only other taker, so nobody
//!    else waits for them).
//! 2. The state lock.
//! 3. At most **one** of the small locks above. Holding a small lock, a
//!    thread takes no other lock; it holds it only to swap, clone or
//!    insert a value: no work, no I/O, no waiting.
//!
//! The fork log's lock ([`crate::fork_watch`]) is taken with no other held
//! (by its watcher thread, and by the reactor as it accepts a connection);
//! it is held while that socket's queued events are read, non-blocking,
//! with the new processes' start times, a bounded batch at a time.
//!
//! A thread may skip levels but never take a lock of a lower number while
//! it holds one of a higher. Apart from that slot, no lock is held across
//! blocking I/O: /proc reads, file writes and fsyncs, cgroup and nice
//! changes, solves and kernels run with none held. What happens under
//! the state lock is the monitor's decisions, writes to the shared-memory
//! pages and non-blocking sends.

use crate::agent::UnitSetup;
use crate::checked_dir::{BindError, CheckedDir, FileId};
use crate::coordination_results::CoordinationResults;
use crate::cpu_figures::CpuFigures;
use crate::demand_report::DemandReports;
use crate::host::{Host, MetricsBindError, MetricsHttp};
use crate::kernel_exec::{ExecJob, KernelJob};
use crate::kernel_jobs::{Executor, KernelJobs};
use crate::latest::Latest;
use crate::monitor::{Monitor, MonitorConfig};
use crate::outbox::Outbox;
use crate::procfs;
use crate::store::{SettingsStore, StoreError};
use crate::store_writer::{MIN_INTERVAL, StoreFlush, StoreWriter};
use hetsched_core::ids::{ClientId, Ns};
use hetsched_protocol::{DaemonStatus, encode_frame};
use hetsched_views::doorbell::Doorbell;
use hetsched_views::{GlobalWriter, PrivateWriter, ViewError};
use rustix::net::SendFlags;
use std::collections::{BTreeMap, HashMap};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

mod connection;
#[cfg(feature = "coordination")]
mod coordinator;
mod cpu_agent;
mod executor;
mod reactor;
mod timer;

/// Everything the server needs to start.
#[derive(Clone, Debug)]
pub struct DaemonSetup {
    pub socket: PathBuf,
    pub state_path: PathBuf,
    pub monitor: MonitorConfig,
    pub units: Vec<UnitSetup>,
    pub tick: Duration,
    pub cpu_scan: Duration,
    /// How often the CPU agent publishes the CPU schedule (`HS`).
    pub cpu_schedule: Duration,
    /// The CPU agent maps each application's class to the nice level of
    /// its threads ([`crate::nice_map`]; applied by the host's
    /// [`crate::host::CpuControls`]).
    pub cpu_nice_from_shares: bool,
    /// The CPU agent weighs each application's cgroup by its CPU credits
    /// ([`crate::cpu_weights`]; applied by the host's controls).
    pub cpu_cgroups: bool,
    /// Memory and client cap of the units accelerator selection chooses
    /// among, by unit name (others get the defaults).
    pub accelerator_limits: BTreeMap<String, crate::monitor::AcceleratorLimits>,
    /// Proportional-fair coordination (the coordinator thread; without
    /// the `coordination` feature it is always off).
    pub coordination: crate::config::Coordination,
    /// The coordinator's settings (mode and floor) when it is on.
    pub coordinator: hetsched_core::coordination::CoordinatorConfig,
    pub max_frame_bytes: usize,
    /// Connections per user and in all ([`crate::admission`]).
    pub connection_limits: crate::admission::ConnectionLimits,
    /// OS CPU number → index among the CPU units (for the CPU agent).
    pub kind_of_cpu: Vec<Option<usize>>,
    /// The devices of the units the daemon runs kernels on; the server
    /// starts one executor thread for each.
    pub kernel_backends: crate::kernel_exec::Backends,
    /// How the served units start the executor processes that build and
    /// run clients' registered kernels.
    pub kernel_sandbox: crate::kernel_exec::SandboxSpec,
    /// Where `/metrics` is served over HTTP, if anywhere (by the host's
    /// listener).
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// What the host applies and serves beyond the monitor: none for an
    /// embedded monitor, hetsched-daemon's for the daemon.
    pub host: Host,
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
    #[error("cannot create the rings' doorbell page: {0}")]
    Doorbell(#[from] hetsched_views::doorbell::DoorbellError),
    #[error("no units to manage: enable CPU discovery or declare [[emulated]] units")]
    NoUnits,
    #[error(transparent)]
    Metrics(#[from] MetricsBindError),
    /// A path the daemon would write that is unsafe to use (a directory
    /// others may write, a file that is not a socket at the socket path).
    #[error("{0}")]
    Refused(String),
}

/// A client connection as the state knows it.
pub(crate) struct Conn {
    /// For sending; the connection's thread reads from the same socket.
    /// Shared rather than `try_clone`d so that a connection costs the
    /// daemon one descriptor, not two.
    pub stream: Arc<UnixStream>,
    /// Its private view page (applications only).
    pub private: Option<PrivateWriter>,
    /// A reply could not be sent whole: the socket is shut down and the
    /// connection's thread stops serving it.
    pub cut_off: bool,
    /// Its call rings (Pegasus's per-client queues), drained by the timer
    /// thread; dropped, with whatever was queued, when the client goes.
    pub rings: Vec<OpenRing>,
}

/// One of a client's call rings.
pub(crate) struct OpenRing {
    pub unit: hetsched_core::ids::UnitId,
    pub ring: hetsched_views::call_ring::RingConsumer,
    /// For a kernel ring, the data region its calls read and write.
    pub region: Option<Arc<hetsched_views::data_region::DataRegion>>,
}

/// Everything behind [`Shared::lock`]: the ordering state.
pub(crate) struct State {
    pub monitor: Monitor,
    pub conns: HashMap<ClientId, Conn>,
    pub global: GlobalWriter,
    /// Which private pages the timer rewrites each tick.
    pub pages: crate::page_rounds::PageRounds,
    /// Clients that have opened call rings (the timer drains only theirs).
    pub ring_holders: std::collections::BTreeSet<ClientId>,
}

impl State {
    /// Sends decided messages ([`Shared::deliver`]).
    fn send_out(&mut self, out: &mut Outbox) {
        for (to, msg) in out.drain() {
            let Some(conn) = self.conns.get_mut(&to).filter(|c| !c.cut_off) else {
                continue;
            };
            let frame = encode_frame(&msg);
            let sent = rustix::net::send(
                &conn.stream,
                &frame,
                SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
            );
            if !matches!(sent, Ok(n) if n == frame.len()) {
                conn.cut_off = true;
                let _ = conn.stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

impl Shared {
    /// Sends decided messages, after handing the kernel calls among them
    /// to the executors. A client whose socket cannot take a frame whole
    /// right now is cut off (its reader thread then cleans up).
    pub fn deliver(&self, state: &mut State, out: &mut Outbox) {
        self.hand_out_kernel_calls(state, out);
        state.send_out(out);
    }

    /// Hands the kernel calls the policies started to their units'
    /// executors, with the client's region. A call that cannot reach an
    /// executor (none running: an embedded monitor) fails at once, so its
    /// slot is not held for ever; what that frees may start more.
    fn hand_out_kernel_calls(&self, state: &mut State, out: &mut Outbox) {
        loop {
            let starts = out.take_kernel_starts();
            if starts.is_empty() {
                return;
            }
            for start in starts {
                let job = KernelJob {
                    client: start.client,
                    user: state.monitor.client_user(start.client),
                    call: start.call.call,
                    region: start.call.region,
                };
                let sent = self.kernel_jobs.send(start.unit, ExecJob::Call(job));
                if let Err(ExecJob::Call(job)) = sent {
                    state.monitor.kernel_done(
                        start.unit,
                        job.client,
                        &job.call,
                        0,
                        Err("the unit has no executor running".into()),
                        self.now(),
                        out,
                    );
                }
            }
        }
    }
}

/// What every thread of the daemon shares.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Where the timer thread sleeps: clients ring it after pushing a ring
    /// call, and the daemon's threads (`Shared::wake`) when new work may
    /// move its next deadline.
    pub doorbell: Doorbell,
    epoch: Instant,
    pub setup: DaemonSetup,
    /// Cores of each CPU unit, in CPU-kind order.
    pub cpu_unit_slots: Vec<u32>,
    /// Writes the settings store off the lock ([`Shared::save_store`]).
    store_writer: StoreWriter,
    /// Each served unit's executor queue (fixed before threads start).
    pub kernel_jobs: KernelJobs,
    /// The CPU agent's latest figures, for the pages.
    pub cpu_figures: Latest<CpuFigures>,
    /// The coordinator's latest results (default while it is off).
    pub coordination: Latest<CoordinationResults>,
    /// What `/metrics` serves: the timer's latest snapshot, while a
    /// listener serves it ([`crate::metrics`]).
    pub metrics: Latest<crate::metrics::Published>,
    pub metrics_on: bool,
    /// Who forked whom, from the kernel's process events, where they can
    /// be had (root): [`crate::fork_watch`].
    pub fork_watch: Option<crate::fork_watch::ForkWatch>,
    /// Demand reports waiting for the coordinator.
    pub demand_reports: DemandReports,
    /// Set when the server stops ([`RunningServer::stop`]).
    pub(crate) stop: hetsched_platform::stop::StopSignal,
}

impl Shared {
    /// Wakes the timer thread: new work may move its next deadline.
    pub fn wake(&self) {
        self.doorbell.ring();
    }

    /// The daemon's clock: ns since it started.
    pub fn now(&self) -> Ns {
        self.epoch.elapsed().as_nanos() as Ns
    }

    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock is a bug; keep serving the others
        // with whatever state it left rather than failing every client.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn status_header(&self) -> DaemonStatus {
        DaemonStatus {
            version: env!("CARGO_PKG_VERSION").to_string(),
            pid: std::process::id(),
            uptime_ns: self.now(),
            socket: self.setup.socket.display().to_string(),
        }
    }

    /// If the monitor changed the settings store, hands a copy to the
    /// writer thread, which writes the file after the lock is dropped, at
    /// most every [`crate::store_writer::MIN_INTERVAL`] (the latest copy).
    pub fn save_store(&self, state: &mut State) {
        if let Some(store) = state.monitor.take_dirty_store() {
            self.store_writer.submit(store.clone());
        }
    }
}

/// The proc connector, for a daemon that runs as root (others cannot
/// subscribe); `None`, said once, where it cannot be opened.
fn open_fork_watch() -> Option<crate::fork_watch::ForkWatch> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    match crate::fork_watch::ForkWatch::open() {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(
                "process events (proc connector): {e}; a demoted process's child that is \
                 orphaned and connects within a second of its fork keeps no demotion"
            );
            None
        }
    }
}

/// A bound daemon, ready to serve.
pub struct Server {
    shared: Arc<Shared>,
    listener: UnixListener,
    /// The socket file this daemon bound (none when systemd passed it).
    socket_id: Option<FileId>,
    metrics: Option<Box<dyn MetricsHttp>>,
    /// The served units' executors, started by [`Server::spawn`].
    executors: Vec<Executor>,
}

impl Server {
    /// Creates the views, binds the socket (replacing a stale socket file,
    /// refusing if a daemon answers on it), loads persisted settings (moving
    /// a bad state file aside: [`SettingsStore::load_or_recover`]) and
    /// starts their writer thread.
    pub fn bind(setup: DaemonSetup) -> Result<Server, DaemonError> {
        Self::bind_with(setup, None)
    }

    /// [`Server::bind`], on `listener` when one is given (systemd socket
    /// activation: hetsched-daemon's `activation`); the socket path is then the
    /// listener's.
    pub fn bind_with(
        mut setup: DaemonSetup,
        listener: Option<UnixListener>,
    ) -> Result<Server, DaemonError> {
        if setup.units.is_empty() {
            return Err(DaemonError::NoUnits);
        }
        #[cfg(not(feature = "coordination"))]
        if setup.coordination.is_on() {
            tracing::warn!(
                "coordination: this monitor is built without the coordinator \
                 (hetsched-monitor's `coordination` feature); it is off"
            );
            setup.coordination = crate::config::Coordination::Off;
        }
        let cpu_unit_slots: Vec<u32> = setup
            .units
            .iter()
            .filter(|u| u.unit.class == hetsched_core::unit::UnitClass::Cpu)
            .map(|u| u.unit.slots)
            .collect();
        let global = GlobalWriter::create(setup.units.len(), cpu_unit_slots.len())?;
        let doorbell = Doorbell::create()?;
        let metrics = match (setup.metrics_listen, setup.host.metrics) {
            (Some(addr), Some(bind)) => Some(bind(addr)?),
            (Some(addr), None) => {
                tracing::warn!(
                    "metrics_listen {addr}: this monitor has no /metrics listener \
                     (the daemon's); metrics are not served"
                );
                None
            }
            (None, _) => None,
        };
        // Refused before anything is bound: a state directory others may
        // write (its files are opened through it, never by following a link).
        if let Some(dir) = setup.state_path.parent() {
            CheckedDir::open(dir, Some(0o755)).map_err(|e| DaemonError::Refused(e.to_string()))?;
        }
        let (listener, socket_id) = match listener {
            Some(l) => {
                if let Some(path) = l
                    .local_addr()
                    .ok()
                    .and_then(|a| a.as_pathname().map(PathBuf::from))
                {
                    setup.socket = path;
                }
                (l, None)
            }
            None => {
                let (l, id) = bind_socket(&setup.socket)?;
                (l, Some(id))
            }
        };
        crate::server::reactor::raise_descriptor_limit(
            setup.connection_limits.total,
            crate::server::reactor::descriptors_per_client(&setup.units),
        );
        // Only once no other daemon answers: recovery moves files aside
        // that a running daemon would still be writing.
        let mut log = |line: String| tracing::warn!("{line}");
        let mut store = match SettingsStore::load_or_recover(&setup.state_path, &mut log) {
            Ok((store, _)) => store,
            Err(e) => {
                if let Some(id) = socket_id {
                    let _ = crate::checked_dir::remove_socket(&setup.socket, id);
                }
                return Err(e.into());
            }
        };
        store.retain_alive(procfs::alive);
        let epoch = Instant::now();
        let store_writer =
            StoreWriter::spawn(setup.state_path.clone(), MIN_INTERVAL).map_err(|source| {
                StoreError::Write {
                    path: setup.state_path.clone(),
                    source,
                }
            })?;
        let mut monitor = Monitor::new(setup.units.clone(), setup.monitor.clone(), store);
        monitor.set_accelerator_limits(&setup.accelerator_limits);
        let state = State {
            monitor,
            conns: HashMap::new(),
            global,
            pages: Default::default(),
            ring_holders: Default::default(),
        };
        let fork_watch = if setup.host.fork_events {
            open_fork_watch()
        } else {
            None
        };
        let unit_name = |id: hetsched_core::ids::UnitId| {
            setup
                .units
                .iter()
                .find(|u| u.unit.id == id)
                .map_or_else(|| format!("unit {}", id.0), |u| u.unit.name.clone())
        };
        let (kernel_jobs, executors) = KernelJobs::new(
            setup.kernel_backends.take(),
            unit_name,
            &setup.kernel_sandbox,
        );
        Ok(Server {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                doorbell,
                epoch,
                cpu_figures: Latest::new(CpuFigures::unscanned(cpu_unit_slots.len())),
                setup,
                cpu_unit_slots,
                store_writer,
                kernel_jobs,
                coordination: Default::default(),
                metrics: Default::default(),
                metrics_on: metrics.is_some(),
                fork_watch,
                demand_reports: Default::default(),
                stop: Default::default(),
            }),
            listener,
            socket_id,
            metrics,
            executors,
        })
    }

    pub fn socket(&self) -> &std::path::Path {
        &self.shared.setup.socket
    }

    /// The socket file this daemon bound, to remove when it stops
    /// ([`crate::checked_dir::remove_socket`]); `None` for one systemd
    /// passed, which stays.
    pub fn socket_id(&self) -> Option<FileId> {
        self.socket_id
    }

    /// Where `/metrics` is served (with the port chosen when configured
    /// with port 0).
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.metrics.as_ref().and_then(|m| m.local_addr())
    }

    /// For whoever stops the daemon: waits until the latest settings are
    /// in the state file (writes are coalesced, so the last changes may
    /// still be pending).
    pub fn store_flusher(&self) -> StoreFlush {
        self.shared.store_writer.flusher()
    }

    /// Serves until the process ends.
    pub fn run(self) -> std::io::Result<()> {
        self.spawn()?.wait();
        Ok(())
    }

    /// Starts serving on threads of its own: the timer, the CPU agent,
    /// one executor per served unit, the fork watcher (as root), the
    /// coordinator (when on), the connection workers and the metrics
    /// listener (with its pool). The handle stops and
    /// joins every one of them ([`RunningServer::stop`], or dropping it).
    pub fn spawn(self) -> std::io::Result<RunningServer> {
        let mut running = RunningServer {
            shared: Arc::clone(&self.shared),
            threads: Vec::new(),
            reactor: None,
            unblock_metrics: None,
        };
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new().name(name.into()).spawn(f)
        };
        let timer = Arc::clone(&self.shared);
        running.threads.push(spawn(
            "hetsched-timer",
            Box::new(move || crate::server::timer::run(&timer)),
        )?);
        let agent = Arc::clone(&self.shared);
        running.threads.push(spawn(
            "hetsched-cpu",
            Box::new(move || crate::server::cpu_agent::run(agent)),
        )?);
        for Executor {
            unit,
            backend,
            sandboxes,
            jobs,
        } in self.executors
        {
            let shared = Arc::clone(&self.shared);
            running.threads.push(spawn(
                &format!("hetsched-exec{}", unit.0),
                Box::new(move || executor::run(&shared, unit, backend, sandboxes, jobs)),
            )?);
        }
        if self.shared.fork_watch.is_some() {
            let watch = Arc::clone(&self.shared);
            running.threads.push(spawn(
                "hetsched-forks",
                Box::new(move || {
                    let Some(w) = &watch.fork_watch else { return };
                    while !watch.stop.is_stopped() {
                        w.wait(FORK_WATCH_POLL);
                    }
                }),
            )?);
        }
        #[cfg(feature = "coordination")]
        if self.shared.setup.coordination.is_on() {
            let coordinator = Arc::clone(&self.shared);
            running.threads.push(spawn(
                "hetsched-coord",
                Box::new(move || crate::server::coordinator::run(coordinator)),
            )?);
        }
        if let Some(metrics) = self.metrics {
            // A first snapshot before anyone can scrape; the timer
            // publishes the next ones.
            {
                let mut state = self.shared.lock();
                crate::metrics::publish(
                    &self.shared.metrics,
                    &self.shared.coordination,
                    &mut state.monitor,
                    self.shared.now(),
                );
            }
            running.unblock_metrics = Some(metrics.unblocker());
            let shared = Arc::clone(&self.shared);
            running.threads.push(spawn(
                "hetsched-metrics",
                Box::new(move || {
                    metrics.serve(&|| crate::metrics::exposition_now(&shared.metrics))
                }),
            )?);
        }
        let (workers, stop) = crate::server::reactor::start(&self.shared, self.listener)?;
        running.threads.extend(workers);
        running.reactor = Some(stop);
        Ok(running)
    }
}

/// How long the fork watcher waits for events before it looks whether the
/// server stops.
const FORK_WATCH_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// A server serving on its own threads; dropping it stops them.
pub struct RunningServer {
    shared: Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<()>>,
    reactor: Option<crate::server::reactor::ReactorStop>,
    unblock_metrics: Option<Box<dyn Fn() + Send + Sync>>,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("socket", &self.shared.setup.socket)
            .field("threads", &self.threads.len())
            .finish()
    }
}

impl RunningServer {
    /// Waits for the threads, which end only when stopped from elsewhere.
    fn wait(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// Tells every thread to stop, wakes those that sleep, and joins them.
    /// Connections still open are closed; nothing is sent to them.
    pub fn stop(&mut self) {
        self.shared.stop.stop();
        self.shared.wake();
        if let Some(r) = &self.reactor {
            r.stop();
        }
        if let Some(unblock) = &self.unblock_metrics {
            unblock();
        }
        // Executors end once they reach this in their queues.
        self.shared.kernel_jobs.stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The daemon's socket, in a checked directory, mode 0666 from the start
/// ([`crate::checked_dir::bind_socket`]): anyone may connect; what a client
/// may do is decided from its credentials (SO_PEERCRED), not from who could
/// open the socket.
fn bind_socket(path: &std::path::Path) -> Result<(UnixListener, FileId), DaemonError> {
    crate::checked_dir::bind_socket(path, 0o666).map_err(|e| match e {
        BindError::AlreadyRunning(p) => DaemonError::AlreadyRunning(p),
        BindError::Io { path, source } => DaemonError::Socket { path, source },
        e => DaemonError::Refused(e.to_string()),
    })
}
