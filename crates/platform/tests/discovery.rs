//! Discovery on the machine the tests run on, and on a fake sysfs tree.

use hetsched_core::ids::{KindId, UnitId};
use hetsched_core::unit::{Capabilities, UnitClass};
use hetsched_platform::{
    CalibrationOrigin, EmulatedUnitConfig, Platform, PlatformConfig, SpeedBasis, discover,
};
use std::fs;
use std::path::Path;

fn cpus_only() -> Platform {
    discover(&PlatformConfig::default()).expect("discovery on this machine")
}

#[test]
fn cpu_slots_cover_available_parallelism() {
    let p = cpus_only();
    let cpu_units: Vec<_> = p
        .machine
        .units
        .iter()
        .filter(|u| u.class == UnitClass::Cpu)
        .collect();
    assert!(!cpu_units.is_empty(), "{p}");
    let slots: u32 = cpu_units.iter().map(|u| u.slots).sum();
    let n = std::thread::available_parallelism().unwrap().get();
    assert_eq!(slots as usize, n, "{p}");
    assert_eq!(p.cpus.len(), n);
    // Every PU belongs to exactly the kind that lists it.
    for c in &p.cpus {
        assert!(p.cpu_kinds[c.kind.index()].os_indices.contains(&c.os_index));
    }
    for (i, k) in p.cpu_kinds.iter().enumerate() {
        assert_eq!(k.unit, UnitId(i as u16));
        assert_eq!(k.kind, KindId(i as u16));
        assert_eq!(p.cpus_of_kind(k.kind), Some(k.os_indices.as_slice()));
        assert!(
            p.cpu_kind_units()
                .any(|(kind, pus)| kind == k.kind && pus == k.os_indices)
        );
        let u = p.machine.unit(k.unit);
        assert!(u.coherent && u.relative_speed >= 1.0);
        assert!(u.dispatch_ns > 0, "calibration sets dispatch: {p}");
    }
    assert_eq!(p.calibration_origin, CalibrationOrigin::Measured);
}

#[cfg(target_arch = "x86_64")]
#[test]
fn cpu_caps_follow_cpuid() {
    let p = cpus_only();
    for k in &p.cpu_kinds {
        let caps = p.machine.unit(k.unit).caps;
        assert!(caps.contains(Capabilities::FP64));
        let expect = [
            (
                Capabilities::AES,
                std::arch::is_x86_feature_detected!("aes"),
            ),
            (
                Capabilities::AVX2,
                std::arch::is_x86_feature_detected!("avx2"),
            ),
            (
                Capabilities::AVX512,
                std::arch::is_x86_feature_detected!("avx512f"),
            ),
            (
                Capabilities::SHA,
                std::arch::is_x86_feature_detected!("sha"),
            ),
            (
                Capabilities::FMA,
                std::arch::is_x86_feature_detected!("fma"),
            ),
        ];
        for (cap, present) in expect {
            assert_eq!(
                caps.contains(cap),
                present,
                "{:?} in {:?}",
                cap.names(),
                caps.names()
            );
        }
    }
}

#[test]
fn emulated_units_follow_cpus_and_share_kinds() {
    let config = PlatformConfig {
        emulated: vec![
            EmulatedUnitConfig::new("gpu0", "fake-gpu", 8.0, 12.0),
            EmulatedUnitConfig::new("gpu1", "fake-gpu", 8.0, 12.0),
            EmulatedUnitConfig::new("aes0", "aes-engine", 3.0, 4.0),
        ],
        ..PlatformConfig::default()
    };
    let p = discover(&config).unwrap();
    let n_cpu = p.cpu_kinds.len();
    let names: Vec<_> = p.machine.units[n_cpu..]
        .iter()
        .map(|u| u.name.as_str())
        .collect();
    assert_eq!(names, ["gpu0", "gpu1", "aes0"]);
    for (i, u) in p.machine.units.iter().enumerate() {
        assert_eq!(u.id.index(), i);
    }
    let g0 = p.machine.unit_by_name("gpu0").unwrap();
    let g1 = p.machine.unit_by_name("gpu1").unwrap();
    let a = p.machine.unit_by_name("aes0").unwrap();
    assert_eq!(g0.kind, g1.kind);
    assert_ne!(g0.kind, a.kind);
    assert_eq!(p.machine.kinds.len(), n_cpu + 2);
    assert_eq!(p.cpus_of_kind(g0.kind), None);
    let table = p.summary_table();
    assert!(
        table.contains("gpu0") && table.contains("fake-gpu"),
        "{table}"
    );
}

#[test]
fn emulated_only_machine_skips_cpus_and_calibration() {
    let config = PlatformConfig {
        emulated: vec![EmulatedUnitConfig::new("acc", "acc", 2.0, 1.0)],
        include_cpus: false,
        ..PlatformConfig::default()
    };
    let p = discover(&config).unwrap();
    assert_eq!(p.machine.units.len(), 1);
    assert_eq!(p.machine.units[0].id, UnitId(0));
    assert!(p.cpus.is_empty() && p.calibration.is_none());
    assert_eq!(p.calibration_origin, CalibrationOrigin::None);
}

#[test]
fn platform_serialises_to_json_and_back() {
    let p = cpus_only();
    let json = serde_json::to_string(&p).unwrap();
    assert!(json.contains("\"os_index\""));
    let back: Platform = serde_json::from_str(&json).unwrap();
    assert_eq!(back.machine, p.machine);
    assert_eq!(back.cpus, p.cpus);
}

#[test]
fn config_reads_from_toml() {
    let text = r#"
        include_cpus = false
        calibration_cache = "/tmp/x.json"

        [[emulated]]
        name = "gpu0"
        kind = "fake-gpu"
        class = "gpu"
        speed = 8.0
        copy_latency_us = 15
        copy_gbps = 12
        copy_out_gbps = 6
        caps = ["fp64", "aes"]
        streams = 4
    "#;
    let config: PlatformConfig = toml::from_str(text).unwrap();
    let p = discover(&config).unwrap();
    let u = &p.machine.units[0];
    assert_eq!((u.class, u.slots), (UnitClass::Gpu, 4));
    assert_eq!(u.caps, Capabilities::FP64.union(Capabilities::AES));
    assert_eq!(u.copy_in.latency_ns, 15_000);
    assert!((u.copy_out.bytes_per_s() - 6e9).abs() < 1.0);
    let e = toml::from_str::<PlatformConfig>("include_cpu = true").unwrap_err();
    assert!(e.to_string().contains("unknown field `include_cpu`"), "{e}");
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A fake big.LITTLE sysfs: CPUs 0-1 little (capacity 512), 2-3 big (1024).
fn fake_sysfs(root: &Path) {
    write(&root.join("online"), "0-3\n");
    for cpu in 0..4 {
        let big = cpu >= 2;
        let d = root.join(format!("cpu{cpu}"));
        write(
            &d.join("cpu_capacity"),
            if big { "1024\n" } else { "512\n" },
        );
        write(
            &d.join("cpufreq/cpuinfo_max_freq"),
            if big { "3000000\n" } else { "1800000\n" },
        );
        write(&d.join("topology/core_id"), &format!("{cpu}\n"));
        write(&d.join("topology/physical_package_id"), "0\n");
        for (i, (level, ty, size)) in [
            (1, "Data", "32K"),
            (1, "Instruction", "64K"),
            (2, "Unified", "1024K"),
        ]
        .into_iter()
        .enumerate()
        {
            let c = d.join(format!("cache/index{i}"));
            write(&c.join("level"), &format!("{level}\n"));
            write(&c.join("type"), &format!("{ty}\n"));
            write(&c.join("size"), &format!("{size}\n"));
        }
    }
}

#[test]
fn sysfs_fallback_groups_big_and_little() {
    let dir = tempfile::tempdir().unwrap();
    fake_sysfs(dir.path());
    let topo = hetsched_platform::cpu::discover_cpus_from_sysfs(dir.path());
    assert_eq!(topo.speed_basis, SpeedBasis::Capacity);
    let names: Vec<_> = topo.kinds.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["cpu-kind0", "cpu-kind1"]);
    assert_eq!(topo.kinds[0].os_indices, [0, 1]);
    assert_eq!(topo.kinds[1].os_indices, [2, 3]);
    assert_eq!(topo.kinds[0].relative_speed, 1.0);
    assert_eq!(topo.kinds[1].relative_speed, 2.0);
    let c = &topo.cpus[3];
    assert_eq!((c.capacity, c.max_freq_khz), (Some(1024), Some(3_000_000)));
    assert_eq!(
        (c.caches.l1d, c.caches.l2, c.caches.l3),
        (Some(32 << 10), Some(1 << 20), None)
    );

    let p = Platform::assemble(topo, &[EmulatedUnitConfig::new("g", "g", 4.0, 8.0)]).unwrap();
    assert_eq!(p.machine.units.len(), 3);
    assert_eq!(p.machine.units[1].slots, 2);
    assert_eq!(p.cpus_of_kind(KindId(1)), Some(&[2, 3][..]));
}

#[test]
fn sysfs_fallback_without_files_uses_available_parallelism() {
    let dir = tempfile::tempdir().unwrap();
    let topo = hetsched_platform::cpu::discover_cpus_from_sysfs(dir.path());
    let n = std::thread::available_parallelism().unwrap().get();
    assert_eq!(topo.kinds.len(), 1);
    assert_eq!(topo.kinds[0].os_indices.len(), n);
    assert_eq!(topo.speed_basis, SpeedBasis::Unknown);
    assert!(
        topo.notes
            .iter()
            .any(|n| n.contains("available_parallelism")),
        "{:?}",
        topo.notes
    );
}
