//! A stand-in device API (a fake device, in this file only), handed to
//! `served_units` as its one registration: its devices become served
//! units numbered after the others, with its kernels, and their backends
//! run calls; an API whose driver is absent adds none and stops nothing.

use super::*;
use crate::kernel_exec::device_api::{ExecutorDevice, ListedDevice, ServedDevice};
use crate::kernel_exec::execute;
use hetsched_protocol::kernel_call::{Kernel, decode};

/// Two devices that count bytes (the histogram), in plain Rust.
struct FakeApi;

/// One device of [`FakeApi`].
struct FakeDevice;

impl KernelBackend for FakeDevice {
    fn kernels(&self) -> &[Kernel] {
        &[Kernel::Histogram]
    }

    fn run(&mut self, kernel: Kernel, input: &[u8], _aux: &[u8]) -> Result<Vec<u8>, String> {
        if kernel != Kernel::Histogram {
            return Err(format!("the stand-in does not run {kernel}"));
        }
        let mut counts = [0u32; 256];
        for &b in input {
            counts[b as usize] += 1;
        }
        Ok(counts.iter().flat_map(|c| c.to_le_bytes()).collect())
    }
}

fn listed(index: usize) -> ListedDevice {
    ListedDevice {
        index,
        name: "stand-in".into(),
        class: UnitClass::Accelerator,
    }
}

impl DeviceApi for FakeApi {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn label(&self) -> &'static str {
        "Fake"
    }

    fn config_key(&self) -> &'static str {
        "fake_units"
    }

    fn list(&self) -> Result<Vec<ListedDevice>, String> {
        Ok(vec![listed(0), listed(1)])
    }

    fn open_served(&self, _max_kept_bytes: u64) -> Result<Vec<ServedDevice>, String> {
        Ok((0..2)
            .map(|i| ServedDevice {
                listed: listed(i),
                backend: Box::new(FakeDevice),
            })
            .collect())
    }

    fn open_for_executor(&self, _index: usize, _max_kept: u64) -> Result<ExecutorDevice, String> {
        Err("the stand-in runs only its built-in kernels".into())
    }
}

/// An API whose driver is absent.
struct AbsentApi;

impl DeviceApi for AbsentApi {
    fn name(&self) -> &'static str {
        "absent"
    }

    fn label(&self) -> &'static str {
        "Absent"
    }

    fn config_key(&self) -> &'static str {
        "absent_units"
    }

    fn list(&self) -> Result<Vec<ListedDevice>, String> {
        Err("no driver".into())
    }

    fn open_served(&self, _max_kept_bytes: u64) -> Result<Vec<ServedDevice>, String> {
        Err("no driver".into())
    }

    fn open_for_executor(&self, _index: usize, _max_kept: u64) -> Result<ExecutorDevice, String> {
        Err("no driver".into())
    }
}

#[test]
fn a_stand_in_api_serves_its_devices_as_units_after_the_others() {
    let apis: [&dyn DeviceApi; 2] = [&AbsentApi, &FakeApi];
    let mut served = served_units(&apis, |_| true, 1 << 20, 5, 3);
    let names: Vec<&str> = served.iter().map(|s| s.setup.unit.name.as_str()).collect();
    assert_eq!(names, ["served-fake0", "served-fake1"]);
    for (i, s) in served.iter().enumerate() {
        assert_eq!(s.setup.unit.id.index(), 5 + i);
        assert_eq!(s.setup.unit.kind.index(), 3 + i);
        assert_eq!(s.setup.kind_name, "fake:stand-in");
        assert_eq!(s.setup.unit.class, UnitClass::Accelerator);
        assert_eq!(s.setup.kernels, [Kernel::Histogram]);
    }
    // The backend behind a served unit runs a call against a region.
    let (daemon, client) = hetsched_views::data_region::pair(8192).unwrap();
    client.write(0, &[7u8; 100]).unwrap();
    let call = decode(&[1, 1, 0, 100, 4096, 1024, 0], 8192).unwrap();
    execute(&mut *served[1].backend, &call, &daemon, &mut Vec::new()).unwrap();
    let mut counts = [0u8; 1024];
    client.read(4096, &mut counts).unwrap();
    assert_eq!(&counts[7 * 4..7 * 4 + 4], &100u32.to_le_bytes());
}

#[test]
fn an_api_the_config_does_not_ask_for_serves_nothing() {
    let apis: [&dyn DeviceApi; 1] = [&FakeApi];
    assert!(served_units(&apis, |api| api.name() != "fake", 0, 0, 0).is_empty());
}
