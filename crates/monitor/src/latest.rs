//! A value one thread replaces whole and others read: the latest results
//! of a thread that works apart from the state lock (the CPU agent's
//! figures, the coordinator's targets), kept under a lock of their own.
//!
//! The lock is held only to swap or clone an [`Arc`], never across work
//! or I/O, and no other lock is taken while it is held: it is a leaf in
//! the daemon's lock order ([`crate::server`]). A reader keeps the
//! snapshot it got for as long as it needs it; a writer that replaces the
//! value meanwhile does not disturb it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

#[derive(Debug, Default)]
pub(crate) struct Latest<T>(Mutex<Arc<T>>);

impl<T> Latest<T> {
    pub fn new(value: T) -> Self {
        Latest(Mutex::new(Arc::new(value)))
    }

    /// The value stored last.
    pub fn get(&self) -> Arc<T> {
        Arc::clone(&self.lock())
    }

    /// Replaces the value; readers holding the old one keep it.
    pub fn set(&self, value: T) {
        let value = Arc::new(value);
        let old = std::mem::replace(&mut *self.lock(), value);
        // The old value (perhaps the last reference) is freed after the
        // lock is released.
        drop(old);
    }

    fn lock(&self) -> MutexGuard<'_, Arc<T>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_keeps_its_snapshot_while_the_value_is_replaced() {
        let latest = Latest::new(vec![1]);
        let seen = latest.get();
        latest.set(vec![2]);
        assert_eq!(*seen, vec![1]);
        assert_eq!(*latest.get(), vec![2]);
        assert!(!Arc::ptr_eq(&seen, &latest.get()));
        assert!(Arc::ptr_eq(&latest.get(), &latest.get()));
    }
}
