//! `hetsched load`: an application that keeps one unit busy. On an
//! emulated device it keeps `--depth` tasks queued at the daemon; on any
//! other unit (or with `--gate`) it goes through the dispatch gate and runs
//! for the task's duration itself. On a unit the daemon runs real kernels
//! on (`served-opencl0`, `served-cuda0`) it runs `--kernel` through a
//! kernel ring and checks every output. It reports what it got, so contention between several
//! of them (under different classes) can be seen and measured.

use crate::{values, write_out};
use anyhow::{Context, Result, bail};
use clap::Args;
use hetsched_core::unit::UnitClass;
use hetsched_protocol::kernel_call::Kernel;
use hetsched_protocol::{Client, ClientError, ClientOptions};
use serde::Serialize;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct LoadArgs {
    /// Unit name (not with `--direct-opencl`).
    #[arg(long, required_unless_present_any = ["direct_opencl", "direct_cuda"])]
    unit: Option<String>,
    /// Modelled execution time of one task on the unit, ms (> 0).
    #[arg(long, default_value_t = 5.0, value_parser = values::positive_ms)]
    exec_ms: f64,
    /// How long to keep the unit busy, s (> 0, at most a year).
    #[arg(long, default_value_t = 3.0, value_parser = values::seconds)]
    seconds: f64,
    /// Tasks kept outstanding (emulated devices).
    #[arg(long, default_value_t = 2)]
    depth: u32,
    /// Bytes copied to the device per task.
    #[arg(long, default_value_t = 0)]
    bytes_in: u64,
    /// Bytes copied back per task.
    #[arg(long, default_value_t = 0)]
    bytes_out: u64,
    /// Use the dispatch gate even on an emulated device: ask for a grant,
    /// run the task here (sleeping, as while a device works; spinning on a
    /// CPU unit), report completion.
    #[arg(long)]
    gate: bool,
    /// Pause after each completed task, ms: a request/response client that
    /// thinks between requests (latency matters to it, throughput less).
    #[arg(long, default_value_t = 0.0, value_parser = values::ms)]
    think_ms: f64,
    /// Send the tasks through a call ring (Pegasus's per-client queue in
    /// shared memory) instead of one `SubmitDevice` message each.
    #[arg(long, conflicts_with = "gate")]
    ring: bool,
    /// On a unit the daemon runs kernels on: which one (`histogram`,
    /// `aes128-ctr`; default the unit's first).
    #[arg(long, conflicts_with = "gate")]
    kernel: Option<String>,
    /// Call OpenCL device N in this process instead of a unit of the
    /// daemon (the histogram kernel, one call at a time, every output
    /// checked): the driver's own sharing, to compare a served unit with.
    #[arg(long, value_name = "N", conflicts_with_all = ["gate", "ring", "socket"])]
    direct_opencl: Option<usize>,
    /// With `--direct-opencl`: launch the spin kernel of about this many
    /// µs of device time back to back (each result read back and
    /// checked) instead of the histogram.
    #[arg(long, value_name = "US", requires = "direct_opencl", value_parser = values::positive_us)]
    spin_us: Option<f64>,
    /// Call CUDA device N in this process through the driver API (the
    /// spin kernel, `--bytes` selecting its length in iterations, one call
    /// at a time, every output checked): an unmodified CUDA program for
    /// the CUDA interposer.
    #[arg(long, value_name = "N", conflicts_with_all = ["gate", "ring", "socket", "direct_opencl"])]
    direct_cuda: Option<usize>,
    /// Input bytes per kernel call.
    #[arg(long, default_value_t = 1 << 20)]
    bytes: u64,
    /// Name shown in `hetsched status`.
    #[arg(long, default_value = "hetsched-load")]
    name: String,
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct LoadReport {
    pid: u32,
    unit: String,
    class: String,
    tasks: u64,
    /// Unit time the daemon charged for this client's tasks, ns.
    unit_ns: u64,
    wall_ns: u64,
    mean_wait_ns: f64,
    /// Median and 99th percentile of the time tasks waited, ns.
    p50_wait_ns: u64,
    p99_wait_ns: u64,
    reconnects: u32,
    notice: Option<String>,
    /// Kernel calls whose output matched the reference (kernel units).
    verified: Option<u64>,
    /// Kernel calls: median and 99th percentile from the call to its
    /// result, ns (Pegasus's per-call latency).
    p50_call_ns: Option<u64>,
    p99_call_ns: Option<u64>,
    /// Direct OpenCL runs: the median host time inside a kernel's enqueue
    /// call, ns (what a launch costs the caller, through any layer).
    #[serde(skip_serializing_if = "Option::is_none")]
    p50_launch_ns: Option<u64>,
}

pub fn run(args: LoadArgs) -> Result<()> {
    if let Some(index) = args.direct_opencl {
        return run_direct(&args, index);
    }
    if let Some(ordinal) = args.direct_cuda {
        return run_direct_cuda(&args, ordinal);
    }
    let mut opts = ClientOptions::application(&args.name)?;
    if let Some(s) = &args.socket {
        opts = opts.socket(s);
    }
    let mut client = Client::connect(opts)?;
    let unit = args.unit.as_deref().unwrap_or_default();
    let info = client.unit_by_name(unit).cloned().with_context(|| {
        let names: Vec<&str> = client.units().iter().map(|u| u.name.as_str()).collect();
        format!("unknown unit {:?}; units are: {}", unit, names.join(", "))
    })?;
    let exec_ns = (args.exec_ms * 1e6) as u64;
    let until = Instant::now() + Duration::from_secs_f64(args.seconds);
    let start = Instant::now();
    let (mut tasks, mut unit_ns, mut wait_ns) = (0u64, 0u64, 0u64);
    let mut waits: Vec<u64> = Vec::new();
    let mut verified = None;
    let mut calls: Option<Vec<u64>> = None;
    if !info.kernels.is_empty() || args.kernel.is_some() {
        let name = args
            .kernel
            .clone()
            .or_else(|| info.kernels.first().cloned())
            .unwrap_or_default();
        let kernel = Kernel::from_name(&name).with_context(|| {
            let all: Vec<&str> = Kernel::ALL.iter().map(|k| k.name()).collect();
            format!("unknown kernel {name:?}; kernels are: {}", all.join(", "))
        })?;
        let got = crate::load_kernel::run(
            &mut client,
            &info,
            kernel,
            args.bytes,
            args.depth as usize,
            until,
            || think(args.think_ms),
        )?;
        (tasks, unit_ns, wait_ns, waits) = (got.tasks, got.unit_ns, got.wait_ns, got.waits);
        verified = Some(got.verified);
        calls = Some(got.calls);
    } else if info.emulated && args.ring {
        let mut ring = client.open_call_ring(info.id)?;
        let mut inflight = VecDeque::new();
        while Instant::now() < until {
            while inflight.len() < args.depth.max(1) as usize {
                match client.push_call(&mut ring, exec_ns, args.bytes_in, args.bytes_out) {
                    Some(task) => inflight.push_back(task),
                    None => break,
                }
            }
            let Some(task) = inflight.pop_front() else {
                bail!("the call ring is full with nothing in flight");
            };
            let done = client.wait_device(task)?;
            tasks += 1;
            unit_ns += done.ran_ns;
            wait_ns += done.waited_ns;
            waits.push(done.waited_ns);
            think(args.think_ms);
        }
    } else if info.emulated && !args.gate {
        let mut inflight = VecDeque::new();
        while Instant::now() < until {
            while inflight.len() < args.depth.max(1) as usize {
                inflight.push_back(client.submit_device(
                    info.id,
                    exec_ns,
                    args.bytes_in,
                    args.bytes_out,
                )?);
            }
            let task = inflight.pop_front().expect("filled above");
            match client.wait_device(task) {
                Ok(done) => {
                    tasks += 1;
                    unit_ns += done.ran_ns;
                    wait_ns += done.waited_ns;
                    waits.push(done.waited_ns);
                    think(args.think_ms);
                }
                Err(e) if e.is_disconnect() => {
                    // The daemon went away with everything queued; carry on
                    // with the next one (restarted) daemon.
                    client.reconnect()?;
                    inflight.clear();
                }
                Err(e) => return Err(e.into()),
            }
        }
    } else {
        while Instant::now() < until {
            let grant = match client.request_dispatch(info.id, exec_ns) {
                Ok(g) => g,
                Err(ClientError::Refused { message, .. }) => bail!("refused: {message}"),
                Err(e) => return Err(e.into()),
            };
            let t0 = Instant::now();
            if info.class == UnitClass::Cpu {
                while t0.elapsed().as_nanos() < u128::from(exec_ns) {
                    std::hint::spin_loop();
                }
            } else {
                std::thread::sleep(Duration::from_nanos(exec_ns));
            }
            let ran = t0.elapsed().as_nanos() as u64;
            client.task_completed(grant, ran)?;
            tasks += 1;
            unit_ns += ran;
            wait_ns += grant.waited_ns;
            waits.push(grant.waited_ns);
            think(args.think_ms);
        }
    }
    let class = client
        .status()
        .ok()
        .and_then(|r| {
            r.clients
                .iter()
                .find(|c| c.id == client.client_id())
                .and_then(|c| c.units.get(info.id.index()))
                .map(|u| u.settings.class.to_string())
        })
        .unwrap_or_else(|| "?".into());
    let report = LoadReport {
        pid: client.pid(),
        unit: info.name.clone(),
        class,
        tasks,
        unit_ns,
        wall_ns: start.elapsed().as_nanos() as u64,
        mean_wait_ns: if tasks > 0 {
            wait_ns as f64 / tasks as f64
        } else {
            0.0
        },
        p50_wait_ns: percentile(&mut waits, 0.50),
        p99_wait_ns: percentile(&mut waits, 0.99),
        reconnects: client.reconnects(),
        notice: client.notice().map(str::to_string),
        verified,
        p50_call_ns: calls.as_mut().map(|c| percentile(c, 0.50)),
        p99_call_ns: calls.as_mut().map(|c| percentile(c, 0.99)),
        p50_launch_ns: None,
    };
    let _ = client.goodbye();
    print_report(&report, args.json)
}

#[cfg(feature = "opencl")]
fn run_direct(args: &LoadArgs, index: usize) -> Result<()> {
    if args.kernel.as_deref().is_some_and(|k| k != "histogram") {
        bail!("--direct-opencl runs the histogram kernel only");
    }
    let seconds = Duration::from_secs_f64(args.seconds);
    let pause = || think(args.think_ms);
    let mut got = match args.spin_us {
        Some(us) => crate::load_direct::run_spin(index, us, seconds, pause)?,
        None => crate::load_direct::run(index, args.bytes, seconds, pause)?,
    };
    let report = LoadReport {
        pid: std::process::id(),
        unit: format!("opencl{index}"),
        class: "direct".into(),
        tasks: got.tasks,
        unit_ns: got.device_ns,
        wall_ns: got.wall_ns,
        mean_wait_ns: got.waits.iter().sum::<u64>() as f64 / got.tasks.max(1) as f64,
        p50_wait_ns: percentile(&mut got.waits, 0.50),
        p99_wait_ns: percentile(&mut got.waits, 0.99),
        reconnects: 0,
        notice: None,
        verified: Some(got.verified),
        p50_call_ns: Some(percentile(&mut got.calls, 0.50)),
        p99_call_ns: Some(percentile(&mut got.calls, 0.99)),
        p50_launch_ns: Some(percentile(&mut got.launches, 0.50)),
    };
    print_report(&report, args.json)
}

#[cfg(not(feature = "opencl"))]
fn run_direct(_: &LoadArgs, _: usize) -> Result<()> {
    bail!("--direct-opencl needs a build with the `opencl` feature")
}

#[cfg(feature = "cuda")]
fn run_direct_cuda(args: &LoadArgs, ordinal: usize) -> Result<()> {
    let seconds = Duration::from_secs_f64(args.seconds);
    let iterations = u32::try_from(args.bytes).unwrap_or(u32::MAX);
    let mut got =
        crate::load_direct_cuda::run(ordinal, iterations, seconds, || think(args.think_ms))?;
    let report = LoadReport {
        pid: std::process::id(),
        unit: format!("cuda{ordinal}"),
        class: "direct".into(),
        tasks: got.tasks,
        unit_ns: got.device_ns,
        wall_ns: got.wall_ns,
        mean_wait_ns: got.waits.iter().sum::<u64>() as f64 / got.tasks.max(1) as f64,
        p50_wait_ns: percentile(&mut got.waits, 0.50),
        p99_wait_ns: percentile(&mut got.waits, 0.99),
        reconnects: 0,
        notice: None,
        verified: Some(got.verified),
        p50_call_ns: Some(percentile(&mut got.calls, 0.50)),
        p99_call_ns: Some(percentile(&mut got.calls, 0.99)),
        p50_launch_ns: None,
    };
    print_report(&report, args.json)
}

#[cfg(not(feature = "cuda"))]
fn run_direct_cuda(_: &LoadArgs, _: usize) -> Result<()> {
    bail!("--direct-cuda needs a build with the `cuda` feature")
}

fn print_report(report: &LoadReport, json: bool) -> Result<()> {
    let mut out = String::new();
    if json {
        out = serde_json::to_string(report)? + "\n";
    } else {
        let _ = writeln!(
            out,
            "{} on {} ({}): {} tasks, {:.3} s of unit time in {:.3} s ({:.1} %), mean wait {:.2} ms, p99 {:.2} ms",
            report.pid,
            crate::shown::text(&report.unit),
            report.class,
            report.tasks,
            report.unit_ns as f64 / 1e9,
            report.wall_ns as f64 / 1e9,
            100.0 * report.unit_ns as f64 / report.wall_ns.max(1) as f64,
            report.mean_wait_ns / 1e6,
            report.p99_wait_ns as f64 / 1e6
        );
        if let Some(v) = report.verified {
            let _ = writeln!(
                out,
                "{v} of {} outputs checked against the reference",
                report.tasks
            );
        }
        if let Some(n) = &report.notice {
            let _ = writeln!(out, "notice: {}", crate::shown::text(n));
        }
    }
    write_out(&out)
}

fn think(ms: f64) {
    if ms > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(ms / 1e3));
    }
}

/// The `p` quantile (nearest rank) of `v`, 0 when empty.
fn percentile(v: &mut [u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize]
}
