//! Starting a daemon process: its configuration file, its command line,
//! waiting until it listens, and a start that must be refused.

use hetsched_protocol::{Client, ClientOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::BIN;

/// Writes a daemon configuration at `path`: its state in `state`, then
/// `config`. Returns `path`.
pub fn write_config(path: &Path, state: &Path, config: &str) -> PathBuf {
    std::fs::write(
        path,
        format!("state_file = \"{}\"\n{config}", state.display()),
    )
    .unwrap();
    path.to_path_buf()
}

/// `hetsched daemon [--config CONFIG] --socket SOCKET`, its standard
/// output dropped; the caller adds the rest (stderr, user, environment).
pub fn daemon_command(config: Option<&Path>, socket: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.arg("daemon");
    if let Some(config) = config {
        c.arg("--config").arg(config);
    }
    c.arg("--socket").arg(socket).stdout(Stdio::null());
    c
}

/// An observer of the daemon on `socket`, once it listens; fails the test
/// after `timeout`, with the last connection error.
pub fn wait_for_daemon(socket: &Path, timeout: Duration) -> Client {
    let deadline = Instant::now() + timeout;
    loop {
        match Client::connect(ClientOptions::observer("test").socket(socket)) {
            Ok(c) => return c,
            Err(e) => assert!(
                Instant::now() < deadline,
                "no daemon came up on {} in {timeout:?}: {e}",
                socket.display()
            ),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a daemon that must refuse to start; what it said on stderr.
pub fn refused_start(mut daemon: Command) -> String {
    let out = daemon.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "the daemon started: {err}");
    err
}
