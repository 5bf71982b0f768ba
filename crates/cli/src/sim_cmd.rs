//! `hetsched sim`: the simulator's commands.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use hetsched_sim::report::ScenarioReport;
use hetsched_sim::{catalog, output, run};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
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
}

pub fn run_command(cmd: SimCommand) -> Result<()> {
    match cmd {
        SimCommand::List => list(),
        SimCommand::Run(args) => {
            let report = simulate(&args.scenario, &args.common)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", output::render_table(&report));
            }
            Ok(())
        }
        SimCommand::All(args) => {
            let mut reports = Vec::new();
            for (name, _) in catalog::BUILTIN {
                let common = CommonArgs {
                    seed: args.common.seed,
                    out: args.common.out.as_ref().map(|d| d.join(name)),
                };
                let report = simulate(name, &common)?;
                if !args.json {
                    println!("{}", output::render_table(&report));
                }
                reports.push(report);
            }
            if args.json {
                println!("{}", serde_json::to_string_pretty(&reports)?);
            }
            Ok(())
        }
    }
}

fn list() -> Result<()> {
    for (name, text) in catalog::BUILTIN {
        let sc = hetsched_sim::scenario::parse(name, text)?;
        println!("{name:<24} {}", sc.description);
    }
    Ok(())
}

/// Loads and runs a scenario, with a progress bar per policy on a terminal.
fn simulate(name: &str, common: &CommonArgs) -> Result<ScenarioReport> {
    let sc = match catalog::load(name) {
        Ok(sc) => sc,
        Err(e) => bail!("{e}"),
    };
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
