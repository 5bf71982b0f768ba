//! Fixtures shared by the daemon's integration tests.

use hetsched_core::ids::{KindId, UnitId};
use hetsched_core::policy::PolicyKind;
use hetsched_core::unit::{Capabilities, LinkCost, Unit, UnitClass};
use hetsched_monitor::agent::UnitSetup;

/// An emulated GPU, `gpu0`, with `slots` slots under the share policy.
pub fn device(slots: u32) -> UnitSetup {
    UnitSetup {
        unit: Unit {
            id: UnitId(0),
            name: "gpu0".into(),
            kind: KindId(0),
            class: UnitClass::Gpu,
            caps: Capabilities::empty(),
            relative_speed: 8.0,
            coherent: false,
            copy_in: LinkCost::new(0, 1e10),
            copy_out: LinkCost::new(0, 1e10),
            dispatch_ns: 0,
            slots,
            busy_watts: 100.0,
            idle_watts: 10.0,
        },
        kind_name: "gpu".into(),
        policy: PolicyKind::Share,
        emulated: true,
        kernels: Vec::new(),
        pus: Vec::new(),
        throttle: None,
    }
}
