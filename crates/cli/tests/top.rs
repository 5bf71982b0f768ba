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
        Tmux {
            socket: format!("hetsched-top-test-{}", std::process::id()),
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
