//! The bound of a scenario whose apps come and go inside the measured
//! window (`start_s` / `stop_s`): one fluid program over the whole window,
//! each unit split into one column per phase (the stretches between
//! arrivals and departures), so that an app is compared with what the
//! machine could give it while it was there and with the apps that were
//! there with it.
//!
//! An app's rᵢ is its work over the window divided by its native work
//! over the same window (`Metrics::tasks_per_s`: an app alive for part of
//! it is counted over that part). In window time, app `i` holds
//! `z[i][(p, u)]` of unit `u` during phase `p`; the columns of phase `p`
//! hold `τ_p · slots_u`, `τ_p` the phase's share of the window; `i`'s
//! rate there is its rate on `u` where it is alive, 0 elsewhere. Its
//! places in flight bound it phase by phase:
//! Σᵤ occupancyᵢᵤ z[i][(p, u)] ≤ in_flightᵢ τ_p, one row per phase
//! ([`Expanded::flight`]); the program's own in-flight row is their sum.
//! The queue-aware rows are each phase's, written in window time.
//! Where every phase holds the same apps this is the steady program cut
//! into pieces that add up to it, and the oracle solves the steady one.

use hetsched_core::fairness::{FairProblem, LinearLimit};

use crate::metrics::ReportApp;
use crate::scenario::Scenario;

/// One stretch of the measured window with the same apps alive.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// The stretch's share of the window (0..=1).
    pub share: f64,
    /// Per report app, whether it runs during the stretch.
    pub alive: Vec<bool>,
}

/// The phases of `sc`'s measured window, split at every arrival and
/// departure inside it. Apps that spawn short-lived instances count as
/// alive throughout (their instances come and go all the time).
pub fn phases(sc: &Scenario, apps: &[ReportApp]) -> Vec<Phase> {
    let (from, to) = (sc.warmup_ns, sc.warmup_ns + sc.duration_ns);
    let mut cuts = vec![from, to];
    for app in &sc.apps {
        cuts.extend(
            [Some(app.start_ns), app.stop_ns]
                .into_iter()
                .flatten()
                .filter(|t| *t > from && *t < to),
        );
    }
    cuts.sort_unstable();
    cuts.dedup();
    let window = (to - from) as f64;
    cuts.windows(2)
        .map(|w| Phase {
            share: (w[1] - w[0]) as f64 / window,
            alive: apps
                .iter()
                .map(|ra| {
                    let app = &sc.apps[ra.app];
                    app.short_lived.is_some()
                        || (app.start_ns <= w[0] && app.stop_ns.is_none_or(|s| s >= w[1]))
                })
                .collect(),
        })
        .collect()
}

/// The window's program: `problem`'s units are (phase, unit) pairs, phase
/// major; `flight` holds the per-phase in-flight rows, which every
/// bound over it solves with.
#[derive(Clone, Debug)]
pub struct Expanded {
    pub problem: FairProblem,
    pub flight: Vec<LinearLimit>,
    /// Units per phase: phase p's columns are `p * units ..`.
    units: usize,
    /// Each phase's share of the window.
    shares: Vec<f64>,
}

impl Expanded {
    /// `steady` (the fluid model of every app alive at once) over
    /// `phases`. `None` where some app is alive in none of them: it has no
    /// native work to be measured against.
    pub fn of(steady: &FairProblem, phases: &[Phase]) -> Option<Expanded> {
        let (n, m) = (steady.apps(), steady.units());
        let alive_share: Vec<f64> = (0..n)
            .map(|i| phases.iter().filter(|p| p.alive[i]).map(|p| p.share).sum())
            .collect();
        if alive_share.iter().any(|a| *a <= 0.0) {
            return None;
        }
        let column_row = |i: usize, table: &[Vec<f64>], absent: f64| -> Vec<f64> {
            phases
                .iter()
                .flat_map(|p| (0..m).map(move |u| if p.alive[i] { table[i][u] } else { absent }))
                .collect()
        };
        let problem = FairProblem {
            rate: (0..n).map(|i| column_row(i, &steady.rate, 0.0)).collect(),
            occupancy: (0..n)
                .map(|i| column_row(i, &steady.occupancy, 1.0))
                .collect(),
            capacity: phases
                .iter()
                .flat_map(|p| steady.capacity.iter().map(move |c| c * p.share))
                .collect(),
            in_flight: (0..n)
                .map(|i| steady.in_flight[i] * alive_share[i])
                .collect(),
            native: steady.native.clone(),
        };
        let mut flight = Vec::new();
        for (p, phase) in phases.iter().enumerate() {
            for i in (0..n).filter(|&i| phase.alive[i]) {
                let terms: Vec<(usize, usize, f64)> = (0..m)
                    .filter(|&u| steady.rate[i][u] > 0.0)
                    .map(|u| {
                        let coef = steady.occupancy[i][u] / (steady.in_flight[i] * phase.share);
                        (i, p * m + u, coef)
                    })
                    .collect();
                if !terms.is_empty() {
                    flight.push(LinearLimit { terms });
                }
            }
        }
        Some(Expanded {
            problem,
            flight,
            units: m,
            shares: phases.iter().map(|p| p.share).collect(),
        })
    }

    /// Rows written for one phase's steady program (`rows_of`, given
    /// `steady` with the apps absent from that phase unable to run),
    /// moved to that phase's columns and into window time.
    pub fn per_phase_rows(
        &self,
        steady: &FairProblem,
        phases: &[Phase],
        rows_of: impl Fn(&FairProblem) -> Vec<LinearLimit>,
    ) -> Vec<LinearLimit> {
        let mut out = Vec::new();
        for (p, phase) in phases.iter().enumerate() {
            let mut present = steady.clone();
            for (i, row) in present.rate.iter_mut().enumerate() {
                if !phase.alive[i] {
                    row.iter_mut().for_each(|r| *r = 0.0);
                }
            }
            let share = self.shares[p];
            out.extend(rows_of(&present).into_iter().map(|limit| {
                LinearLimit {
                    terms: limit
                        .terms
                        .into_iter()
                        .map(|(i, u, coef)| (i, p * self.units + u, coef / share))
                        .collect(),
                }
            }));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::fairness::{
        solve_no_loser_weighted, solve_proportional_fair, solve_proportional_fair_limited,
    };

    fn two_apps_one_unit(occupancy_a: f64, native: [f64; 2]) -> FairProblem {
        FairProblem {
            rate: vec![vec![1.0], vec![1.0]],
            occupancy: vec![vec![occupancy_a], vec![1.0]],
            capacity: vec![1.0],
            in_flight: vec![1.0, 1.0],
            native: native.to_vec(),
        }
    }

    fn halves(b_alive_first: bool) -> Vec<Phase> {
        vec![
            Phase {
                share: 0.5,
                alive: vec![true, b_alive_first],
            },
            Phase {
                share: 0.5,
                alive: vec![true, true],
            },
        ]
    }

    #[test]
    fn pf_arrivals_has_three_phases_split_at_its_arrival_and_departure() {
        let sc = crate::catalog::load("pf-arrivals").expect("built in");
        let apps = ReportApp::for_scenario(&sc);
        let phases = phases(&sc, &apps);
        let shares: Vec<f64> = phases.iter().map(|p| p.share).collect();
        // Window 1–10 s; DXT arrives at 3 s, lavaMD leaves at 6 s.
        for (got, want) in shares.iter().zip([2.0 / 9.0, 3.0 / 9.0, 4.0 / 9.0]) {
            assert!((got - want).abs() < 1e-12, "{shares:?}");
        }
        let names: Vec<&str> = apps.iter().map(|a| a.name.as_str()).collect();
        let absent = |p: &Phase| -> Vec<&str> {
            names
                .iter()
                .zip(&p.alive)
                .filter(|(_, alive)| !**alive)
                .map(|(n, _)| *n)
                .collect()
        };
        assert_eq!(absent(&phases[0]), ["dxt"]);
        assert!(absent(&phases[1]).is_empty());
        assert_eq!(absent(&phases[2]), ["lavamd"]);
    }

    #[test]
    fn a_steady_scenario_has_one_phase() {
        let sc = crate::catalog::load("rinnegan-contention").expect("built in");
        let apps = ReportApp::for_scenario(&sc);
        assert_eq!(phases(&sc, &apps).len(), 1);
    }

    #[test]
    fn phases_with_the_same_apps_add_up_to_the_steady_program() {
        let steady = two_apps_one_unit(2.0, [0.5, 0.5]);
        let window = Expanded::of(&steady, &halves(true)).expect("everyone alive");
        let cut = solve_proportional_fair_limited(&window.problem, &window.flight).unwrap();
        let whole = solve_proportional_fair(&steady).unwrap();
        for (a, b) in cut.relative.iter().zip(&whole.relative) {
            assert!(
                (a - b).abs() < 1e-5,
                "{:?} vs {:?}",
                cut.relative,
                whole.relative
            );
        }
    }

    /// App A can fill half the unit (a copy as long as its task); B comes
    /// for the second half of the window. The steady program lets B use
    /// the unit all along; over the phases, A runs alone on half the unit
    /// first, then they split the second half so that Σ ln r is largest:
    /// y_A = 1/4 + a, y_B = 1/2 − a, a = 1/8, against native work 1/2 and
    /// 1/4 per window second.
    #[test]
    fn an_app_that_comes_late_is_credited_only_with_the_time_it_was_there() {
        let steady = two_apps_one_unit(2.0, [0.5, 0.25]);
        let window = Expanded::of(&steady, &halves(false)).expect("both alive somewhere");
        let s = solve_proportional_fair_limited(&window.problem, &window.flight).unwrap();
        assert!((s.relative[0] - 0.75).abs() < 1e-4, "{:?}", s.relative);
        assert!((s.relative[1] - 1.5).abs() < 1e-4, "{:?}", s.relative);
        let whole = solve_proportional_fair(&steady).unwrap();
        assert!(whole.system_speedup > s.system_speedup + 0.3);
        // Without the rows per phase A would fill its whole share of the
        // window while alone, which its one place in flight cannot.
        let loose = solve_proportional_fair(&window.problem).unwrap();
        assert!(loose.relative[0] > 0.8, "{:?}", loose.relative);
        // With B's native work at 0.3 nobody-below-native is out of reach:
        // y_A ≤ 1/2 and y_A + y_B ≤ 3/4, so the largest common floor has
        // 2 y_A = y_B / 0.3, y_A = 15/32: 0.9375.
        let late = two_apps_one_unit(2.0, [0.5, 0.3]);
        let window = Expanded::of(&late, &halves(false)).expect("both alive somewhere");
        let floor = solve_no_loser_weighted(&window.problem, 1.0, &window.flight, &[]).unwrap();
        assert!(!floor.floor_feasible);
        assert!((floor.floor - 0.9375).abs() < 1e-4, "{}", floor.floor);
    }

    #[test]
    fn an_app_alive_in_no_phase_leaves_the_steady_program() {
        let steady = two_apps_one_unit(1.0, [0.5, 0.5]);
        let never = vec![Phase {
            share: 1.0,
            alive: vec![true, false],
        }];
        assert!(Expanded::of(&steady, &never).is_none());
    }
}
