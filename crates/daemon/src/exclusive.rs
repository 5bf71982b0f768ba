//! Exclusive ownership of the served devices (`exclusive_devices = true`,
//! off by default): while the daemon runs, other users' processes cannot
//! open the devices it serves, so they cannot go around its policies.
//!
//! * **NVIDIA** (with `cuda_units` and a served CUDA device): the device
//!   nodes `/dev/nvidia<N>`, `/dev/nvidiactl`, `/dev/nvidia-uvm` and
//!   `/dev/nvidia-uvm-tools` become the daemon's user's, mode 0600.
//!   Opening them is how every CUDA (and NVIDIA OpenCL) process reaches
//!   the GPU, so this is a lock the kernel enforces.
//! * **OpenCL** (with `opencl_units` and a served OpenCL device): the ICD
//!   loader finds platforms through the vendor files
//!   (`/etc/OpenCL/vendors/*.icd`, or the directory `$OCL_ICD_VENDORS`
//!   names for the daemon). They become the daemon's user's, mode 0600,
//!   so another user's loader lists no platform. This hides the devices
//!   rather than locking them: a process that names the vendor library
//!   itself (its own `.icd` file, `OCL_ICD_FILENAMES`) still loads it;
//!   what stops it then is the device's own nodes, if any.
//!
//! Neither reaches root or processes of the daemon's own user, nor a
//! process that had a device open before the daemon started.
//!
//! Every change is remembered with the file's owner, group and mode
//! before it, first in a record file next to the daemon's state file
//! (`exclusive.json`), then in an [`ExclusiveGuard`] that puts them back
//! when it is dropped or [`ExclusiveGuard::restore`]d. A daemon killed
//! before it could restore leaves the record; the next daemon takes its
//! originals as the ones to restore ([`take`]), or restores them at once
//! when it does not make devices exclusive ([`restore_leftover`]).
//!
//! Who may: changing the owner needs root. A daemon of another user
//! proceeds only when every file it would change is already its own (a
//! vendors directory it set up with `$OCL_ICD_VENDORS`); otherwise
//! [`take`] refuses, naming the file, and the daemon does not start.
//!
//! The decisions ([`is_nvidia_node`], [`is_icd_file`], [`plan`],
//! [`restore_step`], [`nvidia_modifies_device_files`]) are pure; [`take`],
//! [`ExclusiveGuard`] and [`restore_leftover`] are the file system side.

use crate::agent::UnitSetup;
use crate::config::DaemonConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The mode every exclusive file gets: read and write for its owner only.
pub const EXCLUSIVE_MODE: u32 = 0o600;
/// The ICD loader's vendors directory when `$OCL_ICD_VENDORS` names none.
pub const DEFAULT_VENDORS_DIR: &str = "/etc/OpenCL/vendors";
/// The NVIDIA kernel module's parameters.
pub const NVIDIA_PARAMS: &str = "/proc/driver/nvidia/params";
/// The record's file name, next to the daemon's state file.
pub const RECORD_NAME: &str = "exclusive.json";

/// Owner, group and permission bits of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ownership {
    pub uid: u32,
    pub gid: u32,
    /// Permission bits (`mode & 0o7777`).
    pub mode: u32,
}

impl Ownership {
    fn of(meta: &std::fs::Metadata) -> Ownership {
        Ownership {
            uid: meta.uid(),
            gid: meta.gid(),
            mode: meta.mode() & 0o7777,
        }
    }
}

impl std::fmt::Display for Ownership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "uid {} gid {} mode {:04o}",
            self.uid, self.gid, self.mode
        )
    }
}

/// What a file stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    NvidiaNode,
    IcdFile,
}

/// A file found to make exclusive, as it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub path: PathBuf,
    pub target: Target,
    pub now: Ownership,
}

/// One file to make exclusive: what it is now, what it becomes, and what
/// it goes back to (`before`: as found, or as an earlier daemon's record
/// says it was before that daemon changed it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub path: PathBuf,
    pub target: Target,
    pub now: Ownership,
    pub after: Ownership,
    pub before: Ownership,
}

/// Whether `name` (in `/dev`) is a node a CUDA process opens:
/// `nvidia<N>`, `nvidiactl`, `nvidia-uvm`, `nvidia-uvm-tools`.
pub fn is_nvidia_node(name: &str) -> bool {
    match name {
        "nvidiactl" | "nvidia-uvm" | "nvidia-uvm-tools" => true,
        _ => name
            .strip_prefix("nvidia")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
    }
}

/// Whether `name` (in a vendors directory) is an ICD file the loader reads.
pub fn is_icd_file(name: &str) -> bool {
    name.len() > ".icd".len() && name.ends_with(".icd")
}

/// What to change so that only uid `owner` may open the `found` files,
/// each going back to its state in `earlier` (an earlier daemon's record)
/// where that has it, else to the state found. Files already exclusive
/// with nothing earlier to restore are left out. Refuses the first file a
/// daemon that is not root could not take (owned by another user).
pub fn plan(
    found: &[Found],
    owner: u32,
    earlier: &BTreeMap<PathBuf, Ownership>,
) -> Result<Vec<Change>, ExclusiveError> {
    let mut out = Vec::new();
    for f in found {
        let after = Ownership {
            uid: owner,
            gid: f.now.gid,
            mode: EXCLUSIVE_MODE,
        };
        let before = earlier.get(&f.path).copied().unwrap_or(f.now);
        if before == after {
            continue;
        }
        if owner != 0 && f.now.uid != owner {
            return Err(ExclusiveError::NotOwner {
                path: f.path.clone(),
                file_uid: f.now.uid,
                daemon_uid: owner,
            });
        }
        out.push(Change {
            path: f.path.clone(),
            target: f.target,
            now: f.now,
            after,
            before,
        });
    }
    Ok(out)
}

/// What restoring one change does, given the file's state now (`None`:
/// it is gone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreStep {
    /// Put `before` back.
    Restore,
    /// Already as it was: nothing to do.
    AsBefore,
    /// Gone (a module unloaded, a package removed): nothing to do.
    Gone,
    /// Someone changed it since the daemon did (an administrator, the
    /// NVIDIA driver's `nvidia-modprobe`): theirs stands.
    ChangedSince(Ownership),
}

/// The step restoring `change` takes when the file is `now`.
pub fn restore_step(change: &Change, now: Option<Ownership>) -> RestoreStep {
    match now {
        None => RestoreStep::Gone,
        Some(n) if n == change.before => RestoreStep::AsBefore,
        Some(n) if n == change.after => RestoreStep::Restore,
        Some(n) => RestoreStep::ChangedSince(n),
    }
}

/// Whether the NVIDIA module's parameters (`/proc/driver/nvidia/params`)
/// say the driver fixes the device nodes' owner and mode itself
/// (`ModifyDeviceFiles: 1`, the default): then any CUDA process start
/// may run `nvidia-modprobe`, which puts the nodes back to
/// `DeviceFileUID`/`GID`/`Mode`.
pub fn nvidia_modifies_device_files(params: &str) -> bool {
    params.lines().any(|line| {
        line.split_once(':').is_some_and(|(key, value)| {
            matches!(key.trim(), "ModifyDeviceFiles" | "NVreg_ModifyDeviceFiles")
                && value.trim() != "0"
        })
    })
}

#[derive(Debug, thiserror::Error)]
pub enum ExclusiveError {
    #[error(
        "exclusive_devices = true, but the daemon runs as uid {daemon_uid} and {path} belongs \
         to uid {file_uid}: only root can take it (run the daemon as root, or set \
         exclusive_devices = false)",
        path = path.display()
    )]
    NotOwner {
        path: PathBuf,
        file_uid: u32,
        daemon_uid: u32,
    },
    #[error("exclusive_devices: cannot {action} {path}: {source}", path = path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error(
        "exclusive_devices: the record of files to restore, {path}, is unreadable ({message}); \
         check the modes of /dev/nvidia* and the OpenCL vendor files, then remove it",
        path = path.display()
    )]
    BadRecord { path: PathBuf, message: String },
}

/// Where the files and the record are: the system's, or a test's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Places {
    /// Where the NVIDIA nodes are (`/dev`).
    pub dev_dir: PathBuf,
    /// The ICD loader's vendors directory.
    pub vendors_dir: PathBuf,
    /// The NVIDIA module's parameters (`/proc/driver/nvidia/params`).
    pub nvidia_params: PathBuf,
    /// The record of the changes not yet restored.
    pub record: PathBuf,
}

impl Places {
    /// The system's places, with the record next to `state_path` (the
    /// daemon's state file). The vendors directory is `$OCL_ICD_VENDORS`
    /// when that names a directory (as the ICD loader reads it), else
    /// `/etc/OpenCL/vendors`.
    pub fn system(state_path: &Path) -> Places {
        let vendors_dir = std::env::var_os("OCL_ICD_VENDORS")
            .map(PathBuf::from)
            .filter(|p| p.is_dir())
            .unwrap_or_else(|| PathBuf::from(DEFAULT_VENDORS_DIR));
        Places {
            dev_dir: PathBuf::from("/dev"),
            vendors_dir,
            nvidia_params: PathBuf::from(NVIDIA_PARAMS),
            record: state_path.with_file_name(RECORD_NAME),
        }
    }
}

/// Which device APIs the daemon actually serves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Serves {
    pub cuda: bool,
    pub opencl: bool,
}

impl Serves {
    /// From the config and the units `launch::prepare` made: an API
    /// counts when it is configured and at least one device of it is
    /// served (`served-cuda<N>`, `served-opencl<N>`).
    pub fn of(cfg: &DaemonConfig, units: &[UnitSetup]) -> Serves {
        let served = |prefix: &str| {
            units
                .iter()
                .any(|u| !u.kernels.is_empty() && u.unit.name.starts_with(prefix))
        };
        Serves {
            cuda: cfg.cuda_units && served("served-cuda"),
            opencl: cfg.opencl_units && served("served-opencl"),
        }
    }
}

/// Holds the changes made; dropping it (or [`ExclusiveGuard::restore`])
/// puts every file back.
#[derive(Debug)]
pub struct ExclusiveGuard {
    changes: Vec<Change>,
    record: PathBuf,
}

impl ExclusiveGuard {
    /// The changes in force.
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// Puts every file back as it was (newest change first), says what it
    /// did through `log`, and removes the record; a file it could not put
    /// back stays in the record for the next daemon. Doing it twice does
    /// nothing the second time.
    pub fn restore(&mut self, log: &mut dyn FnMut(String)) {
        if self.changes.is_empty() {
            return;
        }
        let changes = std::mem::take(&mut self.changes);
        let failed = restore_all(&changes, log);
        settle_record(&self.record, &failed, log);
    }
}

impl Drop for ExclusiveGuard {
    fn drop(&mut self) {
        self.restore(&mut |line| tracing::info!("{line}"));
    }
}

/// Makes the devices the daemon serves exclusive to its user (the
/// effective uid), remembering how to undo it. Logs one line per file
/// changed, one per API it leaves alone, and a warning where the NVIDIA
/// driver would undo it.
pub fn take(
    places: &Places,
    serves: Serves,
    log: &mut dyn FnMut(String),
) -> Result<ExclusiveGuard, ExclusiveError> {
    take_as(places, serves, rustix::process::geteuid().as_raw(), log)
}

/// [`take`] for the user `owner`.
pub fn take_as(
    places: &Places,
    serves: Serves,
    owner: u32,
    log: &mut dyn FnMut(String),
) -> Result<ExclusiveGuard, ExclusiveError> {
    let earlier = read_record(&places.record)?;
    let mut found = Vec::new();
    if !serves.cuda && !serves.opencl {
        log(
            "exclusive_devices = true, but the daemon serves no CUDA or OpenCL device: \
             nothing to make exclusive"
                .into(),
        );
    } else if !serves.cuda {
        log(
            "exclusive_devices: no CUDA device is served, so the NVIDIA device nodes are \
             left as they are"
                .into(),
        );
    } else if !serves.opencl {
        log(
            "exclusive_devices: no OpenCL device is served, so the OpenCL vendor files are \
             left as they are"
                .into(),
        );
    }
    if serves.cuda {
        let nodes = scan(&places.dev_dir, Target::NvidiaNode)?;
        if nodes.is_empty() {
            log(format!(
                "exclusive_devices: no NVIDIA device node in {}",
                places.dev_dir.display()
            ));
        }
        found.extend(nodes);
    }
    if serves.opencl {
        let files = scan(&places.vendors_dir, Target::IcdFile)?;
        if files.is_empty() {
            log(format!(
                "exclusive_devices: no OpenCL vendor file in {}",
                places.vendors_dir.display()
            ));
        }
        found.extend(files);
    }
    let changes = plan(&found, owner, &earlier)?;
    // What an earlier daemon changed that this one does not keep goes
    // back now.
    let leftover: Vec<Change> = earlier
        .iter()
        .filter(|(path, _)| !changes.iter().any(|c| &c.path == *path))
        .filter_map(|(path, before)| leftover_change(path, *before))
        .collect();
    // Those it could not put back are tried again when the daemon stops.
    let stuck = restore_all(&leftover, log);
    let mut pending = stuck.clone();
    pending.extend(changes.iter().cloned());
    if pending.is_empty() {
        settle_record(&places.record, &[], log);
    } else {
        // Written before anything changes, so a daemon killed at any
        // point leaves the originals behind.
        write_record(&places.record, &pending).map_err(|source| ExclusiveError::Io {
            action: "write",
            path: places.record.clone(),
            source,
        })?;
    }
    let mut guard = ExclusiveGuard {
        changes: stuck,
        record: places.record.clone(),
    };
    for change in changes {
        // On an error the guard, dropped, puts back what was done.
        apply(&change)?;
        if change.now == change.after {
            log(format!(
                "exclusive_devices: {} is already exclusive (left so by an earlier daemon); \
                 back to {} when the daemon stops",
                change.path.display(),
                change.before
            ));
        } else {
            log(format!(
                "exclusive_devices: {} was {}, now {} until the daemon stops",
                change.path.display(),
                change.now,
                change.after
            ));
        }
        guard.changes.push(change);
    }
    let nvidia_changed = guard.changes.iter().any(|c| c.target == Target::NvidiaNode);
    if nvidia_changed {
        if let Ok(params) = std::fs::read_to_string(&places.nvidia_params) {
            if nvidia_modifies_device_files(&params) {
                log(format!(
                    "exclusive_devices: warning: {} says ModifyDeviceFiles: 1, so the NVIDIA \
                     driver (nvidia-modprobe) may put the nodes back to its own mode when any \
                     CUDA process starts; set `options nvidia NVreg_ModifyDeviceFiles=0` in \
                     /etc/modprobe.d and reload the module to keep them exclusive",
                    places.nvidia_params.display()
                ));
            }
        }
    }
    Ok(guard)
}

/// Restores what a record left by an earlier daemon lists (a daemon that
/// was killed while its devices were exclusive), when this one does not
/// make devices exclusive. Nothing happens without a record.
pub fn restore_leftover(record: &Path, log: &mut dyn FnMut(String)) {
    let earlier = match read_record(record) {
        Ok(e) => e,
        Err(e) => {
            log(e.to_string());
            return;
        }
    };
    if earlier.is_empty() {
        return;
    }
    let leftover: Vec<Change> = earlier
        .iter()
        .filter_map(|(path, before)| leftover_change(path, *before))
        .collect();
    let failed = restore_all(&leftover, log);
    settle_record(record, &failed, log);
}

/// A recorded file to put back to `before`, as the change an earlier
/// daemon made (its exclusive state taken from the file now); `None`
/// when the file is gone.
fn leftover_change(path: &Path, before: Ownership) -> Option<Change> {
    let now = Ownership::of(&std::fs::metadata(path).ok()?);
    let target = if path.extension().is_some_and(|e| e == "icd") {
        Target::IcdFile
    } else {
        Target::NvidiaNode
    };
    Some(Change {
        path: path.to_path_buf(),
        target,
        now,
        // Whatever it is now is what that daemon left, as long as it is
        // exclusive; anything else someone else set since.
        after: if now.mode == EXCLUSIVE_MODE {
            now
        } else {
            Ownership {
                mode: EXCLUSIVE_MODE,
                ..now
            }
        },
        before,
    })
}

/// The files in `dir` that stand for `target`, sorted by path. A missing
/// directory has none.
fn scan(dir: &Path, target: Target) -> Result<Vec<Found>, ExclusiveError> {
    let io_err = |source| ExclusiveError::Io {
        action: "list",
        path: dir.to_path_buf(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let wanted = match target {
            Target::NvidiaNode => is_nvidia_node(name),
            Target::IcdFile => is_icd_file(name),
        };
        if !wanted {
            continue;
        }
        let path = entry.path();
        // Through a symbolic link: what the loader or a process opens.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            continue;
        }
        out.push(Found {
            path,
            target,
            now: Ownership::of(&meta),
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn apply(change: &Change) -> Result<(), ExclusiveError> {
    let io_err = |action, source| ExclusiveError::Io {
        action,
        path: change.path.clone(),
        source,
    };
    if change.now.uid != change.after.uid {
        std::os::unix::fs::chown(&change.path, Some(change.after.uid), None)
            .map_err(|e| io_err("change the owner of", e))?;
    }
    if change.now.mode != change.after.mode {
        std::fs::set_permissions(
            &change.path,
            std::fs::Permissions::from_mode(change.after.mode),
        )
        .map_err(|e| io_err("change the mode of", e))?;
    }
    Ok(())
}

/// Restores `changes` newest first; returns those it could not.
fn restore_all(changes: &[Change], log: &mut dyn FnMut(String)) -> Vec<Change> {
    let mut failed = Vec::new();
    for change in changes.iter().rev() {
        let now = std::fs::metadata(&change.path)
            .ok()
            .map(|m| Ownership::of(&m));
        let path = change.path.display();
        match restore_step(change, now) {
            RestoreStep::Restore => match put_back(&change.path, change.before) {
                Ok(()) => log(format!(
                    "exclusive_devices: {path} is back to {}",
                    change.before
                )),
                Err(e) => {
                    log(format!(
                        "exclusive_devices: cannot put {path} back to {}: {e}",
                        change.before
                    ));
                    failed.push(change.clone());
                }
            },
            RestoreStep::AsBefore | RestoreStep::Gone => {}
            RestoreStep::ChangedSince(n) => log(format!(
                "exclusive_devices: {path} was changed to {n} since the daemon made it \
                 exclusive; left as it is"
            )),
        }
    }
    failed
}

fn put_back(path: &Path, before: Ownership) -> io::Result<()> {
    std::os::unix::fs::chown(path, Some(before.uid), Some(before.gid))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(before.mode))
}

#[derive(Serialize, Deserialize)]
struct Record {
    files: Vec<RecordedFile>,
}

#[derive(Serialize, Deserialize)]
struct RecordedFile {
    path: PathBuf,
    before: Ownership,
}

/// The originals an earlier daemon recorded; none without a record.
fn read_record(path: &Path) -> Result<BTreeMap<PathBuf, Ownership>, ExclusiveError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => {
            return Err(ExclusiveError::BadRecord {
                path: path.into(),
                message: e.to_string(),
            });
        }
    };
    let record: Record = serde_json::from_str(&text).map_err(|e| ExclusiveError::BadRecord {
        path: path.into(),
        message: e.to_string(),
    })?;
    Ok(record
        .files
        .into_iter()
        .map(|f| (f.path, f.before))
        .collect())
}

/// Leaves the record listing exactly `pending` (none: no record).
fn settle_record(path: &Path, pending: &[Change], log: &mut dyn FnMut(String)) {
    let result = if pending.is_empty() {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    } else {
        write_record(path, pending)
    };
    if let Err(e) = result {
        log(format!(
            "exclusive_devices: cannot update the record {}: {e}",
            path.display()
        ));
    }
}

fn write_record(path: &Path, pending: &[Change]) -> io::Result<()> {
    let record = Record {
        files: pending
            .iter()
            .map(|c| RecordedFile {
                path: c.path.clone(),
                before: c.before,
            })
            .collect(),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&record)?)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A temp dir with `dev/` and `vendors/` of regular files standing for
    /// the nodes and the ICD files.
    struct Fixture {
        _dir: tempfile::TempDir,
        places: Places,
    }

    impl Fixture {
        fn new() -> Fixture {
            let dir = tempfile::tempdir().unwrap();
            let places = Places {
                dev_dir: dir.path().join("dev"),
                vendors_dir: dir.path().join("vendors"),
                nvidia_params: dir.path().join("params"),
                record: dir.path().join("state").join(RECORD_NAME),
            };
            fs::create_dir(&places.dev_dir).unwrap();
            fs::create_dir(&places.vendors_dir).unwrap();
            for name in [
                "nvidia0",
                "nvidia1",
                "nvidia12",
                "nvidiactl",
                "nvidia-uvm",
                "nvidia-uvm-tools",
                "nvidia-modeset",
                "nvidiafoo",
                "nvidia",
                "null",
            ] {
                let p = places.dev_dir.join(name);
                fs::write(&p, "").unwrap();
                chmod(&p, 0o666);
            }
            fs::create_dir(places.dev_dir.join("nvidia-caps")).unwrap();
            for name in ["pocl.icd", "nvidia.icd", "README", "old.icd.bak"] {
                let p = places.vendors_dir.join(name);
                fs::write(&p, "libfoo.so\n").unwrap();
                chmod(&p, 0o644);
            }
            Fixture { _dir: dir, places }
        }

        fn dev(&self, name: &str) -> PathBuf {
            self.places.dev_dir.join(name)
        }

        fn icd(&self, name: &str) -> PathBuf {
            self.places.vendors_dir.join(name)
        }

        fn me() -> u32 {
            rustix::process::geteuid().as_raw()
        }

        fn take(&self, serves: Serves) -> (ExclusiveGuard, Vec<String>) {
            let mut lines = Vec::new();
            let guard = take_as(&self.places, serves, Self::me(), &mut |l| lines.push(l)).unwrap();
            (guard, lines)
        }
    }

    const BOTH: Serves = Serves {
        cuda: true,
        opencl: true,
    };

    #[test]
    fn names_of_nodes_and_icd_files() {
        for yes in [
            "nvidia0",
            "nvidia7",
            "nvidia15",
            "nvidiactl",
            "nvidia-uvm",
            "nvidia-uvm-tools",
        ] {
            assert!(is_nvidia_node(yes), "{yes}");
        }
        for no in [
            "nvidia",
            "nvidia-modeset",
            "nvidia-caps",
            "nvidia0a",
            "nvidiactl2",
            "nvme0",
            "dri",
        ] {
            assert!(!is_nvidia_node(no), "{no}");
        }
        assert!(is_icd_file("pocl.icd") && is_icd_file("nvidia.icd"));
        assert!(!is_icd_file(".icd") && !is_icd_file("a.icd.bak") && !is_icd_file("icd"));
    }

    #[test]
    fn the_plan_lists_exactly_the_nvidia_nodes_and_icd_files() {
        let f = Fixture::new();
        let mut found = scan(&f.places.dev_dir, Target::NvidiaNode).unwrap();
        found.extend(scan(&f.places.vendors_dir, Target::IcdFile).unwrap());
        let changes = plan(&found, Fixture::me(), &BTreeMap::new()).unwrap();
        let paths: Vec<PathBuf> = changes.iter().map(|c| c.path.clone()).collect();
        let mut want: Vec<PathBuf> = [
            "nvidia-uvm",
            "nvidia-uvm-tools",
            "nvidia0",
            "nvidia1",
            "nvidia12",
            "nvidiactl",
        ]
        .iter()
        .map(|n| f.dev(n))
        .collect();
        want.extend([f.icd("nvidia.icd"), f.icd("pocl.icd")]);
        assert_eq!(paths, want);
        for c in &changes {
            assert_eq!(c.after.mode, EXCLUSIVE_MODE);
            assert_eq!(c.after.uid, Fixture::me());
            assert_eq!(c.after.gid, c.now.gid, "the group is kept");
            assert_eq!(c.before, c.now);
        }
        let nodes = changes
            .iter()
            .filter(|c| c.target == Target::NvidiaNode)
            .count();
        assert_eq!(nodes, 6);
    }

    #[test]
    fn taking_sets_0600_and_dropping_the_guard_restores_the_modes() {
        let f = Fixture::new();
        chmod(&f.dev("nvidia1"), 0o660);
        let (guard, lines) = f.take(BOTH);
        assert_eq!(guard.changes().len(), 8);
        for n in ["nvidia0", "nvidia1", "nvidia12", "nvidiactl", "nvidia-uvm"] {
            assert_eq!(mode(&f.dev(n)), 0o600, "{n}");
        }
        assert_eq!(mode(&f.icd("pocl.icd")), 0o600);
        assert_eq!(mode(&f.icd("nvidia.icd")), 0o600);
        // Not theirs to change.
        assert_eq!(mode(&f.dev("nvidia-modeset")), 0o666);
        assert_eq!(mode(&f.dev("null")), 0o666);
        assert_eq!(mode(&f.icd("README")), 0o644);
        assert_eq!(mode(&f.icd("old.icd.bak")), 0o644);
        // One line per file changed, none of them a complaint.
        let changed = lines.iter().filter(|l| l.contains(" now ")).count();
        assert_eq!(changed, 8, "{lines:#?}");
        assert!(f.places.record.exists(), "the originals are on disk");
        drop(guard);
        assert_eq!(mode(&f.dev("nvidia0")), 0o666);
        assert_eq!(mode(&f.dev("nvidia1")), 0o660);
        assert_eq!(mode(&f.dev("nvidia-uvm-tools")), 0o666);
        assert_eq!(mode(&f.icd("pocl.icd")), 0o644);
        assert!(!f.places.record.exists(), "nothing left to restore");
    }

    #[test]
    fn restore_is_done_once_and_the_guard_drop_after_it_changes_nothing() {
        let f = Fixture::new();
        let (mut guard, _) = f.take(BOTH);
        let mut lines = Vec::new();
        guard.restore(&mut |l| lines.push(l));
        assert_eq!(mode(&f.dev("nvidia0")), 0o666);
        assert_eq!(lines.len(), 8, "{lines:#?}");
        // An administrator makes it private after the daemon let go.
        chmod(&f.dev("nvidia0"), 0o640);
        guard.restore(&mut |l| panic!("restored twice: {l}"));
        drop(guard);
        assert_eq!(mode(&f.dev("nvidia0")), 0o640);
    }

    #[test]
    fn only_the_served_apis_are_touched() {
        let f = Fixture::new();
        let (guard, lines) = f.take(Serves {
            cuda: false,
            opencl: true,
        });
        assert_eq!(mode(&f.dev("nvidia0")), 0o666);
        assert_eq!(mode(&f.icd("pocl.icd")), 0o600);
        assert!(
            lines.iter().any(|l| l.contains("no CUDA device is served")),
            "{lines:#?}"
        );
        drop(guard);
        let (guard, lines) = f.take(Serves::default());
        assert!(guard.changes().is_empty());
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(lines[0].contains("nothing to make exclusive"), "{lines:#?}");
        assert_eq!(mode(&f.icd("pocl.icd")), 0o644);
    }

    #[test]
    fn missing_directories_are_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let places = Places {
            dev_dir: dir.path().join("no-dev"),
            vendors_dir: dir.path().join("no-vendors"),
            nvidia_params: dir.path().join("no-params"),
            record: dir.path().join(RECORD_NAME),
        };
        let mut lines = Vec::new();
        let guard = take_as(&places, BOTH, Fixture::me(), &mut |l| lines.push(l)).unwrap();
        assert!(guard.changes().is_empty());
        assert!(lines.iter().any(|l| l.contains("no NVIDIA device node")));
        assert!(lines.iter().any(|l| l.contains("no OpenCL vendor file")));
        assert!(!places.record.exists());
    }

    #[test]
    fn a_daemon_that_is_not_root_takes_only_its_own_files() {
        let owned = |uid| Found {
            path: PathBuf::from("/dev/nvidia0"),
            target: Target::NvidiaNode,
            now: Ownership {
                uid,
                gid: 0,
                mode: 0o666,
            },
        };
        let err = plan(&[owned(0)], 1000, &BTreeMap::new()).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("exclusive_devices = true")
                && text.contains("uid 1000")
                && text.contains("/dev/nvidia0")
                && text.contains("root"),
            "{text}"
        );
        assert_eq!(
            plan(&[owned(1000)], 1000, &BTreeMap::new()).unwrap().len(),
            1
        );
        assert_eq!(plan(&[owned(1000)], 0, &BTreeMap::new()).unwrap().len(), 1);
        // Already exclusive to this user, nothing earlier: nothing to do,
        // so nothing to refuse either.
        let done = Found {
            now: Ownership {
                uid: 1000,
                gid: 0,
                mode: 0o600,
            },
            ..owned(0)
        };
        assert!(plan(&[done], 1000, &BTreeMap::new()).unwrap().is_empty());
    }

    #[test]
    fn a_record_left_by_a_killed_daemon_gives_the_originals() {
        let f = Fixture::new();
        let (guard, _) = f.take(BOTH);
        // The daemon is killed: nothing restores.
        std::mem::forget(guard);
        assert_eq!(mode(&f.dev("nvidia0")), 0o600);
        // The next daemon finds them exclusive, but restores the originals.
        let (guard, lines) = f.take(BOTH);
        assert_eq!(guard.changes().len(), 8);
        assert!(
            lines.iter().any(|l| l.contains("earlier daemon")),
            "{lines:#?}"
        );
        drop(guard);
        assert_eq!(mode(&f.dev("nvidia0")), 0o666);
        assert_eq!(mode(&f.icd("pocl.icd")), 0o644);
        assert!(!f.places.record.exists());
    }

    #[test]
    fn a_leftover_record_is_restored_when_exclusivity_is_off_or_narrower() {
        let f = Fixture::new();
        std::mem::forget(f.take(BOTH).0);
        // Next start serves CUDA only: the ICD files go back at once.
        let (guard, _) = f.take(Serves {
            cuda: true,
            opencl: false,
        });
        assert_eq!(mode(&f.icd("pocl.icd")), 0o644);
        assert_eq!(mode(&f.dev("nvidia0")), 0o600);
        std::mem::forget(guard);
        // Next start has exclusive_devices = false.
        let mut lines = Vec::new();
        restore_leftover(&f.places.record, &mut |l| lines.push(l));
        assert_eq!(mode(&f.dev("nvidia0")), 0o666);
        assert_eq!(mode(&f.dev("nvidiactl")), 0o666);
        assert_eq!(lines.len(), 6, "{lines:#?}");
        assert!(!f.places.record.exists());
        restore_leftover(&f.places.record, &mut |l| panic!("no record, yet: {l}"));
    }

    #[test]
    fn a_file_changed_by_someone_else_meanwhile_is_left_alone() {
        let f = Fixture::new();
        let (guard, _) = f.take(BOTH);
        chmod(&f.dev("nvidia0"), 0o660);
        fs::remove_file(f.dev("nvidia1")).unwrap();
        drop(guard);
        assert_eq!(mode(&f.dev("nvidia0")), 0o660);
        assert!(!f.dev("nvidia1").exists());
        assert_eq!(mode(&f.dev("nvidia12")), 0o666);
        let change = Change {
            path: f.dev("x"),
            target: Target::NvidiaNode,
            now: own(0o666),
            after: own(0o600),
            before: own(0o666),
        };
        assert_eq!(restore_step(&change, None), RestoreStep::Gone);
        assert_eq!(
            restore_step(&change, Some(own(0o600))),
            RestoreStep::Restore
        );
        assert_eq!(
            restore_step(&change, Some(own(0o666))),
            RestoreStep::AsBefore
        );
        assert_eq!(
            restore_step(&change, Some(own(0o640))),
            RestoreStep::ChangedSince(own(0o640))
        );
    }

    fn own(mode: u32) -> Ownership {
        Ownership {
            uid: 0,
            gid: 0,
            mode,
        }
    }

    #[test]
    fn a_broken_record_stops_the_daemon_with_its_name() {
        let f = Fixture::new();
        fs::create_dir_all(f.places.record.parent().unwrap()).unwrap();
        fs::write(&f.places.record, "{ not json").unwrap();
        let err = take_as(&f.places, BOTH, Fixture::me(), &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains(RECORD_NAME), "{err}");
        assert_eq!(mode(&f.dev("nvidia0")), 0o666, "nothing changed");
    }

    #[test]
    fn the_driver_that_resets_node_modes_is_recognised() {
        assert!(nvidia_modifies_device_files(
            "EnableMSI: 1\nModifyDeviceFiles: 1\nDeviceFileMode: 438\n"
        ));
        assert!(nvidia_modifies_device_files("NVreg_ModifyDeviceFiles: 1\n"));
        assert!(!nvidia_modifies_device_files("ModifyDeviceFiles: 0\n"));
        assert!(!nvidia_modifies_device_files("DeviceFileMode: 438\n"));
        let f = Fixture::new();
        fs::write(&f.places.nvidia_params, "ModifyDeviceFiles: 1\n").unwrap();
        let (_guard, lines) = f.take(Serves {
            cuda: true,
            opencl: false,
        });
        let warnings: Vec<_> = lines.iter().filter(|l| l.contains("warning")).collect();
        assert_eq!(warnings.len(), 1, "{lines:#?}");
        assert!(warnings[0].contains("NVreg_ModifyDeviceFiles=0"));
        let (_guard2, lines) = f.take(Serves {
            cuda: false,
            opencl: true,
        });
        assert!(!lines.iter().any(|l| l.contains("warning")), "{lines:#?}");
    }
}
