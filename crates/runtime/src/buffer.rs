//! Data that stays where it was last used (a grid a stencil keeps
//! updating): the runtime tracks which unit holds a buffer's current
//! contents and copies it only when a call needs it somewhere else.
//!
//! The buffer here is the residency record; the contents are whatever the
//! application keeps in the call's arguments. On emulated devices a copy
//! is what the monitor models (it holds the device's stream for the
//! transfer), so moving a buffer costs what it would cost on the device.

use hetsched_core::placement::DataLocation;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

struct Inner {
    bytes: u64,
    at: Mutex<DataLocation>,
    copies: AtomicU64,
}

/// A registered buffer; clones share one residency record.
#[derive(Clone)]
pub struct Buffer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("bytes", &self.inner.bytes)
            .field("at", &self.location())
            .field("copies", &self.copies())
            .finish()
    }
}

impl Buffer {
    /// A buffer of `bytes`, in host memory.
    pub fn new(bytes: u64) -> Self {
        Buffer {
            inner: Arc::new(Inner {
                bytes,
                at: Mutex::new(DataLocation::Host),
                copies: AtomicU64::new(0),
            }),
        }
    }

    pub fn bytes(&self) -> u64 {
        self.inner.bytes
    }

    /// Where the current contents are.
    pub fn location(&self) -> DataLocation {
        *self.inner.at.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn set_location(&self, at: DataLocation) {
        *self.inner.at.lock().unwrap_or_else(|p| p.into_inner()) = at;
    }

    /// Copies made so far (host → device, device → host each count one).
    pub fn copies(&self) -> u64 {
        self.inner.copies.load(Ordering::Relaxed)
    }

    pub(crate) fn count_copy(&self) {
        self.inner.copies.fetch_add(1, Ordering::Relaxed);
    }
}
