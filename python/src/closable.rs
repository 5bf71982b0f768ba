//! What `Client` and `Runtime` hold until `close()`: shared by the calls in
//! flight (each clones the `Arc` and works without the lock), taken by
//! `close()`, after which calls say the object is closed.

use crate::errors::HetschedError;
use pyo3::PyResult;
use std::sync::{Arc, Mutex};

pub(crate) struct Closable<T> {
    inner: Mutex<Option<Arc<T>>>,
    /// `hetsched.Client`, `hetsched.Runtime`: what the error names.
    what: &'static str,
}

impl<T> Closable<T> {
    pub(crate) fn new(value: T, what: &'static str) -> Self {
        Closable {
            inner: Mutex::new(Some(Arc::new(value))),
            what,
        }
    }

    /// The value, or `HetschedError` once closed.
    pub(crate) fn get(&self) -> PyResult<Arc<T>> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| HetschedError::new_err(format!("this {} is closed", self.what)))
    }

    /// Takes the value out; later `get` calls fail.
    pub(crate) fn take(&self) -> Option<Arc<T>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}
