//! `hetsched bench process-shares`: shares belong to the process. Two
//! client processes (this binary, `bench share-client`) at equal shares
//! keep one emulated unit busy, one through `--connections` connections
//! (each its own thread), the other through one. Each reports the unit
//! time the daemon charged it; at equal shares each should get half,
//! however many connections it opened.

use super::common::start_daemon_with;
use anyhow::{Context, Result, bail};
use clap::Args;
use hetsched_protocol::{Client, ClientOptions};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct ProcessSharesArgs {
    /// Connections of the first process (the second has one).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    connections: u32,
    /// How long both keep the unit busy, s.
    #[arg(long, value_parser = crate::values::seconds, default_value_t = 5.0)]
    seconds: f64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct ShareClientArgs {
    #[arg(long)]
    socket: PathBuf,
    #[arg(long)]
    connections: u32,
    #[arg(long)]
    seconds: f64,
}

/// What one client process got.
#[derive(Serialize, Deserialize)]
struct Got {
    pid: u32,
    connections: u32,
    unit_ns: u64,
}

#[derive(Serialize)]
struct SharesReport {
    seconds: f64,
    many_connections: u32,
    /// Parts of the unit time both got, by the process with many
    /// connections and by the one with one.
    many_fraction: f64,
    one_fraction: f64,
    /// `many_fraction - one_fraction`, percentage points.
    gap_pp: f64,
}

/// Device work of each task, ms: long enough that the daemon's overhead is
/// small, short enough for many decisions per second.
const TASK_NS: u64 = 2_000_000;

pub fn process_shares(args: ProcessSharesArgs) -> Result<()> {
    let config = "include_cpus = false\ndevice_units = false\n\
                  [[emulated]]\nname = \"gpu0\"\nclass = \"gpu\"\nspeed = 1.0\ncopy_gbps = 10.0\n";
    let (_daemon, socket) = start_daemon_with(config)?;
    let mut children = vec![
        spawn_client(&socket, args.connections, args.seconds)?,
        spawn_client(&socket, 1, args.seconds)?,
    ];
    // Every connection is open before either starts.
    for child in children.iter_mut() {
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().context("no stdout")?).read_line(&mut line)?;
        if line.trim() != "ready" {
            bail!("a client process said {line:?} instead of ready");
        }
    }
    for child in children.iter_mut() {
        writeln!(child.stdin.as_mut().context("no stdin")?, "go")?;
    }
    let mut got = Vec::new();
    for child in children {
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "a client process failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        got.push(serde_json::from_slice::<Got>(&out.stdout)?);
    }
    let total = (got[0].unit_ns + got[1].unit_ns).max(1) as f64;
    let report = SharesReport {
        seconds: args.seconds,
        many_connections: args.connections,
        many_fraction: got[0].unit_ns as f64 / total,
        one_fraction: got[1].unit_ns as f64 / total,
        gap_pp: 100.0 * (got[0].unit_ns as f64 - got[1].unit_ns as f64) / total,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "process with {} connections: {:.1} % of the unit; process with 1: {:.1} % ({:+.1} pp)",
            report.many_connections,
            100.0 * report.many_fraction,
            100.0 * report.one_fraction,
            report.gap_pp
        );
    }
    Ok(())
}

fn spawn_client(socket: &Path, connections: u32, seconds: f64) -> Result<Child> {
    Command::new(std::env::current_exe()?)
        .args(["bench", "share-client", "--socket"])
        .arg(socket)
        .args(["--connections", &connections.to_string()])
        .args(["--seconds", &seconds.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting a client process")
}

/// One client process: opens its connections, says `ready`, waits for
/// `go` on stdin, keeps two tasks queued on each connection for
/// `seconds`, and prints what the daemon charged them all (JSON).
pub fn share_client(args: ShareClientArgs) -> Result<()> {
    let mut clients = Vec::new();
    for i in 0..args.connections {
        let opts = ClientOptions::application(format!("share-{i}"))?.socket(&args.socket);
        clients.push(Client::connect(opts)?);
    }
    println!("ready");
    std::io::stdout().flush()?;
    let mut go = String::new();
    std::io::stdin().read_line(&mut go)?;
    let until = Instant::now() + Duration::from_secs_f64(args.seconds);
    let threads: Vec<_> = clients
        .into_iter()
        .map(|client| std::thread::spawn(move || keep_busy(client, until)))
        .collect();
    let mut unit_ns = 0;
    for t in threads {
        unit_ns += t
            .join()
            .map_err(|_| anyhow::anyhow!("a connection's thread panicked"))??;
    }
    let got = Got {
        pid: std::process::id(),
        connections: args.connections,
        unit_ns,
    };
    println!("{}", serde_json::to_string(&got)?);
    Ok(())
}

/// Two tasks queued at all times until `until`; the unit time charged.
fn keep_busy(mut client: Client, until: Instant) -> Result<u64> {
    let unit = client.unit_by_name("gpu0").context("no gpu0 unit")?.id;
    let mut inflight = VecDeque::new();
    let mut unit_ns = 0;
    while Instant::now() < until {
        while inflight.len() < 2 {
            inflight.push_back(client.submit_device(unit, TASK_NS, 0, 0)?);
        }
        let task = inflight.pop_front().expect("filled above");
        unit_ns += client.wait_device(task)?.ran_ns;
    }
    let _ = client.goodbye();
    Ok(unit_ns)
}
