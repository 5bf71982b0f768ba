//! Pegasus's accelerator ("DomA") scheduler: which domain's queued calls a
//! backend serves next, and for how many ticks.
//!
//! A *domain* is a client process or a cgroup whose accelerator calls go
//! through a per-domain queue (its "aVCPU"). Every tick — or when the
//! current domain's ticks run out — the backend asks [`BackendScheduler::next`]
//! whom to serve. The policies (Pegasus §4):
//!
//! | name | what decides | property |
//! |---|---|---|
//! | `none` | the oldest queued call, whoever made it | first-come-first-serve baseline |
//! | `rr` | a ring of domains, one tick each | fair share |
//! | `accc` | the ring, `X/X_min` ticks each, X = accelerator credits (Algorithm 1) | proportional share |
//! | `xc` | the same with the domain's CPU credits | proportional to CPU share |
//! | `slaf` | `accc` plus compensation ticks for SLO violations | feedback fair share |
//! | `cosched` | the CPU schedule: highest-credit domain whose CPU side runs next (Algorithm 2); a call waiting 10 ticks goes first | latency, by occasional unfairness |
//! | `augc` | AccC's rounds, each ordered by credits plus the CPU schedule's remaining credit (Algorithm 2) | throughput, no one denied their turn |
//!
//! Pure: time comes in as an argument; the daemon's backend threads, the
//! simulator and the tests drive the same code.

mod coordinated;
mod credit_ring;
pub mod selection;
mod slaf;
mod turns;

use crate::Ns;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use coordinated::COSCHED_MAX_WAIT_NS;
pub use slaf::SloWindow;
pub use turns::{Keep, TURN_ANTICIPATION_NS, Turns};

/// A domain: a client or a cgroup with its own call queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DomainId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendPolicy {
    None,
    Rr,
    AccC,
    Xc,
    Slaf,
    CoSched,
    AugC,
}

impl BackendPolicy {
    pub const ALL: [BackendPolicy; 7] = [
        BackendPolicy::None,
        BackendPolicy::Rr,
        BackendPolicy::AccC,
        BackendPolicy::Xc,
        BackendPolicy::Slaf,
        BackendPolicy::AugC,
        BackendPolicy::CoSched,
    ];

    /// The names the CLI, the config and the simulator use.
    pub fn name(self) -> &'static str {
        match self {
            BackendPolicy::None => "none",
            BackendPolicy::Rr => "rr",
            BackendPolicy::AccC => "accc",
            BackendPolicy::Xc => "xc",
            BackendPolicy::Slaf => "slaf",
            BackendPolicy::CoSched => "cosched",
            BackendPolicy::AugC => "augc",
        }
    }

    pub fn parse(s: &str) -> Option<BackendPolicy> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// What the operator set for a domain.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DomainConfig {
    /// Accelerator credits (Xen-style weights; 256 is the usual default).
    pub acc_credits: u32,
    /// CPU credits: its weight on the CPU side (XC follows these).
    pub cpu_credits: u32,
    /// SLO for SLAF: the accelerator time it expects, as a fraction of
    /// wall time (0.5 = half a second every second).
    pub slo: Option<f64>,
}

impl Default for DomainConfig {
    fn default() -> Self {
        DomainConfig {
            acc_credits: 256,
            cpu_credits: 256,
            slo: None,
        }
    }
}

/// Why a configuration is refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DomainError {
    #[error("credits must be at least 1 (got accelerator {acc}, CPU {cpu})")]
    ZeroCredits { acc: u32, cpu: u32 },
    #[error("an SLO is a fraction of wall time in (0, 1], got {0}")]
    BadSlo(f64),
    #[error("domain {0:?} is not registered")]
    Unknown(DomainId),
}

impl DomainConfig {
    pub fn validate(&self) -> Result<(), DomainError> {
        if self.acc_credits == 0 || self.cpu_credits == 0 {
            return Err(DomainError::ZeroCredits {
                acc: self.acc_credits,
                cpu: self.cpu_credits,
            });
        }
        if let Some(s) = self.slo {
            if !(s > 0.0 && s <= 1.0) {
                return Err(DomainError::BadSlo(s));
            }
        }
        Ok(())
    }
}

/// The CPU side's plan for the next period (Algorithm 2's `HS`): the
/// domains whose CPU threads run next, with the CPU credit each has left.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSchedule {
    pub scheduled: Vec<(DomainId, u32)>,
}

impl CpuSchedule {
    pub fn remaining(&self, d: DomainId) -> Option<u32> {
        self.scheduled
            .iter()
            .find(|(id, _)| *id == d)
            .map(|&(_, c)| c)
    }
}

/// A domain as the scheduler tracks it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Domain {
    pub cfg: DomainConfig,
    /// It has at least one queued call.
    pub ready: bool,
    /// It holds state on the accelerator (buffers, a context): Pegasus
    /// gives a domain without one the minimum of one tick.
    pub context: bool,
    /// When its oldest queued call arrived (for `none`).
    pub oldest_call: Option<Ns>,
    /// Accelerator time it has been served, ns.
    pub served_ns: Ns,
    /// Ticks it was given, over all its turns.
    pub ticks_granted: u64,
}

/// One domain as `hetsched status` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DomainState {
    /// The unit's backend policy.
    pub policy: BackendPolicy,
    pub config: DomainConfig,
    /// Ticks it was given, over all its turns.
    pub ticks_granted: u64,
    /// Accelerator time it has been served, ns.
    pub served_ns: u64,
    /// Whether its last SLO window met the SLO (SLAF, domains with an SLO).
    pub slo_met: Option<bool>,
}

/// The scheduler's answer: serve `domain` for `ticks` ticks (or, under
/// `none`, its oldest call).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub domain: DomainId,
    pub ticks: u32,
}

/// One accelerator's scheduler.
#[derive(Clone, Debug)]
pub struct BackendScheduler {
    policy: BackendPolicy,
    domains: BTreeMap<DomainId, Domain>,
    ring: credit_ring::CreditRing,
    augc: coordinated::AugCredits,
    hs: CpuSchedule,
    /// Whether the CPU side has ever reported a schedule.
    hs_known: bool,
    slo: slaf::SloWindow,
}

impl BackendScheduler {
    /// `tick_ns` is the tick length, which SLAF needs to turn a time
    /// deficit into compensation ticks.
    pub fn new(policy: BackendPolicy, tick_ns: Ns) -> BackendScheduler {
        BackendScheduler {
            policy,
            domains: BTreeMap::new(),
            ring: credit_ring::CreditRing::default(),
            augc: coordinated::AugCredits::default(),
            hs: CpuSchedule::default(),
            hs_known: false,
            slo: slaf::SloWindow::new(tick_ns),
        }
    }

    pub fn policy(&self) -> BackendPolicy {
        self.policy
    }

    /// Registers a domain (or updates its configuration).
    pub fn add(&mut self, id: DomainId, cfg: DomainConfig) -> Result<(), DomainError> {
        cfg.validate()?;
        let d = self.domains.entry(id).or_insert(Domain {
            cfg,
            ready: false,
            context: false,
            oldest_call: None,
            served_ns: 0,
            ticks_granted: 0,
        });
        d.cfg = cfg;
        self.ring.insert(id, self.weight(&cfg));
        Ok(())
    }

    /// Forgets a domain (its client left or died); it is never chosen again.
    pub fn remove(&mut self, id: DomainId) {
        self.domains.remove(&id);
        self.ring.remove(id);
        self.augc.remove(id);
        self.slo.remove(id);
    }

    pub fn domains(&self) -> impl Iterator<Item = (DomainId, &DomainConfig)> {
        self.domains.iter().map(|(&id, d)| (id, &d.cfg))
    }

    /// What the backend knows about a domain's queue.
    pub fn update(
        &mut self,
        id: DomainId,
        ready: bool,
        context: bool,
        oldest_call: Option<Ns>,
    ) -> Result<(), DomainError> {
        let d = self.domains.get_mut(&id).ok_or(DomainError::Unknown(id))?;
        d.ready = ready;
        d.context = context;
        d.oldest_call = if ready { oldest_call } else { None };
        Ok(())
    }

    /// The CPU side's schedule for the next period (CoSched, AugC).
    pub fn set_cpu_schedule(&mut self, hs: CpuSchedule) {
        self.hs = hs;
        self.hs_known = true;
    }

    /// Whether `d`'s CPU side runs now, as far as a policy that follows
    /// the CPU schedule (CoSched, AugC) knows: `false` only when a
    /// schedule was reported and leaves `d` out. An owner whose CPU side
    /// does not run cannot issue its next call soon, so [`Turns`] does
    /// not hold the device for it. The other policies do not read the
    /// CPU schedule and always say `true`.
    pub fn cpu_side_runs(&self, d: DomainId) -> bool {
        !self.follows_cpu_schedule() || !self.hs_known || self.hs.remaining(d).is_some()
    }

    /// Whether this policy reads the CPU schedule (CoSched, AugC).
    pub fn follows_cpu_schedule(&self) -> bool {
        matches!(self.policy, BackendPolicy::CoSched | BackendPolicy::AugC)
    }

    /// Records accelerator time served to `id` (after a call or a slot).
    pub fn charge(&mut self, id: DomainId, served_ns: Ns) {
        if let Some(d) = self.domains.get_mut(&id) {
            d.served_ns += served_ns;
            self.slo.charge(id, served_ns);
        }
    }

    /// Whom to serve next. `None` when no domain has a queued call.
    /// A ready domain is always chosen when there is one; how long the
    /// chosen domain then holds the device is [`Turns`]'s rule.
    pub fn next(&mut self, now: Ns) -> Option<Decision> {
        if self.policy == BackendPolicy::Slaf {
            self.slo.check(now, &self.domains);
        }
        let decision = self.decide(now);
        if let Some(d) = decision.and_then(|d| self.domains.get_mut(&d.domain).map(|s| (s, d))) {
            d.0.ticks_granted += u64::from(d.1.ticks);
        }
        decision
    }

    fn decide(&mut self, now: Ns) -> Option<Decision> {
        match self.policy {
            BackendPolicy::None => self
                .domains
                .iter()
                .filter(|(_, d)| d.ready)
                .min_by_key(|(id, d)| (d.oldest_call.unwrap_or(Ns::MAX), **id))
                .map(|(&domain, _)| Decision { domain, ticks: 1 }),
            BackendPolicy::Rr | BackendPolicy::AccC | BackendPolicy::Xc => {
                let flat = self.policy == BackendPolicy::Rr;
                self.ring.next(&self.domains, flat, |_| 0)
            }
            BackendPolicy::Slaf => {
                let slo = &mut self.slo;
                self.ring
                    .next(&self.domains, false, |id| slo.take_compensation(id))
            }
            BackendPolicy::CoSched => coordinated::cosched(&self.domains, &self.hs, now),
            BackendPolicy::AugC => self.augc.next(&self.domains, &self.hs),
        }
    }

    /// Accelerator time served per domain so far, ns.
    pub fn served(&self) -> impl Iterator<Item = (DomainId, Ns)> + '_ {
        self.domains.iter().map(|(&id, d)| (id, d.served_ns))
    }

    /// SLAF's view: per domain with an SLO, whether its last window met it.
    pub fn slo_state(&self) -> Vec<(DomainId, bool)> {
        self.slo.state()
    }

    /// Credits, ticks, service and SLO state of one domain, for status.
    pub fn domain_state(&self, id: DomainId) -> Option<DomainState> {
        let d = self.domains.get(&id)?;
        let slo_met = if self.policy == BackendPolicy::Slaf && d.cfg.slo.is_some() {
            self.slo
                .state()
                .into_iter()
                .find(|(s, _)| *s == id)
                .map(|(_, met)| met)
        } else {
            None
        };
        Some(DomainState {
            policy: self.policy,
            config: d.cfg,
            ticks_granted: d.ticks_granted,
            served_ns: d.served_ns,
            slo_met,
        })
    }

    fn weight(&self, cfg: &DomainConfig) -> u32 {
        match self.policy {
            BackendPolicy::Xc => cfg.cpu_credits,
            _ => cfg.acc_credits,
        }
    }
}
