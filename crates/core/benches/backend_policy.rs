//! One Pegasus scheduling decision (`next` + `charge`) with 64 domains,
//! all with queued calls and half of them in the CPU schedule, per policy.
//! Target: ≤ 5 µs per tick (Pegasus: about 0.5 ms per scheduler call).

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use hetsched_core::backend_policy::{
    BackendPolicy, BackendScheduler, CpuSchedule, DomainConfig, DomainId,
};
use std::hint::black_box;

const DOMAINS: u32 = 64;
const TICK: u64 = 10_000_000;

fn scheduler(policy: BackendPolicy) -> BackendScheduler {
    let mut s = BackendScheduler::new(policy, TICK);
    for d in 0..DOMAINS {
        let cfg = DomainConfig {
            acc_credits: 256 << (d % 3),
            cpu_credits: 256 << (d % 2),
            slo: (d % 4 == 0).then_some(0.05),
        };
        s.add(DomainId(d), cfg).unwrap();
        s.update(DomainId(d), true, true, Some(u64::from(d)))
            .unwrap();
    }
    s.set_cpu_schedule(CpuSchedule {
        scheduled: (0..DOMAINS / 2).map(|d| (DomainId(d * 2), 150)).collect(),
    });
    s
}

fn decision(c: &mut Criterion) {
    let mut g = c.benchmark_group("backend_decision_64_domains");
    for policy in BackendPolicy::ALL {
        let mut s = scheduler(policy);
        let mut now = 0u64;
        g.bench_function(BenchmarkId::from_parameter(policy.name()), |b| {
            b.iter(|| {
                now += TICK;
                let d = s.next(black_box(now)).unwrap();
                s.charge(d.domain, u64::from(d.ticks) * TICK);
                black_box(d)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, decision);
criterion_main!(benches);
