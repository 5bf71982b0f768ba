//! Fuzz the scenario decoder: it reads files users write, so it must never
//! panic, and every error it returns must name the file it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = hetsched_sim::scenario::parse("fuzz.toml", &text) {
        let shown = e.to_string();
        assert!(
            shown.starts_with("fuzz.toml"),
            "error does not name the file: {shown:?}"
        );
    }
});
