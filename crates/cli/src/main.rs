//! `hetsched`: the one binary — the daemon, its administration commands,
//! a load generator for emulated devices, benchmarks, the simulator and the
//! thread balancer.

mod admin;
mod balance_cmd;
mod bench;
mod bench_balance;
#[cfg(any(feature = "opencl", feature = "cuda"))]
mod bench_device;
#[cfg(feature = "cuda")]
mod bench_gpu;
#[cfg(feature = "opencl")]
mod bench_kernel;
#[cfg(any(feature = "opencl", feature = "cuda"))]
mod bench_placement;
#[cfg(any(feature = "opencl", feature = "cuda"))]
mod bench_served;
mod daemon_cmd;
mod demo;
mod load;
mod load_kernel;
mod pipeline_cmd;
mod sim_cmd;
#[cfg(any(feature = "opencl", feature = "cuda"))]
mod spin_kernel;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "hetsched",
    version,
    about = "Scheduler for heterogeneous machines (CPU kinds, GPUs, accelerators)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the system-wide monitor: one agent per unit, shared-memory views,
    /// emulated devices.
    Daemon(daemon_cmd::DaemonArgs),
    /// Show units, clients, shares, utilisation and queues.
    Status(admin::StatusArgs),
    /// Change a client's class, shares or priority.
    #[command(subcommand)]
    Shares(admin::SharesCommand),
    /// List the configured domains (containers): credits, CPU ceiling,
    /// member clients; `domains set` changes them.
    Domains(admin::DomainsArgs),
    /// Start a program under a class (it asks the daemon when it connects).
    Run(admin::RunArgs),
    /// Keep a unit busy with tasks, as an application would, and report
    /// what it got (for trying shares and policies).
    Load(load::LoadArgs),
    /// The project's own benchmarks (results for docs/PERFORMANCE.md).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// List the machine's units as the daemon would discover them.
    Units(daemon_cmd::UnitsArgs),
    /// The main job: Table 3 applications as real processes sharing a
    /// daemon's units, native placement against hetsched.
    Demo(demo::DemoArgs),
    /// One demo application (started by `hetsched demo`).
    #[command(hide = true)]
    DemoApp(demo::app_process::AppArgs),
    /// Streaming pipelines: the image demo (controller against the naive
    /// loop) and its pipelining table.
    #[command(subcommand)]
    Pipeline(pipeline_cmd::PipelineCommand),
    /// Simulate placement policies on paper-scale machines.
    #[command(subcommand)]
    Sim(sim_cmd::SimCommand),
    /// Thread balancer for unmodified programs (SmartBalance, Kinship) on
    /// asymmetric or emulated-asymmetric cores.
    Balance(balance_cmd::BalanceArgs),
    /// One worker of `hetsched bench balance`.
    #[command(hide = true)]
    BalanceWork(bench_balance::WorkArgs),
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Daemon(args) => daemon_cmd::run(args),
        Command::Status(args) => admin::status(args),
        Command::Shares(cmd) => admin::shares(cmd),
        Command::Run(args) => admin::run(args),
        Command::Domains(args) => admin::domains(args),
        Command::Load(args) => load::run(args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Units(args) => daemon_cmd::units(args),
        Command::Sim(cmd) => sim_cmd::run_command(cmd),
        Command::Pipeline(cmd) => pipeline_cmd::run(cmd),
        Command::Demo(args) => demo::run(args),
        Command::DemoApp(args) => demo::app_process::run(args),
        Command::Balance(args) => balance_cmd::run(args),
        Command::BalanceWork(args) => bench_balance::work(args),
    }
}
