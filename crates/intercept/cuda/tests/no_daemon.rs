//! The interposer over the stand-in driver with no daemon: calls pass
//! through with their results unchanged, one line says so, and the cap
//! the program was started with (`HETSCHED_DEVICE_MEMORY`, which only the
//! interposer enforces) holds on every way of finding the driver.

mod common;
use common::{ALL_MODES, Mode, built, codes, counters, run, stderr_lines};

/// Launches on both devices, every launch kind, allocations, a copy, a
/// synchronisation, and a `dlsym(RTLD_NEXT)` that must still search
/// after the program (not after the interposer's `dlsym`).
const WORK: &[&str] = &[
    "N", "L3x200", "A600", "A400", "C", "F1", "Y", "E50", "K50", "G", "D1", "L2x100",
];

#[test]
fn without_a_daemon_every_call_passes_through_unchanged() {
    let Some(b) = built() else { return };
    for mode in ALL_MODES {
        let plain = run(b, mode, false, WORK, &[]);
        let under = run(b, mode, true, WORK, &[]);
        assert_eq!(codes(&plain), codes(&under), "{mode:?}");
        assert!(
            codes(&under).iter().all(|&c| c == 0),
            "{mode:?}: {:?}",
            codes(&under)
        );
        assert_eq!(counters(&plain), counters(&under), "{mode:?}");
        let c = counters(&under);
        assert_eq!((c["launches0"], c["launches1"]), (6, 2), "{mode:?}");
        // The per-thread variants were the ones called (8 launches, two
        // copies), through the interposer as without it.
        let per_thread = if matches!(mode, Mode::ProcAddressPerThread) {
            10
        } else {
            0
        };
        assert_eq!(c["per_thread"], per_thread, "{mode:?}");
        assert!(stderr_lines(&plain).is_empty());
        let lines = stderr_lines(&under);
        assert_eq!(lines.len(), 1, "{mode:?}: {lines:?}");
        assert!(
            lines[0].starts_with("hetsched: cuda calls pass through ungoverned"),
            "{lines:?}"
        );
    }
}

#[test]
fn the_programs_cap_is_kept_to_the_byte_however_the_driver_is_found() {
    let Some(b) = built() else { return };
    let ops = ["A600", "A400", "A1", "F1", "A1", "M399", "S1", "F0", "S600"];
    let cap = [("HETSCHED_DEVICE_MEMORY", "1000")];
    for mode in ALL_MODES {
        // Without the interposer the stand-in allocates everything: the
        // refusals below are the interposer's alone.
        assert!(
            codes(&run(b, mode, false, &ops, &cap))
                .iter()
                .all(|&c| c == 0)
        );
        let out = run(b, mode, true, &ops, &cap);
        assert_eq!(
            codes(&out),
            [0, 0, 2, 0, 0, 0, 2, 0, 0],
            "{mode:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert_eq!(counters(&out)["in_use"], 1000, "{mode:?}");
    }
}

#[test]
fn a_driver_refusal_gives_the_reservation_back() {
    let Some(b) = built() else { return };
    // The driver has 700 bytes, the cap is 1000: the 400 fails in the
    // driver, and the 100 after it fits only if its count was taken back.
    let env = [
        ("HETSCHED_DEVICE_MEMORY", "1000"),
        ("STANDIN_MEMORY_LIMIT", "700"),
    ];
    for mode in [Mode::Linked, Mode::Dlopen] {
        let out = run(b, mode, true, &["A600", "A400", "A100", "A300"], &env);
        assert_eq!(codes(&out), [0, 2, 0, 2], "{mode:?}");
    }
}

#[test]
fn a_pitched_allocation_counts_what_the_driver_gave() {
    let Some(b) = built() else { return };
    // 100 bytes wide pitch to 512: 2 rows are 1024 bytes.
    let cap = [("HETSCHED_DEVICE_MEMORY", "1024")];
    for mode in [Mode::Linked, Mode::Dlopen, Mode::ProcAddress] {
        let out = run(
            b,
            mode,
            true,
            &["P100x2", "A1", "F0", "P100x1", "P100x1", "P1x1"],
            &cap,
        );
        assert_eq!(codes(&out), [0, 2, 0, 0, 0, 2], "{mode:?}");
        assert_eq!(counters(&out)["in_use"], 1024, "{mode:?}");
    }
}

#[test]
fn without_a_driver_cu_init_says_no_device_and_nothing_crashes() {
    let Some(b) = built() else { return };
    // The linked program calls our cuInit, which finds no driver to
    // forward to and answers CUDA_ERROR_NO_DEVICE: the program gives up
    // cleanly ("no context", exit 2) instead of crashing.
    let out = common::command(b, Mode::Linked, true, &["L1x1"], &[])
        .env("HETSCHED_REAL_LIBCUDA", b.dir.join("absent.so"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no context");
}
