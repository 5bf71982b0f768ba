//! Building a [`UnitInfo`]: one constructor with what a unit has until told
//! otherwise, one from the policy layer's [`Unit`], and `with_*` methods
//! that change one thing each (mostly for tests, which describe units in a
//! line).

use crate::message::UnitInfo;
use hetsched_core::ids::UnitId;
use hetsched_core::policy::PolicyKind;
use hetsched_core::unit::{Capabilities, LinkCost, Unit, UnitClass};

impl UnitInfo {
    /// Unit `id` named `name`, of kind `kind` and class `class`, with what
    /// a device unit has until told otherwise: FIFO, one slot, the
    /// reference speed, no capabilities, coherent memory with free copies
    /// and no dispatch cost, not emulated, and no kernels, PUs or
    /// throttle.
    pub fn new(
        id: UnitId,
        name: impl Into<String>,
        kind: impl Into<String>,
        class: UnitClass,
    ) -> UnitInfo {
        UnitInfo {
            id,
            name: name.into(),
            kind: kind.into(),
            class,
            policy: PolicyKind::Fifo,
            slots: 1,
            relative_speed: 1.0,
            caps: Capabilities::empty(),
            coherent: true,
            copy_in: LinkCost::FREE,
            copy_out: LinkCost::FREE,
            dispatch_ns: 0,
            emulated: false,
            kernels: Vec::new(),
            pus: Vec::new(),
            throttle: None,
        }
    }

    /// The unit the policy layer's `unit` describes, its kind named
    /// `kind`, under `policy` ([`UnitInfo::to_unit`]'s inverse); not
    /// emulated, and no kernels, PUs or throttle.
    pub fn from_unit(unit: &Unit, kind: impl Into<String>, policy: PolicyKind) -> UnitInfo {
        UnitInfo {
            policy,
            slots: unit.slots,
            relative_speed: unit.relative_speed,
            caps: unit.caps,
            coherent: unit.coherent,
            copy_in: unit.copy_in,
            copy_out: unit.copy_out,
            dispatch_ns: unit.dispatch_ns,
            ..UnitInfo::new(unit.id, unit.name.clone(), kind, unit.class)
        }
    }

    /// The same unit under `policy`.
    pub fn with_policy(mut self, policy: PolicyKind) -> UnitInfo {
        self.policy = policy;
        self
    }

    /// The same unit running `slots` tasks at once.
    pub fn with_slots(mut self, slots: u32) -> UnitInfo {
        self.slots = slots;
        self
    }

    /// The same unit with memory coherent with the host's or not.
    pub fn with_coherent(mut self, coherent: bool) -> UnitInfo {
        self.coherent = coherent;
        self
    }

    /// The same unit, emulated by the daemon (`SubmitDevice`) or not.
    pub fn with_emulated(mut self, emulated: bool) -> UnitInfo {
        self.emulated = emulated;
        self
    }

    /// The same unit with these launch and copy costs.
    pub fn with_costs(
        mut self,
        dispatch_ns: u64,
        copy_in: LinkCost,
        copy_out: LinkCost,
    ) -> UnitInfo {
        self.dispatch_ns = dispatch_ns;
        self.copy_in = copy_in;
        self.copy_out = copy_out;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::ids::KindId;

    #[test]
    fn a_unit_goes_to_the_policy_layer_and_back_unchanged() {
        let info = UnitInfo::new(UnitId(3), "gpu0", "gpu", UnitClass::Gpu)
            .with_policy(PolicyKind::Share)
            .with_slots(4)
            .with_coherent(false)
            .with_costs(
                500,
                LinkCost {
                    latency_ns: 10,
                    ns_per_byte: 0.5,
                },
                LinkCost::FREE,
            );
        let back = UnitInfo::from_unit(&info.to_unit(KindId(0)), "gpu", PolicyKind::Share);
        assert_eq!(back, info);
    }

    #[test]
    fn a_new_unit_is_one_fifo_slot_at_the_reference_speed() {
        let info = UnitInfo::new(UnitId(0), "dev", "kind", UnitClass::Accelerator);
        assert_eq!((info.policy, info.slots), (PolicyKind::Fifo, 1));
        assert_eq!(info.relative_speed, 1.0);
        assert!(info.coherent && !info.emulated);
        assert!(info.kernels.is_empty() && info.pus.is_empty() && info.throttle.is_none());
    }
}
