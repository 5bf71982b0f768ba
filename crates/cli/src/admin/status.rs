//! `hetsched status`: the report as a table, CSV, JSON or Prometheus
//! text, once or `--watch`ed.

use super::domains::domains_table;
use super::{SocketArg, some_ids};
use crate::{shown, status_csv, write_out};
use anyhow::{Result, bail};
use clap::Args;
use hetsched_core::ids::{ClientId, UnitId};
use hetsched_protocol::{
    Client, ClientStatus, ClientUnitStatus, CoordinatedApp, CoordinationStatus, DomainInfo,
    StatusReport, WireClass, domain_of, status_json,
};
use std::collections::BTreeSet;
use std::fmt::Write as _;

#[derive(Args)]
pub struct StatusArgs {
    #[command(flatten)]
    socket: SocketArg,
    /// Print the full report as JSON (the same as --format json).
    #[arg(long, conflicts_with_all = ["prometheus", "format"])]
    json: bool,
    /// Print Prometheus text exposition format (for a scraper, prefer the
    /// daemon's own endpoint: `hetsched daemon --metrics ADDR`).
    #[arg(long, conflicts_with = "format")]
    prometheus: bool,
    /// table (the default), json, or csv (one row per unit; with
    /// --clients, per client and unit; columns from --fields).
    #[arg(long, value_enum)]
    format: Option<StatusFormat>,
    /// With --format csv: the columns, comma-separated, in order
    /// (`--fields help` lists them).
    #[arg(long, value_delimiter = ',', requires = "format")]
    fields: Option<Vec<String>>,
    /// With --format csv: one row per client and unit.
    #[arg(long, requires = "format")]
    clients: bool,
    /// Print again every SECS seconds until interrupted (the table
    /// redraws in place on a terminal; CSV repeats its rows, not its header).
    #[arg(long, value_name = "SECS", value_parser = parse_interval, conflicts_with_all = ["json", "prometheus"])]
    watch: Option<std::time::Duration>,
    /// List every client in the table, however many there are (past a
    /// screenful the table otherwise summarises them; --json and
    /// --prometheus always give every client).
    #[arg(long)]
    all: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusFormat {
    Table,
    Json,
    Csv,
}

/// `--watch SECS`: at least 0.1 s, at most a day.
fn parse_interval(s: &str) -> Result<std::time::Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.1..=86_400.0).contains(&v) {
        return Err(format!("{s} s: the interval is 0.1 to 86400 seconds"));
    }
    Ok(std::time::Duration::from_secs_f64(v))
}

pub fn status(args: StatusArgs) -> Result<()> {
    let format = match (args.format, args.json) {
        (Some(f), _) => f,
        (None, true) => StatusFormat::Json,
        (None, false) => StatusFormat::Table,
    };
    if format != StatusFormat::Csv && (args.fields.is_some() || args.clients) {
        bail!("--fields and --clients go with --format csv");
    }
    if let Some(f) = &args.fields
        && f.iter().any(|x| x == "help")
    {
        return write_out(&status_csv::help(args.clients));
    }
    let csv = (format == StatusFormat::Csv)
        .then(|| status_csv::CsvLayout::new(args.clients, args.fields.as_deref()))
        .transpose()?;
    let mut client = args.socket.observer("hetsched-status")?;
    let listed = if args.all {
        Listing::All
    } else {
        Listing::Screenful(screenful())
    };
    let render = |client: &mut Client, first: bool| -> Result<String> {
        let report = client.status()?;
        let domains = client.domains()?;
        Ok(match (&csv, format) {
            (Some(layout), _) => {
                let rows = layout.rows(&shown::report(&report), &domains)?;
                if first {
                    layout.header()? + &rows
                } else {
                    rows
                }
            }
            // serde escapes every string itself.
            (None, StatusFormat::Json) => {
                serde_json::to_string_pretty(&status_json(&report, &domains)?)? + "\n"
            }
            _ if args.prometheus => prometheus(&shown::report(&report)),
            _ => table(&shown::report(&report), &shown::domains(&domains), listed),
        })
    };
    let Some(every) = args.watch else {
        let out = render(&mut client, true)?;
        let _ = client.goodbye();
        return write_out(&out);
    };
    use std::io::IsTerminal;
    let redraw = csv.is_none() && std::io::stdout().is_terminal();
    let mut first = true;
    loop {
        let out = render(&mut client, first)?;
        if redraw {
            // Home and clear, then the table: it stays in place.
            write_out(&format!(
                "\x1b[H\x1b[2J{out}(every {:.1} s; Ctrl-C to stop)\n",
                every.as_secs_f64()
            ))?;
        } else if csv.is_some() {
            write_out(&out)?;
        } else {
            write_out(&format!("{}{out}", if first { "" } else { "\n" }))?;
        }
        first = false;
        std::thread::sleep(every);
    }
}

/// Clients the table lists one by one when stdout is not a terminal.
const SCREENFUL_CLIENTS: usize = 40;
/// Clients a summary lists, those using their units the most.
const TOP_CLIENTS: usize = 10;
/// Client ids a summary shows of a list of them (an accelerator's
/// associated clients, a domain's members).
const IDS_SHOWN: usize = 16;

/// How many clients fit on the screen: the terminal's height when stdout
/// is one, else [`SCREENFUL_CLIENTS`].
fn screenful() -> usize {
    use std::io::IsTerminal;
    let out = std::io::stdout();
    if out.is_terminal()
        && let Ok(size) = rustix::termios::tcgetwinsize(&out)
        && size.ws_row > 0
    {
        return usize::from(size.ws_row);
    }
    SCREENFUL_CLIENTS
}

/// How many clients the table lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Listing {
    /// Every client (`--all`).
    All,
    /// Every client up to this many; past it a summary: counts per unit
    /// and class, the [`TOP_CLIENTS`] using the most, and how many more.
    Screenful(usize),
}

/// A unit's name in a report ("?" for an id the report lacks).
fn unit_name(r: &StatusReport, id: hetsched_core::ids::UnitId) -> &str {
    r.units
        .get(id.index())
        .map_or("?", |u| u.info.name.as_str())
}

/// Width of the unit-name columns: the longest name, at least 12.
fn unit_width(r: &StatusReport) -> usize {
    r.units
        .iter()
        .map(|u| u.info.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(12)
}

/// Longest a unit's kind is shown: OpenCL and CUDA kinds carry the whole
/// device name.
const KIND_SHOWN: usize = 24;
/// Longest client name the table shows whole.
const NAME_SHOWN: usize = 32;

/// `text`, cut to `max` characters with an ellipsis when longer.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn pct(x: f64) -> String {
    format!("{:.1}", x * 100.0)
}

/// The status table. Strings other programs chose (client names above
/// all) must come escaped: `status` passes [`shown::report`] and
/// [`shown::domains`].
fn table(r: &StatusReport, domains: &[DomainInfo], listing: Listing) -> String {
    let summary = match listing {
        Listing::Screenful(fit) if r.clients.len() > fit => Some(fit.clamp(1, TOP_CLIENTS)),
        _ => None,
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "hetsched daemon {} (pid {}), up {:.1} s, socket {}",
        r.daemon.version,
        r.daemon.pid,
        r.daemon.uptime_ns as f64 / 1e9,
        r.daemon.socket
    );
    let uw = unit_width(r);
    let kinds: Vec<String> = r
        .units
        .iter()
        .map(|u| shorten(&u.info.kind, KIND_SHOWN))
        .collect();
    let kw = kinds
        .iter()
        .map(|k| k.chars().count())
        .max()
        .unwrap_or(0)
        .max(10);
    let _ = writeln!(
        s,
        "\n{:<uw$} {:<kw$} {:<11} {:<10} {:>5} {:>6} {:>10} {:>6} {:>12} {:>7}",
        "UNIT",
        "KIND",
        "CLASS",
        "POLICY",
        "SLOTS",
        "BUSY%",
        "AVG-TASK",
        "ACTIVE",
        "QUEUED C/N/B",
        "RUNNING"
    );
    for (u, kind) in r.units.iter().zip(&kinds) {
        let q = u.queued_by_class;
        let _ = writeln!(
            s,
            "{:<uw$} {:<kw$} {:<11} {:<10} {:>5} {:>6} {:>8.2}ms {:>6} {:>12} {:>7}",
            u.info.name,
            kind,
            u.info.class.name(),
            u.info.policy.name(),
            u.info.slots,
            pct(u.view.busy_fraction),
            u.view.avg_task_ns / 1e6,
            u.view.active_clients,
            format!("{}/{}/{}", q[0], q[1], q[2]),
            u.view.running
        );
    }
    let ids_shown = summary.map(|_| IDS_SHOWN);
    selection_table(&mut s, r, ids_shown);
    // The clients listed one by one: all of them, or the top ones.
    let listed: Vec<&ClientStatus> = match summary {
        Some(top) => top_clients(r, top),
        None => r.clients.iter().collect(),
    };
    if let Some(c) = &r.coordination {
        let only: Option<BTreeSet<ClientId>> =
            summary.map(|_| listed.iter().map(|c| c.id).collect());
        coordination_table(&mut s, r, c, only.as_ref());
    }
    if r.clients.is_empty() {
        let _ = writeln!(s, "\nno clients");
        return s;
    }
    if summary.is_some() {
        unit_class_counts(&mut s, r);
        let _ = writeln!(
            s,
            "\nthe {} clients using the most of their units:",
            listed.len()
        );
    }
    // Names as wide as the longest listed (up to NAME_SHOWN), so that the
    // columns after them line up.
    let nw = listed
        .iter()
        .map(|c| c.name.chars().count().min(NAME_SHOWN))
        .max()
        .unwrap_or(0)
        .max(4);
    let _ = writeln!(
        s,
        "\n{:<6} {:>8} {:>6} {:<nw$} {:<uw$} {:<14} {:>5} {:>6} {:>6} {:>5} {:>9}",
        "CLIENT",
        "PID",
        "UID",
        "NAME",
        "UNIT",
        "CLASS",
        "PRIO",
        "USED%",
        "GUAR%",
        "OUTST",
        "BUSY-S"
    );
    for c in &listed {
        for cu in &c.units {
            let unit = unit_name(r, cu.unit);
            let _ = writeln!(
                s,
                "{:<6} {:>8} {:>6} {:<nw$} {:<uw$} {:<14} {:>5} {:>6} {:>6} {:>5} {:>9.3}",
                c.id.0,
                c.pid,
                c.uid,
                shorten(&c.name, NAME_SHOWN),
                unit,
                cu.settings.class.to_string(),
                cu.settings.priority,
                pct(cu.view.current_utilisation),
                pct(cu.view.guaranteed),
                cu.outstanding,
                cu.busy_ns_total as f64 / 1e9
            );
        }
    }
    if summary.is_some() {
        let _ = writeln!(
            s,
            "… and {} more clients (hetsched status --all lists them)",
            r.clients.len() - listed.len()
        );
    }
    backend_table(&mut s, r, &listed, domains);
    intercept_table(&mut s, &listed);
    if !domains.is_empty() {
        s.push('\n');
        s.push_str(&domains_table(domains, ids_shown));
    }
    s
}

/// A client's use of its units, summed: what the summary ranks by.
fn utilisation(c: &ClientStatus) -> f64 {
    c.units.iter().map(|u| u.view.current_utilisation).sum()
}

/// The `n` clients using the most of their units now (then those charged
/// the most slot time, then the oldest ids), most first.
fn top_clients(r: &StatusReport, n: usize) -> Vec<&ClientStatus> {
    let busy = |c: &ClientStatus| c.units.iter().map(|u| u.busy_ns_total).sum::<u64>();
    let mut all: Vec<&ClientStatus> = r.clients.iter().collect();
    all.sort_by(|a, b| {
        utilisation(b)
            .total_cmp(&utilisation(a))
            .then(busy(b).cmp(&busy(a)))
            .then(a.id.cmp(&b.id))
    });
    all.truncate(n);
    all
}

/// The summary's counts: per unit, its clients by class, how many have
/// requests outstanding there (and how many requests), and the share of
/// the unit they use together.
fn unit_class_counts(s: &mut String, r: &StatusReport) {
    let uw = unit_width(r);
    let _ = writeln!(s, "\n{} clients, by unit and class:", r.clients.len());
    let _ = writeln!(
        s,
        "\n{:<uw$} {:>8} {:>8} {:>8} {:>10} {:>8} {:>6} {:>6}",
        "UNIT", "CLIENTS", "CUSTOM", "NORMAL", "BACKGROUND", "WAITING", "OUTST", "USED%"
    );
    for (i, u) in r.units.iter().enumerate() {
        let on: Vec<&ClientUnitStatus> = r
            .clients
            .iter()
            .filter_map(|c| c.units.iter().find(|cu| cu.unit.index() == i))
            .collect();
        let class =
            |want: fn(&WireClass) -> bool| on.iter().filter(|cu| want(&cu.settings.class)).count();
        let _ = writeln!(
            s,
            "{:<uw$} {:>8} {:>8} {:>8} {:>10} {:>8} {:>6} {:>6}",
            u.info.name,
            on.len(),
            class(|c| matches!(c, WireClass::Custom(_))),
            class(|c| matches!(c, WireClass::Normal(_))),
            class(|c| matches!(c, WireClass::Background)),
            on.iter().filter(|cu| cu.outstanding > 0).count(),
            on.iter().map(|cu| u64::from(cu.outstanding)).sum::<u64>(),
            pct(on.iter().map(|cu| cu.view.current_utilisation).sum())
        );
    }
}

/// Accelerator selection: per unit it may choose, the memory promised to
/// the clients associated with it, how many there are (of its cap), who,
/// and its weight now.
fn selection_table(s: &mut String, r: &StatusReport, ids_shown: Option<usize>) {
    let rows: Vec<_> = r
        .units
        .iter()
        .filter_map(|u| u.selection.as_ref().map(|sel| (u, sel)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let uw = unit_width(r);
    let _ = writeln!(
        s,
        "\n{:<uw$} {:>10} {:>10} {:>8} {:>10}  ASSOCIATED",
        "ACCELERATOR", "MEMORY-MB", "ALLOC-MB", "CLIENTS", "WEIGHT"
    );
    for (u, sel) in rows {
        let who: Vec<String> = sel.clients.iter().map(|c| c.0.to_string()).collect();
        let _ = writeln!(
            s,
            "{:<uw$} {:>10} {:>10} {:>8} {:>10.1}  {}",
            u.info.name,
            sel.memory_bytes >> 20,
            sel.allocated_bytes >> 20,
            format!("{}/{}", sel.clients.len(), sel.max_clients),
            sel.weight,
            some_ids(who, ",", ids_shown)
        );
    }
}

/// Clients of units under a Pegasus backend policy: credits, ticks
/// granted, accelerator time served and, under SLAF, the SLO state.
/// The listed clients that are unmodified programs under the OpenCL
/// layer or the CUDA interposer: the API and the device memory they hold.
fn intercept_table(s: &mut String, listed: &[&ClientStatus]) {
    let rows: Vec<_> = listed
        .iter()
        .filter_map(|&c| c.intercepted.map(|api| (c, api)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n{:<6} {:>8} {:<12} {:<11} {:>12} {:>12}",
        "CLIENT", "PID", "NAME", "INTERCEPTED", "DEV-MEM", "DEV-MEM-CAP"
    );
    for (c, api) in rows {
        let cap = c.device_memory_limit.map_or_else(
            || "-".to_string(),
            hetsched_protocol::byte_size::format_byte_size,
        );
        let _ = writeln!(
            s,
            "{:<6} {:>8} {:<12} {:<11} {:>12} {:>12}",
            c.id.0,
            c.pid,
            shorten(&c.name, 12),
            api.to_string(),
            hetsched_protocol::byte_size::format_byte_size(c.device_memory_bytes),
            cap
        );
    }
}

fn backend_table(
    s: &mut String,
    r: &StatusReport,
    listed: &[&ClientStatus],
    domains: &[DomainInfo],
) {
    let rows: Vec<_> = listed
        .iter()
        .flat_map(|&c| c.units.iter().map(move |cu| (c, cu)))
        .filter_map(|(c, cu)| cu.backend.map(|b| (c, cu.unit, b)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let uw = unit_width(r);
    let _ = writeln!(
        s,
        "\n{:<6} {:>8} {:<uw$} {:<8} {:<12} {:>10} {:>10} {:>8} {:>9} {:<12}",
        "CLIENT",
        "PID",
        "UNIT",
        "BACKEND",
        "DOMAIN",
        "ACC-CRED",
        "CPU-CRED",
        "TICKS",
        "SERVED-S",
        "SLO"
    );
    for (c, unit, b) in rows {
        let slo = match (b.config.slo, b.slo_met) {
            (Some(t), Some(true)) => format!("{}% met", pct(t)),
            (Some(t), Some(false)) => format!("{}% MISSED", pct(t)),
            (Some(t), None) => format!("{}%", pct(t)),
            (None, _) => "-".to_string(),
        };
        let _ = writeln!(
            s,
            "{:<6} {:>8} {:<uw$} {:<8} {:<12} {:>10} {:>10} {:>8} {:>9.3} {:<12}",
            c.id.0,
            c.pid,
            unit_name(r, unit),
            b.policy.name(),
            domain_of(domains, c.id).unwrap_or("-"),
            b.config.acc_credits,
            b.config.cpu_credits,
            b.ticks_granted,
            b.served_ns as f64 / 1e9,
            slo
        );
    }
}

/// The proportional-fair coordinator's state: the floor it could hold
/// everyone to (and whether "nobody below native" was feasible) and each
/// app's targets.
/// With `only`, the apps of those clients alone, and how many others.
fn coordination_table(
    s: &mut String,
    r: &StatusReport,
    c: &CoordinationStatus,
    only: Option<&BTreeSet<ClientId>>,
) {
    let floor = match (c.floor, c.floor_feasible) {
        (Some(f), Some(true)) => {
            format!("nobody below native: feasible (everyone held to ≥ {f:.2}x native)")
        }
        (Some(f), Some(false)) => format!(
            "nobody below native: INFEASIBLE, largest common floor {:.2}x native",
            f
        ),
        _ => "not solved yet (apps still profiling)".to_string(),
    };
    let _ = writeln!(
        s,
        "\ncoordination: proportional-fair, {} solve(s); {floor}",
        c.solves
    );
    if !c.short_first.is_empty() {
        let units: Vec<&str> = c.short_first.iter().map(|u| unit_name(r, *u)).collect();
        let _ = writeln!(
            s,
            "  short calls first on: {} (the other queues run in arrival order)",
            units.join(", ")
        );
    }
    for (u, policy) in reordering_units_in_targets(r, c) {
        let _ = writeln!(
            s,
            "  warning: {u} runs the {} policy, which interleaves clients by its own rules; the coordinator assumes arrival (or short-first) order, so an app with long calls there can fall below native (configure it fifo, short-first or share)",
            policy.name()
        );
    }
    let apps: Vec<&CoordinatedApp> = c
        .apps
        .iter()
        .filter(|a| only.is_none_or(|o| o.contains(&a.client)))
        .collect();
    for a in &apps {
        let mix: Vec<String> = a
            .fractions
            .iter()
            .enumerate()
            .filter(|(_, f)| **f > 0.0)
            .map(|(u, f)| format!("{} {}%", unit_name(r, UnitId(u as u16)), pct(*f)))
            .collect();
        let lied = if a.over_reported > 0 {
            format!(" (over-reported CPU time {}x, capped)", a.over_reported)
        } else {
            String::new()
        };
        let estimate = match (a.native, a.predicted_relative) {
            (Some(n), Some(r)) => format!(" (native est. {n:.1} calls/s, predicted {r:.2}x)"),
            _ => String::new(),
        };
        let targets = match a.rate {
            Some(rate) => format!("{rate:.1} calls/s{estimate}; {}", mix.join(", ")),
            None if !a.coordinated => {
                "not coordinated (it does not follow targets, or its class, priority or per-unit shares are the agents' to enforce)"
                    .to_string()
            }
            None => "no targets yet".to_string(),
        };
        let _ = writeln!(
            s,
            "  client {} (pid {}): {targets}{lied}",
            a.client.0, a.pid
        );
    }
    if apps.len() < c.apps.len() {
        let _ = writeln!(
            s,
            "  … and {} more apps (hetsched status --all lists them)",
            c.apps.len() - apps.len()
        );
    }
}

/// Units that some app's targets use whose policy reorders the apps the
/// coordinator places (Pegasus's ring and credit policies): its models
/// (fluid and replay) assume arrival or short-first order, and another
/// order can put a long-call app below native (docs/sim.md, "In the
/// daemon and the runtime").
fn reordering_units_in_targets<'a>(
    r: &'a StatusReport,
    c: &CoordinationStatus,
) -> Vec<(&'a str, hetsched_core::policy::PolicyKind)> {
    r.units
        .iter()
        .enumerate()
        .filter(|(i, u)| {
            !u.info.policy.keeps_coordination_order()
                && c.apps
                    .iter()
                    .any(|a| a.fractions.get(*i).is_some_and(|f| *f > 0.0))
        })
        .map(|(_, u)| (u.info.name.as_str(), u.info.policy))
        .collect()
}

/// The Prometheus text exposition of `r`, whose strings are already
/// shown escaped ([`shown::report`]); label values get the format's own
/// escapes, so a name can add no line and close no quote.
fn prometheus(r: &StatusReport) -> String {
    let mut s = String::new();
    let metric = |s: &mut String, name: &str, help: &str, kind: &str| {
        let _ = writeln!(
            s,
            "# HELP hetsched_{name} {help}\n# TYPE hetsched_{name} {kind}"
        );
    };
    metric(
        &mut s,
        "unit_busy_fraction",
        "Moving average of unit utilisation.",
        "gauge",
    );
    for u in &r.units {
        let _ = writeln!(
            s,
            "hetsched_unit_busy_fraction{{unit=\"{}\"}} {}",
            shown::label(&u.info.name),
            u.view.busy_fraction
        );
    }
    metric(
        &mut s,
        "unit_queued",
        "Requests waiting for the unit, by class.",
        "gauge",
    );
    for u in &r.units {
        for (class, n) in ["custom", "normal", "background"]
            .iter()
            .zip(u.queued_by_class)
        {
            let _ = writeln!(
                s,
                "hetsched_unit_queued{{unit=\"{}\",class=\"{class}\"}} {n}",
                shown::label(&u.info.name)
            );
        }
    }
    metric(
        &mut s,
        "unit_busy_seconds_total",
        "Slot time handed out since the daemon started.",
        "counter",
    );
    for u in &r.units {
        let _ = writeln!(
            s,
            "hetsched_unit_busy_seconds_total{{unit=\"{}\"}} {}",
            shown::label(&u.info.name),
            u.busy_ns_total as f64 / 1e9
        );
    }
    metric(
        &mut s,
        "client_busy_seconds_total",
        "Slot time charged to a client.",
        "counter",
    );
    for c in &r.clients {
        for cu in &c.units {
            let _ = writeln!(
                s,
                "hetsched_client_busy_seconds_total{{pid=\"{}\",name=\"{}\",unit=\"{}\"}} {}",
                c.pid,
                shown::label(&c.name),
                shown::label(unit_name(r, cu.unit)),
                cu.busy_ns_total as f64 / 1e9
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::ids::{ClientId, UnitId};
    use hetsched_protocol::{CoordinatedApp, DaemonStatus, UnitStatus};

    fn report(floor: Option<f64>, feasible: Option<bool>) -> StatusReport {
        StatusReport {
            daemon: DaemonStatus {
                version: "t".into(),
                pid: 1,
                uptime_ns: 0,
                socket: "s".into(),
            },
            units: Vec::new(),
            clients: Vec::new(),
            coordination: Some(CoordinationStatus {
                solves: 3,
                floor,
                floor_feasible: feasible,
                apps: vec![
                    CoordinatedApp {
                        client: ClientId(4),
                        pid: 40,
                        rate: Some(12.5),
                        fractions: vec![0.25, 0.75],
                        native: Some(10.0),
                        predicted_relative: Some(1.25),
                        over_reported: 2,
                        coordinated: true,
                    },
                    CoordinatedApp {
                        client: ClientId(5),
                        pid: 50,
                        rate: None,
                        fractions: Vec::new(),
                        native: None,
                        predicted_relative: None,
                        over_reported: 0,
                        coordinated: true,
                    },
                    CoordinatedApp {
                        client: ClientId(6),
                        pid: 60,
                        rate: None,
                        fractions: Vec::new(),
                        native: None,
                        predicted_relative: None,
                        over_reported: 0,
                        coordinated: false,
                    },
                ],
                short_first: Vec::new(),
            }),
        }
    }

    #[test]
    fn status_says_when_nobody_below_native_is_infeasible() {
        let text = table(&report(Some(0.62), Some(false)), &[], Listing::All);
        assert!(
            text.contains("INFEASIBLE, largest common floor 0.62x native"),
            "{text}"
        );
        assert!(
            text.contains(
                "client 4 (pid 40): 12.5 calls/s (native est. 10.0 calls/s, predicted 1.25x)"
            ),
            "{text}"
        );
        assert!(text.contains("over-reported CPU time 2x, capped"), "{text}");
        assert!(text.contains("client 5 (pid 50): no targets yet"), "{text}");
        assert!(
            text.contains("client 6 (pid 60): not coordinated"),
            "{text}"
        );
        let ok = table(&report(Some(1.05), Some(true)), &[], Listing::All);
        assert!(ok.contains("nobody below native: feasible"), "{ok}");
        let early = table(&report(None, None), &[], Listing::All);
        assert!(early.contains("not solved yet"), "{early}");
    }

    fn unit(id: u16, name: &str, kind: &str, slots: u32) -> UnitStatus {
        use hetsched_core::unit::UnitClass;
        UnitStatus {
            info: hetsched_protocol::UnitInfo::new(
                hetsched_core::ids::UnitId(id),
                name,
                kind,
                UnitClass::Accelerator,
            )
            .with_slots(slots),
            view: Default::default(),
            queued_by_class: [0; 3],
            busy_ns_total: 0,
            selection: None,
        }
    }

    #[test]
    fn status_warns_of_reordering_devices_in_the_targets() {
        use hetsched_core::policy::PolicyKind;
        let mut r = report(Some(1.05), Some(true));
        r.units = vec![unit(0, "gpu-a", "gpu", 1), unit(1, "gpu-b", "gpu", 1)];
        // Client 4's targets use both units; FIFO and share (which pools
        // coordinated apps) say nothing, a credit policy warns.
        assert!(!table(&r, &[], Listing::All).contains("warning"));
        r.units[1].info.policy = PolicyKind::Share;
        assert!(!table(&r, &[], Listing::All).contains("warning"));
        r.units[1].info.policy = PolicyKind::BackendAccC;
        let text = table(&r, &[], Listing::All);
        assert!(
            text.contains("warning: gpu-b runs the accc policy"),
            "{text}"
        );
        assert!(!text.contains("warning: gpu-a"), "{text}");
        // Units running short calls first are named, by name.
        assert!(!text.contains("short calls first"), "{text}");
        r.coordination.as_mut().unwrap().short_first = vec![UnitId(0)];
        let text = table(&r, &[], Listing::All);
        assert!(
            text.contains("short calls first on: gpu-a (the other queues"),
            "{text}"
        );
        // A reordering unit nobody's targets use says nothing.
        r.coordination.as_mut().unwrap().apps[0].fractions = vec![1.0, 0.0];
        assert!(!table(&r, &[], Listing::All).contains("warning"));
    }

    fn client(id: u32, name: &str) -> hetsched_protocol::ClientStatus {
        hetsched_protocol::ClientStatus {
            id: ClientId(id),
            pid: 100 + id,
            uid: 1000,
            name: name.into(),
            connected_ns: 0,
            intercepted: None,
            device_memory_bytes: 0,
            device_memory_limit: None,
            units: vec![hetsched_protocol::ClientUnitStatus {
                unit: UnitId(0),
                settings: hetsched_protocol::WireSettings {
                    class: hetsched_protocol::WireClass::Normal(10),
                    priority: 0,
                },
                view: Default::default(),
                busy_ns_total: 0,
                outstanding: 0,
                backend: None,
            }],
        }
    }

    /// Client names reach the table and the metrics escaped: no escape
    /// sequence, no extra line, no label closed early.
    #[test]
    fn intercepted_programs_are_listed_with_their_device_memory() {
        let mut r = report(None, None);
        r.coordination = None;
        r.units = vec![unit(0, "gpu0", "gpu", 1)];
        let mut clpeak = client(1, "clpeak");
        clpeak.intercepted = Some(hetsched_protocol::InterceptApi::OpenCl);
        clpeak.device_memory_bytes = 3 << 20;
        clpeak.device_memory_limit = Some(2 << 30);
        r.clients = vec![clpeak, client(2, "written-for-us")];
        let text = table(&shown::report(&r), &[], Listing::All);
        let row = text
            .lines()
            .find(|l| l.contains("clpeak") && l.contains("opencl"))
            .unwrap_or_else(|| panic!("no intercept row: {text}"));
        assert!(row.contains("3M") && row.contains("2G"), "{row}");
        assert!(
            !text
                .lines()
                .any(|l| l.contains("written-for-us") && l.contains("opencl")),
            "{text}"
        );
    }

    #[test]
    fn client_names_are_shown_escaped_in_the_table_and_the_metrics() {
        let mut r = report(None, None);
        r.coordination = None;
        r.units = vec![unit(0, "gpu0", "gpu", 1)];
        r.clients = vec![
            client(1, "\x1b[2J"),
            client(2, "a\nb"),
            client(3, "x\"} 1\nhetsched_fake 9"),
        ];
        let shown = shown::report(&r);
        let text = table(&shown, &[], Listing::All);
        assert!(!text.contains('\x1b'), "{text}");
        assert!(text.contains("\\u{1b}[2J"), "{text}");
        assert!(text.contains("a\\nb"), "{text}");
        assert!(!text.lines().any(|l| l.starts_with('b')), "{text}");
        let metrics = prometheus(&shown);
        for line in metrics.lines() {
            assert!(
                line.starts_with("# ") || line.starts_with("hetsched_"),
                "{line}"
            );
            assert!(!line.starts_with("hetsched_fake"), "{metrics}");
        }
        let client_lines: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("hetsched_client_busy_seconds_total{"))
            .collect();
        assert_eq!(client_lines.len(), 3, "{metrics}");
        assert!(
            client_lines[2].contains(r#"name="x\"} 1\\nhetsched_fake 9""#),
            "{metrics}"
        );
    }

    /// Past a screenful of clients the table counts them per unit and
    /// class, lists those using the most (names escaped as ever) and says
    /// how many more `--all` would list; up to a screenful, or with
    /// `--all`, it lists every one.
    #[test]
    fn past_a_screenful_the_table_summarises_the_clients() {
        use hetsched_protocol::WireClass;
        let mut r = report(None, None);
        r.units = vec![unit(0, "gpu0", "gpu", 1)];
        r.clients = (1..=50)
            .map(|i| {
                let mut c = client(i, &format!("app-{i:02}"));
                let cu = &mut c.units[0];
                cu.view.current_utilisation = f64::from(i) / 1000.0;
                cu.settings.class = match i % 10 {
                    0 => WireClass::Background,
                    1 => WireClass::Custom(1),
                    _ => WireClass::Normal(10),
                };
                cu.outstanding = u32::from(i % 5 == 0);
                c
            })
            .collect();
        // The busiest has a name that must not reach the terminal raw.
        r.clients[49].name = "evil\x1b[2J".into();
        // Apps of the clients not listed are counted, not listed.
        let coordination = r.coordination.as_mut().unwrap();
        coordination.apps[0].client = ClientId(50);
        coordination.apps[1].client = ClientId(1);
        coordination.apps[2].client = ClientId(2);
        let shown = shown::report(&r);
        let text = table(&shown, &[], Listing::Screenful(40));
        assert!(
            text.contains("… and 40 more clients (hetsched status --all lists them)"),
            "{text}"
        );
        // The ten busiest, most first, and no other.
        let listed: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("app-") || l.contains("evil"))
            .collect();
        assert_eq!(listed.len(), 10, "{text}");
        assert!(listed[0].contains("evil\\u{1b}[2J"), "{text}");
        assert!(
            listed[1].contains("app-49") && listed[9].contains("app-41"),
            "{text}"
        );
        assert!(!text.contains('\x1b'), "{text}");
        // gpu0: 50 clients, 5 custom, 40 normal, 5 background, 10 waiting
        // with a request each, using 1.275 of the unit together.
        let counts = text
            .lines()
            .find(|l| l.starts_with("gpu0") && l.contains(" 40 "))
            .unwrap();
        let cols: Vec<&str> = counts.split_whitespace().collect();
        assert_eq!(
            cols,
            ["gpu0", "50", "5", "40", "5", "10", "10", "127.5"],
            "{text}"
        );
        assert!(text.contains("client 50 (pid 40)"), "{text}");
        assert!(!text.contains("client 1 (pid 50)"), "{text}");
        assert!(text.contains("… and 2 more apps"), "{text}");
        // A screenful that holds them all, or --all: every client, no summary.
        for listing in [Listing::Screenful(50), Listing::All] {
            let full = table(&shown, &[], listing);
            assert!(!full.contains("more clients"), "{full}");
            assert_eq!(full.lines().filter(|l| l.contains("app-")).count(), 49);
            assert!(full.contains("client 1 (pid 50)"), "{full}");
        }
    }

    /// Long unit names and device kinds (served OpenCL units) keep the
    /// unit table's columns aligned; kinds longer than the limit are cut.
    #[test]
    fn long_unit_names_and_kinds_keep_the_columns_aligned() {
        let mut r = report(None, None);
        r.coordination = None;
        r.units = vec![
            unit(0, "cpu", "cpu", 2),
            unit(
                1,
                "served-opencl0",
                "opencl:pthread-skylake-avx512-AMD EPYC",
                1,
            ),
        ];
        let text = table(&r, &[], Listing::All);
        let lines: Vec<&str> = text.lines().collect();
        let header = lines.iter().position(|l| l.starts_with("UNIT")).unwrap();
        // Where the SLOTS column ends, in the header and in each row.
        let end = lines[header].find("SLOTS").unwrap() + "SLOTS".len();
        for row in &lines[header + 1..header + 3] {
            // By characters: a cut kind holds a multi-byte ellipsis.
            let upto: String = row.chars().take(end).collect();
            assert!(upto.ends_with('1') || upto.ends_with('2'), "{text}");
        }
        assert!(text.contains("opencl:pthread-skylake-… "), "{text}");
        assert_eq!(shorten("gpu", 24), "gpu");
    }
}
