//! The no-loser problem as the structured interior-point solver sees it:
//! its rows in the scaled variables `z_k = x_k / bound_k` ([`Layout`]),
//! what is maximised ([`Goal`]), a point and its slacks. Shared by the
//! solver's driver ([`super::barrier`]) and its two iterations
//! ([`super::mehrotra`], [`super::centring`]), which the driver calls.

use super::newton::Shape;
use super::{FairProblem, throughput_scale};

/// The problem's rows in the scaled variables.
pub(super) struct Layout {
    pub shape: Shape,
    /// Per pair: unit-row, in-flight-row and throughput coefficients.
    pub unit_coef: Vec<f64>,
    pub flight_coef: Vec<f64>,
    pub thr_coef: Vec<f64>,
    /// Per pair, its `bound`; per app, `φ_i`.
    pub bound: Vec<f64>,
    pub phi: Vec<f64>,
    /// Whether each unit has a pair (a unit without one has no row).
    pub unit_used: Vec<bool>,
}

impl Layout {
    pub fn new(p: &FairProblem) -> Layout {
        let pairs = p.pairs();
        let (log_scale, thr_coef) = throughput_scale(p, &pairs);
        let mut starts = vec![0; p.apps() + 1];
        let mut unit_used = vec![false; p.units()];
        for pair in &pairs {
            starts[pair.app + 1] += 1;
            unit_used[pair.unit] = true;
        }
        for i in 0..p.apps() {
            starts[i + 1] += starts[i];
        }
        Layout {
            shape: Shape {
                starts,
                row_of: pairs.iter().map(|pr| pr.unit).collect(),
                rows: p.units(),
            },
            unit_coef: pairs
                .iter()
                .map(|pr| pr.bound / p.capacity[pr.unit])
                .collect(),
            flight_coef: pairs
                .iter()
                .map(|pr| p.occupancy[pr.app][pr.unit] * pr.bound / p.in_flight[pr.app])
                .collect(),
            thr_coef,
            bound: pairs.iter().map(|pr| pr.bound).collect(),
            phi: (0..p.apps())
                .map(|i| (p.native[i].ln() - log_scale[i]).exp())
                .collect(),
            unit_used,
        }
    }

    pub fn apps(&self) -> usize {
        self.phi.len()
    }

    pub fn pairs(&self) -> usize {
        self.bound.len()
    }

    pub fn app_of(&self, i: usize) -> std::ops::Range<usize> {
        self.shape.starts[i]..self.shape.starts[i + 1]
    }

    /// A strictly feasible point of the rows other than the floor: every
    /// pair at half its even share of the tightest row it is in (every
    /// coefficient is at most 1).
    pub fn interior(&self) -> Vec<f64> {
        let mut users = vec![0usize; self.shape.rows];
        for &u in &self.shape.row_of {
            users[u] += 1;
        }
        (0..self.apps())
            .flat_map(|i| {
                let own = self.app_of(i).len();
                self.app_of(i)
                    .map(|k| 0.5 / users[self.shape.row_of[k]].max(own) as f64)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// `y_i` per app.
    pub fn throughput(&self, z: &[f64]) -> Vec<f64> {
        (0..self.apps())
            .map(|i| self.app_of(i).map(|k| self.thr_coef[k] * z[k]).sum())
            .collect()
    }
}

/// What is maximised.
#[derive(Clone, Copy)]
pub(super) enum Goal<'a> {
    /// `Σ w_i ln y_i` subject to `y_i ≥ floor · φ_i` (`floor` `None`: no
    /// floor row).
    Fair {
        weights: &'a [f64],
        floor: Option<f64>,
    },
    /// `t` subject to `y_i ≥ t · φ_i`.
    Floor,
}

impl Goal<'_> {
    pub fn weight(&self, i: usize) -> f64 {
        match self {
            Goal::Fair { weights, .. } => weights.get(i).copied().unwrap_or(1.0),
            Goal::Floor => 0.0,
        }
    }

    pub fn has_floor_row(&self) -> bool {
        !matches!(self, Goal::Fair { floor: None, .. })
    }
}

/// The slacks of every row at a point (all positive at a feasible one).
pub(super) struct Slacks {
    pub unit: Vec<f64>,
    pub flight: Vec<f64>,
    /// `y_i`.
    pub thr: Vec<f64>,
    /// `y_i − floor · φ_i` (or `− t φ_i`); empty without a floor row.
    pub floor: Vec<f64>,
}

/// A point: `z`, and `t` (the floor program's variable; unused otherwise).
#[derive(Clone)]
pub(super) struct Point {
    pub z: Vec<f64>,
    pub t: f64,
}

pub(super) fn slacks(l: &Layout, goal: Goal<'_>, at: &Point) -> Option<Slacks> {
    let mut unit = vec![1.0; l.shape.rows];
    let mut flight = vec![1.0; l.apps()];
    for (k, &z) in at.z.iter().enumerate() {
        if z.is_nan() || z <= 0.0 {
            return None;
        }
        unit[l.shape.row_of[k]] -= l.unit_coef[k] * z;
    }
    for (i, f) in flight.iter_mut().enumerate() {
        *f -= l.app_of(i).map(|k| l.flight_coef[k] * at.z[k]).sum::<f64>();
    }
    let thr = l.throughput(&at.z);
    let floor: Vec<f64> = match goal {
        Goal::Fair { floor: None, .. } => Vec::new(),
        Goal::Fair { floor: Some(f), .. } => {
            thr.iter().zip(&l.phi).map(|(y, phi)| y - f * phi).collect()
        }
        Goal::Floor => thr
            .iter()
            .zip(&l.phi)
            .map(|(y, phi)| y - at.t * phi)
            .collect(),
    };
    let used_units = unit.iter().zip(&l.unit_used).filter(|(_, u)| **u);
    let all_positive = used_units
        .map(|(s, _)| s)
        .chain(&flight)
        .chain(&thr)
        .chain(&floor);
    let mut all_positive = all_positive;
    if all_positive.all(|s| *s > 0.0 && s.is_finite()) {
        Some(Slacks {
            unit,
            flight,
            thr,
            floor,
        })
    } else {
        None
    }
}
