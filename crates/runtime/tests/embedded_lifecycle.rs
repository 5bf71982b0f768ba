//! An embedded monitor lives exactly as long as the runtime on it:
//! creating and dropping runtimes leaves no thread behind.

use hetsched_runtime::{Mode, MonitorMode, Runtime, RuntimeOptions, Task};
use std::time::{Duration, Instant};

const CONFIG: &str = r#"
include_cpus = false
device_units = false
[[emulated]]
name = "gpu0"
class = "gpu"
speed = 8.0
copy_gbps = 12.0
"#;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn a_hundred_embedded_runtimes_come_and_go_without_leaving_threads() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hetsched.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let opts = || {
        RuntimeOptions::new("lifecycle")
            .unwrap()
            .monitor(MonitorMode::Embedded)
            .config(&config)
            .persist_models(false)
    };
    let task: Task<u32, u32> = Task::new("lifecycle-task").emulated(
        "gpu0",
        |_: &u32| Duration::from_micros(100),
        |x: &u32| x + 1,
    );
    let run = |rt: &Runtime, x: u32| rt.accelerate(&task, x, Mode::Sync).unwrap().wait().unwrap();
    // One first, so that whatever a process sets up once (hwloc, the
    // allocator's arenas) is not counted. Its threads are joined when it
    // drops, but the kernel may still list them for a moment: the count
    // is taken once it is back to what it was, or after a second (then
    // what stays is the process's one-time setup).
    let at_start = threads();
    {
        let rt = Runtime::with_options(opts()).unwrap();
        assert_eq!(run(&rt, 1), 2);
    }
    let settle = Instant::now() + Duration::from_secs(1);
    while threads() > at_start && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(5));
    }
    let before = threads();
    for i in 0..100u32 {
        let rt = Runtime::with_options(opts()).unwrap();
        // Each one really serves: a call through its embedded agent.
        assert_eq!(run(&rt, i), i + 1);
        // Its monitor's threads (timer, CPU agent, connection workers) and
        // the runtime's own are there while it lives.
        assert!(
            threads() >= before + 4,
            "{} threads with a runtime, {before} without",
            threads()
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while threads() > before {
        assert!(
            Instant::now() < deadline,
            "{} threads after 100 runtimes, {before} before",
            threads()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
