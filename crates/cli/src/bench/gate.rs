//! `hetsched bench gate`: the dispatch gate's round trip.
//!
//! It starts a real daemon (this binary, as a child process) with one
//! emulated unit that has a stream per client, then runs N clients — each
//! its own connection, on its own thread — that request a dispatch and
//! complete it at once, as fast as they can. The round trip measured is
//! client → daemon → grant: what an application pays per task for a
//! system-wide scheduler.

use super::common::{DaemonChild, percentile, start_daemon_with};
use anyhow::{Context, Result, bail};
use clap::Args;
use hetsched_protocol::{Client, ClientOptions};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

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

fn start_daemon(streams: u32, policy: &str) -> Result<(DaemonChild, PathBuf)> {
    start_daemon_with(&format!(
        "include_cpus = false\nmax_outstanding = 4\n\
         [policies]\ngate = \"{policy}\"\n\
         [[emulated]]\nname = \"gate\"\nspeed = 1.0\ncopy_gbps = 10.0\nstreams = {streams}\n"
    ))
}

pub(super) fn gate(args: GateArgs) -> Result<()> {
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
