//! Fuzz the daemon's state-file parser: the file outlives the daemon and
//! may be cut short by a full disk or edited by hand, so every input must
//! give a store or an error naming the file, never a panic; and a store it
//! accepts must write out and read back the same (what the daemon writes
//! is what it will read after a restart).
#![no_main]

use hetsched_daemon::store::SettingsStore;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz/state.json");
    match SettingsStore::parse(path, data) {
        Ok(store) => {
            let again =
                SettingsStore::parse(path, &store.to_bytes()).expect("a written store parses");
            assert_eq!(again, store, "the store changed on a round trip");
        }
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.contains("fuzz/state.json"),
                "error does not name the file: {message}"
            );
        }
    }
});
