//! What an application reports of its demand (`ReportDemand`), checked and
//! kept per client under the state lock for the coordinator
//! (`coordinator`, with the `coordination` feature) to take.

use hetsched_core::ids::UnitId;
use hetsched_protocol::UnitDemand;

/// A client's latest `ReportDemand`.
#[derive(Clone, Debug, PartialEq)]
pub struct DemandReport {
    pub units: Vec<UnitDemand>,
    pub in_flight: f64,
    pub implemented: Vec<UnitId>,
    /// The unit it runs on without hetsched, if it said.
    pub native: Option<UnitId>,
}

/// Checks a `ReportDemand` before it is kept: every unit must exist.
pub(crate) fn check_report(
    units: &[UnitDemand],
    implemented: &[UnitId],
    n_units: usize,
) -> Result<(), String> {
    let named = units
        .iter()
        .map(|d| d.unit)
        .chain(implemented.iter().copied());
    if let Some(bad) = named.clone().find(|u| u.index() >= n_units) {
        return Err(format!("unknown unit {} in the demand report", bad.0));
    }
    if named.count() > n_units * 4 {
        return Err(format!(
            "{} entries in a demand report for {n_units} units",
            units.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_naming_unknown_units_are_refused() {
        let ok = [UnitDemand {
            unit: UnitId(1),
            calls: 1,
            exec_ns: 1.0,
        }];
        assert!(check_report(&ok, &[UnitId(0)], 2).is_ok());
        assert!(
            check_report(&ok, &[], 1)
                .unwrap_err()
                .contains("unknown unit 1")
        );
        assert!(
            check_report(&[], &[UnitId(5)], 2)
                .unwrap_err()
                .contains("unknown unit 5")
        );
        assert!(check_report(&[ok[0]; 9], &[], 2).is_err());
    }
}
