//! Which threads the balancer manages: every user thread on the machine
//! (only when asked with `--all`), the threads of a cgroup, of given
//! processes, or of the processes a user owns. Listed afresh every
//! epoch, so threads that start or exit between epochs are picked up or
//! dropped without bookkeeping.

use std::path::{Path, PathBuf};

/// A thread, by process and thread id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId {
    pub pid: u32,
    pub tid: u32,
}

/// What `--all`, `--cgroup`, `--pids` and `--user` select.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// Every user thread except the balancer's own (kernel threads have
    /// no `/proc/PID/exe` target and are skipped).
    All,
    /// Threads listed in a cgroup directory (`tasks` in v1,
    /// `cgroup.threads` in v2).
    Cgroup(PathBuf),
    /// Every thread of these processes.
    Pids(Vec<u32>),
    /// Every thread of the processes whose real user id is this.
    User(u32),
}

/// Why the target cannot be listed at all.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("cgroup {0}: neither `tasks` nor `cgroup.threads` is readable: {1}")]
    Cgroup(PathBuf, std::io::Error),
    #[error("process {0} does not exist")]
    NoSuchProcess(u32),
    #[error("there is no user `{0}` (neither a name in /etc/passwd nor a number)")]
    NoSuchUser(String),
}

impl Target {
    /// The `--user` target: a user id, or a name looked up in `/etc/passwd`.
    pub fn user(name_or_uid: &str) -> Result<Target, TargetError> {
        if let Ok(uid) = name_or_uid.parse() {
            return Ok(Target::User(uid));
        }
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        uid_in_passwd(&passwd, name_or_uid)
            .map(Target::User)
            .ok_or_else(|| TargetError::NoSuchUser(name_or_uid.into()))
    }
}

fn uid_in_passwd(passwd: &str, name: &str) -> Option<u32> {
    passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == name).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

impl Target {
    /// The target's threads now, sorted. A listed process that has gone is
    /// an error only when *every* listed process is gone (a balancer of a
    /// finished program has nothing left to do); otherwise it is skipped.
    pub fn threads(&self, proc_root: &Path) -> Result<Vec<ThreadId>, TargetError> {
        let me = std::process::id();
        let mut out = match self {
            Target::All => {
                let mut out = Vec::new();
                for pid in numeric_entries(proc_root) {
                    if pid != me && is_user_process(proc_root, pid) {
                        out.extend(threads_of(proc_root, pid));
                    }
                }
                out
            }
            Target::User(uid) => {
                let mut out = Vec::new();
                for pid in numeric_entries(proc_root) {
                    if pid != me
                        && is_user_process(proc_root, pid)
                        && real_uid(proc_root, pid) == Some(*uid)
                    {
                        out.extend(threads_of(proc_root, pid));
                    }
                }
                out
            }
            Target::Pids(pids) => {
                let mut out = Vec::new();
                for &pid in pids {
                    out.extend(threads_of(proc_root, pid));
                }
                if out.is_empty() {
                    if let Some(&pid) = pids.first() {
                        return Err(TargetError::NoSuchProcess(pid));
                    }
                }
                out
            }
            Target::Cgroup(dir) => {
                let text = std::fs::read_to_string(dir.join("tasks"))
                    .or_else(|_| std::fs::read_to_string(dir.join("cgroup.threads")))
                    .map_err(|e| TargetError::Cgroup(dir.clone(), e))?;
                text.lines()
                    .filter_map(|l| l.trim().parse().ok())
                    .filter_map(|tid| {
                        let pid = tgid_of(proc_root, tid)?;
                        (pid != me).then_some(ThreadId { pid, tid })
                    })
                    .collect()
            }
        };
        out.sort();
        out.dedup();
        Ok(out)
    }
}

fn numeric_entries(dir: &Path) -> Vec<u32> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn threads_of(proc_root: &Path, pid: u32) -> Vec<ThreadId> {
    numeric_entries(&proc_root.join(pid.to_string()).join("task"))
        .into_iter()
        .map(|tid| ThreadId { pid, tid })
        .collect()
}

/// Kernel threads have an empty `cmdline`.
fn is_user_process(proc_root: &Path, pid: u32) -> bool {
    std::fs::read(proc_root.join(pid.to_string()).join("cmdline")).is_ok_and(|c| !c.is_empty())
}

/// The real user id of a process (the first `Uid:` field).
fn real_uid(proc_root: &Path, pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(proc_root.join(pid.to_string()).join("status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn tgid_of(proc_root: &Path, tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(proc_root.join(tid.to_string()).join("status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_lists_this_processs_threads_and_all_skips_the_balancer() {
        let proc_root = Path::new("/proc");
        let me = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let helper = std::thread::spawn(move || rx.recv());
        let mine = Target::Pids(vec![me]).threads(proc_root).unwrap();
        assert!(mine.len() >= 2, "{mine:?}");
        assert!(mine.iter().all(|t| t.pid == me));
        assert!(mine.iter().any(|t| t.tid == me));
        let all = Target::All.threads(proc_root).unwrap();
        assert!(all.iter().all(|t| t.pid != me));
        tx.send(()).unwrap();
        helper.join().unwrap().unwrap();
    }

    #[test]
    fn a_user_target_lists_that_users_processes_only() {
        let passwd = "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n";
        assert_eq!(uid_in_passwd(passwd, "alice"), Some(1000));
        assert_eq!(uid_in_passwd(passwd, "bob"), None);
        assert_eq!(Target::user("1234").unwrap(), Target::User(1234));
        assert!(matches!(
            Target::user("no-such-user-here"),
            Err(TargetError::NoSuchUser(_))
        ));
        // A child of ours runs as our user; the balancer itself is skipped.
        let uid = rustix::process::getuid().as_raw();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        // Spawning returns once the exec has begun, possibly before the
        // new program's arguments are set up: until then its `cmdline` is
        // empty and it looks like a kernel thread.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !is_user_process(Path::new("/proc"), child.id()) {
            assert!(std::time::Instant::now() < deadline, "sleep never started");
            std::thread::yield_now();
        }
        let got = Target::User(uid).threads(Path::new("/proc")).unwrap();
        let other = Target::User(uid.wrapping_add(4242))
            .threads(Path::new("/proc"))
            .unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(got.iter().any(|t| t.pid == child.id()), "{got:?}");
        assert!(got.iter().all(|t| t.pid != std::process::id()));
        assert!(other.iter().all(|t| t.pid != child.id()));
    }

    #[test]
    fn a_gone_process_is_an_error_only_when_nothing_is_left() {
        let proc_root = Path::new("/proc");
        let gone = u32::MAX - 7;
        assert!(matches!(
            Target::Pids(vec![gone]).threads(proc_root),
            Err(TargetError::NoSuchProcess(p)) if p == gone
        ));
        let me = std::process::id();
        assert!(
            !Target::Pids(vec![gone, me])
                .threads(proc_root)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_cgroup_lists_its_tasks_file() {
        let dir = tempfile::tempdir().unwrap();
        // This test's own thread ids: the balancer skips its own process,
        // so list a child process instead.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        std::fs::write(dir.path().join("tasks"), format!("{}\n", child.id())).unwrap();
        let got = Target::Cgroup(dir.path().into())
            .threads(Path::new("/proc"))
            .unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            got,
            vec![ThreadId {
                pid: child.id(),
                tid: child.id()
            }]
        );
        let missing = Target::Cgroup(dir.path().join("nope")).threads(Path::new("/proc"));
        assert!(matches!(missing, Err(TargetError::Cgroup(..))));
    }
}
