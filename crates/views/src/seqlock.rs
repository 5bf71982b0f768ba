//! The seqlock over a page's slots: one writer, any number of lock-free
//! readers in any process, no torn multi-slot values.
//!
//! Readers only load (their mapping is read-only): `Relaxed` loads with
//! explicit `Acquire` fences, which is what the standard library guarantees
//! to work on read-only memory.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::ViewError;
use crate::layout::header;
use crate::slots::Slots;

/// How long a reader waits for a publish in progress before giving up with
/// [`ViewError::WriterStalled`]. A publish takes well under a microsecond;
/// only a writer that died or was stopped mid-publish is this slow.
pub const STALL_TIMEOUT: Duration = Duration::from_millis(500);

/// Spins before a reader starts yielding its CPU to the writer.
const SPINS_BEFORE_YIELD: u32 = 64;

/// Writes one publish: everything `write` stores, plus `published_at_ns`,
/// becomes visible to readers at once. `seq` is the writer's copy of the
/// (even) sequence number, advanced by 2.
///
/// If `write` panics the publish is still closed (by a guard), so readers do
/// not wait forever; they then see whichever slots `write` had stored.
#[inline]
pub(crate) fn publish<S: Slots + ?Sized>(
    slots: &S,
    seq: &mut u64,
    now_ns: u64,
    write: impl FnOnce(&S),
) {
    /// Closes the publish on drop, also when `write` unwinds: stores the
    /// next even value and makes it the writer's own copy, so the next
    /// publish never reuses a sequence number a reader may have seen.
    struct Close<'a, S: Slots + ?Sized> {
        slots: &'a S,
        seq: &'a mut u64,
    }
    impl<S: Slots + ?Sized> Drop for Close<'_, S> {
        #[inline]
        fn drop(&mut self) {
            *self.seq = self.seq.wrapping_add(2);
            self.slots.store(header::SEQ, *self.seq, Ordering::Release);
        }
    }

    debug_assert!(*seq % 2 == 0, "publish started with an odd sequence");
    slots.store(header::SEQ, seq.wrapping_add(1), Ordering::Relaxed);
    // Orders the odd `seq` before every payload store below: a reader whose
    // loads see any of them then sees `seq` changed (its fence pairs with this one).
    S::fence(Ordering::Release);
    let _close = Close { slots, seq };
    write(slots);
    slots.store(header::PUBLISHED_AT_NS, now_ns, Ordering::Relaxed);
}

/// Reads a consistent value: runs `read` (which must only load slots and
/// compute) until it ran entirely between two publishes. Returns the value and
/// the sequence number it was read at.
#[inline]
pub(crate) fn read<S: Slots + ?Sized, T>(
    slots: &S,
    mut read: impl FnMut(&S) -> T,
) -> Result<(T, u64), ViewError> {
    let mut backoff = Backoff::default();
    loop {
        let before = slots.load(header::SEQ, Ordering::Relaxed);
        // Acquire for the load above: the payload loads below see at least
        // the publish that stored `before`.
        S::fence(Ordering::Acquire);
        if before % 2 == 0 {
            let value = read(slots);
            // Keeps the payload loads above before the re-check of `seq`; pairs
            // with the writer's release fence after its odd store.
            S::fence(Ordering::Acquire);
            if slots.load(header::SEQ, Ordering::Relaxed) == before {
                return Ok((value, before));
            }
        }
        backoff.wait::<S>()?;
    }
}

#[derive(Default)]
struct Backoff {
    spins: u32,
    since: Option<Instant>,
}

impl Backoff {
    #[cold]
    #[inline(never)]
    fn wait<S: Slots + ?Sized>(&mut self) -> Result<(), ViewError> {
        if self.spins < SPINS_BEFORE_YIELD {
            self.spins += 1;
            S::spin();
            return Ok(());
        }
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() > STALL_TIMEOUT {
            return Err(ViewError::WriterStalled);
        }
        S::yield_now();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn odd_sequence_forever_reports_a_stalled_writer() {
        let slots: Vec<AtomicU64> = (0..header::SLOTS).map(|_| AtomicU64::new(0)).collect();
        slots[header::SEQ].store(7, Ordering::Relaxed);
        let t = Instant::now();
        assert!(matches!(
            read(&slots[..], |_| ()),
            Err(ViewError::WriterStalled)
        ));
        assert!(t.elapsed() >= STALL_TIMEOUT);
    }

    #[test]
    fn a_panicking_publish_still_closes_the_sequence() {
        let slots: Vec<AtomicU64> = (0..header::SLOTS + 1).map(|_| AtomicU64::new(0)).collect();
        let mut seq = 0;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            publish(&slots[..], &mut seq, 5, |s| {
                s[header::SLOTS].store(1, Ordering::Relaxed);
                panic!("writer bug");
            })
        }));
        assert!(r.is_err());
        assert_eq!(seq, 2);
        assert_eq!(slots[header::SEQ].load(Ordering::Relaxed), 2);
        let (v, s) = read(&slots[..], |s| s[header::SLOTS].load(Ordering::Relaxed)).unwrap();
        assert_eq!((v, s), (1, 2));
        // The next publish does not reuse a sequence number readers saw.
        publish(&slots[..], &mut seq, 6, |_| ());
        assert_eq!(slots[header::SEQ].load(Ordering::Relaxed), 4);
    }
}
