//! Task models saved across runs (Rinnegan §3.2: a model "is saved for use
//! across program invocations"), one JSON file per application.
//!
//! The file records the unit kinds the models were learned on: a model is
//! indexed by kind, so a file from a machine (or monitor config) with other
//! kinds is set aside and the tasks are profiled again. A file that cannot
//! be read, parsed, or has another format version gives a warning and a
//! fresh start, never an error: the models are a cache.

use hetsched_core::task_model::{MODEL_FORMAT_VERSION, ModelSet};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What is on disk.
#[derive(Debug, Serialize, Deserialize)]
struct ModelFile {
    format: u32,
    /// Unit kind names, in `KindId` order.
    kinds: Vec<String>,
    models: ModelSet,
}

/// The result of loading: the models (possibly empty) and, if the file
/// was not usable, why.
#[derive(Debug, Default)]
pub struct Loaded {
    pub models: ModelSet,
    pub warning: Option<String>,
}

/// The model file of application `app` in `dir`. The name is made safe
/// for a file name (anything but letters, digits, `-`, `_` and `.` becomes `_`).
pub fn model_path(dir: &Path, app: &str) -> PathBuf {
    let safe: String = app
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let safe = if safe.is_empty() || safe.starts_with('.') {
        format!("app{safe}")
    } else {
        safe
    };
    dir.join(format!("{safe}.json"))
}

/// Loads the models at `path` learned on `kinds`.
pub fn load(path: &Path, kinds: &[String]) -> Loaded {
    match std::fs::read(path) {
        Ok(bytes) => parse(path, &bytes, kinds),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Loaded::default(),
        Err(e) => warn(path, format!("cannot read it ({e})")),
    }
}

/// Decodes a model file's bytes (`path` only names it in warnings). Any
/// input gives models or a warning; this is the fuzz target's entry point.
pub fn parse(path: &Path, bytes: &[u8], kinds: &[String]) -> Loaded {
    let file: ModelFile = match serde_json::from_slice(bytes) {
        Ok(f) => f,
        Err(e) => return warn(path, format!("it is corrupt ({e})")),
    };
    if file.format != MODEL_FORMAT_VERSION || file.models.check_version().is_err() {
        return warn(
            path,
            format!(
                "it has format {} (this runtime writes {MODEL_FORMAT_VERSION})",
                file.format
            ),
        );
    }
    if file.kinds != kinds {
        return warn(
            path,
            format!(
                "it was learned on unit kinds [{}], these are [{}]",
                file.kinds.join(", "),
                kinds.join(", ")
            ),
        );
    }
    Loaded {
        models: file.models,
        warning: None,
    }
}

fn warn(path: &Path, why: String) -> Loaded {
    Loaded {
        models: ModelSet::new(),
        warning: Some(format!(
            "ignoring task models in {}: {why}; tasks will be profiled again",
            path.display()
        )),
    }
}

/// Writes the models atomically: a temporary file in the same directory,
/// flushed, then renamed over the old one, so a crash mid-write leaves the
/// old file or the new one, never half of one.
pub fn save(path: &Path, kinds: &[String], models: &ModelSet) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let file = ModelFile {
        format: MODEL_FORMAT_VERSION,
        kinds: kinds.to_vec(),
        models: models.clone(),
    };
    let json = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(&json)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
