//! The call ring: a model-checked sequence of pushes and pops, a producer
//! and a consumer on two threads, a lying producer, and fds that are not
//! rings.

use hetsched_views::call_ring::{
    CallPacket, MAX_CAPACITY, RingConsumer, RingError, RingProducer, pair,
};
use proptest::prelude::*;
use std::collections::VecDeque;
use std::os::fd::OwnedFd;

fn packet(n: u64) -> CallPacket {
    CallPacket([n, n ^ 0xdead_beef, n * 3, 0, u64::MAX, n << 7, 42])
}

proptest! {
    #[test]
    fn the_ring_behaves_as_a_bounded_fifo(
        cap_log in 0u32..5,
        ops in proptest::collection::vec(any::<bool>(), 1..400),
    ) {
        let cap = 1u64 << cap_log;
        let (mut tx, mut rx) = pair(cap).unwrap();
        let mut model = VecDeque::new();
        let mut next = 0u64;
        for push in ops {
            if push {
                let ok = tx.push(&packet(next));
                prop_assert_eq!(ok, (model.len() as u64) < cap);
                if ok {
                    model.push_back(next);
                }
                next += 1;
            } else {
                prop_assert_eq!(rx.peek().unwrap(), model.front().copied().map(packet));
                let got = rx.pop().unwrap();
                prop_assert_eq!(got, model.pop_front().map(packet));
            }
            prop_assert_eq!(rx.len().unwrap(), model.len() as u64);
        }
    }
}

#[test]
fn a_producer_and_a_consumer_thread_pass_a_million_calls_in_order() {
    let (mut tx, mut rx) = pair(256).unwrap();
    const N: u64 = 1_000_000;
    let producer = std::thread::spawn(move || {
        let mut n = 0;
        while n < N {
            if tx.push(&packet(n)) {
                n += 1;
            } else {
                std::thread::yield_now();
            }
        }
    });
    let mut expect = 0;
    while expect < N {
        match rx.pop().unwrap() {
            Some(p) => {
                assert_eq!(p, packet(expect));
                expect += 1;
            }
            None => std::thread::yield_now(),
        }
    }
    producer.join().unwrap();
    assert_eq!(rx.pop().unwrap(), None);
}

#[test]
fn a_lying_producer_is_detected_and_cannot_make_the_consumer_read_past_the_ring() {
    let (mut tx, mut rx) = pair(8).unwrap();
    assert!(tx.push(&packet(0)));
    // Claims a thousand packets in a ring of eight.
    tx.publish_raw_tail(1000);
    assert!(matches!(rx.pop(), Err(RingError::Corrupt { .. })));
    // Claims one more packet than it wrote: the index word gives it away.
    tx.publish_raw_tail(1);
    assert_eq!(rx.pop().unwrap(), Some(packet(0)));
    tx.publish_raw_tail(2);
    assert!(matches!(rx.pop(), Err(RingError::Corrupt { .. })));
    // A cleared ring starts over from the tail as published.
    tx.publish_raw_tail(1);
    rx.clear();
    assert_eq!(rx.len().unwrap(), 0);
}

#[test]
fn only_rings_are_accepted_from_an_fd() {
    assert!(matches!(
        RingConsumer::create(3),
        Err(RingError::BadCapacity(3))
    ));
    assert!(matches!(
        RingConsumer::create(MAX_CAPACITY * 2),
        Err(RingError::BadCapacity(_))
    ));
    // A plain file is not sealed.
    let file: OwnedFd = tempfile::tempfile().unwrap().into();
    assert_eq!(
        RingProducer::from_fd(file).unwrap_err(),
        RingError::NotARing
    );
    // A view page is sealed, but it is not a ring.
    let page = hetsched_views::GlobalWriter::create(1, 0).unwrap();
    let fd = page.fd().try_clone_to_owned().unwrap();
    assert_eq!(RingProducer::from_fd(fd).unwrap_err(), RingError::NotARing);
    // A socket is not a file.
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    assert_eq!(
        RingProducer::from_fd(a.into()).unwrap_err(),
        RingError::NotARing
    );
}
