//! The embedded monitor: the daemon's own server, run on threads of this
//! process behind a private socket. One application alone on a machine
//! needs no set-up, and it gets exactly the daemon's agents, policies,
//! emulated devices and views, because it is the same code. It has none of
//! the host's parts ([`crate::host`]: nice levels, cgroups, `/metrics`),
//! and no coordination.
//!
//! [`MonitorHandle`] is all a program that embeds a monitor holds (the
//! runtime's link, and through it the C API and Python): dropping it
//! stops and joins every thread the monitor started.

use crate::agent::UnitSetup;
use crate::config::DaemonConfig;
use crate::launch;
use crate::server::{DaemonSetup, RunningServer, Server};
use hetsched_protocol::UnitInfo;
use std::path::{Path, PathBuf};

/// How often the embedded CPU agent counts runnable threads: faster than
/// the daemon's default because placement reads it for every CPU decision.
const EMBEDDED_CPU_SCAN_MS: u64 = 100;

#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error("cannot read the monitor config: {0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("cannot set up the embedded monitor: {0}")]
    Launch(#[from] launch::LaunchError),
    #[error("cannot start the embedded monitor: {0}")]
    Server(#[from] crate::server::DaemonError),
    #[error("cannot create the embedded monitor's directory: {0}")]
    Io(#[from] std::io::Error),
}

/// A running embedded monitor. Dropping it stops and joins every thread
/// it started, then removes its socket's directory.
#[derive(Debug)]
pub struct MonitorHandle {
    /// First field: stopped before the directory goes.
    _server: RunningServer,
    dir: tempfile::TempDir,
}

impl MonitorHandle {
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("hetsched.sock")
    }

    /// Starts a monitor over the units `config` describes (CPUs only
    /// without one).
    pub fn from_config(config: Option<&Path>) -> Result<MonitorHandle, EmbeddedError> {
        let mut cfg = DaemonConfig::load_or_default(config)?;
        cfg.cpu_scan_ms = EMBEDDED_CPU_SCAN_MS;
        let (setup, _platform) = launch::prepare(&cfg)?;
        Self::start(setup)
    }

    /// Starts a monitor over exactly these units (a daemon's, after it went
    /// away), so unit ids stay what the runtime already uses.
    pub fn from_units(units: &[UnitInfo]) -> Result<MonitorHandle, EmbeddedError> {
        let cfg = DaemonConfig {
            cpu_scan_ms: EMBEDDED_CPU_SCAN_MS,
            ..DaemonConfig::default()
        };
        let (mut setup, _platform) = launch::prepare(&cfg)?;
        setup.units = units.iter().map(UnitSetup::from_info).collect();
        Self::start(setup)
    }

    fn start(mut setup: DaemonSetup) -> Result<MonitorHandle, EmbeddedError> {
        // One application has nobody to be fair to: coordination would only
        // pace it to its own optimum, which its own placement finds anyway.
        setup.coordination = crate::config::Coordination::Off;
        // Nor does it own the machine's CPU cgroups: that is the daemon's.
        setup.cpu_cgroups = false;
        let dir = tempfile::Builder::new()
            .prefix("hetsched-embedded-")
            .tempdir()?;
        setup.socket = dir.path().join("hetsched.sock");
        setup.state_path = dir.path().join("state.json");
        let server = Server::bind(setup)?.spawn()?;
        Ok(MonitorHandle {
            _server: server,
            dir,
        })
    }
}
