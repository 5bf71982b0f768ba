//! One placement decision, model lookup included (Rinnegan's stub took
//! 1–2 µs; hetsched's target is ≤ 100 ns p50 for up to 8 units).

use criterion::{Criterion, criterion_group, criterion_main};
use hetsched_core::ids::{KindId, UnitId};
use hetsched_core::placement::{DataLocation, Goal, ImplSet, PlacementConfig, Placer, TaskRequest};
use hetsched_core::task_model::TaskModel;
use hetsched_core::unit::{Capabilities, LinkCost, Unit, UnitClass};
use hetsched_core::view::ClientUnitView;
use std::hint::black_box;

fn machine(n: usize) -> Vec<Unit> {
    (0..n)
        .map(|i| {
            let gpu = i > 0;
            Unit {
                id: UnitId(i as u16),
                name: format!("u{i}"),
                kind: KindId(i as u16),
                class: if gpu { UnitClass::Gpu } else { UnitClass::Cpu },
                caps: Capabilities::empty(),
                relative_speed: 1.0 + i as f64,
                coherent: !gpu,
                copy_in: LinkCost::new(10_000, 6e9),
                copy_out: LinkCost::new(10_000, 6e9),
                dispatch_ns: 20_000,
                slots: 1,
                busy_watts: 100.0,
                idle_watts: 10.0,
            }
        })
        .collect()
}

fn bench_decide(c: &mut Criterion, units: usize) {
    let machine = machine(units);
    let mut model = TaskModel::new("aes", units);
    for k in 0..units {
        for bytes in [1u64 << 16, 1 << 20, 1 << 22] {
            model
                .try_observe(KindId(k as u16), bytes, (bytes as f64) / (1.0 + k as f64))
                .expect("valid sample");
        }
    }
    let views: Vec<ClientUnitView> = (0..units)
        .map(|i| ClientUnitView {
            wait_ns: 1e5 * i as f64,
            guaranteed: 0.1,
            ..ClientUnitView::default()
        })
        .collect();
    let implemented = (0..units).fold(ImplSet::default(), |s, i| s.with(UnitId(i as u16)));
    let mut placer = Placer::new(PlacementConfig::default(), units);
    let task = TaskRequest {
        bytes: 1 << 20,
        out_bytes: 1 << 20,
        data_at: DataLocation::Host,
        persistent: false,
        implemented,
        goal: Goal::MinLatency,
    };
    c.bench_function(&format!("placement/decide_{units}_units"), |b| {
        b.iter(|| {
            placer.decide(
                black_box(&machine),
                black_box(&views),
                black_box(&model),
                black_box(&task),
            )
        })
    });
}

fn decide(c: &mut Criterion) {
    bench_decide(c, 3);
    bench_decide(c, 8);
}

criterion_group!(benches, decide);
criterion_main!(benches);
