//! Pegasus's domains beyond single clients: a `[[domains]]` entry of the
//! config names a cgroup (a container), and every client whose process
//! is in it, or below it, when it connects belongs to the domain. Under
//! the backend policies its members are one scheduling domain (one turn,
//! the domain's credits, one count of ticks:
//! [`hetsched_core::policy::SharedDomain`]); with `cpu_cgroups` they also
//! share one daemon-owned cgroup, which `cpu_cap` holds to that many
//! cores (hetsched-daemon's `cpu_cgroups`; the targets are
//! [`crate::cpu_weights`]).
//!
//! This file has the config entry, its checks, and the match of a
//! process's `/proc/PID/cgroup` text against the entries. It does no I/O.

use crate::cpu_weights::{DOMAIN_PREFIX, PARENT_PREFIX};
use hetsched_core::policy::DEFAULT_NORMAL_SHARES;
use serde::Deserialize;
use std::collections::BTreeMap;

/// One `[[domains]]` table.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomainSpec {
    /// How status and `hetsched domains set` name it; also the name of
    /// its cgroup (`domain-<name>`), so letters, digits, `-`, `_`, `.`.
    pub name: String,
    /// The cgroup path as `/proc/PID/cgroup` shows it (the v1 `cpu` line
    /// or the v2 `0::` line), e.g. `/docker/abc`.
    pub cgroup: String,
    /// Accelerator credits on every unit under a Pegasus policy (and CPU
    /// credits under XC); a default client has 10.
    #[serde(default = "default_credits")]
    pub credits: u32,
    /// Credits on particular units instead (`unit_credits = { gpu1 = 64 }`).
    #[serde(default)]
    pub unit_credits: BTreeMap<String, u32>,
    /// CFS ceiling of the domain's clients together, in cores (needs
    /// `cpu_cgroups`).
    pub cpu_cap: Option<f64>,
}

fn default_credits() -> u32 {
    DEFAULT_NORMAL_SHARES
}

/// Longest domain name.
pub const MAX_NAME_CHARS: usize = 64;

/// Checks a CPU ceiling against the machine's `cores`.
pub fn check_cap(cap: f64, cores: u32) -> Result<(), String> {
    if !(cap.is_finite() && cap > 0.0) {
        return Err(format!(
            "cpu_cap = {cap} must be a positive number of cores"
        ));
    }
    if cap > f64::from(cores) {
        return Err(format!(
            "cpu_cap = {cap} is more than the {cores} cores this machine has"
        ));
    }
    // CFS takes quotas of at least 1 ms per 100 ms period.
    if cap < 0.01 {
        return Err(format!(
            "cpu_cap = {cap} is below the least CFS allows (0.01 cores)"
        ));
    }
    Ok(())
}

/// Checks the entries: names usable as cgroup names and unique, absolute
/// cgroup paths other than the root and unique, credits of at least 1,
/// ceilings within the machine's `cores`.
pub fn validate(specs: &[DomainSpec], cores: u32) -> Result<(), String> {
    for (i, d) in specs.iter().enumerate() {
        let which = format!("domain {:?}", d.name);
        if d.name.is_empty()
            || d.name.chars().count() > MAX_NAME_CHARS
            || !d
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            || d.name.starts_with('.')
        {
            return Err(format!(
                "{which}: a name is 1 to {MAX_NAME_CHARS} letters, digits, '-', '_' or '.' \
                 (not starting with '.')"
            ));
        }
        if !d.cgroup.starts_with('/') || d.cgroup.trim_end_matches('/').is_empty() {
            return Err(format!(
                "{which}: cgroup = {:?} must be an absolute cgroup path below the root, \
                 as /proc/PID/cgroup shows it (e.g. \"/docker/abc\")",
                d.cgroup
            ));
        }
        if d.credits == 0 {
            return Err(format!("{which}: credits must be at least 1"));
        }
        if let Some((unit, _)) = d.unit_credits.iter().find(|(_, c)| **c == 0) {
            return Err(format!(
                "{which}: unit_credits for {unit} must be at least 1"
            ));
        }
        if let Some(cap) = d.cpu_cap {
            check_cap(cap, cores).map_err(|e| format!("{which}: {e}"))?;
        }
        if let Some(other) = specs[..i].iter().find(|o| o.name == d.name) {
            return Err(format!("two domains are named {:?}", other.name));
        }
        if let Some(other) = specs[..i]
            .iter()
            .find(|o| o.cgroup.trim_end_matches('/') == d.cgroup.trim_end_matches('/'))
        {
            return Err(format!(
                "domains {:?} and {:?} have the same cgroup {:?}",
                other.name, d.name, d.cgroup
            ));
        }
    }
    Ok(())
}

impl DomainSpec {
    /// Its credits on the unit named `unit`.
    pub fn credits_on(&self, unit: &str) -> u32 {
        self.unit_credits.get(unit).copied().unwrap_or(self.credits)
    }
}

/// Unit names in the entries' `unit_credits` that no unit has, for an
/// error message.
pub fn unknown_units<'a>(specs: &'a [DomainSpec], units: &[&str]) -> Vec<&'a str> {
    specs
        .iter()
        .flat_map(|d| d.unit_credits.keys())
        .filter(|k| !units.contains(&k.as_str()))
        .map(String::as_str)
        .collect()
}

/// The domain (index into `specs`) of a process whose `/proc/PID/cgroup`
/// reads `text`: the entry with the longest cgroup that any of its lines
/// is in or below. A process the daemon `daemon_pid` already moved into
/// a domain's cgroup belongs to that domain.
pub fn domain_of(specs: &[DomainSpec], text: &str, daemon_pid: u32) -> Option<usize> {
    let ours = format!("/{PARENT_PREFIX}{daemon_pid}/{DOMAIN_PREFIX}");
    let mut best: Option<(usize, usize)> = None;
    for path in text.lines().filter_map(|l| l.splitn(3, ':').nth(2)) {
        if let Some(name) = path.strip_prefix(&ours) {
            if let Some(i) = specs.iter().position(|d| d.name == name) {
                return Some(i);
            }
        }
        for (i, d) in specs.iter().enumerate() {
            let base = d.cgroup.trim_end_matches('/');
            let inside = path == base
                || path
                    .strip_prefix(base)
                    .is_some_and(|rest| rest.starts_with('/'));
            if inside && best.is_none_or(|(_, len)| base.len() > len) {
                best = Some((i, base.len()));
            }
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, cgroup: &str) -> DomainSpec {
        DomainSpec {
            name: name.into(),
            cgroup: cgroup.into(),
            credits: 512,
            unit_credits: BTreeMap::new(),
            cpu_cap: None,
        }
    }

    #[test]
    fn a_process_in_or_below_the_cgroup_belongs() {
        let specs = [spec("web", "/docker/abc"), spec("web-db", "/docker/abc/db")];
        let v1 = "12:pids:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n";
        assert_eq!(domain_of(&specs, v1, 7), Some(0));
        // The deeper entry wins below it.
        let v2 = "0::/docker/abc/db/worker\n";
        assert_eq!(domain_of(&specs, v2, 7), Some(1));
        // A sibling with the same prefix is not inside.
        assert_eq!(domain_of(&specs, "0::/docker/abcd\n", 7), None);
        assert_eq!(domain_of(&specs, "0::/user.slice\n", 7), None);
        // Already moved into its domain's cgroup by this daemon.
        let moved = "4:cpu,cpuacct:/hetsched-cpu-7/domain-web-db\n";
        assert_eq!(domain_of(&specs, moved, 7), Some(1));
        assert_eq!(domain_of(&specs, moved, 8), None);
    }

    #[test]
    fn impossible_entries_are_refused() {
        let ok = [spec("web", "/docker/abc")];
        assert_eq!(validate(&ok, 2), Ok(()));
        let bad = |d: DomainSpec| validate(&[d], 2).unwrap_err();
        assert!(bad(spec("a/b", "/x")).contains("name"));
        assert!(bad(spec("", "/x")).contains("name"));
        assert!(bad(spec("w", "docker/abc")).contains("absolute"));
        assert!(bad(spec("w", "/")).contains("below the root"));
        let zero = DomainSpec {
            credits: 0,
            ..spec("w", "/x")
        };
        assert!(bad(zero).contains("credits"));
        let zero_on_unit = DomainSpec {
            unit_credits: BTreeMap::from([("gpu0".to_string(), 0)]),
            ..spec("w", "/x")
        };
        assert!(bad(zero_on_unit).contains("gpu0"));
        let mut per_unit = spec("w", "/x");
        per_unit.unit_credits.insert("gpu1".into(), 64);
        assert_eq!(
            (per_unit.credits_on("gpu0"), per_unit.credits_on("gpu1")),
            (512, 64)
        );
        assert_eq!(unknown_units(&[per_unit], &["gpu0"]), vec!["gpu1"]);
        for cap in [0.0, -1.0, f64::NAN, 2.5] {
            let d = DomainSpec {
                cpu_cap: Some(cap),
                ..spec("w", "/x")
            };
            assert!(bad(d).contains("cpu_cap"), "{cap}");
        }
        let twice = [spec("w", "/x"), spec("w", "/y")];
        assert!(validate(&twice, 2).unwrap_err().contains("two domains"));
        let same = [spec("v", "/x"), spec("w", "/x/")];
        assert!(validate(&same, 2).unwrap_err().contains("same cgroup"));
    }
}
