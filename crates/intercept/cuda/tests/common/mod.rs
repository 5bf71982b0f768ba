//! What the interposer's tests share: the stand-in driver and the test
//! program, compiled with `cc` into a directory per test binary, the
//! interposer's `.so`, and runs of the program under it.
#![allow(dead_code)] // each test file uses part of it

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

const STANDIN_C: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/standin/libcuda_standin.c"
);
const PROGRAM_C: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/standin/cuprog.c");

/// The stand-in driver (`libcuda.so.1`, and `libcuda.so` for `-lcuda`)
/// and the program, linked (`prog_linked`) and not (`prog`).
pub struct Built {
    pub dir: PathBuf,
}

impl Built {
    pub fn driver(&self) -> PathBuf {
        self.dir.join("libcuda.so.1")
    }
}

fn cc(args: &[&str]) -> Result<(), String> {
    let out = Command::new("cc")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "cc {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn build() -> Result<Built, String> {
    cc(&["--version"])?;
    let dir = std::env::temp_dir().join(format!("hetsched-cuda-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    // -Bsymbolic: the stand-in's own references (the addresses its
    // cuGetProcAddress hands out) bind to itself, as a real driver's do,
    // not to the preloaded interposer.
    cc(&[
        "-shared",
        "-fPIC",
        "-Wl,-Bsymbolic",
        "-O1",
        "-o",
        &p("libcuda.so.1"),
        STANDIN_C,
    ])?;
    std::os::unix::fs::symlink("libcuda.so.1", dir.join("libcuda.so"))
        .map_err(|e| e.to_string())?;
    let lib_dir = format!("-L{}", dir.display());
    cc(&[
        "-O1",
        "-DLINKED",
        "-o",
        &p("prog_linked"),
        PROGRAM_C,
        &lib_dir,
        "-lcuda",
        "-ldl",
    ])?;
    cc(&["-O1", "-o", &p("prog"), PROGRAM_C, "-ldl"])?;
    Ok(Built { dir })
}

/// The stand-in and the program, built once per test binary; `None` (the
/// test skips, or fails under `HETSCHED_TEST_REQUIRE=cc`) without `cc`.
pub fn built() -> Option<&'static Built> {
    static BUILT: OnceLock<Result<Built, String>> = OnceLock::new();
    let b = BUILT.get_or_init(build);
    match b {
        Ok(b) => Some(b),
        Err(e) if e.starts_with("cannot run cc") => {
            hetsched_platform::test_support::available("cc", Err(e.clone()));
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// `target/debug` (or the profile's directory) this test runs from.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test>
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The interposer built with these tests.
pub fn interposer() -> PathBuf {
    let name = "libhetsched_cuda_intercept.so";
    let t = target_dir();
    [t.join("deps").join(name), t.join(name)]
        .into_iter()
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no {name} under {}", t.display()))
}

/// Which way the program finds the driver's functions.
#[derive(Clone, Copy, Debug)]
pub enum Mode {
    Linked,
    Dlopen,
    ProcAddress,
    ProcAddressV1,
    /// `cuGetProcAddress_v2` asked for the per-thread default stream: the
    /// `_ptsz` / `_ptds` variants where the driver has them.
    ProcAddressPerThread,
}

pub const ALL_MODES: [Mode; 5] = [
    Mode::Linked,
    Mode::Dlopen,
    Mode::ProcAddress,
    Mode::ProcAddressV1,
    Mode::ProcAddressPerThread,
];

impl Mode {
    fn args(self) -> (&'static str, &'static str) {
        match self {
            Mode::Linked => ("prog_linked", "linked"),
            Mode::Dlopen => ("prog", "dlopen"),
            Mode::ProcAddress => ("prog", "procaddr"),
            Mode::ProcAddressV1 => ("prog_linked", "procaddr1"),
            Mode::ProcAddressPerThread => ("prog", "procaddr-pt"),
        }
    }
}

/// The program in `mode` running `ops`, under the interposer when
/// `preload`, with a clean hetsched environment plus `env`.
pub fn command(
    b: &Built,
    mode: Mode,
    preload: bool,
    ops: &[&str],
    env: &[(&str, &str)],
) -> Command {
    let (prog, arg) = mode.args();
    let mut c = Command::new(b.dir.join(prog));
    c.arg(arg)
        .args(ops)
        .env("LD_LIBRARY_PATH", &b.dir)
        .env("HETSCHED_REAL_LIBCUDA", b.driver())
        // No daemon unless the test gives one.
        .env("HETSCHED_SOCKET", b.dir.join("no-daemon.sock"))
        .env_remove("HETSCHED_DEVICE_MEMORY")
        .env_remove("HETSCHED_INTERCEPT_QUIET")
        .env_remove("STANDIN_MEMORY_LIMIT")
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null());
    if preload {
        c.env("LD_PRELOAD", interposer());
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// Runs it to the end; it must succeed.
pub fn run(b: &Built, mode: Mode, preload: bool, ops: &[&str], env: &[(&str, &str)]) -> Output {
    let out = command(b, mode, preload, ops, env).output().unwrap();
    assert!(
        out.status.success(),
        "{mode:?} {ops:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The program's `op=result` lines, in order.
pub fn results(out: &Output) -> Vec<(String, String)> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains(' '))
        .filter_map(|l| l.split_once('='))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// The program's last line (`launches0=.. launches1=.. in_use=..`).
pub fn counters(out: &Output) -> BTreeMap<String, i64> {
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    last.split(' ')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

/// The codes the operations returned, in order.
pub fn codes(out: &Output) -> Vec<i32> {
    results(out)
        .iter()
        .map(|(_, r)| r.parse().unwrap())
        .collect()
}

pub fn stderr_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_string)
        .collect()
}
