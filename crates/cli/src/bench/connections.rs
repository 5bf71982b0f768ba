//! `hetsched bench hold-connections` (hidden): opens connections to a
//! daemon until it refuses one or `--count` are open, says how many it
//! holds and why the next was refused, and keeps them until its stdin
//! closes. Tests run it as other users to check that one user cannot lock
//! the others out (`max_connections_per_uid`, `max_connections`).

use anyhow::Result;
use clap::Args;
use hetsched_protocol::{Client, ClientOptions};
use std::io::Read;
use std::path::PathBuf;

#[derive(Args)]
pub struct HoldConnectionsArgs {
    #[arg(long)]
    socket: PathBuf,
    /// Most connections to open.
    #[arg(long, default_value_t = 64)]
    count: u32,
}

pub fn hold_connections(args: HoldConnectionsArgs) -> Result<()> {
    let mut held = Vec::new();
    let mut refused = String::new();
    for i in 0..args.count {
        match Client::connect(ClientOptions::observer(format!("hold-{i}")).socket(&args.socket)) {
            Ok(c) => held.push(c),
            Err(e) => {
                refused = e.to_string();
                break;
            }
        }
    }
    println!("held {}", held.len());
    println!("refused {refused}");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(held);
    Ok(())
}
