//! Fuzz the task-model file decoder: the file sits in the user's cache
//! directory where anything may overwrite it, so every input must give
//! models or a warning naming the file, never a panic.
#![no_main]

use hetsched_runtime::model_store;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let kinds = vec!["cpu".to_string(), "gpu-big".to_string()];
    let loaded = model_store::parse(Path::new("fuzz.json"), data, &kinds);
    match loaded.warning {
        Some(w) => {
            assert!(w.contains("fuzz.json"), "warning does not name the file: {w}");
            assert!(loaded.models.is_empty());
        }
        None => assert!(loaded.models.check_version().is_ok()),
    }
});
