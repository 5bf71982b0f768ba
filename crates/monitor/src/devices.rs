//! Real devices as units (`device_units = true`, the default): every
//! OpenCL device of the ICD loader becomes `opencl<N>` and every CUDA
//! device `cuda<N>`, each with an agent. Applications run their own
//! kernels there; the agent only decides who may, when (the dispatch
//! gate: `RequestDispatch` → `Granted` → `TaskCompleted`).
//!
//! Discovery never opens a context: listing a device must not take its
//! memory or its driver threads. Where a driver is absent, one line says
//! so and the daemon starts without those units.

use hetsched_core::unit::UnitClass;

/// One real device to give a unit to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RealDevice {
    /// The unit's name: `opencl<N>` / `cuda<N>`, `N` the device's index in
    /// its API's own enumeration (what a runtime opening it uses too).
    pub name: String,
    /// The unit kind: `opencl:<device name>` / `cuda:<device name>`,
    /// the kind a runtime gives the same device, so models carry over.
    pub kind: String,
    pub class: UnitClass,
}

/// The unit name of device `index` of API `api`
/// ([`crate::kernel_exec::device_api::DeviceApi::name`]): `opencl0`.
pub fn unit_name(api: &str, index: usize) -> String {
    format!("{api}{index}")
}

/// Every device this build can drive, API by API
/// ([`crate::kernel_exec::apis::all`]: OpenCL first). `note` receives one
/// line per API that offers none here.
pub fn discover(note: &mut dyn FnMut(String)) -> Vec<RealDevice> {
    let mut out = Vec::new();
    for api in crate::kernel_exec::apis::all() {
        match api.list() {
            Ok(devices) => out.extend(devices.into_iter().map(|d| RealDevice {
                name: unit_name(api.name(), d.index),
                kind: format!("{}:{}", api.name(), d.name),
                class: d.class,
            })),
            Err(e) => note(format!("no {} device units: {e}", api.label())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_apis_own_numbering() {
        assert_eq!(unit_name("opencl", 0), "opencl0");
        assert_eq!(unit_name("cuda", 3), "cuda3");
    }

    #[test]
    fn discovery_names_every_device_once_and_never_panics() {
        let mut notes = Vec::new();
        let found = discover(&mut |n| notes.push(n));
        let mut names: Vec<&str> = found.iter().map(|d| d.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), found.len(), "duplicate unit names: {found:?}");
        for d in &found {
            let api = if d.name.starts_with("opencl") {
                "opencl:"
            } else {
                "cuda:"
            };
            assert!(d.kind.starts_with(api), "{d:?}");
        }
        // Without a device of either API, the reason is a note, not a panic.
        if found.is_empty() && !crate::kernel_exec::apis::all().is_empty() {
            assert!(!notes.is_empty());
        }
    }
}
