//! One demo application process (`hetsched demo-app`): a closed loop that
//! keeps a few calls in flight through the runtime for a fixed time,
//! checks every result, and prints what happened as one JSON line.

use super::apps::{self, AppSpec, INPUTS};
use anyhow::{Context, Result, bail};
use clap::Args;
use hetsched_runtime::{Handle, Mode, MonitorMode, Runtime, RuntimeOptions, Task};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct AppArgs {
    /// Which Table 3 workload (aes, lbm, dxt, lavamd, grep, histogram).
    #[arg(long)]
    pub app: String,
    /// `native` (its fastest unit only), `hetsched` (placed by the runtime)
    /// or `hetsched-pf` (the same, following the daemon's targets).
    #[arg(long)]
    pub policy: String,
    #[arg(long, value_parser = crate::values::seconds, default_value_t = 8.0)]
    pub seconds: f64,
    /// Calls kept in flight.
    #[arg(long, default_value_t = 2)]
    pub inflight: usize,
    /// The daemon's socket.
    #[arg(long)]
    pub socket: PathBuf,
    /// Where task models persist between runs.
    #[arg(long)]
    pub model_dir: PathBuf,
}

/// What one app process reports.
#[derive(Debug, Serialize, Deserialize)]
pub struct AppReport {
    pub app: String,
    pub policy: String,
    pub units: Vec<String>,
    /// Per finished call: seconds since the app started, unit index,
    /// turnaround in ms.
    pub calls: Vec<(f64, usize, f64)>,
    pub checked: u64,
    pub wrong: u64,
    pub failed: u64,
}

struct Call {
    data: Arc<Vec<u8>>,
}

fn build_task(spec: AppSpec, policy: &str) -> Result<Task<Call, u64>> {
    let kernel = spec.kernel;
    let (big, wimpy, cpu) = (spec.big(), spec.wimpy(), spec.cpu());
    let (bytes_in, bytes_out) = (spec.bytes_in, spec.bytes_out);
    let task = Task::new(spec.name)
        .emulated(
            "gpu-big",
            move |_: &Call| big,
            move |c: &Call| kernel(&c.data),
        )
        .sizes(move |_| (bytes_in, bytes_out));
    match policy {
        "native" => Ok(task),
        // hetsched-pf runs the same app; the daemon's coordination differs.
        "hetsched" | "hetsched-pf" => Ok(task
            .emulated(
                "gpu-wimpy",
                move |_: &Call| wimpy,
                move |c: &Call| kernel(&c.data),
            )
            .cpu(move |c: &Call| apps::run_on_cpu(kernel, &c.data, cpu))),
        other => bail!("unknown demo policy {other:?}: use native, hetsched or hetsched-pf"),
    }
}

pub fn run(args: AppArgs) -> Result<()> {
    let spec = apps::find(&args.app).with_context(|| format!("unknown demo app {:?}", args.app))?;
    let inputs: Vec<Arc<Vec<u8>>> = (0..INPUTS)
        .map(|i| Arc::new(apps::input(spec.name, i)))
        .collect();
    let expected: Vec<u64> = inputs.iter().map(|d| (spec.kernel)(d)).collect();
    let task = build_task(spec, &args.policy)?;
    let opts = RuntimeOptions::new(format!("demo-{}", spec.name))
        .map_err(anyhow::Error::msg)?
        .monitor(MonitorMode::Daemon)
        .socket(&args.socket)
        .model_dir(&args.model_dir)
        // What the native policy runs on: coordination measures the floor
        // against it.
        .native_unit("gpu-big");
    let rt = Runtime::with_options(opts).context("demo app cannot connect")?;
    let units: Vec<String> = rt.units().iter().map(|u| u.name.clone()).collect();
    let mut report = AppReport {
        app: spec.name.into(),
        policy: args.policy.clone(),
        units: units.clone(),
        calls: Vec::new(),
        checked: 0,
        wrong: 0,
        failed: 0,
    };
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(args.seconds);
    let mut inflight: VecDeque<(usize, Handle<u64>)> = VecDeque::new();
    let mut next = 0usize;
    loop {
        while inflight.len() < args.inflight.max(1) && Instant::now() < end {
            let input = next % INPUTS;
            next += 1;
            let call = Call {
                data: Arc::clone(&inputs[input]),
            };
            inflight.push_back((input, rt.accelerate(&task, call, Mode::Async)?));
        }
        let Some((input, handle)) = inflight.pop_front() else {
            break;
        };
        match handle.wait_with_info() {
            Ok((got, info)) => {
                report.checked += 1;
                if got != expected[input] {
                    report.wrong += 1;
                }
                report.calls.push((
                    start.elapsed().as_secs_f64(),
                    info.unit.index(),
                    info.turnaround.as_secs_f64() * 1e3,
                ));
            }
            Err(e) => {
                eprintln!("demo {}: {e}", spec.name);
                report.failed += 1;
            }
        }
    }
    drop(rt);
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
