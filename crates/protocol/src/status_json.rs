//! The status report as JSON, as `hetsched status --json` prints it and the
//! Python package's `Client.status()` returns it: the report, each client's
//! domain (`domain`, `null` for a client that is its own) and the
//! configured domains (`domains`), under a `schema_version`. Where the wire
//! form is compact, the JSON names things: a unit's capabilities as a list
//! of names, its queue by class as an object.

use crate::message::{DomainInfo, StatusReport};
use hetsched_core::ids::ClientId;
use serde_json::{Value, json};

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
    if let Some(units) = v.get_mut("units").and_then(|u| u.as_array_mut()) {
        for (u, uv) in report.units.iter().zip(units) {
            let [custom, normal, background] = u.queued_by_class;
            uv["queued_by_class"] =
                json!({"custom": custom, "normal": normal, "background": background});
            uv["info"]["caps"] = json!(u.info.caps.names());
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.insert("domains".into(), serde_json::to_value(domains)?);
        o.insert("schema_version".into(), Value::from(SCHEMA_VERSION));
    }
    Ok(v)
}

/// The `schema_version` of the JSON ([`hetsched_core::JSON_SCHEMA_VERSION`]).
pub const SCHEMA_VERSION: u32 = hetsched_core::JSON_SCHEMA_VERSION;
