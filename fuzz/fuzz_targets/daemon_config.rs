//! Fuzz the daemon's config parser: any text gives a config or an error
//! naming the file, never a panic, and a config it accepts has every
//! number within the bounds the parser documents (so the daemon never
//! starts with, say, a zero tick or a floor below native).
#![no_main]

use hetsched_daemon::config::DaemonConfig;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match DaemonConfig::parse(Path::new("fuzz.toml"), text) {
        Ok(cfg) => {
            assert!(cfg.max_outstanding >= 1);
            assert!((1..=1000).contains(&cfg.tick_ms), "tick_ms {}", cfg.tick_ms);
            assert!(cfg.max_device_seconds > 0.0 && cfg.max_device_seconds.is_finite());
            assert!((1.0..=2.0).contains(&cfg.coordination_floor));
            assert!(cfg.cpu_scan_ms >= 1);
            let max_region = hetsched_views::data_region::MAX_REGION_BYTES >> 20;
            assert!((1..=max_region).contains(&cfg.max_region_mb));
            assert!(cfg.max_frame_bytes >= 1024);
            assert!(!cfg.cpu_cgroups || cfg.include_cpus);
            for e in &cfg.emulated {
                assert!(e.validate().is_ok(), "{e:?}");
            }
        }
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.contains("fuzz.toml"),
                "error does not name the file: {message}"
            );
        }
    }
});
