//! The committed header is what cbindgen makes of the sources now.

use std::path::Path;

#[test]
fn committed_header_is_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut fresh = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not parse crates/capi")
        .write(&mut fresh);
    let fresh = String::from_utf8(fresh).expect("header is UTF-8");
    let path = dir.join("include/hetsched.h");
    if std::env::var_os("HETSCHED_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write include/hetsched.h");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "crates/capi/include/hetsched.h is stale: regenerate with \
         `HETSCHED_BLESS=1 cargo test -p hetsched-capi --test header` and commit it"
    );
}
