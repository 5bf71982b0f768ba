//! What `hetsched top` shows, computed from two status reports (pure: the
//! terminal code in [`super::view`] only draws it).

use hetsched_protocol::{ClientStatus, StatusReport};
use std::collections::BTreeMap;

/// How the clients are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    /// Most device time per second first.
    Use,
    Name,
    Pid,
}

impl SortBy {
    pub fn next(self) -> SortBy {
        match self {
            SortBy::Use => SortBy::Name,
            SortBy::Name => SortBy::Pid,
            SortBy::Pid => SortBy::Use,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            SortBy::Use => "use",
            SortBy::Name => "name",
            SortBy::Pid => "pid",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct UnitRow {
    pub name: String,
    pub class: &'static str,
    pub policy: &'static str,
    pub utilization: f64,
    pub queued: u32,
    pub running: u32,
    pub active: u32,
}

/// A client on the unit it uses the most.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientRow {
    pub id: u32,
    pub pid: u32,
    pub name: String,
    pub unit: String,
    pub class: String,
    pub achieved: f64,
    /// Device seconds it was charged per second since the last refresh
    /// (all units).
    pub rate: f64,
    pub outstanding: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Screen {
    pub header: String,
    pub units: Vec<UnitRow>,
    pub clients: Vec<ClientRow>,
    /// Coordination, one line per application with targets.
    pub coordination: Vec<String>,
}

fn busy_of(c: &ClientStatus) -> u64 {
    c.units.iter().map(|u| u.busy_ns_total).sum()
}

/// The screen for `now`, with rates from `before` (the previous report,
/// `elapsed_s` earlier) when there is one.
pub fn screen(
    now: &StatusReport,
    before: Option<&StatusReport>,
    elapsed_s: f64,
    sort: SortBy,
) -> Screen {
    let unit_name = |id: hetsched_core::ids::UnitId| {
        now.units
            .iter()
            .find(|u| u.info.id == id)
            .map_or_else(|| format!("unit{}", id.0), |u| u.info.name.clone())
    };
    let earlier: BTreeMap<u32, u64> = before
        .map(|b| b.clients.iter().map(|c| (c.id.0, busy_of(c))).collect())
        .unwrap_or_default();
    let mut clients: Vec<ClientRow> = now
        .clients
        .iter()
        .map(|c| {
            let main = c.units.iter().max_by(|a, b| {
                a.view
                    .current_utilisation
                    .total_cmp(&b.view.current_utilisation)
                    .then(b.unit.0.cmp(&a.unit.0))
            });
            let rate = match earlier.get(&c.id.0) {
                Some(&b) if elapsed_s > 0.0 => {
                    busy_of(c).saturating_sub(b) as f64 / 1e9 / elapsed_s
                }
                _ => 0.0,
            };
            ClientRow {
                id: c.id.0,
                pid: c.pid,
                // An unmodified program under an interposer: its API and
                // the device memory it holds.
                name: match c.intercepted {
                    Some(api) => format!(
                        "{} [{api} {}]",
                        c.name,
                        hetsched_protocol::byte_size::format_byte_size(c.device_memory_bytes)
                    ),
                    None => c.name.clone(),
                },
                unit: main.map_or_else(String::new, |m| unit_name(m.unit)),
                class: main.map_or_else(String::new, |m| m.settings.class.to_string()),
                achieved: main.map_or(0.0, |m| m.view.current_utilisation),
                rate,
                outstanding: c.units.iter().map(|u| u.outstanding).sum(),
            }
        })
        .collect();
    match sort {
        SortBy::Use => clients.sort_by(|a, b| {
            b.rate
                .total_cmp(&a.rate)
                .then(b.achieved.total_cmp(&a.achieved))
                .then(a.id.cmp(&b.id))
        }),
        SortBy::Name => clients.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id))),
        SortBy::Pid => clients.sort_by(|a, b| a.pid.cmp(&b.pid).then(a.id.cmp(&b.id))),
    }
    let coordination = now
        .coordination
        .iter()
        .flat_map(|c| {
            let head = format!(
                "coordination: {} solves, floor {}",
                c.solves,
                c.floor
                    .map_or_else(|| "-".into(), |f| format!("{f:.2}× native"))
            );
            std::iter::once(head).chain(c.apps.iter().filter(|a| !a.fractions.is_empty()).map(
                |a| {
                    let targets: Vec<String> = a
                        .fractions
                        .iter()
                        .zip(&now.units)
                        .filter(|(f, _)| **f > 0.005)
                        .map(|(f, u)| format!("{} {:.0}%", u.info.name, 100.0 * f))
                        .collect();
                    format!(
                        "  client {} (pid {}): {:.1} calls/s, {}",
                        a.client.0,
                        a.pid,
                        a.rate.unwrap_or(0.0),
                        targets.join(", ")
                    )
                },
            ))
        })
        .collect();
    Screen {
        header: format!(
            "hetsched daemon {} (pid {}), up {}, {} clients — {}",
            now.daemon.version,
            now.daemon.pid,
            uptime(now.daemon.uptime_ns),
            now.clients.len(),
            now.daemon.socket
        ),
        units: now
            .units
            .iter()
            .map(|u| UnitRow {
                name: u.info.name.clone(),
                class: u.info.class.name(),
                policy: u.info.policy.name(),
                utilization: u.view.busy_fraction,
                queued: u.view.queued,
                running: u.view.running,
                active: u.view.active_clients,
            })
            .collect(),
        clients,
        coordination,
    }
}

fn uptime(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// `fraction` as a bar `width` cells wide.
pub fn bar(fraction: f64, width: usize) -> String {
    let filled = ((fraction.clamp(0.0, 1.0) * width as f64).round() as usize).min(width);
    format!("{}{}", "█".repeat(filled), "·".repeat(width - filled))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_fill_in_proportion_and_never_overflow() {
        assert_eq!(bar(0.5, 10), "█████·····");
        assert_eq!(bar(2.0, 4), "████");
        assert_eq!(bar(f64::NAN, 3), "···");
    }

    #[test]
    fn sorting_cycles_through_every_order() {
        let mut s = SortBy::Use;
        let mut seen = vec![s];
        for _ in 0..2 {
            s = s.next();
            seen.push(s);
        }
        assert_eq!(seen, [SortBy::Use, SortBy::Name, SortBy::Pid]);
        assert_eq!(s.next(), SortBy::Use);
    }

    #[test]
    fn uptime_reads_naturally() {
        assert_eq!(uptime(59_000_000_000), "59 s");
        assert_eq!(uptime(61_000_000_000), "1m01s");
        assert_eq!(uptime(7_260_000_000_000), "2h01m");
    }
}
