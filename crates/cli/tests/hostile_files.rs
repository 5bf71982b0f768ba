//! Hostile files: what a local user who can put files, links or
//! directories on the daemon's paths can make it do. The daemon must
//! refuse a directory others may write, never follow a link where it
//! writes, never remove a file that is not its socket, and survive signals
//! that mean nothing to it. Where who plants the file matters, the
//! attacker runs as `nobody` (which needs root); every test checks that
//! the victim file is exactly as it was.

use hetsched_protocol::{Client, ClientOptions, SettingsRequest, WireClass};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{ONE_GPU, Reaped};

const NOBODY: u32 = 65534;
const DEADLINE: Duration = Duration::from_secs(15);

/// A root-owned directory (mode 0755) of this test's own, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("hetsched-hostile-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        chmod(&dir, 0o755);
        Scratch(dir)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }

    /// The daemon's config (one emulated GPU, state in `state`).
    fn config(&self, state: &Path) -> PathBuf {
        common::write_config(&self.path("hetsched.toml"), state, ONE_GPU)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A file someone cares about: root's, mode 0600, with known contents.
struct Victim {
    path: PathBuf,
    contents: &'static str,
}

impl Victim {
    fn new(path: PathBuf) -> Victim {
        let contents = "root's secret, not for the daemon to touch\n";
        std::fs::write(&path, contents).unwrap();
        chmod(&path, 0o600);
        Victim { path, contents }
    }

    /// Still there, with the same contents, mode and kind.
    fn assert_untouched(&self) {
        let meta = std::fs::symlink_metadata(&self.path)
            .unwrap_or_else(|e| panic!("{} is gone: {e}", self.path.display()));
        assert!(
            meta.is_file(),
            "{} is no longer a file",
            self.path.display()
        );
        assert_eq!(
            meta.mode() & 0o7777,
            0o600,
            "{}'s mode changed",
            self.path.display()
        );
        assert_eq!(
            std::fs::read_to_string(&self.path).unwrap(),
            self.contents,
            "{} was written",
            self.path.display()
        );
    }
}

fn is_root() -> bool {
    hetsched_platform::test_support::available("root", hetsched_platform::test_support::root())
}

/// `hetsched daemon` on `socket`, its stderr kept in `log`.
fn daemon(config: &Path, socket: &Path, log: &Path) -> Reaped {
    let child = common::daemon_command(Some(config), socket)
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    Reaped(child)
}

fn wait_exit(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "the daemon did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A daemon that must refuse to start: its exit status is a failure and
/// its error says `says`.
fn assert_refused(config: &Path, socket: &Path, log: &Path, says: &[&str]) {
    let mut d = daemon(config, socket, log);
    let status = wait_exit(&mut d.0);
    let text = std::fs::read_to_string(log).unwrap();
    assert!(!status.success(), "the daemon started: {text}");
    assert_eq!(status.code(), Some(1), "{status:?}: {text}");
    for s in says {
        assert!(text.contains(s), "no {s:?} in: {text}");
    }
    assert!(!text.contains("panicked"), "{text}");
}

fn wait_up(socket: &Path, d: &mut Reaped, log: &Path) -> Client {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Ok(c) = Client::connect(ClientOptions::observer("hostile-test").socket(socket)) {
            return c;
        }
        if let Some(status) = d.0.try_wait().unwrap() {
            panic!(
                "the daemon exited ({status}): {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(Instant::now() < deadline, "the daemon did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{sig}");
}

/// Runs `ln -s target link` as `nobody`; whether it succeeded.
fn plant_link_as_nobody(target: &Path, link: &Path) -> bool {
    Command::new("ln")
        .arg("-s")
        .arg(target)
        .arg(link)
        .uid(NOBODY)
        .gid(NOBODY)
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[test]
fn a_regular_file_given_as_the_socket_is_refused_and_left_alone() {
    let s = Scratch::new("regular");
    let victim = Victim::new(s.path("precious.txt"));
    let config = s.config(&s.path("state.json"));
    assert_refused(
        &config,
        &victim.path,
        &s.path("daemon.log"),
        &["refusing to use", "a regular file", "left alone"],
    );
    victim.assert_untouched();
}

/// The audit's attack: a user who controls a directory on the socket's
/// path puts a link there to root's file, for the daemon to chmod 0666.
#[test]
fn a_link_at_the_socket_path_is_refused_and_its_target_untouched() {
    if !is_root() {
        return;
    }
    let s = Scratch::new("socket-link");
    let victim = Victim::new(s.path("precious.txt"));
    let config = s.config(&s.path("state.json"));
    // In a directory the attacker owns: refused for its owner alone.
    let theirs = s.path("theirs");
    std::fs::create_dir(&theirs).unwrap();
    chmod(&theirs, 0o755);
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let link = theirs.join("hetsched.sock");
    assert!(plant_link_as_nobody(&victim.path, &link));
    assert_refused(
        &config,
        &link,
        &s.path("daemon.log"),
        &["refusing to use", &format!("owned by uid {NOBODY}")],
    );
    victim.assert_untouched();
    // A link in the daemon's own directory (which nobody cannot write:
    // planting there fails) is refused as not being a socket.
    let ours = s.path("hetsched.sock");
    assert!(!plant_link_as_nobody(&victim.path, &ours));
    std::os::unix::fs::symlink(&victim.path, &ours).unwrap();
    assert_refused(
        &config,
        &ours,
        &s.path("daemon.log"),
        &["a symbolic link", "left alone"],
    );
    assert!(std::fs::symlink_metadata(&ours).unwrap().is_symlink());
    victim.assert_untouched();
}

/// Links at the state file's names (`state.json`, its temp file and the
/// last good copy's temp file) are neither read through nor written
/// through: the daemon writes new files of its own in their place.
#[test]
fn links_at_the_state_file_names_are_not_written_through() {
    let s = Scratch::new("state-links");
    let state = s.path("state/state.json");
    std::fs::create_dir(s.path("state")).unwrap();
    chmod(&s.path("state"), 0o755);
    let victims: Vec<(Victim, &str)> = ["state.json.tmp", "state.json", "state.json.last-good.tmp"]
        .into_iter()
        .enumerate()
        .map(|(i, name)| (Victim::new(s.path(&format!("victim{i}"))), name))
        .collect();
    for (v, name) in &victims {
        let link = s.path("state").join(name);
        if is_root() {
            // The attacker cannot put them there: the directory is root's.
            assert!(!plant_link_as_nobody(&v.path, &link));
        }
        std::os::unix::fs::symlink(&v.path, &link).unwrap();
    }
    let config = s.config(&state);
    let socket = s.path("hetsched.sock");
    let log = s.path("daemon.log");
    let mut d = daemon(&config, &socket, &log);
    drop(wait_up(&socket, &mut d, &log));
    // Two changes: the second write keeps the first file as the last good.
    let mut opts = ClientOptions::application("state-writer")
        .unwrap()
        .socket(&socket);
    opts.requested = Default::default();
    let mut app = Client::connect(opts).unwrap();
    let written = |shares: u32| {
        std::fs::symlink_metadata(&state).is_ok_and(|m| m.is_file())
            && std::fs::read_to_string(&state)
                .is_ok_and(|t| t.contains(&format!("\"shares\": {shares}")))
    };
    for shares in [21, 22] {
        app.set_settings(
            None,
            None,
            SettingsRequest {
                class: Some(WireClass::Normal(shares)),
                priority: None,
            },
        )
        .unwrap();
        let deadline = Instant::now() + DEADLINE;
        while !written(shares) {
            assert!(
                Instant::now() < deadline,
                "state.json was not written with shares {shares}: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    for (v, _) in &victims {
        v.assert_untouched();
    }
    let last_good = s.path("state/state.json.last-good");
    assert!(std::fs::symlink_metadata(&last_good).unwrap().is_file());
    for tmp in ["state.json.tmp", "state.json.last-good.tmp"] {
        assert!(
            std::fs::symlink_metadata(s.path("state").join(tmp)).is_err(),
            "{tmp} left behind"
        );
    }
    // The planted state.json link was moved aside, not followed.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("moved it aside"), "{text}");
    signal(&d.0, "TERM");
    assert!(wait_exit(&mut d.0).success());
}

/// Like sshd's StrictModes: a socket or state directory others may write
/// (sticky or not), or one under a directory others may write without the
/// sticky bit, is refused before anything is created in it.
#[test]
fn a_directory_others_may_write_is_refused() {
    let s = Scratch::new("writable");
    let open = s.path("open");
    std::fs::create_dir(&open).unwrap();
    let victim = Victim::new(s.path("precious.txt"));
    let log = s.path("daemon.log");
    let good_state = s.path("state.json");
    for mode in [0o777, 0o1777, 0o775] {
        chmod(&open, mode);
        // Socket there.
        assert_refused(
            &s.config(&good_state),
            &open.join("hetsched.sock"),
            &log,
            &["refusing to use", &format!("mode {mode:04o}")],
        );
        // State there; an attacker's link at the temp name stays unused.
        let tmp = open.join("state.json.tmp");
        let _ = std::fs::remove_file(&tmp);
        if is_root() && mode & 0o002 != 0 {
            assert!(plant_link_as_nobody(&victim.path, &tmp));
        }
        assert_refused(
            &s.config(&open.join("state.json")),
            &s.path("hetsched.sock"),
            &log,
            &["refusing to use", &open.display().to_string()],
        );
        victim.assert_untouched();
        assert!(!open.join("hetsched.sock").exists());
        assert!(!open.join("state.json").exists());
    }
    // Above the directory: writable by all without the sticky bit.
    chmod(&open, 0o777);
    let below = open.join("below");
    std::fs::create_dir(&below).unwrap();
    chmod(&below, 0o755);
    assert_refused(
        &s.config(&good_state),
        &below.join("hetsched.sock"),
        &log,
        &["refusing to use", &open.display().to_string(), "mode 0777"],
    );
    // With the sticky bit (as on /tmp), it is fine.
    chmod(&open, 0o1777);
    let socket = below.join("hetsched.sock");
    let mut d = daemon(&s.config(&good_state), &socket, &log);
    drop(wait_up(&socket, &mut d, &log));
    assert_eq!(
        std::fs::symlink_metadata(&socket).unwrap().mode() & 0o7777,
        0o666
    );
}

/// Signals that mean nothing to the daemon are ignored (it keeps
/// serving); SIGTERM still stops it and removes its socket. A file put in
/// place of its socket while it ran is not removed.
#[test]
fn stray_signals_are_ignored_and_only_the_daemons_own_socket_is_removed() {
    let s = Scratch::new("signals");
    let config = s.config(&s.path("state.json"));
    let socket = s.path("hetsched.sock");
    let log = s.path("daemon.log");
    let mut d = daemon(&config, &socket, &log);
    drop(wait_up(&socket, &mut d, &log));
    for sig in ["USR1", "USR2", "ALRM", "VTALRM", "PROF", "IO"] {
        signal(&d.0, sig);
    }
    let deadline = Instant::now() + DEADLINE;
    while std::fs::read_to_string(&log)
        .unwrap()
        .matches("ignored")
        .count()
        < 6
    {
        assert!(
            Instant::now() < deadline,
            "{}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(d.0.try_wait().unwrap().is_none(), "the daemon exited");
    let mut obs = wait_up(&socket, &mut d, &log);
    obs.status().unwrap();
    drop(obs);
    signal(&d.0, "TERM");
    assert!(wait_exit(&mut d.0).success());
    assert!(!socket.exists(), "the socket was left behind");

    // Its socket replaced by a file while it runs: the file stays.
    let mut d = daemon(&config, &socket, &log);
    drop(wait_up(&socket, &mut d, &log));
    let victim = Victim::new(s.path("precious.txt"));
    let copy = s.path("copy.txt");
    std::fs::copy(&victim.path, &copy).unwrap();
    chmod(&copy, 0o600);
    std::fs::rename(&copy, &socket).unwrap();
    signal(&d.0, "TERM");
    assert!(wait_exit(&mut d.0).success());
    let moved = Victim {
        path: socket.clone(),
        contents: victim.contents,
    };
    moved.assert_untouched();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("no longer the daemon's socket"), "{text}");
}

/// What a client costs the daemon in descriptors, measured: the daemon's
/// open-file estimate (`max_connections` × `FDS_PER_CLIENT` + a margin)
/// must cover it. With PoCL, each client also opens a kernel ring on the
/// served OpenCL unit (ring, data region and doorbell).
#[test]
fn the_descriptor_estimate_covers_what_a_client_with_rings_costs() {
    let s = Scratch::new("fds");
    let served = served_opencl();
    let config = if served {
        common::write_config(
            &s.path("hetsched.toml"),
            &s.path("state.json"),
            &format!("opencl_units = true\n{ONE_GPU}"),
        )
    } else {
        s.config(&s.path("state.json"))
    };
    let socket = s.path("hetsched.sock");
    let log = s.path("daemon.log");
    let mut d = daemon(&config, &socket, &log);
    drop(wait_up(&socket, &mut d, &log));
    let fds = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count()
    };
    let pid = d.0.id();
    let before = fds(pid);
    const CLIENTS: usize = 20;
    let mut held = Vec::new();
    for i in 0..CLIENTS {
        let mut opts = ClientOptions::application(format!("fd-{i}"))
            .unwrap()
            .socket(&socket);
        opts.requested = Default::default();
        let mut c = Client::connect(opts).unwrap();
        let gpu = c.unit_by_name("gpu0").unwrap().id;
        let ring = c.open_call_ring(gpu).unwrap();
        let kernel_ring = served.then(|| {
            let unit = c.unit_by_name("served-opencl0").unwrap().id;
            c.open_kernel_ring(unit, 8192).unwrap()
        });
        held.push((c, ring, kernel_ring));
    }
    let after = fds(pid);
    let per_client = (after - before) as f64 / CLIENTS as f64;
    eprintln!(
        "daemon descriptors: {before} idle, {after} with {CLIENTS} clients with a call ring{}: \
         {per_client:.2} per client",
        if served { " and a kernel ring" } else { "" }
    );
    // The daemon's own estimate, from its log line at start.
    let text = std::fs::read_to_string(&log).unwrap();
    let estimate: f64 = text
        .split("a client holds up to ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no descriptor estimate in: {text}"));
    assert_eq!(estimate, if served { 4.0 } else { 2.0 }, "{text}");
    assert!(
        per_client <= estimate,
        "{per_client} descriptors per client, estimated {estimate}"
    );
}

/// Whether this build serves OpenCL devices and PoCL (or another) has one.
fn served_opencl() -> bool {
    #[cfg(feature = "opencl")]
    {
        matches!(hetsched_opencl::devices(), Ok(d) if !d.is_empty())
    }
    #[cfg(not(feature = "opencl"))]
    {
        false
    }
}
