//! Lists OpenCL devices and measures each one's launch and copy costs.
//!
//!     cargo run --release -p hetsched-opencl --example calibrate

use std::process::ExitCode;
use std::time::Instant;

use hetsched_opencl::{OpenClDevice, devices};

fn main() -> ExitCode {
    let all = match devices() {
        Ok(all) => all,
        Err(e) if e.is_unavailable() => {
            println!("{e}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    for info in all {
        println!("{info}\n  {}", info.version);
        let result = OpenClDevice::open(info.index).and_then(|device| {
            let start = Instant::now();
            let cal = device.calibrate()?;
            Ok((cal, start.elapsed()))
        });
        match result {
            Ok((cal, took)) => {
                println!(
                    "  launch overhead {:.1} µs wall ({:.1} µs on device)",
                    cal.launch_overhead_ns / 1e3,
                    cal.launch_device_ns / 1e3
                );
                println!(
                    "  copy latency ({} B) in {:.1} µs, out {:.1} µs",
                    cal.options.small_bytes,
                    cal.copy_in_latency_ns / 1e3,
                    cal.copy_out_latency_ns / 1e3
                );
                println!(
                    "  copy bandwidth ({} MiB) in {:.2} GB/s, out {:.2} GB/s",
                    cal.options.large_bytes >> 20,
                    cal.copy_in_bytes_per_s / 1e9,
                    cal.copy_out_bytes_per_s / 1e9
                );
                println!(
                    "  {} repeats, calibration took {:.0} ms (including the kernel build)",
                    cal.options.repeats,
                    took.as_secs_f64() * 1e3
                );
            }
            Err(e) => println!("  cannot calibrate: {e}"),
        }
    }
    ExitCode::SUCCESS
}
