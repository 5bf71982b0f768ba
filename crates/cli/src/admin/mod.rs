//! `hetsched status`, `hetsched shares set`, `hetsched domains` and
//! `hetsched run`: a file per command, and here what several share (the
//! socket option, the settings request, id lists).

mod domains;
mod run;
mod shares;
mod status;

pub use domains::{DomainsArgs, domains};
pub use run::{RunArgs, run};
pub use shares::{SharesCommand, shares};
pub use status::{StatusArgs, status};

use anyhow::{Result, bail};
use clap::Args;
use hetsched_protocol::{Client, ClientOptions, SettingsRequest, parse_class};
use std::path::PathBuf;

#[derive(Args)]
pub struct SocketArg {
    /// Daemon socket (default: $HETSCHED_SOCKET, else the per-user default).
    #[arg(long)]
    socket: Option<PathBuf>,
}

impl SocketArg {
    pub(crate) fn observer(&self, name: &str) -> Result<Client> {
        let mut opts = ClientOptions::observer(name);
        if let Some(s) = &self.socket {
            opts = opts.socket(s);
        }
        Ok(Client::connect(opts)?)
    }
}

/// `ids` joined by `sep`; with `max`, the first `max` and how many more.
fn some_ids(ids: Vec<String>, sep: &str, max: Option<usize>) -> String {
    if ids.is_empty() {
        return "-".to_string();
    }
    match max {
        Some(max) if ids.len() > max => {
            format!("{}{sep}… +{} more", ids[..max].join(sep), ids.len() - max)
        }
        _ => ids.join(sep),
    }
}

fn request(
    class: Option<&str>,
    shares: Option<u32>,
    priority: Option<i32>,
) -> Result<SettingsRequest> {
    let class = match (class, shares) {
        (Some(c), s) => Some(parse_class(c, s).map_err(anyhow::Error::msg)?),
        (None, Some(_)) => bail!("--shares needs --class (custom or normal)"),
        (None, None) => None,
    };
    if class.is_none() && priority.is_none() {
        bail!("nothing to change: give --class (with --shares) or --priority");
    }
    Ok(SettingsRequest { class, priority })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_id_lists_are_cut_in_a_summary() {
        let ids: Vec<String> = (1..=20).map(|i| i.to_string()).collect();
        assert_eq!(some_ids(ids[..3].to_vec(), ",", Some(16)), "1,2,3");
        assert_eq!(
            some_ids(ids.clone(), ",", Some(16)),
            "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,… +4 more"
        );
        assert_eq!(some_ids(ids.clone(), " ", None).split(' ').count(), 20);
        assert_eq!(some_ids(Vec::new(), ",", Some(16)), "-");
    }
}
