//! Warm re-solves of the fluid-judged pick ([`pick_targets_waiting`]).
//!
//! A full pick solves the targets' program many times: once per
//! wait-aware round, then once per exclusion candidate (up to
//! [`FLUID_EXCLUSION_CANDIDATES`]). That took 0.57 s at 128 apps × 9 units
//! and 2.6 s at 32 × 9, where the coupled wait rows make every candidate a
//! Clarabel solve (`coordination/solve_scaling/fluid`). Re-solved so
//! whenever a model drifts, it keeps a core busy.
//!
//! What a pick settles on changes far less often than the numbers in it.
//! That is which pairs an app may use, the wait each pair is charged, and
//! the allocation the coupled rows are written around: its
//! [`PickShape`]. A warm solve keeps the last full pick's shape and solves
//! the program once, with the models as they are now. The shape carries
//! over when models drift, when the outside load moves, when an app goes
//! (its row dropped), and when an app comes: [`PickShape::remap`] allows it
//! every unit it can use and charges it no wait.
//!
//! From [`BARRIER_MIN_APPS`] apps on, the solve itself starts warm too
//! ([`solve_goal_from`]): from the allocation the shape was last solved
//! to and the one its solver found clearing the floor, skipping the
//! largest-common-floor program. That took a warm re-solve at 128 apps ×
//! 9 units from 12.7 ms to 4.8 ms (`coordination/solve_scaling/fluid_warm`).
//! A newcomer, whose rows there are empty, makes the solve cold.
//!
//! A warm solve whose predicted floor falls below the full pick's (less
//! `FLOOR_TIE`) is not published ([`WarmOutcome::Stale`]): the shape no
//! longer fits, and the caller picks afresh. The [`Coordinator`]
//! (`WarmStart`) also picks afresh below [`WARM_MIN_APPS`] apps, once
//! the models or the supply have moved more than [`WARM_MODEL_DRIFT`]
//! from what the last full pick saw, when more than
//! [`MAX_WARM_NEWCOMERS`] apps came at once, a period after it took one
//! in, and at least every [`CoordinatorConfig::full_resolve_period_ns`].
//! On the generated 32-application mixes that kept the speedup within
//! the spread between seeds (docs/sim.md, "Warm re-solves of the fluid
//! pick"); without the drift bound one mix lost 14 %.

use super::*;
use crate::ids::ClientId;

/// A warm re-solve takes in at most this many newcomers; more at once
/// make a full pick.
pub const MAX_WARM_NEWCOMERS: usize = 1;

/// Below this many coordinated apps every re-solve is a full pick: it
/// takes milliseconds there (2.3 ms for 6 apps on 4 units,
/// `coordination/solve_fluid_judged_6x4`), so a warm start saves nothing
/// worth the plans it does not look at.
pub const WARM_MIN_APPS: usize = 16;

/// A warm re-solve keeps the last full pick's shape only while every task
/// time, and every unit's supply, is within this (relative) of what the
/// pick was found with; beyond, the shape may no longer be the one a pick
/// would find, and a full pick runs. Right after profiling the models
/// still move by more than that, so the picks there are full.
pub const WARM_MODEL_DRIFT: f64 = 0.1;

/// What a fluid-judged pick settled on: per app and unit, whether the pair
/// may be used and the wait charged to each task there (ns); and the
/// allocation its coupled wait rows were written around, if it used them.
/// Rows follow the pick's apps.
#[derive(Clone, Debug, PartialEq)]
pub struct PickShape {
    units: usize,
    allowed: Vec<Vec<bool>>,
    wait_ns: Vec<Vec<f64>>,
    coupled_around: Option<Vec<Vec<f64>>>,
    /// The allocation the shape's program was last solved to, and one its
    /// solver found clearing the floor with room
    /// ([`NoLoserSolution::clearing`]): where the next warm solve starts
    /// ([`solve_goal_from`]).
    solved: Vec<Vec<f64>>,
    clearing: Vec<Vec<f64>>,
    /// The pick's predicted floor ([`predicted_score`]).
    predicted_floor: f64,
}

impl PickShape {
    /// The shape of program `q`, solved to `solved` for the apps of `base`
    /// (the plain program of the same demands): the pairs `q` keeps, and
    /// what `q` adds to each one's occupancy, as a wait per task.
    pub(super) fn of(
        base: &FairProblem,
        q: &FairProblem,
        solved: &[Vec<f64>],
        clearing: Vec<Vec<f64>>,
        coupled_around: Option<Vec<Vec<f64>>>,
        predicted_floor: f64,
    ) -> PickShape {
        let (n, m) = (base.apps(), base.units());
        let mut allowed = vec![vec![false; m]; n];
        let mut wait_ns = vec![vec![0.0; m]; n];
        for i in 0..n {
            for u in 0..m {
                if q.rate[i][u] > 0.0 && base.rate[i][u] > 0.0 {
                    allowed[i][u] = true;
                    let extra = q.occupancy[i][u] - base.occupancy[i][u];
                    wait_ns[i][u] = (extra * 1e9 / base.rate[i][u]).max(0.0);
                }
            }
        }
        PickShape {
            units: m,
            allowed,
            wait_ns,
            coupled_around,
            solved: solved.to_vec(),
            clearing,
            predicted_floor,
        }
    }

    /// How many apps the shape has rows for.
    pub fn apps(&self) -> usize {
        self.allowed.len()
    }

    /// The shape for another list of apps: `rows[k]` is the row here of
    /// the new list's k-th app, or `None` for a newcomer (every unit it
    /// can use allowed, no wait charged, and nothing of it in the
    /// allocations the coupled rows are written around and the warm solve
    /// starts from). Rows out of range count as newcomers.
    pub fn remap(&self, rows: &[Option<usize>]) -> PickShape {
        let m = self.units;
        let kept = |k: &Option<usize>| k.filter(|&r| r < self.apps());
        let rows_of = |x: &[Vec<f64>]| -> Vec<Vec<f64>> {
            rows.iter()
                .map(|k| kept(k).map_or_else(|| vec![0.0; m], |r| x[r].clone()))
                .collect()
        };
        PickShape {
            units: m,
            allowed: rows
                .iter()
                .map(|k| kept(k).map_or_else(|| vec![true; m], |r| self.allowed[r].clone()))
                .collect(),
            wait_ns: rows
                .iter()
                .map(|k| kept(k).map_or_else(|| vec![0.0; m], |r| self.wait_ns[r].clone()))
                .collect(),
            coupled_around: self.coupled_around.as_deref().map(rows_of),
            solved: rows_of(&self.solved),
            clearing: rows_of(&self.clearing),
            predicted_floor: self.predicted_floor,
        }
    }
}

/// What a warm solve gave.
#[derive(Clone, Debug, PartialEq)]
pub enum WarmOutcome {
    /// Targets to publish, and the shape they were solved in (boxed: the
    /// two are a few hundred bytes).
    Solved(Box<(Targets, PickShape)>),
    /// The shape no longer fits: its predicted floor fell by more than
    /// `FLOOR_TIE` below the full pick's. Pick afresh.
    Stale,
}

/// Solves the targets' program once, in `shape` (rows in the order of
/// `apps`), with the models as they are now; see the module's
/// documentation. An app the shape leaves no unit it can still use is
/// allowed all it can.
pub fn solve_targets_warm(
    apps: &[AppDemand],
    units: &[UnitSupply],
    floor_goal: f64,
    shape: &PickShape,
) -> Result<WarmOutcome, FairError> {
    if shape.apps() != apps.len() {
        return Err(FairError::Shape {
            what: "the warm start's apps".into(),
            expected: apps.len(),
            got: shape.apps(),
        });
    }
    if shape.units != units.len() {
        return Err(FairError::Shape {
            what: "the warm start's units".into(),
            expected: units.len(),
            got: shape.units,
        });
    }
    let native = native_estimate(apps, units);
    let base = problem(apps, units, &native);
    let weights = weights_of(apps);
    let q = shaped(&base, shape);
    let limits = shape
        .coupled_around
        .as_ref()
        .map(|x| coupled_wait_limits(&q, units, x))
        .unwrap_or_default();
    let from = WarmFrom {
        solved: &shape.solved,
        clearing: &shape.clearing,
    };
    let warm = if limits.is_empty() {
        solve_warm(&q, floor_goal, &weights, from)
    } else {
        None
    };
    let Solved {
        solution,
        held,
        clearing,
    } = match warm {
        Some(s) => s,
        None => solve_no_loser_weighted(&q, floor_goal, &limits, &weights)?.into(),
    };
    let predicted = predicted_score(&base, units, &solution.allocation, floor_goal, &weights);
    if predicted.floor < shape.predicted_floor - FLOOR_TIE {
        return Ok(WarmOutcome::Stale);
    }
    let next = PickShape::of(
        &base,
        &q,
        &solution.allocation,
        clearing,
        shape.coupled_around.clone(),
        shape.predicted_floor,
    );
    Ok(WarmOutcome::Solved(Box::new((
        targets_of(&q, solution, held, native, units),
        next,
    ))))
}

/// `base` in `shape`: its pairs, each charged the shape's wait. An app
/// the shape leaves no unit it can still use keeps all it can.
fn shaped(base: &FairProblem, shape: &PickShape) -> FairProblem {
    let mut q = base.clone();
    for i in 0..base.apps() {
        let keeps_one = (0..base.units()).any(|u| shape.allowed[i][u] && base.rate[i][u] > 0.0);
        for u in 0..base.units() {
            if base.rate[i][u] <= 0.0 {
                continue;
            }
            if keeps_one && !shape.allowed[i][u] {
                q.rate[i][u] = 0.0;
            } else {
                q.occupancy[i][u] += shape.wait_ns[i][u] * base.rate[i][u] / 1e9;
            }
        }
    }
    q
}

/// The last full fluid-judged pick, as the [`Coordinator`] keeps it to
/// re-solve warm from.
#[derive(Clone, Debug)]
pub(super) struct WarmStart {
    /// The apps of the shape's rows, in order (ascending).
    ids: Vec<ClientId>,
    shape: PickShape,
    /// When the full pick ran.
    picked_at: Ns,
    /// Per row, the task times the full pick was found with (a newcomer's:
    /// those it came with), and the supply.
    exec_ns: Vec<Vec<Option<f64>>>,
    slots: Vec<f64>,
}

/// What a warm re-solve is asked for: the coordinated apps now (ids
/// ascending, with their demands), the supply, and the coordinator's
/// settings.
pub(super) struct WarmRequest<'a> {
    pub ids: &'a [ClientId],
    pub demands: &'a [AppDemand],
    pub units: &'a [UnitSupply],
    pub floor_goal: f64,
    pub now: Ns,
    /// [`CoordinatorConfig::full_resolve_period_ns`].
    pub period: Ns,
}

/// A warm re-solve's answer.
pub(super) struct WarmResolve {
    pub targets: Targets,
    /// The start to keep (the same full pick, in the new shape).
    pub next: WarmStart,
    /// It took in a newcomer, whose waits are the next full pick's to find.
    pub took_newcomer: bool,
}

impl WarmStart {
    /// The start a full pick of `ids` (in `shape`) leaves at `now`.
    pub(super) fn after_pick(
        ids: &[ClientId],
        shape: PickShape,
        now: Ns,
        demands: &[AppDemand],
        units: &[UnitSupply],
    ) -> WarmStart {
        WarmStart {
            ids: ids.to_vec(),
            shape,
            picked_at: now,
            exec_ns: demands.iter().map(|d| d.exec_ns.clone()).collect(),
            slots: units.iter().map(|u| u.slots).collect(),
        }
    }

    /// A warm re-solve from this start, if `r` has [`WARM_MIN_APPS`] or
    /// more apps, the pick is younger than the period, at most
    /// [`MAX_WARM_NEWCOMERS`] apps are new to it, the models and the
    /// supply are within [`WARM_MODEL_DRIFT`] of what it was found with,
    /// and its shape still fits ([`WarmOutcome::Stale`] otherwise).
    pub(super) fn resolve(&self, r: &WarmRequest<'_>) -> Option<WarmResolve> {
        if r.ids.len() < WARM_MIN_APPS || r.now.saturating_sub(self.picked_at) >= r.period {
            return None;
        }
        let rows: Vec<Option<usize>> = r
            .ids
            .iter()
            .map(|c| self.ids.binary_search(c).ok())
            .collect();
        let newcomers = rows.iter().filter(|row| row.is_none()).count();
        if newcomers > MAX_WARM_NEWCOMERS || !self.still_near(&rows, r.demands, r.units) {
            return None;
        }
        let shape = self.shape.remap(&rows);
        let WarmOutcome::Solved(solved) =
            solve_targets_warm(r.demands, r.units, r.floor_goal, &shape).ok()?
        else {
            return None;
        };
        let (targets, shape) = *solved;
        let exec_ns = rows
            .iter()
            .zip(r.demands)
            .map(|(row, d)| row.map_or_else(|| d.exec_ns.clone(), |k| self.exec_ns[k].clone()))
            .collect();
        Some(WarmResolve {
            targets,
            next: WarmStart {
                ids: r.ids.to_vec(),
                shape,
                picked_at: self.picked_at,
                exec_ns,
                slots: self.slots.clone(),
            },
            took_newcomer: newcomers > 0,
        })
    }

    /// Whether `demands` (rows as `rows` maps them) and `units` are still
    /// within [`WARM_MODEL_DRIFT`] of what the full pick was found with.
    fn still_near(
        &self,
        rows: &[Option<usize>],
        demands: &[AppDemand],
        units: &[UnitSupply],
    ) -> bool {
        let near = |a: f64, b: f64| (a - b).abs() <= WARM_MODEL_DRIFT * a.abs().max(b.abs());
        let models = rows.iter().zip(demands).all(|(row, d)| {
            row.is_none_or(|k| {
                d.exec_ns.len() == self.exec_ns[k].len()
                    && d.exec_ns
                        .iter()
                        .zip(&self.exec_ns[k])
                        .all(|pair| match pair {
                            (Some(a), Some(b)) => near(*a, *b),
                            (None, None) => true,
                            _ => false,
                        })
            })
        });
        models
            && self.slots.len() == units.len()
            && self.slots.iter().zip(units).all(|(a, u)| near(*a, u.slots))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Random mix 7: the full pick takes app 2's long tasks off the queue
    // app 3's short ones need, through the exclusion step and its coupled
    // rows.
    use crate::coordination::tests::mix7;

    fn solved(outcome: WarmOutcome) -> (Targets, PickShape) {
        match outcome {
            WarmOutcome::Solved(solved) => *solved,
            WarmOutcome::Stale => panic!("stale"),
        }
    }

    fn close(a: &[f64], b: &[f64], tol: f64) -> bool {
        a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= tol * x.abs().max(1.0))
    }

    #[test]
    fn the_picks_own_shape_gives_the_pick_again() {
        let (units, apps) = mix7();
        let (full, shape) = pick_targets_waiting(&apps, &units, 1.05, 3, true).unwrap();
        // The exclusion step's coupled rows took app 2 off the queue; app
        // 1 is held to the CPU group it used, app 3 to the queue.
        assert!(shape.coupled_around.is_some(), "{shape:?}");
        assert!(full.fraction[2][1] < 1e-6, "{full:?}");
        assert!(!shape.allowed[1][1] && !shape.allowed[3][0], "{shape:?}");
        let (warm, _) = solved(solve_targets_warm(&apps, &units, 1.05, &shape).unwrap());
        for i in 0..apps.len() {
            assert!(
                close(&warm.fraction[i], &full.fraction[i], 1e-6),
                "{warm:?} {full:?}"
            );
        }
        assert!(close(&warm.rate, &full.rate, 1e-6), "{warm:?} {full:?}");
    }

    #[test]
    fn drifted_models_are_solved_in_the_same_shape() {
        let (units, mut apps) = mix7();
        let (full, shape) = pick_targets_waiting(&apps, &units, 1.05, 3, true).unwrap();
        for e in apps[3].exec_ns.iter_mut().flatten() {
            *e *= 1.2;
        }
        let (warm, _) = solved(solve_targets_warm(&apps, &units, 1.05, &shape).unwrap());
        assert!(warm.fraction[2][1] < 1e-6, "the exclusion holds: {warm:?}");
        // App 3's tasks take longer: its native estimate and rate follow.
        assert!(warm.native[3] < full.native[3] * 0.95, "{warm:?} {full:?}");
        assert!(warm.rate[3] < full.rate[3] * 0.95, "{warm:?} {full:?}");
        // Held to the floor (here the largest common one, 1.0).
        assert!(warm.floor > 0.99, "{warm:?}");
        for r in &warm.predicted_relative {
            assert!(*r >= warm.floor * (1.0 - 1e-5), "{warm:?}");
        }
    }

    #[test]
    fn a_newcomer_may_use_every_unit_and_a_leaver_takes_its_row() {
        let (units, apps) = mix7();
        let (_, shape) = pick_targets_waiting(&apps, &units, 1.05, 3, true).unwrap();
        // App 0 left; a copy of app 2 came (last).
        let now = vec![
            apps[1].clone(),
            apps[2].clone(),
            apps[3].clone(),
            apps[2].clone(),
        ];
        let moved = shape.remap(&[Some(1), Some(2), Some(3), None]);
        assert_eq!(moved.apps(), 4);
        assert!(!moved.allowed[0][1] && moved.allowed[3].iter().all(|a| *a));
        assert_eq!(moved.wait_ns[3], vec![0.0; 2]);
        assert_eq!(moved.coupled_around.as_ref().unwrap()[3], vec![0.0; 2]);
        let (warm, next) = solved(solve_targets_warm(&now, &units, 1.05, &moved).unwrap());
        assert_eq!(next.apps(), 4);
        assert!(warm.fraction[1][1] < 1e-6, "{warm:?}");
        let sum: f64 = warm.fraction[3].iter().sum();
        assert!((sum - 1.0).abs() < 1e-9, "{warm:?}");
    }

    #[test]
    fn a_shape_for_other_apps_or_units_is_refused() {
        let (units, apps) = mix7();
        let (_, shape) = pick_targets_waiting(&apps, &units, 1.05, 3, true).unwrap();
        let err = solve_targets_warm(&apps[..3], &units, 1.05, &shape).unwrap_err();
        assert!(
            matches!(
                err,
                FairError::Shape {
                    expected: 3,
                    got: 4,
                    ..
                }
            ),
            "{err}"
        );
        let more = vec![units[0], units[1], UnitSupply::queue(1.0)];
        let err = solve_targets_warm(&apps, &more, 1.05, &shape).unwrap_err();
        assert!(
            matches!(
                err,
                FairError::Shape {
                    expected: 3,
                    got: 2,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_shape_that_promised_more_than_the_models_now_allow_is_stale() {
        let (units, apps) = mix7();
        let (_, mut shape) = pick_targets_waiting(&apps, &units, 1.05, 3, true).unwrap();
        shape.predicted_floor = 2.0;
        assert_eq!(
            solve_targets_warm(&apps, &units, 1.05, &shape).unwrap(),
            WarmOutcome::Stale
        );
    }

    /// mix7's four apps four times over: enough apps for warm re-solves.
    fn sixteen() -> (Vec<UnitSupply>, Vec<AppDemand>) {
        let (units, apps) = mix7();
        let apps = (0..WARM_MIN_APPS).map(|k| apps[k % 4].clone()).collect();
        (units, apps)
    }

    fn coordinator(
        config: CoordinatorConfig,
        units: &[UnitSupply],
        apps: &[AppDemand],
    ) -> Coordinator {
        let mut c = Coordinator::new(config, units.to_vec());
        for (k, a) in apps.iter().enumerate() {
            c.set_app(ClientId(k as u32), a.clone());
        }
        c
    }

    fn slower(a: &AppDemand) -> AppDemand {
        let mut a = a.clone();
        for e in a.exec_ns.iter_mut().flatten() {
            *e *= 1.1;
        }
        a
    }

    #[test]
    fn the_coordinator_re_solves_warm_between_full_picks() {
        let (units, apps) = sixteen();
        let config = CoordinatorConfig {
            replay: false,
            exclusion: false,
            full_resolve_period_ns: 1_000_000_000,
            ..CoordinatorConfig::default()
        };
        let mut c = coordinator(config, &units, &apps);
        assert!(c.update(0));
        assert!(!c.last_solve_warm());
        // A model drifts: warm, in the pick's shape.
        c.set_app(ClientId(3), slower(&apps[3]));
        assert!(c.update(300_000_000));
        assert!(c.last_solve_warm());
        assert_eq!(c.last_cause(), Some(SolveCause::Drift));
        assert!(
            c.target(ClientId(3))
                .is_some_and(|t| t.len() == units.len())
        );
        // One newcomer: warm at once, then the full pick it put off a
        // period later, with nothing else changed.
        c.set_app(ClientId(100), apps[1].clone());
        assert!(c.update(400_000_000));
        assert!(c.last_solve_warm());
        assert!(c.target(ClientId(100)).is_some());
        assert!(!c.update(500_000_000));
        assert!(c.update(600_000_000));
        assert_eq!(c.last_cause(), Some(SolveCause::Deferred));
        assert!(!c.last_solve_warm());
        assert!(!c.update(900_000_000), "nothing owed any more");
        // Two newcomers at once: a full pick.
        c.set_app(ClientId(101), apps[1].clone());
        c.set_app(ClientId(102), apps[2].clone());
        assert!(c.update(1_000_000_000));
        assert!(!c.last_solve_warm());
        // A leaver: warm, until the full pick is a period old.
        c.remove_app(ClientId(102));
        assert!(c.update(1_100_000_000));
        assert!(c.last_solve_warm());
        c.remove_app(ClientId(101));
        assert!(c.update(2_100_000_000));
        assert!(!c.last_solve_warm());
        assert_eq!(c.warm_solves(), 3);
    }

    #[test]
    fn few_apps_or_no_period_make_every_re_solve_a_full_pick() {
        let config = CoordinatorConfig {
            replay: false,
            exclusion: false,
            ..CoordinatorConfig::default()
        };
        let (units, apps) = mix7();
        let (_, many) = sixteen();
        for (config, apps) in [
            (config, &apps),
            (
                CoordinatorConfig {
                    full_resolve_period_ns: 0,
                    ..config
                },
                &many,
            ),
        ] {
            let mut c = coordinator(config, &units, apps);
            assert!(c.update(0));
            c.set_app(ClientId(3), slower(&apps[3]));
            assert!(c.update(300_000_000));
            assert!(!c.last_solve_warm());
            assert_eq!(c.warm_solves(), 0);
        }
    }
}
