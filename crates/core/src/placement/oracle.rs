//! The placer as it was written before its pass over the units was made
//! fast: the straightforward formula, kept as the oracle the fast path is
//! checked against (`tests.rs`). Each unit is predicted through the full
//! [`turnaround`] (stretch and rate included) and scored by matching the
//! goal per unit; the stabilisers are the code they were then.

use super::{
    DataLocation, Decision, Goal, PlacementError, Placer, Prediction, Reason, TaskRequest,
};
use crate::ids::UnitId;
use crate::task_model::PerformanceModel;
use crate::turnaround::{TurnaroundInput, UnitLoad, turnaround};
use crate::unit::Unit;
use crate::view::ClientUnitView;

/// [`super::Score`], as the oracle compares scores.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ReferenceScore {
    missed: bool,
    value: f64,
}

impl ReferenceScore {
    fn better_than(self, other: ReferenceScore) -> bool {
        if self.missed == other.missed {
            self.value < other.value
        } else {
            other.missed
        }
    }
}

fn copy_to_unit_ns(units: &[Unit], unit: &Unit, bytes: u64, data_at: DataLocation) -> f64 {
    match data_at {
        DataLocation::Unit(at) if at == unit.id => 0.0,
        DataLocation::Unit(at) => {
            // Back to the host first, then on to the target if it needs a copy.
            units[at.index()].copy_out_ns(bytes) + unit.copy_in_ns(bytes)
        }
        DataLocation::Host => unit.copy_in_ns(bytes),
    }
}

fn holds_data(unit: &Unit, data_at: DataLocation) -> bool {
    match data_at {
        DataLocation::Unit(at) => at == unit.id,
        DataLocation::Host => unit.coherent,
    }
}

pub(super) fn reference_predict<M: PerformanceModel + ?Sized>(
    units: &[Unit],
    unit: &Unit,
    view: &ClientUnitView,
    model: &M,
    task: &TaskRequest,
) -> Option<Prediction> {
    let exec_ns = model.predict_ns(unit.kind, task.bytes)?;
    let copy_ns =
        copy_to_unit_ns(units, unit, task.bytes, task.data_at) + unit.copy_out_ns(task.out_bytes);
    let dispatch_ns = unit.dispatch_ns as f64;
    // The one placement formula: crate::turnaround::turnaround.
    let t = turnaround(&TurnaroundInput {
        exec_ns,
        dispatch_ns,
        copy_ns,
        ahead_ns: 0.0,
        slots: unit.slots,
        load: UnitLoad::View(*view),
    })?;
    Some(Prediction {
        unit: unit.id,
        exec_ns,
        copy_ns,
        dispatch_ns,
        stretched_ns: t.stretched_ns,
        turnaround_ns: t.turnaround_ns,
    })
}

fn reference_score(p: &Prediction, unit: &Unit, goal: Goal, turnaround_ns: f64) -> ReferenceScore {
    let value = match goal {
        Goal::MinLatency => turnaround_ns,
        Goal::MaxThroughput => {
            // Pipelined tasks hide latencies; what limits throughput is the
            // unit time a task costs and the link bandwidth it uses.
            p.stretched_ns + (p.copy_ns - unit.copy_in.latency_ns as f64).max(0.0)
        }
        Goal::Deadline { deadline_ns } if turnaround_ns > deadline_ns => {
            // Nobody may meet it: then the least late wins.
            return ReferenceScore {
                missed: true,
                value: turnaround_ns,
            };
        }
        Goal::Deadline { .. } => unit.busy_watts * p.exec_ns,
        Goal::MinEnergy => unit.busy_watts * p.exec_ns,
    };
    ReferenceScore {
        missed: false,
        value,
    }
}

impl Placer {
    pub(super) fn reference_decide<M: PerformanceModel + ?Sized>(
        &mut self,
        units: &[Unit],
        views: &[ClientUnitView],
        model: &M,
        task: &TaskRequest,
    ) -> Result<Decision, PlacementError> {
        if views.len() != units.len() {
            return Err(PlacementError::ViewMismatch {
                views: views.len(),
                units: units.len(),
            });
        }
        if let Some(current) = self.current
            && self.group_left > 0
            && task.implemented.contains(current)
        {
            // Learn every implemented kind before trusting predictions,
            // even within a group (the loop below checks the same, in the
            // same order, when there is no group to continue).
            if let Some(unit) = units.iter().find(|u| {
                task.implemented.contains(u.id) && model.predict_ns(u.kind, task.bytes).is_none()
            }) {
                return Ok(self.reference_commit(unit.id, Reason::Profiling, f64::NAN, 1));
            }
            self.group_left -= 1;
            return Ok(Decision {
                unit: current,
                reason: Reason::Aggregated,
                predicted_ns: f64::NAN,
            });
        }

        let mut best: Option<(ReferenceScore, Prediction)> = None;
        let mut resident: Option<(ReferenceScore, Prediction)> = None;
        for (unit, view) in units.iter().zip(views) {
            if !task.implemented.contains(unit.id) {
                continue;
            }
            let Some(p) = reference_predict(units, unit, view, model, task) else {
                // Learn every implemented kind before trusting predictions.
                return Ok(self.reference_commit(unit.id, Reason::Profiling, f64::NAN, 1));
            };
            let turnaround = self.reference_damped(unit.id, p.turnaround_ns);
            let s = reference_score(&p, unit, task.goal, turnaround);
            if best.is_none_or(|(b, _)| s.better_than(b)) {
                best = Some((s, p));
            }
            if task.persistent
                && holds_data(unit, task.data_at)
                && resident.is_none_or(|(r, _)| s.better_than(r))
            {
                resident = Some((s, p));
            }
        }
        self.decisions += 1;
        let Some((_, best_p)) = best else {
            return Err(PlacementError::NoImplementation { units: units.len() });
        };
        let (chosen, reason) = match (resident, self.config.speedup_threshold) {
            (Some(stay), Some(threshold)) => {
                self.reference_threshold(units, views, model, task, stay, threshold)
            }
            _ => (best_p, Reason::Best),
        };
        let group = self.reference_group(units, &chosen, task);
        Ok(self.reference_commit(chosen.unit, reason, chosen.turnaround_ns, group))
    }

    fn reference_threshold<M: PerformanceModel + ?Sized>(
        &self,
        units: &[Unit],
        views: &[ClientUnitView],
        model: &M,
        task: &TaskRequest,
        stay: (ReferenceScore, Prediction),
        threshold: f64,
    ) -> (Prediction, Reason) {
        let (stay_score, stay_p) = stay;
        let mut best: Option<(ReferenceScore, Prediction)> = None;
        for (unit, view) in units.iter().zip(views) {
            if unit.id == stay_p.unit || !task.implemented.contains(unit.id) {
                continue;
            }
            let Some(p) = reference_predict(units, unit, view, model, task) else {
                continue;
            };
            let move_copy = copy_to_unit_ns(units, unit, task.bytes, task.data_at);
            let steady = p.turnaround_ns - move_copy;
            let s = reference_score(&p, unit, task.goal, self.reference_damped(unit.id, steady));
            if best.is_none_or(|(b, _)| s.better_than(b)) {
                best = Some((
                    s,
                    Prediction {
                        turnaround_ns: steady,
                        copy_ns: move_copy,
                        ..p
                    },
                ));
            }
        }
        let Some((other_score, other_p)) = best else {
            return (stay_p, Reason::Best);
        };
        if !other_score.better_than(stay_score) {
            return (stay_p, Reason::Best);
        }
        let gain = stay_score.value - other_score.value;
        let clear = stay_score.missed
            || (stay_score.value >= threshold * other_score.value
                && gain * self.config.amortise_tasks >= other_p.copy_ns);
        if clear {
            let turnaround_ns = other_p.turnaround_ns + other_p.copy_ns;
            (
                Prediction {
                    turnaround_ns,
                    ..other_p
                },
                Reason::Best,
            )
        } else {
            (stay_p, Reason::Threshold)
        }
    }

    fn reference_damped(&self, unit: UnitId, predicted_ns: f64) -> f64 {
        match self.damping.get(unit.index()) {
            Some(d) if self.decisions < d.until_decision => predicted_ns.max(d.actual_ns),
            _ => predicted_ns,
        }
    }

    fn reference_group(&self, units: &[Unit], chosen: &Prediction, task: &TaskRequest) -> u32 {
        let Some(factor) = self.config.aggregation_factor else {
            return 1;
        };
        if !task.persistent {
            return 1;
        }
        let unit = &units[chosen.unit.index()];
        let data_after = if unit.coherent {
            DataLocation::Host
        } else {
            DataLocation::Unit(unit.id)
        };
        let move_cost = units
            .iter()
            .filter(|u| task.implemented.contains(u.id))
            .map(|u| copy_to_unit_ns(units, u, task.bytes, data_after))
            .fold(0.0, f64::max);
        let ratio = move_cost / chosen.turnaround_ns.max(1.0);
        ((ratio * factor).ceil() as u32).clamp(1, self.config.max_group.max(1))
    }

    fn reference_commit(
        &mut self,
        unit: UnitId,
        reason: Reason,
        predicted_ns: f64,
        group: u32,
    ) -> Decision {
        self.current = Some(unit);
        self.group_left = group.saturating_sub(1);
        Decision {
            unit,
            reason,
            predicted_ns,
        }
    }
}
