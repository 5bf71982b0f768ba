//! Steady-state cost of one dispatch cycle (submit + pick_next + complete)
//! on a unit with 64 clients, each keeping one request queued.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use hetsched_core::ids::{ClientId, Ns, TaskId};
use hetsched_core::policy::{ClientSettings, PolicyKind, Request, ShareClass, UnitPolicy};
use std::hint::black_box;

const CLIENTS: u32 = 64;
/// Simulated time between dispatches; with 10 ms ticks this calls `tick`
/// once every 200 cycles, as a daemon would.
const STEP_NS: Ns = 50_000;
const TICK_NS: Ns = 10_000_000;

fn request(client: ClientId, task: u64, now: Ns) -> Request {
    Request {
        client,
        task: TaskId(task),
        expected_ns: STEP_NS as f64,
        submitted_at: now,
    }
}

/// Varied settings so priority and share have real choices to make: four
/// priority levels; ten CUSTOM clients (5 shares each), the rest NORMAL with
/// 1..=4 shares.
fn settings(client: u32) -> ClientSettings {
    let class = if client < 10 {
        ShareClass::Custom { shares: 5 }
    } else {
        ShareClass::Normal {
            shares: 1 + client % 4,
        }
    };
    ClientSettings {
        class,
        priority: (client % 4) as i32,
    }
}

fn loaded_policy(kind: PolicyKind) -> Box<dyn UnitPolicy> {
    let mut policy = kind.build(1);
    for c in 0..CLIENTS {
        policy
            .set_client(ClientId(c), settings(c), 0)
            .expect("benchmark settings are valid");
        policy.submit(request(ClientId(c), u64::from(c), 0), 0);
    }
    policy
}

fn pick_next_64_clients(c: &mut Criterion) {
    let mut group = c.benchmark_group("policy");
    // `share-pooled`: the share policy with its 54 NORMAL clients placed by
    // the coordinator (served as one pool in arrival order).
    for (name, kind, pooled) in [
        ("fifo", PolicyKind::Fifo, false),
        ("priority", PolicyKind::Priority, false),
        ("share", PolicyKind::Share, false),
        ("share-pooled", PolicyKind::Share, true),
        ("short-first", PolicyKind::ShortFirst, false),
    ] {
        group.bench_function(BenchmarkId::new("pick_next_64_clients", name), |b| {
            let mut policy = loaded_policy(kind);
            if pooled {
                for c in 0..CLIENTS {
                    policy.set_coordinated(ClientId(c), true);
                }
            }
            let mut now: Ns = 0;
            let mut next_tick = TICK_NS;
            let mut task = u64::from(CLIENTS);
            b.iter(|| {
                now += STEP_NS;
                if now >= next_tick {
                    policy.tick(now);
                    next_tick += TICK_NS;
                }
                let picked = policy.pick_next(now);
                if let Some(r) = picked {
                    policy.complete(r.client, STEP_NS, now);
                    policy.submit(request(r.client, task, now), now);
                    task += 1;
                }
                black_box(picked)
            });
        });
    }
    group.finish();
}

criterion_group!(benches, pick_next_64_clients);
criterion_main!(benches);
