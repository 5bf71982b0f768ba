//! Fuzz what the daemon reads of a PTX module a client registers with a
//! served CUDA unit: the declaration of the kernel's kinds
//! (`name(const ptr, ptr, f32)`), the PTX's `.entry` parameter list, and
//! the check that they agree (`hetsched_protocol::ptx`).
//!
//! Input layout: the declaration, a NUL byte, then the PTX (lossy UTF-8,
//! as a `String` from the wire would hold).
//!
//! Properties checked:
//! - nothing panics, on any text;
//! - an accepted signature names an identifier kernel, has at most
//!   `MAX_PARAMS` parameters, one per declared kind, each named by the
//!   PTX and of the kind the declaration gave it;
//! - a declaration that parses alone is also what `check_entry` accepts.
#![no_main]

use hetsched_protocol::ptx::{
    is_identifier, parse_declaration, parse_ptx_entry, ptx_entries, ptx_signature,
};
use hetsched_protocol::user_kernel::{MAX_PARAMS, check_entry};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let entry = String::from_utf8_lossy(&data[..split]);
    let ptx = String::from_utf8_lossy(data.get(split + 1..).unwrap_or(&[]));
    let decl = parse_declaration(&entry);
    if decl.is_ok() {
        assert!(check_entry(&entry).is_ok());
    }
    for name in ptx_entries(&ptx).iter().take(8) {
        if let Ok(params) = parse_ptx_entry(&ptx, name) {
            assert!(params.len() <= MAX_PARAMS);
            assert!(params.iter().all(|p| p.bytes > 0 && !p.name.is_empty()));
        }
    }
    if let Ok(sig) = ptx_signature(&ptx, &entry) {
        let decl = decl.expect("a signature comes from a declaration");
        assert!(is_identifier(&sig.entry));
        assert_eq!(sig.entry, decl.name);
        assert!(sig.params.len() <= MAX_PARAMS);
        assert_eq!(sig.params.len(), decl.params.len());
        for (p, k) in sig.params.iter().zip(&decl.params) {
            assert_eq!(p.kind, k.param_kind());
            assert!(!p.name.is_empty());
        }
    }
});
