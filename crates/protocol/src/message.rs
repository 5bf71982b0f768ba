//! The messages. Every type here is encoded with postcard, which has no
//! self-description: only plain structs and externally tagged enums (no
//! `#[serde(tag)]`, `flatten` or `untagged`). New fields mean a new
//! [`crate::PROTOCOL_VERSION`].

use hetsched_core::ids::{ClientId, KindId, TaskId, UnitId};
use hetsched_core::policy::{ClientSettings, PolicyKind, ShareClass};
use hetsched_core::unit::{Capabilities, LinkCost, Unit, UnitClass};
use hetsched_core::view::{ClientUnitView, UnitView};
use serde::{Deserialize, Serialize};

/// A share class as it travels (core's [`ShareClass`] is internally tagged
/// for TOML and JSON, which postcard cannot carry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireClass {
    Custom(u32),
    Normal(u32),
    Background,
}

impl From<ShareClass> for WireClass {
    fn from(c: ShareClass) -> Self {
        match c {
            ShareClass::Custom { shares } => WireClass::Custom(shares),
            ShareClass::Normal { shares } => WireClass::Normal(shares),
            ShareClass::Background => WireClass::Background,
        }
    }
}

impl From<WireClass> for ShareClass {
    fn from(c: WireClass) -> Self {
        match c {
            WireClass::Custom(shares) => ShareClass::Custom { shares },
            WireClass::Normal(shares) => ShareClass::Normal { shares },
            WireClass::Background => ShareClass::Background,
        }
    }
}

impl std::fmt::Display for WireClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireClass::Custom(s) => write!(f, "custom:{s}"),
            WireClass::Normal(s) => write!(f, "normal:{s}"),
            WireClass::Background => f.write_str("background"),
        }
    }
}

/// A client's standing on one unit, as it travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireSettings {
    pub class: WireClass,
    pub priority: i32,
}

impl From<ClientSettings> for WireSettings {
    fn from(s: ClientSettings) -> Self {
        WireSettings {
            class: s.class.into(),
            priority: s.priority,
        }
    }
}

impl From<WireSettings> for ClientSettings {
    fn from(s: WireSettings) -> Self {
        ClientSettings {
            class: s.class.into(),
            priority: s.priority,
        }
    }
}

/// A change of settings; `None` leaves that part as it is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingsRequest {
    pub class: Option<WireClass>,
    pub priority: Option<i32>,
}

impl SettingsRequest {
    pub fn is_empty(&self) -> bool {
        self.class.is_none() && self.priority.is_none()
    }

    /// `base` with this request's changes applied.
    pub fn apply_to(&self, base: ClientSettings) -> ClientSettings {
        ClientSettings {
            class: self.class.map(Into::into).unwrap_or(base.class),
            priority: self.priority.unwrap_or(base.priority),
        }
    }
}

/// What a connection is for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// An application that runs work on units: it is registered with every
    /// unit's policy and gets views.
    #[default]
    Application,
    /// A tool (status, shares): it never runs work and is not listed as a
    /// client of any unit.
    Observer,
}

/// Client → daemon.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ClientMsg {
    /// First message on a connection. `requested` is what the client asks
    /// for on every unit (e.g. from `hetsched run --class`); the daemon
    /// grants it only as far as the client's privileges allow.
    Hello {
        name: String,
        role: Role,
        requested: SettingsRequest,
    },
    /// Ask to run `task` on `unit` (a device the client drives itself).
    /// Answered with `Granted`, or `Delayed` and later `Granted`.
    RequestDispatch {
        unit: UnitId,
        task: TaskId,
        expected_ns: u64,
    },
    /// A granted task finished; its slot is free. `ran_ns` is the client's
    /// measurement (the daemon charges the wall time it held the slot).
    TaskCompleted {
        unit: UnitId,
        task: TaskId,
        ran_ns: u64,
    },
    /// Run modelled work on an emulated device: the daemon queues it under
    /// the unit's policy and holds a stream for copy-in + exec + copy-out.
    /// Answered with `DeviceDone`.
    SubmitDevice {
        unit: UnitId,
        task: TaskId,
        exec_ns: u64,
        bytes_in: u64,
        bytes_out: u64,
    },
    /// Change settings of this client (`target_pid: None`) or of the client
    /// with that pid; on one unit or, with `unit: None`, on every unit.
    SetSettings {
        target_pid: Option<u32>,
        unit: Option<UnitId>,
        settings: SettingsRequest,
    },
    /// Ask for one page of the status report ([`StatusPage`]): the
    /// daemon, the units and coordination, and the application clients
    /// whose id is `first_client` or above, in id order, at most
    /// `max_clients` of them. The daemon stops sooner where the page
    /// would pass [`crate::STATUS_PAGE_BYTES`] encoded, so ask with
    /// `u32::MAX` for as many as fit. Pages go by client id, not by
    /// offset: a walk that starts each page at the last one's
    /// `next_client` sees every client that stays connected exactly once,
    /// however many come and go meanwhile. Changed in protocol 7 (it was
    /// a unit variant, one report with every client).
    Status {
        first_client: ClientId,
        max_clients: u32,
    },
    /// Leaving; everything held is released.
    Goodbye,
    // Appended after protocol 2: indices above stay as they were.
    /// Ask for a call ring on an emulated `unit` (Pegasus's per-client
    /// queue): answered with `CallRingOpened` and the ring's fd. Calls
    /// pushed there are served like `SubmitDevice` and answered with
    /// `DeviceDone`.
    OpenCallRing { unit: UnitId },
    // Appended in protocol 3.
    /// What the client ran itself (CPU kinds), for proportional-fair
    /// coordination: cumulative counters per unit since the client
    /// connected, and its mean calls in flight. Not answered unless it is
    /// malformed. The daemon checks CPU time claimed against the CPU time
    /// the process consumed, and ignores entries for units it serves.
    ReportDemand {
        units: Vec<UnitDemand>,
        in_flight: f64,
        /// Units the client has implementations for: the daemon solves for
        /// it only once it has figures for every one of them.
        implemented: Vec<UnitId>,
        /// The unit the application runs on without hetsched (its default
        /// device), which its native throughput is measured against. The
        /// daemon believes it only within 10 % of the fastest unit it
        /// measured for the app. Appended in protocol 5.
        native: Option<UnitId>,
    },
    /// Accelerator selection (Pegasus §3.2): associate this client with
    /// the accelerator of highest weight that holds `memory_bytes` of its
    /// data and has room for another client (of `class`, if given).
    /// Answered with `AcceleratorSelected`, or `Error` with
    /// `NoAcceleratorFits`. Asking again replaces the association; it ends
    /// when the client leaves.
    SelectAccelerator {
        memory_bytes: u64,
        class: Option<UnitClass>,
    },
    // Appended in protocol 4.
    /// Ask for a call ring and a data region of `region_bytes` on a unit
    /// the daemon runs real kernels on (its `UnitInfo::kernels` is not
    /// empty): answered with `KernelRingOpened` and two fds, the ring's
    /// then the region's. Packets pushed there are kernel calls
    /// ([`crate::kernel_call`]), answered with `DeviceDone` once the
    /// output is in the region, or `Error` with `BadKernelCall`.
    OpenKernelRing { unit: UnitId, region_bytes: u64 },
    // Appended for Pegasus domains (issue 5).
    /// Ask for the configured domains (containers) and their members.
    /// Answered with `Domains`.
    ListDomains,
    /// Change a configured domain's accelerator credits and, with
    /// `cpu_cap`, its CPU ceiling in cores (`Some(0.0)` removes the
    /// ceiling, `None` leaves it as it is). Root or the admin group only.
    /// Answered with `Domains` listing the changed domain, or `Error`
    /// (`NotPermitted`, `UnknownDomain`, `InvalidSettings`).
    SetDomain {
        name: String,
        credits: Option<u32>,
        cpu_cap: Option<f64>,
    },
    // Appended in protocol 6.
    /// Register a kernel of the client's own with a unit the daemon runs
    /// kernels on: OpenCL C `source` and its kernel function `entry`
    /// (`crate::user_kernel`). The unit builds it (once per distinct
    /// source and entry; a second client's registration reuses the build)
    /// and answers `KernelRegistered`, or `Error` with `KernelBuildFailed`
    /// carrying the compiler's log. Calls then go through a kernel ring.
    RegisterKernel {
        unit: UnitId,
        source: String,
        entry: String,
    },
    // Appended in protocol 8.
    /// Ask for a time-slice lease on `unit` (a device the client drives
    /// itself, as through the gate): answered with `LeaseGranted`, or
    /// `Delayed` and later `LeaseGranted`. While the lease lasts the client
    /// launches with no further round trip. At its end, unless the daemon
    /// said `LeaseDue` (someone waits), the client may keep it for another
    /// lease length, again with no round trip; otherwise it lets what it
    /// queued drain and ends the lease with `TaskCompleted` (same `task`).
    /// The daemon charges the wall time from grant to that release, so a
    /// kernel that runs past the lease is charged too.
    RequestLease { unit: UnitId, task: TaskId },
    /// This connection belongs to an intercepted program (the OpenCL
    /// layer or the CUDA interposer), not to a program written against
    /// hetsched. `device_memory_limit` is what the program was started
    /// with (`hetsched run --device-memory`). Answered with
    /// `InterceptTerms`.
    Intercepted {
        api: InterceptApi,
        device_memory_limit: Option<u64>,
    },
    /// Device memory the client holds on `unit` now, in bytes (the
    /// interposer's count of its allocations). Not answered.
    DeviceMemory { unit: UnitId, bytes: u64 },
    /// Cap the device memory of the intercepted program `target_pid` at
    /// `limit` bytes per device (`hetsched shares set --device-memory`).
    /// Root or the admin group may set any cap; a user may lower the cap
    /// of a process of their own. Answered with `InterceptTerms`; the
    /// program's interposer is sent `InterceptTerms` too.
    SetDeviceMemory { target_pid: u32, limit: u64 },
}

/// Which driver API an intercepted program was caught on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InterceptApi {
    OpenCl,
    Cuda,
}

impl std::fmt::Display for InterceptApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            InterceptApi::OpenCl => "opencl",
            InterceptApi::Cuda => "cuda",
        })
    }
}

/// Cumulative counters of one unit in a [`ClientMsg::ReportDemand`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitDemand {
    pub unit: UnitId,
    /// Calls finished on the unit.
    pub calls: u64,
    /// Their execution time, ns.
    pub exec_ns: f64,
}

/// What one unit is, as told to clients in `Welcome` and `Status`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitInfo {
    pub id: UnitId,
    pub name: String,
    pub kind: String,
    pub class: UnitClass,
    pub policy: PolicyKind,
    /// Tasks that may run at once (streams of a device, cores of a CPU kind).
    pub slots: u32,
    /// Speed relative to one CPU core of the reference kind.
    pub relative_speed: f64,
    pub caps: Capabilities,
    pub coherent: bool,
    pub copy_in: LinkCost,
    pub copy_out: LinkCost,
    pub dispatch_ns: u64,
    /// The daemon executes work for this unit itself (`SubmitDevice`).
    pub emulated: bool,
    /// Kernels the daemon runs on this unit for its clients
    /// (`OpenKernelRing`), by name; empty for units it does not serve so.
    pub kernels: Vec<String>,
    /// OS CPU numbers of a CPU kind (what its workers pin to); empty for
    /// other units.
    pub pus: Vec<u32>,
    /// For an emulated slow CPU kind: the cgroup (v1 `cpu`) whose CFS
    /// quota makes its threads run at the kind's speed; threads placed on
    /// the kind join it.
    pub throttle: Option<String>,
}

impl UnitInfo {
    /// The policy layer's unit, with kind id `kind` in the caller's
    /// numbering (kinds are names here). Power figures are not carried on
    /// the wire and come out as 0.
    pub fn to_unit(&self, kind: KindId) -> Unit {
        Unit {
            id: self.id,
            name: self.name.clone(),
            kind,
            class: self.class,
            caps: self.caps,
            relative_speed: self.relative_speed,
            coherent: self.coherent,
            copy_in: self.copy_in,
            copy_out: self.copy_out,
            dispatch_ns: self.dispatch_ns,
            slots: self.slots,
            busy_watts: 0.0,
            idle_watts: 0.0,
        }
    }
}

/// Per-unit part of a status report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitStatus {
    pub info: UnitInfo,
    pub view: UnitView,
    /// Requests waiting, by class: CUSTOM, NORMAL, BACKGROUND.
    pub queued_by_class: [u32; 3],
    /// Time the unit's slots were held since the daemon started, ns.
    pub busy_ns_total: u64,
    /// For a unit accelerator selection may choose: its profile now.
    pub selection: Option<UnitSelectionStatus>,
}

/// An accelerator's profile as accelerator selection sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitSelectionStatus {
    /// Device memory, bytes.
    pub memory_bytes: u64,
    /// Memory the associated clients asked for, bytes.
    pub allocated_bytes: u64,
    /// Most clients associated at once.
    pub max_clients: u32,
    /// The clients associated with it now.
    pub clients: Vec<ClientId>,
    /// Its weight now (`hetsched_core::backend_policy::selection::weight`).
    pub weight: f64,
}

/// One client's standing on one unit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientUnitStatus {
    pub unit: UnitId,
    pub settings: WireSettings,
    pub view: ClientUnitView,
    /// Slot time charged to the client since it connected, ns.
    pub busy_ns_total: u64,
    /// Requests queued or running now.
    pub outstanding: u32,
    /// On a unit under a Pegasus backend policy: the client's credits,
    /// ticks granted, accelerator time served and SLO state.
    pub backend: Option<hetsched_core::backend_policy::DomainState>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientStatus {
    pub id: ClientId,
    pub pid: u32,
    pub uid: u32,
    pub name: String,
    pub connected_ns: u64,
    pub units: Vec<ClientUnitStatus>,
    /// The API the client was intercepted on, for a program that runs
    /// under the OpenCL layer or the CUDA interposer (protocol 8).
    pub intercepted: Option<InterceptApi>,
    /// Device memory the client reported holding, summed over units.
    pub device_memory_bytes: u64,
    /// Its device-memory cap, if it has one.
    pub device_memory_limit: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DaemonStatus {
    pub version: String,
    pub pid: u32,
    pub uptime_ns: u64,
    pub socket: String,
}

/// The whole report, as [`crate::Client::status`] puts it together from
/// pages: every application client, in id order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    pub daemon: DaemonStatus,
    pub units: Vec<UnitStatus>,
    pub clients: Vec<ClientStatus>,
    /// Proportional-fair coordination, when the daemon runs it.
    pub coordination: Option<CoordinationStatus>,
}

/// One page of the status report, the answer to [`ClientMsg::Status`].
///
/// A page covers the client ids from the `first_client` asked for up to
/// `next_client` (not included; to the end when `None`). Its `report`
/// carries the daemon and every unit in full, and of everything that
/// lists clients only the entries of ids in that range: `clients`, each
/// unit's `selection.clients` and `coordination.apps`. Concatenating
/// those lists over a walk of pages gives the whole report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusPage {
    pub report: StatusReport,
    /// Application clients connected now, on every page together.
    pub clients_total: u32,
    /// Where the next page starts (ask again with it as `first_client`);
    /// `None` on the last page.
    pub next_client: Option<ClientId>,
}

/// The state of proportional-fair coordination (`coordination = "pf"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoordinationStatus {
    /// Times the allocation was solved.
    pub solves: u64,
    /// The floor of the last solve (× each app's native estimate), if any.
    pub floor: Option<f64>,
    /// Whether "nobody below native" was feasible at the last solve; when
    /// not, `floor` is the largest common floor.
    pub floor_feasible: Option<bool>,
    /// Every application the coordinator tracks (with targets once solved).
    pub apps: Vec<CoordinatedApp>,
    /// Units whose queue runs short tasks first at the moment (the
    /// replay-judged pick's choice, under `coordination = "pf-replay"`);
    /// every other queue runs in arrival order.
    pub short_first: Vec<UnitId>,
}

/// One app's coordination targets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoordinatedApp {
    pub client: ClientId,
    pub pid: u32,
    /// Calls per second the allocation gives it; `None` until it has
    /// targets (still profiling, or nothing measured yet).
    pub rate: Option<f64>,
    /// Per unit (in unit order), the fraction of its calls to run there;
    /// empty without targets.
    pub fractions: Vec<f64>,
    /// Its native throughput as the last solve estimated it (calls/s):
    /// what the floor is measured against. `None` without targets.
    pub native: Option<f64>,
    /// Its throughput under the targets, predicted by the last solve,
    /// relative to `native`.
    pub predicted_relative: Option<f64>,
    /// Reports in which it claimed more CPU time than its process used.
    pub over_reported: u64,
    /// It takes part: it follows targets (sends `ReportDemand`) and has
    /// NORMAL shares, the same on every unit, at the default priority (its
    /// shares weigh it). Others keep the standing their agents enforce;
    /// their use is taken out of the shared supply.
    pub coordinated: bool,
}

/// Why the daemon refused something.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorCode {
    /// The bytes were not a valid frame; the connection is closed.
    BadFrame,
    /// The first message was not `Hello`, or `Hello` came twice.
    BadSequence,
    UnknownUnit,
    /// `TaskCompleted` for a task that was never granted.
    UnknownTask,
    /// The same task id is already outstanding on that unit.
    DuplicateTask,
    /// The client has as many requests outstanding as the daemon allows.
    TooManyOutstanding,
    /// The caller lacks the privilege for this change.
    NotPermitted,
    /// The settings are impossible (CUSTOM over 100, zero shares, CUSTOM
    /// total over 100, nothing to change).
    InvalidSettings,
    /// No client with that pid is connected.
    UnknownClient,
    /// `SubmitDevice` on a unit the daemon does not emulate.
    NotEmulated,
    /// Observers cannot run work.
    NotAnApplication,
    // Appended after protocol 1 shipped: postcard sends the variant index,
    // so new codes go at the end and every older index keeps its meaning.
    /// `SubmitDevice` whose modelled hold time is over the daemon's
    /// `max_device_seconds` (it would block a stream for too long); or a
    /// slot the client held itself (a granted gate task, a lease) past the
    /// unit's hold limit (`max_hold_ms`, else `max_device_seconds`): the
    /// daemon took it back and charged the time (`task` names it).
    WorkTooLong,
    /// The daemon could not create this client's private view page (out of
    /// memory or file descriptors); the connection is closed, a later
    /// connection may succeed.
    ViewsUnavailable,
    /// The client broke its call ring's protocol (published more calls
    /// than the ring holds, or overwrote a queued call); what was queued is
    /// dropped.
    CallRingCorrupt,
    /// `SelectAccelerator`: no accelerator (of that class) holds the
    /// memory asked for, or every one that could is at its client cap or
    /// short of free memory now (the message says which).
    NoAcceleratorFits,
    // Appended in protocol 4.
    /// A kernel call or kernel ring the daemon cannot serve: an unknown
    /// kernel, a range outside the data region, a region size out of
    /// bounds, or the kernel failing on the device (the message says
    /// which). Only that call is refused; the ring stays open.
    BadKernelCall,
    /// `SetDomain` names a domain the daemon's config does not have.
    UnknownDomain,
    /// Under `accelerator_binding`, a call on a selectable unit other than
    /// the one the client is associated with.
    NotAssociated,
    // Appended in protocol 6.
    /// `RegisterKernel`: the source did not build, has no such kernel, or
    /// the kernel has a parameter type calls cannot pass; the message
    /// carries the reason and the compiler's log.
    KernelBuildFailed,
    /// The connection was refused: its user holds
    /// `max_connections_per_uid` connections already, or the daemon
    /// `max_connections`. Sent instead of an answer to `Hello`; the
    /// connection is closed.
    TooManyConnections,
}

/// Daemon → client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum DaemonMsg {
    /// Answer to `Hello`. For applications the frame carries two file
    /// descriptors (SCM_RIGHTS): the global view, then the private view.
    Welcome {
        client: ClientId,
        pid: u32,
        daemon_pid: u32,
        units: Vec<UnitInfo>,
        /// Effective settings per unit, in unit order.
        settings: Vec<WireSettings>,
        /// Whether view descriptors are attached.
        views_attached: bool,
        /// Why part of `requested` was not granted, if it was not.
        notice: Option<String>,
    },
    Granted {
        unit: UnitId,
        task: TaskId,
        waited_ns: u64,
    },
    /// The request is queued behind others or held back by the policy; a
    /// `Granted` follows when it may run.
    Delayed {
        unit: UnitId,
        task: TaskId,
        queued_ahead: u32,
    },
    DeviceDone {
        unit: UnitId,
        task: TaskId,
        waited_ns: u64,
        ran_ns: u64,
    },
    SettingsApplied {
        pid: u32,
        units: Vec<UnitId>,
        settings: Vec<WireSettings>,
    },
    // Answer to `Status`: one page (changed in protocol 7; it was the
    // whole report).
    Status(StatusPage),
    Error {
        code: ErrorCode,
        message: String,
        /// For errors about one request, which one.
        task: Option<TaskId>,
    },
    // Appended after protocol 2.
    /// Answer to `OpenCallRing`; the frame carries the ring's fd.
    CallRingOpened {
        unit: UnitId,
        capacity: u64,
    },
    /// Answer to `SelectAccelerator`: the client is associated with
    /// `unit`, whose weight was `weight` when it was chosen.
    AcceleratorSelected {
        unit: UnitId,
        weight: f64,
    },
    // Appended in protocol 4.
    /// Answer to `OpenKernelRing`; the frame carries two fds, the call
    /// ring's then the data region's.
    KernelRingOpened {
        unit: UnitId,
        capacity: u64,
        region_bytes: u64,
    },
    /// Answer to `ListDomains` (every configured domain) and to
    /// `SetDomain` (the one changed).
    Domains(Vec<DomainInfo>),
    // Appended in protocol 6.
    /// Answer to `RegisterKernel`: the kernel's word for call packets
    /// (`crate::user_kernel::UserKernelId::word`), its parameters as the
    /// compiler saw them, the compiler's log (warnings), and whether the
    /// unit had built it already.
    KernelRegistered {
        unit: UnitId,
        kernel: crate::user_kernel::UserKernelId,
        signature: crate::user_kernel::KernelSignature,
        build_log: String,
        cached: bool,
    },
    // Appended in protocol 8.
    /// Answer to `RequestLease`: the client may launch on `unit` for
    /// `lease_ns` from now (its length comes from the unit's policy and
    /// the client's class), then ends the lease with `TaskCompleted`.
    LeaseGranted {
        unit: UnitId,
        task: TaskId,
        waited_ns: u64,
        lease_ns: u64,
    },
    /// Answer to `Intercepted`: the device memory this client may hold on
    /// each device (the smaller of what it was started with and what the
    /// daemon's configuration gives its class); `None` for no cap. Sent
    /// again, unasked, when `SetDeviceMemory` changes the cap.
    InterceptTerms {
        device_memory_limit: Option<u64>,
    },
    /// Sent to a lease holder, unasked, once another request waits for
    /// the unit: the client keeps the lease to its end, then lets its
    /// work drain and gives it back instead of extending it.
    LeaseDue {
        unit: UnitId,
        task: TaskId,
    },
}

/// A configured domain (`[[domains]]`): clients whose process is in its
/// cgroup share its accelerator credits, and its CPU ceiling.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DomainInfo {
    pub name: String,
    /// The cgroup path (as in `/proc/PID/cgroup`) whose processes belong.
    pub cgroup: String,
    /// Accelerator credits on every unit under a Pegasus policy…
    pub credits: u32,
    /// …except these units (unit name, credits).
    pub unit_credits: Vec<(String, u32)>,
    /// CFS ceiling of the domain's processes together, in cores.
    pub cpu_cap: Option<f64>,
    /// Connected application clients in it: (client id, pid).
    pub members: Vec<(ClientId, u32)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_class_round_trips_core_class() {
        for c in [
            ShareClass::Custom { shares: 50 },
            ShareClass::Normal { shares: 7 },
            ShareClass::Background,
        ] {
            assert_eq!(ShareClass::from(WireClass::from(c)), c);
        }
    }

    /// Postcard sends the variant index, so an index may never change:
    /// clients in other languages hard-code them (docs/protocol.md §11).
    #[test]
    fn error_codes_keep_their_wire_indices() {
        let codes = [
            ErrorCode::BadFrame,
            ErrorCode::BadSequence,
            ErrorCode::UnknownUnit,
            ErrorCode::UnknownTask,
            ErrorCode::DuplicateTask,
            ErrorCode::TooManyOutstanding,
            ErrorCode::NotPermitted,
            ErrorCode::InvalidSettings,
            ErrorCode::UnknownClient,
            ErrorCode::NotEmulated,
            ErrorCode::NotAnApplication,
            ErrorCode::WorkTooLong,
            ErrorCode::ViewsUnavailable,
            ErrorCode::CallRingCorrupt,
            ErrorCode::NoAcceleratorFits,
            ErrorCode::BadKernelCall,
            ErrorCode::UnknownDomain,
            ErrorCode::NotAssociated,
            ErrorCode::KernelBuildFailed,
            ErrorCode::TooManyConnections,
        ];
        for (index, code) in codes.into_iter().enumerate() {
            let bytes = postcard::to_stdvec(&code).unwrap();
            assert_eq!(bytes, vec![index as u8], "{code:?}");
            assert_eq!(postcard::from_bytes::<ErrorCode>(&bytes).unwrap(), code);
        }
    }

    #[test]
    fn request_only_changes_what_it_names() {
        let base = ClientSettings {
            class: ShareClass::Normal { shares: 10 },
            priority: 3,
        };
        let req = SettingsRequest {
            class: None,
            priority: Some(-1),
        };
        let got = req.apply_to(base);
        assert_eq!(got.class, base.class);
        assert_eq!(got.priority, -1);
        assert!(SettingsRequest::default().is_empty());
    }
}
