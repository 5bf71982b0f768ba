//! The status report as JSON, as `hetsched status --json` prints it and the
//! Python package's `Client.status()` returns it: the report, each client's
//! domain (`domain`, `null` for a client that is its own) and the
//! configured domains (`domains`).

use crate::message::{DomainInfo, StatusReport};
use hetsched_core::ids::ClientId;

/// The configured domain `client` is a member of, by name.
pub fn domain_of(domains: &[DomainInfo], client: ClientId) -> Option<&str> {
    domains
        .iter()
        .find(|d| d.members.iter().any(|&(c, _)| c == client))
        .map(|d| d.name.as_str())
}

/// `report` and `domains` as one JSON value.
pub fn status_json(
    report: &StatusReport,
    domains: &[DomainInfo],
) -> Result<serde_json::Value, serde_json::Error> {
    let mut v = serde_json::to_value(report)?;
    if let Some(clients) = v.get_mut("clients").and_then(|c| c.as_array_mut()) {
        for (c, cv) in report.clients.iter().zip(clients) {
            if let Some(o) = cv.as_object_mut() {
                o.insert(
                    "domain".into(),
                    serde_json::to_value(domain_of(domains, c.id))?,
                );
            }
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.insert("domains".into(), serde_json::to_value(domains)?);
    }
    Ok(v)
}
