//! Handles given to C are numbers, not pointers: a stale, freed or made-up
//! handle is looked up, not dereferenced, so it gets `HS_ERR_BAD_HANDLE`
//! instead of undefined behaviour. One counter numbers every kind of
//! object, so a task handle passed where a runtime is wanted is also caught.

use crate::error::{HsResult, HsStatus, err};
use std::collections::HashMap;
use std::ffi::{CStr, c_char};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

static NEXT: AtomicU64 = AtomicU64::new(1);

/// Objects of one kind, by handle.
pub(crate) struct Table<T> {
    what: &'static str,
    map: Mutex<Option<HashMap<u64, Arc<T>>>>,
}

impl<T> Table<T> {
    pub const fn new(what: &'static str) -> Self {
        Table {
            what,
            map: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<HashMap<u64, Arc<T>>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn insert(&self, value: T) -> u64 {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        self.lock()
            .get_or_insert_with(HashMap::new)
            .insert(id, Arc::new(value));
        id
    }

    pub fn get(&self, id: u64) -> HsResult<Arc<T>> {
        match self.lock().as_ref().and_then(|m| m.get(&id)) {
            Some(v) => Ok(Arc::clone(v)),
            None => self.bad(id),
        }
    }

    pub fn remove(&self, id: u64) -> HsResult<Arc<T>> {
        match self.lock().as_mut().and_then(|m| m.remove(&id)) {
            Some(v) => Ok(v),
            None => self.bad(id),
        }
    }

    fn bad<V>(&self, id: u64) -> HsResult<V> {
        err(
            HsStatus::HsErrBadHandle,
            format!(
                "{id} is not a live {} handle (never made, already freed, or of another type)",
                self.what
            ),
        )
    }
}

/// A C string argument as `&str`: NULL and invalid UTF-8 are errors that
/// name the argument.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays valid and
/// unchanged while the returned reference is used.
pub(crate) unsafe fn c_str<'a>(p: *const c_char, arg: &str) -> HsResult<&'a str> {
    if p.is_null() {
        return err(HsStatus::HsErrNull, format!("{arg} is NULL"));
    }
    // SAFETY: non-NULL, and the caller promises a live NUL-terminated string.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str().map_err(|e| {
        (
            HsStatus::HsErrUtf8,
            format!("{arg} is not valid UTF-8: {e}"),
        )
    })
}

/// The arguments of a constructor: a non-empty `name` (called `what` in
/// messages) and an `out` pointer to write the new handle to.
///
/// # Safety
/// As [`c_str`] for `name`; `out` is only checked for NULL here.
pub(crate) unsafe fn name_and_out<'a, T>(
    name: *const c_char,
    what: &str,
    out: *mut T,
) -> HsResult<&'a str> {
    // SAFETY: forwarded from the caller's promise.
    let name = unsafe { c_str(name, "name") }?;
    if name.is_empty() {
        return err(HsStatus::HsErrInvalid, format!("{what} is empty"));
    }
    if out.is_null() {
        return err(HsStatus::HsErrNull, "out is NULL");
    }
    Ok(name)
}

/// Like [`c_str`], but NULL means "not given".
///
/// # Safety
/// As [`c_str`].
pub(crate) unsafe fn opt_c_str<'a>(p: *const c_char, arg: &str) -> HsResult<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded from the caller's promise.
    unsafe { c_str(p, arg) }.map(Some)
}

/// Writes `value` through an out-pointer, or fails if it is NULL.
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
pub(crate) unsafe fn write_out<T>(out: *mut T, value: T, arg: &str) -> HsResult<()> {
    if out.is_null() {
        return err(HsStatus::HsErrNull, format!("{arg} is NULL"));
    }
    // SAFETY: non-NULL and, by the caller's promise, valid for a write;
    // `write` does not drop the (possibly uninitialised) old value.
    unsafe { out.write(value) };
    Ok(())
}

/// Copies `s` into a fixed C char array, truncated on a UTF-8 boundary and
/// always NUL-terminated.
pub(crate) fn fill_name<const N: usize>(s: &str) -> [c_char; N] {
    let mut buf = [0 as c_char; N];
    let mut end = s.len().min(N - 1);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    for (dst, &b) in buf.iter_mut().zip(&s.as_bytes()[..end]) {
        *dst = b as c_char;
    }
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn as_string(buf: &[c_char]) -> String {
        let bytes: Vec<u8> = buf
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8(bytes).expect("fill_name keeps UTF-8 whole")
    }

    #[test]
    fn names_are_truncated_on_a_char_boundary_and_terminated() {
        let buf = fill_name::<4>("abcdef");
        assert_eq!(as_string(&buf), "abc");
        assert_eq!(buf[3], 0);
        // "é" is two bytes: three bytes of room keep one "é", not half of the next.
        assert_eq!(as_string(&fill_name::<4>("ééé")), "é");
        assert_eq!(as_string(&fill_name::<8>("gpu")), "gpu");
    }

    #[test]
    fn a_table_refuses_removed_and_foreign_ids() {
        let a: Table<u32> = Table::new("a");
        let b: Table<u32> = Table::new("b");
        let id = a.insert(7);
        assert_eq!(*a.get(id).unwrap(), 7);
        let (status, msg) = b.get(id).unwrap_err();
        assert_eq!(status, HsStatus::HsErrBadHandle);
        assert!(msg.contains("b handle"), "{msg}");
        assert_eq!(*a.remove(id).unwrap(), 7);
        assert!(a.get(id).is_err());
        assert!(a.remove(id).is_err());
    }
}
