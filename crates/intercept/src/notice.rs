//! One line to stderr per kind of event, once per process: an intercepted
//! program's output is its user's, and hetsched must not fill it.

use std::sync::Mutex;

static SAID: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// Writes `hetsched: {line}` to stderr the first time `key` is seen.
pub fn once(key: &'static str, line: impl FnOnce() -> String) {
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.contains(&key) {
        return;
    }
    said.push(key);
    drop(said);
    if std::env::var_os("HETSCHED_INTERCEPT_QUIET").is_none() {
        eprintln!("hetsched: {}", line());
    }
}
