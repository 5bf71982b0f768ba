//! Buffers stay where the last call left them; copies happen only when a
//! call needs the contents elsewhere.

use hetsched_core::placement::DataLocation;
use hetsched_runtime::{Buffer, Mode, MonitorMode, Runtime, RuntimeOptions, Task};
use std::time::Duration;

/// One emulated GPU with a slow link, served by an embedded monitor.
fn runtime(dir: &std::path::Path) -> Runtime {
    let config = dir.join("hetsched.toml");
    std::fs::write(
        &config,
        "[[emulated]]\nname = \"gpu0\"\nkind = \"gpu\"\nclass = \"gpu\"\nspeed = 8.0\n\
         copy_latency_us = 10.0\ncopy_gbps = 1.0\n",
    )
    .unwrap();
    let opts = RuntimeOptions::new("residency-test")
        .unwrap()
        .monitor(MonitorMode::Embedded)
        .config(&config)
        .persist_models(false);
    Runtime::with_options(opts).unwrap()
}

const GRID: u64 = 4 << 20;

#[test]
fn a_buffer_is_copied_once_then_stays_on_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path());
    let gpu = rt.units().iter().find(|u| u.name == "gpu0").unwrap().id;
    let grid = Buffer::new(GRID);
    let step: Task<Buffer, u32> = Task::new("step")
        .emulated("gpu", |_| Duration::from_micros(500), |_| 1)
        .data(|b: &Buffer| b.clone())
        .sizes(|b| (b.bytes(), 0));
    for _ in 0..10 {
        rt.accelerate(&step, grid.clone(), Mode::Sync)
            .unwrap()
            .wait()
            .unwrap();
    }
    assert_eq!(grid.copies(), 1, "only the first call copies the grid in");
    assert_eq!(grid.location(), DataLocation::Unit(gpu));
    rt.fetch(&grid);
    assert_eq!(grid.copies(), 2, "fetching copies it back once");
    assert_eq!(grid.location(), DataLocation::Host);
    rt.fetch(&grid);
    assert_eq!(grid.copies(), 2, "a buffer already home is not copied");
}

#[test]
fn a_cpu_call_brings_the_buffer_home_first() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path());
    let grid = Buffer::new(GRID);
    let on_gpu: Task<Buffer, u32> = Task::new("on-gpu")
        .emulated("gpu", |_| Duration::from_micros(200), |_| 1)
        .data(|b: &Buffer| b.clone())
        .sizes(|b| (b.bytes(), 0));
    let on_cpu: Task<Buffer, u32> = Task::new("on-cpu")
        .cpu(|_| 2)
        .data(|b: &Buffer| b.clone())
        .sizes(|b| (b.bytes(), 0));
    rt.accelerate(&on_gpu, grid.clone(), Mode::Sync)
        .unwrap()
        .wait()
        .unwrap();
    assert!(matches!(grid.location(), DataLocation::Unit(_)));
    assert_eq!(
        rt.accelerate(&on_cpu, grid.clone(), Mode::Sync)
            .unwrap()
            .wait()
            .unwrap(),
        2
    );
    assert_eq!(grid.location(), DataLocation::Host);
    assert_eq!(grid.copies(), 2, "in to the GPU, back for the CPU");
}

#[test]
fn placement_keeps_a_resident_buffer_where_it_is_faster() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path());
    let grid = Buffer::new(GRID);
    // The device is 8x faster per call; moving 4 MiB over 1 GB/s costs
    // about 4 ms each way. Once profiled, the grid should settle on the GPU
    // instead of paying copies back and forth.
    let step: Task<Buffer, u64> = Task::new("stencil")
        .cpu(|_| {
            let start = std::time::Instant::now();
            while start.elapsed() < Duration::from_millis(4) {
                std::hint::spin_loop();
            }
            42
        })
        .emulated("gpu", |_| Duration::from_micros(500), |_| 42)
        .data(|b: &Buffer| b.clone())
        .sizes(|b| (b.bytes(), 0));
    let calls = 40;
    for _ in 0..calls {
        assert_eq!(
            rt.accelerate(&step, grid.clone(), Mode::Sync)
                .unwrap()
                .wait()
                .unwrap(),
            42
        );
    }
    // Profiling runs each unit twice (a few moves); after that it stays.
    assert!(
        grid.copies() <= 8,
        "{} copies over {calls} calls: the grid keeps moving",
        grid.copies()
    );
}
