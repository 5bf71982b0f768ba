//! The proportional-fair oracle bound.
//!
//! A fluid model of a shared heterogeneous machine: apps `i = 0..n` share
//! units `u = 0..m`. The allocation `x[i][u] ≥ 0` is the long-run number of
//! slots of unit `u` that app `i` keeps busy (a fraction of one slot-second
//! per second, summed over the unit's slots). It is limited by
//!
//! * the unit: `Σ_i x[i][u] ≤ capacity[u]`;
//! * the app's concurrency: `Σ_u occupancy[i][u] · x[i][u] ≤ in_flight[i]`
//!   (a task holds one of the app's in-flight places while it copies and is
//!   dispatched, not only while it runs, hence `occupancy ≥ 1`). Because
//!   `occupancy ≥ 1` this also gives `x[i][u] ≤ in_flight[i]`;
//! * the code: `x[i][u] = 0` where app `i` has no implementation for `u`.
//!
//! App `i` completes `thr_i = Σ_u rate[i][u] · x[i][u]` tasks per second and
//! its relative throughput is `r_i = thr_i / native[i]`. The bound is the
//! allocation that maximises `Σ_i ln r_i` (proportional fairness); its
//! `system_speedup` is the geometric mean of the `r_i`.
//!
//! The no-loser program of many apps without extra limits is solved by a
//! structured barrier method ([`solve_no_loser_barrier`],
//! `fairness/barrier.rs`) whose answer its own prices certify; everything
//! else, and whatever the barrier method declines, is solved as an
//! exponential-cone program with Clarabel, then
//! checked independently by [`check`], which builds a Lagrangian dual bound
//! from the returned prices so a caller can see how far from optimal the
//! allocation can possibly be.

mod barrier;
mod centring;
mod mehrotra;
mod newton;
mod scaled;

use clarabel::algebra::CscMatrix;
use clarabel::solver::{DefaultSettings, DefaultSolver, IPSolver, SolverStatus, SupportedConeT};
use serde::{Deserialize, Serialize};

/// Input of the proportional-fair bound. All matrices are indexed `[app][unit]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FairProblem {
    /// Tasks per second app `i` completes with unit `u` to itself, per slot
    /// (= 1 / exec time). `0` means no implementation on that unit.
    pub rate: Vec<Vec<f64>>,
    /// `(exec + copy + dispatch) / exec` for app `i` on unit `u`; `≥ 1`.
    /// Only read where `rate > 0`.
    pub occupancy: Vec<Vec<f64>>,
    /// Parallel slots of each unit (`≥ 0`; a unit with 0 is unusable).
    pub capacity: Vec<f64>,
    /// Tasks each app keeps in flight (`> 0`; fractional values are allowed
    /// so measured averages can be fed in).
    pub in_flight: Vec<f64>,
    /// Each app's throughput under the baseline (`> 0`, tasks per second).
    pub native: Vec<f64>,
}

/// Why the bound could not be computed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FairError {
    #[error("the problem has no apps")]
    NoApps,
    #[error("the problem has no units")]
    NoUnits,
    #[error("{what} has {got} entries, expected {expected}")]
    Shape {
        what: String,
        expected: usize,
        got: usize,
    },
    #[error("rate[{app}][{unit}] = {value} is not a finite non-negative number")]
    BadRate { app: usize, unit: usize, value: f64 },
    #[error("occupancy[{app}][{unit}] = {value} must be finite and at least 1")]
    BadOccupancy { app: usize, unit: usize, value: f64 },
    #[error("capacity[{unit}] = {value} is not a finite non-negative number")]
    BadCapacity { unit: usize, value: f64 },
    #[error("in_flight[{app}] = {value} must be finite and positive")]
    BadInFlight { app: usize, value: f64 },
    #[error("native[{app}] = {value} must be finite and positive")]
    BadNative { app: usize, value: f64 },
    #[error("app {app} has no implementation on any unit with non-zero capacity")]
    NoImplementation { app: usize },
    #[error("allocation[{app}][{unit}] = {value} is not finite")]
    BadAllocation { app: usize, unit: usize, value: f64 },
    #[error("floor = {value} must be finite and non-negative")]
    BadFloor { value: f64 },
    #[error("weight[{app}] = {value} must be finite and positive")]
    BadWeight { app: usize, value: f64 },
    #[error("the conic solver could not be set up: {0}")]
    SolverSetup(String),
    #[error("the conic solver stopped without a solution: {0}")]
    SolverFailed(String),
    /// A pick spread over coordinator periods reached the end of its slice
    /// before this solve; no solver returns it.
    #[error("the pick paused at the end of its slice")]
    Paused,
}

/// How well the conic solver converged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FairStatus {
    /// Converged to the default tolerances (gap and feasibility ~1e-8).
    Solved,
    /// Converged only to Clarabel's reduced tolerances (~1e-5); use [`check`]
    /// to see the actual gap.
    AlmostSolved,
}

/// The proportional-fair allocation and what it achieves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FairSolution {
    /// `x[i][u]`: slots of unit `u` app `i` keeps busy (feasible by
    /// construction: tiny solver infeasibilities are scaled away).
    pub allocation: Vec<Vec<f64>>,
    /// `thr_i`, tasks per second.
    pub throughput: Vec<f64>,
    /// `r_i = thr_i / native_i`.
    pub relative: Vec<f64>,
    /// Geometric mean of `relative`.
    pub system_speedup: f64,
    /// Smallest entry of `relative`.
    pub min_relative: f64,
    /// `Σ_i ln r_i`, the maximised objective.
    pub objective: f64,
    /// Dual price of each unit's capacity, per slot (0 for unused units).
    pub unit_price: Vec<f64>,
    /// Dual price of each app's in-flight limit, per task in flight.
    pub app_price: Vec<f64>,
    pub status: FairStatus,
    /// Interior-point iterations the solver took.
    pub iterations: u32,
}

/// The dual prices a solver found, per unit and per app.
struct Prices {
    unit: Vec<f64>,
    app: Vec<f64>,
}

impl FairSolution {
    /// What `allocation` achieves on `p`, with the solver's prices and
    /// how it ended.
    fn of_allocation(
        p: &FairProblem,
        allocation: Vec<Vec<f64>>,
        prices: Prices,
        status: FairStatus,
        iterations: u32,
    ) -> FairSolution {
        let throughput = p.throughput_unchecked(&allocation);
        let relative: Vec<f64> = throughput
            .iter()
            .zip(&p.native)
            .map(|(t, n)| t / n)
            .collect();
        FairSolution {
            system_speedup: geometric_mean(&relative),
            min_relative: relative.iter().copied().fold(f64::INFINITY, f64::min),
            objective: relative.iter().map(|r| r.ln()).sum(),
            allocation,
            throughput,
            relative,
            unit_price: prices.unit,
            app_price: prices.app,
            status,
            iterations,
        }
    }
}

/// Independent evidence about an allocation, from [`check`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FairCheck {
    /// Largest absolute constraint violation (slots, tasks in flight, or a
    /// negative / unimplemented allocation entry).
    pub max_violation: f64,
    /// Largest violation divided by the bound it violates (`capacity`,
    /// `in_flight`; absolute for the sign and implementation constraints).
    pub max_relative_violation: f64,
    /// `Σ_i ln r_i` of the allocation.
    pub objective: f64,
    /// Upper bound on the optimum of `Σ_i ln r_i` from weak Lagrangian
    /// duality with the solution's prices (`+∞` if the prices certify nothing).
    pub objective_upper_bound: f64,
    /// `objective_upper_bound − objective`: how much the allocation can at
    /// most be improved. Near 0 (≲ 1e-6) means the optimum is real.
    pub duality_gap: f64,
    /// `exp(objective_upper_bound / n)`: no feasible allocation has a larger
    /// system speedup.
    pub speedup_upper_bound: f64,
    /// Largest relative KKT stationarity violation: over implemented pairs,
    /// `max(0, rate / thr_i − unit_price − occupancy · app_price)` divided
    /// by `rate / thr_i`. Near 0 at the optimum.
    pub max_stationarity_violation: f64,
}

/// One variable of the conic program: an implemented (app, unit) pair on a
/// unit with capacity. `bound` is the largest `x` the pair can have on its
/// own; the solver works with `z = x / bound ∈ [0, 1]` so every coefficient
/// in the program is in (0, 1] whatever the units of rate and capacity.
#[derive(Clone, Copy, Debug)]
struct Pair {
    app: usize,
    unit: usize,
    bound: f64,
}

impl FairProblem {
    /// A problem with every occupancy 1 (no copy or dispatch overhead).
    pub fn without_overheads(
        rate: Vec<Vec<f64>>,
        capacity: Vec<f64>,
        in_flight: Vec<f64>,
        native: Vec<f64>,
    ) -> Self {
        let occupancy = rate.iter().map(|row| vec![1.0; row.len()]).collect();
        FairProblem {
            rate,
            occupancy,
            capacity,
            in_flight,
            native,
        }
    }

    pub fn apps(&self) -> usize {
        self.rate.len()
    }

    pub fn units(&self) -> usize {
        self.capacity.len()
    }

    /// Checks shapes and values; every error names the offending entry.
    pub fn validate(&self) -> Result<(), FairError> {
        let (n, m) = (self.apps(), self.units());
        if n == 0 {
            return Err(FairError::NoApps);
        }
        if m == 0 {
            return Err(FairError::NoUnits);
        }
        expect_len("occupancy", n, self.occupancy.len())?;
        expect_len("in_flight", n, self.in_flight.len())?;
        expect_len("native", n, self.native.len())?;
        for (u, &c) in self.capacity.iter().enumerate() {
            if !(c.is_finite() && c >= 0.0) {
                return Err(FairError::BadCapacity { unit: u, value: c });
            }
        }
        for i in 0..n {
            self.validate_app(i)?;
        }
        // An app whose every pair is unusable (no code, no capacity, or a
        // bound that underflows to 0) would need ln 0.
        let pairs = self.pairs();
        match (0..n).find(|&i| !pairs.iter().any(|pr| pr.app == i)) {
            Some(app) => Err(FairError::NoImplementation { app }),
            None => Ok(()),
        }
    }

    fn validate_app(&self, app: usize) -> Result<(), FairError> {
        let m = self.units();
        expect_len(&format!("rate[{app}]"), m, self.rate[app].len())?;
        expect_len(&format!("occupancy[{app}]"), m, self.occupancy[app].len())?;
        let f = self.in_flight[app];
        if !(f.is_finite() && f > 0.0) {
            return Err(FairError::BadInFlight { app, value: f });
        }
        let nat = self.native[app];
        if !(nat.is_finite() && nat > 0.0) {
            return Err(FairError::BadNative { app, value: nat });
        }
        for u in 0..m {
            let r = self.rate[app][u];
            if !(r.is_finite() && r >= 0.0) {
                return Err(FairError::BadRate {
                    app,
                    unit: u,
                    value: r,
                });
            }
            let o = self.occupancy[app][u];
            // Occupancy only matters where the app can run.
            if r > 0.0 && !(o.is_finite() && o >= 1.0) {
                return Err(FairError::BadOccupancy {
                    app,
                    unit: u,
                    value: o,
                });
            }
        }
        Ok(())
    }

    /// The pairs that can carry load, in app-major order. Assumes the
    /// values are valid (finite, non-negative).
    fn pairs(&self) -> Vec<Pair> {
        let mut pairs = Vec::new();
        for i in 0..self.apps() {
            for u in 0..self.units() {
                let own = self.in_flight[i] / self.occupancy[i][u];
                let bound = self.capacity[u].min(own);
                if self.rate[i][u] > 0.0 && bound > 0.0 {
                    pairs.push(Pair {
                        app: i,
                        unit: u,
                        bound,
                    });
                }
            }
        }
        pairs
    }

    /// Checks an allocation's shape and that every entry is finite.
    fn validate_allocation(&self, x: &[Vec<f64>]) -> Result<(), FairError> {
        expect_len("allocation", self.apps(), x.len())?;
        for (i, row) in x.iter().enumerate() {
            expect_len(&format!("allocation[{i}]"), self.units(), row.len())?;
            if let Some(u) = row.iter().position(|v| !v.is_finite()) {
                return Err(FairError::BadAllocation {
                    app: i,
                    unit: u,
                    value: row[u],
                });
            }
        }
        Ok(())
    }

    /// `thr_i` of an allocation (unimplemented pairs contribute nothing).
    pub fn throughput_of(&self, x: &[Vec<f64>]) -> Result<Vec<f64>, FairError> {
        self.validate()?;
        self.validate_allocation(x)?;
        Ok(self.throughput_unchecked(x))
    }

    fn throughput_unchecked(&self, x: &[Vec<f64>]) -> Vec<f64> {
        self.rate
            .iter()
            .zip(x)
            .map(|(rates, xs)| rates.iter().zip(xs).map(|(r, v)| r * v).sum())
            .collect()
    }

    /// Geometric mean of `r_i` for an allocation (0 if some app gets
    /// nothing). Feasibility is not checked; see [`FairProblem::violation_of`].
    pub fn system_speedup_of(&self, x: &[Vec<f64>]) -> Result<f64, FairError> {
        let thr = self.throughput_of(x)?;
        let rel: Vec<f64> = thr.iter().zip(&self.native).map(|(t, n)| t / n).collect();
        Ok(geometric_mean(&rel))
    }

    /// `Σ_i ln r_i` for an allocation (`-∞` if some app gets nothing).
    pub fn objective_of(&self, x: &[Vec<f64>]) -> Result<f64, FairError> {
        let thr = self.throughput_of(x)?;
        Ok(log_relative_sum(&thr, &self.native))
    }

    /// Largest (absolute, relative) constraint violation of an allocation.
    pub fn violation_of(&self, x: &[Vec<f64>]) -> Result<(f64, f64), FairError> {
        self.validate()?;
        self.validate_allocation(x)?;
        Ok(self.violation_unchecked(x))
    }

    fn violation_unchecked(&self, x: &[Vec<f64>]) -> (f64, f64) {
        let mut abs: f64 = 0.0;
        let mut rel: f64 = 0.0;
        let mut note = |excess: f64, bound: f64| {
            let excess = excess.max(0.0);
            abs = abs.max(excess);
            // Sign/implementation constraints have no scale: keep absolute.
            rel = rel.max(if bound > 0.0 { excess / bound } else { excess });
        };
        for (i, row) in x.iter().enumerate() {
            let mut used = 0.0;
            for (u, &v) in row.iter().enumerate() {
                note(-v, 0.0);
                if self.rate[i][u] == 0.0 {
                    note(v.abs(), 0.0);
                    continue;
                }
                note(v - self.in_flight[i], self.in_flight[i]);
                used += self.occupancy[i][u] * v;
            }
            note(used - self.in_flight[i], self.in_flight[i]);
        }
        for (u, &cap) in self.capacity.iter().enumerate() {
            let load: f64 = x.iter().map(|row| row[u]).sum();
            note(load - cap, cap);
        }
        (abs, rel)
    }
}

fn expect_len(what: &str, expected: usize, got: usize) -> Result<(), FairError> {
    if expected == got {
        Ok(())
    } else {
        Err(FairError::Shape {
            what: what.to_string(),
            expected,
            got,
        })
    }
}

fn geometric_mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mean_log = values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64;
    mean_log.exp()
}

fn log_relative_sum(thr: &[f64], native: &[f64]) -> f64 {
    thr.iter().zip(native).map(|(t, n)| (t / n).ln()).sum()
}

/// The conic program in Clarabel's form: minimise `q·v` subject to
/// `A v + s = b`, `s ∈ cones`. Variables are `v = [z_k for each pair, t_i
/// for each app]`.
struct Conic {
    a: CscMatrix<f64>,
    b: Vec<f64>,
    q: Vec<f64>,
    cones: Vec<SupportedConeT<f64>>,
    /// Row of each unit's capacity constraint, if the unit has pairs.
    unit_row: Vec<Option<usize>>,
    /// Row of each app's in-flight constraint (`None`: left out, as one
    /// that cannot bind; see [`Rows`]).
    app_row: Vec<Option<usize>>,
}

/// Which in-flight rows a program carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rows {
    /// Every app's.
    All,
    /// Only those that can bind: an app whose places could not fill even
    /// if it held every unit it can use whole (`Σ_u occ_iu · cap_u ≤
    /// in_flight_i`) has a row no allocation the unit rows allow reaches.
    /// Such rows leave the optimum as it is but can stall Clarabel (a unit
    /// of a twentieth of a slot beside apps of hundreds of places stopped
    /// it with InsufficientProgress), so a program it fails on is tried
    /// again without them.
    Binding,
}

impl Rows {
    fn keeps(self, p: &FairProblem, pairs: &[Pair], app: usize) -> bool {
        match self {
            Rows::All => true,
            Rows::Binding => {
                let most: f64 = pairs
                    .iter()
                    .filter(|pr| pr.app == app)
                    .map(|pr| p.occupancy[app][pr.unit] * p.capacity[pr.unit])
                    .sum();
                most > p.in_flight[app]
            }
        }
    }
}

/// Sparse-matrix triplets collected row by row.
#[derive(Default)]
struct Triplets {
    rows: Vec<usize>,
    cols: Vec<usize>,
    vals: Vec<f64>,
    b: Vec<f64>,
}

impl Triplets {
    /// Starts a new row with right-hand side `rhs`; returns its index.
    fn row(&mut self, rhs: f64) -> usize {
        self.b.push(rhs);
        self.b.len() - 1
    }

    fn put(&mut self, row: usize, col: usize, val: f64) {
        self.rows.push(row);
        self.cols.push(col);
        self.vals.push(val);
    }
}

/// An extra linear limit on an allocation: `Σ coef · x[app][unit] ≤ 1` over
/// its `(app, unit, coef)` terms (coefficients ≥ 0; terms on unusable pairs
/// are ignored). Lets a caller model what the fluid model does not, e.g.
/// the head-of-line blocking of a queue (see `coordination`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinearLimit {
    pub terms: Vec<(usize, usize, f64)>,
}

fn limit_rows(pairs: &[Pair], limits: &[LinearLimit], tr: &mut Triplets) {
    for limit in limits {
        let r = tr.row(1.0);
        for &(app, unit, coef) in &limit.terms {
            if let Some(col) = pairs.iter().position(|pr| pr.app == app && pr.unit == unit)
                && coef.is_finite()
                && coef > 0.0
            {
                tr.put(r, col, coef * pairs[col].bound);
            }
        }
    }
}

/// The linear rows every program shares: `z ≥ 0`, each unit's capacity
/// and each app's in-flight limit. Returns `(unit_row, app_row)`.
fn linear_rows(
    p: &FairProblem,
    pairs: &[Pair],
    rows: Rows,
    tr: &mut Triplets,
) -> (Vec<Option<usize>>, Vec<Option<usize>>) {
    // z_k ≥ 0  (s = z_k).
    for col in 0..pairs.len() {
        let r = tr.row(0.0);
        tr.put(r, col, -1.0);
    }
    // Σ_i x[i][u] ≤ cap_u, divided by cap_u so the right-hand side is 1.
    let mut unit_row = vec![None; p.units()];
    for (col, pair) in pairs.iter().enumerate() {
        let r = *unit_row[pair.unit].get_or_insert_with(|| tr.row(1.0));
        tr.put(r, col, pair.bound / p.capacity[pair.unit]);
    }
    // Σ_u occ·x[i][u] ≤ in_flight_i, divided by in_flight_i.
    let app_row: Vec<Option<usize>> = (0..p.apps())
        .map(|i| rows.keeps(p, pairs, i).then(|| tr.row(1.0)))
        .collect();
    for (col, pair) in pairs.iter().enumerate() {
        if let Some(r) = app_row[pair.app] {
            let coef = p.occupancy[pair.app][pair.unit] * pair.bound / p.in_flight[pair.app];
            tr.put(r, col, coef);
        }
    }
    (unit_row, app_row)
}

/// Each app's throughput is normalised by its best single pair so the cones
/// see values of order 1 even when rates span 1e0..1e5. In logs, so that
/// rate·bound cannot overflow. Returns `ln scale_i` per app and, per pair,
/// `c_k = rate·bound / scale_i ∈ (0, 1]` (so `thr_i / scale_i = Σ c_k z_k`).
fn throughput_scale(p: &FairProblem, pairs: &[Pair]) -> (Vec<f64>, Vec<f64>) {
    let log_value = |pair: &Pair| p.rate[pair.app][pair.unit].ln() + pair.bound.ln();
    let mut log_scale = vec![f64::NEG_INFINITY; p.apps()];
    for pair in pairs {
        log_scale[pair.app] = log_scale[pair.app].max(log_value(pair));
    }
    let coef = pairs
        .iter()
        .map(|pair| (log_value(pair) - log_scale[pair.app]).exp())
        .collect();
    (log_scale, coef)
}

/// `floor`: when set, every app must reach `r_i ≥ floor`, i.e.
/// `Σ_k c_k z_k ≥ floor · native_i / scale_i`.
fn build_conic(
    p: &FairProblem,
    pairs: &[Pair],
    floor: Option<f64>,
    limits: &[LinearLimit],
    weights: &[f64],
    rows: Rows,
) -> Conic {
    let (n, k) = (p.apps(), pairs.len());
    let t_col = |i: usize| k + i;
    let mut tr = Triplets::default();
    let (unit_row, app_row) = linear_rows(p, pairs, rows, &mut tr);
    let (log_scale, coef) = throughput_scale(p, pairs);
    if let Some(floor) = floor {
        let floor_row: Vec<usize> = (0..n)
            .map(|i| tr.row(-floor * (p.native[i].ln() - log_scale[i]).exp()))
            .collect();
        for (col, pair) in pairs.iter().enumerate() {
            tr.put(floor_row[pair.app], col, -coef[col]);
        }
    }
    limit_rows(pairs, limits, &mut tr);
    let nonneg = tr.b.len();

    // Clarabel's K_exp = cl{(s0, s1, s2) : s1 > 0, s1·exp(s0/s1) ≤ s2}; we
    // want (t_i, 1, thr_i/scale_i) in it, i.e. exp(t_i) ≤ thr_i/scale_i.
    let mut cones = vec![SupportedConeT::NonnegativeConeT(nonneg)];
    let mut exp_rows = Vec::with_capacity(n);
    for i in 0..n {
        let r0 = tr.row(0.0);
        tr.put(r0, t_col(i), -1.0);
        tr.row(1.0);
        exp_rows.push(tr.row(0.0));
        cones.push(SupportedConeT::ExponentialConeT());
    }
    for (col, pair) in pairs.iter().enumerate() {
        tr.put(exp_rows[pair.app], col, -coef[col]);
    }

    let rows = tr.b.len();
    let a = CscMatrix::new_from_triplets(rows, k + n, tr.rows, tr.cols, tr.vals);
    // Maximise Σ w_i t_i (w_i = 1 unless weighted).
    let mut q = vec![0.0; k + n];
    for (i, v) in q[k..].iter_mut().enumerate() {
        *v = -weights.get(i).copied().unwrap_or(1.0);
    }
    Conic {
        a,
        b: tr.b,
        q,
        cones,
        unit_row,
        app_row,
    }
}

/// The linear program behind [`max_common_floor`]: variables `[z_k, t]`,
/// maximise `t` subject to the shared rows and `t · native_i / scale_i ≤
/// Σ_k c_k z_k` for every app.
fn build_floor_lp(p: &FairProblem, pairs: &[Pair], limits: &[LinearLimit], rows: Rows) -> Conic {
    let (n, k) = (p.apps(), pairs.len());
    let mut tr = Triplets::default();
    let (unit_row, app_row) = linear_rows(p, pairs, rows, &mut tr);
    let (log_scale, coef) = throughput_scale(p, pairs);
    let floor_row: Vec<usize> = (0..n).map(|_| tr.row(0.0)).collect();
    for (i, &r) in floor_row.iter().enumerate() {
        tr.put(r, k, (p.native[i].ln() - log_scale[i]).exp());
    }
    for (col, pair) in pairs.iter().enumerate() {
        tr.put(floor_row[pair.app], col, -coef[col]);
    }
    limit_rows(pairs, limits, &mut tr);
    let rows = tr.b.len();
    let a = CscMatrix::new_from_triplets(rows, k + 1, tr.rows, tr.cols, tr.vals);
    let mut q = vec![0.0; k + 1];
    q[k] = -1.0;
    Conic {
        a,
        b: tr.b,
        q,
        cones: vec![SupportedConeT::NonnegativeConeT(rows)],
        unit_row,
        app_row,
    }
}

/// Clarabel settings. `tight` asks for a 1e-10 gap: the objective is flat
/// near the optimum, so the allocation is only accurate to about the square
/// root of the gap, and 1e-8 (the default) leaves ~1e-5 errors in `x`.
fn solver_settings(tight: bool) -> DefaultSettings<f64> {
    let defaults = DefaultSettings::default();
    let tol = |default: f64| if tight { 1e-10 } else { default };
    DefaultSettings {
        // Clarabel prints by default; this crate does no I/O.
        verbose: false,
        tol_gap_abs: tol(defaults.tol_gap_abs),
        tol_gap_rel: tol(defaults.tol_gap_rel),
        tol_feas: tol(defaults.tol_feas),
        ..defaults
    }
}

/// The parts of a Clarabel run the solution is built from.
struct ConicResult {
    status: FairStatus,
    primal: Vec<f64>,
    dual: Vec<f64>,
    iterations: u32,
}

fn run_clarabel(conic: &Conic, tight: bool) -> Result<ConicResult, FairError> {
    let vars = conic.q.len();
    let no_quadratic = CscMatrix::zeros((vars, vars));
    let mut solver = DefaultSolver::new(
        &no_quadratic,
        &conic.q,
        &conic.a,
        &conic.b,
        &conic.cones,
        solver_settings(tight),
    )
    .map_err(|e| FairError::SolverSetup(e.to_string()))?;
    solver.solve();
    let sol = solver.solution;
    let status = match sol.status {
        SolverStatus::Solved => FairStatus::Solved,
        SolverStatus::AlmostSolved => FairStatus::AlmostSolved,
        other => return Err(FairError::SolverFailed(format!("{other:?}"))),
    };
    Ok(ConicResult {
        status,
        primal: sol.x,
        dual: sol.z,
        iterations: sol.iterations,
    })
}

/// Tight tolerances first. If they stall (Clarabel then reports at best
/// `AlmostSolved`), the default tolerances often still converge fully;
/// otherwise the better of the two partial answers is returned.
fn solve_tight_then_default(conic: &Conic) -> Result<ConicResult, FairError> {
    let tight = run_clarabel(conic, true);
    if matches!(&tight, Ok(r) if r.status == FairStatus::Solved) {
        return tight;
    }
    let default = run_clarabel(conic, false);
    match (tight, default) {
        (_, Ok(d)) if d.status == FairStatus::Solved => Ok(d),
        (Ok(t), _) => Ok(t),
        (Err(_), d) => d,
    }
}

/// [`solve_tight_then_default`] on the program `build` makes with every
/// row, then, if Clarabel fails on it, without the in-flight rows that
/// cannot bind ([`Rows::Binding`]; the same optimum). Returns the program
/// solved and its answer.
fn solve_dropping_idle_rows(
    build: impl Fn(Rows) -> Conic,
) -> Result<(Conic, ConicResult), FairError> {
    let conic = build(Rows::All);
    // If the tight tolerances stall on an awkward instance, the default
    // ones still give a usable (and `check`-able) bound.
    match solve_tight_then_default(&conic) {
        Ok(sol) => Ok((conic, sol)),
        Err(first) => {
            let fewer = build(Rows::Binding);
            if fewer.app_row == conic.app_row {
                return Err(first);
            }
            let sol = solve_tight_then_default(&fewer)?;
            Ok((fewer, sol))
        }
    }
}

/// Solves the proportional-fair bound. See the module docs for the model.
pub fn solve_proportional_fair(p: &FairProblem) -> Result<FairSolution, FairError> {
    solve_proportional_fair_limited(p, &[])
}

/// [`solve_proportional_fair`] under extra [`LinearLimit`]s (a tighter
/// model than the fluid one: rows it cannot express). [`check`]'s dual
/// bound does not see them; it stays a valid, looser bound.
pub fn solve_proportional_fair_limited(
    p: &FairProblem,
    limits: &[LinearLimit],
) -> Result<FairSolution, FairError> {
    p.validate()?;
    solve_with_floor(p, None, limits)
}

/// The proportional-fair allocation subject to `r_i ≥ floor` for every app.
/// Fails with [`FairError::SolverFailed`] when no allocation reaches the
/// floor (see [`max_common_floor`]). [`check`] certifies only the
/// unconstrained problem; for a floor-constrained solution its
/// `objective_upper_bound` is still a valid (looser) bound.
pub fn solve_proportional_fair_with_floor(
    p: &FairProblem,
    floor: f64,
) -> Result<FairSolution, FairError> {
    p.validate()?;
    if !(floor.is_finite() && floor >= 0.0) {
        return Err(FairError::BadFloor { value: floor });
    }
    solve_with_floor(p, Some(floor), &[])
}

/// The largest `t` such that some feasible allocation gives every app
/// `r_i ≥ t` (a linear program; the max-min fair level).
pub fn max_common_floor(p: &FairProblem) -> Result<f64, FairError> {
    max_common_floor_limited(p, &[])
}

/// [`max_common_floor`] under extra [`LinearLimit`]s.
pub fn max_common_floor_limited(p: &FairProblem, limits: &[LinearLimit]) -> Result<f64, FairError> {
    p.validate()?;
    largest_floor_allocation(p, limits).map(|(floor, _)| floor)
}

/// The largest common floor and an allocation that reaches it (made
/// feasible), by Clarabel. The caller validates `p`.
fn largest_floor_allocation(
    p: &FairProblem,
    limits: &[LinearLimit],
) -> Result<(f64, Vec<Vec<f64>>), FairError> {
    let pairs = p.pairs();
    let (_, sol) = solve_dropping_idle_rows(|rows| build_floor_lp(p, &pairs, limits, rows))?;
    // Re-evaluate the floor from the (made feasible) allocation rather than
    // trusting the solver's `t`, so the floor is one an allocation reaches.
    let mut allocation = vec![vec![0.0; p.units()]; p.apps()];
    for (pair, z) in pairs.iter().zip(&sol.primal) {
        allocation[pair.app][pair.unit] = z * pair.bound;
    }
    make_feasible(p, &mut allocation);
    let thr = p.throughput_unchecked(&allocation);
    let floor = thr
        .iter()
        .zip(&p.native)
        .map(|(t, n)| t / n)
        .fold(f64::INFINITY, f64::min);
    Ok((floor, allocation))
}

/// The proportional-fair bound with no loser: maximise `Σ ln r_i` subject to
/// `r_i ≥ 1` for every app; when that is infeasible, subject to the largest
/// common floor `r_i ≥ t*` ([`max_common_floor`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoLoserSolution {
    pub solution: FairSolution,
    /// The floor the solution was held to: `min(goal, t*)`.
    pub floor: f64,
    /// Whether the requested floor (1 for [`solve_no_loser`]) was feasible.
    pub floor_feasible: bool,
    /// `t*`, the largest common floor any allocation reaches.
    pub max_floor: f64,
    /// A feasible allocation that clears the held floor with room, for a
    /// later warm start ([`solve_goal_from`]) to lean on: the barrier
    /// method's start (half the room up to `t*`), or Clarabel's answer to
    /// the largest-common-floor program (all of it). Empty in a solution
    /// serialized without it (a warm start from it then solves cold).
    #[serde(default)]
    pub clearing: Vec<Vec<f64>>,
}

/// [`solve_no_loser_with_goal`] with a goal of 1 (nobody below native).
pub fn solve_no_loser(p: &FairProblem) -> Result<NoLoserSolution, FairError> {
    solve_no_loser_with_goal(p, 1.0)
}

/// Maximises `Σ ln r_i` subject to `r_i ≥ min(goal, t*)`. The floor is held
/// a hair (1e-6 relative) below `t*` when `t*` binds, so the program keeps
/// an interior; should the solver still fail there, the floor is lowered
/// step by step (to at most 1 % below) before giving up.
pub fn solve_no_loser_with_goal(p: &FairProblem, goal: f64) -> Result<NoLoserSolution, FairError> {
    solve_no_loser_limited(p, goal, &[])
}

/// [`solve_no_loser_with_goal`] under extra [`LinearLimit`]s (the floor is
/// then the largest common floor under those limits too).
pub fn solve_no_loser_limited(
    p: &FairProblem,
    goal: f64,
    limits: &[LinearLimit],
) -> Result<NoLoserSolution, FairError> {
    solve_no_loser_weighted(p, goal, limits, &[])
}

/// [`solve_no_loser_limited`] maximising the *weighted* sum
/// `Σ w_i ln r_i` above the floor (`weights` empty: all 1). A larger weight
/// gives an app a proportionally larger say in how what is left above the
/// floor is split: at the optimum of a single shared unit, app `i`'s share
/// is proportional to `w_i`. The floor is the same for every app. Weights
/// must be finite and positive. [`check`] certifies unweighted solutions only.
///
/// Problems of [`BARRIER_MIN_APPS`] apps or more without
/// extra limits are solved by the barrier method
/// ([`solve_no_loser_barrier`]); the others, and any the barrier method
/// fails on, by Clarabel ([`solve_no_loser_conic`]).
pub fn solve_no_loser_weighted(
    p: &FairProblem,
    goal: f64,
    limits: &[LinearLimit],
    weights: &[f64],
) -> Result<NoLoserSolution, FairError> {
    validate_no_loser(p, goal, weights)?;
    if limits.is_empty()
        && p.apps() >= BARRIER_MIN_APPS
        && let Ok(s) = barrier::solve_no_loser_barrier(p, goal, weights)
    {
        return Ok(s);
    }
    solve_no_loser_conic(p, goal, limits, weights)
}

/// From this many apps on, [`solve_no_loser_weighted`] solves problems
/// without extra limits by the barrier method. Below it Clarabel keeps
/// solving them, so that the plans of the built-in scenarios (32 apps at
/// most) stay bit for bit what they were; the two agree to the tolerance
/// the properties in `tests/fairness_barrier.rs` check. There is no upper
/// limit: on the benchmark's mixes the barrier method answered 256 apps ×
/// 16 units in 23–25 ms, where Clarabel took 79–113 ms, and 1,024 × 16 in
/// 114–133 ms against 436–450 ms.
pub const BARRIER_MIN_APPS: usize = 48;

/// [`solve_no_loser_weighted`] without extra limits by the structured
/// barrier method (`fairness/barrier.rs`), whatever the problem's size.
pub fn solve_no_loser_barrier(
    p: &FairProblem,
    goal: f64,
    weights: &[f64],
) -> Result<NoLoserSolution, FairError> {
    validate_no_loser(p, goal, weights)?;
    barrier::solve_no_loser_barrier(p, goal, weights)
}

/// Where a warm start ([`solve_goal_from`]) begins. Both allocations are
/// indexed `[app][unit]`; a row of zeros is an app new since.
#[derive(Clone, Copy, Debug)]
pub struct WarmFrom<'a> {
    /// The answer to a program a little different: the same apps before
    /// their models drifted.
    pub solved: &'a [Vec<f64>],
    /// An allocation that cleared that program's floor with room
    /// ([`NoLoserSolution::clearing`]).
    pub clearing: &'a [Vec<f64>],
}

/// The weighted proportional-fair program without extra limits held to
/// `goal`, warm-started: the barrier method (`fairness/barrier.rs`) skips
/// the largest-common-floor program and starts from a blend of `from`'s
/// two allocations, pulled into the interior of `p`'s rows. Errors where
/// no such blend clears `goal`, or where the iteration fails: the caller
/// then solves cold ([`solve_no_loser_weighted`]). An answer holds every
/// app at `goal` and carries a cold answer's certificate, to a gap ten
/// times as wide (1e-5 per unit of weight). Any number of apps, as
/// [`solve_no_loser_barrier`].
pub fn solve_goal_from(
    p: &FairProblem,
    goal: f64,
    weights: &[f64],
    from: WarmFrom<'_>,
) -> Result<FairSolution, FairError> {
    validate_no_loser(p, goal, weights)?;
    for (what, x) in [("solved", from.solved), ("clearing", from.clearing)] {
        expect_len(&format!("the warm start's {what} apps"), p.apps(), x.len())?;
        if let Some(row) = x.iter().find(|r| r.len() != p.units()) {
            expect_len(
                &format!("the warm start's {what} units"),
                p.units(),
                row.len(),
            )?;
        }
    }
    barrier::solve_goal_from(p, goal, weights, from)
}

fn validate_no_loser(p: &FairProblem, goal: f64, weights: &[f64]) -> Result<(), FairError> {
    p.validate()?;
    if !weights.is_empty() {
        expect_len("weights", p.apps(), weights.len())?;
        if let Some(i) = weights.iter().position(|w| !(w.is_finite() && *w > 0.0)) {
            return Err(FairError::BadWeight {
                app: i,
                value: weights[i],
            });
        }
    }
    if !(goal.is_finite() && goal >= 0.0) {
        return Err(FairError::BadFloor { value: goal });
    }
    Ok(())
}

/// [`solve_no_loser_weighted`] by Clarabel, whatever the problem's size.
pub fn solve_no_loser_conic(
    p: &FairProblem,
    goal: f64,
    limits: &[LinearLimit],
    weights: &[f64],
) -> Result<NoLoserSolution, FairError> {
    validate_no_loser(p, goal, weights)?;
    let (max_floor, clearing) = largest_floor_allocation(p, limits)?;
    let floor_feasible = max_floor >= goal;
    let floor = goal.min(max_floor);
    let mut last = None;
    for slack in [1e-6, 1e-4, 1e-3, 1e-2] {
        let held = if floor_feasible && max_floor > goal * (1.0 + slack) {
            goal
        } else {
            floor * (1.0 - slack)
        };
        match solve_with_floor_weighted(p, Some(held), limits, weights) {
            Ok(solution) => {
                return Ok(NoLoserSolution {
                    solution,
                    floor,
                    floor_feasible,
                    max_floor,
                    clearing,
                });
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| FairError::SolverFailed("no floor tried".into())))
}

fn solve_with_floor(
    p: &FairProblem,
    floor: Option<f64>,
    limits: &[LinearLimit],
) -> Result<FairSolution, FairError> {
    solve_with_floor_weighted(p, floor, limits, &[])
}

fn solve_with_floor_weighted(
    p: &FairProblem,
    floor: Option<f64>,
    limits: &[LinearLimit],
    weights: &[f64],
) -> Result<FairSolution, FairError> {
    let pairs = p.pairs();
    let (conic, sol) =
        solve_dropping_idle_rows(|rows| build_conic(p, &pairs, floor, limits, weights, rows))?;

    let mut allocation = vec![vec![0.0; p.units()]; p.apps()];
    for (pair, z) in pairs.iter().zip(&sol.primal) {
        allocation[pair.app][pair.unit] = z * pair.bound;
    }
    make_feasible(p, &mut allocation);
    let (unit_price, app_price) = prices(p, &conic, &sol.dual);

    Ok(FairSolution::of_allocation(
        p,
        allocation,
        Prices {
            unit: unit_price,
            app: app_price,
        },
        sol.status,
        sol.iterations,
    ))
}

/// Interior-point iterates satisfy the constraints only to ~1e-8, and may
/// be a hair negative. The bound must be an achievable allocation, so clip
/// negatives, then shrink each overloaded unit's column and then each
/// over-committed app's row. Shrinking columns only lowers app usage, so the
/// second pass cannot undo the first.
fn make_feasible(p: &FairProblem, x: &mut [Vec<f64>]) {
    for v in x.iter_mut().flatten() {
        *v = v.max(0.0);
    }
    for (u, &cap) in p.capacity.iter().enumerate() {
        let load: f64 = x.iter().map(|row| row[u]).sum();
        if load > cap {
            let shrink = cap / load;
            x.iter_mut().for_each(|row| row[u] *= shrink);
        }
    }
    for (i, row) in x.iter_mut().enumerate() {
        let used: f64 = row.iter().zip(&p.occupancy[i]).map(|(v, o)| v * o).sum();
        if used > p.in_flight[i] {
            let shrink = p.in_flight[i] / used;
            row.iter_mut().for_each(|v| *v *= shrink);
        }
    }
}

/// Maps the solver's duals of the scaled rows back to prices of the
/// original constraints (the scaled unit row is the original divided by
/// `capacity`, so its dual is `capacity` times the original price).
fn prices(p: &FairProblem, conic: &Conic, z: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let unit_price = conic
        .unit_row
        .iter()
        .zip(&p.capacity)
        .map(|(row, cap)| row.map_or(0.0, |r| z[r].max(0.0) / cap))
        .collect();
    let app_price = conic
        .app_row
        .iter()
        .zip(&p.in_flight)
        .map(|(row, f)| row.map_or(0.0, |r| z[r].max(0.0) / f))
        .collect();
    (unit_price, app_price)
}

/// Verifies a solution independently of the solver.
///
/// Feasibility is measured directly. Optimality uses weak duality for
/// `max Σ ln thr_i`: for any prices `λ_u, μ_i ≥ 0` and
/// `w_i = min_u (λ_u + occ_iu·μ_i) / rate_iu` (over usable pairs),
/// `Σ_i (−ln w_i − 1) + Σ_u λ_u·cap_u + Σ_i μ_i·in_flight_i` bounds every
/// feasible allocation's `Σ ln thr_i` from above. The gap between that bound
/// and the allocation's value is therefore a certificate, whatever the
/// solver did.
///
/// Several price vectors are tried and the tightest bound kept: the
/// solution's own prices `(λ, μ)`, and repairs that make `w_i = 1 / thr_i`
/// dual feasible by changing one side: unit prices raised to, or replaced
/// by, the least `λ_u` with `λ_u + occ_iu·μ_i ≥ rate_iu / thr_i` for all
/// pairs; likewise for the app prices. Repairs matter when a pair is worth
/// very little: its price is then below the solver's absolute accuracy, and
/// a tiny absolute error in it is a large relative error in `w_i`. The best
/// of these is then improved by coordinate descent on the (convex) dual
/// function, so the bound's error is second order in the allocation's.
pub fn check(p: &FairProblem, s: &FairSolution) -> Result<FairCheck, FairError> {
    p.validate()?;
    p.validate_allocation(&s.allocation)?;
    expect_len("unit_price", p.units(), s.unit_price.len())?;
    expect_len("app_price", p.apps(), s.app_price.len())?;
    let (max_violation, max_relative_violation) = p.violation_unchecked(&s.allocation);
    let thr = p.throughput_unchecked(&s.allocation);
    let objective = log_relative_sum(&thr, &p.native);

    let pairs = p.pairs();
    let lambda: Vec<f64> = s.unit_price.iter().map(|v| v.max(0.0)).collect();
    let mu: Vec<f64> = s.app_price.iter().map(|v| v.max(0.0)).collect();
    let stationarity = stationarity_violation(p, &pairs, &thr, &lambda, &mu);
    let (best_lambda, best_mu) = candidate_prices(p, &pairs, &thr, &lambda, &mu)
        .into_iter()
        .min_by(|a, b| {
            dual_bound(p, &pairs, &a.0, &a.1).total_cmp(&dual_bound(p, &pairs, &b.0, &b.1))
        })
        .unwrap_or((lambda, mu));
    let bound = polish_prices(p, &pairs, best_lambda, best_mu);
    let native_log: f64 = p.native.iter().map(|n| n.ln()).sum();
    let objective_upper_bound = bound - native_log;

    Ok(FairCheck {
        max_violation,
        max_relative_violation,
        objective,
        objective_upper_bound,
        duality_gap: objective_upper_bound - objective,
        speedup_upper_bound: (objective_upper_bound / p.apps() as f64).exp(),
        max_stationarity_violation: stationarity,
    })
}

/// The weak-duality bound on `max Σ ln thr_i` for prices `λ`, `μ` (see
/// [`check`]); `+∞` when the prices certify nothing (some `w_i = 0`).
fn dual_bound(p: &FairProblem, pairs: &[Pair], lambda: &[f64], mu: &[f64]) -> f64 {
    let mut w = vec![f64::INFINITY; p.apps()];
    for pair in pairs {
        let price = lambda[pair.unit] + p.occupancy[pair.app][pair.unit] * mu[pair.app];
        let ratio = price / p.rate[pair.app][pair.unit];
        w[pair.app] = w[pair.app].min(ratio);
    }
    let from_apps: f64 = w.iter().map(|w| -w.ln() - 1.0).sum();
    let from_units: f64 = lambda.iter().zip(&p.capacity).map(|(l, c)| l * c).sum();
    let from_flight: f64 = mu.iter().zip(&p.in_flight).map(|(m, f)| m * f).sum();
    let bound = from_apps + from_units + from_flight;
    if bound.is_nan() { f64::INFINITY } else { bound }
}

/// The price vectors [`check`] bounds with: the given ones, and repairs
/// of either side (raised to / replaced by the least feasible prices).
fn candidate_prices(
    p: &FairProblem,
    pairs: &[Pair],
    thr: &[f64],
    lambda: &[f64],
    mu: &[f64],
) -> Vec<(Vec<f64>, Vec<f64>)> {
    let least_lambda = least_prices(p, pairs, thr, mu, Side::Unit);
    let least_mu = least_prices(p, pairs, thr, lambda, Side::App);
    let raised = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x.max(*y)).collect();
    vec![
        (lambda.to_vec(), mu.to_vec()),
        (raised(lambda, &least_lambda), mu.to_vec()),
        (least_lambda, mu.to_vec()),
        (lambda.to_vec(), raised(mu, &least_mu)),
        (lambda.to_vec(), least_mu),
    ]
}

/// Sweeps of coordinate descent [`polish_prices`] makes, and golden-section
/// steps per coordinate (0.618^80 ≈ 2e-17 of the search interval).
const POLISH_SWEEPS: usize = 6;
const GOLDEN_STEPS: usize = 80;

/// Lowers the dual bound by minimising it over one price at a time. Every
/// iterate is a valid bound, so however far this gets, the result is sound.
///
/// The minimiser over `λ_u` lies in `[0, n/cap_u]` and over `μ_i` in
/// `[0, 1/in_flight_i]`: beyond those the `λ·cap` / `μ·in_flight` term grows
/// faster than the `−ln w` terms can fall (their slopes are at most
/// `1/λ_u` per app and `1/μ_i`).
fn polish_prices(p: &FairProblem, pairs: &[Pair], mut lambda: Vec<f64>, mut mu: Vec<f64>) -> f64 {
    let mut best = dual_bound(p, pairs, &lambda, &mu);
    if !best.is_finite() {
        return best;
    }
    let apps = p.apps() as f64;
    for _ in 0..POLISH_SWEEPS {
        for u in 0..p.units() {
            if p.capacity[u] > 0.0 {
                let hi = (apps / p.capacity[u]).max(lambda[u]);
                best = best.min(minimise_coordinate(&mut lambda, u, hi, |l| {
                    dual_bound(p, pairs, l, &mu)
                }));
            }
        }
        for i in 0..p.apps() {
            let hi = (1.0 / p.in_flight[i]).max(mu[i]);
            best = best.min(minimise_coordinate(&mut mu, i, hi, |m| {
                dual_bound(p, pairs, &lambda, m)
            }));
        }
    }
    best
}

/// Golden-section search for the minimum of convex `f` over `v[k] ∈ [0, hi]`;
/// leaves `v[k]` at the best point seen (never worse than where it started)
/// and returns `f` there.
fn minimise_coordinate(v: &mut [f64], k: usize, hi: f64, f: impl Fn(&[f64]) -> f64) -> f64 {
    let eval = |x: f64, v: &mut [f64]| {
        v[k] = x;
        f(v)
    };
    let start = v[k];
    let (mut best_x, mut best_f) = (start, eval(start, v));
    let ratio = (5f64.sqrt() - 1.0) / 2.0;
    let (mut lo, mut hi) = (0.0, hi);
    for _ in 0..GOLDEN_STEPS {
        let a = hi - ratio * (hi - lo);
        let b = lo + ratio * (hi - lo);
        let (fa, fb) = (eval(a, v), eval(b, v));
        for (x, fx) in [(a, fa), (b, fb)] {
            if fx < best_f {
                (best_x, best_f) = (x, fx);
            }
        }
        if fa <= fb { hi = b } else { lo = a }
    }
    v[k] = best_x;
    best_f
}

/// Which side of the price pair [`least_prices`] solves for.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Unit,
    App,
}

/// The least prices on `side` that make `w_i = 1 / thr_i` dual feasible
/// given the other side's prices `other`: `λ_u = max_i (rate_iu / thr_i −
/// occ_iu·μ_i)⁺`, or `μ_i = max_u (rate_iu / thr_i − λ_u)⁺ / occ_iu`. An
/// app with `thr_i = 0` makes this `+∞`, and then nothing is certified.
fn least_prices(
    p: &FairProblem,
    pairs: &[Pair],
    thr: &[f64],
    other: &[f64],
    side: Side,
) -> Vec<f64> {
    let len = if side == Side::Unit {
        p.units()
    } else {
        p.apps()
    };
    let mut least = vec![0.0_f64; len];
    for pair in pairs {
        let (i, u) = (pair.app, pair.unit);
        let (marginal, occ) = (p.rate[i][u] / thr[i], p.occupancy[i][u]);
        match side {
            Side::Unit => least[u] = least[u].max(marginal - occ * other[i]),
            Side::App => least[i] = least[i].max((marginal - other[u]) / occ),
        }
    }
    least
}

/// Largest relative shortfall of a pair's price below its marginal value
/// `rate_iu / thr_i` (0 at an exact optimum).
fn stationarity_violation(
    p: &FairProblem,
    pairs: &[Pair],
    thr: &[f64],
    lambda: &[f64],
    mu: &[f64],
) -> f64 {
    let mut worst: f64 = 0.0;
    for pair in pairs {
        let (i, u) = (pair.app, pair.unit);
        let marginal = p.rate[i][u] / thr[i];
        let price = lambda[u] + p.occupancy[i][u] * mu[i];
        let shortfall = (marginal - price).max(0.0) / marginal;
        // An app with no throughput has infinite marginal value.
        worst = worst.max(if shortfall.is_nan() {
            f64::INFINITY
        } else {
            shortfall
        });
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_app(rate: Vec<f64>, cap: Vec<f64>, in_flight: f64) -> FairProblem {
        FairProblem::without_overheads(vec![rate], cap, vec![in_flight], vec![1.0])
    }

    #[test]
    fn single_app_in_flight_one_takes_best_unit() {
        let p = one_app(vec![3.0, 5.0], vec![1.0, 1.0], 1.0);
        let s = solve_proportional_fair(&p).unwrap();
        assert!((s.throughput[0] - 5.0).abs() < 1e-6, "{s:?}");
        let c = check(&p, &s).unwrap();
        assert!(c.duality_gap.abs() < 1e-6, "{c:?}");
    }

    #[test]
    fn occupancy_halves_what_one_task_can_do() {
        let mut p = one_app(vec![4.0], vec![1.0], 1.0);
        p.occupancy[0][0] = 2.0;
        let s = solve_proportional_fair(&p).unwrap();
        assert!((s.allocation[0][0] - 0.5).abs() < 1e-6, "{s:?}");
        assert!((s.throughput[0] - 2.0).abs() < 1e-6);
    }

    #[test]
    fn zero_capacity_unit_is_ignored() {
        let p = one_app(vec![3.0, 50.0], vec![1.0, 0.0], 2.0);
        let s = solve_proportional_fair(&p).unwrap();
        assert_eq!(s.allocation[0][1], 0.0);
        assert!((s.throughput[0] - 3.0).abs() < 1e-6);
    }

    #[test]
    fn extreme_magnitudes_do_not_overflow_or_panic() {
        let p = FairProblem::without_overheads(
            vec![vec![1e300, 1.0], vec![1.0, 1e-300]],
            vec![1e10, 1.0],
            vec![1.0, 1.0],
            vec![1.0, 1.0],
        );
        // Either a solution or an error; what matters is no panic / NaN.
        if let Ok(s) = solve_proportional_fair(&p) {
            assert!(s.allocation.iter().flatten().all(|v| v.is_finite()));
        }
        let mut p = one_app(vec![1.0], vec![1.0], 1e-300);
        p.occupancy[0][0] = 1e300;
        assert_eq!(
            solve_proportional_fair(&p),
            Err(FairError::NoImplementation { app: 0 })
        );
    }
}
