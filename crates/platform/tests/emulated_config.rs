//! Emulated unit configuration: every mistake gets a message naming the
//! unit, the field and the rule.

use hetsched_core::ids::{KindId, UnitId};
use hetsched_core::unit::UnitClass;
use hetsched_platform::{
    ConfigError, EmulatedUnitConfig, Platform, PlatformConfig, PlatformError, discover,
};
use proptest::prelude::*;

fn emulated_only(units: Vec<EmulatedUnitConfig>) -> Result<Platform, PlatformError> {
    discover(&PlatformConfig {
        emulated: units,
        include_cpus: false,
        ..PlatformConfig::default()
    })
}

fn parse(toml_text: &str) -> Result<EmulatedUnitConfig, String> {
    toml::from_str(toml_text).map_err(|e| e.to_string())
}

const BASE: &str = "name = \"gpu0\"\nspeed = 4.0\ncopy_gbps = 10.0\n";

#[test]
fn unknown_field_is_named() {
    let e = parse(&format!("{BASE}copy_gpbs = 3.0\n")).unwrap_err();
    assert!(e.contains("unknown field `copy_gpbs`"), "{e}");
}

#[test]
fn unknown_capability_lists_valid_ones() {
    let mut c = parse(BASE).unwrap();
    c.caps = vec!["fp64".into(), "avx1024".into()];
    let e = emulated_only(vec![c]).unwrap_err().to_string();
    assert!(
        e.contains("gpu0") && e.contains("`caps`") && e.contains("avx1024"),
        "{e}"
    );
    assert!(e.contains("aes, avx2, avx512, sha, fma, fp64"), "{e}");
}

#[test]
fn zero_streams_refused() {
    let c = parse(&format!("{BASE}streams = 0\n")).unwrap();
    let e = emulated_only(vec![c]).unwrap_err().to_string();
    assert!(
        e.contains("gpu0") && e.contains("`streams`") && e.contains("at least one"),
        "{e}"
    );
}

#[test]
fn negative_or_nan_speed_refused() {
    for bad in [-1.0, 0.0, f64::NAN, f64::INFINITY] {
        let mut c = parse(BASE).unwrap();
        c.speed = bad;
        let e = emulated_only(vec![c]).unwrap_err().to_string();
        assert!(
            e.contains("gpu0") && e.contains("`speed`") && e.contains("> 0"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn negative_latency_and_bad_bandwidth_refused() {
    let mut c = parse(BASE).unwrap();
    c.copy_latency_us = -3.0;
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("`copy_latency_us`") && e.contains(">= 0"), "{e}");
    let mut c = parse(BASE).unwrap();
    c.copy_out_gbps = Some(0.0);
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("`copy_out_gbps`"), "{e}");
}

#[test]
fn duplicate_names_refused() {
    let a = EmulatedUnitConfig::new("acc", "k1", 1.0, 1.0);
    let b = EmulatedUnitConfig::new("acc", "k2", 2.0, 1.0);
    let e = emulated_only(vec![a, b]).unwrap_err();
    assert!(matches!(
        &e,
        PlatformError::Config(ConfigError::DuplicateName { name }) if name == "acc"
    ));
    assert!(e.to_string().contains("duplicate unit name `acc`"), "{e}");
}

#[test]
fn name_clashing_with_cpu_kind_refused() {
    let p = discover(&PlatformConfig::default()).unwrap();
    let cpu_name = p.cpu_kinds[0].name.clone();
    let e = discover(&PlatformConfig {
        emulated: vec![EmulatedUnitConfig::new(&cpu_name, "other", 1.0, 1.0)],
        ..PlatformConfig::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains(&format!("duplicate unit name `{cpu_name}`")),
        "{e}"
    );
    let e = discover(&PlatformConfig {
        emulated: vec![EmulatedUnitConfig::new("fake", &cpu_name, 1.0, 1.0)],
        ..PlatformConfig::default()
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("already a cpu kind"), "{e}");
}

#[test]
fn kind_with_two_classes_refused() {
    let a = EmulatedUnitConfig::new("a", "k", 1.0, 1.0);
    let mut b = EmulatedUnitConfig::new("b", "k", 1.0, 1.0);
    b.class = "gpu".into();
    let e = emulated_only(vec![a, b]).unwrap_err().to_string();
    assert!(
        e.contains("unit `b`") && e.contains("kind `k`") && e.contains("emulated"),
        "{e}"
    );
}

#[test]
fn bad_names_refused() {
    for bad in ["", "GPU", "gpu 0", "gpu/0"] {
        let c = EmulatedUnitConfig::new(bad, "k", 1.0, 1.0);
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("`name`") && e.contains("a-z, 0-9"),
            "{bad:?}: {e}"
        );
    }
    let c = EmulatedUnitConfig::new("ok", "Bad Kind", 1.0, 1.0);
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("unit `ok`") && e.contains("`kind`"), "{e}");
}

#[test]
fn unknown_class_refused() {
    let c = parse(&format!("{BASE}class = \"fpga\"\n")).unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("`class`") && e.contains("fpga"), "{e}");
}

fn valid_config() -> impl Strategy<Value = EmulatedUnitConfig> {
    (
        "[a-z][a-z0-9_-]{0,11}",
        prop::sample::select(vec!["gpu", "accelerator", "emulated"]),
        1e-3f64..1e3,
        0.0f64..1e4,
        1e-3f64..1e3,
        prop::option::of(1e-3f64..1e3),
        prop::sample::subsequence(vec!["aes", "avx2", "avx512", "sha", "fma", "fp64"], 0..=6),
        1u32..64,
        0.0f64..1e3,
    )
        .prop_map(
            |(name, class, speed, lat, gbps, out, caps, streams, dispatch)| {
                let mut c = EmulatedUnitConfig::new(&name, &name, speed, gbps);
                c.class = class.to_string();
                c.copy_latency_us = lat;
                c.copy_out_gbps = out;
                c.caps = caps.into_iter().map(String::from).collect();
                c.streams = streams;
                c.dispatch_us = dispatch;
                c
            },
        )
}

proptest! {
    #[test]
    fn valid_configs_convert_with_consistent_copy_cost(
        c in valid_config(),
        a in 0u64..1 << 40,
        b in 0u64..1 << 40,
    ) {
        let u = c.to_unit(UnitId(7), KindId(3)).unwrap();
        prop_assert_eq!(u.id, UnitId(7));
        prop_assert_eq!(u.kind, KindId(3));
        prop_assert!(u.class != UnitClass::Cpu && !u.coherent);
        prop_assert_eq!(u.slots, c.streams);
        prop_assert_eq!(u.caps.names().len(), c.caps.len());
        let (lo, hi) = (a.min(b), a.max(b));
        for link in [u.copy_in, u.copy_out] {
            prop_assert!(link.time_ns(lo) <= link.time_ns(hi));
            prop_assert!(link.time_ns(hi).is_finite());
            if lo > 0 {
                prop_assert!(link.time_ns(lo) >= link.latency_ns as f64);
            }
        }
        prop_assert_eq!(u.copy_in_ns(hi), u.copy_in.time_ns(hi));
        let rel = (u.copy_in.bytes_per_s() - c.copy_gbps * 1e9).abs() / (c.copy_gbps * 1e9);
        prop_assert!(rel < 1e-9);
    }
}
