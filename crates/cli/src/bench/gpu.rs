//! `hetsched bench cuda-costs` (feature `cuda`, hidden): what one CUDA
//! device costs the scheduler, measured on it.
//!
//! * `launch` — round trip of an empty kernel (launch, then wait), median
//!   of at least 1000, and the per-launch cost when launches queue back to
//!   back: the platform's GPU calibration (what gives the runtime's CUDA
//!   units their launch and copy costs) run with more launches.
//! * `copy` — host→device and device→host copies of 1, 16 and 64 MiB
//!   through `CudaDevice`, the path tasks use (pinned staging, an
//!   asynchronous copy, the wait): per size the median host time and the
//!   median event-timed device time, each copy checked, and the µs per MiB
//!   of a least-squares line through the host medians.
//! * `model` — a GPU-only histogram task run through `hetsched_runtime` at
//!   training sizes; then each held-out size is predicted by the learned
//!   model before its first call and compared with the kernel time
//!   measured on the device.
//! * `served` — the histogram served by a daemon on `served-cuda<N>`
//!   against the same kernel called in this process ([`super::served`]).
//!
//! With `--json` it prints one line: an object whose keys are fields of
//! `scripts/gpu-check.sh`'s report. A part that fails gives
//! `{"error": ...}` for its fields and the command exits non-zero; without
//! a usable device it fails at once, saying why.

use super::common::start_daemon_with;
use super::served::{ServedKernel, served_vs_direct};
use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, ValueEnum};
use hetsched_core::ids::KindId;
use hetsched_core::task_model::PerformanceModel;
use hetsched_cuda::{CudaDevice, kernels, reference};
use hetsched_platform::gpu::{self, GpuCalibrationOptions};
use hetsched_runtime::{Mode, MonitorMode, Runtime, RuntimeOptions, Task};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Instant;

#[derive(Args)]
pub struct CudaCostsArgs {
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// What to measure.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "launch,copy,model,served"
    )]
    parts: Vec<Part>,
    /// Empty-kernel launches timed (at least 1000).
    #[arg(long, default_value_t = 2000)]
    launches: u32,
    /// Copy sizes, MiB.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    copy_mib: Vec<usize>,
    /// Copies per size and direction.
    #[arg(long, default_value_t = 20)]
    copies: usize,
    /// Input sizes of the served comparison, bytes.
    #[arg(long, value_delimiter = ',', default_value = "4096,1048576")]
    served_bytes: Vec<u64>,
    /// Calls per size and way (served, in process).
    #[arg(long, default_value_t = 300)]
    served_calls: usize,
    /// Print one line of JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Part {
    Launch,
    Copy,
    Model,
    Served,
}

impl Part {
    /// The report fields this part fills.
    fn fields(self) -> &'static [&'static str] {
        match self {
            Part::Launch => &["launch_overhead_us", "calibration"],
            Part::Copy => &["copy_in_us_per_mib", "copy_out_us_per_mib", "copies"],
            Part::Model => &["prediction_error"],
            Part::Served => &["served_overhead"],
        }
    }
}

type Fields = Vec<(&'static str, Value)>;

/// Training sizes of the model part, and sizes it never saw.
const TRAIN: [usize; 5] = [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20];
const HELD_OUT: [usize; 5] = [128 << 10, 512 << 10, 2 << 20, 8 << 20, 32 << 20];
const TRAIN_ROUNDS: usize = 6;
const TASK: &str = "cuda-costs-histogram";

pub fn cuda_costs(args: CudaCostsArgs) -> Result<()> {
    if args.launches < 1000 || args.copies == 0 || args.copy_mib.contains(&0) {
        bail!("--launches must be at least 1000, --copies and every --copy-mib at least 1");
    }
    let dev = open(args.device)?;
    let mut report = Map::new();
    let mut failed = Vec::new();
    let mut parts = args.parts.clone();
    parts.dedup();
    for part in parts {
        let result = match part {
            Part::Launch => launch(args.device, args.launches),
            Part::Copy => copies(&dev, &args.copy_mib, args.copies),
            Part::Model => model(&dev),
            Part::Served => served(&dev, &args.served_bytes, args.served_calls),
        };
        match result {
            Ok(fields) => {
                for (k, v) in fields {
                    report.insert(k.into(), v);
                }
            }
            Err(e) => {
                for k in part.fields() {
                    report.insert((*k).into(), json!({ "error": format!("{e:#}") }));
                }
                failed.push(format!("{e:#}"));
            }
        }
    }
    if args.json {
        println!("{}", Value::Object(report));
    } else {
        println!("CUDA device {}: {}", args.device, dev.info().name.trim());
        for (k, v) in &report {
            println!("{k}: {v}");
        }
    }
    if !failed.is_empty() {
        bail!("{} part(s) failed: {}", failed.len(), failed.join("; "));
    }
    Ok(())
}

/// Device `ordinal`, or one sentence saying why there is none (cudarc
/// panics where libcuda is missing: `probe` asks first).
fn open(ordinal: usize) -> Result<CudaDevice> {
    match hetsched_cuda::probe() {
        Err(why) => bail!("no usable CUDA device: {why}"),
        Ok(0) => bail!("no usable CUDA device: the CUDA driver reports none"),
        Ok(n) if ordinal >= n => bail!("no CUDA device {ordinal}: the driver reports {n}"),
        Ok(_) => {
            CudaDevice::open(ordinal).with_context(|| format!("opening CUDA device {ordinal}"))
        }
    }
}

fn us(ns: f64) -> f64 {
    ns / 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Slope of the least-squares line through `points` (x, y); with one
/// point, y / x.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    if sxx > 0.0 { sxy / sxx } else { my / mx }
}

fn launch(ordinal: usize, launches: u32) -> Result<Fields> {
    let opts = GpuCalibrationOptions {
        launches,
        ..GpuCalibrationOptions::default()
    };
    let cal = gpu::calibrate(ordinal, &opts).map_err(|e| anyhow!(e))?;
    let link = |l: hetsched_core::unit::LinkCost| {
        json!({
            "latency_us": us(l.latency_ns as f64),
            "us_per_mib": us(l.ns_per_byte * (1 << 20) as f64),
        })
    };
    Ok(vec![
        ("launch_overhead_us", json!(us(cal.launch_round_trip_ns))),
        (
            "calibration",
            json!({
                "launches": launches,
                "launch_round_trip_us": us(cal.launch_round_trip_ns),
                "launch_queued_us": us(cal.launch_queued_ns),
                "copy_in": link(cal.copy_in),
                "copy_out": link(cal.copy_out),
            }),
        ),
    ])
}

fn copies(dev: &CudaDevice, mib: &[usize], reps: usize) -> Result<Fields> {
    let largest = mib.iter().max().copied().unwrap_or(1) << 20;
    let host: Vec<u8> = (0..largest).map(|i| (i * 131 % 251) as u8).collect();
    let mut back = vec![0_u8; largest];
    let mut buf = dev.zeros::<u8>(largest)?;
    // The largest copy first pins the staging buffers once for all sizes.
    dev.upload_into(&host, &mut buf)?;
    dev.download(&buf, &mut back)?;
    dev.take_times()?;
    let (mut sizes, mut wall_in, mut wall_out, mut dev_in, mut dev_out) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &m in mib {
        let n = m << 20;
        let mut t = [(); 4].map(|_| Vec::with_capacity(reps));
        for _ in 0..reps {
            back[..n].fill(0);
            let t0 = Instant::now();
            dev.upload_into(&host[..n], &mut buf)?;
            let times = dev.take_times()?; // waits for the copy
            t[0].push(t0.elapsed().as_nanos() as f64);
            t[1].push(times.copy_in_ns);
            let t0 = Instant::now();
            dev.download(&buf, &mut back[..n])?;
            t[2].push(t0.elapsed().as_nanos() as f64);
            t[3].push(dev.take_times()?.copy_out_ns);
            if back[..n] != host[..n] {
                bail!("{m} MiB came back from the device changed");
            }
        }
        let [a, b, c, d] = t.map(|v| us(median(v)));
        let x = m as f64;
        wall_in.push((x, a));
        dev_in.push((x, b));
        wall_out.push((x, c));
        dev_out.push((x, d));
        sizes.push(json!({
            "mib": m,
            "in_host_p50_us": a,
            "in_device_p50_us": b,
            "out_host_p50_us": c,
            "out_device_p50_us": d,
        }));
    }
    Ok(vec![
        ("copy_in_us_per_mib", json!(slope(&wall_in))),
        ("copy_out_us_per_mib", json!(slope(&wall_out))),
        (
            "copies",
            json!({
                "per_size": reps,
                "sizes": sizes,
                "in_device_us_per_mib": slope(&dev_in),
                "out_device_us_per_mib": slope(&dev_out),
            }),
        ),
    ])
}

/// Pseudo-random bytes, different per size.
fn input(len: usize) -> Arc<Vec<u8>> {
    use rand::{RngCore, SeedableRng};
    let mut v = vec![0; len];
    rand_chacha::ChaCha8Rng::seed_from_u64(len as u64).fill_bytes(&mut v);
    Arc::new(v)
}

fn model(dev: &CudaDevice) -> Result<Fields> {
    let opts = RuntimeOptions::new("bench-cuda-costs")
        .map_err(|e| anyhow!(e))?
        .monitor(MonitorMode::Embedded)
        .persist_models(false);
    let rt = Runtime::with_options(opts)?;
    let name = format!("cuda{}", dev.info().ordinal);
    let unit = rt
        .units()
        .iter()
        .find(|u| u.name == name)
        .with_context(|| format!("the runtime has no unit {name}"))?;
    let (unit_id, kind) = (unit.id, unit.kind.clone());
    let kind = KindId(
        rt.kinds()
            .iter()
            .position(|k| *k == kind)
            .context("the CUDA unit's kind is not among the runtime's kinds")? as u16,
    );
    let task = Task::new(TASK)
        .cuda(|dev, d: &Arc<Vec<u8>>| kernels::histogram(dev, d))
        .sizes(|d| (d.len() as u64, 1024));
    let call = |d: &Arc<Vec<u8>>| -> Result<()> {
        let (counts, info) = rt
            .accelerate(&task, Arc::clone(d), Mode::Sync)?
            .wait_with_info()?;
        if info.unit != unit_id {
            bail!("the GPU-only task ran on {}", info.unit_name);
        }
        if counts != reference::histogram(d) {
            bail!(
                "the histogram of {} bytes differs from the reference",
                d.len()
            );
        }
        Ok(())
    };
    let train: Vec<_> = TRAIN.iter().map(|&n| input(n)).collect();
    for _ in 0..TRAIN_ROUNDS {
        train.iter().try_for_each(&call)?;
    }
    let learned = rt.model_of(TASK).context("the runtime kept no model")?;
    let training_error = learned.mean_error(kind);
    let (fixed_ns, ns_per_byte) = learned
        .kind(kind)
        .context("no model for the CUDA kind")?
        .fit()
        .coefficients();
    let mut held_out = Vec::new();
    let mut errors = Vec::new();
    for n in HELD_OUT {
        let d = input(n);
        let before = rt.model_of(TASK).context("the runtime kept no model")?;
        let predicted = before
            .predict_ns(kind, n as u64)
            .context("the model predicts nothing")?;
        let scored = before.kind(kind).map_or(0, |k| k.errors().scored());
        call(&d)?;
        // The runtime scores its own prediction as it learns from the call.
        let after = rt.model_of(TASK).context("the runtime kept no model")?;
        let runtime_error = after
            .kind(kind)
            .filter(|k| k.errors().scored() > scored)
            .and_then(|k| k.errors().last_error());
        // The kernel's device time measured here, as the runtime measures it.
        dev.take_times()?;
        let mut kernel = Vec::new();
        for _ in 0..5 {
            kernels::histogram(dev, &d)?;
            kernel.push(dev.take_times()?.kernel_ns);
        }
        let measured = median(kernel);
        let error = (predicted - measured).abs() / measured;
        errors.push(error);
        held_out.push(json!({
            "bytes": n,
            "predicted_us": us(predicted),
            "measured_us": us(measured),
            "error": error,
            "runtime_scored_error": runtime_error,
        }));
    }
    Ok(vec![(
        "prediction_error",
        json!({
            "task": "histogram, GPU only, through hetsched_runtime",
            "held_out_mean": errors.iter().sum::<f64>() / errors.len() as f64,
            "held_out_max": errors.iter().copied().fold(0.0, f64::max),
            "held_out": held_out,
            "train_bytes": TRAIN,
            "train_rounds": TRAIN_ROUNDS,
            "training_mean_error": training_error,
            "fit": { "fixed_us": us(fixed_ns), "ns_per_byte": ns_per_byte },
        }),
    )])
}

fn served(dev: &CudaDevice, bytes: &[u64], calls: usize) -> Result<Fields> {
    let (_daemon, socket) = start_daemon_with("include_cpus = false\ncuda_units = true\n")?;
    let unit = format!("served-cuda{}", dev.info().ordinal);
    let sizes = served_vs_direct(
        &socket,
        &unit,
        ServedKernel::Histogram,
        bytes,
        calls,
        |input| {
            std::hint::black_box(kernels::histogram(dev, input)?);
            // The daemon drains the event timings after every call too.
            dev.take_times()?;
            Ok(())
        },
    )?;
    Ok(vec![(
        "served_overhead",
        json!({ "unit": unit, "kernel": "histogram", "calls": calls, "sizes": sizes }),
    )])
}
