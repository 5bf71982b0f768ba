//! What an application reports of its demand (`ReportDemand`), checked and
//! kept per client ([`DemandReports`], under a lock of its own) for the
//! coordinator (`coordinator`, with the `coordination` feature) to take.

use hetsched_core::ids::{ClientId, UnitId};
use hetsched_protocol::UnitDemand;
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

/// A client's latest `ReportDemand`.
#[derive(Clone, Debug, PartialEq)]
pub struct DemandReport {
    pub units: Vec<UnitDemand>,
    pub in_flight: f64,
    pub implemented: Vec<UnitId>,
    /// The unit it runs on without hetsched, if it said.
    pub native: Option<UnitId>,
}

/// The latest report of each client that sent one since the coordinator
/// last took them. Its lock is a leaf of the daemon's lock order
/// ([`crate::server`]): held for one insertion or one swap, nothing else
/// is taken under it.
#[derive(Debug, Default)]
pub(crate) struct DemandReports(Mutex<BTreeMap<ClientId, DemandReport>>);

impl DemandReports {
    /// Keeps `report` in place of any earlier one of `client` (its
    /// counters are cumulative: the latest report is all that matters).
    pub fn put(&self, client: ClientId, report: DemandReport) {
        self.lock().insert(client, report);
    }

    /// Takes every report kept so far.
    #[cfg_attr(not(feature = "coordination"), allow(dead_code))]
    pub fn take(&self) -> BTreeMap<ClientId, DemandReport> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<ClientId, DemandReport>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
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

    #[test]
    fn the_latest_report_of_each_client_is_taken_once() {
        let reports = DemandReports::default();
        let report = |in_flight| DemandReport {
            units: vec![],
            in_flight,
            implemented: vec![],
            native: None,
        };
        reports.put(ClientId(1), report(1.0));
        reports.put(ClientId(1), report(2.0));
        reports.put(ClientId(2), report(3.0));
        let taken = reports.take();
        assert_eq!(taken.len(), 2);
        assert_eq!(taken[&ClientId(1)].in_flight, 2.0);
        assert!(reports.take().is_empty());
    }
}
