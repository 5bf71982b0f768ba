//! Settings that outlive the daemon: every non-default setting of a
//! running process, keyed by (pid, start time) so that a process that
//! reconnects after a restart gets its shares back and a new process that
//! happens to reuse the pid does not. Written atomically (temp file,
//! fsync, rename) after every change.

use hetsched_core::policy::ClientSettings;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Layout revision of the state file.
const STORE_VERSION: u32 = 1;

/// One process, across daemon restarts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProcessKey {
    pub pid: u32,
    pub start_time: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct StoredProcess {
    #[serde(flatten)]
    key: ProcessKey,
    name: String,
    /// Unit name → settings.
    units: BTreeMap<String, ClientSettings>,
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
}

impl SettingsStore {
    /// Reads the state file; a missing file is an empty store.
    pub fn load(path: &Path) -> Result<SettingsStore, StoreError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(SettingsStore::default());
            }
            Err(source) => {
                return Err(StoreError::Read {
                    path: path.into(),
                    source,
                });
            }
        };
        let file: StoreFile = serde_json::from_str(&text).map_err(|source| StoreError::Parse {
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

    /// Writes the store so that a crash leaves either the old or the new
    /// file, never a torn one.
    pub fn save(&self, path: &Path) -> Result<(), StoreError> {
        let err = |source| StoreError::Write {
            path: path.into(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let file = StoreFile {
            version: STORE_VERSION,
            processes: self.processes.values().cloned().collect(),
        };
        let text = serde_json::to_string_pretty(&file).expect("state serialises");
        let tmp = path.with_extension("json.tmp");
        let mut f = std::fs::File::create(&tmp).map_err(err)?;
        f.write_all(text.as_bytes()).map_err(err)?;
        f.sync_all().map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)?;
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
        });
        if settings == ClientSettings::default() {
            entry.units.remove(unit);
        } else {
            entry.units.insert(unit.to_string(), settings);
        }
        if entry.units.is_empty() {
            self.processes.remove(&key);
        }
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

    fn custom(shares: u32) -> ClientSettings {
        ClientSettings {
            class: ShareClass::Custom { shares },
            priority: 0,
        }
    }

    #[test]
    fn saves_and_loads_atomically() {
        let dir = std::env::temp_dir().join(format!("hetsched-store-{}", std::process::id()));
        let path = dir.join("state.json");
        let mut store = SettingsStore::default();
        let key = ProcessKey {
            pid: 42,
            start_time: 7,
        };
        store.set(key, "app", "gpu0", custom(50));
        store.save(&path).unwrap();
        let back = SettingsStore::load(&path).unwrap();
        assert_eq!(back, store);
        assert_eq!(back.settings_of(key).unwrap()["gpu0"], custom(50));
        assert!(!path.with_extension("json.tmp").exists());
        std::fs::remove_dir_all(dir).unwrap();
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
    fn corrupt_and_foreign_files_are_named_in_errors() {
        let dir = std::env::temp_dir().join(format!("hetsched-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state.json");
        std::fs::write(&path, "{ not json").unwrap();
        let err = SettingsStore::load(&path).unwrap_err().to_string();
        assert!(err.contains("state.json") && err.contains("not a hetsched state file"));
        std::fs::write(&path, r#"{"version": 99, "processes": []}"#).unwrap();
        let err = SettingsStore::load(&path).unwrap_err().to_string();
        assert!(err.contains("version 99"), "{err}");
        assert!(
            SettingsStore::load(&dir.join("missing.json"))
                .unwrap()
                .is_empty()
        );
        std::fs::remove_dir_all(dir).unwrap();
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
    }
}
