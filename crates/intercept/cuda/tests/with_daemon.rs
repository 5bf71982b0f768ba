//! The interposer under a real `hetsched daemon` (this workspace's
//! binary, `cargo build -p hetsched`) with an emulated unit named `cuda0`:
//! the program's launches hold leases on it, the daemon sees a CUDA
//! program and the memory it holds, to the byte, and the cap refuses past
//! it, whichever way the program finds the driver.

mod common;
use common::{Mode, built, command, target_dir};
use hetsched_protocol::{Client, ClientOptions, ClientStatus, InterceptApi};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CONFIG: &str = r#"
include_cpus = false
device_units = false
[[emulated]]
name = "cuda0"
class = "gpu"
speed = 8.0
copy_gbps = 12.0
"#;

/// The `hetsched` binary: `$HETSCHED_BIN`, else next to these tests.
fn hetsched_bin() -> Option<PathBuf> {
    let bin = std::env::var_os("HETSCHED_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("hetsched"));
    let found = if bin.exists() {
        Ok(())
    } else {
        Err(format!(
            "no hetsched binary at {} (`cargo build -p hetsched`, or HETSCHED_BIN)",
            bin.display()
        ))
    };
    hetsched_platform::test_support::available("hetsched-bin", found).then_some(bin)
}

struct Daemon {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
}

impl Daemon {
    fn start(bin: &PathBuf, name: &str) -> Daemon {
        let dir =
            std::env::temp_dir().join(format!("hetsched-cuda-d-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("hetsched.sock");
        let config = dir.join("hetsched.toml");
        let state = dir.join("state.json");
        std::fs::write(
            &config,
            format!("state_file = \"{}\"\n{CONFIG}", state.display()),
        )
        .unwrap();
        let child = Command::new(bin)
            .args(["daemon", "--config"])
            .arg(&config)
            .arg("--socket")
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let d = Daemon { child, dir, socket };
        let deadline = Instant::now() + Duration::from_secs(10);
        while d.observer().is_err() {
            assert!(Instant::now() < deadline, "daemon did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
        d
    }

    fn observer(&self) -> Result<Client, hetsched_protocol::ClientError> {
        Client::connect(ClientOptions::observer("test").socket(&self.socket))
    }

    /// Waits (up to 10 s) until the client with process id `pid` passes
    /// `check`, and returns it; panics with the last status otherwise.
    fn wait_for(
        &self,
        pid: u32,
        what: &str,
        check: impl Fn(&ClientStatus, usize) -> bool,
    ) -> ClientStatus {
        let mut obs = self.observer().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let status = obs.status().unwrap();
            let unit = status
                .units
                .iter()
                .position(|u| u.info.name == "cuda0")
                .expect("unit cuda0");
            let unit_id = status.units[unit].info.id;
            if let Some(c) = status.clients.iter().find(|c| c.pid == pid) {
                let on_unit = c
                    .units
                    .iter()
                    .position(|u| u.unit == unit_id)
                    .unwrap_or(usize::MAX);
                if check(c, on_unit) {
                    return c.clone();
                }
            }
            assert!(Instant::now() < deadline, "{what}: {status:#?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads the program's lines until `want`; panics if it ends first.
fn expect_line(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    want: &str,
    seen: &mut Vec<String>,
) {
    for l in lines.by_ref() {
        let l = l.unwrap();
        seen.push(l.clone());
        if l == want {
            return;
        }
    }
    panic!("the program ended before {want:?}: {seen:?}");
}

fn governed_under_the_daemon(mode: Mode) {
    let Some(b) = built() else { return };
    let Some(bin) = hetsched_bin() else { return };
    let d = Daemon::start(&bin, &format!("{mode:?}").to_lowercase());
    let socket = d.socket.to_string_lossy().into_owned();
    // Launches (leases), wait; 1000 + 24 + 8 bytes in three kinds of
    // allocation, wait; one byte more (refused: the cap is 1032), a free.
    let ops = [
        "L20x500", "Y", "W", "A1000", "M24", "S8", "W", "A1", "F0", "W",
    ];
    let mut child = command(
        b,
        mode,
        true,
        &ops,
        &[
            ("HETSCHED_SOCKET", &socket),
            ("HETSCHED_DEVICE_MEMORY", "1032"),
        ],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();

    expect_line(&mut lines, "waiting", &mut seen);
    // Its launches asked cuda0's agent for a lease: it holds one (or was
    // charged for one it gave back).
    let c = d.wait_for(pid, "a lease on cuda0", |c, u| {
        c.units
            .get(u)
            .is_some_and(|u| u.outstanding > 0 || u.busy_ns_total > 0)
    });
    assert_eq!(c.intercepted, Some(InterceptApi::Cuda), "{mode:?}");
    assert_eq!(c.device_memory_limit, Some(1032), "{mode:?}");
    writeln!(stdin).unwrap();

    expect_line(&mut lines, "waiting", &mut seen);
    d.wait_for(pid, "1032 bytes reported", |c, _| {
        c.device_memory_bytes == 1032
    });
    writeln!(stdin).unwrap();

    expect_line(&mut lines, "waiting", &mut seen);
    d.wait_for(pid, "32 bytes after the free", |c, _| {
        c.device_memory_bytes == 32
    });
    writeln!(stdin).unwrap();
    for l in lines {
        seen.push(l.unwrap());
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{mode:?}: {seen:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let codes: Vec<&str> = seen
        .iter()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| !k.contains(' '))
        .map(|(_, v)| v)
        .collect();
    assert_eq!(
        codes[..10],
        ["0", "0", "0", "0", "0", "0", "0", "2", "0", "0"],
        "{mode:?}: {seen:?}"
    );
    assert!(
        seen.last().unwrap().starts_with("launches0=20 "),
        "{seen:?}"
    );
    // Governed: nothing said about passing through.
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn linked_calls_are_governed() {
    governed_under_the_daemon(Mode::Linked);
}

#[test]
fn dlopen_and_dlsym_calls_are_governed() {
    governed_under_the_daemon(Mode::Dlopen);
}

#[test]
fn cu_get_proc_address_calls_are_governed() {
    governed_under_the_daemon(Mode::ProcAddress);
    governed_under_the_daemon(Mode::ProcAddressV1);
}

#[test]
fn per_thread_default_stream_calls_are_governed() {
    governed_under_the_daemon(Mode::ProcAddressPerThread);
}

/// Each side's part of `cuda0`'s device time over `window`, for programs
/// of `pids_a` and `pids_b`, from the daemon's accounting.
fn split(d: &Daemon, sides: [&[u32]; 2], window: Duration) -> [f64; 2] {
    let mut obs = d.observer().unwrap();
    let busy = |obs: &mut Client| {
        let status = obs.status().unwrap();
        let unit = status
            .units
            .iter()
            .find(|u| u.info.name == "cuda0")
            .expect("unit cuda0")
            .info
            .id;
        sides.map(|pids| {
            status
                .clients
                .iter()
                .filter(|c| pids.contains(&c.pid))
                .flat_map(|c| c.units.iter().filter(|u| u.unit == unit))
                .map(|u| u.busy_ns_total)
                .sum::<u64>()
        })
    };
    let before = busy(&mut obs);
    std::thread::sleep(window);
    let after = busy(&mut obs);
    let used = [after[0] - before[0], after[1] - before[1]];
    let total = (used[0] + used[1]).max(1) as f64;
    used.map(|u| u as f64 / total)
}

/// Two programs at CUSTOM 70 and 30 whose calls each hold the device
/// 10 ms (longer than a 5 ms lease; the stand-in runs a kernel inside
/// the launch call) and who wait for each call and think 3 ms between
/// calls get 70 / 30 of the device. Judged by their launches alone, each
/// looked idle when its lease ended, gave the device back without asking,
/// and the two took turns: half each.
#[test]
fn programs_that_wait_and_think_between_calls_keep_their_shares() {
    let Some(b) = built() else { return };
    let Some(bin) = hetsched_bin() else { return };
    let d = Daemon::start(&bin, "shares");
    let socket = d.socket.to_string_lossy().into_owned();
    let ops: Vec<&str> = std::iter::once("D0")
        .chain(std::iter::repeat_n(["L1x10000", "Y", "H3"], 2_000).flatten())
        .collect();
    let start = |shares: &str| {
        command(
            b,
            Mode::Dlopen,
            true,
            &ops,
            &[
                ("HETSCHED_SOCKET", &socket),
                ("HETSCHED_CLASS", "custom"),
                ("HETSCHED_SHARES", shares),
                ("HETSCHED_INTERCEPT_QUIET", "1"),
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
    };
    let mut a = start("70");
    let mut b30 = start("30");
    let (pa, pb) = (a.id(), b30.id());
    // Both hold leases before the window starts.
    for pid in [pa, pb] {
        d.wait_for(pid, "a lease on cuda0", |c, u| {
            c.units.get(u).is_some_and(|u| u.busy_ns_total > 0)
        });
    }
    let got = split(&d, [&[pa], &[pb]], Duration::from_secs(3));
    for child in [&mut a, &mut b30] {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(
        (got[0] - 0.7).abs() <= 0.06,
        "CUSTOM 70 / 30 got {:.3} / {:.3}",
        got[0],
        got[1]
    );
}
