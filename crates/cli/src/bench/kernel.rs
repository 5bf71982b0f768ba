//! `hetsched bench served-kernel` (feature `opencl`): a kernel served by
//! the daemon on `served-opencl0` against the same kernel called in this
//! process on OpenCL device 0 (the measurement is
//! [`super::served`]'s): the built-in histogram, or (`--kernel
//! user`) a kernel the benchmark registers, with its input copied to the
//! device and its output, as large, copied back.

use super::common::start_daemon_with;
use super::served::ServedKernel;
use super::served::{SizeReport, served_vs_direct};
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use hetsched_opencl::kernels::Histogram;
use hetsched_opencl::{DeviceBuffer, KernelArg, OpenClDevice};
use std::collections::HashMap;

/// The registered kernel of `--kernel user`: one work-item per 4 bytes.
const MIX_SOURCE: &str = "__kernel void xor_words(__global const uint *in, __global uint *out, \
                          uint key) { size_t i = get_global_id(0); out[i] = in[i] ^ key; }";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KernelChoice {
    /// The daemon's built-in histogram.
    Histogram,
    /// A kernel registered with the daemon (`RegisterKernel`).
    User,
}

#[derive(Args)]
pub struct ServedKernelArgs {
    /// Input sizes, bytes.
    #[arg(long, value_delimiter = ',', default_value = "4096,65536,1048576")]
    bytes: Vec<u64>,
    /// Calls per size and way (served, in process).
    #[arg(long, default_value_t = 300)]
    calls: usize,
    /// Which kernel.
    #[arg(long, value_enum, default_value = "histogram")]
    kernel: KernelChoice,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn served_kernel(args: ServedKernelArgs) -> Result<()> {
    let device = OpenClDevice::open(0).context("opening OpenCL device 0 for the anchor")?;
    let (_daemon, socket) = start_daemon_with("include_cpus = false\nopencl_units = true\n")?;
    let unit = "served-opencl0";
    let reports = match args.kernel {
        KernelChoice::Histogram => {
            let histogram = Histogram::new(&device)?;
            served_vs_direct(
                &socket,
                unit,
                ServedKernel::Histogram,
                &args.bytes,
                args.calls,
                |input| {
                    let (counts, _) = histogram.run(&device, input)?;
                    std::hint::black_box(counts);
                    Ok(())
                },
            )?
        }
        KernelChoice::User => {
            let mix = device.build(MIX_SOURCE, "xor_words")?;
            // The anchor keeps its buffers from call to call, as an
            // application that owns the device would.
            let mut buffers: HashMap<usize, (DeviceBuffer, DeviceBuffer)> = HashMap::new();
            let mut out = Vec::new();
            served_vs_direct(
                &socket,
                unit,
                ServedKernel::User {
                    source: MIX_SOURCE,
                    entry: "xor_words",
                },
                &args.bytes,
                args.calls,
                |input| {
                    let (src, dst) = match buffers.entry(input.len()) {
                        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                        std::collections::hash_map::Entry::Vacant(e) => {
                            e.insert((device.buffer(input.len())?, device.buffer(input.len())?))
                        }
                    };
                    device.write(src, input)?;
                    let args = [
                        KernelArg::Buffer(src),
                        KernelArg::Buffer(dst),
                        KernelArg::U32(0x5a5a_5a5a),
                    ];
                    device.launch(&mix, input.len() / 4, None, &args)?;
                    out.resize(input.len(), 0);
                    device.read(dst, &mut out)?;
                    std::hint::black_box(&out);
                    Ok(())
                },
            )?
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        println!(
            "{} on {}: served by the daemon vs called in process, {} calls each",
            match args.kernel {
                KernelChoice::Histogram => "histogram",
                KernelChoice::User => "registered kernel (in + out copies)",
            },
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
