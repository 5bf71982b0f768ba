//! A stand-in device backend, added to a runtime with one registration
//! ([`RuntimeOptions::backend`]) and nothing else: its device becomes a
//! unit of its own, a task's implementation for it runs there on the
//! device its runner hands over, and a task without one never goes there.

use hetsched_core::unit::UnitClass;
use hetsched_runtime::{
    DeviceBackend, DeviceCall, DeviceRunner, Mode, MonitorMode, OpenedDevice, Ran, Runtime,
    RuntimeOptions, Task, TaskError,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The stand-in's API name, under which tasks give their implementation.
const FAKE: &str = "fake";

/// What an implementation for the stand-in is handed: a device that adds
/// its `offset`.
struct FakeDevice {
    offset: u64,
}

/// The stand-in backend: one device, counting the calls it ran.
struct FakeBackend {
    calls: Arc<AtomicU64>,
}

struct FakeRunner {
    device: FakeDevice,
    calls: Arc<AtomicU64>,
}

impl DeviceBackend for FakeBackend {
    fn api(&self) -> &'static str {
        FAKE
    }

    fn open(&self) -> Vec<OpenedDevice> {
        let runner = FakeRunner {
            device: FakeDevice { offset: 1000 },
            calls: Arc::clone(&self.calls),
        };
        vec![OpenedDevice::new(
            "fake0",
            "fake:stand-in",
            UnitClass::Accelerator,
            Box::new(runner),
        )]
    }
}

impl DeviceRunner for FakeRunner {
    fn run(&mut self, call: &mut DeviceCall<'_>) -> Ran {
        call.run_on(&self.device);
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ran {
            exec_ns: 1_000.0,
            device_ns: 1_000,
        }
    }
}

/// An embedded runtime with the stand-in registered, and its call count.
fn runtime(name: &str) -> (Runtime, Arc<AtomicU64>) {
    let calls = Arc::new(AtomicU64::new(0));
    let backend = FakeBackend {
        calls: Arc::clone(&calls),
    };
    let mut opts = RuntimeOptions::new(name)
        .unwrap()
        .monitor(MonitorMode::Embedded)
        .persist_models(false)
        .backend(Arc::new(backend));
    opts.opencl = false;
    (Runtime::with_options(opts).unwrap(), calls)
}

#[test]
fn a_stand_in_backend_is_a_unit_that_runs_its_implementation() {
    let (rt, calls) = runtime("fake-device");
    let fake = rt
        .units()
        .iter()
        .find(|u| u.name == "fake0")
        .unwrap_or_else(|| panic!("no unit for the stand-in: {:?}", rt.units()));
    assert_eq!(fake.kind, "fake:stand-in");
    let task = Task::new("add-offset")
        .on_device(FAKE, |d: &FakeDevice, x: &u64| Ok(x + d.offset))
        .sizes(|_| (8, 8));
    for x in 0..10u64 {
        let (got, info) = rt
            .accelerate(&task, x, Mode::Sync)
            .unwrap()
            .wait_with_info()
            .unwrap();
        assert_eq!(got, x + 1000);
        assert_eq!(&*info.unit_name, "fake0");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 10);
}

#[test]
fn a_task_without_an_implementation_for_it_never_runs_there() {
    let (rt, calls) = runtime("fake-device-cpu");
    let task = Task::new("double").cpu(|x: &u64| x * 2);
    for x in 0..5u64 {
        let (got, info) = rt
            .accelerate(&task, x, Mode::Sync)
            .unwrap()
            .wait_with_info()
            .unwrap();
        assert_eq!(got, x * 2);
        assert_ne!(&*info.unit_name, "fake0");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[test]
fn an_implementation_for_another_device_type_fails_its_call_saying_so() {
    let (rt, _calls) = runtime("fake-device-mistyped");
    let task = Task::new("mistyped").on_device(FAKE, |_: &String, x: &u64| Ok(*x));
    let err = rt
        .accelerate(&task, 1u64, Mode::Sync)
        .unwrap()
        .wait()
        .unwrap_err();
    match err {
        TaskError::DeviceFailed { unit, message, .. } => {
            assert_eq!(unit, "fake0");
            assert!(message.contains("another type of device"), "{message}");
        }
        other => panic!("expected a device failure, got {other:?}"),
    }
}
