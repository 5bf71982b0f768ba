//! The runtime's connection to a monitor, and failover when it goes away.
//!
//! The link starts on the daemon or an embedded monitor. When the
//! connection drops, every device call in flight is re-queued by its
//! executor and the link moves on: first back to the daemon (a restart
//! comes back on the same socket within `reconnect_for`), else to a fresh
//! embedded monitor with the same units, so unit ids and models stay valid.

use crate::options::{MonitorMode, RuntimeOptions};
use hetsched_monitor::embedded::{EmbeddedError, MonitorHandle};
use hetsched_protocol::{ClientError, ClientOptions, Role, SharedClient, UnitInfo};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Where the link is connected now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    Daemon,
    Embedded,
}

#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Embedded(#[from] EmbeddedError),
    #[error("the restarted daemon manages other units than before ({0})")]
    UnitsChanged(String),
}

struct Current {
    client: Arc<SharedClient>,
    kind: LinkKind,
    /// Kept alive while the link uses it.
    _embedded: Option<MonitorHandle>,
}

pub(crate) struct Link {
    current: RwLock<Current>,
    opts: RuntimeOptions,
    /// Units as first seen; every later monitor must have the same.
    units: Vec<UnitInfo>,
    failing_over: AtomicBool,
    /// Only one failover runs at a time.
    failover_lock: Mutex<()>,
    failovers: AtomicU32,
    /// Since when the daemon has been gone, and whether the link gave up.
    outage: Mutex<Outage>,
}

/// The daemon's absence as the link sees it. One clock for every failover
/// thread, so a failover started by a late failure does not restart the
/// wait before giving up.
#[derive(Default)]
struct Outage {
    /// When the first failure of this outage was seen.
    since: Option<Instant>,
    /// Set when a daemon-only link has waited `give_up_after` for its
    /// daemon: why calls on the daemon's devices fail until it is back.
    gave_up: Option<String>,
}

impl Link {
    pub fn open(opts: &RuntimeOptions) -> Result<Link, LinkError> {
        let current = match opts.monitor {
            MonitorMode::Daemon => connect_daemon(opts)?,
            MonitorMode::Embedded => start_embedded(opts, None)?,
            MonitorMode::Auto => match connect_daemon(opts) {
                Ok(c) => c,
                Err(e) => {
                    // No daemon is the usual case and needs no word; one
                    // refused for safety does.
                    if matches!(
                        e,
                        LinkError::Client(
                            ClientError::UntrustedDaemon { .. } | ClientError::SocketDir(_)
                        )
                    ) {
                        tracing::warn!(
                            "not using the daemon ({e}); running with an \
                             embedded monitor"
                        );
                    }
                    start_embedded(opts, None)?
                }
            },
        };
        let units = current.client.units().to_vec();
        Ok(Link {
            current: RwLock::new(current),
            opts: opts.clone(),
            units,
            failing_over: AtomicBool::new(false),
            failover_lock: Mutex::new(()),
            failovers: AtomicU32::new(0),
            outage: Mutex::new(Outage::default()),
        })
    }

    pub fn units(&self) -> &[UnitInfo] {
        &self.units
    }

    pub fn client(&self) -> Arc<SharedClient> {
        Arc::clone(&self.read().client)
    }

    pub fn kind(&self) -> LinkKind {
        self.read().kind
    }

    pub fn failovers(&self) -> u32 {
        self.failovers.load(Ordering::Relaxed)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Current> {
        self.current.read().unwrap_or_else(|p| p.into_inner())
    }

    fn outage(&self) -> std::sync::MutexGuard<'_, Outage> {
        self.outage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Why device calls fail now, if the link gave up on its daemon.
    pub fn gave_up(&self) -> Option<String> {
        self.outage().gave_up.clone()
    }

    /// The connection failed: starts the outage's clock unless it runs.
    pub fn mark_gone(&self) {
        self.outage().since.get_or_insert_with(Instant::now);
    }

    /// After a failed failover attempt: whether the link gives up on its
    /// daemon now (daemon-only, gone for `give_up_after` since the
    /// outage's first failure, not given up already), and why.
    pub fn give_up(&self, last_error: &LinkError) -> Option<String> {
        if self.opts.monitor != MonitorMode::Daemon {
            return None;
        }
        let mut outage = self.outage();
        let gone_for = outage.since.get_or_insert_with(Instant::now).elapsed();
        if gone_for < self.opts.give_up_after || outage.gave_up.is_some() {
            return None;
        }
        let why = format!(
            "the daemon at {} has been gone for {:.1} s ({last_error}); device calls fail until \
             it is back (daemon-only mode; HETSCHED_DAEMON_WAIT sets the wait)",
            self.opts.socket.display(),
            gone_for.as_secs_f64()
        );
        outage.gave_up = Some(why.clone());
        Some(why)
    }

    /// How long to wait between failover attempts.
    pub fn retry_every(&self) -> Duration {
        (self.opts.give_up_after / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
    }

    /// The link is back (the outage ends): true if it had given up.
    pub fn recovered(&self) -> bool {
        let mut outage = self.outage();
        outage.since = None;
        outage.gave_up.take().is_some()
    }

    /// True while a failover is under way (executors hold device calls).
    pub fn is_failing_over(&self) -> bool {
        self.failing_over.load(Ordering::Acquire)
    }

    /// Marks the link as failing over; true if this call should do it.
    pub fn begin_failover(&self) -> bool {
        !self.failing_over.swap(true, Ordering::AcqRel)
    }

    /// Replaces a dead connection: the daemon again if it comes back in
    /// time with the same units, else an embedded monitor over them.
    pub fn failover(&self) -> Result<LinkKind, LinkError> {
        let _one = self.failover_lock.lock().unwrap_or_else(|p| p.into_inner());
        let result = self.replace_connection();
        self.failing_over.store(false, Ordering::Release);
        result
    }

    fn replace_connection(&self) -> Result<LinkKind, LinkError> {
        if self.read().client.is_connected() {
            return Ok(self.kind());
        }
        let next = match self.opts.monitor {
            MonitorMode::Embedded => start_embedded(&self.opts, Some(&self.units))?,
            MonitorMode::Daemon => self.reconnect_daemon()?,
            MonitorMode::Auto => match self.reconnect_daemon() {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!("daemon unavailable ({e}); continuing with an embedded monitor");
                    start_embedded(&self.opts, Some(&self.units))?
                }
            },
        };
        let kind = next.kind;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = next;
        self.failovers.fetch_add(1, Ordering::Relaxed);
        Ok(kind)
    }

    fn reconnect_daemon(&self) -> Result<Current, LinkError> {
        let deadline = Instant::now() + self.opts.reconnect_for;
        loop {
            match connect_daemon(&self.opts) {
                Ok(c) => {
                    check_same_units(&self.units, c.client.units())?;
                    return Ok(c);
                }
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

fn check_same_units(before: &[UnitInfo], now: &[UnitInfo]) -> Result<(), LinkError> {
    let names = |u: &[UnitInfo]| u.iter().map(|u| u.name.clone()).collect::<Vec<_>>();
    if names(before) == names(now) {
        Ok(())
    } else {
        Err(LinkError::UnitsChanged(format!(
            "was [{}], now [{}]",
            names(before).join(", "),
            names(now).join(", ")
        )))
    }
}

fn client_options(opts: &RuntimeOptions, socket: std::path::PathBuf) -> ClientOptions {
    ClientOptions {
        socket,
        name: opts.name.clone(),
        role: Role::Application,
        requested: opts.requested,
        reconnect_for: Duration::ZERO,
    }
}

fn connect_daemon(opts: &RuntimeOptions) -> Result<Current, LinkError> {
    let client = SharedClient::connect(client_options(opts, opts.socket.clone()))?;
    Ok(Current {
        client: Arc::new(client),
        kind: LinkKind::Daemon,
        _embedded: None,
    })
}

fn start_embedded(opts: &RuntimeOptions, units: Option<&[UnitInfo]>) -> Result<Current, LinkError> {
    let embedded = match units {
        Some(u) => MonitorHandle::from_units(u)?,
        None => MonitorHandle::from_config(opts.embedded_config_path().as_deref())?,
    };
    let client = SharedClient::connect(client_options(opts, embedded.socket()))?;
    Ok(Current {
        client: Arc::new(client),
        kind: LinkKind::Embedded,
        _embedded: Some(embedded),
    })
}
