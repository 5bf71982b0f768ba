//! A real daemon process for integration tests, on a private socket,
//! config and state file, killed when the test ends.
#![allow(dead_code, unused_imports)] // each test file uses part of it

mod start;
pub use start::{daemon_command, refused_start, wait_for_daemon, write_config};

use hetsched_protocol::{Client, ClientOptions};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_hetsched");

/// One emulated GPU with one stream; CPUs and real devices left out to
/// start fast and keep the unit list to that one.
pub const ONE_GPU: &str = r#"
include_cpus = false
device_units = false
[[emulated]]
name = "gpu0"
class = "gpu"
speed = 8.0
copy_gbps = 12.0
"#;

pub struct TestDaemon {
    pub child: Option<Child>,
    pub dir: PathBuf,
    pub socket: PathBuf,
    config: PathBuf,
    /// Where the daemon's stderr goes (`start_logged`); else nowhere.
    pub log: Option<PathBuf>,
}

impl TestDaemon {
    pub fn start(name: &str, config: &str) -> TestDaemon {
        Self::start_with(name, config, false)
    }

    /// As [`TestDaemon::start`], with the daemon's stderr kept in
    /// `dir/daemon.log` ([`TestDaemon::log_text`]).
    pub fn start_logged(name: &str, config: &str) -> TestDaemon {
        Self::start_with(name, config, true)
    }

    fn start_with(name: &str, config: &str, logged: bool) -> TestDaemon {
        let dir = std::env::temp_dir().join(format!("hetsched-it-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Unprivileged test clients must reach the socket.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let socket = dir.join("hetsched.sock");
        let config_path = write_config(&dir.join("hetsched.toml"), &dir.join("state.json"), config);
        let log = logged.then(|| dir.join("daemon.log"));
        let mut d = TestDaemon {
            child: None,
            dir,
            log,
            socket,
            config: config_path,
        };
        d.spawn();
        d
    }

    pub fn spawn(&mut self) {
        let child = daemon_command(Some(&self.config), &self.socket)
            .stderr(match &self.log {
                Some(p) => Stdio::from(std::fs::File::create(p).unwrap()),
                None => Stdio::null(),
            })
            .spawn()
            .unwrap();
        self.child = Some(child);
        wait_for_daemon(&self.socket, Duration::from_secs(10));
    }

    /// What the daemon wrote to stderr so far (`start_logged`).
    pub fn log_text(&self) -> String {
        self.log
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    pub fn observer(&self) -> Result<Client, hetsched_protocol::ClientError> {
        Client::connect(ClientOptions::observer("test").socket(&self.socket))
    }

    pub fn app(&self, name: &str) -> Client {
        let mut opts = ClientOptions::application(name)
            .unwrap()
            .socket(&self.socket);
        opts.requested = Default::default();
        Client::connect(opts).unwrap()
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env("HETSCHED_SOCKET", &self.socket)
            .env_remove("HETSCHED_CLASS")
            .env_remove("HETSCHED_SHARES")
            .env_remove("HETSCHED_PRIORITY");
        c
    }

    /// `hetsched run --class ... -- hetsched load ...` in the background.
    pub fn load(&self, class: &[&str], load: &[&str]) -> Child {
        let mut c = self.cmd();
        if !class.is_empty() {
            c.arg("run").args(class).arg("--").arg(BIN);
        }
        c.args(["load", "--json"])
            .args(load)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Kills a process the test started when the test ends, however it ends.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The JSON report of a `hetsched load --json` child, which must succeed.
pub fn load_report(child: Child) -> serde_json::Value {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "load failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Device time a load report says it was charged, s.
pub fn unit_s(v: &serde_json::Value) -> f64 {
    v["unit_ns"].as_f64().unwrap() / 1e9
}
