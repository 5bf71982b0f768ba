//! Reading the shared utilisation views (target ≤ 50 ns per read; Rinnegan
//! found `/proc` too slow and shared a page) and publishing them.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hetsched_core::view::{ClientUnitView, UnitView};
use hetsched_views::{
    CpuKindView, GlobalReader, GlobalUnit, GlobalWriter, PrivateReader, PrivateWriter,
};

const UNITS: usize = 8;
const CPU_KINDS: usize = 2;

fn units(g: u64) -> Vec<GlobalUnit> {
    (0..UNITS)
        .map(|i| GlobalUnit {
            view: UnitView {
                busy_fraction: 0.5,
                avg_task_ns: 1e6 + g as f64,
                active_clients: 3,
                queued: i as u32,
                running: 1,
            },
            queued_by_class: [0, i as u32, 0],
            busy_ns_total: g * 1000,
        })
        .collect()
}

fn bench_views(c: &mut Criterion) {
    let mut gw = GlobalWriter::create(UNITS, CPU_KINDS).unwrap();
    let gr = GlobalReader::from_fd(gw.fd().try_clone_to_owned().unwrap()).unwrap();
    let kinds = vec![CpuKindView::default(); CPU_KINDS];
    gw.publish(1, &units(1), &kinds).unwrap();

    let mut pw = PrivateWriter::create(UNITS, CPU_KINDS).unwrap();
    let pr = PrivateReader::from_fd(pw.fd().try_clone_to_owned().unwrap()).unwrap();
    let client = vec![
        ClientUnitView {
            guaranteed: 0.25,
            wait_ns: 2e6,
            ..Default::default()
        };
        UNITS
    ];
    pw.publish(1, 7, &client, &[2, 0]).unwrap();

    let mut g = c.benchmark_group("views");
    let mut i = 0;
    g.bench_function("read_unit", |b| {
        b.iter(|| {
            i = (i + 1) % UNITS;
            black_box(gr.unit(black_box(i)))
        })
    });
    g.bench_function("read_private_unit", |b| {
        b.iter(|| {
            i = (i + 1) % UNITS;
            black_box(pr.unit(black_box(i)))
        })
    });
    let batch = units(2);
    let mut now = 2;
    g.bench_function("publish_8_units", |b| {
        b.iter(|| {
            now += 1;
            gw.publish(black_box(now), black_box(&batch), black_box(&kinds))
                .unwrap()
        })
    });
    g.finish();
}

/// One call through a client's ring: push on the producer's side, pop on
/// the consumer's (same thread, so this is the cost of the two ends
/// without cross-core cache traffic). Target: ≤ 100 ns.
fn bench_call_ring(c: &mut Criterion) {
    use hetsched_views::call_ring::{CallPacket, pair};
    let (mut tx, mut rx) = pair(1024).unwrap();
    let p = CallPacket([1, 2, 3, 4, 5, 6, 7]);
    c.bench_function("call_ring/push_pop", |b| {
        b.iter(|| {
            assert!(tx.push(black_box(&p)));
            black_box(rx.pop().unwrap())
        })
    });
}

criterion_group!(benches, bench_views, bench_call_ring);
criterion_main!(benches);
