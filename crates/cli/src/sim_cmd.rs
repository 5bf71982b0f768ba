//! `hetsched sim`: the simulator's commands.

use crate::write_out;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use hetsched_sim::balance::{self, BalanceReport};
use hetsched_sim::output::versioned;
use hetsched_sim::pegasus::{self, PegasusReport};
use hetsched_sim::report::ScenarioReport;
use hetsched_sim::{catalog, output, random_mix, run};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum SimCommand {
    /// List the built-in scenarios.
    List,
    /// Run one scenario (a built-in name or a TOML file) and print its table.
    Run(RunArgs),
    /// Run every built-in scenario.
    All(AllArgs),
    /// Write a scenario of random applications on one CPU and GPUs of a
    /// few kinds (ranges in docs/sim.md, "Random mixes") to stdout.
    Random(RandomArgs),
}

#[derive(Args)]
pub struct RandomArgs {
    /// Applications in the mix.
    #[arg(long)]
    apps: u32,
    /// GPUs of the machine (dealt to the kinds in turn).
    #[arg(long)]
    gpus: u32,
    /// GPU kinds (each its own speed and copy bandwidth).
    #[arg(long, default_value_t = 2)]
    kinds: u32,
    /// Random seed: the same arguments give the same file.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulated seconds measured, after the warm-up (default: 5 up to 32
    /// applications, 5 per 32 above).
    #[arg(long)]
    duration_s: Option<f64>,
    /// Simulated seconds of warm-up (default: 1 up to 32 applications, 10
    /// per 128 above).
    #[arg(long)]
    warmup_s: Option<f64>,
}

#[derive(Args)]
pub struct RunArgs {
    /// Built-in scenario name (see `hetsched sim list`) or path to a scenario file.
    scenario: String,
    #[command(flatten)]
    common: CommonArgs,
    /// Print one JSON object to stdout instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct AllArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Print one JSON array of reports to stdout instead of tables.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct CommonArgs {
    /// Random seed: the same seed gives bit-for-bit the same results.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write CSV, JSON and SVG plots into this directory (one sub-directory
    /// per scenario for `sim all`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Make every placement prediction wrong by up to ± this fraction
    /// (uniform, per decision and unit kind), overriding the scenario's
    /// `model_error`; task-placement scenarios only.
    #[arg(long, value_name = "FRACTION")]
    model_error: Option<f64>,
    /// Replayed events hetsched-pf's coordinator may spend on a solve's
    /// optional candidates (default: the scenario's
    /// `replay_events_per_solve`, else the coordinator's, which bounds a
    /// solve at 32 applications).
    #[arg(long, value_name = "EVENTS")]
    replay_events: Option<u64>,
    /// Replayed events per slice of hetsched-pf's pick, one slice per
    /// view refresh, as the daemon spreads its picks (the daemon's default
    /// is 80000; 0: every pick whole inside one refresh, at no simulated
    /// time; default: the scenario's `pick_slice_events`, else 0).
    #[arg(long, value_name = "EVENTS")]
    pick_slice_events: Option<u64>,
}

pub fn run_command(cmd: SimCommand) -> Result<()> {
    match cmd {
        SimCommand::List => list(),
        SimCommand::Run(args) => {
            let report = simulate(&args.scenario, &args.common)?;
            if args.json {
                write_out(&(report.to_json()? + "\n"))
            } else {
                write_out(&report.render_table())
            }
        }
        SimCommand::Random(args) => write_out(&random_mix::generate(&random_mix::MixSpec {
            apps: args.apps,
            gpus: args.gpus,
            kinds: args.kinds,
            seed: args.seed,
            duration_s: args.duration_s,
            warmup_s: args.warmup_s,
        })?),
        SimCommand::All(args) => {
            let mut reports = Vec::new();
            let names = catalog::BUILTIN
                .iter()
                .map(|(n, _)| *n)
                .chain(balance::SCENARIOS.iter().map(|(n, _)| *n))
                .chain(pegasus::SCENARIOS.iter().map(|(n, _)| *n));
            for name in names {
                let common = CommonArgs {
                    seed: args.common.seed,
                    out: args.common.out.as_ref().map(|d| d.join(name)),
                    // Thread-balance and Pegasus scenarios place no tasks.
                    model_error: args
                        .common
                        .model_error
                        .filter(|_| catalog::BUILTIN.iter().any(|(n, _)| *n == name)),
                    replay_events: args.common.replay_events,
                    pick_slice_events: args.common.pick_slice_events,
                };
                let report = simulate(name, &common)?;
                if !args.json {
                    write_out(&(report.render_table() + "\n"))?;
                }
                reports.push(report.to_value()?);
            }
            if args.json {
                write_out(&(serde_json::to_string_pretty(&reports)? + "\n"))?;
            }
            Ok(())
        }
    }
}

/// The built-in scenarios, one a line; written at once, so a reader that
/// stops early (`sim list | head -1`) ends it quietly.
fn list() -> Result<()> {
    let mut out = String::new();
    for (name, text) in catalog::BUILTIN {
        let sc = hetsched_sim::scenario::parse(name, text)?;
        let _ = writeln!(out, "{name:<24} {}", sc.description);
    }
    for (name, description) in balance::SCENARIOS {
        let _ = writeln!(out, "{name:<24} {description}");
    }
    for (name, description) in pegasus::SCENARIOS {
        let _ = writeln!(out, "{name:<24} {description}");
    }
    write_out(&out)
}

/// A finished simulation: a task-placement scenario (TOML), a
/// thread-balance one (built in, with energy figures) or a Pegasus
/// accelerator-backend one (built in, with call latencies).
enum Simulated {
    Tasks(ScenarioReport),
    Threads(BalanceReport),
    Backend(PegasusReport),
}

impl Simulated {
    fn to_value(&self) -> Result<serde_json::Value> {
        Ok(match self {
            Simulated::Tasks(r) => versioned(r)?,
            Simulated::Threads(r) => versioned(r)?,
            Simulated::Backend(r) => versioned(r)?,
        })
    }

    fn to_json(&self) -> Result<String> {
        Ok(serde_json::to_string_pretty(&self.to_value()?)?)
    }

    fn render_table(&self) -> String {
        match self {
            Simulated::Tasks(r) => output::render_table(r),
            Simulated::Threads(r) => format!(
                "{}\n{}",
                output::render_table(&r.to_scenario_report()),
                r.render_energy_table()
            ),
            Simulated::Backend(r) => r.render_table(),
        }
    }
}

/// Loads and runs a scenario, with a progress bar per policy on a terminal.
fn simulate(name: &str, common: &CommonArgs) -> Result<Simulated> {
    if common.model_error.is_some() && (balance::is_builtin(name) || pegasus::is_pegasus(name)) {
        bail!("--model-error applies to task-placement scenarios; {name} places no tasks");
    }
    if balance::is_builtin(name) {
        return simulate_threads(name, common).map(Simulated::Threads);
    }
    if pegasus::is_pegasus(name) {
        let report = pegasus::simulate(name, common.seed).expect("a built-in Pegasus scenario");
        if let Some(dir) = &common.out {
            for path in report
                .write_outputs(dir)
                .with_context(|| format!("writing results to {}", dir.display()))?
            {
                eprintln!("wrote {}", path.display());
            }
        }
        return Ok(Simulated::Backend(report));
    }
    simulate_tasks(name, common).map(Simulated::Tasks)
}

/// Progress bars, one per policy, drawn only on a terminal.
struct Bars {
    bars: MultiProgress,
    style: ProgressStyle,
    open: BTreeMap<String, ProgressBar>,
    scenario: String,
}

impl Bars {
    fn new(scenario: &str) -> Self {
        Bars {
            bars: MultiProgress::with_draw_target(if std::io::stderr().is_terminal() {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::hidden()
            }),
            style: ProgressStyle::with_template("{prefix:>24} [{bar:40}] {percent:>3}%")
                .expect("static template")
                .progress_chars("=> "),
            open: BTreeMap::new(),
            scenario: scenario.to_string(),
        }
    }

    fn update(&mut self, policy: &str, fraction: f64) {
        let bar = self.open.entry(policy.to_string()).or_insert_with(|| {
            let b = self.bars.add(ProgressBar::new(1000));
            b.set_style(self.style.clone());
            b.set_prefix(format!("{} {policy}", self.scenario));
            b
        });
        bar.set_position((fraction * 1000.0) as u64);
        if fraction >= 1.0 {
            bar.finish();
        }
    }
}

/// Runs a thread-balance scenario; `--out` gets the common files, with
/// `report.json` carrying the energy fields too.
fn simulate_threads(name: &str, common: &CommonArgs) -> Result<BalanceReport> {
    let mut bars = Bars::new(name);
    let report = balance::run(name, common.seed, &mut |p, f| bars.update(p, f))
        .with_context(|| format!("{name} is not a thread-balance scenario"))?;
    bars.bars.clear().ok();
    if let Some(dir) = &common.out {
        let written = output::write_outputs(&report.to_scenario_report(), dir)
            .with_context(|| format!("writing results to {}", dir.display()))?;
        let json = dir.join(output::REPORT_JSON);
        std::fs::write(
            &json,
            serde_json::to_string_pretty(&versioned(&report)?)? + "\n",
        )
        .with_context(|| format!("writing {}", json.display()))?;
        for path in written {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(report)
}

/// Loads and runs a task-placement scenario (built-in or a TOML file).
fn simulate_tasks(name: &str, common: &CommonArgs) -> Result<ScenarioReport> {
    let mut sc = match catalog::load(name) {
        Ok(sc) => sc,
        Err(e) => bail!("{e}"),
    };
    if let Some(error) = common.model_error {
        if !(0.0..1.0).contains(&error) {
            bail!("--model-error must be in [0, 1) (a fraction: 0.25 is ±25 %); got {error}");
        }
        sc.model_error = error;
    }
    if let Some(events) = common.replay_events {
        if events == 0 {
            bail!("--replay-events must be positive (0 would judge no optional candidate)");
        }
        sc.replay_events_per_solve = Some(events);
    }
    if let Some(events) = common.pick_slice_events {
        sc.pick_slice_events = Some(events);
    }
    let bars = MultiProgress::with_draw_target(if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let style = ProgressStyle::with_template("{prefix:>24} [{bar:40}] {percent:>3}%")
        .expect("static template")
        .progress_chars("=> ");
    let mut open: BTreeMap<String, ProgressBar> = BTreeMap::new();
    let report = run::run_scenario(&sc, common.seed, &mut |policy, fraction| {
        let bar = open.entry(policy.to_string()).or_insert_with(|| {
            let b = bars.add(ProgressBar::new(1000));
            b.set_style(style.clone());
            b.set_prefix(format!("{} {policy}", sc.name));
            b
        });
        bar.set_position((fraction * 1000.0) as u64);
        if fraction >= 1.0 {
            bar.finish();
        }
    });
    bars.clear().ok();
    if let Some(dir) = &common.out {
        let written = output::write_outputs(&report, dir)
            .with_context(|| format!("writing results to {}", dir.display()))?;
        for path in written {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(report)
}
