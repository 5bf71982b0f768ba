//! `hetsched domains` and `hetsched domains set`, and the domains table
//! `status` shows too.

use super::{SocketArg, some_ids};
use crate::{shown, write_out};
use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use hetsched_protocol::DomainInfo;
use std::fmt::Write as _;

#[derive(Args)]
pub struct DomainsArgs {
    #[command(flatten)]
    socket: SocketArg,
    #[command(subcommand)]
    command: Option<DomainsCommand>,
}

#[derive(Subcommand)]
pub enum DomainsCommand {
    /// Change a configured domain's accelerator credits or CPU ceiling
    /// (root or the admin group).
    Set(DomainsSetArgs),
}

#[derive(Args)]
pub struct DomainsSetArgs {
    #[command(flatten)]
    socket: SocketArg,
    /// The domain's name in the daemon's config.
    name: String,
    /// Accelerator credits on every unit under a Pegasus policy (this
    /// replaces the config's per-unit credits).
    #[arg(long)]
    credits: Option<u32>,
    /// CPU ceiling of the domain's clients together, in cores (`none`
    /// lifts it).
    #[arg(long, value_parser = parse_cap)]
    cpu_cap: Option<f64>,
}

/// `--cpu-cap`: cores, or `none` (sent as 0, which lifts the ceiling).
fn parse_cap(s: &str) -> Result<f64, String> {
    if s == "none" {
        return Ok(0.0);
    }
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of cores (or `none`)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!(
            "{s} cores: a ceiling is a positive number (or `none`)"
        ));
    }
    Ok(v)
}

/// Credits, with the units that have other credits: `512 gpu1=64`.
fn credits_text(d: &DomainInfo) -> String {
    let mut t = d.credits.to_string();
    for (unit, c) in &d.unit_credits {
        let _ = write!(t, " {unit}={c}");
    }
    t
}

fn cap_text(cap: Option<f64>) -> String {
    cap.map_or("-".to_string(), |c| format!("{c}"))
}

/// The domains, with at most `max_members` members each named (all
/// without).
pub(super) fn domains_table(domains: &[DomainInfo], max_members: Option<usize>) -> String {
    let mut s = String::new();
    if domains.is_empty() {
        let _ = writeln!(
            s,
            "no domains configured ([[domains]] in the daemon's config)"
        );
        return s;
    }
    let _ = writeln!(
        s,
        "{:<16} {:<28} {:>12} {:>8}  MEMBERS (client/pid)",
        "DOMAIN", "CGROUP", "CREDITS", "CPU-CAP"
    );
    for d in domains {
        let members: Vec<String> = d
            .members
            .iter()
            .map(|(c, pid)| format!("{}/{pid}", c.0))
            .collect();
        let _ = writeln!(
            s,
            "{:<16} {:<28} {:>12} {:>8}  {}",
            d.name,
            d.cgroup,
            credits_text(d),
            cap_text(d.cpu_cap),
            some_ids(members, " ", max_members)
        );
    }
    s
}

/// `hetsched domains` and `hetsched domains set`.
pub fn domains(args: DomainsArgs) -> Result<()> {
    match args.command {
        None => {
            let mut client = args.socket.observer("hetsched-domains")?;
            let list = client.domains()?;
            let _ = client.goodbye();
            write_out(&domains_table(&shown::domains(&list), None))?;
        }
        Some(DomainsCommand::Set(a)) => {
            if a.credits.is_none() && a.cpu_cap.is_none() {
                bail!("nothing to change: give --credits or --cpu-cap");
            }
            if a.credits == Some(0) {
                bail!("--credits must be at least 1");
            }
            let mut client = a.socket.observer("hetsched-domains")?;
            let changed = client.set_domain(&a.name, a.credits, a.cpu_cap)?;
            let _ = client.goodbye();
            let mut out = String::new();
            for d in shown::domains(&changed) {
                let _ = writeln!(
                    out,
                    "domain {}: credits {}, cpu cap {}",
                    d.name,
                    d.credits,
                    cap_text(d.cpu_cap)
                );
            }
            write_out(&out)?;
        }
    }
    Ok(())
}
