//! Settings that outlive the daemon: every non-default setting of a
//! running process, keyed by (pid, start time) so that a process that
//! reconnects after a restart gets its shares back and a new process that
//! happens to reuse the pid does not.
//!
//! A save never loses a good file: the new state goes to a temp file that
//! is fsynced, the current file is hard-linked to `state.json.last-good`
//! (through a temp name, then renamed over it), and only then is the temp
//! file renamed over `state.json`. Each step is one atomic rename, so at
//! every instant both names hold a complete file. On start, a file that
//! cannot be read is moved aside (`state.json.corrupt-<unix seconds>`) and
//! the daemon starts from the last good one, else from defaults
//! ([`SettingsStore::load_or_recover`]). The daemon writes off its state
//! lock, at most a few times a second ([`crate::store_writer`]).
//!
//! Every file is reached through the descriptor of its directory, checked
//! first ([`CheckedDir`]: owned by root or the daemon's user, writable by
//! no one else), and opened with `O_NOFOLLOW`; the temp file is created
//! afresh (`O_EXCL`) each time. A link planted at any of these names is
//! neither followed nor written through.

use crate::checked_dir::{CheckedDir, DirError};
pub use crate::processes::ProcessKey;
use hetsched_core::policy::ClientSettings;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Layout revision of the state file.
const STORE_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct StoredProcess {
    #[serde(flatten)]
    key: ProcessKey,
    name: String,
    /// Unit name → settings.
    units: BTreeMap<String, ClientSettings>,
    /// The ancestor whose settings these are a copy of
    /// ([`SettingsStore::adopt`]); `None` for settings of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inherited_from: Option<ProcessKey>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct StoreFile {
    version: u32,
    processes: Vec<StoredProcess>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SettingsStore {
    processes: BTreeMap<ProcessKey, StoredProcess>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a hetsched state file: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path} has state version {found}; this daemon reads version {STORE_VERSION}")]
    Version { path: PathBuf, found: u32 },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Dir(#[from] DirError),
    #[error("{problem}, and it cannot be moved aside to {to}: {source}")]
    MoveAside {
        problem: Box<StoreError>,
        to: PathBuf,
        source: std::io::Error,
    },
}

/// Where [`SettingsStore::load_or_recover`] found the settings it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadedFrom {
    /// No state file: the first start.
    Nothing,
    /// The state file.
    File,
    /// The state file was bad; the last good one beside it.
    LastGood,
    /// Both were bad (or there was no last good one): defaults.
    Defaults,
}

/// `path` with `suffix` appended to its file name.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

/// The previous good state file, kept beside `path`.
pub fn last_good_path(path: &Path) -> PathBuf {
    with_suffix(path, ".last-good")
}

/// The state file's directory, checked, and the file's name in it.
fn open_dir(path: &Path, create: bool) -> Result<(CheckedDir, OsString), StoreError> {
    Ok(CheckedDir::of_file(path, create.then_some(0o755))?)
}

/// [`open_dir`] without creating it: `None` when the directory does not
/// exist yet (the first start).
fn open_existing_dir(path: &Path) -> Result<Option<(CheckedDir, OsString)>, StoreError> {
    match CheckedDir::of_file(path, None) {
        Ok(found) => Ok(Some(found)),
        Err(DirError::Open { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// `name` with `suffix` appended.
fn suffixed(name: &OsStr, suffix: &str) -> OsString {
    let mut n = name.to_os_string();
    n.push(suffix);
    n
}

/// Reads and parses one state file, `name` in `dir` (`path` names it in
/// errors); `None` if it does not exist. A link there is not followed.
fn read_file(
    dir: &CheckedDir,
    name: &OsStr,
    path: &Path,
) -> Result<Option<SettingsStore>, StoreError> {
    let read = dir.open_read(name).and_then(|mut f| {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut bytes).map(|_| bytes)
    });
    match read {
        Ok(bytes) => SettingsStore::parse(path, &bytes).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StoreError::Read {
            path: path.into(),
            source,
        }),
    }
}

/// Renames a bad file to `<path>.corrupt-<unix seconds>` (with `-<n>`
/// added if a file of that name exists) and returns the new name.
fn move_aside(
    dir: &CheckedDir,
    name: &OsStr,
    path: &Path,
    problem: StoreError,
) -> Result<PathBuf, StoreError> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let base = suffixed(name, &format!(".corrupt-{secs}"));
    let mut to = base.clone();
    let mut n = 1;
    while dir.stat(&to).is_ok() {
        to = suffixed(&base, &format!("-{n}"));
        n += 1;
    }
    let to_path = path.with_file_name(&to);
    match dir.rename(name, &to) {
        Ok(()) => Ok(to_path),
        Err(source) => Err(StoreError::MoveAside {
            problem: Box::new(problem),
            to: to_path,
            source,
        }),
    }
}

/// Makes `to` a complete copy of `from` in one step: a hard link (or, on
/// a file system without them, a fsynced copy) under a temp name, renamed
/// over `to`.
fn replace_with_copy(dir: &CheckedDir, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
    let tmp = suffixed(to, ".tmp");
    dir.remove_if_present(&tmp)?;
    if dir.hard_link(from, &tmp).is_err() {
        let mut src = dir.open_read(from)?;
        let mut dst = dir.create_new(&tmp, 0o600)?;
        std::io::copy(&mut src, &mut dst)?;
        dst.sync_all()?;
    }
    dir.rename(&tmp, to)?;
    // Renaming a file over another link to the same file does nothing and
    // leaves the temp name behind.
    dir.remove_if_present(&tmp)
}

impl SettingsStore {
    /// Parses the bytes of a state file (`path` only names it in errors).
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<SettingsStore, StoreError> {
        let file: StoreFile =
            serde_json::from_slice(bytes).map_err(|source| StoreError::Parse {
                path: path.into(),
                source,
            })?;
        if file.version != STORE_VERSION {
            return Err(StoreError::Version {
                path: path.into(),
                found: file.version,
            });
        }
        Ok(SettingsStore {
            processes: file.processes.into_iter().map(|p| (p.key, p)).collect(),
        })
    }

    /// The store as the bytes of a state file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let file = StoreFile {
            version: STORE_VERSION,
            processes: self.processes.values().cloned().collect(),
        };
        serde_json::to_vec_pretty(&file).expect("state serialises")
    }

    /// Reads the state file; a missing file is an empty store.
    pub fn load(path: &Path) -> Result<SettingsStore, StoreError> {
        let Some((dir, name)) = open_existing_dir(path)? else {
            return Ok(SettingsStore::default());
        };
        Ok(read_file(&dir, &name, path)?.unwrap_or_default())
    }

    /// Reads the state file, recovering from a bad one: a file that cannot
    /// be read or parsed (empty, truncated, not JSON, another version) is
    /// moved aside to `<path>.corrupt-<unix seconds>`, and the settings
    /// come from `<path>.last-good`, which is then copied back to `path`;
    /// if that is bad too (it is moved aside as well) or absent, from
    /// defaults. Each step is one line to `log`. A missing file is the
    /// first start and says nothing. Fails only if a bad state file cannot
    /// be moved aside: starting anyway would write over it.
    pub fn load_or_recover(
        path: &Path,
        log: &mut dyn FnMut(String),
    ) -> Result<(SettingsStore, LoadedFrom), StoreError> {
        let Some((dir, name)) = open_existing_dir(path)? else {
            return Ok((SettingsStore::default(), LoadedFrom::Nothing));
        };
        let problem = match read_file(&dir, &name, path) {
            Ok(Some(store)) => return Ok((store, LoadedFrom::File)),
            Ok(None) => return Ok((SettingsStore::default(), LoadedFrom::Nothing)),
            Err(e) => e,
        };
        let text = problem.to_string();
        let aside = move_aside(&dir, &name, path, problem)?;
        log(format!("{text}; moved it aside to {}", aside.display()));
        let last = last_good_path(path);
        let last_name = suffixed(&name, ".last-good");
        match read_file(&dir, &last_name, &last) {
            Ok(Some(store)) => {
                log(format!(
                    "starting from the last good state, {} ({} processes)",
                    last.display(),
                    store.len()
                ));
                match replace_with_copy(&dir, &last_name, &name) {
                    Ok(()) => dir.sync(),
                    Err(e) => log(format!(
                        "cannot copy {} back to {}: {e}; it is written at the next change",
                        last.display(),
                        path.display()
                    )),
                }
                Ok((store, LoadedFrom::LastGood))
            }
            Ok(None) => {
                log(format!(
                    "there is no {} to fall back on; starting from default settings",
                    last.display()
                ));
                Ok((SettingsStore::default(), LoadedFrom::Defaults))
            }
            Err(e) => {
                let text = e.to_string();
                match move_aside(&dir, &last_name, &last, e) {
                    Ok(to) => log(format!(
                        "{text}; moved it aside to {}; starting from default settings",
                        to.display()
                    )),
                    Err(e) => log(format!("{e}; starting from default settings")),
                }
                Ok((SettingsStore::default(), LoadedFrom::Defaults))
            }
        }
    }

    /// Writes the store so that a crash leaves either the old or the new
    /// file, never a torn one, and keeps the file it replaces (if it was a
    /// good one) as `<path>.last-good`.
    pub fn save(&self, path: &Path) -> Result<(), StoreError> {
        let err = |source| StoreError::Write {
            path: path.into(),
            source,
        };
        let (dir, name) = open_dir(path, true)?;
        let tmp = suffixed(&name, ".tmp");
        let mut f = dir.create_new(&tmp, 0o600).map_err(err)?;
        f.write_all(&self.to_bytes()).map_err(err)?;
        f.sync_all().map_err(err)?;
        drop(f);
        // Only a file that still parses becomes the fallback: one that was
        // damaged since it was written would replace a good fallback.
        if matches!(read_file(&dir, &name, path), Ok(Some(_))) {
            replace_with_copy(&dir, &name, &suffixed(&name, ".last-good")).map_err(err)?;
        }
        dir.rename(&tmp, &name).map_err(err)?;
        dir.sync();
        Ok(())
    }

    pub fn settings_of(&self, key: ProcessKey) -> Option<&BTreeMap<String, ClientSettings>> {
        self.processes.get(&key).map(|p| &p.units)
    }

    pub fn set(&mut self, key: ProcessKey, name: &str, unit: &str, settings: ClientSettings) {
        let entry = self.processes.entry(key).or_insert_with(|| StoredProcess {
            key,
            name: name.to_string(),
            units: BTreeMap::new(),
            inherited_from: None,
        });
        // Set for this process itself: its own from now on.
        entry.inherited_from = None;
        if settings == ClientSettings::default() {
            entry.units.remove(unit);
        } else {
            entry.units.insert(unit.to_string(), settings);
        }
        if entry.units.is_empty() {
            self.processes.remove(&key);
        }
    }

    /// Gives process `to` a copy of `from`'s settings (under `from`'s
    /// name), unless `to` has settings of its own; a copy `to` has of
    /// `from`'s is brought up to date. Whether anything changed.
    pub fn adopt(&mut self, from: ProcessKey, to: ProcessKey) -> bool {
        let Some(source) = self.processes.get(&from) else {
            return false;
        };
        if let Some(have) = self.processes.get(&to)
            && (have.inherited_from != Some(from) || have.units == source.units)
        {
            return false;
        }
        let copy = StoredProcess {
            key: to,
            inherited_from: Some(from),
            ..source.clone()
        };
        self.processes.insert(to, copy);
        true
    }

    /// Whether `key`'s settings are a copy of an ancestor's
    /// ([`SettingsStore::adopt`]) rather than its own.
    pub fn is_inherited(&self, key: ProcessKey) -> bool {
        self.processes
            .get(&key)
            .is_some_and(|p| p.inherited_from.is_some())
    }

    pub fn remove(&mut self, key: ProcessKey) -> bool {
        self.processes.remove(&key).is_some()
    }

    /// Drops processes that no longer exist; true if anything went.
    pub fn retain_alive(&mut self, alive: impl Fn(ProcessKey) -> bool) -> bool {
        let before = self.processes.len();
        self.processes.retain(|k, _| alive(*k));
        before != self.processes.len()
    }

    /// The processes with stored settings.
    pub fn keys(&self) -> Vec<ProcessKey> {
        self.processes.keys().copied().collect()
    }

    pub fn len(&self) -> usize {
        self.processes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.processes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::policy::ShareClass;
    use proptest::prelude::*;

    fn custom(shares: u32) -> ClientSettings {
        ClientSettings {
            class: ShareClass::Custom { shares },
            priority: 0,
        }
    }

    fn store_with(pid: u32, shares: u32) -> SettingsStore {
        let mut store = SettingsStore::default();
        let key = ProcessKey { pid, start_time: 7 };
        store.set(key, "app", "gpu0", custom(shares));
        store
    }

    /// Loads with recovery, returning what it logged too.
    fn recover(path: &Path) -> (Result<(SettingsStore, LoadedFrom), StoreError>, Vec<String>) {
        let mut lines = Vec::new();
        let loaded = SettingsStore::load_or_recover(path, &mut |l| lines.push(l));
        (loaded, lines)
    }

    /// Files in `dir` whose names start with `prefix`.
    fn named(dir: &Path, prefix: &str) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
            .collect();
        found.sort();
        found
    }

    #[test]
    fn saves_and_loads_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let store = store_with(42, 50);
        store.save(&path).unwrap();
        let back = SettingsStore::load(&path).unwrap();
        assert_eq!(back, store);
        let key = ProcessKey {
            pid: 42,
            start_time: 7,
        };
        assert_eq!(back.settings_of(key).unwrap()["gpu0"], custom(50));
        assert_eq!(
            named(dir.path(), ""),
            [path],
            "no temp or fallback file after the first save"
        );
    }

    #[test]
    fn each_save_keeps_the_file_it_replaces_as_the_last_good_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let last = last_good_path(&path);
        for shares in [10, 20, 30] {
            store_with(1, shares).save(&path).unwrap();
        }
        assert_eq!(SettingsStore::load(&path).unwrap(), store_with(1, 30));
        assert_eq!(SettingsStore::load(&last).unwrap(), store_with(1, 20));
        assert_eq!(
            named(dir.path(), ""),
            [path, last],
            "temp files left behind"
        );
    }

    #[test]
    fn a_damaged_file_never_replaces_the_last_good_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let last = last_good_path(&path);
        store_with(1, 10).save(&path).unwrap();
        store_with(1, 20).save(&path).unwrap();
        std::fs::write(&path, "{\"version\": 1, \"proc").unwrap();
        store_with(1, 30).save(&path).unwrap();
        assert_eq!(SettingsStore::load(&path).unwrap(), store_with(1, 30));
        assert_eq!(SettingsStore::load(&last).unwrap(), store_with(1, 10));
    }

    #[test]
    fn a_missing_file_is_a_quiet_first_start() {
        let dir = tempfile::tempdir().unwrap();
        let (loaded, lines) = recover(&dir.path().join("state.json"));
        let (store, from) = loaded.unwrap();
        assert!(store.is_empty());
        assert_eq!(from, LoadedFrom::Nothing);
        assert!(lines.is_empty(), "{lines:?}");
    }

    #[test]
    fn a_bad_file_is_moved_aside_and_the_last_good_one_is_used() {
        let good = store_with(1, 30).to_bytes();
        let bad: [(&str, &[u8]); 5] = [
            ("empty", b""),
            ("truncated", &good[..good.len() / 2]),
            ("not JSON", b"{ not json"),
            ("another version", br#"{"version": 99, "processes": []}"#),
            ("not UTF-8", b"{\"version\": 1, \"processes\": [\xff]}"),
        ];
        for (what, content) in bad {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("state.json");
            let last = last_good_path(&path);
            store_with(1, 20).save(&path).unwrap();
            store_with(1, 30).save(&path).unwrap();
            std::fs::write(&path, content).unwrap();
            let (loaded, lines) = recover(&path);
            let (store, from) = loaded.unwrap();
            assert_eq!(
                (&store, from),
                (&store_with(1, 20), LoadedFrom::LastGood),
                "{what}"
            );
            let aside = named(dir.path(), "state.json.corrupt-");
            assert_eq!(aside.len(), 1, "{what}: {aside:?}");
            assert_eq!(std::fs::read(&aside[0]).unwrap(), content);
            // One line names the bad file and where it went, one the fallback.
            assert!(
                lines[0].contains(&*path.to_string_lossy())
                    && lines[0].contains(&*aside[0].to_string_lossy()),
                "{what}: {lines:?}"
            );
            assert!(lines[1].contains(&*last.to_string_lossy()), "{lines:?}");
            // The fallback is copied back: the next start is a plain one,
            // even if nothing changes before it.
            let (again, lines) = recover(&path);
            assert_eq!(again.unwrap(), (store_with(1, 20), LoadedFrom::File));
            assert!(lines.is_empty(), "{lines:?}");
            // And the next save keeps the recovered state as the fallback.
            store_with(1, 40).save(&path).unwrap();
            assert_eq!(SettingsStore::load(&last).unwrap(), store_with(1, 20));
            assert_eq!(
                named(dir.path(), "").len(),
                3,
                "{:?}",
                named(dir.path(), "")
            );
        }
    }

    #[test]
    fn with_both_files_bad_the_daemon_starts_from_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let last = last_good_path(&path);
        std::fs::write(&path, "").unwrap();
        std::fs::write(&last, "[1, 2").unwrap();
        let (loaded, lines) = recover(&path);
        let (store, from) = loaded.unwrap();
        assert!(store.is_empty());
        assert_eq!(from, LoadedFrom::Defaults);
        assert!(!path.exists() && !last.exists());
        assert_eq!(named(dir.path(), "state.json.corrupt-").len(), 1);
        assert_eq!(named(dir.path(), "state.json.last-good.corrupt-").len(), 1);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[1].contains("default settings"), "{lines:?}");
        // A bad file without a fallback beside it: defaults, said so.
        std::fs::write(&path, "garbage").unwrap();
        let (loaded, lines) = recover(&path);
        assert_eq!(
            loaded.unwrap(),
            (SettingsStore::default(), LoadedFrom::Defaults)
        );
        assert!(lines[1].contains("default settings"), "{lines:?}");
        assert_eq!(named(dir.path(), "state.json.corrupt-").len(), 2);
    }

    #[test]
    fn corrupt_and_foreign_files_are_named_in_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, "{ not json").unwrap();
        let err = SettingsStore::load(&path).unwrap_err().to_string();
        assert!(err.contains("state.json") && err.contains("not a hetsched state file"));
        std::fs::write(&path, r#"{"version": 99, "processes": []}"#).unwrap();
        let err = SettingsStore::load(&path).unwrap_err().to_string();
        assert!(err.contains("version 99"), "{err}");
        assert!(
            SettingsStore::load(&dir.path().join("missing.json"))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn default_settings_are_not_stored() {
        let mut store = SettingsStore::default();
        let key = ProcessKey {
            pid: 1,
            start_time: 1,
        };
        store.set(key, "a", "gpu0", custom(20));
        store.set(key, "a", "gpu0", ClientSettings::default());
        assert!(store.is_empty());
    }

    #[test]
    fn dead_processes_are_dropped() {
        let mut store = SettingsStore::default();
        for pid in 1..=3 {
            store.set(ProcessKey { pid, start_time: 0 }, "p", "gpu0", custom(10));
        }
        assert!(store.retain_alive(|k| k.pid != 2));
        assert_eq!(store.len(), 2);
        assert!(!store.retain_alive(|_| true));
        let pids: Vec<u32> = store.keys().iter().map(|k| k.pid).collect();
        assert_eq!(pids, [1, 3]);
    }

    fn settings() -> impl Strategy<Value = ClientSettings> {
        let class = prop_oneof![
            any::<u32>().prop_map(|shares| ShareClass::Custom { shares }),
            any::<u32>().prop_map(|shares| ShareClass::Normal { shares }),
            Just(ShareClass::Background),
        ];
        (class, any::<i32>()).prop_map(|(class, priority)| ClientSettings { class, priority })
    }

    fn stores() -> impl Strategy<Value = SettingsStore> {
        let entry = (
            any::<u32>(),
            any::<u64>(),
            ".{0,8}",
            "[a-z0-9\"\\\\]{1,6}",
            settings(),
        );
        proptest::collection::vec(entry, 0..6).prop_map(|entries| {
            let mut store = SettingsStore::default();
            for (pid, start_time, name, unit, s) in entries {
                store.set(ProcessKey { pid, start_time }, &name, &unit, s);
            }
            store
        })
    }

    /// The property `fuzz/fuzz_targets/state_file.rs` checks: any bytes
    /// give a store or an error naming the file, never a panic, and an
    /// accepted store writes out and reads back the same.
    fn check_state_bytes(bytes: &[u8]) -> Result<(), TestCaseError> {
        let path = Path::new("fuzz/state.json");
        match SettingsStore::parse(path, bytes) {
            Ok(store) => {
                let again = SettingsStore::parse(path, &store.to_bytes());
                prop_assert_eq!(again.ok(), Some(store));
            }
            Err(e) => prop_assert!(e.to_string().contains("fuzz/state.json"), "{}", e),
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn any_bytes_parse_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            check_state_bytes(&bytes)?;
        }

        #[test]
        fn stores_round_trip_and_damaged_files_fail_cleanly(
            store in stores(),
            cut in any::<prop::sample::Index>(),
            flip in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let bytes = store.to_bytes();
            prop_assert_eq!(SettingsStore::parse(Path::new("s"), &bytes).ok(), Some(store));
            check_state_bytes(&bytes[..cut.index(bytes.len() + 1)])?;
            let mut flipped = bytes.clone();
            flipped[flip.index(bytes.len())] = byte;
            check_state_bytes(&flipped)?;
        }
    }
}

/// The config file's property, checked here beside the state file's (both
/// are what the daemon reads when it starts); `fuzz/fuzz_targets/
/// daemon_config.rs` checks the same on fuzzed input.
#[cfg(test)]
mod config_file_properties {
    use crate::config::DaemonConfig;
    use proptest::prelude::*;
    use std::path::Path;

    /// Any text gives a config or an error naming the file, never a
    /// panic; an accepted config's numbers are within the bounds the
    /// parser documents.
    fn check_config_text(text: &str) -> Result<(), TestCaseError> {
        match DaemonConfig::parse(Path::new("fuzz.toml"), text) {
            Ok(cfg) => {
                prop_assert!(cfg.max_outstanding >= 1);
                prop_assert!((1..=1000).contains(&cfg.tick_ms));
                prop_assert!(cfg.max_device_seconds > 0.0 && cfg.max_device_seconds.is_finite());
                prop_assert!((1.0..=2.0).contains(&cfg.coordination_floor));
                prop_assert!(cfg.cpu_scan_ms >= 1);
                prop_assert!(cfg.cpu_schedule_ms >= 1);
                let max_region = hetsched_views::data_region::MAX_REGION_BYTES >> 20;
                prop_assert!((1..=max_region).contains(&cfg.max_region_mb));
                prop_assert!(cfg.max_frame_bytes >= 1024);
                prop_assert!(!cfg.cpu_cgroups || cfg.include_cpus);
                for e in &cfg.emulated {
                    prop_assert!(e.validate().is_ok());
                }
            }
            Err(e) => prop_assert!(e.to_string().contains("fuzz.toml"), "{}", e),
        }
        Ok(())
    }

    /// A key of the config with a value of any type, in or out of range.
    fn line() -> impl Strategy<Value = String> {
        let key = prop::sample::select(vec![
            "max_outstanding",
            "max_frame_bytes",
            "max_device_seconds",
            "tick_ms",
            "cpu_scan_ms",
            "cpu_schedule_ms",
            "coordination_floor",
            "max_region_mb",
            "coordination",
            "cpu_cgroups",
            "include_cpus",
            "default_policy",
            "socket",
        ]);
        let value = prop_oneof![
            any::<i64>().prop_map(|v| v.to_string()),
            (0u64..2000).prop_map(|v| v.to_string()),
            any::<f64>().prop_map(|v| format!("{v:?}")),
            (0.0f64..3.0).prop_map(|v| format!("{v:?}")),
            Just("nan".to_string()),
            Just("-inf".to_string()),
            Just("true".to_string()),
            Just("\"pf\"".to_string()),
            Just("\"off\"".to_string()),
            Just("\"share\"".to_string()),
        ];
        (key, value).prop_map(|(k, v)| format!("{k} = {v}"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn config_text_parses_within_bounds_or_fails_cleanly(
            lines in proptest::collection::vec(line(), 0..6),
            junk in ".{0,40}",
        ) {
            check_config_text(&lines.join("\n"))?;
            check_config_text(&junk)?;
            check_config_text(&format!("{}\n{junk}", lines.join("\n")))?;
        }
    }
}
