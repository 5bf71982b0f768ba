//! Loom models of the two lock-free protocols of this crate, on loom's
//! atomics through [`crate::slots::Slots`], so the code checked is the
//! code that runs: every interleaving (up to a preemption bound) and every
//! value the memory model allows a load to see. The protocol code is
//! generic over its slots, so these are ordinary tests (no `cfg(loom)`
//! build): `cargo test -p hetsched-views --lib loom`. Each fails at once if
//! a release store or fence of the protocol is weakened to `Relaxed`.

use crate::call_ring::{self, CallPacket};
use crate::layout::header;
use crate::seqlock;
use crate::slots::Slots;
use loom::sync::Arc;
use loom::sync::atomic::AtomicU64;
use loom::thread;
use std::sync::atomic::Ordering;

fn slots(n: usize) -> Arc<Vec<AtomicU64>> {
    Arc::new((0..n).map(|_| AtomicU64::new(0)).collect())
}

fn model(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(bound);
    builder.check(f);
}

/// A reader never returns half of one publish and half of another: two
/// payload slots written together always read back equal, and with the
/// sequence number of the publish that wrote them.
#[test]
fn loom_a_seqlock_read_is_never_torn() {
    const A: usize = header::SLOTS;
    const B: usize = header::SLOTS + 1;
    model(3, || {
        let page = slots(header::SLOTS + 2);
        let writer_page = page.clone();
        let writer = thread::spawn(move || {
            let mut seq = 0;
            for k in 1..=2u64 {
                seqlock::publish(&writer_page[..], &mut seq, k, |s| {
                    s.store(A, k, Ordering::Relaxed);
                    s.store(B, k, Ordering::Relaxed);
                });
            }
        });
        let ((a, b), seq) = seqlock::read(&page[..], |s| {
            (s.load(A, Ordering::Relaxed), s.load(B, Ordering::Relaxed))
        })
        .expect("the writer never stalls here");
        assert_eq!(a, b, "torn read at seq {seq}");
        assert_eq!(seq % 2, 0);
        assert_eq!(a, seq / 2, "the payload of publish {seq}");
        writer.join().unwrap();
    });
}

/// The producer and the consumer of a two-packet ring pass three packets:
/// the consumer gets them whole, in order, and never finds the ring
/// corrupt; the producer waits when the ring is full.
#[test]
fn loom_the_call_ring_passes_packets_whole_and_in_order() {
    const CAPACITY: u64 = 2;
    const PACKETS: u64 = 3;
    model(2, || {
        let ring = slots(call_ring::ring_slots(CAPACITY));
        let producer_ring = ring.clone();
        let producer = thread::spawn(move || {
            let mut tail = 0;
            for k in 1..=PACKETS {
                let p = CallPacket([k; call_ring::PAYLOAD_WORDS]);
                while !call_ring::push(&producer_ring[..], &mut tail, CAPACITY, &p) {
                    <[AtomicU64] as Slots>::yield_now();
                }
            }
        });
        let mut head = 0;
        let mut next = 1;
        while next <= PACKETS {
            match call_ring::pop(&ring[..], &mut head, CAPACITY).expect("never corrupt") {
                Some(p) => {
                    assert_eq!(p, CallPacket([next; call_ring::PAYLOAD_WORDS]));
                    next += 1;
                }
                None => <[AtomicU64] as Slots>::yield_now(),
            }
        }
        producer.join().unwrap();
    });
}
