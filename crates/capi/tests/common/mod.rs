//! What the C ABI tests share.
#![allow(dead_code)] // each test file uses part of it

use hetsched::hs_last_error;
use hetsched_core::unit::Unit;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

/// The message the last failing call left; there must be one.
pub fn last_error() -> String {
    let p = hs_last_error();
    assert!(!p.is_null(), "a failing call must leave a message");
    // SAFETY: non-NULL, NUL-terminated, valid until the next failing call.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

pub fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// The test daemon's configuration: one emulated GPU beside the CPU kinds.
const CONFIG: &str = r#"
[[emulated]]
name = "emu-gpu0"
kind = "emu-gpu"
class = "gpu"
speed = 8.0
copy_gbps = 12.0
streams = 1
"#;

/// Writes the test daemon's configuration in `dir`.
pub fn write_config(dir: &Path) -> PathBuf {
    let path = dir.join("hetsched.toml");
    std::fs::write(
        &path,
        format!(
            "state_file = \"{}\"\n{CONFIG}",
            dir.join("state.json").display()
        ),
    )
    .unwrap();
    path
}

/// A daemon the test started.
pub struct TestDaemon {
    /// Where it listens.
    pub socket: PathBuf,
    /// Its units, as the core has them (dispatch and copy costs included).
    pub units: Vec<Unit>,
}

/// A daemon on a private socket, served by threads of this test process.
pub fn start_daemon(dir: &Path) -> TestDaemon {
    use hetsched_monitor::config::DaemonConfig;
    use hetsched_monitor::launch;
    use hetsched_monitor::server::Server;
    let cfg = DaemonConfig::load_or_default(Some(&write_config(dir))).unwrap();
    let (mut setup, _platform) = launch::prepare(&cfg).unwrap();
    // Every unit the daemon has: the platform's, and the devices it adds
    // (`device_units`, in a build with a device API).
    let units = setup.units.iter().map(|u| u.unit.clone()).collect();
    let socket = dir.join("hetsched.sock");
    setup.socket = socket.clone();
    setup.state_path = dir.join("state.json");
    let server = Server::bind(setup).unwrap();
    std::thread::spawn(move || {
        let _ = server.run();
    });
    TestDaemon { socket, units }
}
