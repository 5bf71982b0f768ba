//! What `hetsched run` adds to a program's environment so that its OpenCL
//! and CUDA calls go through the daemon's agents: the OpenCL layer in
//! `OPENCL_LAYERS` (the ICD loader loads it) and the CUDA interposer in
//! `LD_PRELOAD`. Both are inherited by the program's children.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The OpenCL layer's file name.
pub const OPENCL_LAYER: &str = hetsched_opencl_layer::LIBRARY_FILE;
/// The CUDA interposer's file name.
pub const CUDA_INTERPOSER: &str = "libhetsched_cuda_intercept.so";

/// Where the interposers may be: `$HETSCHED_LIB_DIR`, a build tree's
/// `deps/` (where cargo leaves a dependency's library), the installed
/// `lib/hetsched` beside `bin`, and next to the binary.
fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("HETSCHED_LIB_DIR") {
        dirs.push(PathBuf::from(d));
    }
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        dirs.push(exe_dir.join("deps"));
        if let Some(prefix) = exe_dir.parent() {
            dirs.push(prefix.join("lib/hetsched"));
        }
        dirs.push(exe_dir);
    }
    dirs
}

/// The first `file` in the search directories.
pub fn find(file: &str) -> Option<PathBuf> {
    search_dirs()
        .into_iter()
        .map(|d| d.join(file))
        .find(|p| p.is_file())
}

/// `value` with `path` in front, `sep`-separated (an existing list kept).
fn prepend(existing: Option<OsString>, path: &Path, sep: &str) -> OsString {
    let mut out = OsString::from(path);
    if let Some(old) = existing.filter(|o| !o.is_empty()) {
        out.push(sep);
        out.push(old);
    }
    out
}

/// Puts the interposers that are installed into `cmd`'s environment; says
/// once on stderr if the OpenCL layer is missing.
pub fn add_interposers(cmd: &mut Command) {
    match find(OPENCL_LAYER) {
        Some(layer) => {
            cmd.env(
                "OPENCL_LAYERS",
                prepend(std::env::var_os("OPENCL_LAYERS"), &layer, ":"),
            );
        }
        None => eprintln!(
            "hetsched: {OPENCL_LAYER} not found (looked in {}); the program's OpenCL calls are not governed",
            search_dirs()
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
    if let Some(cuda) = find(CUDA_INTERPOSER) {
        cmd.env(
            "LD_PRELOAD",
            prepend(std::env::var_os("LD_PRELOAD"), &cuda, ":"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_list_is_kept_after_ours() {
        let ours = Path::new("/x/libours.so");
        assert_eq!(prepend(None, ours, ":"), OsString::from("/x/libours.so"));
        assert_eq!(
            prepend(Some("/y/other.so".into()), ours, ":"),
            OsString::from("/x/libours.so:/y/other.so")
        );
    }
}
