//! systemd socket activation: the listening socket systemd created and
//! passed to this process (`hetsched.socket`), taken over instead of
//! binding one. The only unsafe code in this crate: taking ownership of a
//! descriptor number the service manager handed over.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixListener;

/// The socket systemd passed (`LISTEN_PID` is this process, `LISTEN_FDS`
/// = 1), if any. Call once, at start, before anything else may open or
/// close descriptors by number.
pub fn inherited_listener() -> Result<Option<UnixListener>, String> {
    let fds: Vec<i32> = sd_notify::listen_fds()
        .map_err(|e| format!("cannot read the sockets systemd passed: {e}"))?
        .collect();
    let fd = match fds.as_slice() {
        [] => return Ok(None),
        [fd] => *fd,
        more => {
            return Err(format!(
                "systemd passed {} sockets; hetsched listens on one (ListenStream= once)",
                more.len()
            ));
        }
    };
    // SAFETY: under the sd_listen_fds(3) protocol, descriptor `fd` (3) was
    // opened by the service manager for this very process (LISTEN_PID was
    // checked by `listen_fds`) and nothing in this process owns or closes
    // it yet; this function is called once, so ownership is taken once.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let listener = UnixListener::from(owned);
    // A Unix stream socket that listens: its address is a path.
    match listener.local_addr() {
        Ok(addr) if addr.as_pathname().is_some() => Ok(Some(listener)),
        Ok(_) => Err("the socket systemd passed has no path (ListenStream= must be a path)".into()),
        Err(e) => Err(format!(
            "the socket systemd passed is not a Unix socket: {e}"
        )),
    }
}
