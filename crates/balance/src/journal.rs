//! The balancer's undo journal: what every thread it changed looked like
//! before, so that the change can be taken back.
//!
//! Before the balancer first pins a thread or moves it into a throttling
//! cgroup, it records the thread's affinity and its `cpu` cgroup; it also
//! records the CPU it pins the thread to, so that a later restore can tell
//! its own pin from one the program made since. The record lives in memory
//! for the clean exit, and in a state file (JSON, written to a temporary
//! file and renamed over the old one, so a crash never leaves half a file)
//! for the crash: the next start reads the file and restores first.
//!
//! A thread is recorded with the start time `/proc` gives it, because a
//! thread id is reused once the thread exits: a restore must never touch an
//! unrelated thread that happens to carry a recorded id.

use crate::targets::ThreadId;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Version of the state file's layout; another version is refused.
const VERSION: u32 = 1;

/// One changed thread as it was before the balancer first touched it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadRecord {
    pub pid: u32,
    pub tid: u32,
    /// Field 22 of `/proc/PID/task/TID/stat` (clock ticks after boot):
    /// with the ids, names the thread across tid reuse.
    pub start_time: u64,
    /// OS CPUs it was allowed before.
    pub affinity: Vec<usize>,
    /// Its directory in the `cpu` controller before, where there is one.
    pub cgroup: Option<PathBuf>,
    /// The CPU the balancer last pinned it to: an affinity other than
    /// exactly this CPU was set by someone else and is left alone.
    pub pinned: Option<usize>,
}

impl ThreadRecord {
    pub fn id(&self) -> ThreadId {
        ThreadId {
            pid: self.pid,
            tid: self.tid,
        }
    }
}

/// A process, named across pid reuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessStamp {
    pub pid: u32,
    pub start_time: u64,
}

impl ProcessStamp {
    /// This process.
    pub fn me() -> Option<ProcessStamp> {
        let pid = std::process::id();
        Some(ProcessStamp {
            pid,
            start_time: thread_start_time(ThreadId { pid, tid: pid })?,
        })
    }

    /// Whether the process this names still runs.
    pub fn is_alive(&self) -> bool {
        let id = ThreadId {
            pid: self.pid,
            tid: self.pid,
        };
        thread_start_time(id) == Some(self.start_time)
    }
}

/// What the state file holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JournalFile {
    pub version: u32,
    /// The balancer that wrote it: while it runs, nobody else restores.
    pub owner: Option<ProcessStamp>,
    /// The throttling cgroups of emulated kinds: a thread found in one of
    /// them on restore was put there by the balancer.
    pub throttles: Vec<PathBuf>,
    pub threads: Vec<ThreadRecord>,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot read the state file {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error(
        "the state file {0} is not a balancer journal ({1}); check the threads it lists and remove it"
    )]
    Corrupt(PathBuf, String),
    #[error(
        "the state file {path} belongs to a balancer that still runs (pid {pid}); stop it or pass another --state-file"
    )]
    InUse { path: PathBuf, pid: u32 },
    #[error("cannot write the state file {0}: {1}")]
    Write(PathBuf, std::io::Error),
}

/// The journal of one balancer: the records, and the file they are kept
/// in (none for an in-memory journal, as the bench uses).
#[derive(Clone, Debug)]
pub struct Journal {
    path: Option<PathBuf>,
    file: JournalFile,
}

impl Journal {
    /// A journal kept only in memory: restored on a clean exit, lost in a
    /// crash.
    pub fn in_memory(throttles: Vec<PathBuf>) -> Journal {
        Journal {
            path: None,
            file: JournalFile {
                version: VERSION,
                owner: ProcessStamp::me(),
                throttles,
                threads: Vec::new(),
            },
        }
    }

    /// A journal kept in `path` too. Nothing is written until the first
    /// thread is recorded.
    pub fn at(path: &Path, throttles: Vec<PathBuf>) -> Journal {
        Journal {
            path: Some(path.into()),
            ..Journal::in_memory(throttles)
        }
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn contents(&self) -> &JournalFile {
        &self.file
    }

    pub fn record(&self, id: ThreadId) -> Option<&ThreadRecord> {
        self.file.threads.iter().find(|r| r.id() == id)
    }

    /// Records that `id` is about to be pinned to `cpu`, first taking down
    /// how it was if it is new, and writes the file before returning: the
    /// change may only be made once its undo is durable. `None` from the
    /// `Ok` means the thread has exited.
    pub fn note_pin(&mut self, id: ThreadId, cpu: usize) -> Result<Option<()>, JournalError> {
        if let Some(r) = self.file.threads.iter_mut().find(|r| r.id() == id) {
            if r.pinned == Some(cpu) {
                return Ok(Some(()));
            }
            r.pinned = Some(cpu);
        } else {
            let (Some(start_time), Some(affinity)) =
                (thread_start_time(id), crate::sense::affinity_of(id.tid))
            else {
                return Ok(None);
            };
            self.file.threads.push(ThreadRecord {
                pid: id.pid,
                tid: id.tid,
                start_time,
                affinity,
                cgroup: cpu_cgroup_of(id),
                pinned: Some(cpu),
            });
        }
        self.save().map(Some)
    }

    /// Notes that `id`'s program set its own affinity: a restore leaves
    /// that affinity alone. Kept in memory; the file is rewritten with the
    /// next change (a restore from the file compares affinities anyway).
    pub fn note_self_managed(&mut self, id: ThreadId) {
        if let Some(r) = self.file.threads.iter_mut().find(|r| r.id() == id) {
            r.pinned = None;
        }
    }

    /// Drops the records of threads that have exited (their ids may be
    /// reused), rewriting the file if any went.
    pub fn forget_exited(&mut self) -> Result<(), JournalError> {
        let before = self.file.threads.len();
        self.file
            .threads
            .retain(|r| thread_start_time(r.id()) == Some(r.start_time));
        if self.file.threads.len() != before {
            self.save()?;
        }
        Ok(())
    }

    /// Writes the file atomically: a temporary file beside it, renamed over
    /// it.
    pub fn save(&self) -> Result<(), JournalError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let err = |e| JournalError::Write(path.clone(), e);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let text = serde_json::to_vec_pretty(&self.file)
            .map_err(|e| err(std::io::Error::other(e.to_string())))?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".tmp.{}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&text)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            err(e)
        })
    }

    /// Removes the file (after a complete restore).
    pub fn remove_file(&self) -> Result<(), JournalError> {
        match &self.path {
            Some(p) => match std::fs::remove_file(p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(JournalError::Write(p.clone(), e))
                }
                _ => Ok(()),
            },
            None => Ok(()),
        }
    }
}

/// Reads a state file; `None` when there is none.
pub fn load(path: &Path) -> Result<Option<JournalFile>, JournalError> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(JournalError::Read(path.into(), e)),
    };
    parse(&text)
        .map(Some)
        .map_err(|why| JournalError::Corrupt(path.into(), why))
}

/// A state file's contents, or why they are not one.
pub fn parse(bytes: &[u8]) -> Result<JournalFile, String> {
    let file: JournalFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if file.version != VERSION {
        return Err(format!(
            "layout version {}, expected {VERSION}",
            file.version
        ));
    }
    Ok(file)
}

/// Where the state file goes unless configured: `/run/hetsched` for root,
/// else the user's runtime directory, else the temporary directory.
pub fn default_path() -> PathBuf {
    let name = "balance-state.json";
    if rustix::process::geteuid().is_root() {
        return Path::new("/run/hetsched").join(name);
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) => PathBuf::from(dir).join("hetsched").join(name),
        None => std::env::temp_dir().join(format!(
            "hetsched-{}-{name}",
            rustix::process::geteuid().as_raw()
        )),
    }
}

/// The thread's directory in the cgroup v1 `cpu` hierarchy.
pub(crate) fn cpu_cgroup_of(id: ThreadId) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{}/task/{}/cgroup", id.pid, id.tid)).ok()?;
    let rel = text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "cpu")
            .then(|| path.trim_start_matches('/').to_string())
    })?;
    Some(Path::new(hetsched_platform::slow_cores::CGROUP_CPU_ROOT).join(rel))
}

/// Start time of a thread (field 22 of its `stat`), or `None` when it
/// does not exist (or is not a thread of `pid`).
pub fn thread_start_time(id: ThreadId) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/task/{}/stat", id.pid, id.tid)).ok()?;
    parse_start_time(&stat)
}

fn parse_start_time(stat: &str) -> Option<u64> {
    // Fields after the command name (which may hold spaces and
    // parentheses) start at field 3: field 22 is the 20th of them.
    let close = stat.rfind(')')?;
    stat[close + 1..].split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> ThreadId {
        let pid = std::process::id();
        ThreadId { pid, tid: pid }
    }

    #[test]
    fn start_time_is_field_22_even_with_odd_names() {
        let stat = "42 (my (odd) name) R 1 42 42 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 1 0 \
                    123 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(parse_start_time(stat), Some(123));
        assert!(thread_start_time(me()).is_some());
        let gone = ThreadId {
            pid: u32::MAX - 3,
            tid: u32::MAX - 3,
        };
        assert_eq!(thread_start_time(gone), None);
        assert!(ProcessStamp::me().unwrap().is_alive());
    }

    #[test]
    fn a_recorded_thread_is_written_atomically_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("state.json");
        let mut j = Journal::at(&path, vec![PathBuf::from("/x/throttle")]);
        assert!(
            load(&path).unwrap().is_none(),
            "nothing written before a change"
        );
        assert_eq!(j.note_pin(me(), 0).unwrap(), Some(()));
        let back = load(&path).unwrap().unwrap();
        assert_eq!(back, *j.contents());
        let r = &back.threads[0];
        assert_eq!((r.id(), r.pinned), (me(), Some(0)));
        assert_eq!(
            r.affinity,
            crate::sense::affinity_of(std::process::id()).unwrap()
        );
        // A second pin of the same thread keeps the first record.
        j.note_pin(me(), 1).unwrap();
        let back = load(&path).unwrap().unwrap();
        assert_eq!(back.threads.len(), 1);
        assert_eq!(back.threads[0].pinned, Some(1));
        // No temporary file is left beside it.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
        j.remove_file().unwrap();
        assert!(load(&path).unwrap().is_none());
        j.remove_file().unwrap();
    }

    #[test]
    fn a_corrupt_or_foreign_file_is_refused_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, "{not json").unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(
            e.contains("state.json") && e.contains("not a balancer journal"),
            "{e}"
        );
        std::fs::write(
            &path,
            r#"{"version":99,"owner":null,"throttles":[],"threads":[]}"#,
        )
        .unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("version 99"));
    }
}
