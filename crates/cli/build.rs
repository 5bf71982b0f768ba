//! Sets `HETSCHED_VERSION_LONG` for `hetsched --version`: the workspace
//! version, then the commit it was built from when that is known.
//!
//! The commit comes from `$HETSCHED_GIT_COMMIT` (for builds from a source
//! tarball that recorded it), else from `git` in the source tree; without
//! either (no git, not a checkout) the version stands alone.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=HETSCHED_GIT_COMMIT");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let commit = match std::env::var("HETSCHED_GIT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => Some(c.trim().to_string()),
        _ => {
            // Rebuilt when HEAD moves: a commit, a checkout or a reset
            // writes both (paths from git, so that worktrees work too).
            for file in ["HEAD", "logs/HEAD"] {
                let path = git(
                    dir,
                    &["rev-parse", "--path-format=absolute", "--git-path", file],
                );
                // A missing file would rerun this script on every build.
                if let Some(p) = path.filter(|p| Path::new(p).exists()) {
                    println!("cargo:rerun-if-changed={p}");
                }
            }
            git(dir, &["rev-parse", "--short=12", "HEAD"])
        }
    };
    let version = env!("CARGO_PKG_VERSION");
    let long = match commit {
        Some(c) => format!("{version} (commit {c})"),
        None => version.to_string(),
    };
    println!("cargo:rustc-env=HETSCHED_VERSION_LONG={long}");
}
