//! How a runtime starts: which monitor, which settings, where models live.

use crate::device_backend::{AddedBackends, DeviceBackend};
use hetsched_core::placement::{Goal, PlacementConfig};
use hetsched_protocol::{SettingsRequest, default_socket_path, requested_settings_from_env};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Where the monitor the runtime talks to lives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MonitorMode {
    /// The daemon if its socket answers, else an embedded monitor.
    #[default]
    Auto,
    /// The daemon only; fail if it does not answer.
    Daemon,
    /// An embedded monitor, even if a daemon runs (tests, isolation).
    Embedded,
}

/// Everything [`crate::Runtime::with_options`] needs.
#[derive(Clone, Debug)]
pub struct RuntimeOptions {
    /// The application's name, as `hetsched status` lists it; also names
    /// the model file.
    pub name: String,
    pub monitor: MonitorMode,
    /// The daemon's socket.
    pub socket: PathBuf,
    /// Config for an embedded monitor (the daemon's format: emulated units,
    /// policies). `None`: `$HETSCHED_CONFIG`, else
    /// `/etc/hetsched/hetsched.toml` if present, else CPUs only.
    pub config: Option<PathBuf>,
    /// Class, shares and priority asked for on every unit.
    pub requested: SettingsRequest,
    pub placement: PlacementConfig,
    pub goal: Goal,
    /// Where task models persist; `None`: `$XDG_CACHE_HOME/hetsched/models`
    /// (or `~/.cache/hetsched/models`).
    pub model_dir: Option<PathBuf>,
    /// Load models at start and save them at shutdown.
    pub persist_models: bool,
    /// How long to wait for a restarted daemon before going embedded.
    pub reconnect_for: Duration,
    /// With [`MonitorMode::Daemon`]: how long device calls wait for a lost
    /// daemon to come back before they fail, saying so. The runtime keeps
    /// trying to reconnect after that; calls made once it is back run.
    /// `HETSCHED_DAEMON_WAIT` (seconds) sets it; 30 s by default.
    pub give_up_after: Duration,
    /// Placed calls one unit may hold beyond what it runs at once; the rest
    /// wait undecided in the central queue, so a decision is taken close to
    /// when the call runs, on fresh views.
    pub queue_per_slot: u32,
    /// Device calls one unit may have at the monitor per slot (its streams):
    /// enough to keep the stream busy between a completion and the next
    /// submission, few enough that the policy, not our backlog, decides.
    pub inflight_per_slot: u32,
    /// Use OpenCL devices as units (feature `opencl`).
    pub opencl: bool,
    /// Device backends beyond the built-in ones ([`RuntimeOptions::backend`]).
    pub backends: AddedBackends,
    /// Follow the daemon's proportional-fair targets when it publishes
    /// them (`coordination = "pf"` in its config); off with
    /// `HETSCHED_COORDINATION=off`.
    pub follow_coordination: bool,
    /// The unit this application runs on without hetsched (its default
    /// device), by name: the daemon measures "nobody below native" against
    /// it. `HETSCHED_NATIVE_UNIT`; unset, the daemon takes the fastest
    /// unit it measured.
    pub native_unit: Option<String>,
}

impl RuntimeOptions {
    /// Defaults, with the class the environment asks for (`HETSCHED_CLASS`,
    /// set by `hetsched run`) and `HETSCHED_SOCKET`.
    pub fn new(name: impl Into<String>) -> Result<Self, String> {
        Ok(RuntimeOptions {
            name: name.into(),
            monitor: MonitorMode::Auto,
            socket: default_socket_path(),
            config: None,
            requested: requested_settings_from_env()?,
            placement: PlacementConfig::default(),
            goal: Goal::MinLatency,
            model_dir: None,
            persist_models: true,
            reconnect_for: Duration::from_secs(1),
            give_up_after: give_up_after_from_env()?,
            queue_per_slot: 2,
            inflight_per_slot: 2,
            opencl: true,
            backends: AddedBackends::default(),
            follow_coordination: follow_coordination_from_env()?,
            native_unit: std::env::var("HETSCHED_NATIVE_UNIT")
                .ok()
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()),
        })
    }

    /// Adds a kind of device this runtime drives itself: its devices
    /// become units after the built-in backends' (OpenCL, CUDA), and a
    /// task runs there through its implementation for
    /// [`DeviceBackend::api`] ([`crate::Task::on_device`]).
    pub fn backend(mut self, backend: Arc<dyn DeviceBackend>) -> Self {
        self.backends.0.push(backend);
        self
    }

    /// The unit this application runs on without hetsched, by name.
    pub fn native_unit(mut self, name: impl Into<String>) -> Self {
        self.native_unit = Some(name.into());
        self
    }

    /// Whether to follow the daemon's coordination targets.
    pub fn follow_coordination(mut self, on: bool) -> Self {
        self.follow_coordination = on;
        self
    }

    /// How long device calls wait for a lost daemon in daemon-only mode
    /// ([`RuntimeOptions::give_up_after`]).
    pub fn give_up_after(mut self, wait: Duration) -> Self {
        self.give_up_after = wait;
        self
    }

    pub fn monitor(mut self, mode: MonitorMode) -> Self {
        self.monitor = mode;
        self
    }

    pub fn socket(mut self, path: impl Into<PathBuf>) -> Self {
        self.socket = path.into();
        self
    }

    pub fn config(mut self, path: impl Into<PathBuf>) -> Self {
        self.config = Some(path.into());
        self
    }

    pub fn model_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.model_dir = Some(dir.into());
        self
    }

    pub fn persist_models(mut self, on: bool) -> Self {
        self.persist_models = on;
        self
    }

    /// Whether to use OpenCL devices (with feature `opencl`).
    pub fn opencl(mut self, on: bool) -> Self {
        self.opencl = on;
        self
    }

    pub fn goal(mut self, goal: Goal) -> Self {
        self.goal = goal;
        self
    }

    pub fn placement(mut self, config: PlacementConfig) -> Self {
        self.placement = config;
        self
    }

    /// The embedded monitor's config file, as [`RuntimeOptions::config`] says.
    pub(crate) fn embedded_config_path(&self) -> Option<PathBuf> {
        if let Some(p) = &self.config {
            return Some(p.clone());
        }
        if let Some(p) = std::env::var_os("HETSCHED_CONFIG").filter(|p| !p.is_empty()) {
            return Some(PathBuf::from(p));
        }
        let system = PathBuf::from("/etc/hetsched/hetsched.toml");
        system.exists().then_some(system)
    }

    /// Directory of model files, as [`RuntimeOptions::model_dir`] says.
    pub(crate) fn resolved_model_dir(&self) -> PathBuf {
        if let Some(d) = &self.model_dir {
            return d.clone();
        }
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        cache.join("hetsched").join("models")
    }
}

/// `HETSCHED_COORDINATION`: `on` (the default) or `off`.
fn follow_coordination_from_env() -> Result<bool, String> {
    parse_coordination(std::env::var("HETSCHED_COORDINATION").ok().as_deref())
}

fn parse_coordination(value: Option<&str>) -> Result<bool, String> {
    match value.map(str::trim) {
        None | Some("") | Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => Err(format!(
            "HETSCHED_COORDINATION={other:?}: use \"on\" or \"off\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_coordination;

    #[test]
    fn coordination_switch_takes_on_or_off_and_names_a_typo() {
        assert_eq!(parse_coordination(None), Ok(true));
        assert_eq!(parse_coordination(Some("on")), Ok(true));
        assert_eq!(parse_coordination(Some(" off ")), Ok(false));
        let err = parse_coordination(Some("of")).unwrap_err();
        assert!(
            err.contains("HETSCHED_COORDINATION") && err.contains("\"of\""),
            "{err}"
        );
    }
}

/// Default of [`RuntimeOptions::give_up_after`].
const GIVE_UP_AFTER: Duration = Duration::from_secs(30);

/// `HETSCHED_DAEMON_WAIT`, seconds (a positive number, at most a day).
fn give_up_after_from_env() -> Result<Duration, String> {
    match std::env::var("HETSCHED_DAEMON_WAIT") {
        Ok(v) if !v.trim().is_empty() => parse_wait(&v),
        _ => Ok(GIVE_UP_AFTER),
    }
}

fn parse_wait(v: &str) -> Result<Duration, String> {
    match v.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 86_400.0 => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "HETSCHED_DAEMON_WAIT={v:?} is not a number of seconds in (0, 86400]"
        )),
    }
}

#[cfg(test)]
mod wait_tests {
    use super::*;

    #[test]
    fn the_daemon_wait_takes_seconds_and_refuses_nonsense() {
        assert_eq!(parse_wait(" 2.5 "), Ok(Duration::from_millis(2500)));
        for bad in ["0", "-1", "nan", "inf", "1e9", "soon"] {
            assert!(
                parse_wait(bad)
                    .unwrap_err()
                    .contains("HETSCHED_DAEMON_WAIT"),
                "{bad}"
            );
        }
    }
}
