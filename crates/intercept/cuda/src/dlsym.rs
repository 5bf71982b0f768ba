//! `dlsym`, for programs that `dlopen("libcuda.so.1")` and look the
//! driver's functions up on that handle (the CUDA runtime finds
//! `cuGetProcAddress` so). A lookup on a handle searches that object and
//! its dependencies only, never the `LD_PRELOAD` libraries, so the
//! exported functions alone would not be found: this library exports
//! `dlsym` too. For a governed name whose lookup on the handle yields the
//! real driver's function, it answers with ours; everything else goes to
//! glibc's `dlsym`, found with `dlvsym(RTLD_NEXT, "dlsym", version)`.
//!
//! glibc's `dlsym` reads its caller from its return address (for
//! `RTLD_NEXT`, "the next object after the caller's"). A wrapper that
//! called it would make every `dlsym(RTLD_NEXT, ...)` in the process
//! search after *this* library. So the exported `dlsym` is a naked
//! trampoline: it asks [`replacement`], and when that has nothing it
//! restores the arguments and *jumps* to glibc's, which so sees the
//! program's return address.

use crate::proc_address::ours;
use crate::real::{address_of, real_dlsym};
use std::ffi::{CStr, c_char, c_void};

/// Our function for `symbol` looked up on `handle`, or null (ask glibc).
/// Only governed names on real handles are looked at, and nothing here
/// calls `dlsym` through the exported symbol.
extern "C" fn replacement(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    let none = std::ptr::null_mut();
    if symbol.is_null() || handle == libc::RTLD_DEFAULT || handle == libc::RTLD_NEXT {
        // A global lookup finds our exports first already.
        return none;
    }
    // SAFETY: dlsym's contract: `symbol` is a NUL-terminated string.
    let name = unsafe { CStr::from_ptr(symbol) };
    let Some(our) = ours(name.to_bytes()) else {
        return none;
    };
    // SAFETY: `handle` is the program's, passed to dlsym as it would be.
    let found = unsafe { real_dlsym()(handle, symbol) };
    if found.is_null() || found != address_of(name) {
        // Not the driver we forward to (another object's function).
        return none;
    }
    our
}

/// glibc's `dlsym`, for the trampoline to jump to.
extern "C" fn glibc_dlsym() -> *const c_void {
    real_dlsym() as *const c_void
}

/// `void *dlsym(void *handle, const char *symbol)`.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    // On entry rsp is 8 past a 16-byte boundary; two pushes and 8 bytes
    // more align it for the calls. rdi and rsi (the arguments) are saved
    // across them and restored before the tail jump, which leaves the
    // program's return address on top of the stack.
    core::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {replacement}",
        "test rax, rax",
        "jnz 2f",
        "call {glibc}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "jmp rax",
        "2:",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "ret",
        replacement = sym replacement,
        glibc = sym glibc_dlsym,
    )
}

/// `void *dlsym(void *handle, const char *symbol)`.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void {
    // x0 and x1 (the arguments) and the link register are saved across
    // the calls and restored before the tail branch, so glibc's dlsym
    // returns straight to the program.
    core::arch::naked_asm!(
        "stp x29, x30, [sp, #-32]!",
        "mov x29, sp",
        "stp x0, x1, [sp, #16]",
        "bl {replacement}",
        "cbnz x0, 2f",
        "bl {glibc}",
        "mov x16, x0",
        "ldp x0, x1, [sp, #16]",
        "ldp x29, x30, [sp], #32",
        "br x16",
        "2:",
        "ldp x29, x30, [sp], #32",
        "ret",
        replacement = sym replacement,
        glibc = sym glibc_dlsym,
    )
}
