//! `hetsched bench`: benchmarks that need real processes.
//!
//! `gate` starts a real daemon (this binary, as a child process) with one
//! emulated unit that has a stream per client, then runs N clients — each
//! its own connection, on its own thread — that request a dispatch and
//! complete it at once, as fast as they can. The round trip measured is
//! client → daemon → grant: what an application pays per task for a
//! system-wide scheduler.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use hetsched_protocol::{Client, ClientOptions};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Dispatch-gate round trip with many concurrent clients.
    Gate(GateArgs),
    /// The thread balancer's policies on worker processes over an emulated
    /// big/little machine (root).
    Balance(crate::bench_balance::BalanceBenchArgs),
    /// The thread balancer's epoch step time on a synthetic 8-core map.
    BalanceOverhead(crate::bench_balance::OverheadArgs),
    /// A client changing its settings as fast as the daemon answers: state
    /// file writes per second and a probe's round trip, against quiet.
    SettingsChurn(crate::bench_settings::SettingsChurnArgs),
    /// What many clients cost: idle ones (daemon CPU, memory, a probe's
    /// round trip) or active ones (lost requests, grant waits, `status`).
    Clients(crate::bench_clients::ClientsArgs),
    /// Two processes at equal shares on one unit, one with several
    /// connections: each one's part of the unit.
    ProcessShares(crate::bench_process_shares::ProcessSharesArgs),
    /// One client process of `process-shares`.
    #[command(hide = true)]
    ShareClient(crate::bench_process_shares::ShareClientArgs),
    /// Opens connections until refused and holds them (tests of the
    /// connection limits).
    #[command(hide = true)]
    HoldConnections(crate::bench_connections::HoldConnectionsArgs),
    /// A kernel served by the daemon (kernel ring, `opencl_units`) against
    /// the same kernel called in this process, per call.
    #[cfg(feature = "opencl")]
    ServedKernel(crate::bench_kernel::ServedKernelArgs),
    /// Two client processes (CUSTOM 70 / 30 by default) running real
    /// OpenCL kernels through the runtime on a device the daemon
    /// arbitrates: each one's part of the device time.
    #[cfg(any(feature = "opencl", feature = "cuda"))]
    DeviceShares(crate::bench_device::DeviceSharesArgs),
    /// Two unmodified OpenCL programs under `hetsched run` (CUSTOM 70 /
    /// 30) through the OpenCL layer: each one's part of the device time
    /// from the daemon's accounting, and what the layer costs one program
    /// alone.
    #[cfg(feature = "opencl")]
    Intercept(crate::bench_intercept::InterceptArgs),
    /// What the dispatch gate costs per call of a real OpenCL kernel run
    /// through the runtime, one at a time and batched.
    #[cfg(any(feature = "opencl", feature = "cuda"))]
    DeviceGate(crate::bench_device::DeviceGateArgs),
    /// Whether placement leaves a real device another process keeps busy,
    /// and how fast: where each call of a CPU-or-device task ran.
    #[cfg(any(feature = "opencl", feature = "cuda"))]
    DevicePlacement(crate::bench_placement::DevicePlacementArgs),
    /// One client process of `device-shares`.
    #[cfg(any(feature = "opencl", feature = "cuda"))]
    #[command(hide = true)]
    DeviceClient(crate::bench_device::DeviceClientArgs),
    /// Launch, copy, task-model and serving costs of a CUDA device,
    /// measured on it (for scripts/gpu-check.sh).
    #[cfg(feature = "cuda")]
    #[command(hide = true)]
    CudaCosts(crate::bench_gpu::CudaCostsArgs),
}

#[derive(Args)]
pub struct GateArgs {
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    clients: u32,
    /// Measurement time, s (after one second of warm-up).
    #[arg(long, value_parser = crate::values::seconds, default_value_t = 5.0)]
    seconds: f64,
    /// Time each client holds a grant (its task) before completing it and
    /// asking again, µs. 0: back-to-back requests, which measures
    /// throughput more than latency (with N clients, Little's law makes the
    /// round trip N / throughput).
    #[arg(long, default_value_t = 5000)]
    task_us: u64,
    /// Policy of the unit (share, fifo, priority).
    #[arg(long, default_value = "share")]
    policy: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct GateReport {
    clients: u32,
    task_us: u64,
    policy: String,
    round_trips: usize,
    per_second: f64,
    p50_us: f64,
    p90_us: f64,
    p99_us: f64,
    max_us: f64,
}

pub fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Gate(args) => gate(args),
        BenchCommand::Balance(args) => crate::bench_balance::balance(args),
        BenchCommand::BalanceOverhead(args) => crate::bench_balance::overhead(args),
        BenchCommand::SettingsChurn(args) => crate::bench_settings::settings_churn(args),
        BenchCommand::Clients(args) => crate::bench_clients::clients(args),
        BenchCommand::ProcessShares(args) => crate::bench_process_shares::process_shares(args),
        BenchCommand::ShareClient(args) => crate::bench_process_shares::share_client(args),
        BenchCommand::HoldConnections(args) => crate::bench_connections::hold_connections(args),
        #[cfg(feature = "opencl")]
        BenchCommand::ServedKernel(args) => crate::bench_kernel::served_kernel(args),
        #[cfg(any(feature = "opencl", feature = "cuda"))]
        BenchCommand::DeviceShares(args) => crate::bench_device::device_shares(args),
        #[cfg(feature = "opencl")]
        BenchCommand::Intercept(args) => crate::bench_intercept::intercept(args),
        #[cfg(any(feature = "opencl", feature = "cuda"))]
        BenchCommand::DeviceGate(args) => crate::bench_device::device_gate(args),
        #[cfg(any(feature = "opencl", feature = "cuda"))]
        BenchCommand::DevicePlacement(args) => crate::bench_placement::device_placement(args),
        #[cfg(any(feature = "opencl", feature = "cuda"))]
        BenchCommand::DeviceClient(args) => crate::bench_device::device_client(args),
        #[cfg(feature = "cuda")]
        BenchCommand::CudaCosts(args) => crate::bench_gpu::cuda_costs(args),
    }
}

/// A daemon child that is killed when dropped.
pub(crate) struct DaemonChild {
    child: Child,
    dir: PathBuf,
}

impl DaemonChild {
    /// The daemon's folder (config, state file, log, socket).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for DaemonChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_daemon(streams: u32, policy: &str) -> Result<(DaemonChild, PathBuf)> {
    start_daemon_with(&format!(
        "include_cpus = false\nmax_outstanding = 4\n\
         [policies]\ngate = \"{policy}\"\n\
         [[emulated]]\nname = \"gate\"\nspeed = 1.0\ncopy_gbps = 10.0\nstreams = {streams}\n"
    ))
}

/// Starts this binary as a daemon with `config` (a state file of its own
/// is added) and waits until it answers.
pub(crate) fn start_daemon_with(config_body: &str) -> Result<(DaemonChild, PathBuf)> {
    start_daemon_in(config_body, "daemon")
}

/// [`start_daemon_with`] in a folder of its own named by `tag`, so that
/// one benchmark can run several daemons at once.
pub(crate) fn start_daemon_in(config_body: &str, tag: &str) -> Result<(DaemonChild, PathBuf)> {
    let dir = std::env::temp_dir().join(format!("hetsched-bench-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let socket = dir.join("hetsched.sock");
    let config = dir.join("hetsched.toml");
    let log = dir.join("daemon.log");
    std::fs::write(
        &config,
        format!(
            "state_file = \"{}\"\n{config_body}",
            dir.join("state.json").display()
        ),
    )?;
    let child = Command::new(std::env::current_exe()?)
        .args(["daemon", "--config"])
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("starting the daemon")?;
    let mut daemon = DaemonChild { child, dir };
    let deadline = Instant::now() + Duration::from_secs(30);
    while Client::connect(ClientOptions::observer("bench").socket(&socket)).is_err() {
        let exited = daemon.child.try_wait()?.is_some();
        if exited || Instant::now() > deadline {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            let last: Vec<&str> = said.lines().rev().take(5).collect();
            bail!(
                "the daemon did not come up on {}{}",
                socket.display(),
                if last.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; it said:\n{}",
                        last.into_iter().rev().collect::<Vec<_>>().join("\n")
                    )
                }
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((daemon, socket))
}

pub(crate) fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1e3
}

fn gate(args: GateArgs) -> Result<()> {
    if args.clients == 0 {
        bail!("--clients must be at least 1");
    }
    let (_daemon, socket) = start_daemon(args.clients, &args.policy)?;
    let barrier = Arc::new(Barrier::new(args.clients as usize));
    let warmup = Duration::from_secs(1);
    let measure = Duration::from_secs_f64(args.seconds);
    let mut handles = Vec::new();
    for i in 0..args.clients {
        let socket = socket.clone();
        let barrier = Arc::clone(&barrier);
        let task = Duration::from_micros(args.task_us);
        handles.push(std::thread::spawn(move || -> Result<Vec<u64>> {
            let mut opts = ClientOptions::application(format!("bench-{i}"))?.socket(&socket);
            opts.requested = Default::default();
            let mut client = Client::connect(opts)?;
            let unit = client.unit_by_name("gate").context("no gate unit")?.id;
            barrier.wait();
            let start = Instant::now();
            let mut samples = Vec::with_capacity(100_000);
            loop {
                let t0 = Instant::now();
                let grant = client.request_dispatch(unit, 1_000)?;
                let rt = t0.elapsed();
                if !task.is_zero() {
                    std::thread::sleep(task);
                }
                client.task_completed(grant, task.as_nanos() as u64)?;
                let since = start.elapsed();
                if since > warmup {
                    samples.push(rt.as_nanos() as u64);
                }
                if since > warmup + measure {
                    break;
                }
            }
            let _ = client.goodbye();
            Ok(samples)
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(
            h.join()
                .map_err(|_| anyhow::anyhow!("a client thread panicked"))??,
        );
    }
    all.sort_unstable();
    let report = GateReport {
        clients: args.clients,
        task_us: args.task_us,
        policy: args.policy.clone(),
        round_trips: all.len(),
        per_second: all.len() as f64 / args.seconds,
        p50_us: percentile(&all, 0.50),
        p90_us: percentile(&all, 0.90),
        p99_us: percentile(&all, 0.99),
        max_us: all.last().map_or(f64::NAN, |&m| m as f64 / 1e3),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "gate round trip, {} clients, {} µs tasks, {} policy: {} round trips ({:.0}/s); p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, max {:.1} µs",
            report.clients,
            report.task_us,
            report.policy,
            report.round_trips,
            report.per_second,
            report.p50_us,
            report.p90_us,
            report.p99_us,
            report.max_us
        );
    }
    Ok(())
}
