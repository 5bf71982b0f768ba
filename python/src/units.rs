//! `hetsched.Unit`: one processing unit as the daemon describes it.

use hetsched_protocol::UnitInfo;
use pyo3::prelude::*;

/// A processing unit: a CPU kind, a GPU, an accelerator or an emulated device.
#[pyclass(frozen, get_all, module = "hetsched")]
#[derive(Clone, Debug)]
pub struct Unit {
    /// The unit's index in the daemon's list.
    pub id: u16,
    /// Its name (`cpu-big`, `opencl0`, `emu-gpu0` …): what `dispatch` and
    /// `set_shares` take.
    pub name: String,
    /// Units of one kind run the same implementations (`opencl:<device>`, `emu-gpu` …).
    pub kind: String,
    /// `cpu`, `gpu`, `accelerator` or `emulated`.
    pub unit_class: String,
    /// The policy its agent runs (`share`, `fifo`, `priority` …).
    pub policy: String,
    /// Tasks it runs at once (cores of a CPU kind, streams of a device).
    pub slots: u32,
    /// Speed relative to one core of the reference CPU kind.
    pub relative_speed: f64,
    /// The daemon runs this unit's work itself (an emulated device).
    pub emulated: bool,
    /// Kernels the daemon serves on this unit (empty for most units).
    pub kernels: Vec<String>,
}

impl From<&UnitInfo> for Unit {
    fn from(u: &UnitInfo) -> Self {
        Unit {
            id: u.id.0,
            name: u.name.clone(),
            kind: u.kind.clone(),
            unit_class: u.class.name().to_string(),
            policy: u.policy.name().to_string(),
            slots: u.slots,
            relative_speed: u.relative_speed,
            emulated: u.emulated,
            kernels: u.kernels.clone(),
        }
    }
}

#[pymethods]
impl Unit {
    fn __repr__(&self) -> String {
        format!(
            "Unit(name={:?}, kind={:?}, unit_class={:?}, slots={}, relative_speed={})",
            self.name, self.kind, self.unit_class, self.slots, self.relative_speed
        )
    }
}
