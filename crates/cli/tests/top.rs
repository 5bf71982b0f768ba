//! `hetsched top` used as a person would: in a terminal (tmux), against a
//! real daemon with a real client; keys sent, the screen read back.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{Reaped, TestDaemon};

/// A tmux server of this test's own, killed when the test ends.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn new() -> Tmux {
        let found = Command::new("tmux").arg("-V").output();
        assert!(
            found.is_ok_and(|o| o.status.success()),
            "tmux is needed to test `hetsched top` (scripts/install-deps.sh installs it)"
        );
        // One server per test: tests run in parallel.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Tmux {
            socket: format!("hetsched-top-test-{}-{n}", std::process::id()),
        }
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    /// Waits until the screen satisfies `ok`; returns it.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

#[test]
fn top_shows_the_units_and_clients_of_a_running_daemon_and_obeys_its_keys() {
    let d = TestDaemon::start("top", common::ONE_GPU);
    let _load = Reaped(d.load(
        &["--class", "custom", "--shares", "70"],
        &["--unit", "gpu0", "--seconds", "60", "--name", "seen-in-top"],
    ));
    let tmux = Tmux::new();
    let command = format!(
        "{} top --socket {} --interval 0.2",
        common::BIN,
        d.socket.display()
    );
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "120",
        "-y",
        "30",
        &command,
    ]);
    assert!(started.status.success(), "{started:?}");

    let screen = tmux.wait_for("the unit and the busy client", |s| {
        s.contains("gpu0") && s.contains("seen-in-top") && s.contains("custom:70")
    });
    assert!(
        screen.contains("UTILIZATION") && screen.contains("by use"),
        "{screen}"
    );
    // The device is kept busy: its bar fills.
    tmux.wait_for("a busy utilisation bar", |s| s.contains("██████████"));

    tmux.run(&["send-keys", "-t", "top", "s"]);
    tmux.wait_for("clients sorted by name", |s| s.contains("by name"));
    tmux.run(&["send-keys", "-t", "top", "q"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while tmux.run(&["has-session", "-t", "top"]).status.success() {
        assert!(
            Instant::now() < deadline,
            "`q` did not end top:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn top_without_a_daemon_says_so_and_leaves_the_terminal_alone() {
    let out = Command::new(common::BIN)
        .args(["top", "--socket", "/nonexistent/hetsched.sock"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot reach the hetsched daemon") && err.contains("--socket"),
        "{err}"
    );
    assert!(!err.contains("\x1b["), "escape codes on stderr: {err:?}");
}

/// Without a terminal (output to a pipe), `top` says so and fails cleanly
/// (exit 1, not a panic), leaving the daemon alone.
#[test]
fn top_without_a_terminal_says_it_needs_one() {
    let d = TestDaemon::start("top-no-tty", common::ONE_GPU);
    let out = Command::new(common::BIN)
        .args(["top", "--socket"])
        .arg(&d.socket)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("needs a terminal") && err.contains("hetsched status"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty(), "{:?}", out.stdout);
    d.observer().unwrap().status().unwrap();
}

/// Columns are as wide as their contents: on a wide terminal the unit's
/// name is not padded out to half the screen.
#[test]
fn top_sizes_its_columns_to_their_contents() {
    let d = TestDaemon::start("top-columns", common::ONE_GPU);
    let tmux = Tmux::new();
    let command = format!(
        "{} top --socket {} --interval 0.2",
        common::BIN,
        d.socket.display()
    );
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "160",
        "-y",
        "30",
        &command,
    ]);
    assert!(started.status.success(), "{started:?}");
    let screen = tmux.wait_for("the unit table", |s| {
        s.lines().any(|l| l.contains("gpu0") && l.contains('%'))
    });
    let header = screen
        .lines()
        .find(|l| l.contains("UNIT") && l.contains("CLASS") && l.contains("POLICY"))
        .unwrap_or_else(|| panic!("no unit header:\n{screen}"));
    let unit = header.find("UNIT").unwrap();
    let class = header.find("CLASS").unwrap();
    // "UNIT" (4 wide, wider than "gpu0") and the column gap.
    assert!(
        class - unit <= 6,
        "UNIT column {} wide:\n{screen}",
        class - unit
    );
}
