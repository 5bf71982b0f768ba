//! Round trips, rejection of bad fds, read-only sharing, and torn-read tests
//! (threads and a second process).

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use hetsched_core::view::{ClientUnitView, UnitView};
use proptest::prelude::*;
use rustix::fs::{MemfdFlags, SealFlags};
use rustix::io::Errno;

use crate::layout::{GLOBAL_MAGIC, PRIVATE_MAGIC, header};
use crate::mapping::{try_map_writable, try_mprotect_writable};
use crate::page::PAGE_SEALS;
use crate::*;

fn dup(fd: std::os::fd::BorrowedFd<'_>) -> OwnedFd {
    fd.try_clone_to_owned().unwrap()
}

fn sample_unit(i: usize) -> GlobalUnit {
    GlobalUnit {
        view: UnitView {
            busy_fraction: 0.25 + i as f64,
            avg_task_ns: 1.5e6 * (i + 1) as f64,
            active_clients: 3 + i as u32,
            queued: u32::MAX - i as u32,
            running: 7,
        },
        queued_by_class: [1, 2 + i as u32, 3],
        busy_ns_total: u64::MAX - i as u64,
    }
}

fn sample_kind(k: usize) -> CpuKindView {
    CpuKindView {
        threads_by_nice: std::array::from_fn(|n| (n * 3 + k) as u32),
        time_ratio_by_nice: std::array::from_fn(|n| 1.0 / (n + k + 1) as f64),
        exclusive_cores_free: 5 + k as u32,
    }
}

fn sample_client_unit(i: usize) -> ClientUnitView {
    ClientUnitView {
        guaranteed: 0.125 * i as f64,
        wait_ns: if i == 0 { f64::INFINITY } else { 3e6 },
        current_utilisation: 0.5,
        throttled: i % 2 == 1,
        max_utilisation: 0.75,
    }
}

#[test]
fn readers_are_send_and_sync_writers_are_send() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<GlobalReader>();
    send_sync::<PrivateReader>();
    send::<GlobalWriter>();
    send::<PrivateWriter>();
}

#[test]
fn global_page_round_trips_every_field() {
    let mut w = GlobalWriter::create(3, 2).unwrap();
    let r = GlobalReader::from_fd(dup(w.fd())).unwrap();
    assert_eq!((r.n_units(), r.n_cpu_kinds()), (3, 2));

    // Before the first publish: zeros, seq 0.
    let s = r.snapshot().unwrap();
    assert_eq!(s.seq, 0);
    assert_eq!(s.published_at_ns, 0);
    assert_eq!(s.units, vec![GlobalUnit::default(); 3]);
    assert_eq!(s.kinds, vec![CpuKindView::default(); 2]);

    let units: Vec<_> = (0..3).map(sample_unit).collect();
    let kinds: Vec<_> = (0..2).map(sample_kind).collect();
    w.publish(42, &units, &kinds).unwrap();
    for (i, u) in units.iter().enumerate() {
        assert_eq!(r.unit(i).as_ref(), Some(u));
    }
    for (k, v) in kinds.iter().enumerate() {
        assert_eq!(r.cpu_kind(k).as_ref(), Some(v));
    }
    assert_eq!(r.unit(3), None);
    assert_eq!(r.cpu_kind(2), None);
    assert!(matches!(
        r.try_unit(3),
        Err(ViewError::OutOfRange {
            index: 3,
            len: 3,
            ..
        })
    ));
    let s = r.snapshot().unwrap();
    assert_eq!(
        s,
        GlobalSnapshot {
            published_at_ns: 42,
            seq: 2,
            units: units.clone(),
            kinds: kinds.clone(),
        }
    );
    w.publish(43, &units, &kinds).unwrap();
    assert_eq!(r.seq().unwrap(), 4);
}

#[test]
fn publish_with_updates_only_what_it_sets() {
    let mut w = GlobalWriter::create(2, 1).unwrap();
    let r = GlobalReader::from_fd(dup(w.fd())).unwrap();
    let units = [sample_unit(0), sample_unit(1)];
    w.publish(1, &units, &[sample_kind(0)]).unwrap();
    let out_of_range = w.publish_with(2, |p| {
        p.set_cpu_kind(0, &sample_kind(9)).unwrap();
        p.set_unit(2, &sample_unit(5)).is_err()
    });
    assert!(out_of_range);
    let s = r.snapshot().unwrap();
    assert_eq!(s.units, units);
    assert_eq!(s.kinds, vec![sample_kind(9)]);
    assert_eq!((s.published_at_ns, s.seq), (2, 4));
}

#[test]
fn publish_with_wrong_lengths_is_an_error_and_writes_nothing() {
    let mut w = GlobalWriter::create(2, 1).unwrap();
    let r = GlobalReader::from_fd(dup(w.fd())).unwrap();
    assert!(matches!(
        w.publish(1, &[sample_unit(0)], &[sample_kind(0)]),
        Err(ViewError::LengthMismatch {
            got: 1,
            expected: 2,
            ..
        })
    ));
    assert!(w.publish(1, &[sample_unit(0); 2], &[]).is_err());
    assert_eq!(r.seq().unwrap(), 0);
    let mut p = PrivateWriter::create(1, 2).unwrap();
    assert!(p.publish(1, 1, &[ClientUnitView::default()], &[1]).is_err());
}

#[test]
fn private_page_round_trips_every_field_including_infinity_and_nan() {
    let mut w = PrivateWriter::create(3, 2).unwrap();
    let r = PrivateReader::from_fd(dup(w.fd().unwrap())).unwrap();

    // Before the first publish: idle, uncapped units; no client id yet.
    assert_eq!(r.unit(0), Some(ClientUnitView::default()));
    assert_eq!(r.client_id(), None);
    assert_eq!(r.exclusive_cores(1), Some(0));

    let mut units: Vec<_> = (0..3).map(sample_client_unit).collect();
    units[2].current_utilisation = f64::NAN;
    w.publish(99, 17, &units, &[4, 0]).unwrap();
    assert_eq!(r.unit(0).unwrap(), units[0]);
    assert_eq!(r.unit(0).unwrap().wait_ns, f64::INFINITY);
    assert_eq!(r.unit(1).unwrap(), units[1]);
    let nan = r.unit(2).unwrap();
    assert!(nan.current_utilisation.is_nan());
    assert_eq!(
        nan.current_utilisation.to_bits(),
        units[2].current_utilisation.to_bits()
    );
    assert_eq!(r.unit(3), None);
    assert_eq!(r.exclusive_cores(0), Some(4));
    assert_eq!(r.exclusive_cores(2), None);
    assert_eq!(r.client_id(), Some(17));
    let s = r.snapshot().unwrap();
    assert_eq!((s.published_at_ns, s.seq, s.client_id), (99, 2, 17));
    assert_eq!(s.units[..2], units[..2]);
    assert_eq!(s.exclusive_cores, vec![4, 0]);
}

#[test]
fn a_private_page_stays_live_after_its_descriptor_is_released() {
    let mut w = PrivateWriter::create(2, 1).unwrap();
    let r = PrivateReader::from_fd(dup(w.fd().unwrap())).unwrap();
    w.release_fd();
    assert!(w.fd().is_none());
    let units: Vec<_> = (0..2).map(sample_client_unit).collect();
    w.publish(7, 3, &units, &[1]).unwrap();
    let s = r.snapshot().unwrap();
    assert_eq!((s.published_at_ns, s.client_id), (7, 3));
    assert_eq!(s.units, units);
}

#[test]
fn private_page_carries_coordination_targets_until_they_are_withdrawn() {
    let mut w = PrivateWriter::create(3, 1).unwrap();
    let r = PrivateReader::from_fd(dup(w.fd().unwrap())).unwrap();
    let units: Vec<_> = (0..3).map(sample_client_unit).collect();
    let mut fractions = Vec::new();
    // Before any publish, and after a plain publish: no targets.
    assert_eq!(r.targets_into(&mut fractions), None);
    w.publish(1, 5, &units, &[0]).unwrap();
    assert_eq!(r.targets_into(&mut fractions), None);
    assert!(fractions.is_empty());
    assert_eq!(r.snapshot().unwrap().targets, None);

    let t = Targets {
        rate: 42.5,
        fractions: vec![0.25, 0.0, 0.75],
    };
    w.publish_with_targets(2, 5, &units, &[0], Some(&t))
        .unwrap();
    assert_eq!(r.targets_into(&mut fractions), Some(42.5));
    assert_eq!(fractions, t.fractions);
    assert_eq!(r.snapshot().unwrap().targets, Some(t.clone()));
    // The other fields are untouched by the targets.
    assert_eq!(r.unit(1).unwrap(), units[1]);

    // A wrong number of fractions writes nothing.
    let short = Targets {
        rate: 1.0,
        fractions: vec![1.0],
    };
    assert!(
        w.publish_with_targets(3, 5, &units, &[0], Some(&short))
            .is_err()
    );
    assert_eq!(r.targets_into(&mut fractions), Some(42.5));

    // Withdrawn: the next plain publish clears them.
    w.publish(4, 5, &units, &[0]).unwrap();
    assert_eq!(r.targets_into(&mut fractions), None);
}

// ---------------------------------------------------------------- rejection

/// A memfd of `size` bytes starting with `head`, sealed against shrinking
/// when `seal`.
fn forged(head: &[u64], size: u64, seal: bool) -> OwnedFd {
    let fd = rustix::fs::memfd_create("forged", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
        .unwrap();
    rustix::fs::ftruncate(&fd, size).unwrap();
    let bytes: Vec<u8> = head.iter().flat_map(|v| v.to_le_bytes()).collect();
    let n = bytes.len().min(size as usize);
    assert_eq!(rustix::io::pwrite(&fd, &bytes[..n], 0).unwrap(), n);
    if seal {
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW).unwrap();
    }
    fd
}

fn head(magic: u64, version: u64, n_units: u64, n_cpu_kinds: u64) -> [u64; 8] {
    let mut h = [0; 8];
    h[header::MAGIC] = magic;
    h[header::VERSION] = version;
    h[header::N_UNITS] = n_units;
    h[header::N_CPU_KINDS] = n_cpu_kinds;
    h
}

/// Bytes of a global page with `n_units` units and `n_cpu_kinds` kinds.
fn global_bytes(n_units: u64, n_cpu_kinds: u64) -> u64 {
    8 * (8 + 9 * n_units + 81 * n_cpu_kinds)
}

#[test]
fn a_well_formed_forged_page_is_accepted() {
    // The control for the rejection tests below: they differ from this in one thing.
    let fd = forged(
        &head(GLOBAL_MAGIC, LAYOUT_VERSION, 2, 1),
        global_bytes(2, 1),
        true,
    );
    let r = GlobalReader::from_fd(fd).unwrap();
    assert_eq!(r.unit(1), Some(GlobalUnit::default()));
}

#[test]
fn reader_rejects_wrong_magic() {
    let fd = forged(
        &head(0x1234, LAYOUT_VERSION, 2, 1),
        global_bytes(2, 1),
        true,
    );
    assert!(matches!(
        GlobalReader::from_fd(fd),
        Err(ViewError::BadMagic {
            expected: PageKind::Global,
            found: 0x1234
        })
    ));
    // A private page is not a global page, and the other way round.
    let p = PrivateWriter::create(2, 1).unwrap();
    assert!(matches!(
        GlobalReader::from_fd(dup(p.fd().unwrap())),
        Err(ViewError::BadMagic { found, .. }) if found == PRIVATE_MAGIC
    ));
    let g = GlobalWriter::create(2, 1).unwrap();
    assert!(matches!(
        PrivateReader::from_fd(dup(g.fd())),
        Err(ViewError::BadMagic { .. })
    ));
}

#[test]
fn reader_rejects_wrong_version() {
    let fd = forged(
        &head(GLOBAL_MAGIC, LAYOUT_VERSION + 1, 2, 1),
        global_bytes(2, 1),
        true,
    );
    let err = GlobalReader::from_fd(fd).err().unwrap();
    assert!(matches!(err, ViewError::BadVersion { found, .. } if found == LAYOUT_VERSION + 1));
    assert!(err.to_string().contains("layout version"), "{err}");
}

#[test]
fn reader_rejects_impossible_counts() {
    let fd = forged(
        &head(GLOBAL_MAGIC, LAYOUT_VERSION, 1 << 60, 1),
        global_bytes(2, 1),
        true,
    );
    assert!(matches!(
        GlobalReader::from_fd(fd),
        Err(ViewError::BadCounts { .. })
    ));
    assert!(matches!(
        GlobalWriter::create(layout::MAX_UNITS + 1, 0),
        Err(ViewError::BadCounts { .. })
    ));
}

#[test]
fn reader_rejects_a_memfd_smaller_or_larger_than_declared() {
    // Header says 4 units and 2 kinds, the file holds a page for 2 and 1.
    let fd = forged(
        &head(GLOBAL_MAGIC, LAYOUT_VERSION, 4, 2),
        global_bytes(2, 1),
        true,
    );
    assert!(matches!(
        GlobalReader::from_fd(fd),
        Err(ViewError::SizeMismatch { expected, actual, .. })
            if expected == global_bytes(4, 2) && actual == global_bytes(2, 1)
    ));
    let fd = forged(
        &head(GLOBAL_MAGIC, LAYOUT_VERSION, 2, 1),
        global_bytes(2, 1) + 4,
        true,
    );
    assert!(matches!(
        GlobalReader::from_fd(fd),
        Err(ViewError::SizeMismatch { .. })
    ));
    // Too small for even a header.
    let fd = forged(&head(GLOBAL_MAGIC, LAYOUT_VERSION, 0, 0), 40, true);
    assert!(matches!(
        GlobalReader::from_fd(fd),
        Err(ViewError::TooSmall {
            actual: 40,
            min: 64
        })
    ));
}

#[test]
fn reader_rejects_an_unsealed_memfd() {
    // Right contents, but the sender could still shrink it under us.
    let fd = forged(
        &head(GLOBAL_MAGIC, LAYOUT_VERSION, 2, 1),
        global_bytes(2, 1),
        false,
    );
    assert!(matches!(
        GlobalReader::from_fd(fd),
        Err(ViewError::NotSealed { .. })
    ));
}

#[test]
fn reader_rejects_regular_files_and_other_fds() {
    let dir = std::env::temp_dir().join(format!("hetsched-views-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("page");
    // A plain file of the wrong size: too small for a header.
    File::create(&path).unwrap().write_all(b"HSGLOBAL").unwrap();
    let file = File::open(&path).unwrap();
    assert!(matches!(
        GlobalReader::from_fd(file.into()),
        Err(ViewError::TooSmall { actual: 8, .. })
    ));
    // A plain file whose size matches its header: still no seals.
    let bytes: Vec<u8> = head(GLOBAL_MAGIC, LAYOUT_VERSION, 2, 1)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .chain(std::iter::repeat(0))
        .take(global_bytes(2, 1) as usize)
        .collect();
    std::fs::write(&path, bytes).unwrap();
    let file = File::open(&path).unwrap();
    assert!(matches!(
        GlobalReader::from_fd(file.into()),
        Err(ViewError::NotSealed { .. })
    ));
    // A directory and a socket are not files at all.
    let d = File::open(&dir).unwrap();
    assert!(matches!(
        PrivateReader::from_fd(d.into()),
        Err(ViewError::NotRegularFile { .. })
    ));
    let (sock, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
    assert!(matches!(
        GlobalReader::from_fd(sock.into()),
        Err(ViewError::NotRegularFile { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

// ------------------------------------------------------------ read-only fds

#[test]
fn pages_are_sealed_and_receivers_cannot_write() {
    let mut w = GlobalWriter::create(2, 1).unwrap();
    let received = dup(w.fd());
    assert_eq!(rustix::fs::fcntl_get_seals(&received).unwrap(), PAGE_SEALS);
    let len = global_bytes(2, 1) as usize;

    // F_SEAL_FUTURE_WRITE: no new writable shared mapping, no write(2)...
    assert_eq!(try_map_writable(received.as_fd(), len), Err(Errno::PERM));
    assert_eq!(rustix::io::pwrite(&received, &[1], 0), Err(Errno::PERM));
    // ...even through a fresh read-write open of the same memfd.
    let reopened = File::options()
        .read(true)
        .write(true)
        .open(format!("/proc/self/fd/{}", received.as_raw_fd()))
        .unwrap();
    assert_eq!(try_map_writable(reopened.as_fd(), len), Err(Errno::PERM));
    // No growing, shrinking or unsealing either.
    assert!(rustix::fs::ftruncate(&received, 0).is_err());
    assert!(rustix::fs::ftruncate(&received, 1 << 20).is_err());
    assert!(rustix::fs::fcntl_add_seals(&received, SealFlags::WRITE).is_err());

    // The reader's own read-only mapping cannot be upgraded.
    let r = GlobalReader::from_fd(received).unwrap();
    assert!(try_mprotect_writable(r.page().mapping()).is_err());

    // The writer's existing mapping keeps working.
    w.publish(5, &[sample_unit(0), sample_unit(1)], &[sample_kind(0)])
        .unwrap();
    assert_eq!(r.unit(1), Some(sample_unit(1)));
}

// ------------------------------------------------------------- torn reads

/// Every field of unit `i` in generation `g` is a function of `g` (and `i`),
/// so a reader can tell a mix of two generations from one.
fn unit_of_gen(g: u64, i: usize) -> GlobalUnit {
    let g32 = g as u32;
    GlobalUnit {
        view: UnitView {
            busy_fraction: g as f64,
            avg_task_ns: g as f64 + 0.5,
            active_clients: g32,
            queued: g32 ^ 0xa5a5_a5a5,
            running: g32.wrapping_mul(3),
        },
        queued_by_class: [g32 + 1, g32 + 2, g32 + 3],
        busy_ns_total: g * 8 + i as u64,
    }
}

fn kind_of_gen(g: u64) -> CpuKindView {
    CpuKindView {
        threads_by_nice: std::array::from_fn(|n| g as u32 + n as u32),
        time_ratio_by_nice: std::array::from_fn(|n| g as f64 / (n + 1) as f64),
        exclusive_cores_free: g as u32,
    }
}

/// The generation unit `i` was published in, if all its fields agree.
fn gen_of_unit(u: &GlobalUnit, i: usize) -> u64 {
    let g = u.view.busy_fraction as u64;
    assert_eq!(*u, unit_of_gen(g, i), "torn unit {i}");
    g
}

const UNITS: usize = 4;
const KINDS: usize = 2;

fn publish_gen(w: &mut GlobalWriter, g: u64) {
    let units: [GlobalUnit; UNITS] = std::array::from_fn(|i| unit_of_gen(g, i));
    w.publish(g, &units, &[kind_of_gen(g); KINDS]).unwrap();
}

/// Reads `r` for `time`, asserting every read is consistent and generations
/// never go backwards. Returns (reads, distinct generations seen).
fn check_reads(r: &GlobalReader, time: Duration) -> (u64, u64) {
    let mut last = 0;
    let mut reads = 0;
    let mut gens = 0;
    let mut snap = GlobalSnapshot::default();
    let mut see = |g: u64, last: &mut u64| {
        assert!(g >= *last, "generation went back from {last} to {g}");
        if g > *last {
            gens += 1;
        }
        *last = g;
    };
    let end = Instant::now() + time;
    while Instant::now() < end {
        for i in 0..UNITS {
            let g = gen_of_unit(&r.unit(i).unwrap(), i);
            see(g, &mut last);
        }
        let k = r.cpu_kind(reads as usize % KINDS).unwrap();
        let g = k.exclusive_cores_free as u64;
        assert_eq!(k, kind_of_gen(g), "torn CPU kind");
        see(g, &mut last);
        r.snapshot_into(&mut snap).unwrap();
        let g = snap.published_at_ns;
        assert_eq!(snap.seq, 2 * g, "seq and publish time disagree");
        for (i, u) in snap.units.iter().enumerate() {
            assert_eq!(gen_of_unit(u, i), g, "snapshot mixes generations");
        }
        assert!(snap.kinds.iter().all(|k| *k == kind_of_gen(g)));
        see(g, &mut last);
        reads += UNITS as u64 + 2;
    }
    (reads, gens)
}

#[test]
fn concurrent_readers_never_see_torn_or_older_values() {
    let mut w = GlobalWriter::create(UNITS, KINDS).unwrap();
    publish_gen(&mut w, 1);
    let readers: Vec<_> = (0..2)
        .map(|_| Arc::new(GlobalReader::from_fd(dup(w.fd())).unwrap()))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(3));
    let writer = {
        let (stop, start) = (stop.clone(), start.clone());
        std::thread::spawn(move || {
            start.wait();
            let mut g = 1;
            while !stop.load(Ordering::Relaxed) {
                g += 1;
                publish_gen(&mut w, g);
                // A short pause, so that whole-page snapshots (longer than
                // one publish) also get through while the writer runs.
                for _ in 0..g % 64 {
                    std::hint::spin_loop();
                }
            }
            g
        })
    };
    let handles: Vec<_> = readers
        .into_iter()
        .map(|r| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                check_reads(&r, Duration::from_millis(300))
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    let published = writer.join().unwrap();
    // Consistency is checked on every read; these only show the test
    // overlapped reads with publishes (loose: CI machines may be loaded).
    for (reads, gens) in results {
        println!("{reads} reads over {gens} generations, {published} publishes");
        assert!(reads > 100, "only {reads} reads");
        assert!(gens >= 2, "reads saw only {gens} generations");
    }
    assert!(published > 100, "only {published} publishes");
}

/// The child half of [`cross_process_reader_sees_consistent_publishes`]:
/// does nothing unless started by it.
#[test]
fn cross_process_child() {
    let Ok(fd) = std::env::var("HETSCHED_VIEWS_CHILD_FD") else {
        return;
    };
    // The parent left the memfd open in us without CLOEXEC; open our own
    // description of it, as a client holding a received fd would have.
    let path = format!("/proc/self/fd/{fd}");
    let len = global_bytes(UNITS as u64, KINDS as u64) as usize;
    // Read-write open or not, the seal forbids a writable mapping.
    let rw = File::options().read(true).write(true).open(&path).unwrap();
    assert_eq!(try_map_writable(rw.as_fd(), len), Err(Errno::PERM));
    let fd: OwnedFd = File::open(&path).unwrap().into();
    assert!(try_map_writable(fd.as_fd(), len).is_err());
    let r = GlobalReader::from_fd(fd).unwrap();
    let (reads, gens) = check_reads(&r, Duration::from_millis(300));
    // Progress only needs to be shown, not fast: under a loaded CI machine
    // the child may get little CPU. Consistency is what `check_reads` asserts.
    assert!(
        reads > 100 && gens >= 2,
        "{reads} reads, {gens} generations"
    );
    println!("child: {reads} reads over {gens} generations");
}

#[test]
fn cross_process_reader_sees_consistent_publishes() {
    if std::env::var_os("HETSCHED_VIEWS_CHILD_FD").is_some() {
        return;
    }
    let mut w = GlobalWriter::create(UNITS, KINDS).unwrap();
    publish_gen(&mut w, 1);
    let inherited = dup(w.fd());
    rustix::io::fcntl_setfd(&inherited, rustix::io::FdFlags::empty()).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tests::cross_process_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("HETSCHED_VIEWS_CHILD_FD", inherited.as_raw_fd().to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(inherited);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut g = 1;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "child reader hung");
        for _ in 0..100 {
            g += 1;
            publish_gen(&mut w, g);
        }
        std::thread::yield_now();
    };
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert!(status.success(), "child failed: {out}");
    assert!(
        out.contains("child: ") && out.contains("1 passed"),
        "child test did not run: {out}"
    );
}

// --------------------------------------------------------------- proptest

fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => any::<f64>(),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(f64::NAN),
        1 => Just(-0.0),
    ]
}

prop_compose! {
    fn any_unit_view()(
        busy_fraction in any_f64(),
        avg_task_ns in any_f64(),
        active_clients in any::<u32>(),
        queued in any::<u32>(),
        running in any::<u32>(),
    ) -> UnitView {
        UnitView { busy_fraction, avg_task_ns, active_clients, queued, running }
    }
}

prop_compose! {
    fn any_client_unit_view()(
        guaranteed in any_f64(),
        wait_ns in any_f64(),
        current_utilisation in any_f64(),
        throttled in any::<bool>(),
        max_utilisation in any_f64(),
    ) -> ClientUnitView {
        ClientUnitView { guaranteed, wait_ns, current_utilisation, throttled, max_utilisation }
    }
}

/// Field-by-field equality with f64s compared by bits (NaN == NaN, 0 != -0).
fn same_unit_view(a: &UnitView, b: &UnitView) -> bool {
    a.busy_fraction.to_bits() == b.busy_fraction.to_bits()
        && a.avg_task_ns.to_bits() == b.avg_task_ns.to_bits()
        && (a.active_clients, a.queued, a.running) == (b.active_clients, b.queued, b.running)
}

fn same_client_unit_view(a: &ClientUnitView, b: &ClientUnitView) -> bool {
    a.guaranteed.to_bits() == b.guaranteed.to_bits()
        && a.wait_ns.to_bits() == b.wait_ns.to_bits()
        && a.current_utilisation.to_bits() == b.current_utilisation.to_bits()
        && a.throttled == b.throttled
        && a.max_utilisation.to_bits() == b.max_utilisation.to_bits()
}

proptest! {
    #[test]
    fn any_views_round_trip_exactly(
        views in proptest::collection::vec(any_unit_view(), 3),
        classes in any::<[u32; 3]>(),
        busy in any::<u64>(),
        client in proptest::collection::vec(any_client_unit_view(), 3),
        cores in any::<[u32; 2]>(),
        client_id in any::<u32>(),
        now in any::<u64>(),
    ) {
        let mut gw = GlobalWriter::create(3, 0).unwrap();
        let gr = GlobalReader::from_fd(dup(gw.fd())).unwrap();
        let units: Vec<_> = views
            .iter()
            .map(|&view| GlobalUnit { view, queued_by_class: classes, busy_ns_total: busy })
            .collect();
        gw.publish(now, &units, &[]).unwrap();
        for (i, u) in units.iter().enumerate() {
            let got = gr.unit(i).unwrap();
            prop_assert!(same_unit_view(&got.view, &u.view), "{:?} != {:?}", got, u);
            prop_assert_eq!(got.queued_by_class, classes);
            prop_assert_eq!(got.busy_ns_total, busy);
        }
        prop_assert_eq!(gr.snapshot().unwrap().published_at_ns, now);

        let mut pw = PrivateWriter::create(3, 2).unwrap();
        let pr = PrivateReader::from_fd(dup(pw.fd().unwrap())).unwrap();
        pw.publish(now, client_id, &client, &cores).unwrap();
        let s = pr.snapshot().unwrap();
        for (i, want) in client.iter().enumerate() {
            let got = pr.unit(i).unwrap();
            prop_assert!(same_client_unit_view(&got, want), "{:?} != {:?}", got, want);
            prop_assert!(same_client_unit_view(&s.units[i], want));
        }
        prop_assert_eq!(s.exclusive_cores, cores.to_vec());
        prop_assert_eq!(s.client_id, client_id);
    }
}

#[test]
fn reader_refuses_to_map_a_file_larger_than_any_page() {
    let fd = forged(&head(GLOBAL_MAGIC, LAYOUT_VERSION, 2, 1), 1 << 30, true);
    assert!(matches!(
        GlobalReader::from_fd(fd),
        Err(ViewError::SizeMismatch { actual, .. }) if actual == 1 << 30
    ));
}
