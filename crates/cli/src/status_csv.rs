//! `hetsched status --format csv [--clients] [--fields a,b,c]`: the status
//! report as CSV, one row per unit or per client and unit, with the columns
//! asked for (as nvidia-smi's `--query-gpu=… --format=csv`).

use anyhow::{Result, bail};
use hetsched_protocol::{
    ClientStatus, ClientUnitStatus, DomainInfo, StatusReport, UnitStatus, WireClass, domain_of,
};

/// One column: its name, what it holds, and how to get its value from a
/// row (`F`: a function of the row).
struct Column<F> {
    name: &'static str,
    help: &'static str,
    value: F,
}

type UnitValue = fn(&UnitStatus) -> String;
type ClientValue = for<'a, 'r> fn(&'r ClientRow<'a>) -> String;

/// A row of the client table: one client on one unit.
pub struct ClientRow<'a> {
    client: &'a ClientStatus,
    on: &'a ClientUnitStatus,
    unit: &'a str,
    domain: Option<&'a str>,
}

fn secs(ns: u64) -> String {
    format!("{:.6}", ns as f64 / 1e9)
}

fn class_name(c: WireClass) -> &'static str {
    match c {
        WireClass::Custom(_) => "custom",
        WireClass::Normal(_) => "normal",
        WireClass::Background => "background",
    }
}

fn shares(c: WireClass) -> String {
    match c {
        WireClass::Custom(s) | WireClass::Normal(s) => s.to_string(),
        WireClass::Background => "0".into(),
    }
}

const UNIT_COLUMNS: &[Column<UnitValue>] = &[
    Column {
        name: "unit",
        help: "unit name",
        value: |u| u.info.name.clone(),
    },
    Column {
        name: "id",
        help: "unit id",
        value: |u| u.info.id.0.to_string(),
    },
    Column {
        name: "kind",
        help: "device or CPU kind",
        value: |u| u.info.kind.clone(),
    },
    Column {
        name: "class",
        help: "cpu, gpu or accelerator",
        value: |u| u.info.class.name().into(),
    },
    Column {
        name: "policy",
        help: "the agent's policy",
        value: |u| u.info.policy.name().into(),
    },
    Column {
        name: "slots",
        help: "tasks that may run at once",
        value: |u| u.info.slots.to_string(),
    },
    Column {
        name: "utilization",
        help: "fraction of capacity in use (moving average)",
        value: |u| format!("{:.4}", u.view.busy_fraction),
    },
    Column {
        name: "avg_task_ms",
        help: "average task time",
        value: |u| format!("{:.3}", u.view.avg_task_ns / 1e6),
    },
    Column {
        name: "active_clients",
        help: "clients with work there lately",
        value: |u| u.view.active_clients.to_string(),
    },
    Column {
        name: "queued",
        help: "requests waiting",
        value: |u| u.view.queued.to_string(),
    },
    Column {
        name: "queued_custom",
        help: "waiting requests of CUSTOM clients",
        value: |u| u.queued_by_class[0].to_string(),
    },
    Column {
        name: "queued_normal",
        help: "waiting requests of NORMAL clients",
        value: |u| u.queued_by_class[1].to_string(),
    },
    Column {
        name: "queued_background",
        help: "waiting requests of BACKGROUND clients",
        value: |u| u.queued_by_class[2].to_string(),
    },
    Column {
        name: "running",
        help: "requests holding a slot",
        value: |u| u.view.running.to_string(),
    },
    Column {
        name: "busy_s",
        help: "slot time served since the daemon started, s",
        value: |u| secs(u.busy_ns_total),
    },
    Column {
        name: "caps",
        help: "capability names, space-separated",
        value: |u| u.info.caps.names().join(" "),
    },
];

const CLIENT_COLUMNS: &[Column<ClientValue>] = &[
    Column {
        name: "client",
        help: "client id",
        value: |r| r.client.id.0.to_string(),
    },
    Column {
        name: "pid",
        help: "process id",
        value: |r| r.client.pid.to_string(),
    },
    Column {
        name: "uid",
        help: "user id",
        value: |r| r.client.uid.to_string(),
    },
    Column {
        name: "name",
        help: "the name it connected with",
        value: |r| r.client.name.clone(),
    },
    Column {
        name: "unit",
        help: "unit name",
        value: |r| r.unit.to_string(),
    },
    Column {
        name: "class",
        help: "custom, normal or background",
        value: |r| class_name(r.on.settings.class).into(),
    },
    Column {
        name: "shares",
        help: "CUSTOM: percent; NORMAL: weight; BACKGROUND: 0",
        value: |r| shares(r.on.settings.class),
    },
    Column {
        name: "priority",
        help: "priority under the priority policy",
        value: |r| r.on.settings.priority.to_string(),
    },
    Column {
        name: "achieved",
        help: "fraction of the unit it used recently",
        value: |r| format!("{:.4}", r.on.view.current_utilisation),
    },
    Column {
        name: "guaranteed",
        help: "fraction of the unit it is guaranteed under contention",
        value: |r| format!("{:.4}", r.on.view.guaranteed),
    },
    Column {
        name: "outstanding",
        help: "requests queued or running",
        value: |r| r.on.outstanding.to_string(),
    },
    Column {
        name: "busy_s",
        help: "slot time charged since it connected, s",
        value: |r| secs(r.on.busy_ns_total),
    },
    Column {
        name: "domain",
        help: "its container domain, empty if none",
        value: |r| r.domain.unwrap_or("").to_string(),
    },
];

const UNIT_DEFAULT: &str = "unit,kind,class,policy,slots,utilization,queued,running,busy_s";
const CLIENT_DEFAULT: &str =
    "client,pid,name,unit,class,shares,priority,achieved,guaranteed,outstanding,busy_s";

/// Which rows and columns: `fields` as given (`None`: the default set).
pub struct CsvLayout {
    clients: bool,
    fields: Vec<String>,
}

/// The columns' names and meanings, for `--fields help`.
pub fn help(clients: bool) -> String {
    let lines: Vec<String> = if clients {
        CLIENT_COLUMNS
            .iter()
            .map(|c| format!("{:<18} {}", c.name, c.help))
            .collect()
    } else {
        UNIT_COLUMNS
            .iter()
            .map(|c| format!("{:<18} {}", c.name, c.help))
            .collect()
    };
    let default = if clients {
        CLIENT_DEFAULT
    } else {
        UNIT_DEFAULT
    };
    format!("{}\ndefault: {default}\n", lines.join("\n"))
}

impl CsvLayout {
    /// Checks every field name, so a typo is an error rather than a
    /// missing column.
    pub fn new(clients: bool, fields: Option<&[String]>) -> Result<CsvLayout> {
        let fields: Vec<String> = match fields {
            Some(f) => f.iter().map(|s| s.trim().to_string()).collect(),
            None => (if clients {
                CLIENT_DEFAULT
            } else {
                UNIT_DEFAULT
            })
            .split(',')
            .map(str::to_string)
            .collect(),
        };
        let known: Vec<&str> = if clients {
            CLIENT_COLUMNS.iter().map(|c| c.name).collect()
        } else {
            UNIT_COLUMNS.iter().map(|c| c.name).collect()
        };
        if fields.is_empty() {
            bail!("--fields is empty");
        }
        for f in &fields {
            if !known.contains(&f.as_str()) {
                bail!(
                    "unknown {} field {f:?}; the fields are: {}",
                    if clients { "client" } else { "unit" },
                    known.join(", ")
                );
            }
        }
        Ok(CsvLayout { clients, fields })
    }

    /// The header line.
    pub fn header(&self) -> Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&self.fields)?;
        Ok(String::from_utf8(w.into_inner()?)?)
    }

    /// The rows of `report`, without the header.
    pub fn rows(&self, report: &StatusReport, domains: &[DomainInfo]) -> Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        if self.clients {
            let cols = pick(CLIENT_COLUMNS, &self.fields);
            for c in &report.clients {
                for on in &c.units {
                    let unit = report
                        .units
                        .iter()
                        .find(|u| u.info.id == on.unit)
                        .map_or("?", |u| u.info.name.as_str());
                    let row = ClientRow {
                        client: c,
                        on,
                        unit,
                        domain: domain_of(domains, c.id),
                    };
                    w.write_record(cols.iter().map(|col| (col.value)(&row)))?;
                }
            }
        } else {
            let cols = pick(UNIT_COLUMNS, &self.fields);
            for u in &report.units {
                w.write_record(cols.iter().map(|col| (col.value)(u)))?;
            }
        }
        Ok(String::from_utf8(w.into_inner()?)?)
    }
}

fn pick<'c, F>(all: &'c [Column<F>], fields: &[String]) -> Vec<&'c Column<F>> {
    fields
        .iter()
        .filter_map(|f| all.iter().find(|c| c.name == f))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_are_refused_with_the_list() {
        let e = CsvLayout::new(false, Some(&["unit".into(), "utilisation".into()]))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("unknown unit field \"utilisation\""), "{e}");
        assert!(e.contains("utilization"), "{e}");
        assert!(CsvLayout::new(true, Some(&["pid".into(), "achieved".into()])).is_ok());
        assert!(CsvLayout::new(false, Some(&[])).is_err());
    }

    #[test]
    fn every_default_field_exists() {
        assert!(CsvLayout::new(false, None).is_ok());
        assert!(CsvLayout::new(true, None).is_ok());
        assert!(help(true).contains("achieved"));
    }
}
