//! The socket's mode does not depend on the umask, and binding leaves the
//! umask alone. A test binary of its own: the umask is the process's, and
//! the tests of one binary share a process.

use std::os::unix::fs::PermissionsExt;

use hetsched_monitor::checked_dir::{bind_socket, remove_socket};
use rustix::fs::Mode;

#[test]
fn a_strict_umask_neither_narrows_the_socket_nor_is_changed_by_binding() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("run/s.sock");
    let before = Mode::from_raw_mode(0o077);
    let original = rustix::process::umask(before);
    let bound = bind_socket(&path, 0o666);
    let after = rustix::process::umask(original);
    let (listener, id) = bound.unwrap();
    assert_eq!(after, before, "binding changed the process's umask");
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o666);
    drop(listener);
    remove_socket(&path, id).unwrap();
}
