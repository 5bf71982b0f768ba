//! Task models persist across runs: a round trip through two runtimes on
//! the same model directory, corrupt files of every sort (a warning and a
//! fresh start, never a panic or an error), and atomic writes.
//!
//! Every runtime uses an embedded monitor over a private config (the
//! machine's CPUs plus one emulated device `dev0` of kind `dev`) and a
//! model directory in a tempdir.

use hetsched_core::ids::KindId;
use hetsched_core::task_model::{MODEL_FORMAT_VERSION, ModelSet, TaskModel};
use hetsched_core::unit::UnitClass;
use hetsched_runtime::model_store::{load, model_path, save};
use hetsched_runtime::{Mode, MonitorMode, Runtime, RuntimeOptions, Task};
use std::path::Path;
use std::time::Duration;

mod common;
use common::{Models, spin};

fn runtime(dir: &Path, name: &str) -> Runtime {
    common::embedded(dir, name, "share", Models::In(&dir.join("models")))
}

/// A task whose CPU implementation costs 15 ms of CPU time and whose
/// device implementation 100 µs: once both kinds are known every call
/// goes to the device, so a call on a CPU means profiling.
fn lopsided(name: &str) -> Task<u64, u64> {
    Task::new(name)
        .cpu(|x: &u64| {
            spin(Duration::from_millis(15));
            x ^ 0x5a5a
        })
        .emulated(
            "dev",
            |_: &u64| Duration::from_micros(100),
            |x: &u64| x ^ 0x5a5a,
        )
}

fn kind_of(rt: &Runtime, name: &str) -> KindId {
    KindId(rt.kinds().iter().position(|k| k == name).unwrap() as u16)
}

fn cpu_kind(rt: &Runtime) -> KindId {
    let cpu = rt
        .units()
        .iter()
        .find(|u| u.class == UnitClass::Cpu)
        .unwrap();
    kind_of(rt, &cpu.kind)
}

fn samples(m: &TaskModel, kind: KindId) -> u64 {
    m.kind(kind).map_or(0, |k| k.fit().samples())
}

fn total_samples(m: &TaskModel) -> u64 {
    (0..m.kind_count())
        .map(|k| samples(m, KindId(k as u16)))
        .sum()
}

/// Runs `n` Sync calls and says how many ran on a CPU.
fn run_sync(rt: &Runtime, task: &Task<u64, u64>, n: u64) -> u64 {
    let mut on_cpu = 0;
    for i in 0..n {
        let (got, info) = rt
            .accelerate(task, i, Mode::Sync)
            .unwrap()
            .wait_with_info()
            .unwrap();
        assert_eq!(got, i ^ 0x5a5a);
        if rt.units()[info.unit.index()].class == UnitClass::Cpu {
            on_cpu += 1;
        }
    }
    // A handle is filled just before the model learns from the call.
    rt.wait_all();
    on_cpu
}

/// Files in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn models_survive_a_restart_and_spare_the_second_run_profiling() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    let path = model_path(&models, "models-roundtrip");

    // First run: a fresh model, so profiling puts early calls on the CPU.
    let rt = runtime(dir.path(), "models-roundtrip");
    let task = lopsided("lopsided");
    assert!(rt.model_of("lopsided").is_none(), "no call has run yet");
    let first_on_cpu = run_sync(&rt, &task, 12);
    assert!(first_on_cpu >= 1, "a fresh model never profiled the CPU");
    let (cpu, dev) = (cpu_kind(&rt), kind_of(&rt, "dev"));
    let learned = rt.model_of("lopsided").expect("the task ran");
    let (cpu_n, dev_n) = (samples(&learned, cpu), samples(&learned, dev));
    assert!(cpu_n >= 1 && dev_n >= 1, "{learned:?}");
    assert_eq!(total_samples(&learned), 12);
    let kinds = rt.kinds().to_vec();
    assert!(!path.exists(), "models are written at drop or save_models");
    drop(rt);

    // Drop saved them, atomically: the model file and nothing else.
    assert_eq!(listing(&models), vec!["models-roundtrip.json".to_string()]);
    let on_disk = load(&path, &kinds);
    assert!(on_disk.warning.is_none(), "{:?}", on_disk.warning);
    assert_eq!(on_disk.models.get("lopsided"), Some(&learned));

    // Second run on the same directory: both kinds are known before the
    // first call, so no call is spent profiling the slow CPU.
    let rt = runtime(dir.path(), "models-roundtrip");
    assert_eq!(rt.kinds(), &kinds[..]);
    let task = lopsided("lopsided");
    let on_cpu = run_sync(&rt, &task, 8);
    assert_eq!(on_cpu, 0, "the second run profiled the CPU again");
    let now = rt.model_of("lopsided").unwrap();
    assert_eq!(
        samples(&now, cpu),
        cpu_n,
        "CPU samples were not carried over"
    );
    assert_eq!(samples(&now, dev), dev_n + 8);
    drop(rt);

    let again = load(&path, &kinds);
    assert!(again.warning.is_none());
    assert_eq!(
        samples(again.models.get("lopsided").unwrap(), dev),
        dev_n + 8
    );
    assert_eq!(listing(&models), vec!["models-roundtrip.json".to_string()]);
}

#[test]
fn save_models_writes_now_and_persist_off_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    let rt = runtime(dir.path(), "models-save-now");
    let task = lopsided("t1");
    run_sync(&rt, &task, 4);
    rt.save_models().unwrap();
    let path = model_path(&models, "models-save-now");
    let got = load(&path, rt.kinds());
    assert!(got.warning.is_none());
    assert_eq!(got.models.get("t1"), rt.model_of("t1").as_ref());
    drop(rt);

    // persist_models(false): nothing is read or written.
    let config = dir.path().join("hetsched.toml");
    let other = dir.path().join("other-models");
    let opts = RuntimeOptions::new("models-off")
        .unwrap()
        .monitor(MonitorMode::Embedded)
        .config(&config)
        .model_dir(&other)
        .persist_models(false);
    let rt = Runtime::with_options(opts).unwrap();
    run_sync(&rt, &task, 4);
    rt.save_models().unwrap();
    drop(rt);
    assert!(!other.exists(), "persist_models(false) wrote {other:?}");
}

/// Writes `bytes` as the model file of `app`, then checks that a runtime
/// starts anyway, profiles afresh, and replaces the file with a good one.
fn runtime_recovers_from(dir: &Path, app: &str, bytes: &[u8]) {
    let models = dir.join("models");
    std::fs::create_dir_all(&models).unwrap();
    let path = model_path(&models, app);
    std::fs::write(&path, bytes).unwrap();

    let rt = runtime(dir, app);
    let task = lopsided("lopsided");
    // A fresh start: the CPU is profiled again.
    assert!(
        run_sync(&rt, &task, 6) >= 1,
        "{app}: no profiling after a bad file"
    );
    let m = rt.model_of("lopsided").unwrap();
    assert_eq!(
        total_samples(&m),
        6,
        "{app}: samples from the bad file leaked in: {m:?}"
    );
    let kinds = rt.kinds().to_vec();
    drop(rt);
    let fixed = load(&path, &kinds);
    assert!(fixed.warning.is_none(), "{app}: {:?}", fixed.warning);
    assert_eq!(fixed.models.len(), 1, "{app}: {:?}", fixed.models);
}

/// A valid file for `kinds` holding one model with samples.
fn valid_file(kinds: &[String]) -> serde_json::Value {
    let mut set = ModelSet::new();
    let m = set.get_or_insert("lopsided", kinds.len());
    for k in 0..kinds.len() {
        for i in 0..5 {
            m.try_observe(KindId(k as u16), 0, 1000.0 + f64::from(i))
                .unwrap();
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("m.json");
    save(&p, kinds, &set).unwrap();
    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap()
}

#[test]
fn a_corrupt_model_file_gives_a_warning_and_a_fresh_start() {
    let dir = tempfile::tempdir().unwrap();
    let kinds: Vec<String> = vec!["cpu".into(), "dev".into()];
    let good = valid_file(&kinds);
    let to_bytes = |v: &serde_json::Value| serde_json::to_vec(v).unwrap();

    let mut wrong_format = good.clone();
    wrong_format["format"] = serde_json::json!(MODEL_FORMAT_VERSION + 41);
    let mut wrong_set_version = good.clone();
    wrong_set_version["models"]["version"] = serde_json::json!(MODEL_FORMAT_VERSION + 1);
    let mut other_kinds = good.clone();
    other_kinds["kinds"] = serde_json::json!(["cpu", "tpu"]);
    let mut fewer_kinds = good.clone();
    fewer_kinds["kinds"] = serde_json::json!(["cpu"]);
    let good_text = to_bytes(&good);
    let truncated = good_text[..good_text.len() / 2].to_vec();
    let mut garbage = vec![0u8; 4096];
    for (i, b) in garbage.iter_mut().enumerate() {
        *b = (i * 7919 % 251) as u8;
    }

    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        // Not even UTF-8: reported as unreadable rather than corrupt.
        ("garbage", garbage, "profiled again"),
        (
            "ascii-garbage",
            b"hetsched? \x01 {{{ ]]".to_vec(),
            "corrupt",
        ),
        ("empty", Vec::new(), "corrupt"),
        ("truncated", truncated, "corrupt"),
        ("not-an-object", b"[1, 2, 3]".to_vec(), "corrupt"),
        ("wrong-format", to_bytes(&wrong_format), "format"),
        ("wrong-set-version", to_bytes(&wrong_set_version), "format"),
        ("other-kinds", to_bytes(&other_kinds), "kinds"),
        ("fewer-kinds", to_bytes(&fewer_kinds), "kinds"),
    ];
    for (name, bytes, why) in &cases {
        // load itself: a warning naming the file and the reason, no models.
        let path = dir.path().join(format!("{name}.json"));
        std::fs::write(&path, bytes).unwrap();
        let got = load(&path, &kinds);
        let w = got
            .warning
            .unwrap_or_else(|| panic!("{name}: no warning for a bad file"));
        assert!(w.contains(why), "{name}: {w}");
        assert!(w.contains(&path.display().to_string()), "{name}: {w}");
        assert!(got.models.is_empty(), "{name}: {:?}", got.models);
    }
    // The good file itself loads without a warning.
    let path = dir.path().join("good.json");
    std::fs::write(&path, &good_text).unwrap();
    let got = load(&path, &kinds);
    assert!(got.warning.is_none(), "{:?}", got.warning);
    assert_eq!(got.models.len(), 1);
    // A missing file is a quiet fresh start.
    let got = load(&dir.path().join("absent.json"), &kinds);
    assert!(got.warning.is_none() && got.models.is_empty());
    // A path that cannot be read as a file is a warning too.
    let not_a_file = dir.path().join("a-directory.json");
    std::fs::create_dir(&not_a_file).unwrap();
    let got = load(&not_a_file, &kinds);
    assert!(got.warning.is_some_and(|w| w.contains("cannot read")));

    // A runtime over each bad file starts, profiles afresh, and leaves a
    // good file behind. Its own kinds are what the file is checked against.
    let rt_dir = tempfile::tempdir().unwrap();
    let probe = runtime(rt_dir.path(), "models-probe-kinds");
    let rt_kinds = probe.kinds().to_vec();
    drop(probe);
    let mut own_kinds_wrong_format = valid_file(&rt_kinds);
    own_kinds_wrong_format["format"] = serde_json::json!(MODEL_FORMAT_VERSION + 41);
    let mut own_kinds_reordered = valid_file(&rt_kinds);
    let mut reversed = rt_kinds.clone();
    reversed.reverse();
    own_kinds_reordered["kinds"] = serde_json::json!(reversed);
    runtime_recovers_from(rt_dir.path(), "models-bad-garbage", &cases[0].1);
    runtime_recovers_from(rt_dir.path(), "models-bad-empty", b"");
    runtime_recovers_from(
        rt_dir.path(),
        "models-bad-format",
        &to_bytes(&own_kinds_wrong_format),
    );
    runtime_recovers_from(
        rt_dir.path(),
        "models-bad-kinds",
        &to_bytes(&own_kinds_reordered),
    );
}

#[test]
fn save_is_atomic_and_leaves_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let kinds: Vec<String> = vec!["cpu".into(), "dev".into()];
    // The directory is created, however deep.
    let nested = dir.path().join("a").join("b");
    let path = model_path(&nested, "app");
    let mut set = ModelSet::new();
    set.get_or_insert("t", 2)
        .try_observe(KindId(1), 10, 500.0)
        .unwrap();
    save(&path, &kinds, &set).unwrap();
    assert_eq!(listing(&nested), vec!["app.json".to_string()]);

    // Overwrites replace the whole file; readers only ever see a complete
    // one. A reader thread loads while the main thread saves repeatedly.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (stop, path, kinds) = (stop.clone(), path.clone(), kinds.clone());
        std::thread::spawn(move || {
            let mut reads = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || reads < 10 {
                let got = load(&path, &kinds);
                assert!(got.warning.is_none(), "a reader saw {:?}", got.warning);
                assert_eq!(got.models.len(), 1);
                reads += 1;
            }
        })
    };
    for i in 0..200 {
        let m = set.get_or_insert("t", 2);
        m.try_observe(KindId(0), i, 100.0 + i as f64).unwrap();
        save(&path, &kinds, &set).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap();
    assert_eq!(load(&path, &kinds).models, set);
    assert_eq!(listing(&nested), vec!["app.json".to_string()]);
}

#[test]
fn model_paths_are_safe_file_names() {
    let d = Path::new("/x");
    assert_eq!(model_path(d, "demo-aes"), d.join("demo-aes.json"));
    assert_eq!(model_path(d, "my app/v2"), d.join("my_app_v2.json"));
    assert_eq!(
        model_path(d, "../../etc/passwd"),
        d.join("app.._.._etc_passwd.json")
    );
    assert_eq!(model_path(d, ""), d.join("app.json"));
    assert_eq!(model_path(d, ".hidden"), d.join("app.hidden.json"));
    assert_eq!(model_path(d, "naïve"), d.join("na_ve.json"));
    // Every result stays directly inside the directory.
    for name in ["a/b", "..", "/abs", "x\0y", "κ"] {
        assert_eq!(model_path(d, name).parent(), Some(d), "{name:?}");
    }
}
