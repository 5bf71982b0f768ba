//! `hetsched shares set`.

use super::{SocketArg, request};
use crate::{shown, write_out};
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use std::fmt::Write as _;

#[derive(Subcommand)]
pub enum SharesCommand {
    /// Set the class, shares or priority of a running client (or of a
    /// process that will connect).
    Set(SharesSetArgs),
}

#[derive(Args)]
pub struct SharesSetArgs {
    #[command(flatten)]
    socket: SocketArg,
    /// The process to change.
    #[arg(long)]
    pid: u32,
    /// Unit name (default: every unit).
    #[arg(long)]
    unit: Option<String>,
    /// custom, normal or background.
    #[arg(long)]
    class: Option<String>,
    /// Shares: percent of the unit for custom, relative weight for normal.
    #[arg(long)]
    shares: Option<u32>,
    /// Priority under the priority policy (larger runs first).
    #[arg(long, allow_hyphen_values = true)]
    priority: Option<i32>,
    /// Cap the device memory of a program running under `hetsched run`
    /// (`2G`, `512M`); past it, its allocations fail with the API's own
    /// out-of-memory code. Root or the admin group may set any cap; a user
    /// may lower the cap of a process of their own.
    #[arg(long, value_name = "SIZE")]
    device_memory: Option<String>,
}

pub fn shares(cmd: SharesCommand) -> Result<()> {
    let SharesCommand::Set(args) = cmd;
    let cap = args
        .device_memory
        .as_deref()
        .map(hetsched_protocol::byte_size::parse_byte_size)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--device-memory {e}"))?;
    let settings = args.class.is_some() || args.shares.is_some() || args.priority.is_some();
    let mut client = args.socket.observer("hetsched-shares")?;
    let mut out = String::new();
    if let Some(limit) = cap {
        let now = client.set_device_memory(args.pid, limit)?;
        let _ = writeln!(
            out,
            "pid {}: device memory capped at {}",
            args.pid,
            hetsched_protocol::byte_size::format_byte_size(now)
        );
        if !settings {
            let _ = client.goodbye();
            return write_out(&out);
        }
    }
    let req = request(args.class.as_deref(), args.shares, args.priority)?;
    let unit = match &args.unit {
        Some(name) => Some(client.unit_by_name(name).map(|u| u.id).with_context(|| {
            let names: Vec<&str> = client.units().iter().map(|u| u.name.as_str()).collect();
            format!("unknown unit {name:?}; units are: {}", names.join(", "))
        })?),
        None => None,
    };
    let (pid, changed) = client.set_settings(Some(args.pid), unit, req)?;
    for (u, s) in changed {
        let name = client.units().get(u.index()).map_or("?", |i| &i.name);
        let _ = writeln!(
            out,
            "pid {pid}: {} -> {} (priority {})",
            shown::text(name),
            s.class,
            s.priority
        );
    }
    let _ = client.goodbye();
    write_out(&out)
}
