//! The proportional-fair bound of a scenario: the fluid allocation of unit
//! time that maximises Σ log rᵢ, solved by hetsched-core's convex solver.
//! Where apps come and go inside the measured window, the program spans
//! the window phase by phase ([`phases`]).

pub mod phases;

use crate::metrics::ReportApp;
use crate::scenario::Scenario;
use hetsched_core::coordination::{UnitSupply, coordination_weights, nonpreemptive_limits};
use hetsched_core::fairness::{
    FairError, FairProblem, LinearLimit, NoLoserSolution, solve_no_loser_weighted,
    solve_proportional_fair_limited,
};
use hetsched_core::policy::{ClientSettings, PolicyKind};
use phases::Expanded;

/// The bound: geometric-mean relative throughput and each app's rᵢ.
#[derive(Clone, Debug)]
pub struct Bound {
    pub system_speedup: f64,
    pub relative: Vec<f64>,
}

/// The no-loser bound: PF subject to rᵢ ≥ 1, or to the largest common
/// floor when that is infeasible.
#[derive(Clone, Debug)]
pub struct NoLoserBound {
    pub system_speedup: f64,
    pub relative: Vec<f64>,
    pub floor: f64,
    pub floor_feasible: bool,
}

/// A solve's bound for `n` apps; NaN everywhere when the solver failed.
fn bound_of(solved: Result<NoLoserSolution, FairError>, n: usize) -> NoLoserBound {
    match solved {
        Ok(s) => NoLoserBound {
            system_speedup: s.solution.system_speedup,
            relative: s.solution.relative,
            floor: s.floor,
            floor_feasible: s.floor_feasible,
        },
        Err(_) => NoLoserBound {
            system_speedup: f64::NAN,
            relative: vec![f64::NAN; n],
            floor: f64::NAN,
            floor_feasible: false,
        },
    }
}

/// The apps' weights in Σ wᵢ ln rᵢ, as hetsched-pf weighs them (from their
/// classes and shares; 1 for an app with a priority); empty when every
/// app weighs the same, so that an unweighted scenario's bounds are
/// solved exactly as the unweighted problem.
pub fn weights(sc: &Scenario, apps: &[ReportApp]) -> Vec<f64> {
    let settings: Vec<&[ClientSettings]> = apps
        .iter()
        .map(|a| sc.apps[a.app].settings.as_slice())
        .collect();
    let w: Vec<f64> = coordination_weights(&settings)
        .into_iter()
        .map(|w| w.unwrap_or(1.0))
        .collect();
    if w.windows(2).all(|p| p[0] == p[1]) {
        Vec::new()
    } else {
        w
    }
}

/// What the bounds solve: the fluid model of every app at once, and,
/// where apps come and go inside the window, that model over the window's
/// phases ([`Expanded`]), which is then what is solved.
struct Program {
    steady: FairProblem,
    phased: Option<(Expanded, Vec<phases::Phase>)>,
}

impl Program {
    fn of(sc: &Scenario, apps: &[ReportApp], native: &[f64]) -> Program {
        let steady = problem(sc, apps, native);
        let phases = phases::phases(sc, apps);
        let phased = (phases.len() >= 2)
            .then(|| Expanded::of(&steady, &phases).map(|window| (window, phases)))
            .flatten();
        Program { steady, phased }
    }

    /// The program solved, and the rows every bound over it obeys.
    fn problem(&self) -> (&FairProblem, &[LinearLimit]) {
        match &self.phased {
            None => (&self.steady, &[]),
            Some((window, _)) => (&window.problem, &window.flight),
        }
    }

    /// Those rows and the queue-aware rows (of each phase).
    fn queue_aware_limits(&self, units: &[UnitSupply]) -> Vec<LinearLimit> {
        match &self.phased {
            None => nonpreemptive_limits(&self.steady, units),
            Some((window, phases)) => {
                let mut rows = window.flight.clone();
                rows.extend(
                    window.per_phase_rows(&self.steady, phases, |p| nonpreemptive_limits(p, units)),
                );
                rows
            }
        }
    }
}

/// [`NoLoserBound`] of `sc` (same fluid model as [`bound`]), maximising
/// the apps' weighted Σ wᵢ ln rᵢ ([`weights`]) above the floor; NaN when
/// the solver fails.
pub fn no_loser_bound(sc: &Scenario, apps: &[ReportApp], native: &[f64]) -> NoLoserBound {
    let program = Program::of(sc, apps, native);
    let (p, rows) = program.problem();
    let w = weights(sc, apps);
    bound_of(solve_no_loser_weighted(p, 1.0, rows, &w), apps.len())
}

/// The queue-aware (non-preemptive) no-loser bound: [`no_loser_bound`]
/// with the rows every schedule obeys on a single-slot non-preemptive queue
/// ([`nonpreemptive_limits`]: while another app's task runs there, an app's
/// places in flight can only overlap it with their own copies, at most one
/// copy-out and one copy-in per task of the other). Still an upper bound
/// on any placement's Σ log rᵢ at the same floor (the floor is the largest
/// common one under these rows when rᵢ ≥ 1 is infeasible there), tighter
/// where short-task apps share a queue with long tasks. Weighted as
/// [`no_loser_bound`].
pub fn queue_aware_bound(sc: &Scenario, apps: &[ReportApp], native: &[f64]) -> NoLoserBound {
    let program = Program::of(sc, apps, native);
    let units: Vec<UnitSupply> = sc
        .machine
        .units
        .iter()
        .zip(&sc.unit_policies)
        .map(|(u, kind)| UnitSupply {
            slots: u.slots as f64,
            time_shared: *kind == PolicyKind::TimeShare,
            short_first: false,
            // The bound's native is measured, not estimated.
            splits_by_weight: false,
        })
        .collect();
    let limits = program.queue_aware_limits(&units);
    let (p, _) = program.problem();
    let w = weights(sc, apps);
    bound_of(solve_no_loser_weighted(p, 1.0, &limits, &w), apps.len())
}

/// Builds the fluid model of `sc` (per report app: rates, copy occupancy,
/// tasks in flight) and solves it. `native` is each report app's measured
/// tasks/s under `native`, the baseline of rᵢ.
pub fn bound(sc: &Scenario, apps: &[ReportApp], native: &[f64]) -> Bound {
    let program = Program::of(sc, apps, native);
    let (p, rows) = program.problem();
    match solve_proportional_fair_limited(p, rows) {
        Ok(solution) => Bound {
            system_speedup: solution.system_speedup,
            relative: solution.relative,
        },
        Err(_) => Bound {
            system_speedup: f64::NAN,
            relative: vec![f64::NAN; apps.len()],
        },
    }
}

/// The fluid model behind [`bound`].
pub fn problem(sc: &Scenario, apps: &[ReportApp], native: &[f64]) -> FairProblem {
    let units = &sc.machine.units;
    let mut rate = Vec::with_capacity(apps.len());
    let mut occupancy = Vec::with_capacity(apps.len());
    let mut in_flight = Vec::with_capacity(apps.len());
    for ra in apps {
        let app = &sc.apps[ra.app];
        let bytes = app.bytes.mean() as u64;
        let mut r = vec![0.0; units.len()];
        let mut o = vec![1.0; units.len()];
        for unit in units {
            let Some(exec) = app.exec_ns(unit.id, bytes) else {
                continue;
            };
            // External load leaves the app only part of the unit.
            let cap: f64 = sc
                .jitter
                .iter()
                .filter(|j| j.app == ra.app && j.unit == unit.id)
                .map(|j| (j.min + j.max) / 2.0)
                .fold(1.0, f64::min);
            let exec = exec / cap;
            let overhead = unit.dispatch_ns as f64
                + if app.persistent_data {
                    0.0
                } else {
                    unit.copy_in_ns(bytes) + unit.copy_out_ns(app.out_bytes(bytes))
                };
            r[unit.id.index()] = 1e9 / exec;
            o[unit.id.index()] = (exec + overhead) / exec;
        }
        rate.push(r);
        occupancy.push(o);
        let concurrent = app.short_lived.map_or(1, |s| s.concurrent);
        in_flight.push((app.in_flight * concurrent) as f64);
    }
    FairProblem {
        rate,
        occupancy,
        capacity: units.iter().map(|u| u.slots as f64).collect(),
        in_flight,
        native: native.iter().map(|n| n.max(1e-9)).collect(),
    }
}
