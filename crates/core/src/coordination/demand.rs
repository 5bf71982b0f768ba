//! What each application asks of the units ([`AppDemand`]), its weight, its
//! native throughput, and the fairness problem they make ([`problem`]).

use super::*;

/// What the monitor knows about one app.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppDemand {
    /// Measured execution time of the app's typical task per unit, ns;
    /// `None` where it has no implementation or nothing was measured yet.
    pub exec_ns: Vec<Option<f64>>,
    /// Dispatch and copy time per task per unit, ns (holds the app's task,
    /// not the unit).
    pub overhead_ns: Vec<f64>,
    /// Tasks the app keeps in flight.
    pub in_flight: f64,
    /// The app's weight `w_i` in `Σ w_i ln r_i` (e.g. its share; 1 for
    /// all: plain proportional fairness). Above the common floor, a unit's
    /// time is split in proportion to the weights.
    #[serde(default = "unit_weight")]
    pub weight: f64,
    /// The unit the app runs on when nobody coordinates it, as it
    /// declares it (its default device); see [`AppDemand::native_unit`].
    #[serde(default)]
    pub declared_native: Option<usize>,
    /// The declaration comes from a client the operator trusts (root or the
    /// admin group, who may set anyone's shares anyway): it stands on any
    /// unit the app was measured on, not only near its fastest.
    #[serde(default)]
    pub native_trusted: bool,
    /// Tasks the app would keep in flight natively, if it differs from
    /// `in_flight`: a closed-loop app with k places has fewer than k
    /// outstanding on average (its host side holds one between calls), and
    /// fewer still where coordination shortens its calls, while natively
    /// its calls wait longer and it is nearer k. The native estimates use
    /// the larger of the two.
    #[serde(default)]
    pub native_in_flight: Option<f64>,
    /// How many executions each unit's figure in `exec_ns` rests on, where
    /// known (empty, or shorter than `exec_ns`: every figure counts as
    /// well measured). A declared native unit is refused only on figures
    /// of [`NATIVE_CLAIM_MIN_SAMPLES`] or more ([`AppDemand::native_unit`]).
    #[serde(default)]
    pub exec_samples: Vec<u64>,
}

/// A declared native unit is believed when the app's measured execution
/// there is within this fraction of its fastest measured unit (unless the
/// declaration is trusted).
pub const NATIVE_CLAIM_SLACK: f64 = 0.10;

/// Executions on both the declared unit and the fastest one from which
/// their figures are held to [`NATIVE_CLAIM_SLACK`]; on fewer, to
/// [`NATIVE_CLAIM_SLACK_UNSURE`]. Three profiling runs of an app whose
/// data sizes vary fourfold put its model 46 % off the truth (docs/sim.md,
/// "The declared unit on few samples").
pub const NATIVE_CLAIM_MIN_SAMPLES: u64 = 8;

/// How far a declared native unit may be measured above the fastest one
/// and still be believed while either figure rests on fewer than
/// [`NATIVE_CLAIM_MIN_SAMPLES`] executions.
pub const NATIVE_CLAIM_SLACK_UNSURE: f64 = 0.5;

pub(super) fn unit_weight() -> f64 {
    1.0
}

impl AppDemand {
    fn usable(&self, u: usize) -> Option<f64> {
        self.exec_ns
            .get(u)
            .copied()
            .flatten()
            .filter(|e| e.is_finite() && *e > 0.0)
    }

    /// Tasks in flight the native estimates assume (see
    /// [`AppDemand::native_in_flight`]).
    pub fn native_places(&self) -> f64 {
        self.native_in_flight
            .filter(|n| n.is_finite())
            .map_or(self.in_flight, |n| n.max(self.in_flight))
    }

    /// The app as it would run natively: [`AppDemand::native_places`] in flight.
    pub fn as_native(&self) -> AppDemand {
        AppDemand {
            in_flight: self.native_places(),
            ..self.clone()
        }
    }

    /// How far a declaration of unit `declared` may be measured above the
    /// fastest unit and stand: [`NATIVE_CLAIM_SLACK`], or
    /// [`NATIVE_CLAIM_SLACK_UNSURE`] where either figure rests on fewer
    /// than [`NATIVE_CLAIM_MIN_SAMPLES`] executions.
    fn claim_slack(&self, declared: usize, fastest: usize) -> f64 {
        let few = |u: usize| {
            self.exec_samples
                .get(u)
                .is_some_and(|n| *n < NATIVE_CLAIM_MIN_SAMPLES)
        };
        if few(declared) || few(fastest) {
            NATIVE_CLAIM_SLACK_UNSURE
        } else {
            NATIVE_CLAIM_SLACK
        }
    }

    /// The unit with the shortest measured execution (the app's native unit).
    pub fn fastest_unit(&self) -> Option<usize> {
        (0..self.exec_ns.len())
            .filter_map(|u| self.usable(u).map(|e| (u, e)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(u, _)| u)
    }

    /// The unit the app's native throughput is estimated on: the one it
    /// declares, if measured there within [`NATIVE_CLAIM_SLACK`] of its
    /// fastest unit ([`NATIVE_CLAIM_SLACK_UNSURE`] while either figure
    /// rests on few executions, [`AppDemand::exec_samples`]) or trusted
    /// ([`AppDemand::native_trusted`]), else the fastest measured.
    /// Measurements of two units within a few percent of each other flip
    /// with noise, and which one the app natively shares decides the
    /// other apps' native estimates there; a declaration settles it. An app whose default device is not its fastest one (the
    /// demo's LBM natively runs on a GPU 1.8× slower than its CPU code)
    /// needs the declaration to stand beyond the slack, or its native, and
    /// the others' on the units it shares, are estimated for a placement
    /// it never runs. What a false declaration can do: lower its own
    /// native estimate (its loss), and the others' on the unit it names
    /// (their floor), which is why only a trusted client's stands beyond
    /// the slack, and an untrusted one beyond [`NATIVE_CLAIM_SLACK`] only
    /// while the figures against it are thin.
    pub fn native_unit(&self) -> Option<usize> {
        let fastest = self.fastest_unit()?;
        let best = self.usable(fastest)?;
        match self
            .declared_native
            .and_then(|u| self.usable(u).map(|e| (u, e)))
        {
            Some((u, e))
                if self.native_trusted || e <= best * (1.0 + self.claim_slack(u, fastest)) =>
            {
                Some(u)
            }
            _ => Some(fastest),
        }
    }
}

/// Fluid estimate of each app's *native* throughput (tasks/s): every app on
/// its native unit ([`AppDemand::native_unit`]). On a queue (FIFO turns) an
/// app's share of a saturated unit is proportional to `in_flight × exec`;
/// under processor sharing to `in_flight`. On a unit whose agent splits
/// its time by entitlement ([`UnitSupply::splits_by_weight`]) it is
/// proportional to the app's weight, apps of equal weight sharing their
/// part in turn ([`native_split`]). No app gets more than it could use
/// alone (`in_flight / occupancy` slots); what it leaves is water-filled
/// to the rest.
pub fn native_estimate(apps: &[AppDemand], units: &[UnitSupply]) -> Vec<f64> {
    let apps: Vec<AppDemand> = apps.iter().map(AppDemand::as_native).collect();
    let apps = &apps[..];
    let mut thr = vec![0.0; apps.len()];
    for (u, unit) in units.iter().enumerate() {
        let on: Vec<usize> = (0..apps.len())
            .filter(|&i| apps[i].native_unit() == Some(u))
            .collect();
        let by_weight = native_split::splits_by_weight(apps, unit, &on);
        let mut left = unit.slots;
        let mut open = on.clone();
        let mut x = vec![0.0; apps.len()];
        while !open.is_empty() && left > 0.0 {
            let turn = |i: usize| {
                let e = apps[i].usable(u).unwrap_or(1.0);
                if unit.time_shared {
                    apps[i].in_flight
                } else {
                    apps[i].in_flight * e
                }
            };
            let weight = |i: usize| {
                if by_weight {
                    native_split::weighted_part(apps, &open, i, turn)
                } else {
                    turn(i)
                }
            };
            let total: f64 = open.iter().map(|&i| weight(i)).sum();
            let mut capped = Vec::new();
            for &i in &open {
                let e = apps[i].usable(u).unwrap_or(1.0);
                let occ = (e + apps[i].overhead_ns[u].max(0.0)) / e;
                let alone = (apps[i].in_flight / occ).min(unit.slots);
                if left * weight(i) / total >= alone {
                    capped.push((i, alone));
                }
            }
            if capped.is_empty() {
                for &i in &open {
                    x[i] = left * weight(i) / total;
                }
                break;
            }
            for (i, alone) in capped {
                x[i] = alone;
                left -= alone;
                open.retain(|&j| j != i);
            }
        }
        for &i in &on {
            let e = apps[i].usable(u).unwrap_or(1.0);
            thr[i] = x[i] * 1e9 / e;
        }
    }
    thr
}

/// [`native_estimate`] by replay ([`crate::replay::replay_native`]): the
/// apps' task loops played out on their native units, which sees FIFO
/// turns and idle gaps while the app at a queue's head copies. The fluid
/// estimate stands in for an app the replay could not measure, and for
/// every app whose native unit splits its time by weight
/// ([`native_split::splits_by_weight`]): the replay plays queues in
/// arrival order and has no model of an agent that orders by entitlement.
#[cfg(feature = "solver")]
pub fn native_estimate_replayed(apps: &[AppDemand], units: &[UnitSupply]) -> Vec<f64> {
    let fluid = native_estimate(apps, units);
    let split: Vec<bool> = units
        .iter()
        .enumerate()
        .map(|(u, unit)| {
            let on: Vec<usize> = (0..apps.len())
                .filter(|&i| apps[i].native_unit() == Some(u))
                .collect();
            native_split::splits_by_weight(apps, unit, &on)
        })
        .collect();
    crate::replay::replay_native(apps, units, crate::replay::ReplayBudget::default())
        .into_iter()
        .zip(fluid)
        .zip(apps)
        .map(|((r, f), app)| {
            let by_weight = app
                .native_unit()
                .is_some_and(|u| split.get(u).copied().unwrap_or(false));
            if by_weight { f } else { r.unwrap_or(f) }
        })
        .collect()
}

/// The fluid problem of a set of apps, with `native` as baseline.
#[cfg(feature = "solver")]
pub fn problem(apps: &[AppDemand], units: &[UnitSupply], native: &[f64]) -> FairProblem {
    let mut rate = Vec::with_capacity(apps.len());
    let mut occupancy = Vec::with_capacity(apps.len());
    for app in apps {
        let mut r = vec![0.0; units.len()];
        let mut o = vec![1.0; units.len()];
        for u in 0..units.len() {
            if let Some(e) = app.usable(u) {
                r[u] = 1e9 / e;
                o[u] = (e + app.overhead_ns.get(u).copied().unwrap_or(0.0).max(0.0)) / e;
            }
        }
        rate.push(r);
        occupancy.push(o);
    }
    FairProblem {
        rate,
        occupancy,
        capacity: units.iter().map(|u| u.slots).collect(),
        in_flight: apps.iter().map(|a| a.in_flight).collect(),
        native: native.iter().map(|n| n.max(1e-9)).collect(),
    }
}
