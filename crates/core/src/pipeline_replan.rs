//! Re-planning a running pipeline under contention (APC's controller
//! reacting to what the monitor publishes).
//!
//! Between steps the pipeline controller hands the [`Replanner`] each
//! unit's view (the monitor's private page, corrected for the pipeline's
//! own work). The replanner stretches every stage time by its unit's view
//! (`exec / expected utilisation`, [`ClientUnitView::stretched_ns`]), runs
//! the same assignment the pipeline was planned with
//! ([`pipeline_table::assign_under`]) and says whether to switch.
//!
//! Views are up to a publication period old and move with every call other
//! clients make, so a switch needs three things, which together keep the
//! controller from flapping between two assignments:
//! * **margin** — the new assignment's predicted period beats the current
//!   one's, under the same views, by at least `margin` (a fraction);
//! * **confirmation** — the same new assignment wins `confirm` checks in a
//!   row (one stale or noisy page does not move stages);
//! * **hold** — after a switch, `hold` checks pass before the next one.
//!
//! Pure: no clock, no I/O. The caller decides how often to check.

use crate::ids::UnitId;
use crate::pipeline_table::{self, PlanError, StageSpec};
use crate::unit::Unit;
use crate::view::{ClientUnitView, MIN_UTILISATION};
use serde::{Deserialize, Serialize};

/// A CPU lane of a pipeline on a kind of `cores` cores: CFS shares them
/// among every runnable thread, which the CPU agent counted
/// (`runnable`, ours included when they were runnable at its scan). Our
/// `lanes` busy lanes are one thread each, counted once whether the scan
/// saw them or not, so each lane gets `cores / max(runnable, lanes)` of a
/// core, at most a whole one.
pub fn lane_view(runnable: u32, cores: u32, lanes: u32) -> ClientUnitView {
    let threads = runnable.max(lanes).max(1);
    let share = (f64::from(cores.max(1)) / f64::from(threads)).min(1.0);
    ClientUnitView {
        guaranteed: share.max(MIN_UTILISATION),
        wait_ns: f64::INFINITY,
        ..ClientUnitView::default()
    }
}

/// A device as one pipeline stage sees it between steps: the monitor's
/// private page, less `own_ns` of the published wait. The controller has
/// at most one call of its own on a device at a time and none between
/// steps, but a page published while one was queued still counts it;
/// taking it out keeps the pipeline from fleeing its own work.
pub fn device_lane_view(published: ClientUnitView, own_ns: f64) -> ClientUnitView {
    let wait_ns = if published.wait_ns.is_finite() {
        (published.wait_ns - own_ns.max(0.0)).max(0.0)
    } else {
        published.wait_ns
    };
    ClientUnitView {
        wait_ns,
        ..published
    }
}

/// When a better assignment is worth switching to.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplanConfig {
    /// Least relative gain in predicted period: switch only when the new
    /// period is at most `(1 - margin) ×` the current one.
    pub margin: f64,
    /// Checks in a row the same better assignment must win.
    pub confirm: u32,
    /// Checks after a switch during which nothing switches.
    pub hold: u32,
}

impl Default for ReplanConfig {
    /// 25 % better, twice in a row, then four checks of rest: a unit whose
    /// published wait swings by less than a quarter of the period never
    /// moves a stage.
    fn default() -> Self {
        ReplanConfig {
            margin: 0.25,
            confirm: 2,
            hold: 4,
        }
    }
}

/// A decided switch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Switch {
    pub from: Vec<UnitId>,
    pub to: Vec<UnitId>,
    /// Predicted period of `from` under the views that decided, ns.
    pub from_period_ns: f64,
    /// Predicted period of `to` under the same views, ns.
    pub to_period_ns: f64,
}

/// What one check found.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Keep the current assignment; `best` is what the planner would pick
    /// now (the current one when nothing is better by the margin).
    Keep {
        current_period_ns: f64,
        best_period_ns: f64,
    },
    Switch(Switch),
}

/// The re-planning state of one pipeline.
#[derive(Clone, Debug)]
pub struct Replanner {
    cfg: ReplanConfig,
    current: Vec<UnitId>,
    /// A better assignment and how many checks in a row it has won.
    candidate: Option<(Vec<UnitId>, u32)>,
    hold_left: u32,
    switches: u64,
}

impl Replanner {
    pub fn new(assignment: Vec<UnitId>, cfg: ReplanConfig) -> Replanner {
        Replanner {
            cfg: ReplanConfig {
                margin: cfg.margin.clamp(0.0, 0.99),
                confirm: cfg.confirm.max(1),
                hold: cfg.hold,
            },
            current: assignment,
            candidate: None,
            hold_left: 0,
            switches: 0,
        }
    }

    pub fn current(&self) -> &[UnitId] {
        &self.current
    }

    pub fn switches(&self) -> u64 {
        self.switches
    }

    pub fn config(&self) -> ReplanConfig {
        self.cfg
    }

    /// One check: `views[i]` is `units[i]`'s view (a missing one is an
    /// idle unit). A [`Verdict::Switch`] is already applied: the caller
    /// must move its stages to `to` before the next check.
    pub fn check(
        &mut self,
        stages: &[StageSpec],
        units: &[Unit],
        views: &[ClientUnitView],
    ) -> Result<Verdict, PlanError> {
        let mut padded;
        let views = if views.len() < units.len() {
            padded = views.to_vec();
            padded.resize(units.len(), ClientUnitView::default());
            &padded[..]
        } else {
            views
        };
        let current = pipeline_table::period_ns(stages, units, &self.current, Some(views))?;
        let best = pipeline_table::assign_under(stages, units, views)?;
        let best_period = pipeline_table::period_ns(stages, units, &best, Some(views))?;
        let keep = Verdict::Keep {
            current_period_ns: current,
            best_period_ns: best_period,
        };
        if self.hold_left > 0 {
            self.hold_left -= 1;
            self.candidate = None;
            return Ok(keep);
        }
        let better = best != self.current && best_period <= (1.0 - self.cfg.margin) * current;
        if !better {
            self.candidate = None;
            return Ok(keep);
        }
        let wins = match &mut self.candidate {
            Some((c, n)) if *c == best => {
                *n += 1;
                *n
            }
            _ => {
                self.candidate = Some((best.clone(), 1));
                1
            }
        };
        if wins < self.cfg.confirm {
            return Ok(keep);
        }
        self.candidate = None;
        self.hold_left = self.cfg.hold;
        self.switches += 1;
        let from = std::mem::replace(&mut self.current, best.clone());
        Ok(Verdict::Switch(Switch {
            from,
            to: best,
            from_period_ns: current,
            to_period_ns: best_period,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::KindId;
    use crate::pipeline_table::Stepper;
    use crate::unit::LinkCost;
    use proptest::prelude::*;

    fn units() -> Vec<Unit> {
        vec![
            Unit::basic(UnitId(0), KindId(0), true, LinkCost::FREE),
            Unit::basic(UnitId(1), KindId(1), false, LinkCost::new(1_000, 10e9)),
        ]
    }

    /// a (CPU only), b (10× faster on the device), c (CPU only).
    fn stages() -> Vec<StageSpec> {
        let st = |name: &str, cpu: f64, dev: Option<f64>| StageSpec {
            name: name.into(),
            time_ns: vec![Some(cpu), dev],
            bytes_in: 4096,
            bytes_out: 4096,
        };
        vec![
            st("a", 20_000.0, None),
            st("b", 200_000.0, Some(20_000.0)),
            st("c", 20_000.0, None),
        ]
    }

    fn waiting(ns: f64) -> ClientUnitView {
        ClientUnitView {
            wait_ns: ns,
            ..Default::default()
        }
    }

    fn idle() -> Vec<ClientUnitView> {
        vec![ClientUnitView::default(); 2]
    }

    fn busy_device(wait: f64) -> Vec<ClientUnitView> {
        vec![ClientUnitView::default(), waiting(wait)]
    }

    #[test]
    fn a_contended_device_loses_its_stage_after_confirmation() {
        let (st, un) = (stages(), units());
        let start = pipeline_table::assign(&st, &un).unwrap();
        assert_eq!(start, vec![UnitId(0), UnitId(1), UnitId(0)]);
        let mut r = Replanner::new(start, ReplanConfig::default());
        // Idle: nothing to do.
        assert!(matches!(
            r.check(&st, &un, &idle()),
            Ok(Verdict::Keep { .. })
        ));
        // 10 ms queued ahead on the device: b is better on the CPU, but one
        // page is not enough.
        let busy = busy_device(10e6);
        assert!(matches!(r.check(&st, &un, &busy), Ok(Verdict::Keep { .. })));
        match r.check(&st, &un, &busy).unwrap() {
            Verdict::Switch(s) => {
                assert_eq!(s.to, vec![UnitId(0); 3]);
                assert!(s.to_period_ns < 0.75 * s.from_period_ns, "{s:?}");
            }
            v => panic!("{v:?}"),
        }
        assert_eq!(r.current(), &[UnitId(0); 3]);
        assert_eq!(r.switches(), 1);
        // Held: even an idle device does not pull it back at once.
        for _ in 0..ReplanConfig::default().hold {
            assert!(matches!(
                r.check(&st, &un, &idle()),
                Ok(Verdict::Keep { .. })
            ));
        }
        // Then it goes back, after confirmation.
        assert!(matches!(
            r.check(&st, &un, &idle()),
            Ok(Verdict::Keep { .. })
        ));
        assert!(matches!(r.check(&st, &un, &idle()), Ok(Verdict::Switch(_))));
        assert_eq!(r.current(), &[UnitId(0), UnitId(1), UnitId(0)]);
    }

    #[test]
    fn a_gain_inside_the_margin_does_not_switch() {
        let (st, un) = (stages(), units());
        let start = vec![UnitId(0), UnitId(1), UnitId(0)];
        let mut r = Replanner::new(start.clone(), ReplanConfig::default());
        // Device period 20 µs + wait; CPU-only period 240 µs. A wait of
        // 250 µs makes CPU-only 11 % better: within the margin.
        for _ in 0..20 {
            let v = r.check(&st, &un, &busy_device(250_000.0)).unwrap();
            assert!(matches!(v, Verdict::Keep { .. }), "{v:?}");
        }
        assert_eq!(r.current(), &start[..]);
    }

    #[test]
    fn alternating_pages_do_not_move_stages() {
        // One page says the device is swamped, the next that it is idle:
        // no assignment wins twice in a row, nothing moves.
        let (st, un) = (stages(), units());
        let mut r = Replanner::new(
            pipeline_table::assign(&st, &un).unwrap(),
            ReplanConfig::default(),
        );
        for i in 0..50 {
            let v = if i % 2 == 0 {
                busy_device(50e6)
            } else {
                idle()
            };
            assert!(matches!(r.check(&st, &un, &v), Ok(Verdict::Keep { .. })));
        }
        assert_eq!(r.switches(), 0);
    }

    #[test]
    fn lanes_share_a_busy_kind_and_devices_drop_our_own_wait() {
        // Idle two-core kind, our two lanes: a core each.
        assert_eq!(lane_view(0, 2, 2).expected_utilisation(1e5), 1.0);
        assert_eq!(lane_view(2, 2, 2).expected_utilisation(1e5), 1.0);
        // Four compiler threads besides our two lanes: a third of a core.
        let v = lane_view(6, 2, 2);
        assert!((v.stretched_ns(1e5) - 3e5).abs() < 1.0, "{v:?}");
        let page = waiting(3e5);
        assert_eq!(device_lane_view(page, 1e5).wait_ns, 2e5);
        assert_eq!(device_lane_view(page, 1e6).wait_ns, 0.0);
        assert!(
            device_lane_view(waiting(f64::INFINITY), 1e5)
                .wait_ns
                .is_infinite()
        );
    }

    #[test]
    fn short_views_count_as_idle_units() {
        let (st, un) = (stages(), units());
        let mut r = Replanner::new(
            vec![UnitId(0); 3],
            ReplanConfig {
                confirm: 1,
                ..Default::default()
            },
        );
        assert!(matches!(r.check(&st, &un, &[]), Ok(Verdict::Switch(_))));
    }

    fn arb_views(n: usize) -> impl Strategy<Value = Vec<ClientUnitView>> {
        proptest::collection::vec(
            (0.0f64..2e6, 0.0f64..1.0, 0.05f64..=1.0).prop_map(|(w, g, m)| ClientUnitView {
                wait_ns: w,
                guaranteed: g,
                max_utilisation: m,
                ..Default::default()
            }),
            n,
        )
    }

    fn arb_stages(units: usize) -> impl Strategy<Value = Vec<StageSpec>> {
        proptest::collection::vec(
            proptest::collection::vec(proptest::option::weighted(0.8, 1e3f64..1e6), units),
            1..5,
        )
        .prop_map(|rows| {
            rows.into_iter()
                .enumerate()
                .map(|(i, mut t)| {
                    // Every stage runs on kind 0 at least.
                    if t[0].is_none() {
                        t[0] = Some(5e5);
                    }
                    StageSpec {
                        name: format!("s{i}"),
                        time_ns: t,
                        bytes_in: 1 << 12,
                        bytes_out: 1 << 12,
                    }
                })
                .collect()
        })
    }

    fn arb_units() -> Vec<Unit> {
        vec![
            Unit::basic(UnitId(0), KindId(0), true, LinkCost::FREE),
            Unit::basic(UnitId(1), KindId(0), true, LinkCost::FREE),
            Unit::basic(UnitId(2), KindId(1), false, LinkCost::new(2_000, 8e9)),
            Unit::basic(UnitId(3), KindId(2), false, LinkCost::new(5_000, 4e9)),
        ]
    }

    proptest! {
        /// Under views that do not change, the replanner switches at most
        /// once, and a switch gains at least the margin.
        #[test]
        fn steady_views_switch_at_most_once(st in arb_stages(3), views in arb_views(4)) {
            let un = arb_units();
            let start = pipeline_table::assign(&st, &un).unwrap();
            let mut r = Replanner::new(start, ReplanConfig { hold: 0, ..Default::default() });
            for _ in 0..30 {
                if let Verdict::Switch(s) = r.check(&st, &un, &views).unwrap() {
                    prop_assert!(s.to_period_ns <= 0.75 * s.from_period_ns + 1e-6);
                }
            }
            prop_assert!(r.switches() <= 1, "{} switches", r.switches());
        }

        /// Whatever the pages say, switches are at least `confirm + hold`
        /// checks apart, and every one gains the margin.
        #[test]
        fn switches_are_spaced_and_worth_it(
            st in arb_stages(3),
            pages in proptest::collection::vec(arb_views(4), 1..60),
        ) {
            let un = arb_units();
            let cfg = ReplanConfig::default();
            let start = pipeline_table::assign(&st, &un).unwrap();
            let mut r = Replanner::new(start, cfg);
            let mut last: Option<usize> = None;
            for (i, v) in pages.iter().enumerate() {
                if let Verdict::Switch(s) = r.check(&st, &un, v).unwrap() {
                    prop_assert!(s.to_period_ns <= (1.0 - cfg.margin) * s.from_period_ns + 1e-6);
                    prop_assert_eq!(r.current(), &s.to[..]);
                    if let Some(l) = last {
                        prop_assert!(i - l >= (cfg.hold + cfg.confirm) as usize);
                    }
                    last = Some(i);
                }
            }
        }

        /// Switching a stepper's assignment at any step keeps every chunk:
        /// each runs every stage exactly once, in stage order, chunks come
        /// out in order, and no unit runs two things in one step.
        #[test]
        fn reassigning_mid_stream_keeps_every_chunk(
            st in arb_stages(3),
            a_pick in proptest::collection::vec(0usize..4, 4),
            b_pick in proptest::collection::vec(0usize..4, 4),
            switch_at in 0usize..40,
            chunks in 1usize..12,
            in_flight in 1usize..6,
        ) {
            let un = arb_units();
            // Any unit the stage can run on, else unit 0 (kind 0).
            let pick = |p: &[usize]| -> Vec<UnitId> {
                st.iter().enumerate().map(|(s, spec)| {
                    let u = &un[p[s]];
                    if spec.time_on(u).is_some() { u.id } else { UnitId(0) }
                }).collect()
            };
            let (a, b) = (pick(&a_pick), pick(&b_pick));
            let mut stepper = Stepper::new(&st, &un, &a, in_flight).unwrap();
            let mut done: Vec<Vec<usize>> = vec![Vec::new(); chunks];
            let mut finished = 0;
            for i in 0..1000 {
                if i == switch_at {
                    stepper.reassign(&st, &un, &b).unwrap();
                    prop_assert_eq!(stepper.assignment(), b.clone());
                }
                let step = stepper.next_step(chunks);
                let mut busy = std::collections::HashSet::new();
                for e in &step.compute {
                    prop_assert!(busy.insert(e.unit), "unit used twice in a step");
                    let want = if stepper.assignment() == b && i >= switch_at { &b } else { &a };
                    prop_assert_eq!(e.unit, want[e.stage]);
                    done[e.chunk].push(e.stage);
                }
                prop_assert!(stepper.finished() >= finished);
                finished = stepper.finished();
                if finished == chunks {
                    break;
                }
            }
            prop_assert_eq!(finished, chunks);
            for d in &done {
                prop_assert_eq!(d, &(0..st.len()).collect::<Vec<_>>());
            }
        }
    }
}
