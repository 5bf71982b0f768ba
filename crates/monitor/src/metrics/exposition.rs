//! A [`MetricsSnapshot`] in the OpenMetrics text format (which Prometheus
//! scrapes), through `prometheus-client`: it escapes label values and
//! writes the `_total`, `_info` and histogram suffixes.

use super::ledger::{UnitServed, WAIT_BOUNDS_NS, WaitHistogram};
use super::snapshot::{MetricsSnapshot, Standing, UnitMetrics};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::fmt::Error;

/// The content type of [`render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

const NS_PER_S: f64 = 1e9;

/// The exposition of `snapshot`, ending with `# EOF`.
pub fn render(snapshot: &MetricsSnapshot) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape(snapshot.clone())));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("writing to a String does not fail");
    out
}

#[derive(Debug)]
struct Scrape(MetricsSnapshot);

type Labels<'a> = Vec<(&'static str, &'a str)>;

/// One metric family: its series, each with labels and a value.
fn family<'a, V>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    series: impl IntoIterator<Item = (Labels<'a>, V)>,
    mut write: impl FnMut(MetricEncoder, V) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut m = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, value) in series {
        write(m.encode_family(&labels)?, value)?;
    }
    Ok(())
}

fn gauge<'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels<'a>, f64)>,
) -> Result<(), Error> {
    family(
        encoder,
        name,
        help,
        MetricType::Gauge,
        series,
        |mut e, v| e.encode_gauge(&v),
    )
}

fn counter<'a>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (Labels<'a>, f64)>,
) -> Result<(), Error> {
    family(
        encoder,
        name,
        help,
        MetricType::Counter,
        series,
        |mut e, v| e.encode_counter::<NoLabelSet, _, f64>(&v, None),
    )
}

fn histogram(mut e: MetricEncoder, h: WaitHistogram) -> Result<(), Error> {
    let buckets: Vec<(f64, u64)> = WAIT_BOUNDS_NS
        .iter()
        .map(|&b| b as f64 / NS_PER_S)
        .chain([f64::INFINITY])
        .zip(h.counts)
        .collect();
    e.encode_histogram::<NoLabelSet>(h.sum_ns as f64 / NS_PER_S, h.count(), &buckets, None)
}

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), Error> {
        let s = &self.0;
        let unit_name = |u: usize| s.units.get(u).map_or("", |x| x.name.as_str());

        let mut info = enc.encode_descriptor(
            "hetsched_build",
            "The daemon's version.",
            None,
            MetricType::Info,
        )?;
        info.encode_info(&vec![("version", s.version)])?;
        gauge(
            &mut enc,
            "hetsched_uptime_seconds",
            "Seconds since the daemon started.",
            [(vec![], s.uptime_ns as f64 / NS_PER_S)],
        )?;
        gauge(
            &mut enc,
            "hetsched_clients",
            "Connected clients by role.",
            [
                (vec![("role", "application")], f64::from(s.applications)),
                (vec![("role", "observer")], f64::from(s.observers)),
            ],
        )?;

        // Units.
        fn unit_labels(u: &UnitMetrics) -> Labels<'_> {
            vec![
                ("unit", u.name.as_str()),
                ("kind", u.kind.as_str()),
                ("class", u.class),
            ]
        }
        gauge(
            &mut enc,
            "hetsched_unit_utilization",
            "Fraction of the unit's capacity in use (moving average).",
            s.units.iter().map(|u| (unit_labels(u), u.utilization)),
        )?;
        gauge(
            &mut enc,
            "hetsched_unit_queue_length",
            "Requests waiting for a slot of the unit.",
            s.units
                .iter()
                .map(|u| (vec![("unit", u.name.as_str())], f64::from(u.queued))),
        )?;
        gauge(
            &mut enc,
            "hetsched_unit_running",
            "Requests holding a slot of the unit.",
            s.units
                .iter()
                .map(|u| (vec![("unit", u.name.as_str())], f64::from(u.running))),
        )?;
        counter(
            &mut enc,
            "hetsched_unit_tasks",
            "Requests the unit finished.",
            s.units
                .iter()
                .map(|u| (vec![("unit", u.name.as_str())], u.tasks_total as f64)),
        )?;
        counter(
            &mut enc,
            "hetsched_unit_device_seconds",
            "Slot time the unit served.",
            s.units.iter().map(|u| {
                (
                    vec![("unit", u.name.as_str())],
                    u.busy_ns_total as f64 / NS_PER_S,
                )
            }),
        )?;

        counter(
            &mut enc,
            "hetsched_unit_revoked",
            "Slots the unit took back from clients that held them past its hold limit.",
            s.units
                .iter()
                .map(|u| (vec![("unit", u.name.as_str())], u.revoked_total as f64)),
        )?;

        // Clients, by name: totals of those gone and those connected.
        let per_unit = |f: fn(&UnitServed) -> f64| {
            s.served.iter().flat_map(move |c| {
                c.units.iter().enumerate().map(move |(u, x)| {
                    (
                        vec![("client", c.client.as_str()), ("unit", unit_name(u))],
                        f(x),
                    )
                })
            })
        };
        counter(
            &mut enc,
            "hetsched_client_tasks",
            "Requests of the clients of this name the unit finished.",
            per_unit(|x| x.tasks as f64),
        )?;
        counter(
            &mut enc,
            "hetsched_client_device_seconds",
            "Slot time the unit charged the clients of this name.",
            per_unit(|x| x.busy_ns as f64 / NS_PER_S),
        )?;
        family(
            &mut enc,
            "hetsched_client_wait_seconds",
            "How long the requests of the clients of this name waited for a slot, all units.",
            MetricType::Histogram,
            s.served.iter().map(|c| {
                let mut all = WaitHistogram::default();
                for x in &c.units {
                    all.add(&x.wait);
                }
                (vec![("client", c.client.as_str())], all)
            }),
            histogram,
        )?;

        // Connected clients' standing, by name and class.
        let standing = |f: fn(&Standing) -> f64| {
            s.standings.iter().map(move |x| {
                (
                    vec![
                        ("client", x.client.as_str()),
                        ("class", x.class),
                        ("unit", unit_name(x.unit)),
                    ],
                    f(x),
                )
            })
        };
        gauge(
            &mut enc,
            "hetsched_client_shares",
            "Shares of the connected clients of this name and class (CUSTOM: percent).",
            standing(|x| x.shares as f64),
        )?;
        gauge(
            &mut enc,
            "hetsched_client_guaranteed_fraction",
            "Fraction of the unit they are guaranteed while it is contended.",
            standing(|x| x.guaranteed),
        )?;
        gauge(
            &mut enc,
            "hetsched_client_achieved_fraction",
            "Fraction of the unit they used recently.",
            standing(|x| x.achieved),
        )?;

        gauge(
            &mut enc,
            "hetsched_client_device_memory_bytes",
            "Device memory the intercepted clients of this name hold on the unit (their interposer's count).",
            s.device_memory.iter().map(|m| {
                (
                    vec![("client", m.client.as_str()), ("unit", unit_name(m.unit))],
                    m.bytes as f64,
                )
            }),
        )?;

        if let Some(c) = &s.coordination {
            counter(
                &mut enc,
                "hetsched_coordination_solves",
                "Times proportional-fair coordination solved the allocation.",
                [(vec![], c.solves as f64)],
            )?;
            counter(
                &mut enc,
                "hetsched_coordination_warm_solves",
                "Of those solves, the ones made warm in the last full pick's shape.",
                [(vec![], c.warm_solves as f64)],
            )?;
            gauge(
                &mut enc,
                "hetsched_coordination_floor",
                "Floor of the last solve, times each application's native throughput.",
                c.floor.map(|f| (vec![], f)),
            )?;
            gauge(
                &mut enc,
                "hetsched_coordination_floor_reached",
                "1 when the last solve kept every application at or above native.",
                c.floor_feasible.map(|f| (vec![], f64::from(u8::from(f)))),
            )?;
            gauge(
                &mut enc,
                "hetsched_coordination_solve_seconds",
                "Computing time of the last solve (a pick in slices: all its slices).",
                c.last_solve_ns.map(|ns| (vec![], ns as f64 / NS_PER_S)),
            )?;
            gauge(
                &mut enc,
                "hetsched_coordination_outside_cpu_cores",
                "CPU load from work outside coordination, taken out of the CPU unit's supply (cores).",
                c.cpu_supply
                    .iter()
                    .map(|x| (vec![("unit", unit_name(x.unit))], x.outside_cores)),
            )?;
            gauge(
                &mut enc,
                "hetsched_coordination_cpu_offered_cores",
                "Cores of the CPU unit the coordinated applications are offered.",
                c.cpu_supply
                    .iter()
                    .map(|x| (vec![("unit", unit_name(x.unit))], x.offered_slots)),
            )?;
            gauge(
                &mut enc,
                "hetsched_coordination_target_fraction",
                "Fraction of its calls the targets send to the unit (mean over the clients of this name).",
                c.targets.iter().map(|t| {
                    (
                        vec![("client", t.client.as_str()), ("unit", unit_name(t.unit))],
                        t.fraction,
                    )
                }),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::snapshot::{CoordinationMetrics, CpuSupply, DeviceMemory, UnitMetrics};

    fn unit(name: &str, class: &'static str) -> UnitMetrics {
        UnitMetrics {
            name: name.into(),
            kind: name.into(),
            class,
            utilization: 0.0,
            queued: 0,
            running: 0,
            tasks_total: 0,
            busy_ns_total: 0,
            revoked_total: 0,
        }
    }

    #[test]
    fn the_outside_cpu_load_and_the_cores_left_are_shown_per_cpu_unit() {
        let text = render(&MetricsSnapshot {
            version: "0",
            uptime_ns: 0,
            units: vec![unit("cpu", "cpu"), unit("gpu0", "gpu")],
            applications: 0,
            observers: 0,
            served: Vec::new(),
            standings: Vec::new(),
            device_memory: Vec::new(),
            coordination: Some(CoordinationMetrics {
                solves: 3,
                floor: Some(1.0),
                floor_feasible: Some(true),
                last_solve_ns: None,
                warm_solves: 2,
                targets: Vec::new(),
                cpu_supply: vec![CpuSupply {
                    unit: 0,
                    outside_cores: 1.25,
                    offered_slots: 0.75,
                }],
            }),
        });
        let line = |series: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
                .map(str::to_string)
        };
        assert_eq!(
            line("hetsched_coordination_outside_cpu_cores{unit=\"cpu\"}").as_deref(),
            Some("1.25"),
            "{text}"
        );
        assert_eq!(
            line("hetsched_coordination_cpu_offered_cores{unit=\"cpu\"}").as_deref(),
            Some("0.75"),
            "{text}"
        );
        assert_eq!(
            line("hetsched_coordination_outside_cpu_cores{unit=\"gpu0\"}"),
            None,
            "a device has no CPU supply: {text}"
        );
        // Of the three solves, two were warm.
        assert_eq!(
            line("hetsched_coordination_solves_total").as_deref(),
            Some("3.0"),
            "{text}"
        );
        assert_eq!(
            line("hetsched_coordination_warm_solves_total").as_deref(),
            Some("2.0"),
            "{text}"
        );
    }

    #[test]
    fn intercepted_clients_device_memory_is_shown_per_name_and_unit() {
        let text = render(&MetricsSnapshot {
            version: "0",
            uptime_ns: 0,
            units: vec![unit("cpu", "cpu"), unit("opencl0", "accelerator")],
            applications: 1,
            observers: 0,
            served: Vec::new(),
            standings: Vec::new(),
            device_memory: vec![DeviceMemory {
                client: "train".into(),
                unit: 1,
                bytes: 1032,
            }],
            coordination: None,
        });
        assert!(
            text.lines().any(|l| l
                == "hetsched_client_device_memory_bytes{client=\"train\",unit=\"opencl0\"} 1032.0"),
            "{text}"
        );
    }
}
