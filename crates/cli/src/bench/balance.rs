//! `hetsched bench balance`: the thread balancer on real worker processes
//! over an emulated big/little machine, policy against policy.
//!
//! CPU 0 is the big core; CPU 1 becomes a little core at `--little-speed`
//! of a core (CFS quota) without AES (a worker's AES unit done there costs
//! `--aes-penalty` units, as trap-and-emulate would). Each mix of worker
//! processes (`hetsched balance-work`) runs for `--seconds` under each
//! policy applied by the real balancer (pinning and cgroup moves). The
//! `linux-default` policy is the model of CFS's kind-blind load balancing
//! applied through the same mechanism: Linux itself cannot be measured
//! here, because it would not know that CPU 1 is slow — the quota follows
//! the threads the balancer moves, not the CPU.
//!
//! Throughput is the sum over workers of work done relative to the same
//! worker alone on the big core (so 1.0 = one big core's worth);
//! throughput per watt divides it by the mean power the kinds' power
//! models give the allocation (this machine has no RAPL).
//!
//! `hetsched bench balance-overhead` times the balancer's epoch step (sense,
//! decide, dry-run apply) over many threads on a synthetic 8-core map.

use anyhow::{Context, Result, bail};
use clap::Args;
use hetsched_balance::balancer::Balancer;
use hetsched_balance::config::{BalanceConfig, PolicyName};
use hetsched_balance::counters::Availability;
use hetsched_balance::kernels::Kernel;
use hetsched_balance::machine::CoreMap;
use hetsched_balance::targets::Target;
use hetsched_balance::work::{self, WorkSpec};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The hidden worker command.
#[derive(Args)]
pub struct WorkArgs {
    #[arg(long)]
    kernel: String,
    #[arg(long, default_value_t = 1.0)]
    duty: f64,
    #[arg(long, value_parser = crate::values::seconds)]
    seconds: f64,
    #[arg(long, value_delimiter = ',')]
    slow_cpus: Vec<usize>,
    #[arg(long, default_value_t = 6)]
    penalty: u32,
}

pub fn work(args: WorkArgs) -> Result<()> {
    let kernel = Kernel::by_name(&args.kernel)
        .with_context(|| format!("unknown kernel `{}`", args.kernel))?;
    if !(args.duty > 0.0 && args.duty <= 1.0) {
        bail!("--duty must be in (0, 1]");
    }
    // Name the thread after its kernel, so the balancer's hints (matched
    // on the thread name) can tell workers apart.
    let name: String = format!("w-{}", args.kernel).chars().take(15).collect();
    if let Ok(c) = std::ffi::CString::new(name) {
        let _ = rustix::thread::set_name(&c);
    }
    let units = work::run(
        &WorkSpec {
            kernel,
            duty: args.duty,
            slow_cpus: args.slow_cpus,
            penalty: args.penalty,
        },
        args.seconds,
    );
    println!("{units}");
    Ok(())
}

#[derive(Args)]
pub struct BalanceBenchArgs {
    /// Seconds per run.
    #[arg(long, value_parser = crate::values::seconds, default_value_t = 3.0)]
    seconds: f64,
    /// Runs per policy and mix (the median is reported). Runs alternate
    /// between two starting placements: worker i on CPU i % 2, then on
    /// CPU (i + 1) % 2.
    #[arg(long, default_value_t = 4)]
    runs: usize,
    /// Speed of the emulated little core (CPU 1).
    #[arg(long, default_value_t = 0.4)]
    little_speed: f64,
    /// Work multiplier of an AES unit on the little core.
    #[arg(long, default_value_t = 6)]
    aes_penalty: u32,
    /// Only these mixes (comma-separated).
    #[arg(long, value_delimiter = ',')]
    mixes: Vec<String>,
    /// Write JSON and an SVG plot here.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// `(kernel, duty)` per worker.
const MIXES: [(&str, &[(&str, f64)]); 4] = [
    ("cpu-io", &[("int-chain", 1.0), ("chase-1m", 0.2)]),
    ("aes-cpu", &[("aes-128", 1.0), ("int-chain", 1.0)]),
    (
        "mixed-4",
        &[
            ("aes-128", 1.0),
            ("int-chain", 1.0),
            ("chase-64m", 0.5),
            ("branchy", 0.2),
        ],
    ),
    (
        "io-heavy-3",
        &[
            ("float-chain", 1.0),
            ("stream-1m", 0.15),
            ("stream-1m", 0.15),
        ],
    ),
];

#[derive(Serialize, Clone)]
struct RunResult {
    throughput: f64,
    watts: f64,
    throughput_per_watt: f64,
    moves: usize,
}

#[derive(Serialize)]
struct MixResult {
    mix: String,
    /// Median per policy.
    policies: BTreeMap<String, RunResult>,
    /// Median throughput and throughput/W relative to linux-default.
    relative_throughput: BTreeMap<String, f64>,
    relative_throughput_per_watt: BTreeMap<String, f64>,
}

/// Starts a worker on `cpu`; [`release`] lets it run anywhere later.
fn spawn_worker(
    kernel: &str,
    duty: f64,
    seconds: f64,
    penalty: u32,
    cpu: usize,
) -> Result<std::process::Child> {
    Command::new("taskset")
        .args(["-c", &cpu.to_string()])
        .arg(std::env::current_exe()?)
        .args(["balance-work", "--kernel", kernel])
        .args([
            "--duty",
            &duty.to_string(),
            "--seconds",
            &seconds.to_string(),
        ])
        .args(["--slow-cpus", "1", "--penalty", &penalty.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .context("taskset is needed to place the workers")
}

/// Widens a (single-threaded) worker's affinity to CPUs 0 and 1: the set
/// the balancer may then use.
fn release(pid: u32) -> Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(0);
    set.set(1);
    rustix::thread::sched_setaffinity(rustix::process::Pid::from_raw(pid as i32), &set)
        .context("releasing a worker")?;
    Ok(())
}

fn collect(children: Vec<std::process::Child>) -> Result<Vec<f64>> {
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output()?;
            let text = String::from_utf8_lossy(&out.stdout);
            text.trim()
                .parse::<f64>()
                .with_context(|| format!("worker printed `{text}`"))
        })
        .collect()
}

/// Units per second of each kernel alone on the big core at its duty.
fn solo_rates(mix: &[(&str, f64)], seconds: f64, penalty: u32) -> Result<Vec<f64>> {
    let mut rates = Vec::new();
    for &(kernel, duty) in mix {
        // Pinned to CPU 0 for the whole run (never released): the AES
        // penalty of CPU 1 never applies.
        let child = spawn_worker(kernel, duty, seconds, penalty, 0)?;
        rates.push(collect(vec![child])?[0] / seconds);
    }
    Ok(rates)
}

/// One run: worker `i` starts on CPU `(i + offset) % 2`, then may run on
/// both; the balancer takes over from there.
fn one_run(
    cfg: &BalanceConfig,
    map: &CoreMap,
    mix: &[(&str, f64)],
    solo: &[f64],
    args: &BalanceBenchArgs,
    offset: usize,
) -> Result<RunResult> {
    let children: Vec<_> = mix
        .iter()
        .enumerate()
        .map(|(i, &(k, d))| spawn_worker(k, d, args.seconds, args.aes_penalty, (i + offset) % 2))
        .collect::<Result<_>>()?;
    std::thread::sleep(Duration::from_millis(30));
    for c in &children {
        release(c.id())?;
    }
    let pids = children.iter().map(|c| c.id()).collect();
    let mut b = Balancer::new(
        cfg.clone(),
        map.clone(),
        Target::Pids(pids),
        Path::new("/proc"),
        Availability::probe().ok(),
        None,
    );
    b.prime()?;
    let epoch = Duration::from_millis(cfg.epoch_ms);
    let end = Instant::now() + Duration::from_secs_f64((args.seconds - 0.05).max(0.0));
    let (mut watts, mut epochs, mut moves) = (0.0, 0u32, 0usize);
    let mut last = Instant::now();
    while Instant::now() + epoch < end {
        std::thread::sleep(epoch.saturating_sub(last.elapsed()));
        let window = last.elapsed();
        last = Instant::now();
        match b.step(window.as_nanos() as u64, false) {
            Ok(r) => {
                if r.balanced > 0 {
                    watts += r.model_watts;
                    epochs += 1;
                }
                moves += r.threads.iter().filter(|t| t.action == "moved").count();
            }
            Err(e) => eprintln!("epoch failed: {e}"),
        }
    }
    let units = collect(children)?;
    let throughput: f64 = units
        .iter()
        .zip(solo)
        .map(|(u, r)| u / (r * args.seconds))
        .sum();
    let watts = watts / f64::from(epochs.max(1));
    Ok(RunResult {
        throughput,
        watts,
        throughput_per_watt: throughput / watts.max(f64::MIN_POSITIVE),
        moves,
    })
}

/// Median of each figure over the runs (mean of the middle two for an
/// even count).
fn median_of(runs: &[RunResult]) -> RunResult {
    let med = |f: fn(&RunResult) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    RunResult {
        throughput: med(|r| r.throughput),
        watts: med(|r| r.watts),
        throughput_per_watt: med(|r| r.throughput_per_watt),
        moves: med(|r| r.moves as f64).round() as usize,
    }
}

pub fn balance(args: BalanceBenchArgs) -> Result<()> {
    if !rustix::process::getuid().is_root() {
        bail!("the experiment moves threads between cgroups: run it as root");
    }
    let cfg_text = format!(
        "epoch_ms = 60\nmin_epochs_between_moves = 2\n\
         [[slow_cores]]\ncpus = [1]\nspeed = {}\nkind = \"little\"\n\
         [[core_caps]]\ncpus = [1]\nwithout = [\"aes\", \"sha\"]\n\
         [[hints]]\ncomm = \"w-aes\"\ncategory = \"crypto\"\n",
        args.little_speed
    );
    let base = BalanceConfig::parse(&cfg_text)?;
    let map = CoreMap::discover(&base)?;
    if map.cores.len() < 2 {
        bail!("needs two CPUs");
    }
    let mut results = Vec::new();
    for (name, mix) in MIXES {
        if !args.mixes.is_empty() && !args.mixes.iter().any(|m| m == name) {
            continue;
        }
        eprintln!("mix {name}: solo rates on the big core …");
        let solo = solo_rates(mix, 1.0, args.aes_penalty)?;
        let mut policies = BTreeMap::new();
        for policy in PolicyName::ALL {
            let mut cfg = base.clone();
            cfg.policy = policy;
            let mut runs = Vec::new();
            for run in 0..args.runs {
                let r = one_run(&cfg, &map, mix, &solo, &args, run % 2)?;
                eprintln!(
                    "  {:<14} run {}: throughput {:.3}, {:.2} W, {} moves",
                    policy.name(),
                    run + 1,
                    r.throughput,
                    r.watts,
                    r.moves
                );
                runs.push(r);
            }
            policies.insert(policy.name().to_string(), median_of(&runs));
        }
        let base_r = policies["linux-default"].clone();
        let rel = |f: fn(&RunResult) -> f64| {
            policies
                .iter()
                .map(|(k, v)| (k.clone(), f(v) / f(&base_r).max(f64::MIN_POSITIVE)))
                .collect::<BTreeMap<_, _>>()
        };
        results.push(MixResult {
            mix: name.into(),
            relative_throughput: rel(|r| r.throughput),
            relative_throughput_per_watt: rel(|r| r.throughput_per_watt),
            policies,
        });
    }
    println!(
        "{:<12} {:>14} {:>14} {:>14} {:>14}   (throughput, then throughput/W, relative to linux-default; median of {} runs)",
        "mix", "linux-default", "gts", "smartbalance", "kinship", args.runs
    );
    for r in &results {
        for (label, m) in [
            ("thr", &r.relative_throughput),
            ("thr/W", &r.relative_throughput_per_watt),
        ] {
            println!(
                "{:<12} {:>14.2} {:>14.2} {:>14.2} {:>14.2}   {label}",
                r.mix, m["linux-default"], m["gts"], m["smartbalance"], m["kinship"]
            );
        }
    }
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)?;
        std::fs::write(
            out.join("balance-real.json"),
            serde_json::to_string_pretty(&results)?,
        )?;
        eprintln!("wrote {}", out.join("balance-real.json").display());
    }
    Ok(())
}

#[derive(Args)]
pub struct OverheadArgs {
    /// Cores of the synthetic map (half big, half little).
    #[arg(long, default_value_t = 8)]
    cores: usize,
    /// Busy threads to balance (this process's own).
    #[arg(long, default_value_t = 16)]
    threads: usize,
    #[arg(long, default_value_t = 60)]
    epoch_ms: u64,
    #[arg(long, default_value_t = 50)]
    epochs: usize,
    #[arg(long, default_value = "smartbalance")]
    policy: String,
}

/// Balancer step time on a synthetic map of `--cores` cores (sensing is
/// real: this process's threads; applying is a dry run, since the
/// synthetic CPUs do not exist).
pub fn overhead(args: OverheadArgs) -> Result<()> {
    let dir = tempfile::tempdir()?;
    // Half the cores report a lower capacity: two kinds.
    let half = args.cores / 2;
    hetsched_platform::cpu::write_synthetic_sysfs(dir.path(), args.cores, |cpu| {
        Some(if cpu < half { 1024 } else { 512 })
    })?;
    let topo = hetsched_platform::cpu::discover_cpus_from_sysfs(dir.path());
    let cfg = BalanceConfig {
        policy: PolicyName::parse(&args.policy).context("unknown policy")?,
        epoch_ms: args.epoch_ms,
        ..BalanceConfig::default()
    };
    let map = CoreMap::from_topology(&topo, &cfg)?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..args.threads)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                // Busy half the time, so every thread shows up with load.
                let mut x = i as u64 + 1;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_millis(2) {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    }
                    std::hint::black_box(x);
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        })
        .collect();
    let mut b = Balancer::new(
        cfg,
        map,
        Target::Pids(vec![std::process::id()]),
        Path::new("/proc"),
        Availability::probe().ok(),
        None,
    );
    b.prime()?;
    let epoch = Duration::from_millis(args.epoch_ms);
    let (mut steps, mut decides) = (Vec::new(), Vec::new());
    let mut balanced = 0;
    let mut last = Instant::now();
    for _ in 0..args.epochs {
        std::thread::sleep(epoch.saturating_sub(last.elapsed()));
        let window = last.elapsed();
        last = Instant::now();
        let r = b.step(window.as_nanos() as u64, true)?;
        steps.push(r.step_us);
        decides.push(r.decide_us);
        balanced = balanced.max(r.balanced);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        let _ = w.join();
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (step, decide) = (median(&mut steps), median(&mut decides));
    println!(
        "balancer step, {} cores, {} threads balanced, policy {}: median {:.0} µs (decide {:.0} µs) \
         = {:.2} % of a {} ms epoch",
        args.cores,
        balanced,
        args.policy,
        step,
        decide,
        step / (args.epoch_ms as f64 * 10.0),
        args.epoch_ms
    );
    Ok(())
}
