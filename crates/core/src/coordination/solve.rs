//! Solving the allocation: predicted throughput and [`Score`], the floor
//! and exclusion heuristics, [`solve_targets`].

use super::*;

/// Targets for a set of apps: per app, the fraction of its tasks each unit
/// should run (rows sum to 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Targets {
    pub fraction: Vec<Vec<f64>>,
    /// Per app, the tasks per second the allocation gives it: what its
    /// [`Pacer`] lets it issue. The optimum often leaves an app's places in
    /// flight partly idle (its fair share of a contended unit is less than
    /// it would take); a closed-loop app would take it anyway, so the client
    /// paces itself to this rate.
    pub rate: Vec<f64>,
    /// The floor the allocation was held to (× native estimate).
    pub floor: f64,
    /// Whether `floor_goal` was feasible (else `floor` is the largest
    /// common floor, and status should say so).
    pub floor_feasible: bool,
    /// Predicted `r_i` (fluid model, against the native estimate).
    pub predicted_relative: Vec<f64>,
    /// [`native_estimate`] of each app (tasks/s).
    pub native: Vec<f64>,
    /// Per unit, whether its queue should run short-first
    /// ([`crate::policy::short_first`]); only the replay-judged pick
    /// chooses, the others leave each unit as it is
    /// ([`UnitSupply::short_first`]).
    pub short_first: Vec<bool>,
}

/// What an allocation is predicted to really give each app (tasks/s): its
/// fluid throughput, scaled down where the waits [`expected_wait_ns`]
/// predicts would need more places in flight than the app has.
pub(super) fn predicted_throughput(
    p: &FairProblem,
    units: &[UnitSupply],
    x: &[Vec<f64>],
) -> Vec<f64> {
    (0..p.apps())
        .map(|i| {
            let mut thr = 0.0;
            let mut held = 0.0;
            for u in 0..p.units() {
                if p.rate[i][u] <= 0.0 || x[i][u] <= 0.0 {
                    continue;
                }
                let w = expected_wait_ns(p, units, x, i, u);
                thr += p.rate[i][u] * x[i][u];
                held += x[i][u] * (p.occupancy[i][u] + w * p.rate[i][u] / 1e9);
            }
            if held > p.in_flight[i] {
                thr * p.in_flight[i] / held
            } else {
                thr
            }
        })
        .collect()
}

/// [`solve_targets`] for real units: the allocation is re-solved `rounds`
/// times with each pair's overhead raised by the wait the previous
/// allocation implies ([`expected_wait_ns`], averaged with the previous
/// estimate so it settles), and of all the allocations seen the one whose
/// *predicted* outcome ([`predicted_throughput`]) is best is kept: a round
/// replaces the best so far only when its lowest predicted `r_i` (counted
/// up to `floor_goal`) is no lower and its predicted `Σ ln r_i` is larger.
/// Round 0 is the plain fluid optimum, so the pick is never predicted worse
/// than it.
/// Apps with short tasks thus move off queues that long tasks hold, and
/// long-task apps off the queues short-task apps depend on, when another
/// allocation nearly as good in the fluid model avoids the mix.
///
/// With `exclusion`, an exclusion step follows ([`exclusion_step`]): the
/// rounds hold each wait fixed, so they cannot see that moving a long-task
/// app off a queue frees the short-task app that depends on it; the step
/// re-solves on the kept allocation's units with the waits written as a
/// function of the others' allocation ([`coupled_wait_limits`]), once as is
/// and once per (app, shared queue) pair taken away, and keeps a candidate
/// the predictor prefers. A pure function of its inputs, so it cannot make
/// placement oscillate.
pub fn solve_targets_waiting(
    apps: &[AppDemand],
    units: &[UnitSupply],
    floor_goal: f64,
    rounds: usize,
    exclusion: bool,
) -> Result<Targets, FairError> {
    pick_targets_waiting(apps, units, floor_goal, rounds, exclusion).map(|(t, _)| t)
}

/// [`solve_targets_waiting`], with the [`PickShape`] it settled on: what
/// [`solve_targets_warm`] re-solves from.
pub fn pick_targets_waiting(
    apps: &[AppDemand],
    units: &[UnitSupply],
    floor_goal: f64,
    rounds: usize,
    exclusion: bool,
) -> Result<(Targets, PickShape), FairError> {
    let native = native_estimate(apps, units);
    let base = problem(apps, units, &native);
    let mut p = base.clone();
    let weights = weights_of(apps);
    let mut s = Solved::from(solve_no_loser_weighted(&p, floor_goal, &[], &weights)?);
    let score = |x: &[Vec<f64>]| predicted_score(&base, units, x, floor_goal, &weights);
    // A later round is taken only if it predicts no lower floor *and* a
    // larger Σ ln r: letting a predicted higher floor win on its own
    // (measured) moved rinnegan-contention to allocations that really did
    // worse (3.06× and min 0.95 instead of 3.51× and 1.10), the predictor
    // being too rough to trade the floor against the sum.
    let mut best_score = score(&s.solution.allocation);
    let mut best = (s.clone(), p.clone());
    let mut wait = vec![vec![0.0; units.len()]; apps.len()];
    for _ in 0..rounds {
        for (i, row) in wait.iter_mut().enumerate() {
            for (u, w) in row.iter_mut().enumerate() {
                if base.rate[i][u] > 0.0 {
                    let now = expected_wait_ns(&base, units, &s.solution.allocation, i, u);
                    *w = 0.5 * (*w + now);
                    p.occupancy[i][u] = base.occupancy[i][u] + *w * base.rate[i][u] / 1e9;
                }
            }
        }
        match solve_no_loser_weighted(&p, floor_goal, &[], &weights) {
            Ok(next) => s = next.into(),
            Err(_) => break,
        }
        let sc = score(&s.solution.allocation);
        if better(sc, best_score) {
            best_score = sc;
            best = (s.clone(), p.clone());
        }
    }
    let (mut s, mut p) = best;
    // The coupled rows an exclusion candidate was solved with are written
    // around the kept allocation.
    let mut coupled_around = None;
    if exclusion
        && let Some((next, q)) = exclusion_step(
            &base,
            &p,
            units,
            &s.solution.allocation,
            floor_goal,
            best_score,
            &weights,
        )
    {
        if Waits::for_apps(base.apps()) == Waits::Coupled {
            coupled_around = Some(s.solution.allocation.clone());
        }
        s = next;
        p = q;
    }
    let predicted = predicted_score(&base, units, &s.solution.allocation, floor_goal, &weights);
    let shape = PickShape::of(
        &base,
        &p,
        &s.solution.allocation,
        s.clearing.clone(),
        coupled_around,
        predicted.floor,
    );
    Ok((targets_of(&p, s.solution, s.held, native, units), shape))
}

/// The floor a solution was held to, and whether it was the goal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct HeldFloor {
    pub floor: f64,
    pub feasible: bool,
}

/// One solve of a targets' program: the answer, the floor it was held to,
/// and where a later warm start may begin ([`NoLoserSolution::clearing`];
/// after a warm start, the clearing allocation it began from).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Solved {
    pub solution: FairSolution,
    pub held: HeldFloor,
    pub clearing: Vec<Vec<f64>>,
}

impl From<NoLoserSolution> for Solved {
    fn from(s: NoLoserSolution) -> Solved {
        Solved {
            held: HeldFloor {
                floor: s.floor,
                feasible: s.floor_feasible,
            },
            solution: s.solution,
            clearing: s.clearing,
        }
    }
}

/// `q` held to `goal`, warm-started from `from` ([`solve_goal_from`]),
/// where the barrier method solves problems of `q`'s size cold too
/// (below [`BARRIER_MIN_APPS`] Clarabel keeps solving them, so that
/// those plans stay what they were); `None` where it does not answer,
/// for the caller to solve cold.
pub(super) fn solve_warm(
    q: &FairProblem,
    goal: f64,
    weights: &[f64],
    from: WarmFrom<'_>,
) -> Option<Solved> {
    if q.apps() < BARRIER_MIN_APPS {
        return None;
    }
    let solution = solve_goal_from(q, goal, weights, from).ok()?;
    Some(Solved {
        solution,
        held: HeldFloor {
            floor: goal,
            feasible: true,
        },
        clearing: from.clearing.to_vec(),
    })
}

/// A wait-aware round's program `q` (the same apps as `before`'s, their
/// occupancies raised by the waits `before` implies), warm from `before`
/// ([`solve_warm`]) where it held `goal` and the barrier method solves
/// programs of `q`'s size, else cold. Warm, the floor program is
/// skipped: at 128 apps × 9 units it is where the slowest solves of a
/// replay-judged pick spent half their time (31–36 primal-dual steps of
/// about 90), and the 99th percentile of a sliced pick's updates went
/// from 9.4–9.9 ms to 6.7–6.9 ms (`benches/pick_slices.rs`). The warm
/// answer keeps `before`'s largest common floor, which no caller of the
/// rounds reads.
pub(super) fn solve_round_after(
    q: &FairProblem,
    goal: f64,
    weights: &[f64],
    before: &NoLoserSolution,
) -> Result<NoLoserSolution, FairError> {
    let held_goal = before.floor_feasible && !before.clearing.is_empty();
    let warm = held_goal
        .then(|| {
            let from = WarmFrom {
                solved: &before.solution.allocation,
                clearing: &before.clearing,
            };
            solve_warm(q, goal, weights, from)
        })
        .flatten();
    match warm {
        Some(s) => Ok(NoLoserSolution {
            solution: s.solution,
            floor: s.held.floor,
            floor_feasible: s.held.feasible,
            max_floor: before.max_floor,
            clearing: s.clearing,
        }),
        None => solve_no_loser_weighted(q, goal, &[], weights),
    }
}

/// The targets of solution `s` of program `p`, held to `held`, each queue
/// left in the order it runs.
pub(super) fn targets_of(
    p: &FairProblem,
    s: FairSolution,
    held: HeldFloor,
    native: Vec<f64>,
    units: &[UnitSupply],
) -> Targets {
    Targets {
        fraction: fractions(p, &s.allocation),
        rate: s.throughput,
        native,
        floor: held.floor,
        floor_feasible: held.feasible,
        predicted_relative: s.relative,
        short_first: units.iter().map(|u| u.short_first).collect(),
    }
}

/// Each app's weight in `Σ w_i ln r_i` ([`AppDemand::weight`]; anything
/// not finite and positive counts as 1).
pub(super) fn weights_of(apps: &[AppDemand]) -> Vec<f64> {
    apps.iter()
        .map(|a| {
            if a.weight.is_finite() && a.weight > 0.0 {
                a.weight
            } else {
                1.0
            }
        })
        .collect()
}

/// How an allocation is predicted to do ([`predicted_score`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Score {
    /// The lowest predicted throughput relative to native, counted up to
    /// the floor goal (above it, more floor is worth nothing).
    pub floor: f64,
    /// The predicted `Σ w_i ln r_i`.
    pub log_sum: f64,
}

/// Floors within this of each other tie ([`better`]).
pub(super) const FLOOR_TIE: f64 = 1e-3;

/// The [`Score`] of allocation `x` ([`predicted_throughput`] against
/// `p.native`; weights missing from `weights` count as 1).
pub(super) fn predicted_score(
    p: &FairProblem,
    units: &[UnitSupply],
    x: &[Vec<f64>],
    floor_goal: f64,
    weights: &[f64],
) -> Score {
    let thr = predicted_throughput(p, units, x);
    let rel: Vec<f64> = thr.iter().zip(&p.native).map(|(t, n)| t / n).collect();
    let min = rel.iter().copied().fold(f64::INFINITY, f64::min);
    let log: f64 = rel
        .iter()
        .enumerate()
        .map(|(i, r)| weights.get(i).copied().unwrap_or(1.0) * r.max(1e-12).ln())
        .sum();
    Score {
        floor: min.min(floor_goal),
        log_sum: log,
    }
}

/// Whether predicted score `a` beats `b`: no lower floor and a larger sum.
pub(super) fn better(a: Score, b: Score) -> bool {
    a.floor >= b.floor - FLOOR_TIE && a.log_sum > b.log_sum
}

/// The exclusion step may trade the predicted sum for the floor only when
/// the kept allocation's predicted floor is below this…
pub(super) const EXCLUSION_FLOOR_BELOW: f64 = 0.95;
/// …the candidate raises it by more than this…
pub(super) const EXCLUSION_FLOOR_GAIN: f64 = 0.1;
/// …and loses at most this much predicted `ln r` per app (per unit of
/// weight).
pub(super) const EXCLUSION_LOG_LOSS_PER_APP: f64 = 0.1;

/// The exclusion step of [`solve_targets_waiting`]. Candidates, all solved
/// on the units the kept allocation `x` uses (other pairs taken away, so
/// the coupled rows, which only charge queues an app uses, cannot be
/// dodged by moving to a queue it did not use) with the queue waits as
/// [`coupled_wait_limits`] of the others' allocation: the kept units as
/// they are, and each (app, queue) pair of a queue two or more apps share
/// taken away. `p` is the kept allocation's problem (its processor-sharing
/// waits are kept; its queue waits give way to the coupled rows).
///
/// A candidate replaces the kept allocation when the predictor scores it
/// [`better`], or, where the kept allocation's predicted floor is below
/// [`EXCLUSION_FLOOR_BELOW`], when it raises the predicted floor by more
/// than [`EXCLUSION_FLOOR_GAIN`] and loses at most
/// [`EXCLUSION_LOG_LOSS_PER_APP`] per app of predicted `Σ ln r` (a clear
/// floor gain at a bounded cost; smaller gains measured worse: the
/// predictor is rough). The best such candidate is returned.
pub(super) fn exclusion_step(
    base: &FairProblem,
    p: &FairProblem,
    units: &[UnitSupply],
    x: &[Vec<f64>],
    floor_goal: f64,
    kept: Score,
    weights: &[f64],
) -> Option<(Solved, FairProblem)> {
    let mut pick: Option<(Score, Solved, FairProblem)> = None;
    for (next, q) in exclusion_candidates(
        base,
        p,
        units,
        x,
        CandidateSearch {
            max: FLUID_EXCLUSION_CANDIDATES,
            waits: Waits::for_apps(base.apps()),
            warm: true,
        },
        &mut |q, limits, from| solve_candidate(q, &limits(), from, floor_goal, weights),
    ) {
        let sc = predicted_score(base, units, &next.solution.allocation, floor_goal, weights);
        let current = pick.as_ref().map_or(kept, |c| c.0);
        let floor_gain = kept.floor < EXCLUSION_FLOOR_BELOW
            && sc.floor > current.floor + EXCLUSION_FLOOR_GAIN
            && sc.log_sum > kept.log_sum - EXCLUSION_LOG_LOSS_PER_APP * weights.iter().sum::<f64>();
        if better(sc, current) || floor_gain {
            pick = Some((sc, next, q));
        }
    }
    pick.map(|(_, s, q)| (s, q))
}

/// How the exclusion step's candidates see the queue waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Waits {
    /// As [`coupled_wait_limits`] of the others' allocation: what the
    /// fluid-judged step needs to predict a candidate.
    Coupled,
    /// Left out: the candidates keep the kept round's processor-sharing
    /// waits but charge no queue wait (the rounds' queue waits are what the
    /// coupled rows stand in for; kept in the occupancies instead, the
    /// candidates shunned the queues, and `random-128apps-4gpus-2kinds-seed1`
    /// fell from 4.43× to 1.60× with an app at 0.90). The coupled
    /// rows are dense (an app's row has a term for every other app on each
    /// queue it uses), so each candidate is a Clarabel solve that grows as
    /// apps² × units: at 128 apps × 9 units 150–800 ms, which made the
    /// exclusion step 80 % of a replay-judged solve. Without them the
    /// barrier method solves a candidate in milliseconds, and the replay
    /// judges it all the same.
    Fixed,
}

impl Waits {
    /// Coupled below [`BARRIER_MIN_APPS`] apps, where the solves are small
    /// (and every plan below the barrier's size stays what it was), fixed
    /// from there on.
    pub(super) fn for_apps(apps: usize) -> Waits {
        if apps < BARRIER_MIN_APPS {
            Waits::Coupled
        } else {
            Waits::Fixed
        }
    }
}

/// The fluid-judged exclusion step solves at most this many candidates
/// (the plan with no exclusion and the first moves). Every one was
/// solved before: at 32 apps × 9 units that is about a hundred Clarabel
/// solves with the coupled rows, 17 s, and at 128 × 9 eight minutes, a
/// coordinator stalled for the whole time. 8 apps on a CPU and 4 devices
/// have 33 candidates only if every app uses every device; otherwise at
/// most this many, and their plans are what they were.
pub const FLUID_EXCLUSION_CANDIDATES: u64 = 32;

/// Which exclusion candidates are solved, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CandidateSearch {
    /// At most this many: the plan with no exclusion first, then one move
    /// per app and unit in order.
    pub max: u64,
    pub waits: Waits,
    /// Whether the candidates after the first start warm
    /// ([`solve_warm`]): from the kept allocation and the first
    /// candidate's clearing allocation, each without the candidate's move.
    /// The fluid-judged pick's candidates do; the replay-judged pick's
    /// keep their cold solves, whose plans its judged figures were
    /// measured with.
    pub warm: bool,
}

/// How the exclusion step solves one candidate's program: with the
/// limits the second argument gives (computed only if asked for: a
/// replay-judged pick in slices answers most solves from its journal),
/// and warm from where given (else cold).
pub(super) type CandidateSolve<'s> = dyn FnMut(&FairProblem, &dyn Fn() -> Vec<LinearLimit>, Option<WarmFrom<'_>>) -> Option<Solved>
    + 's;

/// The candidates of the exclusion step (see [`exclusion_step`]), each
/// with the problem it was solved on; those the solver fails on are left
/// out.
pub(super) fn exclusion_candidates(
    base: &FairProblem,
    p: &FairProblem,
    units: &[UnitSupply],
    x: &[Vec<f64>],
    search: CandidateSearch,
    solve: &mut CandidateSolve<'_>,
) -> Vec<(Solved, FairProblem)> {
    let (n, m) = (p.apps(), p.units());
    let used = |i: usize, u: usize| p.rate[i][u] > 0.0 && x[i][u] > 1e-6;
    let mut on_units = p.clone();
    for i in 0..n {
        for (u, unit) in units.iter().enumerate() {
            if !used(i, u) {
                on_units.rate[i][u] = 0.0;
            }
            if !unit.time_shared {
                on_units.occupancy[i][u] = base.occupancy[i][u];
            }
        }
    }
    let mut moves: Vec<Option<(usize, usize)>> = vec![None];
    for u in (0..m).filter(|&u| !units[u].time_shared) {
        let users: Vec<usize> = (0..n).filter(|&i| used(i, u)).collect();
        if users.len() >= 2 {
            moves.extend(users.into_iter().map(|i| Some((i, u))));
        }
    }
    let mut out: Vec<(Solved, FairProblem)> = Vec::new();
    let mut first_clearing: Option<Vec<Vec<f64>>> = None;
    let max = usize::try_from(search.max).unwrap_or(usize::MAX);
    for mv in moves.into_iter().take(max) {
        let mut q = on_units.clone();
        let mut x_ref = x.to_vec();
        if let Some((i, u)) = mv {
            q.rate[i][u] = 0.0;
            x_ref[i][u] = 0.0;
            if q.rate[i].iter().all(|r| *r <= 0.0) {
                continue;
            }
        }
        let limits_of = |q: &FairProblem, x_ref: &[Vec<f64>]| match search.waits {
            Waits::Coupled => coupled_wait_limits(q, units, x_ref),
            Waits::Fixed => Vec::new(),
        };
        // A warm start needs to know whether there are limits; a cold
        // solve computes them when it runs.
        let known = search.warm.then(|| limits_of(&q, &x_ref));
        let warm = match (&first_clearing, &known) {
            (Some(first), Some(limits)) if limits.is_empty() => {
                let mut clearing = first.clone();
                if let Some(x) = mv.and_then(|(i, u)| clearing.get_mut(i)?.get_mut(u)) {
                    *x = 0.0;
                }
                Some(clearing)
            }
            _ => None,
        };
        let from = warm.as_ref().map(|clearing| WarmFrom {
            solved: &x_ref,
            clearing,
        });
        let limits = || known.clone().unwrap_or_else(|| limits_of(&q, &x_ref));
        if let Some(next) = solve(&q, &limits, from) {
            if first_clearing.is_none() {
                first_clearing = Some(next.clearing.clone());
            }
            out.push((next, q));
        }
    }
    out
}

/// One exclusion candidate's solve: warm from `from` where given (and
/// the warm solve succeeds), else cold.
pub(super) fn solve_candidate(
    q: &FairProblem,
    limits: &[LinearLimit],
    from: Option<WarmFrom<'_>>,
    floor_goal: f64,
    weights: &[f64],
) -> Option<Solved> {
    from.and_then(|from| solve_warm(q, floor_goal, weights, from))
        .or_else(|| {
            solve_no_loser_weighted(q, floor_goal, limits, weights)
                .ok()
                .map(Solved::from)
        })
}

/// Solves the floor-constrained proportional-fair allocation for `apps`
/// and turns it into task fractions.
///
/// `rounds` > 0 makes the solve interference-aware: the allocation is
/// re-solved with each pair's occupancy stretched by what the previous
/// allocation implies ([`stretch`], averaged with the previous round's
/// estimate). Apps with short tasks then avoid queues that long
/// tasks hold, which the plain fluid model cannot see. A fixed point of
/// a pure computation: it changes only when the inputs do, so it cannot
/// make placement oscillate.
pub fn solve_targets(
    apps: &[AppDemand],
    units: &[UnitSupply],
    floor_goal: f64,
    rounds: usize,
    blocking: bool,
) -> Result<Targets, FairError> {
    let native = native_estimate(apps, units);
    let base = problem(apps, units, &native);
    let limits = if blocking {
        blocking_limits(&base, units)
    } else {
        Vec::new()
    };
    let mut p = base.clone();
    let weights = weights_of(apps);
    let mut s = solve_no_loser_weighted(&p, floor_goal, &limits, &weights)?;
    let mut factor = vec![vec![1.0; units.len()]; apps.len()];
    for _ in 0..rounds {
        for (i, row) in factor.iter_mut().enumerate() {
            for (u, f) in row.iter_mut().enumerate() {
                if base.rate[i][u] > 0.0 {
                    let w = stretch(&base, units, &s.solution.allocation, i, u);
                    *f = 0.5 * (*f + w);
                    p.occupancy[i][u] = base.occupancy[i][u] * *f;
                }
            }
        }
        match solve_no_loser_weighted(&p, floor_goal, &limits, &weights) {
            Ok(next) => s = next,
            Err(_) => break,
        }
    }
    let fraction = fractions(&p, &s.solution.allocation);
    Ok(Targets {
        fraction,
        rate: s.solution.throughput.clone(),
        native,
        floor: s.floor,
        floor_feasible: s.floor_feasible,
        predicted_relative: s.solution.relative,
        short_first: units.iter().map(|u| u.short_first).collect(),
    })
}
