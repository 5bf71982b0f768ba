//! What the seqlock and the call ring need of shared memory: an array of
//! 64-bit atomic slots, fences, and a way to wait. The pages and rings use
//! the mapping's [`AtomicU64`]s; the loom models (`loom_models`, tests)
//! use loom's, so the very same protocol code is model-checked, in every
//! `cargo test`, with no `cfg(loom)` build of its own.

use std::sync::atomic::{AtomicU64, Ordering};

/// An array of 64-bit atomic slots.
pub(crate) trait Slots {
    fn load(&self, i: usize, order: Ordering) -> u64;
    fn store(&self, i: usize, value: u64, order: Ordering);
    /// An atomic fence of the same memory model as the slots.
    fn fence(order: Ordering);
    /// Waits a moment for another thread (a busy-wait hint).
    fn spin() {
        std::hint::spin_loop();
    }
    /// Gives the CPU to another thread.
    fn yield_now() {
        std::thread::yield_now();
    }
}

impl Slots for [AtomicU64] {
    #[inline]
    fn load(&self, i: usize, order: Ordering) -> u64 {
        self[i].load(order)
    }

    #[inline]
    fn store(&self, i: usize, value: u64, order: Ordering) {
        self[i].store(value, order);
    }

    #[inline]
    fn fence(order: Ordering) {
        std::sync::atomic::fence(order);
    }
}

#[cfg(test)]
impl Slots for [loom::sync::atomic::AtomicU64] {
    fn load(&self, i: usize, order: Ordering) -> u64 {
        self[i].load(order)
    }

    fn store(&self, i: usize, value: u64, order: Ordering) {
        self[i].store(value, order);
    }

    fn fence(order: Ordering) {
        loom::sync::atomic::fence(order);
    }

    fn spin() {
        loom::thread::yield_now();
    }

    fn yield_now() {
        loom::thread::yield_now();
    }
}
