//! `hetsched balance`: the thread balancer for unmodified programs, and
//! `hetsched balance calibrate`, which fits its predictor.

use crate::balance_stop::Stop;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use hetsched_balance::balancer::{Balancer, EpochReport};
use hetsched_balance::calibrate::{self, CalibrationReport};
use hetsched_balance::config::{BalanceConfig, ObjectiveName, PolicyName};
use hetsched_balance::counters::Availability;
use hetsched_balance::machine::CoreMap;
use hetsched_balance::restore::recover;
use hetsched_balance::targets::Target;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BalanceArgs {
    #[command(subcommand)]
    command: Option<BalanceCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum BalanceCommand {
    /// Run microbenchmarks on every core kind and fit the cross-kind
    /// throughput predictor (SmartBalance Eq. 8).
    Calibrate(CalibrateArgs),
}

#[derive(Args)]
struct RunArgs {
    /// Configuration file (TOML; see docs/balance.md).
    #[arg(long)]
    config: Option<PathBuf>,
    /// linux-default, gts, smartbalance or kinship (overrides the config).
    #[arg(long)]
    policy: Option<String>,
    /// ips-per-watt or throughput (overrides the config).
    #[arg(long)]
    objective: Option<String>,
    /// Epoch length in ms (overrides the config).
    #[arg(long)]
    epoch_ms: Option<u64>,
    /// Print the allocation and predicted gain instead of applying it.
    #[arg(long)]
    dry_run: bool,
    /// One epoch, then exit.
    #[arg(long)]
    once: bool,
    /// Stop after this many epochs (default: run until interrupted).
    #[arg(long)]
    epochs: Option<u64>,
    /// Balance the threads of these processes (comma-separated pids).
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["cgroup", "user", "all"])]
    pids: Vec<u32>,
    /// Balance the threads of this cgroup directory.
    #[arg(long, conflicts_with_all = ["user", "all"])]
    cgroup: Option<PathBuf>,
    /// Balance the threads of the processes this user (name or uid) runs.
    #[arg(long, conflicts_with = "all")]
    user: Option<String>,
    /// Balance every user thread on the machine (never the default).
    #[arg(long)]
    all: bool,
    /// Journal of the threads the balancer changed, restored on exit and,
    /// after a crash, on the next start (overrides the config's
    /// `state_file`; default /run/hetsched/balance-state.json for root).
    #[arg(long)]
    state_file: Option<PathBuf>,
    /// Restore what the state file lists (a balancer that crashed left
    /// it), remove it and exit.
    #[arg(long, conflicts_with_all = ["dry_run", "once", "epochs"])]
    restore: bool,
    /// One JSON object per epoch instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CalibrateArgs {
    #[arg(long)]
    config: Option<PathBuf>,
    /// Wall time per kernel per kind, ms.
    #[arg(long, default_value_t = 200)]
    ms_per_kernel: u64,
    /// Where to store the model (default: the config's `model`, or
    /// $XDG_CACHE_HOME/hetsched/balance-model.json).
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

fn load_config(path: Option<&Path>) -> Result<BalanceConfig> {
    Ok(match path {
        Some(p) => BalanceConfig::load(p)?,
        None => BalanceConfig::default(),
    })
}

pub fn run(args: BalanceArgs) -> Result<()> {
    match args.command {
        Some(BalanceCommand::Calibrate(c)) => calibrate_cmd(c),
        None => balance(args.run),
    }
}

fn balance(args: RunArgs) -> Result<()> {
    let mut cfg = load_config(args.config.as_deref())?;
    if let Some(p) = &args.policy {
        cfg.policy = PolicyName::parse(p).with_context(|| {
            format!("unknown policy `{p}`: use linux-default, gts, smartbalance or kinship")
        })?;
    }
    if let Some(o) = &args.objective {
        cfg.objective = match o.as_str() {
            "ips-per-watt" => ObjectiveName::IpsPerWatt,
            "throughput" => ObjectiveName::Throughput,
            _ => bail!("unknown objective `{o}`: use ips-per-watt or throughput"),
        };
    }
    if let Some(ms) = args.epoch_ms {
        cfg.epoch_ms = ms;
    }
    if let Some(p) = &args.state_file {
        cfg.state_file = Some(p.clone());
    }
    cfg.validate()?;
    let state = cfg.state_path();
    if args.restore {
        return restore_only(&state);
    }
    let target = target_of(&args)?;
    // The first change comes after the handlers are in: a signal from here
    // on ends the loop and the restore runs.
    let stop = Stop::on_signals()?;
    if args.dry_run {
        if state.exists() {
            eprintln!(
                "hetsched balance: {} lists threads a previous balancer changed; a dry run \
                 leaves them (run without --dry-run, or with --restore, to restore them)",
                state.display()
            );
        }
    } else if let Some(report) = recover(&state)? {
        eprintln!(
            "hetsched balance: a previous balancer did not exit cleanly; from {}: {}",
            state.display(),
            report.summary()
        );
    }
    let map = if args.dry_run {
        // A dry run changes nothing, cgroups included.
        let mut topo = hetsched_platform::cpu::discover_cpus();
        hetsched_platform::slow_cores::apply_slow_cores(&mut topo, &cfg.slow_cores)?;
        CoreMap::from_topology(&topo, &cfg)?
    } else {
        CoreMap::discover(&cfg)?
    };
    let avail = match Availability::probe() {
        Ok(a) => Some(a),
        Err(e) => {
            eprintln!("hetsched balance: {e}; sensing CPU time from /proc only");
            None
        }
    };
    let model = cfg.model_path().and_then(|p| {
        if !p.exists() {
            return None;
        }
        calibrate::load_model(&p)
            .map_err(|e| eprintln!("hetsched balance: ignoring the stored predictor: {e}"))
            .ok()
    });
    let epoch = Duration::from_millis(cfg.epoch_ms);
    let mut balancer = Balancer::new(cfg, map, target, Path::new("/proc"), avail, model);
    for n in &balancer.notes {
        eprintln!("hetsched balance: {n}");
    }
    if !balancer.map().is_asymmetric() {
        eprintln!(
            "hetsched balance: this machine has one core kind and no capability differences: \
             every allocation is as good as Linux's, nothing to balance (declare [[slow_cores]] \
             or [[core_caps]] in the config to emulate asymmetry)"
        );
    }
    if !args.dry_run {
        balancer.keep_state_in(&state);
    }
    let limit = if args.once { Some(1) } else { args.epochs };
    let result = run_epochs(&mut balancer, &args, limit, epoch, &stop);
    // Whatever ended the loop (the epochs, a signal, an error), every
    // thread the balancer changed goes back as it was.
    if !args.dry_run {
        match balancer.restore() {
            Ok(r) => eprintln!("hetsched balance: on exit, {}", r.summary()),
            Err(e) => {
                eprintln!("hetsched balance: {e}");
                result?;
                return Err(e.into());
            }
        }
    }
    if let Some(sig) = stop.signal() {
        eprintln!("hetsched balance: stopped by signal {sig}");
    }
    result
}

/// The epoch loop, until `limit` epochs have run or a signal stops it.
fn run_epochs(
    balancer: &mut Balancer,
    args: &RunArgs,
    limit: Option<u64>,
    epoch: Duration,
    stop: &Stop,
) -> Result<()> {
    balancer.prime()?;
    let mut last = Instant::now();
    let mut done = 0u64;
    while limit.is_none_or(|l| done < l) {
        if !stop.pause(epoch.saturating_sub(last.elapsed())) {
            break;
        }
        let window = last.elapsed();
        last = Instant::now();
        let report = balancer.step(window.as_nanos() as u64, args.dry_run)?;
        for n in &report.notes {
            eprintln!("hetsched balance: {n}");
        }
        if args.json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            print_report(&report, balancer.map());
        }
        // Seen at once by whoever follows the output (a test, a pipe).
        std::io::stdout().flush()?;
        done += 1;
    }
    Ok(())
}

/// The threads to balance: exactly one of `--pids`, `--cgroup`, `--user`
/// and `--all` (clap refuses two).
fn target_of(args: &RunArgs) -> Result<Target> {
    Ok(if let Some(dir) = &args.cgroup {
        Target::Cgroup(dir.clone())
    } else if !args.pids.is_empty() {
        Target::Pids(args.pids.clone())
    } else if let Some(u) = &args.user {
        Target::user(u)?
    } else if args.all {
        Target::All
    } else {
        bail!(
            "no threads to balance: name them with --pids, --cgroup or --user, or ask for every user thread with --all"
        )
    })
}

/// `--restore`: what a crashed balancer left, put back.
fn restore_only(state: &Path) -> Result<()> {
    match recover(state)? {
        Some(r) => eprintln!(
            "hetsched balance: from {}: {}",
            state.display(),
            r.summary()
        ),
        None => eprintln!(
            "hetsched balance: no state file at {}: nothing to restore",
            state.display()
        ),
    }
    Ok(())
}

fn print_report(r: &EpochReport, map: &CoreMap) {
    let kind_of = |cpu: usize| {
        map.core_by_os_index(cpu)
            .map_or("?", |c| map.kinds[map.cores[c].kind].name.as_str())
    };
    println!(
        "epoch {}: {} ({}), {} threads sensed, {} balanced, {} moves, predicted gain {:+.1} % \
         ({:.3e} → {:.3e}), decided in {:.0} µs",
        r.epoch,
        r.policy,
        r.objective,
        r.sensed,
        r.balanced,
        r.moves,
        r.predicted_gain * 100.0,
        r.value_now,
        r.value_next,
        r.decide_us
    );
    if r.threads.is_empty() {
        return;
    }
    println!(
        "  {:>8} {:>8} {:<16} {:>6} {:>14} {:>14} {:>10} {:>10} {:>7}  action",
        "pid", "tid", "name", "util", "cpu now", "cpu next", "Mips now", "Mips next", "faults"
    );
    for t in &r.threads {
        println!(
            "  {:>8} {:>8} {:<16} {:>5.0}% {:>14} {:>14} {:>10.0} {:>10.0} {:>7}  {}",
            t.pid,
            t.tid,
            t.comm,
            t.utilisation * 100.0,
            format!("{} ({})", t.cpu_now, kind_of(t.cpu_now)),
            format!("{} ({})", t.cpu_next, kind_of(t.cpu_next)),
            t.ips_now / 1e6,
            t.ips_next / 1e6,
            t.faults,
            t.action
        );
    }
}

fn calibrate_cmd(args: CalibrateArgs) -> Result<()> {
    let cfg = load_config(args.config.as_deref())?;
    let map = CoreMap::discover(&cfg)?;
    let avail = match Availability::probe() {
        Ok(a) => {
            eprintln!("hetsched balance calibrate: {}", a.summary());
            Some(a)
        }
        Err(e) => {
            eprintln!("hetsched balance calibrate: {e}");
            None
        }
    };
    let steps = hetsched_balance::kernels::KERNELS.len() * map.kinds.len();
    let bar = indicatif::ProgressBar::new(steps as u64);
    let report = calibrate::calibrate(
        &map,
        avail.as_ref(),
        Duration::from_millis(args.ms_per_kernel),
        |kernel, kind| {
            bar.set_message(format!("{kernel} on {kind}"));
            bar.inc(1);
        },
    )?;
    bar.finish_and_clear();
    if let Some(model) = &report.model {
        let out = args
            .out
            .clone()
            .or_else(|| cfg.model_path())
            .context("no place to store the model: pass --out")?;
        calibrate::save_model(&out, model)?;
        eprintln!(
            "hetsched balance calibrate: model written to {}",
            out.display()
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_calibration(&report, &map);
    }
    Ok(())
}

fn print_calibration(r: &CalibrationReport, map: &CoreMap) {
    println!("kind speed (work rate relative to the fastest kind, mean over kernels):");
    for (k, ratio) in map.kinds.iter().zip(&r.speed_ratio) {
        println!(
            "  {:<12} measured {:.3}  configured {:.3}",
            k.name, ratio, k.relative_speed
        );
    }
    if let Some(m) = &r.model {
        println!("predictor (leave-one-out error of predicted IPC):");
        for (from, row) in m.pairs.iter().enumerate() {
            for (to, p) in row.iter().enumerate() {
                if let Some(p) = p {
                    println!(
                        "  {} → {}: {}",
                        m.kinds[from],
                        m.kinds[to],
                        p.loo_error
                            .map_or("n/a".into(), |e| format!("{:.1} %", e * 100.0))
                    );
                }
            }
        }
        if let Some(e) = calibrate::mean_prediction_error(m) {
            println!("  mean: {:.1} % (SmartBalance reports 4.2 %)", e * 100.0);
        }
    }
    if r.power_fitted {
        println!(
            "power models fitted from RAPL (idle package {:.1} W):",
            r.idle_watts.unwrap_or(0.0)
        );
        if let Some(m) = &r.model {
            for (name, p) in m.kinds.iter().zip(&m.power) {
                println!(
                    "  {name:<12} {:.2} W per IPC + {:.2} W",
                    p.watts_per_ipc, p.static_watts
                );
            }
        }
    }
    for n in &r.notes {
        println!("note: {n}");
    }
}
