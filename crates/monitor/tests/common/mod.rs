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

/// Process `pid` of user `uid`, its group the same number.
#[allow(dead_code)] // not every test binary uses it
pub fn peer(pid: u32, uid: u32) -> hetsched_monitor::privilege::Peer {
    hetsched_monitor::privilege::Peer {
        pid,
        uid,
        gid: uid,
        groups: vec![],
        start_time: 1,
        ancestors: vec![],
    }
}

/// Says hello for an application process `pid` of user `uid` (its group
/// the same number) asking for `class` (`None`: the default); its client
/// id and the daemon's answer.
#[allow(dead_code)] // not every test binary uses it
pub fn hello(
    m: &mut hetsched_monitor::monitor::Monitor,
    pid: u32,
    uid: u32,
    class: Option<hetsched_protocol::WireClass>,
) -> (hetsched_core::ids::ClientId, hetsched_protocol::DaemonMsg) {
    let request = hetsched_protocol::SettingsRequest {
        class,
        priority: None,
    };
    m.hello(
        peer(pid, uid),
        format!("app{pid}"),
        hetsched_protocol::Role::Application,
        request,
        0,
    )
}

/// [`hello`] asking for `class`; its client id, whatever the answer.
#[allow(dead_code)] // not every test binary uses it
pub fn application(
    m: &mut hetsched_monitor::monitor::Monitor,
    pid: u32,
    uid: u32,
    class: hetsched_protocol::WireClass,
) -> hetsched_core::ids::ClientId {
    hello(m, pid, uid, Some(class)).0
}

/// [`hello`], which the daemon must answer with a welcome and no notice
/// (the settings asked for applied); the client id.
#[allow(dead_code)] // not every test binary uses it
pub fn welcomed(
    m: &mut hetsched_monitor::monitor::Monitor,
    pid: u32,
    uid: u32,
    class: Option<hetsched_protocol::WireClass>,
) -> hetsched_core::ids::ClientId {
    match hello(m, pid, uid, class) {
        (id, hetsched_protocol::DaemonMsg::Welcome { notice: None, .. }) => id,
        (_, other) => panic!("{other:?}"),
    }
}
