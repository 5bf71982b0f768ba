//! `hetsched bench settings-churn`: what a client that changes its
//! settings as fast as the daemon answers costs the daemon's disk and its
//! other clients. The daemon (started here on a temporary socket) persists
//! settings in its state file; this measures how often that file is
//! rewritten, and a probe's `Status` round trip, first with no changes
//! (the anchor) and then during the churn, in the same run.

use super::common::{DaemonChild, percentile, start_daemon_with};
use anyhow::{Context, Result};
use clap::Args;
use hetsched_protocol::{Client, ClientOptions, SettingsRequest, WireClass};
use serde::Serialize;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct SettingsChurnArgs {
    /// Length of each phase (quiet, then churn), s.
    #[arg(long, value_parser = crate::values::seconds, default_value_t = 5.0)]
    seconds: f64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct ChurnReport {
    seconds: f64,
    /// `SetSettings` answered per second during the churn.
    changes_per_s: f64,
    /// Times the state file was replaced per second during the churn (its
    /// inode, watched every 0.5 ms: each save renames a new file in).
    writes_per_s: f64,
    probe_quiet_p50_us: f64,
    probe_quiet_p99_us: f64,
    probe_churn_p50_us: f64,
    probe_churn_p99_us: f64,
    /// Churn p99 over quiet p99.
    probe_p99_ratio: f64,
}

pub fn settings_churn(args: SettingsChurnArgs) -> Result<()> {
    let config = "include_cpus = false\ndevice_units = false\n[[emulated]]\nname = \"gpu0\"\nclass = \"gpu\"\nspeed = 8.0\ncopy_gbps = 12.0\n";
    let (daemon, socket) = start_daemon_with(config)?;
    let state = state_file(&daemon)?;
    let phase = Duration::from_secs_f64(args.seconds);
    let quiet = probe_for(&socket, phase)?;
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (socket, stop) = (socket.clone(), Arc::clone(&stop));
        std::thread::spawn(move || churn(&socket, &stop))
    };
    let watch = {
        let (state, stop) = (state.clone(), Arc::clone(&stop));
        std::thread::spawn(move || count_replacements(&state, &stop))
    };
    let started = Instant::now();
    let busy = probe_for(&socket, phase);
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    let changes = churn.join().expect("the churn thread panicked")?;
    let writes = watch.join().expect("the watch thread panicked");
    let busy = busy?;
    let report = ChurnReport {
        seconds: args.seconds,
        changes_per_s: changes as f64 / elapsed,
        writes_per_s: writes as f64 / elapsed,
        probe_quiet_p50_us: percentile(&quiet, 0.5),
        probe_quiet_p99_us: percentile(&quiet, 0.99),
        probe_churn_p50_us: percentile(&busy, 0.5),
        probe_churn_p99_us: percentile(&busy, 0.99),
        probe_p99_ratio: percentile(&busy, 0.99) / percentile(&quiet, 0.99),
    };
    drop(daemon);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "settings changes: {:.0}/s; state file written {:.1}/s",
            report.changes_per_s, report.writes_per_s
        );
        println!(
            "Status round trip p50 / p99: quiet {:.0} / {:.0} µs, during the churn {:.0} / {:.0} µs ({:.2}x at p99)",
            report.probe_quiet_p50_us,
            report.probe_quiet_p99_us,
            report.probe_churn_p50_us,
            report.probe_churn_p99_us,
            report.probe_p99_ratio
        );
    }
    Ok(())
}

/// The state file of a daemon `start_daemon_with` started.
fn state_file(daemon: &DaemonChild) -> Result<PathBuf> {
    let dir = daemon.dir();
    let config = std::fs::read_to_string(dir.join("hetsched.toml"))?;
    let line = config
        .lines()
        .find_map(|l| l.trim().strip_prefix("state_file = "))
        .context("the bench daemon's config names no state file")?;
    Ok(PathBuf::from(line.trim_matches('"')))
}

/// `Status` round trips, ns, sorted, one every millisecond for `phase`.
fn probe_for(socket: &Path, phase: Duration) -> Result<Vec<u64>> {
    let mut probe = Client::connect(ClientOptions::observer("churn-probe").socket(socket))?;
    let mut rtts = Vec::new();
    let until = Instant::now() + phase;
    while Instant::now() < until {
        let t0 = Instant::now();
        probe.status()?;
        rtts.push(t0.elapsed().as_nanos() as u64);
        std::thread::sleep(Duration::from_millis(1).saturating_sub(t0.elapsed()));
    }
    rtts.sort_unstable();
    Ok(rtts)
}

/// Changes this client's class between NORMAL 10 and 11 until `stop`;
/// returns how many changes the daemon answered.
fn churn(socket: &Path, stop: &AtomicBool) -> Result<u64> {
    let mut c = Client::connect(ClientOptions::application("churn")?.socket(socket))?;
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let shares = 10 + (n % 2) as u32;
        c.set_settings(
            None,
            None,
            SettingsRequest {
                class: Some(WireClass::Normal(shares)),
                priority: None,
            },
        )?;
        n += 1;
    }
    Ok(n)
}

/// How many times `path` was replaced (its inode changed) until `stop`.
fn count_replacements(path: &Path, stop: &AtomicBool) -> u64 {
    let inode = |p: &Path| std::fs::metadata(p).map(|m| m.ino()).ok();
    let mut last = inode(path);
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let now = inode(path);
        if now != last {
            n += 1;
            last = now;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    n
}
