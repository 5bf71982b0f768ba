//! The reactor: a few worker threads serve every connection from one
//! epoll set, so an idle connection costs its socket and a small struct
//! ([`ConnIo`]), never a thread.
//!
//! Each socket (the listener's too) is registered one-shot: the worker
//! whose `epoll_wait` returns its event is the only one serving it until it
//! re-arms it, so one client's messages are handled in the order they
//! came, and a busy client occupies one worker while the others serve
//! everyone else. Workers take one event per wait, so a burst spreads over
//! all of them instead of queueing behind one. A connection that has not
//! said Hello within [`HANDSHAKE_DEADLINE`] is shut down by whichever worker
//! next sweeps the pending list; the shutdown wakes its own event and it
//! is released the usual way.
//!
//! `mio` would do the registration but not this: its `Poll` is polled from
//! one thread, and the gate's latency needs the thread that sees the event
//! to serve it (a hand-off to another thread costs a wake-up per message).
//! rustix's epoll is a safe wrapper of the same system calls.

use crate::admission::{Admission, Admitted};
use crate::server::Shared;
use crate::server::connection::{ConnIo, HANDSHAKE_DEADLINE, READ_CHUNK, Served};
use hetsched_protocol::{DaemonMsg, ErrorCode, encode_frame};
use rustix::buffer::spare_capacity;
use rustix::event::{Timespec, epoll};
use rustix::net::SendFlags;
use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// The listener's token; connections count from 1.
const LISTENER: u64 = 0;
/// The stop eventfd's token.
const STOP: u64 = u64::MAX;

/// How often pending handshakes are checked (a silent connection lives at
/// most the deadline plus this).
const SWEEP_EVERY: Duration = Duration::from_millis(500);

/// How long accepting pauses after running out of descriptors (the
/// connection stays in the backlog, so retrying at once would spin).
const ACCEPT_PAUSE: Duration = Duration::from_millis(10);

/// Connection-serving threads: enough that a few busy clients do not
/// delay the others, few enough that they rarely wait on the state lock.
fn worker_count() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4))
}

/// A connection; `None` once it has been released.
type Slot = Arc<Mutex<Option<ConnIo>>>;

/// What every worker shares.
struct Reactor {
    epoll: OwnedFd,
    listener: UnixListener,
    admission: Admission,
    conns: Mutex<HashMap<u64, Slot>>,
    next_token: AtomicU64,
    /// Connections that have not said Hello yet, oldest first.
    pending: Mutex<VecDeque<Pending>>,
    /// The next sweep of `pending`, ms since `epoch`.
    next_sweep_ms: AtomicU64,
    epoch: Instant,
    accept_errors: Mutex<ErrorBurst>,
}

struct Pending {
    deadline: Instant,
    conn: Weak<Mutex<Option<ConnIo>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Wakes every worker so that they stop: an eventfd in the epoll set,
/// level-triggered, so every `epoll_wait` returns it once written.
pub(crate) struct ReactorStop {
    fd: OwnedFd,
}

impl ReactorStop {
    pub fn stop(&self) {
        // Only fails when the counter would overflow: it is written once.
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
    }
}

/// Serves `listener` from [`worker_count`] threads until [`ReactorStop`]
/// is written: the handles to join, and the way to stop them.
pub(crate) fn start(
    shared: &Arc<Shared>,
    listener: UnixListener,
) -> std::io::Result<(Vec<std::thread::JoinHandle<()>>, ReactorStop)> {
    listener.set_nonblocking(true)?;
    let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    epoll::add(
        &epoll,
        &listener,
        epoll::EventData::new_u64(LISTENER),
        one_shot_in(),
    )?;
    let stop = rustix::event::eventfd(
        0,
        rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
    )?;
    epoll::add(
        &epoll,
        &stop,
        epoll::EventData::new_u64(STOP),
        epoll::EventFlags::IN,
    )?;
    let reactor = Arc::new(Reactor {
        epoll,
        listener,
        admission: Admission::new(
            shared.setup.connection_limits,
            rustix::process::geteuid().as_raw(),
        ),
        conns: Mutex::new(HashMap::new()),
        next_token: AtomicU64::new(LISTENER + 1),
        pending: Mutex::new(VecDeque::new()),
        next_sweep_ms: AtomicU64::new(0),
        epoch: Instant::now(),
        accept_errors: Mutex::new(ErrorBurst::default()),
    });
    let mut workers = Vec::new();
    for i in 0..worker_count() {
        let (reactor, shared) = (Arc::clone(&reactor), Arc::clone(shared));
        workers.push(
            std::thread::Builder::new()
                .name(format!("hetsched-io{i}"))
                .spawn(move || reactor.work(&shared))?,
        );
    }
    Ok((workers, ReactorStop { fd: stop }))
}

fn one_shot_in() -> epoll::EventFlags {
    epoll::EventFlags::IN | epoll::EventFlags::RDHUP | epoll::EventFlags::ONESHOT
}

impl Reactor {
    /// One worker: waits for one ready socket at a time and serves it.
    fn work(&self, shared: &Shared) {
        let mut buf = vec![0u8; READ_CHUNK];
        let mut events = Vec::with_capacity(1);
        let timeout = Timespec {
            tv_sec: 0,
            tv_nsec: SWEEP_EVERY.as_nanos() as _,
        };
        loop {
            events.clear();
            match epoll::wait(&self.epoll, spare_capacity(&mut events), Some(&timeout)) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    tracing::error!("epoll_wait failed: {e}");
                    std::thread::sleep(ACCEPT_PAUSE);
                    continue;
                }
            }
            for event in &events {
                match event.data.u64() {
                    STOP => return,
                    LISTENER => self.accept_all(shared),
                    token => self.serve_conn(shared, token, &mut buf),
                }
            }
            self.sweep_if_due();
        }
    }

    /// Accepts every connection waiting in the backlog, then re-arms the
    /// listener.
    fn accept_all(&self, shared: &Shared) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    lock(&self.accept_errors).ended();
                    self.register(shared, stream);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    lock(&self.accept_errors).failed(&e);
                    // Out of descriptors or memory: this worker waits a
                    // little; the others keep serving connections.
                    std::thread::sleep(ACCEPT_PAUSE);
                    break;
                }
            }
        }
        if let Err(e) = epoll::modify(
            &self.epoll,
            &self.listener,
            epoll::EventData::new_u64(LISTENER),
            one_shot_in(),
        ) {
            tracing::error!("cannot re-arm the listening socket: {e}");
        }
    }

    /// Admits `stream` and adds it to the set, or tells it why not.
    fn register(&self, shared: &Shared, stream: UnixStream) {
        let Some(ticket) = admit(&self.admission, &stream) else {
            return;
        };
        let forks = shared.fork_watch.as_ref();
        let conn = match ConnIo::new(stream, ticket, shared.setup.max_frame_bytes, forks) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("no peer credentials, dropping connection: {e}");
                return;
            }
        };
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let slot: Slot = Arc::new(Mutex::new(Some(conn)));
        lock(&self.pending).push_back(Pending {
            deadline: Instant::now() + HANDSHAKE_DEADLINE,
            conn: Arc::downgrade(&slot),
        });
        // In the map before it is armed: its first event may come at once,
        // to another worker.
        lock(&self.conns).insert(token, Arc::clone(&slot));
        let added = match &*lock(&slot) {
            Some(conn) => epoll::add(
                &self.epoll,
                conn.stream(),
                epoll::EventData::new_u64(token),
                one_shot_in(),
            ),
            None => return,
        };
        if let Err(e) = added {
            tracing::warn!("cannot watch a new connection: {e}");
            lock(&self.conns).remove(&token);
        }
    }

    /// Serves what connection `token` sent, then re-arms it, or releases
    /// it once it is done.
    fn serve_conn(&self, shared: &Shared, token: u64, buf: &mut [u8]) {
        let Some(slot) = lock(&self.conns).get(&token).cloned() else {
            return;
        };
        let mut guard = lock(&slot);
        let Some(conn) = guard.as_mut() else {
            return;
        };
        let served = conn.on_readable(shared, buf);
        let rearmed = served == Served::Open
            && epoll::modify(
                &self.epoll,
                conn.stream(),
                epoll::EventData::new_u64(token),
                one_shot_in(),
            )
            .is_ok();
        if rearmed {
            return;
        }
        let _ = epoll::delete(&self.epoll, conn.stream());
        let released = guard.take();
        drop(guard);
        lock(&self.conns).remove(&token);
        if let Some(conn) = released {
            conn.close(shared);
        }
    }

    /// Shuts down connections past their handshake deadline, at most
    /// every [`SWEEP_EVERY`] (by whichever worker gets there first).
    fn sweep_if_due(&self) {
        let now_ms = self.epoch.elapsed().as_millis() as u64;
        let due = self.next_sweep_ms.load(Ordering::Relaxed);
        if now_ms < due
            || self
                .next_sweep_ms
                .compare_exchange(
                    due,
                    now_ms + SWEEP_EVERY.as_millis() as u64,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_err()
        {
            return;
        }
        let now = Instant::now();
        let mut expired = Vec::new();
        {
            let mut pending = lock(&self.pending);
            while pending.front().is_some_and(|p| p.deadline <= now) {
                expired.extend(pending.pop_front().and_then(|p| p.conn.upgrade()));
            }
        }
        for slot in expired {
            if let Some(conn) = lock(&slot).as_ref().filter(|c| !c.said_hello()) {
                conn.shut_down();
            }
        }
    }
}

/// A place for the connection's user ([`crate::admission`]), or `None`
/// after telling a refused client why (best effort: the socket is not
/// waited on) and closing it.
fn admit(admission: &Admission, stream: &UnixStream) -> Option<Admitted> {
    let uid = match rustix::net::sockopt::socket_peercred(stream) {
        Ok(cred) => cred.uid.as_raw(),
        Err(e) => {
            tracing::warn!("no peer credentials, dropping connection: {e}");
            return None;
        }
    };
    match admission.admit(uid) {
        Ok(ticket) => Some(ticket),
        Err(refused) => {
            let frame = encode_frame(&DaemonMsg::Error {
                code: ErrorCode::TooManyConnections,
                message: refused.to_string(),
                task: None,
            });
            let _ = rustix::net::send(
                stream.as_fd(),
                &frame,
                SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
            );
            None
        }
    }
}

/// Accept errors (out of descriptors) come in bursts, one every 10 ms
/// while the backlog holds a connection: the first of a burst is logged,
/// and how many there were when it ends.
#[derive(Default)]
struct ErrorBurst {
    count: u64,
}

impl ErrorBurst {
    fn failed(&mut self, e: &std::io::Error) {
        if self.count == 0 {
            tracing::error!("accept failed: {e} (retrying every 10 ms)");
        }
        self.count += 1;
    }

    fn ended(&mut self) {
        if self.count > 1 {
            tracing::info!("accepting again after {} failed attempts", self.count);
        }
        self.count = 0;
    }
}

/// Descriptors the daemon holds for one client at most: its socket, and
/// for each unit it may open a ring on, the ring (a call ring on an
/// emulated unit) or the ring and its data region (a kernel ring on a
/// served unit); a client has at most one ring per unit. The doorbell and
/// the views are shared. Measured (hetsched's `hostile_files` test): 1.95
/// per client with a call ring, 3.95 with a call ring and a kernel ring.
pub(crate) fn descriptors_per_client(units: &[crate::agent::UnitSetup]) -> u32 {
    1 + units
        .iter()
        .map(|u| {
            if !u.kernels.is_empty() {
                2
            } else if u.emulated {
                1
            } else {
                0
            }
        })
        .sum::<u32>()
}

/// Descriptors the daemon holds whatever its clients: listeners, the
/// doorbell, epoll, device contexts, log and state files.
const DESCRIPTOR_MARGIN: u64 = 64;

/// Raises this process's soft limit on open files to its hard limit: each
/// connection holds a socket and its rings ([`descriptors_per_client`]).
/// Says once when even that is short of what `max_connections` needs.
pub(crate) fn raise_descriptor_limit(max_connections: u32, per_client: u32) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    let now = match setrlimit(Resource::Nofile, raised) {
        Ok(()) => limit.maximum,
        Err(_) => limit.current,
    };
    let wanted = u64::from(per_client) * u64::from(max_connections) + DESCRIPTOR_MARGIN;
    tracing::info!(
        "descriptors: a client holds up to {per_client} (its socket and a ring per unit); \
         {max_connections} connections need about {wanted}; the open-file limit is {}",
        now.map_or_else(|| "unlimited".to_string(), |n| n.to_string())
    );
    if let Some(now) = now.filter(|&n| n < wanted) {
        tracing::warn!(
            "the open-file limit is {now}; {max_connections} connections \
             (max_connections) need about {wanted}: raise LimitNOFILE / `ulimit -n`"
        );
    }
}
