//! `hetsched`: the one binary — the daemon, its administration commands,
//! a load generator for emulated devices, benchmarks, the simulator and the
//! thread balancer.

mod admin;
mod balance_cmd;
mod balance_stop;
mod bench;
mod daemon_cmd;
mod demo;
mod gpu_listing;
mod intercept_setup;
mod load;
#[cfg(feature = "devices")]
mod load_direct;
#[cfg(feature = "cuda")]
mod load_direct_cuda;
mod load_kernel;
mod pipeline_cmd;
mod shown;
mod sim_cmd;
#[cfg(feature = "devices")]
mod spin_kernel;
mod status_csv;
mod top;
mod values;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand};
use std::io::Write as _;

#[derive(Parser)]
#[command(
    name = "hetsched",
    version = env!("HETSCHED_VERSION_LONG"),
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
    /// A live view of the daemon: units, clients, coordination (q quits)
    Top(top::TopArgs),
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
    BalanceWork(bench::balance::WorkArgs),
    /// A kernel executor process of the daemon (it starts them itself).
    #[command(hide = true, name = "kernel-executor")]
    KernelExecutor {
        /// The daemon's pid: the executor ends with it.
        parent: u32,
        /// The number of the first kernel it builds.
        first_id: u32,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions(CompletionsArgs),
    /// Write the man pages (hetsched.1, hetsched-daemon.1 …) into DIR, for `make install`
    #[command(hide = true)]
    Manpages { dir: std::path::PathBuf },
}

#[derive(clap::Args)]
struct CompletionsArgs {
    /// The shell to complete for.
    shell: clap_complete::Shell,
}

/// Standard output was closed before everything was written (the reader
/// of a pipe went away: `hetsched sim list | head -1`).
#[derive(Debug)]
pub(crate) struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("standard output was closed")
    }
}

impl std::error::Error for StdoutClosed {}

/// Writes `text` to standard output. Where `print!` would panic on a
/// closed pipe, this returns [`StdoutClosed`], on which `main` ends quietly.
pub(crate) fn write_out(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        other => Ok(other?),
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if let Command::KernelExecutor { parent, first_id } = cli.command {
        return hetsched_daemon::kernel_exec::executor_main::main(parent, first_id);
    }
    // The daemon reports what it does; other commands only what went wrong.
    hetsched_runtime::logging::init(match cli.command {
        Command::Daemon(_) => "info",
        _ => "warn",
    });
    match run(cli.command) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // Nobody reads any more: stop, as a command killed by SIGPIPE would,
        // without a message (and with success, so `set -o pipefail` scripts
        // that cut the output short do not fail).
        Err(e) if e.chain().any(|c| c.is::<StdoutClosed>()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hetsched: {}", one_sentence(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line, each cause said once (a message
/// that already quotes its cause is not followed by it again), and no
/// backtrace: these are conditions people meet, not bugs.
fn one_sentence(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// `hetsched.1` and one page per visible subcommand (`hetsched-daemon.1`).
fn write_manpages(dir: &std::path::Path) -> Result<()> {
    use anyhow::Context as _;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let top = Cli::command();
    let mut pages = vec![("hetsched".to_string(), top.clone())];
    for sub in top.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = format!("hetsched-{}", sub.get_name());
        let bin = format!("hetsched {}", sub.get_name());
        pages.push((name.clone(), sub.clone().display_name(name).bin_name(bin)));
    }
    for (name, cmd) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut out)?;
        std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn run(command: Command) -> Result<()> {
    match command {
        Command::Daemon(args) => daemon_cmd::run(args),
        Command::Status(args) => admin::status(args),
        Command::Top(args) => top::run(args),
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
        Command::BalanceWork(args) => bench::balance::work(args),
        Command::Completions(args) => {
            let mut out = Vec::new();
            clap_complete::generate(args.shell, &mut Cli::command(), "hetsched", &mut out);
            write_out(&String::from_utf8_lossy(&out))
        }
        Command::Manpages { dir } => write_manpages(&dir),
        Command::KernelExecutor { .. } => unreachable!("run before any other command"),
    }
}
