//! `hetsched bench device-placement`: whether placement sees real load on
//! a device the daemon arbitrates. This process runs a task with a CPU and
//! a device implementation (the spin kernel; on the CPU its plain scalar
//! loop, [`SpinCall::scalar`]) one call at a time, while
//! another process keeps the device busy at CUSTOM 90 for a while; where
//! each call ran shows how fast placement leaves the busy device and
//! comes back.

use super::common::start_daemon_with;
use super::device::{daemon_runtime, start_client};
use crate::spin_kernel::{DeviceRef, SpinCall, calibrate_iterations, spin_task};
use anyhow::{Result, bail};
use clap::Args;
use hetsched_runtime::{Mode, Runtime};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct DevicePlacementArgs {
    /// The device unit (`opencl<N>`, `cuda<N>`).
    #[arg(long, default_value = "opencl0")]
    unit: String,
    /// Seconds before, during and after the other process's load.
    #[arg(long, value_parser = crate::values::seconds, value_delimiter = ',', default_value = "2,3,3")]
    phases: Vec<f64>,
    /// Device time of one call, µs.
    #[arg(long, value_parser = crate::values::positive_us, default_value_t = 1000.0)]
    kernel_us: f64,
    /// The CPU implementation computes its result this many times: a CPU
    /// that many times slower than it is, for a machine whose only device
    /// (PoCL) is its own CPUs.
    #[arg(long, default_value_t = 1)]
    cpu_slowdown: u32,
    /// Width of the bins the share on the device is counted in, ms.
    #[arg(long, default_value_t = 250)]
    bin_ms: u64,
    /// Write the share on the device over time as an SVG plot.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// What the experiment measured.
#[derive(Debug, Serialize)]
pub struct PlacementReport {
    pub unit: String,
    pub cpu_slowdown: u32,
    pub calls: usize,
    /// When the other process started and stopped, s from the start.
    pub loaded_at_s: f64,
    pub freed_at_s: f64,
    /// Share of the calls that ran on the device before the load (its
    /// second half), from 0.5 s into the load to its end, and from 1 s
    /// after it to the end.
    pub share_idle: f64,
    pub share_loaded: f64,
    pub share_after: f64,
    /// From the load's start to the first bin with under half of the
    /// calls on the device, s; from its end to the first bin with over
    /// half, s.
    pub moved_off_after_s: Option<f64>,
    pub moved_back_after_s: Option<f64>,
    /// Mean execution time of a call on the device and on the CPU as the
    /// runtime measured it, µs (NaN where none ran).
    pub device_call_us: f64,
    pub cpu_call_us: f64,
    pub bin_s: f64,
    /// Share of the calls on the device in each bin (NaN: no call ended).
    pub bins: Vec<f64>,
    /// Every result matched the CPU reference.
    pub checked: bool,
}

/// Where each call ran, by time since the run started.
struct Trace {
    start: Instant,
    calls: Vec<(f64, bool)>,
    /// Results that differed from the CPU reference.
    wrong: u64,
}

impl Trace {
    fn share_on_device(&self, from: f64, to: f64) -> f64 {
        let window: Vec<bool> = self
            .calls
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .map(|(_, on)| *on)
            .collect();
        if window.is_empty() {
            return f64::NAN;
        }
        window.iter().filter(|on| **on).count() as f64 / window.len() as f64
    }
}

pub fn device_placement(args: DevicePlacementArgs) -> Result<()> {
    let report = run(&args)?;
    if let Some(path) = &args.svg {
        std::fs::write(path, share_svg(&report)?)?;
        eprintln!("wrote {}", path.display());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} calls; on {}: {:.2} idle, {:.2} under load (from 0.5 s in), {:.2} after",
            report.calls, report.unit, report.share_idle, report.share_loaded, report.share_after
        );
        println!(
            "a call took {:.0} µs on {} and {:.0} µs on the CPU (means)",
            report.device_call_us, report.unit, report.cpu_call_us
        );
        let secs = |s: Option<f64>| s.map_or("never".into(), |s| format!("{s:.2} s"));
        println!(
            "moved off after {}, back after {}",
            secs(report.moved_off_after_s),
            secs(report.moved_back_after_s)
        );
    }
    if !report.checked {
        bail!("some results did not match the CPU reference");
    }
    Ok(())
}

/// Runs the experiment against a daemon of its own.
pub fn run(args: &DevicePlacementArgs) -> Result<PlacementReport> {
    let [before, during, after] = args.phases[..] else {
        bail!("--phases takes three durations: before, during and after the load");
    };
    if [before, during, after]
        .iter()
        .any(|s| !(s.is_finite() && *s > 0.5))
    {
        bail!("each phase must last more than 0.5 s");
    }
    let device = DeviceRef::of_unit(&args.unit)?;
    let (iterations, _) = calibrate_iterations(device, args.kernel_us)?;
    // CPUs and the device are units; the task runs on either.
    let (_daemon, socket) = start_daemon_with("")?;
    let rt = Runtime::with_options(daemon_runtime("placed", &socket)?)?;
    let slowdown = args.cpu_slowdown.max(1);
    let task = spin_task(device)?.cpu(move |c: &SpinCall| {
        let mut out = c.scalar();
        for _ in 1..slowdown {
            out = std::hint::black_box(c.scalar());
        }
        out
    });
    let want = SpinCall::new(iterations, 1).expected();
    let mut trace = Trace {
        start: Instant::now(),
        calls: Vec::new(),
        wrong: 0,
    };
    let run_for = |trace: &mut Trace, seconds: f64| -> Result<()> {
        let until = Instant::now() + Duration::from_secs_f64(seconds);
        while Instant::now() < until {
            let (got, info) = rt
                .accelerate(&task, SpinCall::new(iterations, 1), Mode::Sync)?
                .wait_with_info()?;
            trace.wrong += u64::from(got != want);
            let on_device = *info.unit_name == *args.unit;
            trace
                .calls
                .push((trace.start.elapsed().as_secs_f64(), on_device));
        }
        Ok(())
    };
    run_for(&mut trace, before)?;
    let mut busy = start_client(&socket, &args.unit, "custom:90", iterations)?;
    busy.ready()?;
    let loaded = trace.start.elapsed().as_secs_f64();
    run_for(&mut trace, during)?;
    let tally = busy.stop()?;
    let freed = trace.start.elapsed().as_secs_f64();
    run_for(&mut trace, after)?;
    let end = trace.start.elapsed().as_secs_f64();

    let stats = rt.stats();
    let mean_us = |on_device: bool| {
        let (n, ns) = stats
            .units
            .iter()
            .filter(|u| (u.name == args.unit) == on_device && (on_device || u.kind == "cpu"))
            .fold((0, 0.0), |(n, ns), u| (n + u.completed, ns + u.exec_ns));
        if n == 0 {
            f64::NAN
        } else {
            ns / n as f64 / 1e3
        }
    };
    let bin = args.bin_ms.max(10) as f64 / 1e3;
    let bins: Vec<f64> = (0..(end / bin).ceil() as usize)
        .map(|i| trace.share_on_device(i as f64 * bin, (i + 1) as f64 * bin))
        .collect();
    let first_bin = |from: f64, until: f64, off: bool| {
        bins.iter()
            .enumerate()
            .map(|(i, s)| (i as f64 * bin, *s))
            .filter(|(t, s)| *t >= from && *t < until && s.is_finite())
            .find(|(_, s)| if off { *s < 0.5 } else { *s > 0.5 })
            .map(|(t, _)| (t + bin - from).max(0.0))
    };
    Ok(PlacementReport {
        unit: args.unit.clone(),
        cpu_slowdown: slowdown,
        calls: trace.calls.len(),
        loaded_at_s: loaded,
        freed_at_s: freed,
        share_idle: trace.share_on_device(loaded / 2.0, loaded),
        share_loaded: trace.share_on_device(loaded + 0.5, freed),
        share_after: trace.share_on_device(freed + 1.0, end),
        moved_off_after_s: first_bin(loaded, freed, true),
        moved_back_after_s: first_bin(freed, end, false),
        device_call_us: mean_us(true),
        cpu_call_us: mean_us(false),
        bin_s: bin,
        bins,
        checked: trace.wrong == 0 && tally.wrong == 0,
    })
}

/// The share of calls on the device per bin, with the loaded span shaded.
fn share_svg(r: &PlacementReport) -> Result<String> {
    use plotters::prelude::*;
    let e = |e: &dyn std::fmt::Display| anyhow::anyhow!("{e}");
    let end = r.bins.len() as f64 * r.bin_s;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 360)).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("calls placed on {} while another process loads it", r.unit),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..end, 0.0..1.05)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc("time, s")
            .y_desc(format!("share of calls on {}", r.unit))
            .draw()
            .map_err(|x| e(&x))?;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(r.loaded_at_s, 0.0), (r.freed_at_s, 1.05)],
                RGBColor(230, 120, 60).mix(0.18).filled(),
            )))
            .map_err(|x| e(&x))?
            .label("other process at CUSTOM 90")
            .legend(|(x, y)| {
                Rectangle::new(
                    [(x, y - 5), (x + 14, y + 5)],
                    RGBColor(230, 120, 60).mix(0.4).filled(),
                )
            });
        let points: Vec<(f64, f64)> = r
            .bins
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_finite())
            .map(|(i, s)| ((i as f64 + 0.5) * r.bin_s, *s))
            .collect();
        let blue = RGBColor(40, 90, 200);
        chart
            .draw_series(LineSeries::new(points.clone(), blue.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(format!("share on {} per {:.0} ms", r.unit, r.bin_s * 1e3))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], blue.stroke_width(2)));
        chart
            .draw_series(points.into_iter().map(|p| Circle::new(p, 3, blue.filled())))
            .map_err(|x| e(&x))?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|x| e(&x))?;
        root.present().map_err(|x| e(&x))?;
    }
    Ok(svg)
}
