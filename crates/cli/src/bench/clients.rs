//! `hetsched bench clients`: what many clients cost the daemon and each
//! other. Both modes start a daemon (this binary, on a temporary socket)
//! with one emulated unit, `gate`.
//!
//! * `--idle N`: N application clients connect, say Hello and then nothing.
//!   The daemon's CPU time, resident memory and threads, and a probe's
//!   dispatch-gate round trip, are measured first with no idle clients
//!   (the anchor) and then with all N connected (from 3 s after the last
//!   connected), in the same run. With `--scrape`, the daemon also
//!   serves `/metrics`, and with the N clients connected a probe does
//!   back-to-back gate round trips for a phase with nothing else, then for
//!   a phase while another thread scrapes `/metrics` in a loop.
//! * `--active N --task-us T`: N clients, each on its own thread, ask for
//!   a grant on `gate`, hold it T µs, complete it and ask again. Reported:
//!   requests never answered (`lost`), the wait for a grant against what
//!   fair queueing would give (every client waits for the others' tasks
//!   once per turn: hold × (N / slots − 1)), and how long a `status`
//!   takes meanwhile.

use super::common::{DaemonChild, percentile, start_daemon_with};
use anyhow::{Context, Result, bail};
use clap::Args;
use hetsched_core::ids::UnitId;
use hetsched_protocol::{Client, ClientOptions};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct ClientsArgs {
    /// Idle clients to connect (Hello, then nothing).
    #[arg(long, default_value_t = 0)]
    idle: u32,
    /// Active clients doing dispatch-gate round trips.
    #[arg(long, default_value_t = 0)]
    active: u32,
    /// How long each active client holds its grant, µs.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    task_us: u64,
    /// Slots of the unit the clients share (its streams).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    slots: u32,
    /// Length of each measured phase, s.
    #[arg(long, value_parser = crate::values::seconds, default_value_t = 5.0)]
    seconds: f64,
    /// With --idle: also measure the gate while `/metrics` is scraped in
    /// a loop (the daemon serves it on a loopback port).
    #[arg(long)]
    scrape: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn clients(args: ClientsArgs) -> Result<()> {
    match (args.idle, args.active) {
        (0, 0) => bail!("say how many clients: --idle N or --active N"),
        (_, 0) => idle(&args),
        (0, _) if args.scrape => bail!("--scrape goes with --idle N"),
        (0, _) => active(&args),
        _ => bail!("--idle and --active are separate benchmarks: give one of them"),
    }
}

/// A daemon whose limits admit `clients` connections of this user (and a
/// few more for the probe and `status`).
fn start_daemon(clients: u32, slots: u32, metrics: bool) -> Result<(DaemonChild, PathBuf)> {
    let room = clients + 64;
    let metrics = if metrics {
        "metrics_listen = \"127.0.0.1:0\"\n"
    } else {
        ""
    };
    start_daemon_with(&format!(
        "{metrics}include_cpus = false\ndevice_units = false\nmax_outstanding = 4\n\
         max_connections_per_uid = {room}\nmax_connections = {room}\n\
         [[emulated]]\nname = \"gate\"\nspeed = 1.0\ncopy_gbps = 10.0\nstreams = {slots}\n"
    ))
}

/// Raises this process's descriptor limit to hold `fds` (as root, past
/// the hard limit when needed).
fn make_room_for(fds: u64) -> Result<()> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    if now.current.is_some_and(|c| c >= fds) || now.current.is_none() {
        return Ok(());
    }
    let maximum = match now.maximum {
        Some(m) if m < fds => Some(fds),
        other => other,
    };
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(fds),
            maximum,
        },
    )
    .with_context(|| {
        format!(
            "this benchmark needs {fds} open files; the limit is {:?} (run as root, or raise `ulimit -n`)",
            now.current
        )
    })
}

/// CPU time and memory of a process, from /proc.
#[derive(Clone, Copy, Debug)]
struct ProcSample {
    at: Instant,
    cpu_s: f64,
}

fn sample(pid: u32) -> Result<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start at ')'.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("unreadable /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 here.
    let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    let hz = rustix::param::clock_ticks_per_second() as f64;
    Ok(ProcSample {
        at: Instant::now(),
        cpu_s: ticks as f64 / hz,
    })
}

fn cpu_fraction(from: ProcSample, to: ProcSample) -> f64 {
    (to.cpu_s - from.cpu_s) / (to.at - from.at).as_secs_f64()
}

/// `VmRSS` (MiB) and `Threads` of a process.
fn memory_and_threads(pid: u32) -> Result<(f64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> Result<u64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .with_context(|| format!("no {name} in /proc/{pid}/status"))?;
        Ok(line
            .split_whitespace()
            .nth(1)
            .context("empty field")?
            .parse()?)
    };
    Ok((field("VmRSS:")? as f64 / 1024.0, field("Threads:")?))
}

/// How long idle clients stay connected before they are measured.
const SETTLE: Duration = Duration::from_secs(3);

#[derive(Serialize)]
struct IdleReport {
    idle_clients: u32,
    /// Time to connect them all, s.
    connect_seconds: f64,
    /// The daemon's CPU time over wall time, quiet (no idle clients, no
    /// probe) and with them all connected.
    quiet_daemon_cpu_fraction: f64,
    daemon_cpu_fraction: f64,
    quiet_daemon_rss_mb: f64,
    daemon_rss_mb: f64,
    quiet_daemon_threads: u64,
    daemon_threads: u64,
    /// One probe client's gate round trips (request → grant → complete,
    /// one every millisecond), quiet and with the idle clients.
    quiet_probe_p99_us: f64,
    probe_round_trips: usize,
    probe_p50_us: f64,
    probe_p99_us: f64,
    /// `probe_p99_us` over `quiet_probe_p99_us`.
    probe_p99_ratio: f64,
    /// With `--scrape`: the gate under a scrape loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    scrape: Option<ScrapeReport>,
}

/// Measures one phase: the daemon's CPU with nothing else talking to it,
/// then the probe.
fn measure_phase(pid: u32, socket: &Path, phase: Duration) -> Result<(f64, Vec<u64>)> {
    let before = sample(pid)?;
    std::thread::sleep(phase);
    let cpu = cpu_fraction(before, sample(pid)?);
    Ok((cpu, probe(socket, phase)?))
}

/// Gate round trips of one client, one per millisecond, for `phase`.
fn probe(socket: &Path, phase: Duration) -> Result<Vec<u64>> {
    gate_round_trips(socket, phase, Some(Duration::from_millis(1)))
}

/// Gate round trips of one client for `phase`, with `pause` between
/// them (back to back without), sorted, ns.
fn gate_round_trips(socket: &Path, phase: Duration, pause: Option<Duration>) -> Result<Vec<u64>> {
    let mut client = Client::connect(ClientOptions::application("probe")?.socket(socket))?;
    let unit = gate_unit(&client)?;
    let mut samples = Vec::new();
    let start = Instant::now();
    while start.elapsed() < phase {
        let t0 = Instant::now();
        let grant = client.request_dispatch(unit, 1_000)?;
        client.task_completed(grant, 0)?;
        samples.push(t0.elapsed().as_nanos() as u64);
        if let Some(pause) = pause {
            std::thread::sleep(pause);
        }
    }
    let _ = client.goodbye();
    samples.sort_unstable();
    Ok(samples)
}

fn gate_unit(client: &Client) -> Result<UnitId> {
    Ok(client.unit_by_name("gate").context("no gate unit")?.id)
}

/// Connects `n` application clients from a few threads (the daemon's
/// handshake is the bottleneck, not this side).
fn connect_idle(socket: &Path, n: u32) -> Result<Vec<Client>> {
    const CONNECTORS: u32 = 4;
    let handles: Vec<_> = (0..CONNECTORS)
        .map(|t| {
            let socket = socket.to_path_buf();
            std::thread::spawn(move || -> Result<Vec<Client>> {
                (t..n)
                    .step_by(CONNECTORS as usize)
                    .map(|i| {
                        let opts = ClientOptions::application(format!("idle-{i}"))?.socket(&socket);
                        Client::connect(opts).with_context(|| format!("idle client {i}"))
                    })
                    .collect()
            })
        })
        .collect();
    let mut all = Vec::with_capacity(n as usize);
    for h in handles {
        all.extend(
            h.join()
                .map_err(|_| anyhow::anyhow!("a connecting thread panicked"))??,
        );
    }
    Ok(all)
}

fn idle(args: &ClientsArgs) -> Result<()> {
    // Per idle client: its socket (its view pages are mapped, their
    // descriptors closed). Room for the probe and this process's own.
    make_room_for(u64::from(args.idle) + 256)?;
    let (daemon, socket) = start_daemon(args.idle, args.slots, args.scrape)?;
    let pid = daemon.pid();
    let phase = Duration::from_secs_f64(args.seconds);
    let (quiet_cpu, quiet_probe) = measure_phase(pid, &socket, phase)?;
    let (quiet_rss, quiet_threads) = memory_and_threads(pid)?;
    let t0 = Instant::now();
    let held = connect_idle(&socket, args.idle)?;
    let connect_seconds = t0.elapsed().as_secs_f64();
    // Idle means connected for a while: a client that just said Hello is
    // as busy, to the daemon, as one that just ran a task.
    std::thread::sleep(SETTLE);
    let (cpu, probed) = measure_phase(pid, &socket, phase)?;
    let (rss, threads) = memory_and_threads(pid)?;
    let scraped = if args.scrape {
        Some(scrape_phases(&daemon, &socket, phase)?)
    } else {
        None
    };
    drop(held);
    let report = IdleReport {
        idle_clients: args.idle,
        connect_seconds,
        quiet_daemon_cpu_fraction: quiet_cpu,
        daemon_cpu_fraction: cpu,
        quiet_daemon_rss_mb: quiet_rss,
        daemon_rss_mb: rss,
        quiet_daemon_threads: quiet_threads,
        daemon_threads: threads,
        quiet_probe_p99_us: percentile(&quiet_probe, 0.99),
        probe_round_trips: probed.len(),
        probe_p50_us: percentile(&probed, 0.5),
        probe_p99_us: percentile(&probed, 0.99),
        probe_p99_ratio: percentile(&probed, 0.99) / percentile(&quiet_probe, 0.99),
        scrape: scraped,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} idle clients (connected in {:.1} s): daemon CPU {:.1} % of a core (quiet {:.1} %), \
             RSS {:.0} MiB (quiet {:.0}), {} threads (quiet {}); probe round trip p50 {:.0} µs, \
             p99 {:.0} µs (quiet {:.0} µs, ×{:.2})",
            report.idle_clients,
            report.connect_seconds,
            100.0 * report.daemon_cpu_fraction,
            100.0 * report.quiet_daemon_cpu_fraction,
            report.daemon_rss_mb,
            report.quiet_daemon_rss_mb,
            report.daemon_threads,
            report.quiet_daemon_threads,
            report.probe_p50_us,
            report.probe_p99_us,
            report.quiet_probe_p99_us,
            report.probe_p99_ratio,
        );
        if let Some(s) = &report.scrape {
            println!(
                "gate round trips back to back, {:.1} s each: {} without scrapes (p99 {:.0} µs), \
                 {} while /metrics is scraped in a loop (p99 {:.0} µs; {} scrapes, p50 {:.1} ms)",
                args.seconds,
                s.quiet_round_trips,
                s.quiet_p99_us,
                s.round_trips,
                s.p99_us,
                s.scrapes,
                s.scrape_p50_ms,
            );
        }
    }
    Ok(())
}

/// The gate under a `/metrics` scrape loop, with the idle clients
/// connected.
#[derive(Serialize)]
struct ScrapeReport {
    /// Back-to-back round trips of one probe in a phase with no scrapes.
    quiet_round_trips: usize,
    quiet_p99_us: f64,
    /// The same while another thread scrapes `/metrics` in a loop.
    round_trips: usize,
    p99_us: f64,
    scrapes: usize,
    scrape_p50_ms: f64,
}

/// A phase of back-to-back round trips with nothing else, then one with a
/// scrape loop.
fn scrape_phases(daemon: &DaemonChild, socket: &Path, phase: Duration) -> Result<ScrapeReport> {
    let addr = metrics_addr(daemon)?;
    let quiet = round_trips(socket, phase)?;
    let stop = Arc::new(AtomicBool::new(false));
    let scraper = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || -> Result<Vec<u64>> {
            let mut took = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                scrape(&addr)?;
                took.push(t0.elapsed().as_nanos() as u64);
            }
            took.sort_unstable();
            Ok(took)
        })
    };
    let scraping = round_trips(socket, phase);
    stop.store(true, Ordering::Relaxed);
    let took = scraper
        .join()
        .map_err(|_| anyhow::anyhow!("the scraping thread panicked"))??;
    let scraping = scraping?;
    Ok(ScrapeReport {
        quiet_round_trips: quiet.len(),
        quiet_p99_us: percentile(&quiet, 0.99),
        round_trips: scraping.len(),
        p99_us: percentile(&scraping, 0.99),
        scrapes: took.len(),
        scrape_p50_ms: percentile(&took, 0.5) / 1e3,
    })
}

/// Gate round trips of one client, back to back, for `phase`.
fn round_trips(socket: &Path, phase: Duration) -> Result<Vec<u64>> {
    gate_round_trips(socket, phase, None)
}

/// Where the daemon serves `/metrics`: the address it logged.
fn metrics_addr(daemon: &DaemonChild) -> Result<String> {
    let log = daemon.dir().join("daemon.log");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(rest) = text.split("metrics on http://").nth(1) {
            return Ok(rest.split('/').next().unwrap_or_default().to_string());
        }
        if Instant::now() > deadline {
            bail!("the daemon did not say where it serves /metrics: {text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One `GET /metrics`, read to the end.
fn scrape(addr: &str) -> Result<()> {
    use std::io::{Read, Write};
    let mut s =
        std::net::TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut text = Vec::new();
    s.read_to_end(&mut text)?;
    if !text.starts_with(b"HTTP/1.1 200") && !text.starts_with(b"HTTP/1.0 200") {
        bail!(
            "GET /metrics: {}",
            String::from_utf8_lossy(&text[..text.len().min(80)])
        );
    }
    Ok(())
}

#[derive(Serialize)]
struct ActiveReport {
    active_clients: u32,
    task_us: u64,
    slots: u32,
    seconds: f64,
    /// Grants received in the measured phase.
    granted: usize,
    /// Requests never answered: waiting when the run ended and still
    /// unanswered after the drain, or given up on during the run.
    lost: u32,
    /// How long clients held their grants (measured: sleeps overshoot).
    mean_hold_ms: f64,
    /// What fair queueing gives each request: the others' tasks ahead of
    /// it once per turn, hold × (clients / slots − 1).
    fair_wait_ms: f64,
    grant_wait_p50_ms: f64,
    grant_wait_p99_ms: f64,
    grant_wait_max_ms: f64,
    /// `grant_wait_p99_ms` over `fair_wait_ms`.
    p99_over_fair: f64,
    /// The slowest `status` asked every 200 ms during the run, ms, and
    /// whether it was asked as root.
    root_status_ms: f64,
    status_as_root: bool,
    status_calls: usize,
}

/// What one active client saw.
#[derive(Default)]
struct ActiveLog {
    waits_ns: Vec<u64>,
    held_ns: u64,
    lost: u32,
}

/// One active client: round trips until `stop`, then the last request's
/// answer is waited for up to `drain` (a request still unanswered then is
/// lost).
fn active_client(
    mut client: Client,
    unit: UnitId,
    hold: Duration,
    start: &Barrier,
    stop: &AtomicBool,
    drain: Duration,
) -> ActiveLog {
    let mut log = ActiveLog::default();
    if client.set_reply_timeout(Some(drain)).is_err() {
        log.lost = 1;
        return log;
    }
    start.wait();
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        let Ok(grant) = client.request_dispatch(unit, hold.as_nanos() as u64) else {
            log.lost += 1;
            return log;
        };
        log.waits_ns.push(t0.elapsed().as_nanos() as u64);
        let t1 = Instant::now();
        std::thread::sleep(hold);
        let held = t1.elapsed();
        log.held_ns += held.as_nanos() as u64;
        if client
            .task_completed(grant, held.as_nanos() as u64)
            .is_err()
        {
            return log;
        }
    }
    let _ = client.goodbye();
    log
}

fn active(args: &ClientsArgs) -> Result<()> {
    make_room_for(u64::from(args.active) * 3 + 256)?;
    let (daemon, socket) = start_daemon(args.active, args.slots, false)?;
    let hold = Duration::from_micros(args.task_us);
    let fair = hold.as_secs_f64() * (f64::from(args.active) / f64::from(args.slots) - 1.0).max(0.0);
    let drain = Duration::from_secs_f64((20.0 * fair).max(10.0));
    let n = args.active as usize;
    let start = Arc::new(Barrier::new(n + 1));
    let stop = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::with_capacity(n);
    for i in 0..args.active {
        let opts = ClientOptions::application(format!("active-{i}"))?.socket(&socket);
        let client = Client::connect(opts).with_context(|| format!("active client {i}"))?;
        let unit = gate_unit(&client)?;
        let (start, stop) = (Arc::clone(&start), Arc::clone(&stop));
        handles.push(
            std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || active_client(client, unit, hold, &start, &stop, drain))?,
        );
    }
    let mut status = Client::connect(ClientOptions::observer("bench-status").socket(&socket))?;
    start.wait();
    let began = Instant::now();
    let phase = Duration::from_secs_f64(args.seconds);
    let mut status_ms = Vec::new();
    while began.elapsed() < phase {
        let t0 = Instant::now();
        status.status().context("status during the run")?;
        status_ms.push(t0.elapsed().as_nanos() as u64);
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    let mut logs = Vec::with_capacity(n);
    for h in handles {
        logs.push(
            h.join()
                .map_err(|_| anyhow::anyhow!("a client thread panicked"))?,
        );
    }
    drop(daemon);
    let mut waits: Vec<u64> = logs
        .iter()
        .flat_map(|l| l.waits_ns.iter().copied())
        .collect();
    waits.sort_unstable();
    let held: u64 = logs.iter().map(|l| l.held_ns).sum();
    let mean_hold_ms = held as f64 / waits.len().max(1) as f64 / 1e6;
    let fair_wait_ms =
        mean_hold_ms * (f64::from(args.active) / f64::from(args.slots) - 1.0).max(0.0);
    status_ms.sort_unstable();
    let p99 = percentile(&waits, 0.99) / 1e3;
    let report = ActiveReport {
        active_clients: args.active,
        task_us: args.task_us,
        slots: args.slots,
        seconds: args.seconds,
        granted: waits.len(),
        lost: logs.iter().map(|l| l.lost).sum(),
        mean_hold_ms,
        fair_wait_ms,
        grant_wait_p50_ms: percentile(&waits, 0.5) / 1e3,
        grant_wait_p99_ms: p99,
        grant_wait_max_ms: waits.last().map_or(f64::NAN, |&w| w as f64 / 1e6),
        p99_over_fair: p99 / fair_wait_ms,
        root_status_ms: status_ms.last().map_or(f64::NAN, |&s| s as f64 / 1e6),
        status_as_root: rustix::process::geteuid().is_root(),
        status_calls: status_ms.len(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} active clients, {} µs tasks on {} slots: {} grants, {} lost; grant wait p50 {:.1} ms, \
             p99 {:.1} ms (fair queueing {:.1} ms, ×{:.2}); slowest status {:.1} ms",
            report.active_clients,
            report.task_us,
            report.slots,
            report.granted,
            report.lost,
            report.grant_wait_p50_ms,
            report.grant_wait_p99_ms,
            report.fair_wait_ms,
            report.p99_over_fair,
            report.root_status_ms,
        );
    }
    Ok(())
}
