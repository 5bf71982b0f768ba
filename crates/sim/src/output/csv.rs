//! CSV files for further analysis (pandas, R, spreadsheets).
//!
//! Hand-rolled rather than pulling in a CSV crate: we only ever write a few
//! flat tables, and RFC 4180 quoting is a dozen lines. Fields containing a
//! comma, quote or line break are wrapped in quotes with inner quotes doubled.
//! Lines end in `\n` (every mainstream reader accepts it). Floats use Rust's
//! shortest round-trip form, so non-finite values appear as `NaN`/`inf`/`-inf`,
//! which pandas and R both read back as such.

use super::order::{app_order, unit_order};
use crate::report::{PolicyResult, ScenarioReport};
use std::borrow::Cow;

/// The `app` value of the per-policy totals row in `results.csv`.
pub const SYSTEM_ROW: &str = "*system*";

const RESULTS_HEADER: [&str; 10] = [
    "scenario",
    "seed",
    "policy",
    "app",
    "tasks_per_s",
    "relative",
    "tasks",
    "mean_turnaround_ms",
    "unit_changes",
    "settled_after_tasks",
];
const UNIT_TIME_HEADER: [&str; 4] = ["policy", "unit", "app", "fraction"];
const TIMELINE_HEADER: [&str; 5] = ["policy", "app", "unit", "start_s", "end_s"];

/// One row per (policy, app) in scenario app order, each policy followed by a
/// `*system*` row: `relative` = system speedup, `tasks_per_s` = total, `tasks`
/// and `unit_changes` = sums over apps; turnaround and settling have no
/// meaningful system-wide value and are left empty.
pub fn render_results_csv(report: &ScenarioReport) -> String {
    let apps = app_order(report);
    let mut csv = CsvText::with_header(&RESULTS_HEADER);
    for result in &report.results {
        for app in &apps {
            if let Some(r) = result.apps.get(*app) {
                csv.push_row([
                    report.scenario.clone(),
                    report.seed.to_string(),
                    result.policy.clone(),
                    app.to_string(),
                    r.tasks_per_s.to_string(),
                    r.relative.to_string(),
                    r.tasks.to_string(),
                    r.mean_turnaround_ms.to_string(),
                    r.unit_changes.to_string(),
                    r.settled_after_tasks.to_string(),
                ]);
            }
        }
        csv.push_row(system_row(report, result));
    }
    csv.finish()
}

fn system_row(report: &ScenarioReport, result: &PolicyResult) -> [String; 10] {
    let tasks: u64 = result.apps.values().map(|a| a.tasks).sum();
    let unit_changes: u64 = result.apps.values().map(|a| a.unit_changes).sum();
    [
        report.scenario.clone(),
        report.seed.to_string(),
        result.policy.clone(),
        SYSTEM_ROW.to_string(),
        result.tasks_per_s.to_string(),
        result.system_speedup.to_string(),
        tasks.to_string(),
        String::new(),
        unit_changes.to_string(),
        String::new(),
    ]
}

/// Per policy, unit and app the fraction of the unit's capacity used
/// (Rinnegan Fig. 6), in machine unit order and scenario app order.
pub fn render_unit_time_csv(report: &ScenarioReport) -> String {
    let units = unit_order(report);
    let apps = app_order(report);
    let mut csv = CsvText::with_header(&UNIT_TIME_HEADER);
    for result in &report.results {
        for unit in &units {
            let Some(per_app) = result.unit_time.get(*unit) else {
                continue;
            };
            for app in &apps {
                if let Some(fraction) = per_app.get(*app) {
                    csv.push_row([
                        result.policy.clone(),
                        unit.to_string(),
                        app.to_string(),
                        fraction.to_string(),
                    ]);
                }
            }
        }
    }
    csv.finish()
}

/// Every timeline segment of every policy, in the order the simulator
/// recorded them.
pub fn render_timeline_csv(report: &ScenarioReport) -> String {
    let mut csv = CsvText::with_header(&TIMELINE_HEADER);
    for result in &report.results {
        for segment in &result.timeline {
            csv.push_row([
                result.policy.clone(),
                segment.app.clone(),
                segment.unit.clone(),
                segment.start_s.to_string(),
                segment.end_s.to_string(),
            ]);
        }
    }
    csv.finish()
}

/// Accumulates CSV lines.
struct CsvText {
    text: String,
}

impl CsvText {
    fn with_header(header: &[&str]) -> Self {
        let mut csv = Self {
            text: String::new(),
        };
        csv.push_row(header.iter().copied());
        csv
    }

    fn push_row<S: AsRef<str>>(&mut self, fields: impl IntoIterator<Item = S>) {
        for (i, field) in fields.into_iter().enumerate() {
            if i > 0 {
                self.text.push(',');
            }
            self.text.push_str(&quote_field(field.as_ref()));
        }
        self.text.push('\n');
    }

    fn finish(self) -> String {
        self.text
    }
}

/// RFC 4180 quoting: only when needed, so ordinary files stay readable.
fn quote_field(field: &str) -> Cow<'_, str> {
    if field.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", field.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::{poisoned_report, sample_report};

    /// A minimal RFC 4180 reader, independent of the writer, to check that
    /// what we write parses back into the fields we meant.
    fn parse_csv(text: &str) -> Vec<Vec<String>> {
        let mut rows = Vec::new();
        let mut row = Vec::new();
        let mut field = String::new();
        let mut in_quotes = false;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match (in_quotes, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => in_quotes = false,
                (true, c) => field.push(c),
                (false, '"') => in_quotes = true,
                (false, ',') => row.push(std::mem::take(&mut field)),
                (false, '\n') => {
                    row.push(std::mem::take(&mut field));
                    rows.push(std::mem::take(&mut row));
                }
                (false, c) => field.push(c),
            }
        }
        assert!(
            !in_quotes && field.is_empty() && row.is_empty(),
            "unterminated last row"
        );
        rows
    }

    #[test]
    fn quoting_only_when_needed() {
        assert_eq!(quote_field("bfs"), "bfs");
        assert_eq!(quote_field("a,b"), "\"a,b\"");
        assert_eq!(quote_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(quote_field("two\nlines"), "\"two\nlines\"");
    }

    #[test]
    fn results_csv_has_header_app_rows_and_system_rows() {
        let rows = parse_csv(&render_results_csv(&sample_report()));
        assert_eq!(rows[0], RESULTS_HEADER);
        // 2 policies × (3 apps + 1 system row).
        assert_eq!(rows.len(), 1 + 2 * 4);
        assert!(rows.iter().all(|r| r.len() == RESULTS_HEADER.len()));

        assert_eq!(rows[2][3], "mm, \"big\"", "quoted app name parses back");
        let hetsched_kmeans = &rows[7];
        assert_eq!(
            hetsched_kmeans,
            &[
                "mixed-3", "42", "hetsched", "kmeans", "24.5", "1.6333", "245", "12.5", "3", "40"
            ]
        );
        let hetsched_system = &rows[8];
        assert_eq!(
            hetsched_system,
            &[
                "mixed-3", "42", "hetsched", SYSTEM_ROW, "45.5", "1.4422", "455", "", "9", ""
            ]
        );
    }

    #[test]
    fn unit_time_csv_lists_every_fraction_in_unit_then_app_order() {
        let rows = parse_csv(&render_unit_time_csv(&sample_report()));
        assert_eq!(rows[0], UNIT_TIME_HEADER);
        assert_eq!(rows.len(), 1 + 3 + 3);
        assert_eq!(rows[1], ["native", "cpu", "bfs", "0.5"]);
        assert_eq!(rows[2], ["native", "cpu", "kmeans", "0.5"]);
        assert_eq!(rows[3], ["native", "gpu", "mm, \"big\"", "1"]);
        assert_eq!(rows[6], ["hetsched", "gpu", "bfs", "0.2"]);
    }

    #[test]
    fn timeline_csv_has_one_row_per_segment() {
        let rows = parse_csv(&render_timeline_csv(&sample_report()));
        assert_eq!(rows[0], TIMELINE_HEADER);
        assert_eq!(rows.len(), 1 + 3 + 4);
        assert_eq!(rows[4], ["hetsched", "bfs", "gpu", "0", "3"]);
    }

    #[test]
    fn non_finite_values_are_written_readably() {
        let report = poisoned_report();
        let rows = parse_csv(&render_results_csv(&report));
        let system = rows
            .iter()
            .find(|r| r[2] == "hetsched" && r[3] == SYSTEM_ROW)
            .unwrap();
        assert_eq!(system[5], "NaN");
        let timeline = parse_csv(&render_timeline_csv(&report));
        assert_eq!(timeline.last().unwrap()[4], "inf");
    }

    #[test]
    fn empty_report_gives_header_only() {
        let mut report = sample_report();
        report.results.clear();
        assert_eq!(parse_csv(&render_results_csv(&report)).len(), 1);
        assert_eq!(parse_csv(&render_unit_time_csv(&report)).len(), 1);
        assert_eq!(parse_csv(&render_timeline_csv(&report)).len(), 1);
    }
}
