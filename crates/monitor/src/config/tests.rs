//! The config reader's tests: every key, its defaults and its errors.

use super::*;

fn parse(text: &str) -> Result<DaemonConfig, String> {
    DaemonConfig::parse(Path::new("test.toml"), text).map_err(|e| e.to_string())
}

#[test]
fn the_example_config_parses() {
    let text = include_str!("../../../../config/hetsched.example.toml");
    let cfg = parse(text).unwrap();
    assert_eq!(cfg.coordination, Coordination::Pf);
    assert_eq!(cfg.coordination_floor, 1.05);
    assert_eq!(cfg.kernels, crate::kernel_config::KernelsConfig::default());
}

#[test]
fn kernel_limits_are_checked_and_reach_the_monitor() {
    let err = parse(
        "[kernels]
max_source_kb = 0
",
    )
    .unwrap_err();
    assert!(err.contains("kernels.max_source_kb = 0"), "{err}");
    let err = parse(
        "[kernels]
compile_seconds = -1.0
",
    )
    .unwrap_err();
    assert!(err.contains("kernels.compile_seconds"), "{err}");
    let cfg = parse(
        "include_cpus = false\ndevice_units = false\nkernel_users = [\"0\", \"root\"]\n\
         [kernels]\nmax_per_client = 3\n",
    )
    .unwrap();
    let (setup, _) = crate::launch::prepare(&cfg).unwrap();
    assert_eq!(setup.monitor.kernels.uids, [0, 0]);
    assert_eq!(setup.monitor.kernels.limits.max_per_client, 3);
    let cfg = parse(
        "include_cpus = false\ndevice_units = false\nkernel_groups = [\"no-such-group-x\"]\n",
    )
    .unwrap();
    let err = crate::launch::prepare(&cfg).unwrap_err().to_string();
    assert!(err.contains("no-such-group-x"), "{err}");
}

#[test]
fn metrics_are_served_on_loopback_unless_metrics_remote_allows_more() {
    assert!(parse("metrics_listen = \"127.0.0.1:9464\"").is_ok());
    assert!(parse("metrics_listen = \"[::1]:9464\"").is_ok());
    let err = parse("metrics_listen = \"0.0.0.0:9464\"").unwrap_err();
    assert!(err.contains("metrics_remote = true"), "{err}");
    assert!(parse("metrics_listen = \"0.0.0.0:9464\"\nmetrics_remote = true").is_ok());
}

#[test]
fn hold_limits_are_checked_and_reach_the_monitor() {
    let err = parse("[max_hold_ms]\ngpu0 = 0").unwrap_err();
    assert!(err.contains("max_hold_ms.gpu0 = 0 is outside"), "{err}");
    let text = "include_cpus = false\ndevice_units = false\nmetrics_names = [\"train\"]\n\
                [max_hold_ms]\nemu = 250\n\
                [[emulated]]\nname = \"emu\"\nspeed = 1.0\ncopy_gbps = 10.0\n";
    let (setup, _) = crate::launch::prepare(&parse(text).unwrap()).unwrap();
    assert_eq!(setup.monitor.max_hold_ns["emu"], 250_000_000);
    assert_eq!(setup.monitor.metrics_names, vec!["train".to_string()]);
    let text = text.replace("emu = 250", "nope = 250");
    let err = crate::launch::prepare(&parse(&text).unwrap()).unwrap_err();
    assert!(
        err.to_string()
            .contains("[max_hold_ms] names units that do not exist: nope")
    );
}

#[test]
fn the_anticipation_window_is_unset_by_default_and_reaches_the_monitor() {
    assert_eq!(parse("").unwrap().anticipation_us, None);
    let cfg = parse("include_cpus = false\ndevice_units = false\nanticipation_us = 0").unwrap();
    assert_eq!(cfg.anticipation_us, Some(0));
    let (setup, _) = crate::launch::prepare(&cfg).unwrap();
    assert_eq!(setup.monitor.anticipation_ns, Some(0));
}

#[test]
fn the_pick_slice_is_checked_and_reaches_the_coordinator() {
    let default = parse("").unwrap();
    assert_eq!(
        default.coordination_slice_events,
        hetsched_core::coordination::DEFAULT_PICK_SLICE_EVENTS
    );
    for events in [0u64, 500_000] {
        let cfg = parse(&format!(
            "include_cpus = false\ndevice_units = false\ncoordination_slice_events = {events}"
        ))
        .unwrap();
        let (setup, _) = crate::launch::prepare(&cfg).unwrap();
        assert_eq!(setup.coordinator.pick_slice_events, events);
    }
    let err = parse("coordination_slice_events = 200000000").unwrap_err();
    assert!(err.contains("coordination_slice_events"), "{err}");
    let err = parse("coordination_slice_events = -1").unwrap_err();
    assert!(err.contains("coordination_slice_events"), "{err}");
}

#[test]
fn the_coordination_floor_is_checked_and_reaches_the_coordinator() {
    assert_eq!(parse("").unwrap().coordination_floor, 1.05);
    let cfg = parse("coordination_floor = 1.1").unwrap();
    let coordinator = cfg.coordination.coordinator_config(cfg.coordination_floor);
    assert_eq!(coordinator.floor_goal, 1.1);
    for bad in ["0.9", "2.5", "nan", "-1.0"] {
        let err = parse(&format!("coordination_floor = {bad}")).unwrap_err();
        assert!(err.contains("outside 1.0..=2.0"), "{bad}: {err}");
    }
    let err = parse("coordination_floor = \"high\"").unwrap_err();
    assert!(err.contains("coordination_floor"), "{err}");
}

#[test]
fn coordination_modes_parse_and_unknown_ones_are_refused() {
    let cfg = parse("coordination = \"pf-replay\"").unwrap();
    assert_eq!(cfg.coordination, Coordination::PfReplay);
    assert!(cfg.coordination.coordinator_config(1.05).replay);
    assert!(!Coordination::Pf.coordinator_config(1.05).replay);
    assert!(!Coordination::Off.is_on());
    let err = parse("coordination = \"replay\"").unwrap_err();
    assert!(err.contains("pf-replay"), "{err}");
}

#[test]
fn pf_replay_runs_fifo_devices_short_first() {
    use PolicyKind::*;
    assert_eq!(Coordination::PfReplay.device_policy(Fifo), ShortFirst);
    assert_eq!(Coordination::PfReplay.device_policy(Share), Share);
    assert_eq!(Coordination::PfReplay.device_policy(ShortFirst), ShortFirst);
    for mode in [Coordination::Pf, Coordination::Off] {
        assert_eq!(mode.device_policy(Fifo), Fifo);
    }
}

#[test]
fn empty_file_gives_defaults() {
    assert_eq!(parse("").unwrap(), DaemonConfig::default());
}

#[test]
fn full_example_parses() {
    let cfg = parse(
        r#"
        admin_group = "hetsched"
        max_outstanding = 16
        cpu_nice_from_shares = true
        cpu_cgroups = true
        coordination = "off"
        default_policy = "share"
        [policies]
        gpu1 = "fifo"
        gpu0 = "short-first"
        [[emulated]]
        name = "gpu0"
        speed = 8.0
        copy_gbps = 12.0
        [[emulated]]
        name = "gpu1"
        speed = 4.0
        copy_gbps = 6.0
        streams = 2
        "#,
    )
    .unwrap();
    assert_eq!(cfg.emulated.len(), 2);
    assert!(cfg.cpu_nice_from_shares);
    assert!(!DaemonConfig::default().cpu_nice_from_shares);
    assert!(cfg.cpu_cgroups);
    assert!(!DaemonConfig::default().cpu_cgroups);
    assert_eq!(cfg.coordination, Coordination::Off);
    assert_eq!(DaemonConfig::default().coordination, Coordination::Pf);
    assert_eq!(cfg.policies["gpu1"], PolicyKind::Fifo);
    assert_eq!(cfg.policies["gpu0"], PolicyKind::ShortFirst);
    assert_eq!(
        cfg.unknown_policy_units(&["gpu0", "gpu1"]),
        Vec::<&str>::new()
    );
    assert_eq!(cfg.unknown_policy_units(&["gpu0"]), vec!["gpu1"]);
}

#[test]
fn typos_name_the_key_and_line() {
    let err = parse("max_outstandng = 3\n").unwrap_err();
    assert!(
        err.contains("max_outstandng") && err.contains("line 1"),
        "{err}"
    );
    let err = parse("default_policy = \"fair\"\n").unwrap_err();
    assert!(err.contains("fair"), "{err}");
    let err = parse("[[emulated]]\nname = \"g\"\nspeed = -1.0\ncopy_gbps = 1.0\n").unwrap_err();
    assert!(err.contains("speed"), "{err}");
    let err = parse("tick_ms = 0\n").unwrap_err();
    assert!(err.contains("tick_ms"), "{err}");
    let err = parse("cpu_scan_ms = 0\n").unwrap_err();
    assert!(err.contains("cpu_scan_ms"), "{err}");
    let err = parse("cpu_cgroup = true\n").unwrap_err();
    assert!(err.contains("cpu_cgroup"), "{err}");
    let err = parse("cpu_cgroups = true\ninclude_cpus = false\n").unwrap_err();
    assert!(err.contains("include_cpus"), "{err}");
    let err = parse("[[emulated]]\nname = \"g\"\nspeed = 1.0\ncopy_gbps = 1.0\nmemory_gb = 4\n")
        .unwrap_err();
    assert!(err.contains("memory_gb"), "{err}");
}

/// Every numeric key has a range, checked at parse time; the error
/// names the key, the value and the range.
#[test]
fn numbers_outside_their_ranges_name_key_value_and_range() {
    for (text, want) in [
        (
            "max_outstanding = 0",
            "max_outstanding = 0 is outside 1..=4096",
        ),
        (
            "max_outstanding = 5000",
            "max_outstanding = 5000 is outside 1..=4096",
        ),
        (
            "max_frame_bytes = 100",
            "max_frame_bytes = 100 is outside 1024..=67108864",
        ),
        (
            "max_frame_bytes = 1000000000",
            "max_frame_bytes = 1000000000 is outside",
        ),
        (
            "max_device_seconds = nan",
            "max_device_seconds = NaN is outside (0, 3600]",
        ),
        (
            "max_device_seconds = inf",
            "max_device_seconds = inf is outside (0, 3600]",
        ),
        (
            "max_device_seconds = 0.0",
            "max_device_seconds = 0 is outside (0, 3600]",
        ),
        (
            "max_device_seconds = 7200.0",
            "max_device_seconds = 7200 is outside",
        ),
        ("tick_ms = 0", "tick_ms = 0 is outside 1..=1000"),
        ("tick_ms = 5000", "tick_ms = 5000 is outside 1..=1000"),
        ("cpu_scan_ms = 0", "cpu_scan_ms = 0 is outside 1..=60000"),
        (
            "cpu_schedule_ms = 0",
            "cpu_schedule_ms = 0 is outside 1..=60000",
        ),
        (
            "anticipation_us = 200000",
            "anticipation_us = 200000 is outside 0..=100000",
        ),
        (
            "cpu_scan_ms = 3600000",
            "cpu_scan_ms = 3600000 is outside 1..=60000",
        ),
        (
            "max_region_mb = 4096",
            "max_region_mb = 4096 is outside 1..=1024",
        ),
        (
            "[[slow_cores]]\ncpus = [1]\nspeed = 1.5",
            "slow_cores[0]: speed = 1.5 is outside (0, 1)",
        ),
        (
            "[[slow_cores]]\ncpus = [1]\nspeed = nan",
            "slow_cores[0]: speed = NaN is outside (0, 1)",
        ),
    ] {
        let err = parse(&format!("{text}\n")).unwrap_err();
        assert!(err.contains(want), "{text}: {err}");
    }
    assert!(parse("max_outstanding = 4096\ntick_ms = 1000\ncpu_scan_ms = 60000\n").is_ok());
    assert!(parse("max_device_seconds = 3600.0\nmax_frame_bytes = 1024\n").is_ok());
}

#[test]
fn emulated_units_and_domains_have_upper_bounds() {
    let unit = |extra: &str| {
        parse(&format!(
            "[[emulated]]\nname = \"g\"\nspeed = 1.0\ncopy_gbps = 1.0\n{extra}\n"
        ))
    };
    assert_eq!(unit("streams = 64").unwrap().emulated[0].streams, 64);
    for (extra, want) in [
        (
            "streams = 65",
            "emulated unit \"g\": streams = 65 is outside 1..=64",
        ),
        (
            "streams = 4000000000",
            "streams = 4000000000 is outside 1..=64",
        ),
        (
            "memory_mb = 99999999999",
            "memory_mb = 99999999999 is outside 1..=16777216",
        ),
        (
            "max_clients = 5000",
            "max_clients = 5000 is outside 1..=1024",
        ),
        (
            "dispatch_us = 1e9",
            "dispatch_us = 1000000000 is outside 0..=1000000",
        ),
        (
            "copy_out_gbps = 1e9",
            "copy_out_gbps = 1000000000 is outside (0, 10000]",
        ),
        (
            "busy_watts = 1e7\nidle_watts = 1.0",
            "busy_watts = 10000000 is outside",
        ),
    ] {
        let err = unit(extra).unwrap_err();
        assert!(err.contains(want), "{extra}: {err}");
    }
    let err = parse("[[emulated]]\nname = \"g\"\nspeed = 1e7\ncopy_gbps = 1.0\n").unwrap_err();
    assert!(
        err.contains("speed = 10000000 is outside (0, 1000000]"),
        "{err}"
    );
    let domain = |extra: &str| {
        parse(&format!(
            "[[domains]]\nname = \"web\"\ncgroup = \"/docker/abc\"\n{extra}\n"
        ))
    };
    assert!(domain("credits = 1000000").is_ok());
    let err = domain("credits = 1000001").unwrap_err();
    assert!(
        err.contains("domain \"web\": credits = 1000001 is outside 1..=1000000"),
        "{err}"
    );
    let err = domain("unit_credits = { gpu1 = 4000000000 }").unwrap_err();
    assert!(
        err.contains("unit_credits.gpu1 = 4000000000 is outside"),
        "{err}"
    );
}

#[test]
fn served_units_need_their_features() {
    for (key, feature) in [("opencl_units", "opencl"), ("cuda_units", "cuda")] {
        // Built: the API is on the build's list.
        let built = crate::kernel_exec::apis::named(feature).is_some();
        match parse(&format!("{key} = true\n")) {
            Ok(cfg) => {
                assert!(built, "{key} accepted without the {feature} feature");
                assert!(cfg.opencl_units || cfg.cuda_units);
            }
            Err(err) => {
                assert!(!built, "{key} refused with the {feature} feature: {err}");
                assert!(
                    err.contains(key) && err.contains(&format!("--features {feature}")),
                    "{err}"
                );
            }
        }
    }
    assert!(!DaemonConfig::default().cuda_units);
}

#[test]
fn exclusive_devices_is_off_by_default_and_parses() {
    assert!(!DaemonConfig::default().exclusive_devices);
    assert!(!parse("").unwrap().exclusive_devices);
    assert!(
        parse("exclusive_devices = true\n")
            .unwrap()
            .exclusive_devices
    );
    assert!(
        !parse("exclusive_devices = false\n")
            .unwrap()
            .exclusive_devices
    );
    let err = parse("exclusive_device = true\n").unwrap_err();
    assert!(
        err.contains("exclusive_device") && err.contains("line 1"),
        "{err}"
    );
    let err = parse("exclusive_devices = \"yes\"\n").unwrap_err();
    assert!(err.contains("exclusive_devices"), "{err}");
}

#[test]
fn domains_parse_and_their_mistakes_are_named() {
    let cfg = parse(
        r#"
        cpu_cgroups = true
        [[domains]]
        name = "web"
        cgroup = "/docker/abc"
        credits = 512
        unit_credits = { gpu1 = 64 }
        cpu_cap = 0.5
        [[domains]]
        name = "batch"
        cgroup = "/batch.slice"
        "#,
    )
    .unwrap();
    assert_eq!(cfg.domains.len(), 2);
    assert_eq!(cfg.domains[0].credits, 512);
    assert_eq!(cfg.domains[0].cpu_cap, Some(0.5));
    assert_eq!(cfg.domains[0].credits_on("gpu1"), 64);
    assert_eq!(cfg.domains[0].credits_on("gpu0"), 512);
    assert_eq!(cfg.domains[1].credits, 10, "a default client's credits");
    assert_eq!(cfg.domains[1].cpu_cap, None);
    let one = |extra: &str| {
        parse(&format!(
            "cpu_cgroups = true\n[[domains]]\nname = \"web\"\ncgroup = \"/docker/abc\"\n{extra}"
        ))
    };
    let err = one("credit = 5\n").unwrap_err();
    assert!(err.contains("credit") && err.contains("line"), "{err}");
    let err = one("unit_credits = { gpu0 = 0 }\n").unwrap_err();
    assert!(err.contains("gpu0"), "{err}");
    let err = one("credits = 0\n").unwrap_err();
    assert!(err.contains("credits must be at least 1"), "{err}");
    let err = one("cpu_cap = 0\n").unwrap_err();
    assert!(err.contains("cpu_cap"), "{err}");
    let err = one("cpu_cap = -0.5\n").unwrap_err();
    assert!(err.contains("cpu_cap"), "{err}");
    let err = one("cpu_cap = 100000.0\n").unwrap_err();
    assert!(err.contains("cores"), "{err}");
    let err = one("credits = \"many\"\n").unwrap_err();
    assert!(err.contains("credits"), "{err}");
    let err = parse("[[domains]]\nname = \"web\"\n").unwrap_err();
    assert!(err.contains("cgroup"), "{err}");
    let err = parse("[[domains]]\nname = \"web\"\ncgroup = \"/x\"\ncpu_cap = 0.5\n").unwrap_err();
    assert!(err.contains("cpu_cgroups"), "{err}");
    let err = one("[[domains]]\nname = \"web\"\ncgroup = \"/y\"\n").unwrap_err();
    assert!(err.contains("two domains"), "{err}");
}
