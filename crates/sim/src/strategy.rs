//! The placement policies the simulator compares.
//!
//! hetsched, c-sched and StarPU's dmda all use hetsched-core's [`Placer`];
//! they differ only in what they know when they decide: a view published
//! every 10 ms (hetsched), the exact global queues (c-sched), or only the
//! app's own queued tasks (dmda).

use hetsched_core::placement::{PlacementConfig, Placer};
use hetsched_core::policy::PolicyKind;

/// A placement policy, by name.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StrategyKind {
    /// Every task on the app's fastest unit (what a program hard-wired to
    /// its best device does); the baseline of relative throughput.
    Native,
    /// StarPU eager: whichever of the app's workers is idle takes the task,
    /// whatever the unit; with one worker per unit that is a uniform choice
    /// among units the app has an implementation for.
    StarpuEager,
    /// StarPU dmda: best predicted completion counting only the app's own
    /// queued tasks (blind to other apps).
    StarpuDmda,
    /// hetsched: turnaround prediction on the published (stale) views,
    /// with the given stabilisers.
    Hetsched(Stabilisers),
    /// Centralised placement on exact global queues (Rinnegan's c-sched).
    CSched,
    /// hetsched with proportional-fair coordination: the monitor solves the
    /// floor-constrained PF allocation from measured task models and each
    /// client follows its target unit fractions (hetsched-core's
    /// `coordination`); plain hetsched placement until the app is profiled.
    /// Its candidates judged by replay (`hetsched-pf`, the daemon's
    /// `coordination = "pf-replay"`) or by the fluid predictor
    /// (`hetsched-pf-fluid`, the daemon's default `"pf"`).
    HetschedPf(PfJudge),
    /// GTS-like asymmetry-aware CPU scheduling: the fastest unit with an idle
    /// slot, otherwise the unit with the most slots (the "normal" cores).
    AsymAware,
}

/// How hetsched-pf's coordinator judges its candidate plans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PfJudge {
    /// By replaying them (`CoordinatorConfig::replay`).
    Replay,
    /// By the fluid predictor, re-solving warm between full picks.
    Fluid,
}

/// Which of Rinnegan's stabilisers are on, and whether a client counts
/// the work others placed since the views were published
/// ([`hetsched_core::view::PlacedSincePublish`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stabilisers {
    pub threshold: bool,
    pub aggregation: bool,
    pub damping: bool,
    pub placed_since: bool,
}

impl Stabilisers {
    pub const ALL: Stabilisers = Stabilisers {
        threshold: true,
        aggregation: true,
        damping: true,
        placed_since: true,
    };

    pub fn config(self) -> PlacementConfig {
        let full = PlacementConfig::default();
        PlacementConfig {
            speedup_threshold: full.speedup_threshold.filter(|_| self.threshold),
            aggregation_factor: full.aggregation_factor.filter(|_| self.aggregation),
            damping_tolerance: full.damping_tolerance.filter(|_| self.damping),
            ..full
        }
    }
}

const HETSCHED_VARIANTS: [(&str, Stabilisers); 7] = [
    ("hetsched", Stabilisers::ALL),
    (
        "hetsched/no-damping",
        Stabilisers {
            damping: false,
            ..Stabilisers::ALL
        },
    ),
    (
        "hetsched/no-threshold",
        Stabilisers {
            threshold: false,
            ..Stabilisers::ALL
        },
    ),
    (
        "hetsched/no-aggregation",
        Stabilisers {
            aggregation: false,
            ..Stabilisers::ALL
        },
    ),
    (
        "hetsched/stale",
        Stabilisers {
            placed_since: false,
            ..Stabilisers::ALL
        },
    ),
    (
        "hetsched/stale-no-damping",
        Stabilisers {
            placed_since: false,
            damping: false,
            ..Stabilisers::ALL
        },
    ),
    (
        "hetsched/bare",
        Stabilisers {
            threshold: false,
            aggregation: false,
            damping: false,
            placed_since: false,
        },
    ),
];

impl StrategyKind {
    pub fn name(&self) -> String {
        match self {
            Self::Native => "native".into(),
            Self::StarpuEager => "starpu-eager".into(),
            Self::StarpuDmda => "starpu-dmda".into(),
            Self::CSched => "c-sched".into(),
            Self::AsymAware => "asym-aware".into(),
            Self::HetschedPf(PfJudge::Replay) => "hetsched-pf".into(),
            Self::HetschedPf(PfJudge::Fluid) => "hetsched-pf-fluid".into(),
            Self::Hetsched(s) => HETSCHED_VARIANTS
                .iter()
                .find(|(_, v)| v == s)
                .map(|(n, _)| n.to_string())
                .unwrap_or_else(|| format!("hetsched{s:?}")),
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "native" | "always-fast" => Some(Self::Native),
            "starpu-eager" => Some(Self::StarpuEager),
            "starpu-dmda" => Some(Self::StarpuDmda),
            "c-sched" => Some(Self::CSched),
            "asym-aware" => Some(Self::AsymAware),
            "hetsched-pf" => Some(Self::HetschedPf(PfJudge::Replay)),
            "hetsched-pf-fluid" => Some(Self::HetschedPf(PfJudge::Fluid)),
            _ => HETSCHED_VARIANTS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, s)| Self::Hetsched(*s)),
        }
    }

    pub fn names() -> Vec<&'static str> {
        let mut v = vec![
            "native",
            "starpu-eager",
            "starpu-dmda",
            "c-sched",
            "asym-aware",
            "hetsched-pf",
            "hetsched-pf-fluid",
        ];
        v.extend(HETSCHED_VARIANTS.iter().map(|(n, _)| *n));
        v
    }

    /// The policy a unit runs under this strategy, given the scenario's.
    /// Under hetsched-pf (replay-judged) a FIFO device runs [`PolicyKind::ShortFirst`],
    /// in arrival order until the monitor's solve says short-first (per
    /// unit, where the replay finds it adds without costing anyone the
    /// floor): an app with short tasks there then waits for the task that
    /// is running, not for every long task queued ahead of it.
    pub fn unit_policy(&self, scenario: PolicyKind) -> PolicyKind {
        match (self, scenario) {
            (Self::HetschedPf(PfJudge::Replay), PolicyKind::Fifo) => PolicyKind::ShortFirst,
            (_, kind) => kind,
        }
    }

    /// Whether a client adds the work placed since the last refresh to
    /// its views (hetsched's clients do, unless a variant turns it off).
    /// hetsched-pf's clients follow the monitor's targets and place on
    /// views only until profiled; counting placed work there lowered the
    /// worst of `pf_mixes` from 0.440 to 0.309 of the bound, so they do not.
    pub fn counts_placed_since(&self) -> bool {
        match self {
            Self::Hetsched(s) => s.placed_since,
            _ => false,
        }
    }

    /// Whether apps run on hetsched's runtime, whose optimizer pursues
    /// their throughput goals (the others only measure them).
    pub fn runs_optimizer(&self) -> bool {
        matches!(self, Self::Hetsched(_) | Self::HetschedPf(_))
    }

    /// The placer configuration, for strategies that use hetsched-core's placer.
    pub fn placer(&self, units: usize) -> Option<Placer> {
        let config = match self {
            Self::Hetsched(s) => s.config(),
            Self::HetschedPf(_) => Stabilisers::ALL.config(),
            // c-sched sees exact queues, so stale-view damping has nothing to
            // correct; it keeps the data-movement stabilisers.
            Self::CSched => Stabilisers {
                damping: false,
                ..Stabilisers::ALL
            }
            .config(),
            Self::StarpuDmda => PlacementConfig::bare(),
            _ => return None,
        };
        Some(Placer::new(config, units))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back() {
        for name in StrategyKind::names() {
            let kind = StrategyKind::parse(name).unwrap();
            assert_eq!(kind.name(), name);
        }
        assert!(StrategyKind::parse("hetsched/typo").is_none());
    }
}
