//! Which unit each device this process opens (OpenCL, CUDA) becomes: the
//! monitor's unit for the same device when the monitor arbitrates it (a
//! daemon with `device_units`), so every call waits for that unit's agent;
//! else a unit of this process's own, numbered after the monitor's.

use crate::scheduler::Backend;
use crate::scheduler::device_worker::DeviceWorker;
use hetsched_core::ids::UnitId;
use hetsched_protocol::UnitInfo;

/// The units devices were given, for [`crate::scheduler::Scheduler::new`].
pub(crate) struct DeviceUnits<'m> {
    monitor: &'m [UnitInfo],
    /// Units this process drives unarbitrated, after the monitor's.
    pub local: Vec<(UnitInfo, Backend)>,
    /// Monitor units this process runs calls on once granted.
    pub gated: Vec<(UnitInfo, Backend)>,
}

impl<'m> DeviceUnits<'m> {
    pub fn new(monitor: &'m [UnitInfo]) -> Self {
        DeviceUnits {
            monitor,
            local: Vec::new(),
            gated: Vec::new(),
        }
    }

    /// Gives `device` (described by `info`, driven as `backend`) a unit
    /// and returns its worker.
    pub fn assign<D>(&mut self, info: UnitInfo, backend: Backend, device: D) -> DeviceWorker<D> {
        // A device the daemon also serves (`served-opencl<N>`) has one
        // agent for both paths: gated calls wait for that unit's slot.
        let served = format!("served-{}", info.name);
        let found = self
            .monitor
            .iter()
            .find(|m| m.name == info.name)
            .or_else(|| self.monitor.iter().find(|m| m.name == served));
        match found {
            Some(m) if arbitrates(m, &info) => {
                let unit = m.id.index();
                let merged = UnitInfo {
                    id: m.id,
                    policy: m.policy,
                    ..info
                };
                self.gated.push((merged, backend.gated()));
                DeviceWorker {
                    unit,
                    device,
                    gated: true,
                }
            }
            found => {
                let mut info = info;
                if let Some(m) = found {
                    // Not the same device (another ICD order or device
                    // list than the daemon's), or one the daemon runs
                    // kernels on itself: keep the names apart.
                    tracing::warn!(
                        "the monitor's {} is {}, not this process's {}; \
                         driving the device unarbitrated as {}-own",
                        m.name,
                        m.kind,
                        info.kind,
                        info.name
                    );
                    info.name = format!("{}-own", info.name);
                }
                let unit = self.monitor.len() + self.local.len();
                info.id = UnitId(unit as u16);
                self.local.push((info, backend));
                DeviceWorker {
                    unit,
                    device,
                    gated: false,
                }
            }
        }
    }
}

/// Whether monitor unit `m` is the gate of the device `own` describes.
fn arbitrates(m: &UnitInfo, own: &UnitInfo) -> bool {
    m.kind == own.kind && !m.emulated
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::policy::PolicyKind;
    use hetsched_core::unit::UnitClass;

    fn info(id: u16, name: &str, kind: &str) -> UnitInfo {
        UnitInfo::new(UnitId(id), name, kind, UnitClass::Accelerator)
    }

    fn opencl() -> Backend {
        Backend::Device {
            api: "opencl",
            cpu_kind: Some(0),
            cores: 2,
            gated: false,
        }
    }

    #[test]
    fn a_device_the_monitor_lists_is_its_unit_and_gated() {
        let mut monitor = vec![info(0, "cpu", "cpu"), info(1, "opencl0", "opencl:dev")];
        monitor[1].policy = PolicyKind::Share;
        let mut units = DeviceUnits::new(&monitor);
        let w = units.assign(info(0, "opencl0", "opencl:dev"), opencl(), ());
        assert_eq!((w.unit, w.gated), (1, true));
        assert!(units.local.is_empty());
        let (merged, backend) = &units.gated[0];
        assert_eq!((merged.id, merged.policy), (UnitId(1), PolicyKind::Share));
        // Its view is the monitor's page, not the CPU kind's.
        assert_eq!(
            *backend,
            Backend::Device {
                api: "opencl",
                cpu_kind: None,
                cores: 2,
                gated: true
            }
        );
    }

    #[test]
    fn other_devices_are_local_units_after_the_monitors() {
        let monitor = vec![info(0, "cpu", "cpu"), info(1, "opencl0", "opencl:other")];
        let mut units = DeviceUnits::new(&monitor);
        let a = units.assign(info(0, "opencl0", "opencl:dev"), opencl(), ());
        let c = units.assign(info(0, "opencl2", "opencl:dev"), opencl(), ());
        assert_eq!((a.unit, c.unit), (2, 3));
        assert!(!a.gated && !c.gated);
        let names: Vec<&str> = units.local.iter().map(|(i, _)| i.name.as_str()).collect();
        assert_eq!(names, ["opencl0-own", "opencl2"]);
        assert!(units.gated.is_empty());
    }

    /// A device the daemon serves itself (`served-opencl<N>`) has one
    /// agent: this process's calls on it wait for that unit's slot too.
    #[test]
    fn a_served_device_is_gated_by_its_served_unit() {
        let mut monitor = vec![
            info(0, "cpu", "cpu"),
            info(1, "served-opencl1", "opencl:dev"),
        ];
        monitor[1].kernels = vec!["histogram".into()];
        let mut units = DeviceUnits::new(&monitor);
        let b = units.assign(info(0, "opencl1", "opencl:dev"), opencl(), ());
        assert!(b.gated);
        assert_eq!(b.unit, 1);
        assert_eq!(units.gated[0].0.name, "opencl1");
    }
}
