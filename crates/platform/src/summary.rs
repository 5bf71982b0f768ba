//! Human-readable listing of a [`Platform`] (what `hetsched status` and
//! `hetsched calibrate` print; `--json` serialises the platform instead).

use crate::platform::{CalibrationOrigin, Platform};
use hetsched_core::unit::{LinkCost, Unit};
use std::fmt::{self, Display, Write};

fn fmt_ns(ns: u64) -> String {
    if ns >= 1_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else if ns >= 1_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{ns} ns")
    }
}

fn fmt_bytes(b: u64) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

fn fmt_link(l: &LinkCost) -> String {
    format!(
        "{} + {:.1} GB/s",
        fmt_ns(l.latency_ns),
        l.bytes_per_s() / 1e9
    )
}

fn fmt_copy(u: &Unit) -> String {
    if u.coherent {
        "coherent".to_string()
    } else if u.copy_in == u.copy_out {
        fmt_link(&u.copy_in)
    } else {
        format!("in {}, out {}", fmt_link(&u.copy_in), fmt_link(&u.copy_out))
    }
}

/// Compresses sorted CPU numbers into kernel list syntax (`0-3,8`).
fn fmt_cpu_list(cpus: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        let _ = if j > i {
            write!(out, "{}-{}", cpus[i], cpus[j])
        } else {
            write!(out, "{}", cpus[i])
        };
        i = j + 1;
    }
    out
}

impl Platform {
    /// The listing as a string (same text as `Display`).
    pub fn summary_table(&self) -> String {
        self.to_string()
    }
}

impl Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = &self.machine;
        let rows: Vec<[String; 9]> = m
            .units
            .iter()
            .map(|u| {
                let caps = u.caps.names();
                [
                    u.id.0.to_string(),
                    u.name.clone(),
                    m.kinds[u.kind.index()].name.clone(),
                    u.class.name().to_string(),
                    u.slots.to_string(),
                    format!("{:.2}", u.relative_speed),
                    if caps.is_empty() {
                        "-".to_string()
                    } else {
                        caps.join(",")
                    },
                    fmt_ns(u.dispatch_ns),
                    fmt_copy(u),
                ]
            })
            .collect();
        let header = [
            "id", "unit", "kind", "class", "slots", "speed", "caps", "dispatch", "copy",
        ];
        let mut widths = header.map(str::len);
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |f: &mut fmt::Formatter<'_>, cells: &[&str]| -> fmt::Result {
            let mut s = String::new();
            for (i, (c, w)) in cells.iter().zip(widths).enumerate() {
                if i + 1 == cells.len() {
                    s.push_str(c);
                } else {
                    let pad = w - c.chars().count();
                    let _ = write!(s, "{c}{}  ", " ".repeat(pad));
                }
            }
            writeln!(f, "{}", s.trim_end())
        };
        line(f, &header)?;
        for r in &rows {
            line(f, &r.iter().map(String::as_str).collect::<Vec<_>>())?;
        }

        if !self.cpu_kinds.is_empty() {
            writeln!(f, "\nCPU kinds (speed from {}):", self.speed_basis.name())?;
        }
        for k in &self.cpu_kinds {
            write!(f, "  {}: PUs {}", k.name, fmt_cpu_list(&k.os_indices))?;
            if let Some(e) = k.efficiency {
                write!(f, ", efficiency rank {e}")?;
            }
            if let Some(c) = self.cpus.iter().find(|c| c.kind == k.kind) {
                for (name, size) in [
                    ("L1d", c.caches.l1d),
                    ("L2", c.caches.l2),
                    ("L3", c.caches.l3),
                ] {
                    if let Some(s) = size {
                        write!(f, ", {name} {}", fmt_bytes(s))?;
                    }
                }
            }
            for (key, value) in &k.infos {
                write!(f, ", {key}={value}")?;
            }
            if let Some(kc) = self.calibration.as_ref().and_then(|c| c.kind(&k.name)) {
                write!(
                    f,
                    "; dispatch p50 {} p99 {}, memcpy {:.1} GB/s{}",
                    fmt_ns(kc.dispatch_ns),
                    fmt_ns(kc.dispatch_p99_ns),
                    kc.memcpy_bytes_per_s / 1e9,
                    if kc.pinned { "" } else { " (unpinned)" }
                )?;
            }
            writeln!(f)?;
        }
        match &self.calibration_origin {
            CalibrationOrigin::None if self.cpu_kinds.is_empty() => {}
            CalibrationOrigin::None => writeln!(f, "calibration: none")?,
            CalibrationOrigin::Measured => writeln!(f, "calibration: measured now")?,
            CalibrationOrigin::Cache(p) => writeln!(f, "calibration: from cache {}", p.display())?,
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_compress() {
        assert_eq!(fmt_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(fmt_cpu_list(&[5]), "5");
        assert_eq!(fmt_cpu_list(&[]), "");
    }

    #[test]
    fn units_of_time_and_size() {
        assert_eq!(fmt_ns(950), "950 ns");
        assert_eq!(fmt_ns(4_200), "4.2 µs");
        assert_eq!(fmt_bytes(32 << 10), "32 KiB");
        assert_eq!(fmt_bytes(32 << 20), "32 MiB");
    }
}
