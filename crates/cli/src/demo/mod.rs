//! `hetsched demo`: the main job. Starts a real daemon with two emulated
//! GPUs, runs the six Table 3 applications as separate processes against
//! it, first *native* (every app on its fastest unit, gpu-big) and then
//! *hetsched* (the runtime places every call), several times, and reports
//! per-app and system throughput and their ratio.

pub mod app_process;
pub mod apps;
mod report;

use anyhow::{Context, Result, bail};
use app_process::AppReport;
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Runs of each policy (the ratio reported is their median).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Seconds each policy runs, per run.
    #[arg(long, value_parser = crate::values::seconds, default_value_t = 8.0)]
    seconds: f64,
    /// Seconds at the start of each run left out of throughput (profiling,
    /// start-up).
    #[arg(long, value_parser = crate::values::seconds, default_value_t = 2.0)]
    warmup: f64,
    /// Calls each app keeps in flight.
    #[arg(long, default_value_t = 2)]
    inflight: usize,
    /// Where the timeline SVG and the JSON results go.
    #[arg(long, default_value = "demo-out")]
    out: PathBuf,
    /// The daemon's coordination under hetsched-pf: `pf` (fluid-judged,
    /// the daemon's default) or `pf-replay` (judged by replay, as the
    /// simulator's hetsched-pf).
    #[arg(long, default_value = "pf", value_parser = ["pf", "pf-replay"])]
    coordination: String,
    /// The emulated GPUs' policy under hetsched-pf: `fifo` (Rinnegan's
    /// contention experiment, and what native and hetsched always run;
    /// `pf-replay` runs it short-first), `short-first` (which `pf-replay`
    /// turns on or off per device) or `share` (Rinnegan's agents).
    #[arg(long, default_value = "fifo", value_parser = ["fifo", "short-first", "share"])]
    device_policy: String,
    /// The floor hetsched-pf's coordinator asks for, × each app's native
    /// estimate (the daemon's `coordination_floor`; its default when not
    /// given).
    #[arg(long)]
    coordination_floor: Option<f64>,
    /// Keep each hetsched-pf run's daemon log, with the coordinator's
    /// solves at debug level, as `daemon-hetsched-pf-runN.log` in `--out`
    /// (each app's pid is listed at its end).
    #[arg(long)]
    daemon_logs: bool,
}

/// Native first (the other policies are measured against it); hetsched-pf
/// is hetsched with the daemon's proportional-fair coordination on.
const POLICIES: [&str; 3] = ["native", "hetsched", "hetsched-pf"];

/// The daemon config file of a policy.
fn config_file(dir: &Path, policy: &str) -> PathBuf {
    match policy {
        "hetsched-pf" => dir.join("hetsched-pf.toml"),
        _ => dir.join("hetsched.toml"),
    }
}

/// The demo machine: this machine's CPUs plus two emulated GPUs with
/// Rinnegan's GPU-Bulky / GPU-Wimpy copy links; FIFO agents, as in its
/// contention experiment (under hetsched-pf, `--device-policy`).
const DEMO_CONFIG: &str = r#"# written by `hetsched demo`
tick_ms = 10
cpu_scan_ms = 50

[[emulated]]
name = "gpu-big"
kind = "gpu-big"
class = "gpu"
speed = 30.0
copy_latency_us = 10.0
copy_gbps = 6.0
dispatch_us = 20.0

[[emulated]]
name = "gpu-wimpy"
kind = "gpu-wimpy"
class = "gpu"
speed = 10.0
copy_latency_us = 10.0
copy_gbps = 3.0
dispatch_us = 20.0
"#;

/// Kills a child process when dropped, so an error or a panic never
/// leaves a daemon or an app behind.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The daemon's log, in the demo's scratch directory.
fn daemon_log(dir: &Path) -> PathBuf {
    dir.join("daemon.log")
}

fn start_daemon(
    exe: &Path,
    dir: &Path,
    config: &Path,
    socket: &Path,
    debug_solves: bool,
) -> Result<Reaped> {
    let _ = std::fs::remove_file(socket);
    // The daemon's start-up banner would drown the demo's table; it goes
    // to a log that is shown if the daemon fails to come up.
    let log_path = daemon_log(dir);
    let log = std::fs::File::create(&log_path)?;
    let mut command = Command::new(exe);
    if debug_solves {
        command.env(
            "RUST_LOG",
            "info,hetsched_monitor::server::coordinator=debug",
        );
    }
    let child = command
        .arg("daemon")
        .arg("--config")
        .arg(config)
        .arg("--socket")
        .arg(socket)
        .arg("--state")
        .arg(dir.join("state.json"))
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("cannot start the daemon")?;
    let daemon = Reaped(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            bail!(
                "the daemon did not open {} within 10 s; its log:\n{log}",
                socket.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(daemon)
}

fn run_policy(
    args: &DemoArgs,
    exe: &Path,
    dir: &Path,
    policy: &str,
    run: usize,
) -> Result<Vec<AppReport>> {
    let socket = dir.join("hetsched.sock");
    let keep_log = args.daemon_logs && policy == "hetsched-pf";
    let daemon = start_daemon(exe, dir, &config_file(dir, policy), &socket, keep_log)?;
    let mut children = Vec::new();
    for app in apps::APPS {
        let child = Command::new(exe)
            .arg("demo-app")
            .args(["--app", app.name, "--policy", policy])
            .arg("--seconds")
            .arg(args.seconds.to_string())
            .arg("--inflight")
            .arg(args.inflight.to_string())
            .arg("--socket")
            .arg(&socket)
            .arg("--model-dir")
            .arg(dir.join("models"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start demo app {}", app.name))?;
        children.push((app.name, Reaped(child)));
    }
    let pids: Vec<String> = children
        .iter()
        .map(|(name, child)| format!("demo app {name}: pid {}", child.0.id()))
        .collect();
    let mut reports = Vec::new();
    for (name, mut child) in children {
        let mut out = String::new();
        if let Some(mut stdout) = child.0.stdout.take() {
            std::io::Read::read_to_string(&mut stdout, &mut out)?;
        }
        let status = child.0.wait()?;
        if !status.success() {
            bail!("demo app {name} failed ({status})");
        }
        let line = out.lines().last().unwrap_or_default();
        let report: AppReport = serde_json::from_str(line)
            .with_context(|| format!("demo app {name} printed no report: {out:?}"))?;
        reports.push(report);
    }
    drop(daemon);
    if keep_log {
        std::fs::create_dir_all(&args.out)?;
        let kept = args.out.join(format!("daemon-{policy}-run{run}.log"));
        let mut log = std::fs::read_to_string(daemon_log(dir))?;
        log.push_str(&pids.join("\n"));
        log.push('\n');
        std::fs::write(&kept, log).with_context(|| format!("cannot write {}", kept.display()))?;
    }
    Ok(reports)
}

pub fn run(args: DemoArgs) -> Result<()> {
    if args.runs == 0 || args.seconds <= args.warmup {
        bail!("need --runs ≥ 1 and --seconds > --warmup");
    }
    let exe = std::env::current_exe().context("cannot find the hetsched binary")?;
    let dir = tempfile::Builder::new()
        .prefix("hetsched-demo-")
        .tempdir()?;
    // Top-level keys must come before the first [[emulated]] table.
    let config = |coordination: &str, device_policy: &str| {
        format!(
            "calibration_cache = {:?}\ncoordination = {coordination:?}\ndefault_policy = {device_policy:?}\n{DEMO_CONFIG}",
            dir.path().join("calibration.json"),
        )
    };
    std::fs::write(config_file(dir.path(), "hetsched"), config("off", "fifo"))?;
    let mut coordinated = config(&args.coordination, &args.device_policy);
    if let Some(floor) = args.coordination_floor {
        coordinated = format!("coordination_floor = {floor:?}\n{coordinated}");
    }
    std::fs::write(config_file(dir.path(), "hetsched-pf"), coordinated)?;
    println!(
        "hetsched demo: {} apps (Rinnegan Table 3) on this machine's CPUs + emulated gpu-big and gpu-wimpy",
        apps::APPS.len()
    );
    println!(
        "{} run(s) x {{{}}}, {:.0} s each ({:.0} s warm-up), {} calls in flight per app\n",
        args.runs,
        POLICIES.join(", "),
        args.seconds,
        args.warmup,
        args.inflight
    );
    let mut runs = Vec::new();
    for run in 1..=args.runs {
        let mut by_policy = Vec::new();
        for policy in POLICIES {
            let reports = run_policy(&args, &exe, dir.path(), policy, run)?;
            let summary = report::summarise(policy, &reports, args.warmup, args.seconds);
            println!("run {run}/{}: {}", args.runs, summary.one_line());
            by_policy.push((reports, summary));
        }
        let ratios: Vec<f64> = by_policy[1..]
            .iter()
            .map(|(_, s)| report::system_ratio(&by_policy[0].1, s))
            .collect();
        let said: Vec<String> = POLICIES[1..]
            .iter()
            .zip(&ratios)
            .map(|(p, r)| format!("{p}/native = {r:.2}"))
            .collect();
        println!(
            "run {run}/{}: system throughput {}\n",
            args.runs,
            said.join(", ")
        );
        runs.push((by_policy, ratios));
    }
    let out = report::finish(&args.out, &runs, args.warmup, args.seconds)?;
    print!("{out}");
    Ok(())
}
