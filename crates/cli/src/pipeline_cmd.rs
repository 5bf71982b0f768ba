//! `hetsched pipeline`: the streaming-pipeline demo (APC) — an image
//! pipeline (grayscale → sepia → alpha-blend over generated RGBA images)
//! driven by the runtime's controller thread, against the naive loop in
//! which the application issues every stage and waits for it. Grayscale
//! also has an OpenCL kernel, and where the runtime drives OpenCL devices
//! (its feature `opencl`, which this crate's `opencl` turns on, and which
//! Cargo turns on in a workspace build) the demo runs it on each of them
//! against the same reference.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use hetsched_runtime::pipeline::{Pipeline, PipelineBuilder, Stage};
use hetsched_runtime::{Mode, MonitorMode, Runtime, RuntimeOptions, Task};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Subcommand)]
pub enum PipelineCommand {
    /// Run the image pipeline through the controller and through the naive
    /// loop, check both against a reference, and report per-chunk times.
    Demo(DemoArgs),
    /// Print the pipelining table of the demo pipeline.
    Show(ShowArgs),
    /// Scaling: per-chunk time of the controller and of the naive loop as
    /// the number of stages and CPU lanes grows (synthetic CPU stages).
    Scale(ScaleArgs),
}

#[derive(Args)]
pub struct ScaleArgs {
    /// Stage counts to try.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,6")]
    stages: Vec<usize>,
    /// CPU lane limits to try.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    lanes: Vec<usize>,
    /// Chunks per run.
    #[arg(long, default_value_t = 300)]
    chunks: usize,
    /// Work per stage: rounds over a chunk of 256 integers.
    #[arg(long, default_value_t = 200)]
    work: u32,
    /// Print one JSON array instead of a table.
    #[arg(long)]
    json: bool,
    /// Also plot µs per chunk against the number of stages (controller per
    /// lane limit, and the naive loop) to this SVG file.
    #[arg(long)]
    svg: Option<std::path::PathBuf>,
}

#[derive(Args, Clone)]
pub struct CommonArgs {
    /// Image side in pixels (RGBA, one image per chunk).
    #[arg(long, default_value_t = 64)]
    side: usize,
    /// CPU lanes (cores) per CPU kind the planner may use, at most.
    #[arg(long, default_value_t = usize::MAX, hide_default_value = true)]
    cpu_lanes: usize,
    /// Monitor config for the embedded monitor (units, emulated devices);
    /// else `$HETSCHED_CONFIG`, `/etc/hetsched/hetsched.toml`, or the CPUs.
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(Args)]
pub struct DemoArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Chunks (images) per run.
    #[arg(long, default_value_t = 400)]
    chunks: usize,
    /// Chunks through the no-op pipeline that measures controller overhead.
    #[arg(long, default_value_t = 20_000)]
    overhead_chunks: u64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct ShowArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Chunks in the printed table.
    #[arg(long, default_value_t = 6)]
    chunks: usize,
    /// Print the table as one JSON object (stages, assignment, steps with
    /// their compute and copy entries).
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: PipelineCommand) -> Result<()> {
    match cmd {
        PipelineCommand::Demo(args) => demo(args),
        PipelineCommand::Show(args) => show(args),
        PipelineCommand::Scale(args) => scale(args),
    }
}

type Image = Vec<u8>;

// The three stages, one image at a time (RGBA, integer arithmetic).

fn grayscale(img: &Image) -> Image {
    let mut out = Vec::with_capacity(img.len());
    for px in img.chunks_exact(4) {
        let y =
            ((77 * u32::from(px[0]) + 150 * u32::from(px[1]) + 29 * u32::from(px[2])) >> 8) as u8;
        out.extend_from_slice(&[y, y, y, px[3]]);
    }
    out
}

fn sepia(img: &Image) -> Image {
    let mut out = Vec::with_capacity(img.len());
    for px in img.chunks_exact(4) {
        let (r, g, b) = (u32::from(px[0]), u32::from(px[1]), u32::from(px[2]));
        let c = |x: u32, y: u32, z: u32| ((x * r + y * g + z * b) / 1000).min(255) as u8;
        out.extend_from_slice(&[c(393, 769, 189), c(349, 686, 168), c(272, 534, 131), px[3]]);
    }
    out
}

fn blend(img: &Image, overlay: &Image) -> Image {
    img.chunks_exact(4)
        .zip(overlay.chunks_exact(4))
        .flat_map(|(p, o)| {
            let a = u32::from(o[3]);
            let mix =
                |c: u8, oc: u8| ((u32::from(c) * (255 - a) + u32::from(oc) * a + 127) / 255) as u8;
            [mix(p[0], o[0]), mix(p[1], o[1]), mix(p[2], o[2]), p[3]]
        })
        .collect()
}

/// The reference: all three stages fused, pixel by pixel, written apart
/// from the stage functions.
fn reference(img: &Image, overlay: &Image) -> Image {
    let mut out = vec![0u8; img.len()];
    for i in (0..img.len()).step_by(4) {
        let y = (77 * img[i] as u32 + 150 * img[i + 1] as u32 + 29 * img[i + 2] as u32) / 256;
        let sep = [
            (y * (393 + 769 + 189) / 1000).min(255),
            (y * (349 + 686 + 168) / 1000).min(255),
            (y * (272 + 534 + 131) / 1000).min(255),
        ];
        let a = overlay[i + 3] as u32;
        for c in 0..3 {
            out[i + c] = ((sep[c] * (255 - a) + overlay[i + c] as u32 * a + 127) / 255) as u8;
        }
        out[i + 3] = img[i + 3];
    }
    out
}

/// A deterministic test image (xorshift noise over gradients).
fn image(side: usize, seed: u64) -> Image {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(side * side * 4);
    for y in 0..side {
        for x in 0..side {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            out.extend_from_slice(&[
                (x * 255 / side.max(1)) as u8 ^ (s as u8 & 0x1f),
                (y * 255 / side.max(1)) as u8,
                (s >> 8) as u8,
                (s >> 16) as u8 | 0x80,
            ]);
        }
    }
    out
}

/// Emulated device time of one stage on one image.
fn device_cost(img: &Image) -> Duration {
    Duration::from_nanos(img.len() as u64 / 8)
}

fn sizes(img: &Image) -> (u64, u64) {
    (img.len() as u64, img.len() as u64)
}

/// Grayscale in OpenCL C: one work-item per pixel, the same integer
/// weights as [`grayscale`]. It runs wherever the runtime drives OpenCL
/// devices ([`Stage::opencl_map`]), whatever features this binary was
/// built with.
const GRAYSCALE_CL: &str = r#"
__kernel void grayscale_rgba(__global const uchar4 *in, __global uchar4 *out) {
    size_t i = get_global_id(0);
    uchar4 p = in[i];
    uchar y = (uchar)((77u * p.x + 150u * p.y + 29u * p.z) >> 8);
    out[i] = (uchar4)(y, y, y, p.w);
}
"#;

/// The OpenCL devices the runtime drives: in a build whose runtime has
/// no OpenCL, none, even where the monitor lists them.
fn opencl_units(rt: &Runtime) -> Vec<String> {
    rt.opencl_units().iter().map(|u| u.name.clone()).collect()
}

fn runtime(common: &CommonArgs) -> Result<Runtime> {
    let mut opts = RuntimeOptions::new("pipeline-demo")
        .map_err(anyhow::Error::msg)?
        .monitor(MonitorMode::Embedded)
        .persist_models(false)
        .opencl(true);
    if let Some(c) = &common.config {
        opts = opts.config(c);
    }
    Runtime::with_options(opts).context("starting the runtime")
}

fn emulated_kinds(rt: &Runtime) -> Vec<String> {
    let mut kinds: Vec<String> = rt
        .units()
        .iter()
        .filter(|u| u.emulated)
        .map(|u| u.kind.clone())
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

type StageImpl = Arc<dyn Fn(&Image) -> Image + Send + Sync>;

fn stage_impls(overlay: &Arc<Image>) -> Vec<(&'static str, StageImpl)> {
    let o = Arc::clone(overlay);
    vec![
        ("grayscale", Arc::new(grayscale)),
        ("sepia", Arc::new(sepia)),
        ("alpha-blend", Arc::new(move |img: &Image| blend(img, &o))),
    ]
}

fn demo_pipeline(
    rt: &Runtime,
    common: &CommonArgs,
    overlay: &Arc<Image>,
    assign: Option<Vec<String>>,
) -> Result<Pipeline<Image>> {
    let side = common.side.max(1);
    let kinds = emulated_kinds(rt);
    let mut b = PipelineBuilder::new("image-demo").cpu_lanes(common.cpu_lanes);
    if let Some(units) = assign {
        b = b.assign(units);
    }
    for (name, f) in stage_impls(overlay) {
        let g = Arc::clone(&f);
        let mut st = Stage::new(name).cpu(move |img: Image| g(&img)).sizes(sizes);
        for k in &kinds {
            let g = Arc::clone(&f);
            st = st.emulated(k.clone(), device_cost, move |img: Image| g(&img));
        }
        if name == "grayscale" {
            st = st.opencl_map(GRAYSCALE_CL, "grayscale_rgba", 4);
        }
        b = b.stage(st);
    }
    Ok(b.build(rt, &image(side, 0))?)
}

fn naive_tasks(rt: &Runtime, overlay: &Arc<Image>) -> Vec<Task<Image, Image>> {
    let kinds = emulated_kinds(rt);
    stage_impls(overlay)
        .into_iter()
        .map(|(name, f)| {
            let g = Arc::clone(&f);
            let mut t = Task::new(format!("pipeline-demo-{name}"))
                .cpu(move |img: &Image| g(img))
                .sizes(sizes);
            for k in &kinds {
                let g = Arc::clone(&f);
                t = t.emulated(k.clone(), device_cost, move |img: &Image| g(img));
            }
            t
        })
        .collect()
}

fn naive(rt: &Runtime, tasks: &[Task<Image, Image>], inputs: &[Image]) -> Result<Vec<Image>> {
    let mut out = Vec::with_capacity(inputs.len());
    for img in inputs {
        let mut x = img.clone();
        for t in tasks {
            x = rt.accelerate(t, x, Mode::Sync)?.wait()?;
        }
        out.push(x);
    }
    Ok(out)
}

fn through_pipeline(p: &mut Pipeline<Image>, inputs: &[Image]) -> Result<Vec<Image>> {
    let feeder = p.feeder()?;
    std::thread::scope(|scope| {
        // Each input is copied just before it is pushed, as the naive loop
        // copies each just before its first stage.
        scope.spawn(move || {
            for img in inputs {
                if feeder.push(img.clone()).is_err() {
                    return;
                }
            }
        });
        let mut out = Vec::with_capacity(inputs.len());
        for _ in 0..inputs.len() {
            out.push(p.pull().context("the pipeline closed early")??);
        }
        Ok(out)
    })
}

/// Controller overhead per stage step: three no-op stages over integers,
/// on up to `lanes` CPU lanes (1: every stage on the controller thread).
fn overhead(rt: &Runtime, chunks: u64, lanes: usize) -> Result<f64> {
    let mut p = PipelineBuilder::new("noop")
        .cpu_lanes(lanes)
        .stage(Stage::new("a").cpu(|v: u64| v + 1))
        .stage(Stage::new("b").cpu(|v: u64| v ^ 3))
        .stage(Stage::new("c").cpu(|v: u64| v + 2))
        .max_in_flight(16)
        .build(rt, &0)?;
    let feeder = p.feeder()?;
    let producer = std::thread::spawn(move || {
        for k in 0..chunks {
            if feeder.push(k).is_err() {
                return;
            }
        }
    });
    for k in 0..chunks {
        let v = p.pull().context("the pipeline closed early")??;
        if v != ((k + 1) ^ 3) + 2 {
            bail!("no-op pipeline returned {v} for chunk {k}");
        }
    }
    producer
        .join()
        .map_err(|_| anyhow::anyhow!("producer panicked"))?;
    Ok(p.stats().overhead_ns_per_stage_step())
}

fn demo(args: DemoArgs) -> Result<()> {
    if args.chunks == 0 {
        bail!("--chunks must be at least 1");
    }
    let side = args.common.side.max(1);
    let rt = runtime(&args.common)?;
    let overlay = Arc::new(image(side, 0xA11CE));
    let inputs: Vec<Image> = (0..args.chunks as u64)
        .map(|k| image(side, k + 1))
        .collect();
    let expected: Vec<Image> = inputs.iter().map(|i| reference(i, &overlay)).collect();

    // Naive: warm up (the runtime profiles each task), then time.
    let tasks = naive_tasks(&rt, &overlay);
    let warm = inputs.len().min(8);
    naive(&rt, &tasks, &inputs[..warm])?;
    let t = Instant::now();
    let naive_out = naive(&rt, &tasks, &inputs)?;
    let naive_us = t.elapsed().as_secs_f64() * 1e6 / inputs.len() as f64;

    let mut p = demo_pipeline(&rt, &args.common, &overlay, None)?;
    through_pipeline(&mut p, &inputs[..warm])?;
    let before = p.stats();
    let t = Instant::now();
    let ctrl_out = through_pipeline(&mut p, &inputs)?;
    let ctrl_us = t.elapsed().as_secs_f64() * 1e6 / inputs.len() as f64;
    let after = p.stats();
    let image_overhead = (after.controller_overhead_ns - before.controller_overhead_ns) as f64
        / (after.stage_steps - before.stage_steps).max(1) as f64;
    let assignment = p.assignment();
    let specs: Vec<serde_json::Value> = p
        .stage_specs()
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.name,
                "bytes_in": s.bytes_in,
                "bytes_out": s.bytes_out,
                "predicted_ns": s.time_ns,
            })
        })
        .collect();
    let replans: Vec<serde_json::Value> = p
        .replans()
        .iter()
        .map(|r| {
            serde_json::json!({
                "at_ms": r.at.as_secs_f64() * 1e3,
                "chunks_out": r.chunks_out,
                "from": r.from,
                "to": r.to,
                "from_period_us": r.from_period_ns / 1e3,
                "to_period_us": r.to_period_ns / 1e3,
                "decide_us": r.decide_ns as f64 / 1e3,
            })
        })
        .collect();
    drop(p);

    // Grayscale on each OpenCL device (the other stages where the planner
    // puts them), timed and checked against the same reference.
    let mut opencl = Vec::new();
    for unit in opencl_units(&rt) {
        let probe = demo_pipeline(&rt, &args.common, &overlay, None)?;
        let mut units = probe.assignment();
        drop(probe);
        units[0] = unit.clone();
        let mut p = demo_pipeline(&rt, &args.common, &overlay, Some(units))?;
        through_pipeline(&mut p, &inputs[..warm])?;
        let t = Instant::now();
        let out = through_pipeline(&mut p, &inputs)?;
        let us = t.elapsed().as_secs_f64() * 1e6 / inputs.len() as f64;
        let kind = p.units().iter().find(|u| u.name == unit).map(|u| u.kind);
        let profiled = |k: Option<hetsched_core::KindId>| {
            k.and_then(|k| p.stage_specs()[0].time_ns.get(k.index()).copied().flatten())
        };
        let cpu_kind = p
            .units()
            .iter()
            .find(|u| u.name.starts_with("cpu"))
            .map(|u| u.kind);
        opencl.push(serde_json::json!({
            "unit": unit,
            "assignment": p.assignment(),
            "us_per_chunk": us,
            "grayscale_profiled_us": profiled(kind).map(|ns| ns / 1e3),
            "grayscale_cpu_profiled_us": profiled(cpu_kind).map(|ns| ns / 1e3),
            "outputs_verified": out == expected,
        }));
    }
    let noop_overhead = overhead(&rt, args.overhead_chunks.max(1), usize::MAX)?;
    let noop_overhead_one_lane = overhead(&rt, args.overhead_chunks.max(1), 1)?;

    let verified = naive_out == expected
        && ctrl_out == expected
        && opencl.iter().all(|o| o["outputs_verified"] == true);
    let report = serde_json::json!({
        "chunks": args.chunks,
        "image": format!("{side}x{side} rgba"),
        "chunk_bytes": side * side * 4,
        "stages": specs,
        "assignment": assignment,
        "units": rt.units().iter().map(|u| u.name.clone()).collect::<Vec<_>>(),
        "controller_us_per_chunk": ctrl_us,
        "naive_us_per_chunk": naive_us,
        "speedup": naive_us / ctrl_us,
        "controller_overhead_ns_per_stage_step": noop_overhead,
        "controller_overhead_one_lane_ns_per_stage_step": noop_overhead_one_lane,
        "image_controller_overhead_ns_per_stage_step": image_overhead,
        "outputs_verified": verified,
        "replans": after.replans - before.replans,
        "replan_checks": after.replan_checks - before.replan_checks,
        "replan_check_us_per_check": (after.replan_check_ns - before.replan_check_ns) as f64
            / 1e3
            / (after.replan_checks - before.replan_checks).max(1) as f64,
        "replan_events": replans,
        "opencl": opencl,
    });
    if args.json {
        println!("{report}");
    } else {
        println!(
            "{} chunks of {side}x{side} RGBA, stages on {}",
            args.chunks,
            assignment.join(" -> ")
        );
        println!(
            "controller: {ctrl_us:.1} us/chunk   naive loop: {naive_us:.1} us/chunk   ({:.2}x)",
            naive_us / ctrl_us
        );
        println!(
            "controller overhead: {noop_overhead:.0} ns per stage step (no-op stages; {noop_overhead_one_lane:.0} ns on one lane), {image_overhead:.0} ns (image stages)"
        );
        println!(
            "re-plans during the run: {} ({} checks)",
            after.replans - before.replans,
            after.replan_checks - before.replan_checks
        );
        for o in &opencl {
            println!(
                "grayscale on {}: {:.1} us/chunk through the pipeline ({})",
                o["unit"].as_str().unwrap_or("?"),
                o["us_per_chunk"].as_f64().unwrap_or(f64::NAN),
                o["assignment"]
            );
        }
        println!("outputs verified against the reference: {verified}");
    }
    if !verified {
        bail!("outputs differ from the reference implementation");
    }
    Ok(())
}

fn show(args: ShowArgs) -> Result<()> {
    let side = args.common.side.max(1);
    let rt = runtime(&args.common)?;
    let overlay = Arc::new(image(side, 0xA11CE));
    let p = demo_pipeline(&rt, &args.common, &overlay, None)?;
    let table = p.table(args.chunks.max(1));
    if args.json {
        println!("{}", serde_json::to_string(&table)?);
    } else {
        print!("{table}");
    }
    Ok(())
}

fn work(v: &[u64], rounds: u32) -> Vec<u64> {
    v.iter()
        .map(|&x| {
            let mut x = x;
            for _ in 0..rounds {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
            }
            x
        })
        .collect()
}

fn scale(args: ScaleArgs) -> Result<()> {
    let common = CommonArgs {
        side: 1,
        cpu_lanes: usize::MAX,
        config: None,
    };
    let rt = runtime(&common)?;
    let chunks = args.chunks.max(1);
    let rounds = args.work;
    let inputs: Vec<Vec<u64>> = (0..chunks as u64).map(|k| vec![k; 256]).collect();
    let mut rows = Vec::new();
    for &n in &args.stages {
        let n = n.max(1);
        let expected: Vec<Vec<u64>> = inputs
            .iter()
            .map(|v| (0..n).fold(v.clone(), |x, _| work(&x, rounds)))
            .collect();
        let tasks: Vec<Task<Vec<u64>, Vec<u64>>> = (0..n)
            .map(|i| {
                Task::new(format!("pipeline-scale-{i}")).cpu(move |v: &Vec<u64>| work(v, rounds))
            })
            .collect();
        let run_naive = |inputs: &[Vec<u64>]| -> Result<Vec<Vec<u64>>> {
            let mut out = Vec::new();
            for v in inputs {
                let mut x = v.clone();
                for t in &tasks {
                    x = rt.accelerate(t, x, Mode::Sync)?.wait()?;
                }
                out.push(x);
            }
            Ok(out)
        };
        run_naive(&inputs[..inputs.len().min(8)])?;
        let t = Instant::now();
        let naive_out = run_naive(&inputs)?;
        let naive_us = t.elapsed().as_secs_f64() * 1e6 / chunks as f64;
        for &lanes in &args.lanes {
            let mut b = PipelineBuilder::new("scale").cpu_lanes(lanes.max(1));
            for i in 0..n {
                b = b.stage(Stage::new(format!("s{i}")).cpu(move |v: Vec<u64>| work(&v, rounds)));
            }
            let mut p = b.build(&rt, &inputs[0])?;
            let feeder = p.feeder()?;
            let t = Instant::now();
            let out: Result<Vec<Vec<u64>>> = std::thread::scope(|scope| {
                scope.spawn(|| {
                    for v in &inputs {
                        if feeder.push(v.clone()).is_err() {
                            return;
                        }
                    }
                });
                let mut out = Vec::new();
                for _ in 0..chunks {
                    out.push(p.pull().context("the pipeline closed early")??);
                }
                Ok(out)
            });
            drop(feeder);
            let out = out?;
            let ctrl_us = t.elapsed().as_secs_f64() * 1e6 / chunks as f64;
            let stats = p.stats();
            let used: std::collections::BTreeSet<String> = p.assignment().into_iter().collect();
            let stage_us: f64 = p
                .stage_specs()
                .iter()
                .filter_map(|s| s.time_ns.iter().flatten().next().copied())
                .sum::<f64>()
                / 1e3;
            rows.push(serde_json::json!({
                "stages": n,
                "lane_limit": lanes,
                "lanes_used": used.len(),
                "profiled_stage_us_per_chunk": stage_us,
                "controller_us_per_chunk": ctrl_us,
                "naive_us_per_chunk": naive_us,
                "speedup": naive_us / ctrl_us,
                "controller_overhead_ns_per_stage_step": stats.overhead_ns_per_stage_step(),
                "outputs_verified": out == expected && naive_out == expected,
            }));
        }
    }
    if args.json {
        println!("{}", serde_json::Value::Array(rows.clone()));
    } else {
        println!(
            "stages lanes  work_us  controller_us  naive_us  speedup  overhead_ns/step  verified"
        );
        for r in &rows {
            println!(
                "{:>6} {:>5} {:>8.1} {:>14.1} {:>9.1} {:>8.2} {:>17.0}  {}",
                r["stages"],
                r["lanes_used"],
                r["profiled_stage_us_per_chunk"].as_f64().unwrap_or(0.0),
                r["controller_us_per_chunk"].as_f64().unwrap_or(0.0),
                r["naive_us_per_chunk"].as_f64().unwrap_or(0.0),
                r["speedup"].as_f64().unwrap_or(0.0),
                r["controller_overhead_ns_per_stage_step"]
                    .as_f64()
                    .unwrap_or(0.0),
                r["outputs_verified"]
            );
        }
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, scale_svg(&rows)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if rows.iter().any(|r| r["outputs_verified"] != true) {
        bail!("outputs differ from the reference");
    }
    Ok(())
}

/// µs per chunk against stages: one line per lane limit for the
/// controller, one for the naive loop (the same for every lane limit).
fn scale_svg(rows: &[serde_json::Value]) -> Result<String> {
    use plotters::prelude::*;
    let num = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    let max_stages = rows.iter().map(|r| num(r, "stages")).fold(1.0, f64::max);
    let top = rows
        .iter()
        .flat_map(|r| {
            [
                num(r, "controller_us_per_chunk"),
                num(r, "naive_us_per_chunk"),
            ]
        })
        .filter(|v| v.is_finite())
        .fold(1.0, f64::max);
    let mut lane_limits: Vec<u64> = rows
        .iter()
        .filter_map(|r| r["lane_limit"].as_u64())
        .collect();
    lane_limits.sort_unstable();
    lane_limits.dedup();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 440)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "pipeline: µs per chunk by number of stages",
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(0.5..max_stages + 0.5, 0.0..top * 1.15)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        chart
            .configure_mesh()
            .x_desc("stages")
            .y_desc("µs per chunk")
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let mut series: Vec<(String, Vec<(f64, f64)>)> = lane_limits
            .iter()
            .map(|&l| {
                let pts = rows
                    .iter()
                    .filter(|r| r["lane_limit"].as_u64() == Some(l))
                    .map(|r| (num(r, "stages"), num(r, "controller_us_per_chunk")))
                    .collect();
                (format!("controller, up to {l} lane(s)"), pts)
            })
            .collect();
        let first = lane_limits.first().copied();
        series.push((
            "naive loop".into(),
            rows.iter()
                .filter(|r| r["lane_limit"].as_u64() == first)
                .map(|r| (num(r, "stages"), num(r, "naive_us_per_chunk")))
                .collect(),
        ));
        for (i, (name, pts)) in series.into_iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(pts.clone(), colour.stroke_width(2)))
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 14, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, colour.filled())))
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        root.present().map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_match_the_reference() {
        let overlay = image(16, 7);
        for seed in 0..4 {
            let img = image(16, seed);
            assert_eq!(
                blend(&sepia(&grayscale(&img)), &overlay),
                reference(&img, &overlay)
            );
        }
    }
}
