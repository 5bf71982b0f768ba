//! The order in which apps and units appear in every output.
//!
//! The report lists apps and units in scenario/machine order; that order is
//! used first. Names that only show up inside results (a report assembled by
//! hand, or a policy that invented a unit) are appended in sorted order rather
//! than silently dropped, so no data is lost from the table or the plots.

use crate::report::ScenarioReport;

/// Apps in scenario order, then any app mentioned only inside results.
pub(crate) fn app_order(report: &ScenarioReport) -> Vec<&str> {
    let listed = report.apps.iter().map(String::as_str);
    let mentioned = report
        .oracle_apps
        .keys()
        .chain(report.results.iter().flat_map(|r| r.apps.keys()))
        .chain(
            report
                .results
                .iter()
                .flat_map(|r| r.unit_time.values().flat_map(|m| m.keys())),
        )
        .chain(
            report
                .results
                .iter()
                .flat_map(|r| r.timeline.iter().map(|s| &s.app)),
        )
        .map(String::as_str);
    listed_then_extra(listed, mentioned)
}

/// Units in machine order, then any unit mentioned only inside results.
pub(crate) fn unit_order(report: &ScenarioReport) -> Vec<&str> {
    let listed = report.units.iter().map(String::as_str);
    let mentioned = report
        .results
        .iter()
        .flat_map(|r| {
            r.unit_time
                .keys()
                .chain(r.apps.values().flat_map(|a| a.unit_mix.keys()))
                .chain(r.timeline.iter().map(|s| &s.unit))
        })
        .map(String::as_str);
    listed_then_extra(listed, mentioned)
}

fn listed_then_extra<'a>(
    listed: impl Iterator<Item = &'a str>,
    mentioned: impl Iterator<Item = &'a str>,
) -> Vec<&'a str> {
    let mut order: Vec<&str> = Vec::new();
    for name in listed {
        if !order.contains(&name) {
            order.push(name);
        }
    }
    let mut extra: Vec<&str> = mentioned.filter(|name| !order.contains(name)).collect();
    extra.sort_unstable();
    extra.dedup();
    order.extend(extra);
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::tests::sample_report;

    #[test]
    fn listed_order_wins_and_extras_are_appended_sorted() {
        let mut report = sample_report();
        report.apps = vec!["kmeans".into(), "bfs".into()];
        report.units = vec!["gpu".into()];
        assert_eq!(app_order(&report), ["kmeans", "bfs", "mm, \"big\""]);
        assert_eq!(unit_order(&report), ["gpu", "cpu"]);
    }
}
