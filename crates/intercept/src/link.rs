//! One device's connection to the daemon: made on the device's first
//! launch or allocation, given up (pass-through) when the daemon is gone,
//! and tried again at most once a second.

use crate::notice;
use hetsched_core::ids::UnitId;
use hetsched_protocol::{Client, ClientError, ClientOptions, InterceptApi, Lease};
use std::time::Duration;

/// How long to pass calls through before trying the daemon again.
pub const RETRY_NS: u64 = 1_000_000_000;

/// The daemon as one device's lease machinery sees it.
pub enum Link {
    /// Not tried yet.
    Unconnected,
    /// Connected, with the device's unit there.
    Up(Box<Connected>),
    /// No daemon (or no such unit): pass through until `retry_at`.
    Down { retry_at: u64 },
}

pub struct Connected {
    pub client: Client,
    pub unit: UnitId,
    /// The cap the daemon answered with.
    pub memory_limit: Option<u64>,
    /// Device memory last reported.
    pub reported_memory: u64,
    /// When it was last reported, ns.
    pub reported_at: u64,
}

impl Connected {
    pub fn request_lease(&mut self) -> Result<Lease, ClientError> {
        self.client.request_lease(self.unit)
    }
}

/// What a connection attempt needs to know.
pub struct Target<'a> {
    pub api: InterceptApi,
    /// The unit's name in the daemon (`opencl0`, `cuda1`).
    pub unit_name: &'a str,
    pub memory_limit: Option<u64>,
}

/// Connects, finds the unit and declares the program intercepted.
pub fn connect(target: &Target<'_>) -> Result<Connected, String> {
    let mut opts = ClientOptions::application(program_name()).map_err(|e| e.to_string())?;
    // An interposer decides itself what to do when the daemon is gone.
    opts.reconnect_for = Duration::ZERO;
    let mut client = Client::connect(opts).map_err(|e| e.to_string())?;
    let served = format!("served-{}", target.unit_name);
    let Some(unit) = client
        .units()
        .iter()
        .find(|u| u.name == target.unit_name || u.name == served)
        .map(|u| u.id)
    else {
        return Err(format!(
            "the daemon has no unit {} (is `device_units` off, or does it see other devices?)",
            target.unit_name
        ));
    };
    let memory_limit = client
        .declare_intercepted(target.api, target.memory_limit)
        .map_err(|e| e.to_string())?;
    Ok(Connected {
        client,
        unit,
        memory_limit,
        reported_memory: 0,
        reported_at: 0,
    })
}

/// What the program is called, for `hetsched status`.
fn program_name() -> String {
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap_or_default();
    let comm = comm.trim();
    if comm.is_empty() {
        "intercepted".into()
    } else {
        comm.into()
    }
}

/// Says once that calls pass through, and why.
pub fn note_down(api: InterceptApi, why: &str) {
    notice::once("down", || {
        format!("{api} calls pass through ungoverned: {why} (trying again every second)")
    });
}
