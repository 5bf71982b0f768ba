//! An app's completions in a counted window, and the throughput they
//! give: the replay's, and the simulator's per-app figures.
//!
//! Completions ÷ window length is off by up to one task per place in
//! flight, depending on where the window's edges fall in the app's cycle:
//! nothing for an app that completes hundreds of tasks, but at 128
//! applications a replay ends (at its event cap) with apps that completed
//! two or three long tasks, whose throughput it then misjudged by a third
//! or more. Every plan but the native one (which replays its own estimate
//! exactly) then seemed to push some app below the floor, and the
//! coordinator kept native placement. Below [`super::ReplayBudget::min_tasks`]
//! completions the rate is taken from the spacing of the completions
//! instead, which does not depend on the window's phase.

/// Completions of one app in the counted window: how many, the work they
/// carry, the first and the last (time in ns).
///
/// A completion carries one unit of work unless it is counted with
/// [`Counted::complete_work`]: the simulator weighs a task whose size
/// varies by its nominal time over the mean size's, so that an app is
/// rated in mean-size tasks and a window that happens to hold its smaller
/// tasks does not read faster. The rates below are work per second; with
/// every completion of weight 1 they are tasks per second, bit for bit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counted {
    pub tasks: u64,
    /// Σ of the completions' weights.
    pub work: f64,
    /// The first completion's weight.
    first_work: f64,
    first: f64,
    last: f64,
}

impl Counted {
    pub fn complete(&mut self, now: f64) {
        self.complete_work(now, 1.0);
    }

    /// A completion at `now` carrying `work` (1: one mean-size task).
    pub fn complete_work(&mut self, now: f64, work: f64) {
        if self.tasks == 0 {
            self.first = now;
            self.first_work = work;
        }
        self.last = now;
        self.tasks += 1;
        self.work += work;
    }

    /// Tasks per second over a counted window of `span` ns that ended at
    /// `end`. With `min_tasks` or more completions (or fewer than two):
    /// completions ÷ span. Otherwise completions ÷ the time they take at
    /// their mean spacing m, or ÷ the time since the first, if longer (an
    /// app stalled since its last completion, for longer than m, is not
    /// credited with the rate it had before): never above 1 ÷ m, never
    /// below (completions − 1) ÷ span.
    pub fn per_s(&self, span: f64, end: f64, min_tasks: u64) -> f64 {
        self.rate(span, end, None, min_tasks)
    }

    /// Tasks per second over the window from `start` to `end` (ns), as
    /// [`Counted::per_s`], and with a second guard for the window's other
    /// edge: never above completions ÷ the time from `start` to the last
    /// (an app that waited longer than m for its first completion is not
    /// credited with the rate it had after). For tasks completing every m
    /// the guards are idle whatever the phase, and the rate is 1 ÷ m.
    pub fn per_s_in_window(&self, start: f64, end: f64, min_tasks: u64) -> f64 {
        self.rate(end - start, end, Some(start), min_tasks)
    }

    fn rate(&self, span: f64, end: f64, start: Option<f64>, min_tasks: u64) -> f64 {
        if span <= 0.0 {
            return 0.0;
        }
        let w = self.work;
        let after_first = w - self.first_work;
        if self.tasks >= min_tasks
            || self.tasks < 2
            || self.last <= self.first
            || after_first <= 0.0
        {
            return w * 1e9 / span;
        }
        // Time per unit of work between the first completion and the last
        // (the first one's work was done before it).
        let spacing = (self.last - self.first) / after_first;
        let since_start = start.map_or(0.0, |s| self.last - s);
        let took = (w * spacing).max(end - self.first).max(since_start);
        w * 1e9 / took
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn counted(at: &[f64]) -> Counted {
        let mut c = Counted::default();
        at.iter().for_each(|t| c.complete(*t));
        c
    }

    #[test]
    fn many_completions_count_over_the_window() {
        let c = counted(&(0..40).map(|k| 10.0 + 25.0 * k as f64).collect::<Vec<_>>());
        assert_eq!(c.per_s(1000.0, 1000.0, 30), 40.0 * 1e9 / 1000.0);
    }

    #[test]
    fn a_few_steady_completions_give_their_period_whatever_the_phase() {
        // Period 450 ns, window 1000 ns: 3 completions counted (÷ span:
        // 1/333 ns, a third too fast), or 2 for a later phase (1/500 ns).
        for phase in [5.0, 50.0, 90.0] {
            let at: Vec<f64> = (0..3)
                .map(|k| phase + 450.0 * k as f64)
                .filter(|t| *t < 1000.0)
                .collect();
            let got = counted(&at).per_s(1000.0, 1000.0, 30);
            assert!((got - 1e9 / 450.0).abs() < 1e-6, "{phase}: {got}");
        }
    }

    #[test]
    fn a_stall_since_the_last_completion_is_not_credited() {
        // Two quick completions, then nothing for the rest of the window.
        let got = counted(&[50.0, 100.0]).per_s(1000.0, 1000.0, 30);
        assert!((got - 2.0 * 1e9 / 950.0).abs() < 1e-6, "{got}");
    }

    #[test]
    fn a_wait_before_the_first_completion_is_not_credited() {
        // Nothing for 900 ns of a 1000 ns window, then two quick completions.
        let c = counted(&[950.0, 1000.0]);
        let got = c.per_s_in_window(0.0, 1000.0, 30);
        assert!((got - 2.0 * 1e9 / 1000.0).abs() < 1e-6, "{got}");
        // Without the window's start, only the spacing and the tail count.
        assert!((c.per_s(1000.0, 1000.0, 30) - 1e9 / 50.0).abs() < 1e-6);
    }

    #[test]
    fn in_a_window_steady_completions_give_their_period_whatever_the_phase() {
        // Window 300..1300 ns, period 450 ns, phase anywhere in it.
        for phase in [0.0, 5.0, 200.0, 449.0] {
            let at: Vec<f64> = (0..3)
                .map(|k| 300.0 + phase + 450.0 * k as f64)
                .filter(|t| *t <= 1300.0)
                .collect();
            let got = counted(&at).per_s_in_window(300.0, 1300.0, 30);
            assert!((got - 1e9 / 450.0).abs() < 1e-6, "{phase}: {got}");
        }
    }

    #[test]
    fn weighted_completions_give_the_work_rate_whatever_the_task_sizes() {
        // One unit of work per 100 ns, in a 1000 ns window: as 20 tasks of
        // half a unit or 5 of two units. Counted, they read 2e7 and 5e6
        // tasks/s; weighted, both read 1e7 units of work per second.
        for (weight, every) in [(0.5, 50.0), (2.0, 200.0)] {
            let mut c = Counted::default();
            let n = (1000.0 / every) as usize;
            (1..=n).for_each(|k| c.complete_work(every * k as f64, weight));
            let got = c.per_s_in_window(0.0, 1000.0, 30);
            assert!((got - 1e7).abs() < 1e-3, "{weight}: {got}");
            assert_eq!(c.work, 10.0);
        }
    }

    proptest! {
        #[test]
        fn weighted_steady_work_reads_its_rate_within_one_task(
            weights in proptest::collection::vec(0.25f64..1.0, 2..29),
            lead in 0.0f64..100.0,
            tail in 0.0f64..100.0,
        ) {
            // One unit of work per 100 ns; the window starts `lead` before
            // the first counted task's work begins and ends `tail` after
            // the last completion (less than any task's time).
            let tail = tail * weights.iter().cloned().fold(1.0, f64::min);
            let mut c = Counted::default();
            let mut at = lead;
            for w in &weights {
                at += 100.0 * w;
                c.complete_work(at, *w);
            }
            let got = c.per_s_in_window(0.0, at + tail, 30);
            let rate = 1e9 / 100.0;
            prop_assert!(got <= rate * (1.0 + 1e-12), "{got}");
            prop_assert!(got >= rate * c.work / (c.work + 1.0) * (1.0 - 1e-12), "{got}");
        }

        #[test]
        fn in_a_window_between_the_count_less_one_and_the_spacing(
            gaps in proptest::collection::vec(1.0f64..500.0, 1..40),
            lead in 0.0f64..500.0,
            tail in 0.0f64..500.0,
        ) {
            let mut at = vec![1000.0 + lead];
            for g in &gaps {
                at.push(at.last().unwrap() + g);
            }
            let end = at.last().unwrap() + tail;
            let c = counted(&at);
            let got = c.per_s_in_window(1000.0, end, 30);
            let span = end - 1000.0;
            let spacing = (at.last().unwrap() - at[0]) / (c.tasks as f64 - 1.0);
            if c.tasks < 30 {
                prop_assert!(got >= (c.tasks - 1) as f64 * 1e9 / span * (1.0 - 1e-12));
                prop_assert!(got <= 1e9 / spacing * (1.0 + 1e-12));
                prop_assert!(got <= c.per_s(span, end, 30) * (1.0 + 1e-12));
            } else {
                prop_assert!((got - c.tasks as f64 * 1e9 / span).abs() <= got * 1e-12);
            }
        }

        #[test]
        fn between_the_window_count_and_the_spacing(
            gaps in proptest::collection::vec(1.0f64..500.0, 1..40),
            start in 0.0f64..100.0,
            tail in 0.0f64..500.0,
        ) {
            let mut at = vec![start];
            for g in &gaps {
                at.push(at.last().unwrap() + g);
            }
            let end = at.last().unwrap() + tail;
            let c = counted(&at);
            let got = c.per_s(end, end, 30);
            let window = c.tasks as f64 * 1e9 / end;
            let spacing = (at.last().unwrap() - at[0]) / (c.tasks as f64 - 1.0);
            if c.tasks < 30 {
                prop_assert!(got >= (c.tasks - 1) as f64 * 1e9 / end * (1.0 - 1e-12));
                prop_assert!(got <= 1e9 / spacing * (1.0 + 1e-12));
            } else {
                prop_assert!((got - window).abs() <= window * 1e-12);
            }
        }
    }
}
