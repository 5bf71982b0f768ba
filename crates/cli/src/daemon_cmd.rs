//! `hetsched daemon` and `hetsched units`.

use anyhow::{Context, Result};
use clap::Args;
use hetsched_daemon::config::DaemonConfig;
use hetsched_daemon::exclusive;
use hetsched_daemon::launch;
use hetsched_daemon::server::Server;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

#[derive(Args)]
pub struct DaemonArgs {
    /// Config file (default: /etc/hetsched/hetsched.toml when it exists).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Socket path (overrides the config and $HETSCHED_SOCKET). Its
    /// directory, and each above it, must be writable by no other user;
    /// a file there that is not a socket is refused, never removed.
    #[arg(long)]
    socket: Option<PathBuf>,
    /// State file where shares survive restarts (overrides the config);
    /// its directory is checked as the socket's.
    #[arg(long)]
    state: Option<PathBuf>,
    /// Stop (as on SIGTERM) when the daemon's parent, process PID, exits:
    /// for supervisors that may die without stopping it. Refused when the
    /// parent is not PID (it has already exited).
    #[arg(long, value_name = "PID")]
    parent_pid: Option<u32>,
    /// Serve Prometheus metrics at http://ADDR/metrics, e.g.
    /// 127.0.0.1:9464 (overrides `metrics_listen`; port 0 picks one).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
}

#[derive(Args)]
pub struct UnitsArgs {
    /// Config file whose [[emulated]] units to include.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: DaemonArgs) -> Result<()> {
    let mut cfg = DaemonConfig::load_or_default(args.config.as_deref())?;
    if let Some(s) = args.socket {
        cfg.socket = Some(s);
    }
    if let Some(s) = args.state {
        cfg.state_file = Some(s);
    }
    if let Some(m) = args.metrics {
        cfg.metrics_listen = Some(m);
    }
    cfg.check_metrics_listen().map_err(anyhow::Error::msg)?;
    // Shared with the signal thread, which exits without returning; here,
    // returning (or a panic) cleans up. The handlers go in before the
    // platform is discovered: a device library loaded then (PoCL) puts its
    // own handlers in front, and those end the process on SIGTERM unless
    // they find ours to hand the signal back to.
    let cleanup: Cleanup = Arc::default();
    let _on_return = CleanUpOnDrop(Arc::clone(&cleanup));
    clean_up_on_signal(Arc::clone(&cleanup))?;
    if let Some(pid) = args.parent_pid {
        exit_with_parent(pid)?;
    }
    // A socket systemd passed (hetsched.socket), taken before anything
    // else may open descriptors.
    let activated =
        hetsched_daemon::activation::inherited_listener().map_err(anyhow::Error::msg)?;
    let from_systemd = activated.is_some();
    refuse_unsafe_cache_dir(&cfg)?;
    let (setup, platform) = launch::prepare(&cfg)?;
    for note in &platform.notes {
        tracing::info!("{note}");
    }
    let serves = exclusive::Serves::of(&cfg, &setup.units);
    let places = exclusive::Places::system(&setup.state_path);
    let server = Server::bind_with(setup, activated)?;
    let socket = server.socket().to_path_buf();
    let metrics = server.metrics_addr();
    {
        // Set up with the lock held: a signal meanwhile waits, then undoes
        // whatever was done.
        let mut state = lock(&cleanup);
        // systemd owns a socket it passed: it stays when the daemon stops.
        state.socket = server.socket_id().map(|id| (socket.clone(), id));
        state.store = Some(server.store_flusher());
        let mut log = |line: String| tracing::info!("{line}");
        if cfg.exclusive_devices {
            state.devices = Some(exclusive::take(&places, serves, &mut log)?);
        } else {
            exclusive::restore_leftover(&places.record, &mut log);
        }
    }
    eprint!("{}", platform.summary_table());
    tracing::info!(
        "hetsched daemon {} (pid {}) listening on {}{}",
        env!("HETSCHED_VERSION_LONG"),
        std::process::id(),
        socket.display(),
        if from_systemd {
            " (socket from systemd)"
        } else {
            ""
        }
    );
    if let Some(addr) = metrics {
        tracing::info!("metrics on http://{addr}/metrics");
    }
    // The socket listens: clients may connect (systemd's Type=notify
    // waits for this; nothing is sent without NOTIFY_SOCKET).
    let status = format!("listening on {}", socket.display());
    if let Err(e) = sd_notify::notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(&status),
    ]) {
        tracing::warn!("cannot tell systemd it is ready: {e}");
    }
    server.run().context("serving")?;
    Ok(())
}

/// The calibration cache's directory is checked as the socket's and the
/// state file's are (`checked_dir`): one that others may write is refused.
/// One that does not exist yet, or cannot be opened, is left to the cache
/// writer, whose failures are notes (the cache is not needed to run).
fn refuse_unsafe_cache_dir(cfg: &DaemonConfig) -> Result<()> {
    use hetsched_daemon::checked_dir::{CheckedDir, DirError};
    let Some(dir) = cfg
        .calibration_cache_path()
        .and_then(|p| p.parent().map(PathBuf::from))
    else {
        return Ok(());
    };
    match CheckedDir::open(&dir, None) {
        Err(e @ DirError::Unsafe { .. }) => Err(anyhow::anyhow!("calibration cache: {e}")),
        _ => Ok(()),
    }
}

/// SIGTERM when the parent exits. The parent is checked after the signal is
/// armed: had it exited before, the daemon would have a new parent and the
/// signal would never come.
fn exit_with_parent(pid: u32) -> Result<()> {
    use rustix::process::{Signal, getppid, set_parent_process_death_signal};
    set_parent_process_death_signal(Some(Signal::TERM))
        .context("arming the parent-death signal")?;
    let parent = getppid().map_or(0, |p| p.as_raw_nonzero().get().unsigned_abs());
    if parent != pid {
        anyhow::bail!(
            "--parent-pid {pid}: the daemon's parent is process {parent}, so {pid} has exited or is not its parent"
        );
    }
    Ok(())
}

/// What the daemon undoes when it stops: its socket file, once bound, and
/// the devices it made exclusive (`exclusive_devices`).
#[derive(Default)]
struct CleanupState {
    /// The socket file this daemon bound: removed only while it is still
    /// that socket (never a file put in its place).
    socket: Option<(PathBuf, hetsched_daemon::checked_dir::FileId)>,
    devices: Option<exclusive::ExclusiveGuard>,
    /// Writes the settings the store writer still holds (it coalesces
    /// changes for up to 200 ms).
    store: Option<hetsched_daemon::store_writer::StoreFlush>,
}

impl CleanupState {
    /// Everything the daemon undoes or finishes when it stops: pending
    /// settings written, the socket removed, the devices given back.
    fn stop(&mut self) {
        if let Some(store) = self.store.take()
            && !store.flush(STOP_FLUSH)
        {
            tracing::warn!(
                "the last settings changes were not written within {:?}",
                STOP_FLUSH
            );
        }
        if let Some((socket, id)) = self.socket.take()
            && let Err(e) = hetsched_daemon::checked_dir::remove_socket(&socket, id)
        {
            tracing::warn!("{e}");
        }
        // Its Drop puts the files back, one line each.
        drop(self.devices.take());
    }
}

/// How long a stopping daemon waits for its pending settings write.
const STOP_FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

type Cleanup = Arc<Mutex<CleanupState>>;

fn lock(cleanup: &Cleanup) -> std::sync::MutexGuard<'_, CleanupState> {
    cleanup.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Cleans up when `run` returns or panics (the signal thread holds the
/// state too, so dropping it alone would not): the socket, bound by this
/// daemon and no longer served, and the devices.
struct CleanUpOnDrop(Cleanup);

impl Drop for CleanUpOnDrop {
    fn drop(&mut self) {
        lock(&self.0).stop();
    }
}

/// SIGTERM / SIGINT / SIGHUP: write the pending settings, remove the
/// socket file, give the devices back (`exclusive_devices`) and exit.
/// Signals whose default would end the daemon without that, and that
/// mean nothing to it (SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF,
/// SIGIO), are caught and ignored, with a line in the log.
fn clean_up_on_signal(cleanup: Cleanup) -> Result<()> {
    use signal_hook::consts::{
        SIGALRM, SIGHUP, SIGINT, SIGIO, SIGPROF, SIGTERM, SIGUSR1, SIGUSR2, SIGVTALRM,
    };
    const STOP: [i32; 3] = [SIGTERM, SIGINT, SIGHUP];
    const IGNORED: [i32; 6] = [SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO];
    let mut signals = signal_hook::iterator::Signals::new(STOP.iter().chain(&IGNORED))
        .context("installing signal handlers")?;
    std::thread::Builder::new()
        .name("hetsched-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if !STOP.contains(&sig) {
                    tracing::info!("signal {sig} ignored");
                    continue;
                }
                // Under systemd (Type=notify); nothing without NOTIFY_SOCKET.
                let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
                lock(&cleanup).stop();
                tracing::info!("signal {sig}, exiting");
                std::process::exit(0);
            }
        })?;
    Ok(())
}

pub fn units(args: UnitsArgs) -> Result<()> {
    let cfg = DaemonConfig::load_or_default(args.config.as_deref())?;
    let (setup, platform) = launch::prepare(&cfg)?;
    // Units the daemon runs kernels on for clients (`opencl_units`,
    // `cuda_units`).
    let served: Vec<hetsched_protocol::UnitInfo> = setup
        .units
        .iter()
        .filter(|u| !u.kernels.is_empty())
        .map(|u| u.info())
        .collect();
    // Real devices applications run kernels on through the units' agents
    // (`device_units`).
    let devices: Vec<hetsched_protocol::UnitInfo> = setup
        .units
        .iter()
        .filter(|u| {
            u.unit.class != hetsched_core::unit::UnitClass::Cpu
                && !u.emulated
                && u.kernels.is_empty()
        })
        .map(|u| u.info())
        .collect();
    let gpus = crate::gpu_listing::discover()?;
    if args.json {
        let mut v = hetsched_sim::output::versioned(&platform)?;
        if let Some(o) = v.as_object_mut() {
            for (key, value) in gpus.json {
                o.insert(key.into(), value);
            }
            o.insert("served".into(), serde_json::to_value(&served)?);
            o.insert("devices".into(), serde_json::to_value(&devices)?);
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", platform.summary_table());
        for u in &served {
            println!(
                "served by the daemon: {} ({}, {}), kernels: {}",
                u.name,
                u.kind,
                u.class.name(),
                u.kernels.join(", ")
            );
        }
        for u in &devices {
            println!(
                "device under an agent: {} ({}, {}), policy {}",
                u.name,
                u.kind,
                u.class.name(),
                u.policy.name()
            );
        }
        print!("{}", gpus.table);
        if cfg.exclusive_devices {
            let serves = exclusive::Serves::of(&cfg, &setup.units);
            let what = match (serves.cuda, serves.opencl) {
                (true, true) => "the NVIDIA device nodes and the OpenCL vendor files",
                (true, false) => "the NVIDIA device nodes",
                (false, true) => "the OpenCL vendor files",
                (false, false) => "nothing (no CUDA or OpenCL device is served)",
            };
            println!("exclusive devices: a running daemon keeps {what} to its own user");
        }
        for note in &platform.notes {
            println!("note: {note}");
        }
        for note in &gpus.notes {
            println!("note: {note}");
        }
    }
    Ok(())
}
