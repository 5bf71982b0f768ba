//! `hetsched bench device-shares` and `bench device-gate` (features
//! `opencl`, `cuda`): real kernels run through hetsched-runtime on a
//! device the daemon arbitrates (`device_units`: `opencl<N>`, `cuda<N>`).
//!
//! * `device-shares` starts a daemon on a temporary socket and two client
//!   processes of given classes (CUSTOM 70 / 30 by default) that keep the
//!   device busy, and reads each one's device time from the daemon's
//!   accounting over a measured window.
//! * `device-gate` runs the same kernel in this process through the
//!   runtime with the daemon arbitrating the device and with the device
//!   left to the process, one call at a time and in batches, and compares
//!   the medians: what the gate costs per call.
//!
//! The kernel is [`crate::spin_kernel`]: its length is set by an
//! iteration count calibrated here, and every result is checked against
//! the same arithmetic on the CPU.

use super::common::{DaemonChild, percentile, start_daemon_with};
use crate::spin_kernel::{DeviceRef, SpinCall, calibrate_iterations, spin_task};
use anyhow::{Context, Result, bail};
use clap::Args;
use hetsched_protocol::{Client, ClientOptions, StatusReport, parse_class};
use hetsched_runtime::{Mode, MonitorMode, Runtime, RuntimeOptions};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct DeviceSharesArgs {
    /// The device unit (`opencl<N>`, `cuda<N>`).
    #[arg(long, default_value = "opencl0")]
    unit: String,
    /// Classes of the two clients (`custom:N`, `normal:N`, `background`).
    #[arg(long, value_delimiter = ',', default_value = "custom:70,custom:30")]
    classes: Vec<String>,
    /// Measured window, s (after every client has run a call).
    #[arg(long, value_parser = crate::values::seconds, default_value_t = 5.0)]
    seconds: f64,
    /// Device time of one call, µs.
    #[arg(long, value_parser = crate::values::positive_us, default_value_t = 1000.0)]
    kernel_us: f64,
    /// The unit's policy in the daemon (share, fifo, priority, accc, …).
    #[arg(long, default_value = "share")]
    policy: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct DeviceClientArgs {
    #[arg(long)]
    socket: PathBuf,
    /// The device unit whose API the task is written for.
    #[arg(long, default_value = "opencl0")]
    unit: String,
    /// The class this client asks for (`custom:70`, `background`, …).
    #[arg(long)]
    class: String,
    /// Kernel iterations per work-item (sets the call's length).
    #[arg(long)]
    iterations: u32,
    /// Calls kept in flight.
    #[arg(long, default_value_t = 4)]
    in_flight: usize,
}

/// Distinct seeds a client cycles through (each result is checked
/// against its CPU reference, computed once).
const SEEDS: u32 = 8;

/// What a client process reports when it stops.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct ClientTally {
    pub tasks: u64,
    pub wrong: u64,
    /// The unit its calls ran on, by name, each time (all the same).
    units: Vec<String>,
}

#[derive(Debug, Serialize)]
struct ClientShare {
    pid: u32,
    class: String,
    shares: Option<u32>,
    /// This client's part of the device time the daemon charged in the
    /// window.
    device_fraction: f64,
    /// Its device time over the window's length.
    busy_fraction: f64,
    tasks: u64,
    wrong: u64,
}

#[derive(Debug, Serialize)]
struct DeviceSharesReport {
    unit: String,
    device: String,
    policy: String,
    window_s: f64,
    kernel_us: f64,
    clients: Vec<ClientShare>,
    /// Every result matched the CPU reference, and every client ran.
    checked: bool,
}

/// A client process; killed if still running when dropped.
pub(crate) struct ClientChild {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    class: String,
}

impl Drop for ClientChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a `device-client` process of `class` keeping `unit` busy with
/// spin calls of `iterations`.
pub(crate) fn start_client(
    socket: &Path,
    unit: &str,
    class: &str,
    iterations: u32,
) -> Result<ClientChild> {
    ClientChild::start(socket, unit, class, iterations)
}

impl ClientChild {
    fn start(socket: &Path, unit: &str, class: &str, iterations: u32) -> Result<ClientChild> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["bench", "device-client", "--unit", unit, "--socket"])
            .arg(socket)
            .args(["--class", class, "--iterations", &iterations.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting a client process")?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().context("client stdout")?);
        Ok(ClientChild {
            child,
            stdin,
            stdout,
            class: class.to_string(),
        })
    }

    /// Waits for the client's "ready <pid>" line (its first call done).
    pub(crate) fn ready(&mut self) -> Result<u32> {
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        line.trim()
            .strip_prefix("ready ")
            .and_then(|p| p.parse().ok())
            .with_context(|| format!("client {} did not start: {line:?}", self.class))
    }

    /// Tells the client to stop (its stdin closes) and reads its tally.
    pub(crate) fn stop(mut self) -> Result<ClientTally> {
        drop(self.stdin.take());
        let mut out = String::new();
        self.stdout.read_to_string(&mut out)?;
        let status = self.child.wait()?;
        if !status.success() {
            bail!("client {} failed ({status})", self.class);
        }
        serde_json::from_str(out.trim())
            .with_context(|| format!("client {} reported {out:?}", self.class))
    }
}

pub fn device_shares(args: DeviceSharesArgs) -> Result<()> {
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        bail!("--seconds must be a positive number");
    }
    for class in &args.classes {
        class_of(class)?;
    }
    let target = DeviceRef::of_unit(&args.unit)?;
    let (iterations, device) = calibrate_iterations(target, args.kernel_us)?;
    let (_daemon, socket) = start_daemon_with(&format!(
        "include_cpus = false\n[policies]\n{} = \"{}\"\n",
        args.unit, args.policy
    ))?;
    // One client at a time, each ready (its first call done) before the
    // next starts, BACKGROUND ones first: against a client that keeps the
    // device busy, a BACKGROUND one may never run a call.
    let mut start_order: Vec<usize> = (0..args.classes.len()).collect();
    start_order.sort_by_key(|&i| !is_background(&args.classes[i]));
    let mut started: Vec<Option<(ClientChild, u32)>> = std::iter::repeat_with(|| None)
        .take(args.classes.len())
        .collect();
    for i in start_order {
        let mut client = ClientChild::start(&socket, &args.unit, &args.classes[i], iterations)?;
        let pid = client.ready()?;
        started[i] = Some((client, pid));
    }
    let (clients, pids): (Vec<ClientChild>, Vec<u32>) = started.into_iter().flatten().unzip();
    let mut observer = Client::connect(ClientOptions::observer("bench").socket(&socket))?;
    let before = observer.status()?;
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(args.seconds));
    let after = observer.status()?;
    let window_ns = started.elapsed().as_nanos() as f64;
    let unit = before
        .units
        .iter()
        .find(|u| u.info.name == args.unit)
        .map(|u| u.info.id)
        .with_context(|| format!("the daemon has no unit {}", args.unit))?;
    let charged: Vec<f64> = pids
        .iter()
        .map(|&pid| busy_ns(&after, pid, unit) - busy_ns(&before, pid, unit))
        .collect();
    let total: f64 = charged.iter().sum();
    let mut shares = Vec::new();
    let mut checked = true;
    for ((client, pid), ns) in clients.into_iter().zip(pids).zip(charged) {
        let class = client.class.clone();
        let tally = client.stop()?;
        checked &=
            tally.wrong == 0 && tally.tasks > 0 && tally.units.iter().all(|u| *u == args.unit);
        shares.push(ClientShare {
            pid,
            shares: match class_of(&class)? {
                hetsched_protocol::WireClass::Custom(s)
                | hetsched_protocol::WireClass::Normal(s) => Some(s),
                hetsched_protocol::WireClass::Background => None,
            },
            class,
            device_fraction: if total > 0.0 { ns / total } else { 0.0 },
            busy_fraction: ns / window_ns,
            tasks: tally.tasks,
            wrong: tally.wrong,
        });
    }
    let report = DeviceSharesReport {
        unit: args.unit,
        device,
        policy: args.policy,
        window_s: window_ns / 1e9,
        kernel_us: args.kernel_us,
        clients: shares,
        checked,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} ({}), policy {}, {:.1} s window, {:.0} µs calls",
            report.unit, report.device, report.policy, report.window_s, report.kernel_us
        );
        println!(
            "{:<12} {:>8} {:>10} {:>8} {:>8}",
            "CLASS", "PID", "DEVICE", "BUSY", "TASKS"
        );
        for c in &report.clients {
            println!(
                "{:<12} {:>8} {:>9.1}% {:>7.1}% {:>8}",
                c.class,
                c.pid,
                c.device_fraction * 100.0,
                c.busy_fraction * 100.0,
                c.tasks
            );
        }
        println!(
            "results {}",
            if checked {
                "checked against the CPU"
            } else {
                "WRONG or missing"
            }
        );
    }
    if !checked {
        bail!("some results did not match the CPU reference, or a client ran nothing");
    }
    Ok(())
}

/// Runtime options of a benchmark process: the daemon on `socket` only,
/// and models that start fresh every run.
pub(crate) fn daemon_runtime(name: impl Into<String>, socket: &Path) -> Result<RuntimeOptions> {
    Ok(RuntimeOptions::new(name)
        .map_err(anyhow::Error::msg)?
        .monitor(MonitorMode::Daemon)
        .socket(socket)
        .persist_models(false))
}

fn is_background(class: &str) -> bool {
    matches!(
        class_of(class),
        Ok(hetsched_protocol::WireClass::Background)
    )
}

fn class_of(class: &str) -> Result<hetsched_protocol::WireClass> {
    let (name, shares) = match class.split_once(':') {
        Some((n, s)) => (
            n,
            Some(
                s.parse::<u32>()
                    .with_context(|| format!("shares in {class:?}"))?,
            ),
        ),
        None => (class, None),
    };
    parse_class(name, shares).map_err(anyhow::Error::msg)
}

/// Slot time the daemon charged client `pid` on `unit`, ns.
fn busy_ns(report: &StatusReport, pid: u32, unit: hetsched_core::ids::UnitId) -> f64 {
    report
        .clients
        .iter()
        .filter(|c| c.pid == pid)
        .flat_map(|c| &c.units)
        .filter(|u| u.unit == unit)
        .map(|u| u.busy_ns_total as f64)
        .sum()
}

/// One client process of `device-shares`: keeps `in_flight` calls of the
/// spin kernel running through the runtime until its stdin closes.
pub fn device_client(args: DeviceClientArgs) -> Result<()> {
    let mut opts = daemon_runtime(format!("device-shares-{}", args.class), &args.socket)?;
    opts.requested.class = Some(class_of(&args.class)?);
    let rt = Runtime::with_options(opts)?;
    let task = spin_task(DeviceRef::of_unit(&args.unit)?)?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop_reader = Arc::clone(&stop);
    let watcher = std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        stop_reader.store(true, Ordering::Relaxed);
    });
    let mut tally = ClientTally {
        tasks: 0,
        wrong: 0,
        units: Vec::new(),
    };
    // The CPU reference takes longer than the device: compute it once
    // for a few seeds and cycle through them.
    let references: Vec<Vec<u32>> = (0..SEEDS)
        .map(|seed| SpinCall::new(args.iterations, seed).expected())
        .collect();
    let mut pending = std::collections::VecDeque::new();
    let mut seed = 0u32;
    let mut announced = false;
    while !stop.load(Ordering::Relaxed) || !pending.is_empty() {
        while !stop.load(Ordering::Relaxed) && pending.len() < args.in_flight.max(1) {
            seed = (seed + 1) % SEEDS;
            let call = SpinCall::new(args.iterations, seed);
            pending.push_back((seed, rt.accelerate(&task, call, Mode::Async)?));
        }
        let Some((seed, handle)) = pending.pop_front() else {
            break;
        };
        let (got, info) = handle.wait_with_info()?;
        tally.tasks += 1;
        tally.wrong += u64::from(got != references[seed as usize]);
        if !tally.units.iter().any(|u| **u == *info.unit_name) {
            tally.units.push(info.unit_name.to_string());
        }
        if !announced {
            println!("ready {}", std::process::id());
            announced = true;
        }
    }
    rt.wait_all();
    drop(rt);
    println!("{}", serde_json::to_string(&tally)?);
    // The watcher ends with stdin, which has closed.
    let _ = watcher.join();
    Ok(())
}

#[derive(Args)]
pub struct DeviceGateArgs {
    /// The device unit (`opencl<N>`, `cuda<N>`).
    #[arg(long, default_value = "opencl0")]
    unit: String,
    /// Device times of one call to measure, µs.
    #[arg(long, value_delimiter = ',', default_value = "100,20")]
    kernel_us: Vec<f64>,
    /// Calls per kernel length, way and mode.
    #[arg(long, default_value_t = 1000)]
    calls: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct GateCost {
    kernel_us: f64,
    /// `sync`: one call at a time (one grant each); `batched`: 64 calls
    /// in flight (a grant covers a run of them).
    mode: &'static str,
    /// Median time per call without the gate / through it, µs.
    direct_median_us: f64,
    gated_median_us: f64,
    ratio: f64,
    /// Calls the gated runtimes finished per slot the agent granted: the
    /// round trips to the monitor the gate saves.
    calls_per_grant: f64,
}

/// Rounds each way alternates through, so that noise on the machine
/// falls on both alike.
const ROUNDS: usize = 10;

pub fn device_gate(args: DeviceGateArgs) -> Result<()> {
    if args.calls < 10 {
        bail!("--calls must be at least 10");
    }
    let target = DeviceRef::of_unit(&args.unit)?;
    let mut rows = Vec::new();
    for &us in &args.kernel_us {
        let (iterations, _) = calibrate_iterations(target, us)?;
        // The CPUs are units of both (a daemon needs one), but the task
        // runs on OpenCL only.
        let gated = start_daemon_with("")?;
        let direct = start_daemon_with_dir("device_units = false\n", "direct")?;
        for (mode, in_flight) in [("sync", 1usize), ("batched", 64)] {
            // Alternate the two ways in rounds so machine noise hits both.
            let mut direct_us = Vec::new();
            let mut gated_us = Vec::new();
            let (mut completed, mut grants) = (0u64, 0u64);
            for _ in 0..ROUNDS {
                let calls = (args.calls / ROUNDS).max(in_flight);
                direct_us.extend(
                    per_call_us(&direct.1, &args.unit, iterations, in_flight, calls)?.per_call_us,
                );
                let round = per_call_us(&gated.1, &args.unit, iterations, in_flight, calls)?;
                gated_us.extend(round.per_call_us);
                completed += round.completed;
                grants += round.grants;
            }
            let d = median(&mut direct_us);
            let g = median(&mut gated_us);
            if served_ns(&gated.1, &args.unit)? == 0 {
                bail!(
                    "the daemon's {} served nothing: the calls bypassed the gate",
                    args.unit
                );
            }
            rows.push(GateCost {
                kernel_us: us,
                mode,
                direct_median_us: d,
                gated_median_us: g,
                ratio: g / d,
                calls_per_grant: completed as f64 / grants.max(1) as f64,
            });
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!(
            "spin kernel on {}: per call through the runtime, {} calls each way",
            args.unit, args.calls
        );
        println!(
            "{:>9} {:>8} {:>12} {:>12} {:>7} {:>10}",
            "KERNEL", "MODE", "DIRECT", "GATED", "RATIO", "CALLS/GRANT"
        );
        for r in &rows {
            println!(
                "{:>7.0}µs {:>8} {:>10.1}µs {:>10.1}µs {:>7.3} {:>10.1}",
                r.kernel_us,
                r.mode,
                r.direct_median_us,
                r.gated_median_us,
                r.ratio,
                r.calls_per_grant
            );
        }
    }
    Ok(())
}

/// A second daemon beside [`start_daemon_with`]'s (its own folder).
fn start_daemon_with_dir(config: &str, tag: &str) -> Result<(DaemonChild, PathBuf)> {
    super::common::start_daemon_in(config, tag)
}

/// Slot time the daemon on `socket` has granted on `unit` in all, ns.
fn served_ns(socket: &Path, unit: &str) -> Result<u64> {
    let mut observer = Client::connect(ClientOptions::observer("bench").socket(socket))?;
    let report = observer.status()?;
    Ok(report
        .units
        .iter()
        .find(|u| u.info.name == unit)
        .map_or(0, |u| u.busy_ns_total))
}

/// What one round of [`per_call_us`] measured.
struct Round {
    /// Per call (one at a time) or per call of a window (in flight), µs.
    per_call_us: Vec<f64>,
    /// Calls the unit finished, and the slots its agent granted for them.
    completed: u64,
    grants: u64,
}

/// Per-call times of `calls` spin calls through a runtime on `socket`,
/// `in_flight` at a time: each call's own time when one runs at a time,
/// else the window's time per call. Checks every result.
fn per_call_us(
    socket: &Path,
    unit: &str,
    iterations: u32,
    in_flight: usize,
    calls: usize,
) -> Result<Round> {
    let opts = daemon_runtime("device-gate", socket)?;
    let rt = Runtime::with_options(opts)?;
    let task = spin_task(DeviceRef::of_unit(unit)?)?;
    // Profile first: the model must know the kernel before batches form.
    for seed in 0..4 {
        let call = SpinCall::new(iterations, seed);
        let want = call.expected();
        if rt.accelerate(&task, call, Mode::Sync)?.wait()? != want {
            bail!("wrong result from {unit}");
        }
    }
    let references: Vec<Vec<u32>> = (0..SEEDS)
        .map(|seed| SpinCall::new(iterations, seed).expected())
        .collect();
    let mut out = Vec::with_capacity(calls);
    if in_flight <= 1 {
        for i in 0..calls as u32 {
            let seed = i % SEEDS;
            let t = Instant::now();
            let got = rt
                .accelerate(&task, SpinCall::new(iterations, seed), Mode::Sync)?
                .wait()?;
            out.push(t.elapsed().as_nanos() as f64 / 1e3);
            if got != references[seed as usize] {
                bail!("wrong result from {unit}");
            }
        }
    } else {
        let rounds = calls.div_ceil(in_flight);
        for _ in 0..rounds {
            let t = Instant::now();
            let handles = (0..in_flight as u32)
                .map(|i| {
                    let seed = i % SEEDS;
                    let call = SpinCall::new(iterations, seed);
                    Ok((seed, rt.accelerate(&task, call, Mode::Async)?))
                })
                .collect::<Result<Vec<_>>>()?;
            let mut results = Vec::with_capacity(handles.len());
            for (seed, h) in handles {
                results.push((seed, h.wait()?));
            }
            out.push(t.elapsed().as_nanos() as f64 / 1e3 / in_flight as f64);
            if results
                .iter()
                .any(|(seed, got)| *got != references[*seed as usize])
            {
                bail!("wrong result from {unit}");
            }
        }
    }
    let stats = rt.stats();
    let on_unit = stats.units.iter().find(|s| s.name == unit);
    Ok(Round {
        per_call_us: out,
        completed: on_unit.map_or(0, |s| s.completed),
        grants: on_unit.map_or(0, |s| s.grants),
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let sorted: Vec<u64> = v.iter().map(|x| (x * 1e3) as u64).collect();
    percentile(&sorted, 0.5)
}
