//! `hetsched run`: a program under a class, shares, priority and device
//! memory cap, with the interposers loaded.

use super::request;
use anyhow::{Result, bail};
use clap::Args;
use std::os::unix::process::CommandExt;

#[derive(Args)]
pub struct RunArgs {
    /// custom, normal or background.
    #[arg(long)]
    class: String,
    #[arg(long)]
    shares: Option<u32>,
    #[arg(long, allow_hyphen_values = true)]
    priority: Option<i32>,
    /// Cap on the device memory the program may hold per device (`2G`,
    /// `512M`): past it, its allocations fail with the API's own
    /// out-of-memory code.
    #[arg(long, value_name = "SIZE")]
    device_memory: Option<String>,
    /// Do not put the program's OpenCL and CUDA calls under the daemon's
    /// leases and caps (the layer and the interposer are not loaded).
    #[arg(long)]
    no_intercept: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// The environment variable the interposers read their cap from
/// (`hetsched_intercept::DEVICE_MEMORY_ENV`; the CLI does not link them).
mod hetsched_intercept_env {
    pub const DEVICE_MEMORY: &str = "HETSCHED_DEVICE_MEMORY";
}

pub fn run(args: RunArgs) -> Result<()> {
    // Validate here so a typo fails before the program starts.
    request(Some(&args.class), args.shares, args.priority)?;
    let mut cmd = std::process::Command::new(&args.command[0]);
    cmd.args(&args.command[1..])
        .env("HETSCHED_CLASS", &args.class);
    match args.shares {
        Some(s) => cmd.env("HETSCHED_SHARES", s.to_string()),
        None => cmd.env_remove("HETSCHED_SHARES"),
    };
    if let Some(p) = args.priority {
        cmd.env("HETSCHED_PRIORITY", p.to_string());
    }
    if let Some(size) = &args.device_memory {
        let bytes = hetsched_protocol::byte_size::parse_byte_size(size)
            .map_err(|e| anyhow::anyhow!("--device-memory {e}"))?;
        if bytes == 0 {
            bail!("--device-memory 0 leaves the program no device memory");
        }
        if args.no_intercept {
            bail!("--device-memory is enforced by the interposers, which --no-intercept turns off");
        }
        cmd.env(hetsched_intercept_env::DEVICE_MEMORY, bytes.to_string());
    }
    if !args.no_intercept {
        crate::intercept_setup::add_interposers(&mut cmd);
    }
    let err = cmd.exec();
    bail!("cannot run {}: {err}", args.command[0])
}
