//! What the C ABI tests share.
#![allow(dead_code)] // each test file uses part of it

use hetsched::hs_last_error;
use std::ffi::{CStr, CString};

/// The message the last failing call left; there must be one.
pub fn last_error() -> String {
    let p = hs_last_error();
    assert!(!p.is_null(), "a failing call must leave a message");
    // SAFETY: non-NULL, NUL-terminated, valid until the next failing call.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

pub fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}
