//! The plain-text summary `hetsched sim run` prints.

use super::order::app_order;
use crate::report::{PolicyResult, ScenarioReport};

/// Header line, one row per policy, then the per-app `relative` matrix with
/// the oracle's per-app optimum as the last column. Non-finite numbers are
/// shown as `-`. Plain text, no colour, deterministic.
pub fn render_table(report: &ScenarioReport) -> String {
    let mut out = header_line(report);
    out.push_str("\n\n");
    out.push_str(&policy_table(report).render());
    // The first policy is the baseline of `relative` (`native` for task
    // scenarios, `linux-default` for thread-balance ones).
    let baseline = report
        .results
        .first()
        .map_or("native", |r| r.policy.as_str());
    out.push_str(&format!("\nrelative throughput per app (× {baseline})\n"));
    out.push_str(&relative_matrix(report).render());
    if report.results.iter().any(|r| !r.convergence.is_empty()) {
        out.push_str(
            "\nseconds until placement settled after each arrival or departure \
             (slowest app; * never settled)\n",
        );
        out.push_str(&convergence_table(report).render());
    }
    if !report.prediction_error_sweep.is_empty() {
        out.push_str(
            "\nsystem speedup (min relative) with every prediction off by up to ± the error\n",
        );
        out.push_str(&sweep_table(report).render());
    }
    out
}

/// Rows are model errors, columns the swept policies.
fn sweep_table(report: &ScenarioReport) -> TextTable {
    let sweep = &report.prediction_error_sweep;
    let mut policies: Vec<&str> = Vec::new();
    for p in sweep {
        if !policies.contains(&p.policy.as_str()) {
            policies.push(&p.policy);
        }
    }
    let mut header = vec!["model error"];
    header.extend(&policies);
    let mut table = TextTable::new(&header);
    let mut errors: Vec<f64> = sweep.iter().map(|p| p.model_error).collect();
    errors.dedup();
    for error in errors {
        let mut row = vec![format!("±{} %", fixed(error * 100.0, 0))];
        row.extend(policies.iter().map(|policy| {
            sweep
                .iter()
                .find(|p| p.model_error == error && p.policy == *policy)
                .map_or_else(
                    || "-".to_string(),
                    |p| {
                        format!(
                            "{}× ({})",
                            fixed(p.system_speedup, 2),
                            fixed(p.min_relative, 2)
                        )
                    },
                )
        }));
        table.push_row(row);
    }
    table
}

/// Rows are events (then the maximum), columns are policies.
fn convergence_table(report: &ScenarioReport) -> TextTable {
    let mut header = vec!["event"];
    header.extend(report.results.iter().map(|r| r.policy.as_str()));
    let mut table = TextTable::new(&header);
    let events = report
        .results
        .iter()
        .map(|r| r.convergence.len())
        .max()
        .unwrap_or(0);
    for i in 0..events {
        let Some(first) = report.results.iter().find_map(|r| r.convergence.get(i)) else {
            continue;
        };
        let mut row = vec![format!(
            "{} {}s at {} s",
            first.app,
            if first.event == "arrive" {
                "arrive"
            } else {
                "leave"
            },
            fixed(first.at_s, 1)
        )];
        row.extend(report.results.iter().map(|r| {
            r.convergence.get(i).map_or_else(
                || "-".to_string(),
                |e| {
                    let star = if e.unsettled.is_empty() { "" } else { "*" };
                    format!("{}{star}", fixed(e.max_settle_s, 2))
                },
            )
        }));
        table.push_row(row);
    }
    table.push_rule();
    let mut max = vec!["max".to_string()];
    max.extend(report.results.iter().map(|r| {
        r.max_settle_s
            .map_or_else(|| "-".to_string(), |s| fixed(s, 2))
    }));
    table.push_row(max);
    table
}

fn header_line(report: &ScenarioReport) -> String {
    // Thread-balance reports have no no-loser bound (NaN): say nothing
    // rather than "native infeasible".
    let no_loser = if report.oracle_no_loser_system_speedup.is_nan() {
        String::new()
    } else {
        format!(
            ", no-loser {} at floor {}{}",
            speedup(report.oracle_no_loser_system_speedup),
            fixed(report.oracle_no_loser_floor, 2),
            if report.oracle_no_loser_floor_feasible {
                ""
            } else {
                ", native infeasible"
            },
        )
    };
    let queue_aware = if report.oracle_queue_aware_system_speedup.is_nan() {
        String::new()
    } else {
        format!(
            ", queue-aware {} at floor {}",
            speedup(report.oracle_queue_aware_system_speedup),
            fixed(report.oracle_queue_aware_floor, 2),
        )
    };
    format!(
        "scenario {}: {} (seed {}, measured {} s, oracle system speedup {}{no_loser}{queue_aware})",
        report.scenario,
        report.description,
        report.seed,
        fixed(report.measured_s, 1),
        speedup(report.oracle_system_speedup),
    )
}

fn policy_table(report: &ScenarioReport) -> TextTable {
    let mut table = TextTable::new(&[
        "policy",
        "speedup",
        "min rel",
        "tasks/s",
        "% oracle",
        "changes/s",
        "pred err",
    ]);
    for result in &report.results {
        table.push_row(policy_row(result));
    }
    table
}

fn policy_row(result: &PolicyResult) -> Vec<String> {
    vec![
        result.policy.clone(),
        speedup(result.system_speedup),
        fixed(result.min_relative, 2),
        fixed(result.tasks_per_s, 1),
        percent(result.fraction_of_oracle),
        fixed(result.placement_changes_per_s, 2),
        result
            .mean_prediction_error
            .map_or_else(|| "-".to_string(), percent),
    ]
}

/// Rows are apps (then the geometric mean), columns are policies + oracle.
fn relative_matrix(report: &ScenarioReport) -> TextTable {
    let mut header = vec!["app"];
    header.extend(report.results.iter().map(|r| r.policy.as_str()));
    header.push("oracle");
    let mut table = TextTable::new(&header);

    for app in app_order(report) {
        let mut row = vec![app.to_string()];
        row.extend(report.results.iter().map(|r| {
            r.apps
                .get(app)
                .map_or_else(|| "-".to_string(), |a| fixed(a.relative, 2))
        }));
        row.push(
            report
                .oracle_apps
                .get(app)
                .map_or_else(|| "-".to_string(), |r| fixed(*r, 2)),
        );
        table.push_row(row);
    }

    table.push_rule();
    let mut geomean = vec!["geomean".to_string()];
    geomean.extend(report.results.iter().map(|r| fixed(r.system_speedup, 2)));
    geomean.push(fixed(report.oracle_system_speedup, 2));
    table.push_row(geomean);
    table
}

/// `x` with `decimals` places, or `-` when it is NaN or infinite.
fn fixed(x: f64, decimals: usize) -> String {
    if x.is_finite() {
        format!("{x:.decimals$}")
    } else {
        "-".to_string()
    }
}

fn speedup(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}×")
    } else {
        "-".to_string()
    }
}

/// A fraction shown as a percentage.
fn percent(fraction: f64) -> String {
    if fraction.is_finite() {
        format!("{:.1}%", fraction * 100.0)
    } else {
        "-".to_string()
    }
}

enum Row {
    Cells(Vec<String>),
    Rule,
}

/// A column-aligned text table: first column left-aligned (names), the rest
/// right-aligned (numbers). Widths count chars, not bytes, because of `×`.
struct TextTable {
    header: Vec<String>,
    rows: Vec<Row>,
}

impl TextTable {
    const GAP: &'static str = "  ";

    fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    fn push_row(&mut self, cells: Vec<String>) {
        self.rows.push(Row::Cells(cells));
    }

    fn push_rule(&mut self) {
        self.rows.push(Row::Rule);
    }

    fn column_widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            if let Row::Cells(cells) = row {
                for (i, cell) in cells.iter().enumerate() {
                    if i >= widths.len() {
                        widths.push(0);
                    }
                    widths[i] = widths[i].max(cell.chars().count());
                }
            }
        }
        widths
    }

    fn render(&self) -> String {
        let widths = self.column_widths();
        let total = widths.iter().sum::<usize>() + Self::GAP.len() * widths.len().saturating_sub(1);
        let rule = "-".repeat(total);
        let mut out = Self::render_cells(&self.header, &widths);
        out.push_str(&rule);
        out.push('\n');
        for row in &self.rows {
            match row {
                Row::Cells(cells) => out.push_str(&Self::render_cells(cells, &widths)),
                Row::Rule => {
                    out.push_str(&rule);
                    out.push('\n');
                }
            }
        }
        out
    }

    fn render_cells(cells: &[String], widths: &[usize]) -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (cell, &width))| {
                if i == 0 {
                    format!("{cell:<width$}")
                } else {
                    format!("{cell:>width$}")
                }
            })
            .collect();
        let mut line = padded.join(Self::GAP).trim_end().to_string();
        line.push('\n');
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::{poisoned_report, sample_report};

    #[test]
    fn table_names_every_policy_and_app_with_formatted_numbers() {
        let table = render_table(&sample_report());
        for name in [
            "native",
            "hetsched",
            "bfs",
            "mm, \"big\"",
            "kmeans",
            "oracle",
            "geomean",
        ] {
            assert!(table.contains(name), "missing {name}:\n{table}");
        }
        for number in [
            "1.44×", "1.60×", "45.5", "90.1%", "62.5%", "0.25", "8.3%", "1.63", "1.80",
        ] {
            assert!(table.contains(number), "missing {number}:\n{table}");
        }
        assert!(table.starts_with("scenario mixed-3: three apps share a CPU and a GPU (seed 42"));
    }

    #[test]
    fn policy_rows_are_in_report_order_with_dash_for_missing_prediction() {
        let table = render_table(&sample_report());
        let native = table.lines().find(|l| l.starts_with("native ")).unwrap();
        assert!(native.trim_end().ends_with('-'), "{native}");
        let native_at = table.find("native ").unwrap();
        let hetsched_at = table.find("hetsched ").unwrap();
        assert!(native_at < hetsched_at);
    }

    #[test]
    fn columns_line_up() {
        let table = render_table(&sample_report());
        let policy_block: Vec<&str> = table.lines().skip(2).take(4).collect();
        let widths: Vec<usize> = policy_block.iter().map(|l| l.chars().count()).collect();
        assert!(widths.iter().all(|&w| w == widths[0]), "{policy_block:#?}");
    }

    #[test]
    fn app_rows_follow_scenario_order_and_end_with_oracle() {
        let table = render_table(&sample_report());
        let bfs = table.lines().find(|l| l.starts_with("bfs ")).unwrap();
        let cells: Vec<&str> = bfs.split_whitespace().collect();
        assert_eq!(cells, ["bfs", "1.00", "1.20", "1.30"]);
        let bfs_at = table.find("\nbfs ").unwrap();
        let mm_at = table.find("\nmm, ").unwrap();
        let kmeans_at = table.find("\nkmeans ").unwrap();
        assert!(bfs_at < mm_at && mm_at < kmeans_at);
    }

    #[test]
    fn non_finite_numbers_render_as_dash() {
        let table = render_table(&poisoned_report());
        assert!(!table.contains("NaN") && !table.contains("inf"), "{table}");
        let hetsched = table.lines().find(|l| l.starts_with("hetsched ")).unwrap();
        assert_eq!(hetsched.split_whitespace().nth(1), Some("-"));
        assert!(table.contains("measured - s"));
    }

    #[test]
    fn rendering_is_deterministic() {
        assert_eq!(
            render_table(&sample_report()),
            render_table(&sample_report())
        );
    }
}
