//! Device memory one program holds on one device, against its cap.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes held and the cap, lock-free: allocations on many threads race
/// only for the counter.
#[derive(Debug)]
pub struct MemoryAccount {
    used: AtomicU64,
    /// `u64::MAX`: no cap.
    limit: AtomicU64,
}

impl Default for MemoryAccount {
    fn default() -> Self {
        MemoryAccount {
            used: AtomicU64::new(0),
            limit: AtomicU64::new(u64::MAX),
        }
    }
}

impl MemoryAccount {
    /// Counts `bytes` more if that stays within the cap; `false` (nothing
    /// counted) if it would not.
    pub fn try_reserve(&self, bytes: u64) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&n| n <= limit)
            })
            .is_ok()
    }

    /// Takes back a reservation (the allocation failed, or was freed).
    pub fn release(&self, bytes: u64) {
        // Saturating: a release never wraps the count, even if the API
        // frees something allocated before the interposer was loaded.
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(bytes))
            });
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// The cap; `None` for none.
    pub fn limit(&self) -> Option<u64> {
        Some(self.limit.load(Ordering::Relaxed)).filter(|&l| l != u64::MAX)
    }

    pub fn set_limit(&self, limit: Option<u64>) {
        self.limit
            .store(limit.unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_cap_is_exact_to_the_byte() {
        let m = MemoryAccount::default();
        m.set_limit(Some(1000));
        assert!(m.try_reserve(600));
        assert!(m.try_reserve(400));
        assert!(!m.try_reserve(1));
        assert_eq!(m.used(), 1000);
        m.release(1);
        assert!(m.try_reserve(1));
        assert!(!m.try_reserve(u64::MAX));
    }

    proptest! {
        /// Whatever the order of reservations and releases, the count
        /// never passes the cap and equals what was granted minus what
        /// was released.
        #[test]
        fn never_over_the_cap(limit in 1u64..10_000, ops in prop::collection::vec((any::<bool>(), 0u64..3_000), 0..200)) {
            let m = MemoryAccount::default();
            m.set_limit(Some(limit));
            let mut held: Vec<u64> = Vec::new();
            for (alloc, bytes) in ops {
                if alloc || held.is_empty() {
                    let ok = m.try_reserve(bytes);
                    let expected = held.iter().sum::<u64>() + bytes <= limit;
                    prop_assert_eq!(ok, expected);
                    if ok { held.push(bytes); }
                } else {
                    m.release(held.pop().unwrap());
                }
                prop_assert!(m.used() <= limit);
                prop_assert_eq!(m.used(), held.iter().sum::<u64>());
            }
        }
    }
}
