//! A connection many threads use at once: requests go out under a short
//! lock, and one reader thread routes every reply to whoever waits for it
//! (by task id), so a runtime can keep several device tasks in flight on
//! one connection, one client in the daemon's eyes, without a thread
//! blocked per request.
//!
//! Unlike [`Client`], a `SharedClient` does not reconnect by itself: when
//! the daemon goes away every waiter is told ([`ClientError::is_disconnect`])
//! and the owner decides where to go next (reconnect, or an embedded
//! monitor, as the runtime does).

use crate::ClientError;
use crate::client::{Client, ClientOptions, DeviceDone, Grant, Session, refusal};
use crate::frame::{FrameReader, decode_daemon, encode_frame};
use crate::message::{
    ClientMsg, DaemonMsg, SettingsRequest, StatusPage, StatusReport, UnitDemand, WireSettings,
};
use hetsched_core::ids::{ClientId, TaskId, UnitId};
use hetsched_core::unit::UnitClass;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};

/// What a waiter for one task hears: the device finished, the gate opened,
/// or the request failed (refused, or the connection is gone).
pub type TaskReply = Result<TaskEvent, ClientError>;

/// The good outcomes of a request with a task id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskEvent {
    Granted(Grant),
    DeviceDone(DeviceDone),
}

/// Called once, on the reader thread, with the outcome of one request.
/// It must not block for long: every reply to this process waits behind it.
pub type ReplyFn = Box<dyn FnOnce(TaskReply) + Send>;

struct Routes {
    by_task: HashMap<TaskId, ReplyFn>,
    /// Replies without a task id (settings, status, errors about them).
    control: Option<mpsc::Sender<Result<DaemonMsg, ClientError>>>,
    /// Set once the connection is gone: later requests fail at once.
    closed: bool,
}

struct Shared {
    writer: Mutex<UnixStream>,
    routes: Mutex<Routes>,
    next_task: AtomicU64,
    connected: AtomicBool,
}

impl Shared {
    fn routes(&self) -> MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn send(&self, msg: &ClientMsg) -> Result<(), ClientError> {
        let frame = encode_frame(msg);
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        w.write_all(&frame)?;
        Ok(())
    }
}

/// One connection to the daemon, shared by threads.
pub struct SharedClient {
    shared: Arc<Shared>,
    /// Serialises settings and status calls (their replies carry no id).
    control: Mutex<()>,
    session: Session,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for SharedClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedClient")
            .field("client", &self.session.client)
            .field("pid", &self.session.pid)
            .field("daemon_pid", &self.session.daemon_pid)
            .field("units", &self.session.units.len())
            .field("connected", &self.is_connected())
            .finish()
    }
}

impl std::ops::Deref for SharedClient {
    type Target = Session;

    /// Who this client is, the units, settings and view pages.
    fn deref(&self) -> &Session {
        &self.session
    }
}

impl SharedClient {
    /// Connects and says hello (as [`Client::connect`]), then starts the
    /// reader thread.
    pub fn connect(opts: ClientOptions) -> Result<SharedClient, ClientError> {
        Self::from_client(Client::connect(opts)?)
    }

    /// Takes over a connected [`Client`].
    pub fn from_client(client: Client) -> Result<SharedClient, ClientError> {
        let parts = client.into_parts();
        let read_half = parts.stream.try_clone()?;
        let shared = Arc::new(Shared {
            writer: Mutex::new(parts.stream),
            routes: Mutex::new(Routes {
                by_task: HashMap::new(),
                control: None,
                closed: false,
            }),
            next_task: AtomicU64::new(parts.next_task),
            connected: AtomicBool::new(true),
        });
        let reader_shared = Arc::clone(&shared);
        let leftover = parts.reader;
        let name = format!("hetsched-mux-{}", parts.opts.name);
        let reader = std::thread::Builder::new()
            .name(name)
            .spawn(move || read_loop(&reader_shared, read_half, leftover))?;
        Ok(SharedClient {
            shared,
            control: Mutex::new(()),
            session: parts.session,
            reader: Some(reader),
        })
    }

    /// False once the reader saw the connection end.
    pub fn is_connected(&self) -> bool {
        self.shared.connected.load(Ordering::Acquire)
    }

    fn fresh_task(&self) -> TaskId {
        TaskId(self.shared.next_task.fetch_add(1, Ordering::Relaxed))
    }

    /// Sends a request whose outcome `reply` receives on the reader thread.
    /// If it cannot be sent, `reply` is not called and the error returns.
    fn request(
        &self,
        make: impl FnOnce(TaskId) -> ClientMsg,
        reply: ReplyFn,
    ) -> Result<TaskId, ClientError> {
        let task = self.fresh_task();
        {
            let mut routes = self.shared.routes();
            if routes.closed {
                return Err(io::Error::from(io::ErrorKind::NotConnected).into());
            }
            routes.by_task.insert(task, reply);
        }
        if let Err(e) = self.shared.send(&make(task)) {
            self.shared.routes().by_task.remove(&task);
            return Err(e);
        }
        Ok(task)
    }

    /// Queues modelled work on an emulated device; `reply` gets
    /// [`TaskEvent::DeviceDone`] or the error.
    pub fn submit_device_with(
        &self,
        unit: UnitId,
        exec_ns: u64,
        bytes_in: u64,
        bytes_out: u64,
        reply: ReplyFn,
    ) -> Result<TaskId, ClientError> {
        self.request(
            |task| ClientMsg::SubmitDevice {
                unit,
                task,
                exec_ns,
                bytes_in,
                bytes_out,
            },
            reply,
        )
    }

    /// Submits device work and blocks until it is done.
    pub fn run_device(
        &self,
        unit: UnitId,
        exec_ns: u64,
        bytes_in: u64,
        bytes_out: u64,
    ) -> Result<DeviceDone, ClientError> {
        let (tx, rx) = mpsc::channel();
        self.submit_device_with(
            unit,
            exec_ns,
            bytes_in,
            bytes_out,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        )?;
        match wait_reply(&rx)? {
            TaskEvent::DeviceDone(d) => Ok(d),
            other => Err(ClientError::Unexpected(format!(
                "{other:?} for device work"
            ))),
        }
    }

    /// Asks the dispatch gate; `reply` gets [`TaskEvent::Granted`].
    pub fn request_dispatch_with(
        &self,
        unit: UnitId,
        expected_ns: u64,
        reply: ReplyFn,
    ) -> Result<TaskId, ClientError> {
        self.request(
            |task| ClientMsg::RequestDispatch {
                unit,
                task,
                expected_ns,
            },
            reply,
        )
    }

    /// Asks the dispatch gate and blocks until it opens.
    pub fn request_dispatch(&self, unit: UnitId, expected_ns: u64) -> Result<Grant, ClientError> {
        let (tx, rx) = mpsc::channel();
        self.request_dispatch_with(
            unit,
            expected_ns,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        )?;
        match wait_reply(&rx)? {
            TaskEvent::Granted(g) => Ok(g),
            other => Err(ClientError::Unexpected(format!("{other:?} for a dispatch"))),
        }
    }

    /// A granted task finished after `ran_ns`.
    pub fn task_completed(&self, grant: Grant, ran_ns: u64) -> Result<(), ClientError> {
        self.shared.send(&ClientMsg::TaskCompleted {
            unit: grant.unit,
            task: grant.task,
            ran_ns,
        })
    }

    /// Tells the daemon what this client ran on units it drives itself
    /// (cumulative counters), for proportional-fair coordination. Not
    /// answered.
    pub fn report_demand(
        &self,
        units: Vec<UnitDemand>,
        in_flight: f64,
        implemented: Vec<UnitId>,
        native: Option<UnitId>,
    ) -> Result<(), ClientError> {
        self.shared.send(&ClientMsg::ReportDemand {
            units,
            in_flight,
            implemented,
            native,
        })
    }

    /// Sends a request answered without a task id and waits for the answer.
    fn control_call(&self, msg: ClientMsg) -> Result<DaemonMsg, ClientError> {
        let _one_at_a_time = self.control.lock().unwrap_or_else(|p| p.into_inner());
        let (tx, rx) = mpsc::channel();
        {
            let mut routes = self.shared.routes();
            if routes.closed {
                return Err(io::Error::from(io::ErrorKind::NotConnected).into());
            }
            routes.control = Some(tx);
        }
        self.shared.send(&msg)?;
        let got = rx
            .recv()
            .unwrap_or_else(|_| Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()));
        self.shared.routes().control = None;
        got
    }

    /// Changes this client's settings (or another's, with `target_pid`).
    pub fn set_settings(
        &self,
        target_pid: Option<u32>,
        unit: Option<UnitId>,
        settings: SettingsRequest,
    ) -> Result<(u32, Vec<(UnitId, WireSettings)>), ClientError> {
        match self.control_call(ClientMsg::SetSettings {
            target_pid,
            unit,
            settings,
        })? {
            DaemonMsg::SettingsApplied {
                pid,
                units,
                settings,
            } => Ok((pid, units.into_iter().zip(settings).collect())),
            other => Err(refusal(&other, None)
                .unwrap_or_else(|| ClientError::Unexpected(format!("{other:?} for settings")))),
        }
    }

    /// Accelerator selection ([`crate::Client::select_accelerator`]): the
    /// unit this client is now associated with.
    pub fn select_accelerator(
        &self,
        memory_bytes: u64,
        class: Option<UnitClass>,
    ) -> Result<UnitId, ClientError> {
        match self.control_call(ClientMsg::SelectAccelerator {
            memory_bytes,
            class,
        })? {
            DaemonMsg::AcceleratorSelected { unit, .. } => Ok(unit),
            other => Err(refusal(&other, None).unwrap_or_else(|| {
                ClientError::Unexpected(format!("{other:?} for accelerator selection"))
            })),
        }
    }

    /// The daemon's status report, every page put together
    /// ([`crate::Client::status`]).
    pub fn status(&self) -> Result<StatusReport, ClientError> {
        crate::status_pages::walk(
            |first| self.status_page(first, u32::MAX),
            ClientError::Unexpected,
        )
    }

    /// The configured domains ([`crate::Client::domains`]).
    pub fn domains(&self) -> Result<Vec<crate::message::DomainInfo>, ClientError> {
        match self.control_call(ClientMsg::ListDomains)? {
            DaemonMsg::Domains(list) => Ok(list),
            other => Err(refusal(&other, None)
                .unwrap_or_else(|| ClientError::Unexpected(format!("{other:?} for domains")))),
        }
    }

    /// One page of the status report ([`crate::Client::status_page`]).
    pub fn status_page(
        &self,
        first_client: ClientId,
        max_clients: u32,
    ) -> Result<StatusPage, ClientError> {
        match self.control_call(ClientMsg::Status {
            first_client,
            max_clients,
        })? {
            DaemonMsg::Status(page) => Ok(page),
            other => Err(refusal(&other, None)
                .unwrap_or_else(|| ClientError::Unexpected(format!("{other:?} for status")))),
        }
    }
}

impl Drop for SharedClient {
    fn drop(&mut self) {
        // Goodbye releases what we held at once; shutting the socket down
        // ends the reader thread, which then fails whoever still waits.
        let _ = self.shared.send(&ClientMsg::Goodbye);
        if let Ok(w) = self.shared.writer.lock() {
            let _ = w.shutdown(std::net::Shutdown::Both);
        }
        if let Some(r) = self.reader.take() {
            // The reader runs the reply callbacks, and one of them may hold
            // the last reference to what owns this client: then the client
            // is dropped on the reader thread itself, which cannot join
            // itself (EDEADLK). The socket is shut down, so it ends on its
            // own once the callback returns.
            if r.thread().id() != std::thread::current().id() {
                let _ = r.join();
            }
        }
    }
}

fn wait_reply(rx: &mpsc::Receiver<TaskReply>) -> Result<TaskEvent, ClientError> {
    rx.recv()
        .unwrap_or_else(|_| Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()))
}

fn disconnected() -> ClientError {
    io::Error::from(io::ErrorKind::ConnectionAborted).into()
}

/// The reader thread: decode frames, route each reply, and on the end of
/// the connection fail every waiter so nothing hangs.
fn read_loop(shared: &Shared, mut stream: UnixStream, mut reader: FrameReader) {
    let mut buf = vec![0u8; 64 * 1024];
    let end = loop {
        match reader.next_payload() {
            Ok(Some(payload)) => match decode_daemon(&payload) {
                Ok(msg) => route(shared, msg),
                Err(e) => break ClientError::Frame(e),
            },
            Ok(None) => match stream.read(&mut buf) {
                Ok(0) => break disconnected(),
                Ok(n) => reader.push(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break ClientError::Io(e),
            },
            Err(e) => break ClientError::Frame(e),
        }
    };
    shared.connected.store(false, Ordering::Release);
    let (waiters, control) = {
        let mut routes = shared.routes();
        routes.closed = true;
        (std::mem::take(&mut routes.by_task), routes.control.take())
    };
    let why = end.to_string();
    for (_, reply) in waiters {
        reply(Err(disconnected_because(&why)));
    }
    if let Some(c) = control {
        let _ = c.send(Err(disconnected_because(&why)));
    }
}

fn disconnected_because(why: &str) -> ClientError {
    ClientError::Io(io::Error::new(
        io::ErrorKind::ConnectionAborted,
        why.to_string(),
    ))
}

fn route(shared: &Shared, msg: DaemonMsg) {
    let (task, outcome) = match msg {
        DaemonMsg::Granted {
            unit,
            task,
            waited_ns,
        } => (
            task,
            Ok(TaskEvent::Granted(Grant {
                unit,
                task,
                waited_ns,
            })),
        ),
        DaemonMsg::DeviceDone {
            unit,
            task,
            waited_ns,
            ran_ns,
        } => (
            task,
            Ok(TaskEvent::DeviceDone(DeviceDone {
                unit,
                task,
                waited_ns,
                ran_ns,
            })),
        ),
        DaemonMsg::Error {
            code,
            message,
            task: Some(task),
        } => (task, Err(ClientError::Refused { code, message })),
        // Progress notes carry nothing a waiter needs.
        DaemonMsg::Delayed { .. } => return,
        other => {
            let control = shared.routes().control.clone();
            if let Some(c) = control {
                let _ = c.send(Ok(other));
            }
            return;
        }
    };
    let reply = shared.routes().by_task.remove(&task);
    if let Some(reply) = reply {
        reply(outcome);
    }
}
