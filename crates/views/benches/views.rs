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
    let pr = PrivateReader::from_fd(pw.fd().unwrap().try_clone_to_owned().unwrap()).unwrap();
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

/// Copying a kernel call's input out of a data region and its output in
/// (the daemon's side of a served call), against a plain `memcpy` of the
/// same bytes: the region goes through atomic words, since the client may
/// write it at the same time.
fn bench_data_region(c: &mut Criterion) {
    use hetsched_views::data_region::pair;
    const BYTES: usize = 1 << 20;
    let (daemon, client) = pair(BYTES as u64).unwrap();
    client.write(0, &vec![7u8; BYTES]).unwrap();
    let mut buf = vec![0u8; BYTES];
    let mut g = c.benchmark_group("data_region_1MiB");
    g.throughput(criterion::Throughput::Bytes(BYTES as u64));
    g.bench_function("read", |b| {
        b.iter(|| daemon.read(0, black_box(&mut buf)).unwrap())
    });
    let src = vec![9u8; BYTES];
    g.bench_function("write", |b| {
        b.iter(|| daemon.write(0, black_box(&src)).unwrap())
    });
    let mut dst = vec![0u8; BYTES];
    g.bench_function("memcpy_anchor", |b| {
        b.iter(|| dst.copy_from_slice(black_box(&src)))
    });
    g.finish();
}

criterion_group!(benches, bench_views, bench_call_ring, bench_data_region);
criterion_main!(benches);
