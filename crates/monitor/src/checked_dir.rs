//! The directories the daemon writes in (its socket's, its state file's,
//! its calibration cache's), checked as sshd's `StrictModes` checks a
//! user's files, and files in them reached only through the directory's
//! descriptor, never by following a link.
//!
//! A directory is used only when it, and every directory above it, is
//! owned by root or by the daemon's own user; the directory itself must be
//! writable by no one else, and one above it only when its sticky bit is
//! set (as `/tmp`'s is: others may add names there but not rename or
//! remove the daemon's). Nobody else can then put a link or another file
//! under a name the daemon uses, or swap a directory on the way to it. The
//! files themselves are opened with `O_NOFOLLOW` relative to the checked
//! directory's descriptor, and a name is unlinked only after checking what
//! it names (a socket file, [`remove_socket`]).

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

/// Why a directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error(
        "refusing to use {path}: {why}; a directory the daemon writes in, and each one above \
         it, must be owned by root or by the daemon's user (uid {euid}) and writable by no one \
         else (above it, only with the sticky bit set, as on /tmp): fix its owner or mode, or \
         choose another path"
    )]
    Unsafe {
        path: PathBuf,
        why: String,
        euid: u32,
    },
    #[error("cannot open directory {path}: {source}")]
    Open {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// An open directory that passed the checks.
#[derive(Debug)]
pub struct CheckedDir {
    fd: OwnedFd,
    path: PathBuf,
}

fn io(e: rustix::io::Errno) -> std::io::Error {
    e.into()
}

/// The checks on one directory on the way: `last` is the one files go in.
fn check(st: &Stat, path: &Path, last: bool, euid: u32) -> Result<(), DirError> {
    let unsafe_dir = |why: String| DirError::Unsafe {
        path: path.into(),
        why,
        euid,
    };
    let mode = st.st_mode & 0o7777;
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return Err(unsafe_dir("it is not a directory".into()));
    }
    if st.st_uid != 0 && st.st_uid != euid {
        return Err(unsafe_dir(format!("it is owned by uid {}", st.st_uid)));
    }
    let others_write = mode & 0o022 != 0;
    let sticky = mode & 0o1000 != 0;
    if others_write && (last || !sticky) {
        let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (true, true) => "its group and all users",
            (true, false) => "its group",
            _ => "all users",
        };
        return Err(unsafe_dir(format!(
            "it is writable by {who} (mode {mode:04o})"
        )));
    }
    Ok(())
}

impl CheckedDir {
    /// Opens `dir` after checking it and every directory above it. When
    /// it is missing and `create` is given, it is created (with its
    /// missing parents) with that mode first; the new directories are
    /// checked like any others.
    pub fn open(dir: &Path, create: Option<u32>) -> Result<CheckedDir, DirError> {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let open_err = |source| DirError::Open {
            path: dir.into(),
            source,
        };
        if let Some(mode) = create
            && std::fs::symlink_metadata(dir).is_err()
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(mode)
                .create(dir)
                .map_err(open_err)?;
        }
        // Links above the directory (/var/run → /run) are resolved once;
        // the walk below then follows none, and checks each directory it
        // passes, so none can have been swapped by anyone but root or the
        // daemon's user.
        let real = std::fs::canonicalize(dir).map_err(open_err)?;
        let euid = rustix::process::geteuid().as_raw();
        let mut fd = rustix::fs::open(
            "/",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| open_err(io(e)))?;
        let mut at = PathBuf::from("/");
        let names: Vec<&OsStr> = real
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        for (i, name) in names.iter().enumerate() {
            let st = rustix::fs::fstat(&fd).map_err(|e| open_err(io(e)))?;
            check(&st, &at, false, euid)?;
            at.push(name);
            let last = i + 1 == names.len();
            let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let flags = if last {
                flags | OFlags::RDONLY
            } else {
                flags | OFlags::PATH
            };
            fd = rustix::fs::openat(&fd, *name, flags, Mode::empty()).map_err(|e| {
                DirError::Open {
                    path: at.clone(),
                    source: io(e),
                }
            })?;
        }
        if names.is_empty() {
            // The root directory itself.
            fd = rustix::fs::open(
                "/",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| open_err(io(e)))?;
        }
        let st = rustix::fs::fstat(&fd).map_err(|e| open_err(io(e)))?;
        check(&st, &at, true, euid)?;
        Ok(CheckedDir { fd, path: real })
    }

    /// The directory `file` is in, checked ([`CheckedDir::open`]), and
    /// `file`'s name in it.
    pub fn of_file(file: &Path, create: Option<u32>) -> Result<(CheckedDir, OsString), DirError> {
        let name = file
            .file_name()
            .ok_or_else(|| DirError::Unsafe {
                path: file.into(),
                why: "it does not name a file".into(),
                euid: rustix::process::geteuid().as_raw(),
            })?
            .to_os_string();
        let dir = file.parent().unwrap_or(Path::new("."));
        Ok((CheckedDir::open(dir, create)?, name))
    }

    /// The directory's real path (links above it resolved).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// What `name` in the directory is, not following a link.
    pub fn stat(&self, name: &OsStr) -> std::io::Result<Stat> {
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).map_err(io)
    }

    /// Opens `name` for reading; a link there is an error (`ELOOP`), not
    /// followed.
    pub fn open_read(&self, name: &OsStr) -> std::io::Result<std::fs::File> {
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
        )
        .map_err(io)?;
        Ok(std::fs::File::from(fd))
    }

    /// Creates `name` afresh for writing, with `mode`: whatever had that
    /// name (a file, a link) is removed first, and the create is exclusive
    /// (`O_EXCL`), so the file written is always a new one.
    pub fn create_new(&self, name: &OsStr, mode: u32) -> std::io::Result<std::fs::File> {
        self.remove_if_present(name)?;
        let fd = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::WRONLY
                | OFlags::CREATE
                | OFlags::EXCL
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC
                | OFlags::NOCTTY,
            Mode::from_raw_mode(mode),
        )
        .map_err(io)?;
        Ok(std::fs::File::from(fd))
    }

    /// Removes `name` (never a directory); nothing there is not an error.
    pub fn remove_if_present(&self, name: &OsStr) -> std::io::Result<()> {
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(io(e)),
        }
    }

    /// Renames `from` to `to`, both in this directory.
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
        rustix::fs::renameat(&self.fd, from, &self.fd, to).map_err(io)
    }

    /// A hard link `to` to the file `from`, both in this directory.
    pub fn hard_link(&self, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
        rustix::fs::linkat(&self.fd, from, &self.fd, to, AtFlags::empty()).map_err(io)
    }

    /// Makes the directory's renames durable, where the file system can.
    pub fn sync(&self) {
        let _ = rustix::fs::fsync(&self.fd);
    }
}

/// Identifies a socket file the daemon bound, so that it removes that one
/// and nothing else put in its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
    /// A new file may get the number of one removed: its change time
    /// (ns since the epoch) tells them apart in most cases.
    pub ctime_ns: i128,
}

impl FileId {
    pub fn of(st: &Stat) -> FileId {
        FileId {
            dev: st.st_dev,
            ino: st.st_ino,
            ctime_ns: i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec),
        }
    }
}

/// Removes the socket file at `path` if it is still the one `id` names
/// (the daemon's own): never a file of another kind, nor one put in its
/// place, nor anything reached through a link. Says why not otherwise.
pub fn remove_socket(path: &Path, id: FileId) -> Result<(), String> {
    let (dir, name) = CheckedDir::of_file(path, None).map_err(|e| e.to_string())?;
    let st = match dir.stat(&name) {
        Ok(st) => st,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("cannot look at {}: {e}", path.display())),
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::Socket || FileId::of(&st) != id {
        return Err(format!(
            "{} is no longer the daemon's socket; left alone",
            path.display()
        ));
    }
    dir.remove_if_present(&name)
        .map_err(|e| format!("cannot remove {}: {e}", path.display()))
}

/// `mode` as the kind of file it is, for messages.
pub fn kind_of(st: &Stat) -> &'static str {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "a file of unknown kind",
    }
}

/// Binds a listening Unix socket at `path`, in a checked directory
/// (created, mode 0755, when missing), with mode `mode`: no wider than
/// that from the moment it exists (set on the socket's descriptor before
/// `bind`), then widened to it by name in the checked directory where the
/// umask narrowed it; the process's umask is left alone. A socket file left by a daemon that died is
/// replaced; any other file there is refused, and left alone. Returns the
/// listener and the bound file's identity ([`remove_socket`]).
pub fn bind_socket(
    path: &Path,
    mode: u32,
) -> Result<(std::os::unix::net::UnixListener, FileId), BindError> {
    let (dir, name) = CheckedDir::of_file(path, Some(0o755))?;
    let full = dir.path().join(&name);
    let err = |source: std::io::Error| BindError::Io {
        path: path.into(),
        source,
    };
    match dir.stat(&name) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Socket => {
            if std::os::unix::net::UnixStream::connect(&full).is_ok() {
                return Err(BindError::AlreadyRunning(path.into()));
            }
            // Left behind by a daemon that died: nobody answers on it. The
            // directory is checked, so the name cannot change under us.
            dir.remove_if_present(&name).map_err(err)?;
        }
        Ok(st) => {
            return Err(BindError::NotASocket {
                path: path.into(),
                kind: kind_of(&st),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| err(io(e)))?;
    // The file bind makes gets the socket's mode less the process's umask,
    // so it starts no wider than `mode`. The umask is not changed here: it
    // is shared by every thread of a program that embeds a monitor, and a
    // file another thread made meanwhile would get ours. What the umask
    // took away is given back by name instead: the directory is checked,
    // nobody else may write in it, so the name is still the socket just
    // bound (systemd's UMask=0077 would otherwise leave it 0600).
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode)).map_err(|e| err(io(e)))?;
    let addr = SocketAddrUnix::new(&full).map_err(|e| err(io(e)))?;
    rustix::net::bind(&fd, &addr).map_err(|e| err(io(e)))?;
    let mut st = dir.stat(&name).map_err(err)?;
    if FileType::from_raw_mode(st.st_mode) == FileType::Socket && st.st_mode & 0o7777 != mode {
        rustix::fs::chmodat(dir.fd(), &name, Mode::from_raw_mode(mode), AtFlags::empty())
            .map_err(|e| err(io(e)))?;
        st = dir.stat(&name).map_err(err)?;
    }
    // After the chmod, which changes the ctime the identity includes.
    let id = FileId::of(&st);
    if FileType::from_raw_mode(st.st_mode) != FileType::Socket || st.st_mode & 0o7777 != mode {
        let _ = remove_socket(path, id);
        return Err(err(std::io::Error::other(format!(
            "the bound socket has mode {:04o}, not {mode:04o}",
            st.st_mode & 0o7777
        ))));
    }
    rustix::net::listen(&fd, 4096).map_err(|e| err(io(e)))?;
    Ok((std::os::unix::net::UnixListener::from(fd), id))
}

/// Why [`bind_socket`] failed.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("another hetsched daemon is already listening on {0}")]
    AlreadyRunning(PathBuf),
    #[error(
        "refusing to use {path} as the socket: it is {kind}, not a socket left by an earlier \
         daemon; it is left alone (remove it yourself, or choose another --socket)"
    )]
    NotASocket { path: PathBuf, kind: &'static str },
    #[error(transparent)]
    Dir(#[from] DirError),
    #[error("cannot use socket {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_private_directory_is_accepted_and_one_others_may_write_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let ok = t.path().join("ok");
        let d = CheckedDir::open(&ok, Some(0o755)).unwrap();
        assert_eq!(d.path(), std::fs::canonicalize(&ok).unwrap());
        for (mode, says) in [
            (0o777, "all users"),
            (0o775, "its group"),
            (0o1777, "mode 1777"),
        ] {
            chmod(&ok, mode);
            let e = CheckedDir::open(&ok, None).unwrap_err().to_string();
            assert!(e.contains("refusing to use") && e.contains(says), "{e}");
        }
        // Above it, a sticky world-writable directory (like /tmp) is fine;
        // one without the sticky bit is not.
        chmod(&ok, 0o700);
        let below = ok.join("below");
        chmod(&ok, 0o1777);
        CheckedDir::open(&below, Some(0o700)).unwrap();
        chmod(&ok, 0o777);
        let e = CheckedDir::open(&below, None).unwrap_err().to_string();
        assert!(e.contains(&ok.display().to_string()), "{e}");
    }

    #[test]
    fn files_are_never_reached_through_a_link() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let d = CheckedDir::open(t.path(), None).unwrap();
        std::os::unix::fs::symlink(&victim, t.path().join("link")).unwrap();
        assert!(d.open_read(OsStr::new("link")).is_err());
        // Creating replaces the link itself, not what it points at.
        let mut f = d.create_new(OsStr::new("link"), 0o600).unwrap();
        std::io::Write::write_all(&mut f, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(
            std::fs::read_to_string(t.path().join("link")).unwrap(),
            "new"
        );
    }

    #[test]
    fn the_socket_gets_its_mode_whatever_the_umask_and_only_a_socket_is_replaced() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("run/s.sock");
        let (l, id) = bind_socket(&path, 0o666).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o666);
        // Still listening: a second daemon is refused.
        assert!(matches!(
            bind_socket(&path, 0o666),
            Err(BindError::AlreadyRunning(_))
        ));
        drop(l);
        // A dead one's socket is replaced.
        let (l, id2) = bind_socket(&path, 0o666).unwrap();
        remove_socket(&path, id2).unwrap();
        assert!(!path.exists());
        drop(l);
        // Something else put at the socket's name is left alone.
        std::fs::write(&path, "not ours").unwrap();
        assert!(remove_socket(&path, id).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "not ours");
        let file = t.path().join("run/file");
        std::fs::write(&file, "keep").unwrap();
        let e = bind_socket(&file, 0o666).unwrap_err().to_string();
        assert!(
            e.contains("a regular file") && e.contains("left alone"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    }
}
