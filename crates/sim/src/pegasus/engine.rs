//! A machine of `P` CPUs and one or more accelerators shared by domains
//! whose loop is CPU phase → accelerator call(s), stepped in 100 µs steps.
//!
//! - **CPU side.** A credit scheduler in the manner of Xen's. Every 30 ms
//!   each domain's VCPU earns credit in proportion to its CPU credits,
//!   capped at one period's earnings. Every 10 ms tick (and whenever a CPU
//!   frees up) the runnable VCPUs with the most credit get the CPUs, and
//!   running costs credit. A VCPU pinned to a CPU (as Pegasus pins its
//!   domains in §6.3) runs only there. Which VCPUs it picks for the next
//!   tick is the schedule `HS` handed to the accelerator side.
//! - **Accelerator side.** Each domain is associated with one accelerator
//!   (Pegasus's accelerator selection, §3.2); each accelerator has its own
//!   scheduler of the policy under test ([`BackendScheduler`]), which
//!   picks whose queued calls run, for how many ticks. Calls are not
//!   preempted.
//! - **Domains.** A domain runs its CPU phase only while its VCPU has a
//!   CPU, then issues a call. With `depth` 1 it waits for the call (a
//!   tightly coupled loop, like BlackScholes issuing a kernel per batch),
//!   spinning on its CPU as CUDA's synchronous calls do; with a larger
//!   depth it goes on computing while calls are queued. An optional think
//!   time after each completion (sleeping, off the CPU) models a
//!   latency-sensitive client that issues one request at a time.

use hetsched_core::backend_policy::{
    BackendPolicy, BackendScheduler, CpuSchedule, DomainConfig, DomainId, Keep, Turns,
};
use hetsched_core::ids::Ns;
use std::collections::VecDeque;

pub const STEP_NS: Ns = 100_000;
pub const TICK_NS: Ns = 10_000_000;
const CPU_PERIOD_TICKS: u64 = 3;
/// Xen's credits per accounting period, the scale of "remaining credit".
const CREDITS_PER_PERIOD: f64 = 300.0;

#[derive(Clone, Debug, PartialEq)]
pub struct DomainSpec {
    pub name: String,
    pub acc_credits: u32,
    pub cpu_credits: u32,
    /// CPU time between calls, ns.
    pub cpu_ns: Ns,
    /// Accelerator time per call, ns.
    pub call_ns: Ns,
    /// Calls it may have outstanding before it must wait.
    pub depth: u32,
    /// Sleep after each completed call before the next CPU phase, ns.
    pub think_ns: Ns,
    /// SLAF's SLO: expected accelerator time as a fraction of wall time.
    pub slo: Option<f64>,
    /// The CPU its VCPU is pinned to (`None`: any CPU).
    pub cpu: Option<usize>,
    /// The accelerator it is associated with (index below
    /// [`Machine::accelerators`]).
    pub accelerator: usize,
}

#[derive(Clone, Debug)]
pub struct Machine {
    pub cpus: usize,
    /// Accelerators; each runs its own scheduler of the policy under test
    /// for the domains associated with it.
    pub accelerators: usize,
    /// Device time lost when the accelerator turns from one domain's work
    /// to another's (saving and restoring its context and memory, the cost
    /// Pegasus's ticks amortise).
    pub switch_ns: Ns,
    /// How long an owner with no call queued keeps the device while
    /// others wait ([`Turns`], the daemon's rule).
    pub anticipation_ns: Ns,
    /// How often the accelerator side reads the CPU schedule `HS`
    /// (CoSched, AugC): every CPU tick, or slower, as a daemon that scans
    /// threads less often would.
    pub hs_period_ns: Ns,
    pub domains: Vec<DomainSpec>,
}

/// What one domain got in one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DomainOutcome {
    pub calls: u64,
    pub device_ns: Ns,
    pub cpu_ns: Ns,
    /// Issue → completion of every call, ns.
    pub latencies: Vec<Ns>,
    /// The longest stretch the device stood idle while this domain had a
    /// call queued (the anticipation window bounds it), ns.
    pub longest_idle_wait_ns: Ns,
}

struct Domain {
    spec: DomainSpec,
    /// CPU time left in the current phase; `None` while it waits or thinks.
    cpu_left: Option<Ns>,
    think_until: Ns,
    /// Issue times of its queued (not yet started) calls.
    queued: VecDeque<Ns>,
    /// Calls issued and not yet complete (queued + running).
    outstanding: u32,
    credit: f64,
    out: DomainOutcome,
    issued_any: bool,
    /// The current stretch of an idle device while it has a call queued.
    idle_wait: Ns,
}

impl Domain {
    /// On the CPU side a domain competes for a CPU while it computes and
    /// while it waits for a call: accelerator runtimes wait by spinning
    /// (CUDA's default synchronisation), which is why serving a domain
    /// whose CPU side is not running wastes time on both sides. Only
    /// thinking (sleeping) takes it off the CPU.
    fn runnable(&self, now: Ns) -> bool {
        now >= self.think_until && (self.cpu_left.is_some() || self.outstanding > 0)
    }
}

struct Running {
    domain: usize,
    issued: Ns,
    /// Context-switch time still to pay before the call runs.
    switch_left: Ns,
    left: Ns,
    ran: Ns,
}

/// One accelerator: its scheduler, who holds it, and the call it runs.
struct Accelerator {
    sched: BackendScheduler,
    turns: Turns,
    device: Option<Running>,
    last_served: Option<usize>,
}

/// Whether `i` may join the VCPUs in `on_cpu`: a pinned VCPU needs its
/// CPU free of other pinned ones, and all of them together must fit.
fn fits(doms: &[Domain], on_cpu: &[usize], i: usize, cpus: usize) -> bool {
    if on_cpu.len() >= cpus || on_cpu.contains(&i) {
        return false;
    }
    match doms[i].spec.cpu {
        Some(c) => c < cpus && on_cpu.iter().all(|&j| doms[j].spec.cpu != Some(c)),
        None => true,
    }
}

/// Runs `machine` for `duration_ns` under `policy`.
pub fn run(machine: &Machine, policy: BackendPolicy, duration_ns: Ns) -> Vec<DomainOutcome> {
    let mut doms: Vec<Domain> = machine
        .domains
        .iter()
        .map(|spec| Domain {
            spec: spec.clone(),
            cpu_left: Some(spec.cpu_ns),
            think_until: 0,
            queued: VecDeque::new(),
            outstanding: 0,
            credit: 0.0,
            out: DomainOutcome::default(),
            issued_any: false,
            idle_wait: 0,
        })
        .collect();
    let mut accs: Vec<Accelerator> = (0..machine.accelerators.max(1))
        .map(|_| Accelerator {
            sched: BackendScheduler::new(policy, TICK_NS),
            turns: Turns::new(policy, TICK_NS, machine.anticipation_ns),
            device: None,
            last_served: None,
        })
        .collect();
    for (i, d) in doms.iter().enumerate() {
        assert!(
            d.spec.accelerator < accs.len(),
            "{} is associated with accelerator {} of {}",
            d.spec.name,
            d.spec.accelerator,
            accs.len()
        );
        accs[d.spec.accelerator]
            .sched
            .add(
                DomainId(i as u32),
                DomainConfig {
                    acc_credits: d.spec.acc_credits,
                    cpu_credits: d.spec.cpu_credits,
                    slo: d.spec.slo,
                },
            )
            .expect("scenario credits are valid");
    }
    let total_cpu_credits: f64 = doms.iter().map(|d| f64::from(d.spec.cpu_credits)).sum();
    let mut on_cpu: Vec<usize> = Vec::new();
    let hs_period = machine.hs_period_ns.max(TICK_NS);
    let mut now: Ns = 0;
    while now < duration_ns {
        let tick = now % TICK_NS == 0;
        if tick && (now / TICK_NS) % CPU_PERIOD_TICKS == 0 {
            for d in &mut doms {
                let earn = CREDITS_PER_PERIOD * f64::from(d.spec.cpu_credits) / total_cpu_credits;
                d.credit = (d.credit + earn).min(earn);
            }
        }
        // CPU scheduling: at every tick, and to fill a CPU left idle.
        on_cpu.retain(|&i| doms[i].runnable(now));
        if tick || on_cpu.len() < machine.cpus {
            let mut cand: Vec<usize> = (0..doms.len()).filter(|&i| doms[i].runnable(now)).collect();
            // Most credit first; ties rotate with the tick so equals share.
            let rot = (now / TICK_NS) as usize;
            cand.sort_by(|&a, &b| {
                doms[b]
                    .credit
                    .total_cmp(&doms[a].credit)
                    .then(((a + rot) % doms.len()).cmp(&((b + rot) % doms.len())))
            });
            if tick {
                on_cpu.clear();
            }
            for i in cand {
                if fits(&doms, &on_cpu, i, machine.cpus) {
                    on_cpu.push(i);
                }
            }
            if tick && now % hs_period == 0 {
                let hs = CpuSchedule {
                    scheduled: on_cpu
                        .iter()
                        .map(|&i| (DomainId(i as u32), doms[i].credit.max(0.0) as u32))
                        .collect(),
                };
                for a in &mut accs {
                    a.sched.set_cpu_schedule(hs.clone());
                }
            }
        }
        // CPU phases advance; a finished phase issues a call.
        for &i in &on_cpu {
            let d = &mut doms[i];
            d.credit -= CREDITS_PER_PERIOD / (CPU_PERIOD_TICKS * TICK_NS / STEP_NS) as f64;
            d.out.cpu_ns += STEP_NS;
            if let Some(left) = d.cpu_left.as_mut() {
                *left = left.saturating_sub(STEP_NS);
                if *left == 0 {
                    accs[d.spec.accelerator]
                        .turns
                        .arrived(DomainId(i as u32), now + STEP_NS);
                    d.queued.push_back(now + STEP_NS);
                    d.outstanding += 1;
                    d.issued_any = true;
                    d.cpu_left = (d.outstanding < d.spec.depth).then_some(d.spec.cpu_ns);
                }
            }
        }
        // The accelerators.
        for (a, acc) in accs.iter_mut().enumerate() {
            step_accelerator(a, acc, &mut doms, machine, now);
        }
        for d in &mut doms {
            if accs[d.spec.accelerator].device.is_none() && !d.queued.is_empty() {
                d.idle_wait += STEP_NS;
                d.out.longest_idle_wait_ns = d.out.longest_idle_wait_ns.max(d.idle_wait);
            } else {
                d.idle_wait = 0;
            }
        }
        now += STEP_NS;
    }
    doms.into_iter().map(|d| d.out).collect()
}

/// One step of accelerator `a`: its running call advances, and a free
/// device goes to the owner or to whom its scheduler decides.
fn step_accelerator(
    a: usize,
    acc: &mut Accelerator,
    doms: &mut [Domain],
    machine: &Machine,
    now: Ns,
) {
    if let Some(r) = acc.device.as_mut() {
        if r.switch_left > 0 {
            r.switch_left = r.switch_left.saturating_sub(STEP_NS);
        } else {
            r.left = r.left.saturating_sub(STEP_NS);
            r.ran += STEP_NS;
        }
        if r.left == 0 {
            let r = acc.device.take().expect("just matched");
            let d = &mut doms[r.domain];
            d.outstanding -= 1;
            d.out.calls += 1;
            d.out.device_ns += r.ran;
            d.out.latencies.push(now + STEP_NS - r.issued);
            acc.sched.charge(DomainId(r.domain as u32), r.ran);
            acc.turns.completed(
                DomainId(r.domain as u32),
                now + STEP_NS,
                d.queued.is_empty(),
            );
            if d.cpu_left.is_none() && d.outstanding < d.spec.depth {
                d.cpu_left = Some(d.spec.cpu_ns);
                if d.spec.think_ns > 0 {
                    d.think_until = now + STEP_NS + d.spec.think_ns;
                }
            }
        }
    }
    if acc.device.is_some() {
        return;
    }
    let mine = |i: usize| doms[i].spec.accelerator == a;
    let held = acc.turns.owner().map(|(d, _)| d.0 as usize);
    let others_waiting = doms
        .iter()
        .enumerate()
        .any(|(i, d)| mine(i) && Some(i) != held && !d.queued.is_empty());
    let next_call = |d: DomainId| {
        let d = &doms[d.0 as usize];
        d.queued.front().map(|_| d.spec.call_ns)
    };
    let sched = &mut acc.sched;
    let turns = &mut acc.turns;
    let owner = match turns.keep(now, next_call, others_waiting, |d| sched.cpu_side_runs(d)) {
        Keep::Owner(d) => Some(d.0 as usize),
        // The owner is between calls and its next is expected
        // within the anticipation window: the device waits.
        Keep::Hold(_) => None,
        Keep::Decide => {
            for (i, d) in doms.iter().enumerate().filter(|&(i, _)| mine(i)) {
                let _ = sched.update(
                    DomainId(i as u32),
                    !d.queued.is_empty(),
                    d.issued_any,
                    d.queued.front().copied(),
                );
            }
            sched.next(now).map(|dec| {
                turns.start(dec, now);
                dec.domain.0 as usize
            })
        }
    };
    if let Some(o) = owner {
        let issued = doms[o].queued.pop_front().expect("the owner has a call");
        let switch_left = if acc.last_served == Some(o) {
            0
        } else {
            machine.switch_ns
        };
        acc.last_served = Some(o);
        acc.device = Some(Running {
            domain: o,
            issued,
            switch_left,
            left: doms[o].spec.call_ns,
            ran: 0,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, acc: u32) -> DomainSpec {
        DomainSpec {
            name: name.into(),
            acc_credits: acc,
            cpu_credits: 256,
            cpu_ns: 1_000_000,
            call_ns: 5_000_000,
            depth: 2,
            think_ns: 0,
            slo: None,
            cpu: None,
            accelerator: 0,
        }
    }

    #[test]
    fn the_device_stays_busy_and_accc_follows_credits() {
        let m = Machine {
            cpus: 4,
            accelerators: 1,
            switch_ns: 0,
            anticipation_ns: 1_000_000,
            hs_period_ns: TICK_NS,
            domains: vec![
                spec("a", 256),
                spec("b", 512),
                spec("c", 1024),
                spec("d", 256),
            ],
        };
        let out = run(&m, BackendPolicy::AccC, 5_000_000_000);
        let total: Ns = out.iter().map(|o| o.device_ns).sum();
        assert!(total as f64 > 0.95 * 5e9, "device idle: {total}");
        for (o, c) in out.iter().zip([256.0, 512.0, 1024.0, 256.0]) {
            let share = o.device_ns as f64 / total as f64;
            assert!((share - c / 2048.0).abs() < 0.03, "{out:?}");
        }
    }

    /// Tightly coupled domains on fewer CPUs than domains: whatever the
    /// policy, the device never stands idle longer than the anticipation
    /// window while a domain has a call queued (before the window, the
    /// owner held it through its CPU phases and its waits for a CPU).
    #[test]
    fn no_policy_holds_the_device_idle_past_the_window_while_calls_wait() {
        for anticipation_ns in [0, 1_000_000, 3_000_000] {
            let mut domains: Vec<DomainSpec> = [256, 512, 1024, 256]
                .iter()
                .enumerate()
                .map(|(i, &c)| spec(&format!("d{i}"), c))
                .collect();
            for d in &mut domains {
                d.depth = 1;
                d.cpu_ns = 2_000_000;
            }
            let m = Machine {
                cpus: 2,
                accelerators: 1,
                switch_ns: 1_000_000,
                anticipation_ns,
                hs_period_ns: TICK_NS,
                domains,
            };
            for policy in BackendPolicy::ALL {
                let out = run(&m, policy, 2_000_000_000);
                for o in &out {
                    assert!(
                        o.longest_idle_wait_ns <= anticipation_ns + STEP_NS,
                        "{policy:?}, window {anticipation_ns}: {}",
                        o.longest_idle_wait_ns
                    );
                }
            }
        }
    }

    #[test]
    fn a_synchronous_domain_alternates_cpu_and_device() {
        let mut s = spec("solo", 256);
        s.depth = 1;
        let m = Machine {
            cpus: 1,
            accelerators: 1,
            switch_ns: 1_000_000,
            anticipation_ns: 1_000_000,
            hs_period_ns: TICK_NS,
            domains: vec![s],
        };
        let out = run(&m, BackendPolicy::None, 1_000_000_000);
        // 1 ms CPU + 5 ms device per call, and one context switch only
        // (nobody else uses the device): about 166 calls a second.
        assert!((160..=167).contains(&out[0].calls), "{:?}", out[0].calls);
        assert!(out[0].latencies.iter().all(|&l| l >= 5_000_000));
    }

    /// Two VCPUs pinned to one CPU take turns on it and never run at
    /// once, while the other CPU stays with the domain pinned there.
    #[test]
    fn pinned_vcpus_share_only_their_own_cpu() {
        let mut domains: Vec<DomainSpec> = (0..3).map(|i| spec(&format!("d{i}"), 256)).collect();
        for (d, cpu) in domains.iter_mut().zip([0, 0, 1]) {
            d.depth = 1;
            d.cpu = Some(cpu);
        }
        let m = Machine {
            cpus: 2,
            accelerators: 1,
            switch_ns: 0,
            anticipation_ns: 1_000_000,
            hs_period_ns: TICK_NS,
            domains,
        };
        let secs = 2_000_000_000;
        for policy in BackendPolicy::ALL {
            let out = run(&m, policy, secs);
            // Waiting domains spin, so CPU 0 is always busy with one of
            // its two, and they split it; CPU 1 is d2's alone.
            assert_eq!(out[0].cpu_ns + out[1].cpu_ns, secs, "{policy:?}");
            assert_eq!(out[2].cpu_ns, secs, "{policy:?}");
            assert!(
                out[0].cpu_ns.abs_diff(out[1].cpu_ns) <= secs / 10,
                "{policy:?}"
            );
        }
    }

    /// Domains associated with different accelerators do not wait for
    /// each other's calls: with a CPU each, each runs as if alone.
    #[test]
    fn each_accelerator_serves_only_its_own_domains() {
        let solo = |accelerators: usize, on: [usize; 2]| {
            let domains = on
                .iter()
                .enumerate()
                .map(|(i, &a)| {
                    let mut d = spec(&format!("d{i}"), 256);
                    d.depth = 1;
                    d.cpu = Some(i);
                    d.accelerator = a;
                    d
                })
                .collect();
            let m = Machine {
                cpus: 2,
                accelerators,
                switch_ns: 1_000_000,
                anticipation_ns: 1_000_000,
                hs_period_ns: TICK_NS,
                domains,
            };
            run(&m, BackendPolicy::AccC, 1_000_000_000)
        };
        let apart = solo(2, [0, 1]);
        // 1 ms CPU + 5 ms call each, one switch each: about 166 a second.
        for o in &apart {
            assert!((160..=167).contains(&o.calls), "{apart:?}");
        }
        // On one accelerator they share it: well under that each.
        let shared = solo(1, [0, 0]);
        assert!(shared.iter().all(|o| o.calls < 120), "{shared:?}");
    }
}
