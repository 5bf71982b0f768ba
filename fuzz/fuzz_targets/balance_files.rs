//! Fuzz the balancer's file decoders: its TOML configuration (written by
//! operators, typos included), its stored predictor (in the user's cache
//! directory, where anything may overwrite it), its state file (restored
//! after a crash) and the fault ledgers processes write in a shared
//! directory. Every input must give a value or an error, and an accepted
//! predictor must predict without panicking.
#![no_main]

use hetsched_balance::calibrate::parse_model;
use hetsched_balance::config::BalanceConfig;
use hetsched_balance::journal;
use hetsched_core::ips_model::{Features, N_FEATURES};
use hetsched_platform::fault_ledger;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = journal::parse(data);
    for r in fault_ledger::decode(data) {
        // What decodes must encode back to the same bytes.
        assert_eq!(fault_ledger::FaultRecord::decode(&r.encode()), Some(r));
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(cfg) = BalanceConfig::parse(text) {
            for h in &cfg.hints {
                let _ = (h.category(), h.hint());
            }
        }
    }
    if let Ok(model) = parse_model(data) {
        let x = Features([Some(1.0); N_FEATURES]);
        let n = model.kinds.len();
        for from in 0..n {
            for to in 0..n {
                let _ = model.predict_ips(from, to, &x);
                let _ = model.predict_watts(from, to, &x);
            }
        }
    }
});
