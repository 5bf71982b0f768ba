//! The placement formula's parity table, `turnaround_cases.txt`, as
//! [`TurnaroundInput`]s and the figures every copy must give. Shared by
//! the core's and the C API's tests (`#[path]`); the Python package's
//! tests read the same file.

use hetsched_core::turnaround::{TurnaroundInput, UnitLoad};
use hetsched_core::view::ClientUnitView;

/// The figures a case must give.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Expected {
    pub turnaround_ns: f64,
    pub rate_per_s: f64,
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    pub input: TurnaroundInput,
    /// `None`: the kind is untried and no figure may come out.
    pub expected: Option<Expected>,
}

fn number(field: &str, line: &str) -> f64 {
    field
        .parse()
        .unwrap_or_else(|_| panic!("bad number {field:?} in {line:?}"))
}

/// Every case of the table.
pub fn cases() -> Vec<Case> {
    let text = include_str!("../turnaround_cases.txt");
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 12, "{line:?} has {} fields, not 12", f.len());
        let (a, b, c) = (number(f[7], line), number(f[8], line), number(f[9], line));
        let load = match f[1] {
            "cpu" => UnitLoad::RunnableThreads(a),
            "backlog" => UnitLoad::Backlog(a),
            "view" => UnitLoad::View(ClientUnitView {
                guaranteed: a,
                wait_ns: b,
                max_utilisation: c,
                ..ClientUnitView::OPEN
            }),
            other => panic!("unknown load {other:?} in {line:?}"),
        };
        let expected = match (f[10], f[11]) {
            ("-", "-") => None,
            (t, r) => Some(Expected {
                turnaround_ns: number(t, line),
                rate_per_s: number(r, line),
            }),
        };
        out.push(Case {
            name: f[0].to_string(),
            input: TurnaroundInput {
                exec_ns: number(f[3], line),
                dispatch_ns: number(f[4], line),
                copy_ns: number(f[5], line),
                ahead_ns: number(f[6], line),
                slots: f[2].parse().expect("slots"),
                load,
            },
            expected,
        });
    }
    assert!(out.len() >= 10, "the table lost its cases");
    out
}

/// Equal within rounding (relative 1e-9).
pub fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-9 * want.abs().max(1.0)
}
