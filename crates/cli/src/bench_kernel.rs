//! `hetsched bench served-kernel` (feature `opencl`): the histogram served
//! by the daemon on `served-opencl0` against the same kernel called in
//! this process on OpenCL device 0 (the measurement is
//! [`crate::bench_served`]'s).

use crate::bench::start_daemon_with;
use crate::bench_served::{SizeReport, served_vs_direct};
use anyhow::{Context, Result};
use clap::Args;
use hetsched_opencl::OpenClDevice;
use hetsched_opencl::kernels::Histogram;

#[derive(Args)]
pub struct ServedKernelArgs {
    /// Input sizes, bytes.
    #[arg(long, value_delimiter = ',', default_value = "4096,65536,1048576")]
    bytes: Vec<u64>,
    /// Calls per size and way (served, in process).
    #[arg(long, default_value_t = 300)]
    calls: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn served_kernel(args: ServedKernelArgs) -> Result<()> {
    let device = OpenClDevice::open(0).context("opening OpenCL device 0 for the anchor")?;
    let histogram = Histogram::new(&device)?;
    let (_daemon, socket) = start_daemon_with("include_cpus = false\nopencl_units = true\n")?;
    let reports = served_vs_direct(
        &socket,
        "served-opencl0",
        &args.bytes,
        args.calls,
        |input| {
            let (counts, _) = histogram.run(&device, input)?;
            std::hint::black_box(counts);
            Ok(())
        },
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        println!(
            "histogram on {}: served by the daemon vs called in process, {} calls each",
            device.info().name.trim(),
            args.calls
        );
        print_table(&reports);
    }
    Ok(())
}

/// One line per size.
fn print_table(reports: &[SizeReport]) {
    for r in reports {
        println!(
            "{:>9} B: served p50 {:>8.1} µs (p90 {:>8.1}), in process p50 {:>8.1} µs (p90 {:>8.1}); ratio {:.2}, overhead {:+.1} µs",
            r.bytes,
            r.served_p50_us,
            r.served_p90_us,
            r.direct_p50_us,
            r.direct_p90_us,
            r.ratio,
            r.overhead_us
        );
    }
}
