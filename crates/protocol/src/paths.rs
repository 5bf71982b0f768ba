//! Where the daemon listens and what a launched program asks for, as the
//! environment says.

use crate::message::{SettingsRequest, WireClass};
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Socket path: `$HETSCHED_SOCKET`, else `/run/hetsched/hetsched.sock` for
/// root, else `$XDG_RUNTIME_DIR/hetsched.sock`, else
/// `/run/user/UID/hetsched.sock`. The daemon binds where this says and
/// clients connect there, so both agree. The last is in the user's
/// runtime directory, which only root can create (unlike a name in
/// `/tmp`, which any user could take first); a client checks it
/// ([`check_socket_dir`]) and says what to set where it is missing.
pub fn default_socket_path() -> PathBuf {
    socket_path_from(
        std::env::var_os("HETSCHED_SOCKET"),
        rustix::process::getuid().as_raw(),
        std::env::var_os("XDG_RUNTIME_DIR"),
    )
}

/// [`default_socket_path`] for these values of `$HETSCHED_SOCKET`, the
/// uid and `$XDG_RUNTIME_DIR` (an empty variable counts as unset).
fn socket_path_from(socket: Option<OsString>, uid: u32, runtime_dir: Option<OsString>) -> PathBuf {
    if let Some(p) = socket.filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if uid == 0 {
        return PathBuf::from("/run/hetsched/hetsched.sock");
    }
    match runtime_dir.filter(|p| !p.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("hetsched.sock"),
        None => user_runtime_dir(uid).join("hetsched.sock"),
    }
}

/// The runtime directory systemd-logind makes for `uid` (owned by it,
/// mode 0700, in root's `/run/user`).
fn user_runtime_dir(uid: u32) -> PathBuf {
    PathBuf::from(format!("/run/user/{uid}"))
}

/// Before a client connects to `socket`: where it is in this user's
/// `/run/user/UID`, that directory must exist and be safe — a directory
/// of this user (or root) that nobody else may write. Other paths are
/// the user's own choice and are not checked here (the daemon's uid is,
/// after connecting). The error says what is wrong and what to set.
pub(crate) fn check_socket_dir(socket: &Path) -> Result<(), String> {
    let uid = rustix::process::getuid().as_raw();
    let dir = user_runtime_dir(uid);
    if socket.parent() != Some(dir.as_path()) {
        return Ok(());
    }
    let found = std::fs::metadata(&dir).map(|m| DirFacts {
        is_dir: m.is_dir(),
        owner: m.uid(),
        mode: m.mode(),
    });
    runtime_dir_problem(&dir, found, uid).map_or(Ok(()), Err)
}

/// What [`check_socket_dir`] needs to know of a directory.
#[derive(Clone, Copy, Debug)]
struct DirFacts {
    is_dir: bool,
    owner: u32,
    mode: u32,
}

/// Why `dir` (as `found` describes it) is no place for `uid`'s socket, if
/// it is not.
fn runtime_dir_problem(dir: &Path, found: std::io::Result<DirFacts>, uid: u32) -> Option<String> {
    let set = "set XDG_RUNTIME_DIR to a directory only you can write (the daemon must \
               see the same), or HETSCHED_SOCKET to the daemon's socket";
    let dir = dir.display();
    let why = match found {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            format!("{dir}, the runtime directory the socket defaults to, does not exist")
        }
        Err(e) => format!("{dir}, the runtime directory the socket defaults to: {e}"),
        Ok(f) if !f.is_dir => format!("{dir} is not a directory"),
        Ok(f) if f.owner != uid && f.owner != 0 => format!(
            "{dir} belongs to uid {}, not to you (uid {uid}) or root: another user could \
             run a daemon there",
            f.owner
        ),
        Ok(f) if f.mode & 0o022 != 0 => format!(
            "{dir} is writable by other users (mode {:04o}): any of them could put a \
             socket there",
            f.mode & 0o7777
        ),
        Ok(_) => return None,
    };
    Some(format!("{why}; {set}"))
}

/// `HETSCHED_DAEMON_UID`: the numeric uid of a daemon a client accepts
/// besides root and its own user (a daemon run under a service account).
/// Unset or empty: none.
pub(crate) fn expected_daemon_uid_from_env() -> Result<Option<u32>, String> {
    match std::env::var("HETSCHED_DAEMON_UID") {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => v
            .trim()
            .parse::<u32>()
            .map(Some)
            .map_err(|_| format!("HETSCHED_DAEMON_UID={v:?} is not a numeric user id")),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(format!(
            "HETSCHED_DAEMON_UID={v:?} is not a numeric user id"
        )),
    }
}

/// Settings a program was started with (`hetsched run` sets these):
/// `HETSCHED_CLASS` (`custom`, `normal`, `background`), `HETSCHED_SHARES`,
/// `HETSCHED_PRIORITY`. Errors name the variable and the bad value.
pub fn requested_settings_from_env() -> Result<SettingsRequest, String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let shares = match var("HETSCHED_SHARES") {
        Some(v) => Some(
            v.trim()
                .parse::<u32>()
                .map_err(|_| format!("HETSCHED_SHARES={v:?} is not a whole number"))?,
        ),
        None => None,
    };
    let class = match var("HETSCHED_CLASS") {
        Some(v) => Some(parse_class(v.trim(), shares)?),
        None if shares.is_some() => {
            return Err("HETSCHED_SHARES is set but HETSCHED_CLASS is not".into());
        }
        None => None,
    };
    let priority = match var("HETSCHED_PRIORITY") {
        Some(v) => Some(
            v.trim()
                .parse::<i32>()
                .map_err(|_| format!("HETSCHED_PRIORITY={v:?} is not an integer"))?,
        ),
        None => None,
    };
    Ok(SettingsRequest { class, priority })
}

/// Parses a class name with its shares (`background` takes none).
pub fn parse_class(name: &str, shares: Option<u32>) -> Result<WireClass, String> {
    match (name.to_ascii_lowercase().as_str(), shares) {
        ("custom", Some(s)) => Ok(WireClass::Custom(s)),
        ("custom", None) => Err("class custom needs a number of shares".into()),
        ("normal", s) => Ok(WireClass::Normal(
            s.unwrap_or(hetsched_core::policy::DEFAULT_NORMAL_SHARES),
        )),
        ("background", None) => Ok(WireClass::Background),
        ("background", Some(_)) => Err("class background takes no shares".into()),
        (other, _) => Err(format!(
            "unknown class {other:?}: expected custom, normal or background"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_path_follows_the_environment_and_never_tmp() {
        let os = |s: &str| Some(OsString::from(s));
        let path = |socket, uid, xdg| socket_path_from(socket, uid, xdg);
        assert_eq!(
            path(os("/x/s.sock"), 1000, os("/run/user/1000")),
            PathBuf::from("/x/s.sock")
        );
        assert_eq!(
            path(os(""), 0, os("/run/user/0")),
            PathBuf::from("/run/hetsched/hetsched.sock")
        );
        assert_eq!(
            path(None, 1000, os("/home/me/rt")),
            PathBuf::from("/home/me/rt/hetsched.sock")
        );
        for xdg in [None, os("")] {
            assert_eq!(
                path(None, 1000, xdg),
                PathBuf::from("/run/user/1000/hetsched.sock")
            );
        }
    }

    #[test]
    fn the_runtime_dir_must_exist_and_be_the_users() {
        let dir = Path::new("/run/user/1000");
        let facts = |is_dir, owner, mode| {
            Ok(DirFacts {
                is_dir,
                owner,
                mode,
            })
        };
        assert_eq!(
            runtime_dir_problem(dir, facts(true, 1000, 0o40700), 1000),
            None
        );
        assert_eq!(
            runtime_dir_problem(dir, facts(true, 0, 0o40755), 1000),
            None
        );
        let missing =
            runtime_dir_problem(dir, Err(std::io::ErrorKind::NotFound.into()), 1000).unwrap();
        assert!(
            missing.contains(
                "/run/user/1000, the runtime directory the socket defaults to, does not exist"
            ) && missing.contains("XDG_RUNTIME_DIR")
                && missing.contains("HETSCHED_SOCKET"),
            "{missing}"
        );
        let squatted = runtime_dir_problem(dir, facts(true, 1001, 0o40700), 1000).unwrap();
        assert!(squatted.contains("belongs to uid 1001"), "{squatted}");
        let open = runtime_dir_problem(dir, facts(true, 1000, 0o41777), 1000).unwrap();
        assert!(
            open.contains("writable by other users (mode 1777)"),
            "{open}"
        );
        let file = runtime_dir_problem(dir, facts(false, 1000, 0o100600), 1000).unwrap();
        assert!(file.contains("not a directory"), "{file}");
    }

    #[test]
    fn only_the_users_own_runtime_dir_is_checked() {
        assert_eq!(check_socket_dir(Path::new("/nonexistent/x.sock")), Ok(()));
        assert_eq!(
            check_socket_dir(Path::new("/run/user/4294967294/s.sock")),
            Ok(())
        );
    }

    #[test]
    fn class_names_parse_with_clear_errors() {
        assert_eq!(parse_class("custom", Some(40)), Ok(WireClass::Custom(40)));
        assert_eq!(parse_class("Normal", None), Ok(WireClass::Normal(10)));
        assert_eq!(parse_class("background", None), Ok(WireClass::Background));
        assert!(parse_class("custom", None).unwrap_err().contains("shares"));
        assert!(parse_class("gold", None).unwrap_err().contains("gold"));
        assert!(
            parse_class("background", Some(3))
                .unwrap_err()
                .contains("no shares")
        );
    }
}
