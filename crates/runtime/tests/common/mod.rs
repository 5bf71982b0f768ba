//! Set-up shared by the runtime's integration tests: an embedded monitor
//! over a private config (the machine's CPUs plus one emulated device
//! `dev0` of kind `dev`), and CPU work measured the way the runtime
//! measures it.
#![allow(dead_code)] // each test file uses part of it

use hetsched_runtime::{MonitorMode, Runtime, RuntimeOptions};
use std::path::Path;
use std::time::Duration;

/// One emulated device with one stream, under unit policy `{policy}`.
const ONE_DEVICE: &str = r#"
default_policy = "{policy}"
[[emulated]]
name = "dev0"
kind = "dev"
class = "gpu"
speed = 10.0
copy_gbps = 12.0
"#;

/// Where a test runtime keeps its task models.
pub enum Models<'a> {
    None,
    In(&'a Path),
}

/// A runtime on an embedded monitor whose device runs `policy` (`share`,
/// the daemon's default, or `fifo`).
pub fn embedded(dir: &Path, name: &str, policy: &str, models: Models<'_>) -> Runtime {
    let config = dir.join("hetsched.toml");
    std::fs::write(&config, ONE_DEVICE.replace("{policy}", policy)).unwrap();
    let opts = RuntimeOptions::new(name)
        .unwrap()
        .monitor(MonitorMode::Embedded)
        .config(&config);
    let opts = match models {
        Models::None => opts.persist_models(false),
        Models::In(d) => opts.model_dir(d),
    };
    let rt = Runtime::with_options(opts).unwrap();
    assert_eq!(rt.stats().monitor, "embedded");
    rt
}

pub use hetsched_platform::thread::cpu_time as thread_cpu;

/// Keeps this thread busy for `d` of its own CPU time (what the runtime
/// measures on CPU units), however loaded the machine is.
pub fn spin(d: Duration) {
    let start = thread_cpu();
    while thread_cpu() - start < d {
        std::hint::spin_loop();
    }
}

/// Why this machine cannot emulate a slow core (root, a cgroup v1 cpu
/// controller, two CPUs), if it cannot.
pub fn slow_core_unsupported() -> Option<String> {
    if !rustix::process::getuid().is_root() {
        return Some("needs root to create a cgroup".into());
    }
    let quota = std::path::Path::new(hetsched_platform::slow_cores::CGROUP_CPU_ROOT)
        .join("cpu.cfs_quota_us");
    if !quota.exists() {
        return Some(format!(
            "no cgroup v1 cpu controller ({} missing)",
            quota.display()
        ));
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return Some("needs two CPUs".into());
    }
    None
}

/// A runtime on an embedded monitor whose CPU 1 is the emulated slow kind
/// `little` (a quarter of a core).
pub fn slow_core_runtime(dir: &Path, name: &str) -> Runtime {
    let config = dir.join("hetsched.toml");
    std::fs::write(
        &config,
        "[[slow_cores]]\ncpus = [1]\nspeed = 0.25\nkind = \"little\"\n",
    )
    .unwrap();
    let opts = RuntimeOptions::new(name)
        .unwrap()
        .monitor(MonitorMode::Embedded)
        .config(&config)
        .persist_models(false)
        .opencl(false);
    Runtime::with_options(opts).unwrap()
}
