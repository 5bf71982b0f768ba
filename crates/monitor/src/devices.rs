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

/// The unit name of OpenCL device `index` (of `hetsched_opencl::devices`).
pub fn opencl_unit_name(index: usize) -> String {
    format!("opencl{index}")
}

/// The unit name of CUDA device `ordinal`.
pub fn cuda_unit_name(ordinal: usize) -> String {
    format!("cuda{ordinal}")
}

/// Every device this build can drive, OpenCL first. `note` receives one
/// line per API that offers none here.
pub fn discover(note: &mut dyn FnMut(String)) -> Vec<RealDevice> {
    let mut out = opencl(note);
    out.extend(cuda(note));
    out
}

#[cfg(feature = "opencl")]
fn opencl(note: &mut dyn FnMut(String)) -> Vec<RealDevice> {
    use hetsched_opencl::DeviceKind;
    match hetsched_opencl::devices() {
        Ok(devices) => devices
            .into_iter()
            .map(|d| RealDevice {
                name: opencl_unit_name(d.index),
                kind: format!("opencl:{}", d.name.trim()),
                class: if d.kind == DeviceKind::Gpu {
                    UnitClass::Gpu
                } else {
                    UnitClass::Accelerator
                },
            })
            .collect(),
        Err(e) => {
            note(format!("no OpenCL device units: {e}"));
            Vec::new()
        }
    }
}

#[cfg(not(feature = "opencl"))]
fn opencl(_note: &mut dyn FnMut(String)) -> Vec<RealDevice> {
    Vec::new()
}

#[cfg(feature = "cuda")]
fn cuda(note: &mut dyn FnMut(String)) -> Vec<RealDevice> {
    match hetsched_cuda::device_names() {
        Ok(names) => names
            .into_iter()
            .enumerate()
            .map(|(ordinal, name)| RealDevice {
                name: cuda_unit_name(ordinal),
                kind: format!("cuda:{}", name.trim()),
                class: UnitClass::Gpu,
            })
            .collect(),
        Err(e) => {
            note(format!("no CUDA device units: {e}"));
            Vec::new()
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn cuda(_note: &mut dyn FnMut(String)) -> Vec<RealDevice> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_apis_own_numbering() {
        assert_eq!(opencl_unit_name(0), "opencl0");
        assert_eq!(cuda_unit_name(3), "cuda3");
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
        if found.is_empty() && cfg!(any(feature = "opencl", feature = "cuda")) {
            assert!(!notes.is_empty());
        }
    }
}
