//! `hetsched bench intercept`: unmodified OpenCL programs under `hetsched
//! run`. Two copies of a plain OpenCL loop (`hetsched load
//! --direct-opencl`, which never talks to the daemon itself) run at
//! CUSTOM 70 / 30 through the OpenCL layer; the daemon's accounting says
//! how the device split. Then one program of short kernels launched back
//! to back (`--spin-us`), alone, with and without the layer, for what the
//! layer costs.

use super::common::start_daemon_with;
use anyhow::{Context, Result, bail};
use hetsched_protocol::{Client, ClientOptions, InterceptApi, StatusReport};
use serde::Serialize;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct InterceptArgs {
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// The measured window of the share run, s.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// The two programs' classes.
    #[arg(long, value_delimiter = ',', default_value = "custom:70,custom:30")]
    classes: Vec<String>,
    /// Bytes each call of the share run histograms (about 0.5 ms on PoCL).
    #[arg(long, default_value_t = 262_144)]
    bytes: u64,
    /// Device time of each kernel of the overhead run, µs.
    #[arg(long, default_value_t = 20.0, value_parser = crate::values::positive_us)]
    overhead_kernel_us: f64,
    /// Seconds of each of the overhead run's rounds.
    #[arg(long, default_value_t = 1.0)]
    overhead_seconds: f64,
    /// Also draw the share run as an SVG plot here: each program's part of
    /// the device time per 100 ms, against its target.
    #[arg(long, value_name = "PATH")]
    svg: Option<std::path::PathBuf>,
    /// Pairs of overhead rounds (one without the layer, one with).
    #[arg(long, default_value_t = 7)]
    overhead_rounds: u32,
    /// Seconds of each of the BACKGROUND runs (starvation, latency).
    #[arg(long, default_value_t = 3.0)]
    background_seconds: f64,
}

/// What one `hetsched load --direct-opencl` printed.
#[derive(serde::Deserialize)]
struct LoadOut {
    pid: u32,
    tasks: u64,
    verified: Option<u64>,
    p50_call_ns: Option<u64>,
    p99_wait_ns: u64,
    p50_launch_ns: Option<u64>,
}

#[derive(Serialize)]
struct ProgramShare {
    pid: u32,
    class: String,
    shares: Option<u32>,
    device_fraction: f64,
    intercepted: bool,
    tasks: u64,
    verified: u64,
}

#[derive(Serialize)]
struct InterceptReport {
    unit: String,
    window_s: f64,
    clients: Vec<ProgramShare>,
    /// Kernels per second with the layer over kernels per second without
    /// (each launched, waited for, read back and checked): the median over
    /// pairs of rounds, each pair one round without the layer and one
    /// with, back to back.
    overhead_ratio: f64,
    /// Added time per launch: per pair of rounds, the median time inside
    /// `clEnqueueNDRangeKernel` with the layer minus without; the median
    /// over the pairs, µs.
    launch_overhead_us_p50: f64,
    overhead_kernel_us: f64,
    calls_per_s_without: f64,
    calls_per_s_with: f64,
    /// Device time a BACKGROUND program got while a CUSTOM one kept the
    /// device busy (daemon's accounting).
    background_fraction: f64,
    /// While a BACKGROUND program keeps the device busy with calls of
    /// `background_call_ms`, a CUSTOM program making a call every 10 ms:
    /// the 99th percentile of its calls' time off the device (waiting for
    /// the lease, and its host side), ms.
    custom_wait_p99_ms: f64,
    background_call_ms: f64,
    /// The leases of the two classes (the daemon's default `lease_us`).
    custom_lease_ms: f64,
    background_lease_ms: f64,
    checked: bool,
}

const UNIT: &str = "opencl0";
/// The daemon's default `lease_us`, which the benchmark's daemon keeps.
const DEFAULT_LEASE_US: u64 = 5_000;
fn load_cmd(socket: &Path, bytes: u64, seconds: f64, run_as: Option<&str>) -> Result<Command> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(&exe);
    if let Some(class) = run_as {
        let (name, shares) = class.split_once(':').unwrap_or((class, ""));
        cmd.args(["run", "--class", name]);
        if !shares.is_empty() {
            cmd.args(["--shares", shares]);
        }
        cmd.arg("--").arg(&exe);
    }
    cmd.args(["load", "--direct-opencl", "0", "--json"])
        .args(["--bytes", &bytes.to_string()])
        .args(["--seconds", &seconds.to_string()])
        .env("HETSCHED_SOCKET", socket)
        .env("HETSCHED_INTERCEPT_QUIET", "1")
        .env_remove("OPENCL_LAYERS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Ok(cmd)
}

fn load_cmd_with(
    socket: &Path,
    bytes: u64,
    seconds: f64,
    class: &str,
    extra: &[&str],
) -> Result<Command> {
    let mut cmd = load_cmd(socket, bytes, seconds, Some(class))?;
    cmd.args(extra);
    Ok(cmd)
}

/// A BACKGROUND program against a CUSTOM one, twice: both busy (what
/// BACKGROUND gets), then the CUSTOM one calling every 10 ms (how long
/// its calls wait). Returns (background fraction, CUSTOM wait p99 ns,
/// BACKGROUND call p50 ns, all results checked).
fn background_runs(
    observer: &mut Client,
    socket: &Path,
    bytes: u64,
    seconds: f64,
) -> Result<(f64, f64, f64, bool)> {
    let run_s = seconds + 4.0;
    // Starvation: both busy.
    let bg = load_cmd(socket, bytes, run_s, Some("background"))?.spawn()?;
    let custom = load_cmd(socket, bytes, run_s, Some("custom:50"))?.spawn()?;
    let pids = [bg.id(), custom.id()];
    wait_intercepted(observer, &pids)?;
    let before = observer.status()?;
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let after = observer.status()?;
    let used: Vec<f64> = pids
        .iter()
        .map(|&p| busy_ns(&after, p) - busy_ns(&before, p))
        .collect();
    let background_fraction = used[0] / (used[0] + used[1]).max(1.0);
    let (bg_out, custom_out) = (finish(bg)?, finish(custom)?);
    let mut checked = bg_out.verified == Some(bg_out.tasks)
        && custom_out.tasks > 0
        && custom_out.verified == Some(custom_out.tasks);
    // Latency: BACKGROUND saturates, CUSTOM calls every 10 ms.
    let bg = load_cmd(socket, bytes, run_s, Some("background"))?.spawn()?;
    wait_intercepted(observer, &[bg.id()])?;
    let mut custom = load_cmd_with(socket, 1024, seconds, "custom:50", &["--think-ms", "10"])?;
    let custom_out = finish(custom.spawn()?)?;
    let bg_out = finish(bg)?;
    checked &= bg_out.tasks > 0
        && bg_out.verified == Some(bg_out.tasks)
        && custom_out.tasks > 0
        && custom_out.verified == Some(custom_out.tasks);
    Ok((
        background_fraction,
        custom_out.p99_wait_ns as f64,
        bg_out.p50_call_ns.unwrap_or(0) as f64,
        checked,
    ))
}

fn finish(child: Child) -> Result<LoadOut> {
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "an OpenCL program failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("reading the program's report")
}

/// Waits until the daemon lists every pid in `pids` as an intercepted
/// OpenCL client.
fn wait_intercepted(observer: &mut Client, pids: &[u32]) -> Result<StatusReport> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let report = observer.status()?;
        let seen = pids.iter().all(|p| {
            report
                .clients
                .iter()
                .any(|c| c.pid == *p && c.intercepted == Some(InterceptApi::OpenCl))
        });
        if seen {
            return Ok(report);
        }
        if Instant::now() > deadline {
            bail!("the programs did not reach the daemon through the layer within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn busy_ns(report: &StatusReport, pid: u32) -> f64 {
    report
        .clients
        .iter()
        .filter(|c| c.pid == pid)
        .flat_map(|c| &c.units)
        .map(|u| u.busy_ns_total as f64)
        .sum()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn intercept(args: InterceptArgs) -> Result<()> {
    if !(args.seconds >= 1.0 && args.seconds.is_finite()) {
        bail!("--seconds must be at least 1");
    }
    if args.classes.len() != 2 {
        bail!("--classes takes two classes");
    }
    let (_daemon, socket) = start_daemon_with("include_cpus = false\n")?;
    let mut observer = Client::connect(ClientOptions::observer("bench").socket(&socket))?;
    // The programs run past the window: the time to start and build is
    // theirs, the window only starts once both are governed.
    let run_s = args.seconds + 4.0;
    let children = args
        .classes
        .iter()
        .map(|c| {
            load_cmd(&socket, args.bytes, run_s, Some(c))?
                .spawn()
                .map_err(Into::into)
        })
        .collect::<Result<Vec<Child>>>()?;
    let pids: Vec<u32> = children.iter().map(Child::id).collect();
    // `hetsched run` execs the program, so the pid stays the same.
    wait_intercepted(&mut observer, &pids)?;
    let before = observer.status()?;
    let started = Instant::now();
    // The window, sampled every 100 ms for the plot.
    let mut samples = vec![(
        0.0,
        pids.iter()
            .map(|&p| busy_ns(&before, p))
            .collect::<Vec<_>>(),
    )];
    let window = Duration::from_secs_f64(args.seconds);
    while started.elapsed() < window {
        let next = (Duration::from_millis(100) * samples.len() as u32).min(window);
        std::thread::sleep(next.saturating_sub(started.elapsed()));
        let s = observer.status()?;
        samples.push((
            started.elapsed().as_secs_f64(),
            pids.iter().map(|&p| busy_ns(&s, p)).collect(),
        ));
    }
    let after = observer.status()?;
    let window_s = started.elapsed().as_secs_f64();
    let charged: Vec<f64> = pids
        .iter()
        .map(|&p| busy_ns(&after, p) - busy_ns(&before, p))
        .collect();
    let total: f64 = charged.iter().sum();
    let mut checked = true;
    let mut clients = Vec::new();
    for ((child, class), ns) in children.into_iter().zip(&args.classes).zip(charged) {
        let out = finish(child)?;
        let verified = out.verified.unwrap_or(0);
        checked &= out.tasks > 0 && verified == out.tasks;
        clients.push(ProgramShare {
            pid: out.pid,
            class: class.clone(),
            shares: class.split_once(':').and_then(|(_, s)| s.parse().ok()),
            device_fraction: if total > 0.0 { ns / total } else { 0.0 },
            intercepted: true,
            tasks: out.tasks,
            verified,
        });
    }
    // Overhead: one program of short kernels alone, in pairs of rounds
    // without and with the layer; the machine's noise moves whole rounds,
    // so each pair is compared within itself and the medians of the pairs
    // are reported.
    let (mut without, mut with, mut ratios, mut added) = (vec![], vec![], vec![], vec![]);
    for _ in 0..args.overhead_rounds.max(1) {
        let mut pair = [(0.0, 0.0); 2];
        for (slot, layered) in pair.iter_mut().zip([false, true]) {
            let run_as = layered.then_some("custom:100");
            let mut cmd = load_cmd(&socket, 0, args.overhead_seconds, run_as)?;
            cmd.args(["--spin-us", &args.overhead_kernel_us.to_string()]);
            let out = finish(cmd.spawn()?)?;
            checked &= out.tasks > 0 && out.verified == Some(out.tasks);
            *slot = (
                out.tasks as f64 / args.overhead_seconds,
                out.p50_launch_ns.unwrap_or(0) as f64,
            );
        }
        let [(rate_off, p50_off), (rate_on, p50_on)] = pair;
        without.push(rate_off);
        with.push(rate_on);
        ratios.push(rate_on / rate_off);
        added.push(p50_on - p50_off);
    }
    let (rate_without, rate_with) = (median(without), median(with));
    let (background_fraction, custom_wait_p99_ns, background_call_ns, bg_checked) =
        background_runs(&mut observer, &socket, args.bytes, args.background_seconds)?;
    checked &= bg_checked;
    let lease_ms = DEFAULT_LEASE_US as f64 / 1e3;
    let report = InterceptReport {
        unit: UNIT.into(),
        window_s,
        clients,
        overhead_ratio: median(ratios),
        launch_overhead_us_p50: median(added) / 1e3,
        overhead_kernel_us: args.overhead_kernel_us,
        calls_per_s_without: rate_without,
        calls_per_s_with: rate_with,
        background_fraction,
        custom_wait_p99_ms: custom_wait_p99_ns / 1e6,
        background_call_ms: background_call_ns / 1e6,
        custom_lease_ms: lease_ms,
        background_lease_ms: lease_ms / 4.0,
        checked,
    };
    if let Some(path) = &args.svg {
        let targets: Vec<f64> = report
            .clients
            .iter()
            .map(|c| c.shares.map_or(0.0, |s| f64::from(s) / 100.0))
            .collect();
        std::fs::write(path, split_svg(&samples, &args.classes, &targets)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} under the OpenCL layer, {:.1} s window",
            report.unit, report.window_s
        );
        for c in &report.clients {
            println!(
                "  {:<12} pid {:>7}  device {:>5.1} %  {} calls",
                c.class,
                c.pid,
                c.device_fraction * 100.0,
                c.tasks
            );
        }
        println!(
            "  alone, {:.0} µs kernels: {:.0} calls/s without the layer, {:.0} with (ratio {:.3}); \
             {:+.2} µs per launch (p50)",
            report.overhead_kernel_us,
            report.calls_per_s_without,
            report.calls_per_s_with,
            report.overhead_ratio,
            report.launch_overhead_us_p50
        );
        println!(
            "  BACKGROUND against a busy CUSTOM program: {:.1} %; a CUSTOM program's wait behind \
             {:.2} ms BACKGROUND calls: p99 {:.2} ms (leases {:.2} / {:.2} ms)",
            report.background_fraction * 100.0,
            report.background_call_ms,
            report.custom_wait_p99_ms,
            report.custom_lease_ms,
            report.background_lease_ms
        );
    }
    if !checked {
        bail!("a program's results did not match the reference, or it ran nothing");
    }
    Ok(())
}

/// Each program's part of the device time per sampling interval (from the
/// daemon's cumulative accounting), with its target dashed.
fn split_svg(samples: &[(f64, Vec<f64>)], classes: &[String], targets: &[f64]) -> Result<String> {
    use plotters::prelude::*;
    let e = |e: &dyn std::fmt::Display| anyhow::anyhow!("{e}");
    let end = samples.last().map_or(1.0, |s| s.0).max(0.1);
    let colours = [RGBColor(40, 90, 200), RGBColor(230, 120, 60)];
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 360)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "two unmodified OpenCL programs under hetsched run (OpenCL layer)",
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..end, 0.0..1.0)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc("time, s")
            .y_desc("part of the device time per 100 ms")
            .draw()
            .map_err(|x| e(&x))?;
        for (i, class) in classes.iter().enumerate() {
            let colour = colours[i % colours.len()];
            let points: Vec<(f64, f64)> = samples
                .windows(2)
                .filter_map(|w| {
                    let used: Vec<f64> = w[1].1.iter().zip(&w[0].1).map(|(b, a)| b - a).collect();
                    let total: f64 = used.iter().sum();
                    (total > 0.0).then(|| ((w[0].0 + w[1].0) / 2.0, used[i] / total))
                })
                .collect();
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                .map_err(|x| e(&x))?
                .label(class.clone())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 14, y)], colour.stroke_width(2))
                });
            let target = targets.get(i).copied().unwrap_or(0.0);
            chart
                .draw_series(DashedLineSeries::new(
                    [(0.0, target), (end, target)],
                    6,
                    4,
                    colour.mix(0.6).stroke_width(1),
                ))
                .map_err(|x| e(&x))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::MiddleRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|x| e(&x))?;
        root.present().map_err(|x| e(&x))?;
    }
    Ok(svg)
}
