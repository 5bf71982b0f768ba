//! What the benchmarks share: a daemon started as a child process of
//! this binary, and percentiles of their samples.

use anyhow::{Context, Result, bail};
use hetsched_protocol::{Client, ClientOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
