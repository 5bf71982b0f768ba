//! The daemon's setup: the monitor's ([`hetsched_monitor::launch`], whose
//! items are re-exported here) with the daemon's host parts
//! ([`crate::host::HOST`]).

pub use hetsched_monitor::launch::*;

use hetsched_monitor::config::DaemonConfig;
use hetsched_monitor::server::DaemonSetup;
use hetsched_platform::Platform;

/// Discovers the platform the config describes and builds the daemon's
/// setup, with nice levels, cgroups and `/metrics` as configured.
pub fn prepare(cfg: &DaemonConfig) -> Result<(DaemonSetup, Platform), LaunchError> {
    let (mut setup, platform) = hetsched_monitor::launch::prepare(cfg)?;
    setup.host = crate::host::HOST;
    Ok((setup, platform))
}
