//! Fuzz the balancer's two file decoders: its TOML configuration (written
//! by operators, typos included) and its stored predictor (in the user's
//! cache directory, where anything may overwrite it). Every input must
//! give a value or an error, and an accepted predictor must predict
//! without panicking.
#![no_main]

use hetsched_balance::calibrate::parse_model;
use hetsched_balance::config::BalanceConfig;
use hetsched_core::ips_model::{Features, N_FEATURES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
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
