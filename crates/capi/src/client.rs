//! The daemon part of the C API, for runtimes that drive units themselves
//! (the StarPU policy): the monitor's units, this client's view of each
//! (Rinnegan's private page), hetsched's turnaround prediction over it,
//! the dispatch gate and emulated-device work.

use crate::error::{HsStatus, err, guard};
use crate::handles::{Table, c_str, fill_name, name_and_out, opt_c_str, write_out};
use crate::runtime::{HS_NAME_MAX, HsUnitInfo};
use hetsched_core::ids::{TaskId, UnitId};
use hetsched_core::unit::UnitClass;
use hetsched_protocol::{ClientError, ClientOptions, Grant, SharedClient, UnitInfo};
use std::ffi::c_char;
use std::time::Duration;

/// A connection to the daemon (`hs_client_connect`).
pub type HsClient = u64;

/// What this client can expect from one unit now, from the daemon's pages.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsUnitView {
    /// Fraction of the unit's time this client is guaranteed under contention.
    pub guaranteed: f64,
    /// Expected wait of a new task before it runs, ns (may be infinite).
    pub wait_ns: f64,
    /// Fraction of the unit this client used recently.
    pub current_utilisation: f64,
    /// Most of the unit this client may get (1 when uncapped).
    pub max_utilisation: f64,
    /// The policy holds this client back now.
    pub throttled: bool,
    /// Unit-wide: fraction of capacity in use (moving average).
    pub busy_fraction: f64,
    /// Unit-wide: clients active on it.
    pub active_clients: u32,
    /// Unit-wide: requests waiting and running.
    pub queued: u32,
    pub running: u32,
    /// CPU kinds: runnable threads on the kind's cores (all processes).
    pub runnable_threads: u32,
}

/// A dispatch the gate allowed; give it back with `hs_client_task_completed`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsGrant {
    pub unit: u32,
    pub task: u64,
    pub waited_ns: u64,
}

/// Emulated-device work that finished.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsDeviceDone {
    pub waited_ns: u64,
    pub ran_ns: u64,
}

pub(crate) struct ClientObj {
    client: SharedClient,
}

pub(crate) static CLIENTS: Table<ClientObj> = Table::new("client");

fn client_error(e: ClientError) -> (HsStatus, String) {
    let status = match &e {
        ClientError::Connect { .. }
        | ClientError::SocketDir(_)
        | ClientError::UntrustedDaemon { .. } => HsStatus::HsErrConnect,
        ClientError::Environment(_) => HsStatus::HsErrInvalid,
        _ => HsStatus::HsErrDaemon,
    };
    (status, e.to_string())
}

pub(crate) fn unit_of(c: &ClientObj, index: u32) -> Result<&UnitInfo, (HsStatus, String)> {
    let units = c.client.units();
    units.get(index as usize).ok_or_else(|| {
        (
            HsStatus::HsErrInvalid,
            format!("unit {index} out of range ({} units)", units.len()),
        )
    })
}

/// Connects to the daemon as application `name` (`socket` NULL: the
/// default, `$HETSCHED_SOCKET`). Fails with `HS_ERR_CONNECT` when no daemon
/// answers: there is no embedded monitor on this path.
///
/// # Safety
/// `name`, `socket` are NULL or NUL-terminated; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_client_connect(
    name: *const c_char,
    socket: *const c_char,
    out: *mut HsClient,
) -> HsStatus {
    guard(|| {
        // SAFETY: the caller's promise on `name`.
        let name = unsafe { name_and_out(name, "name", out) }?;
        let mut opts = ClientOptions::application(name).map_err(client_error)?;
        // SAFETY: the caller's promise on `socket`.
        if let Some(s) = unsafe { opt_c_str(socket, "socket") }? {
            opts = opts.socket(s);
        }
        opts.reconnect_for = Duration::ZERO;
        let client = SharedClient::connect(opts).map_err(client_error)?;
        let id = CLIENTS.insert(ClientObj { client });
        // SAFETY: checked non-NULL; the caller promises it is writable.
        unsafe { write_out(out, id, "out") }
    })
}

/// Says goodbye and frees the handle; whatever it held is released.
#[unsafe(no_mangle)]
pub extern "C" fn hs_client_close(client: HsClient) -> HsStatus {
    guard(|| {
        drop(CLIENTS.remove(client)?);
        Ok(())
    })
}

/// How many units the daemon has.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_client_unit_count(client: HsClient, out: *mut u32) -> HsStatus {
    guard(|| {
        let c = CLIENTS.get(client)?;
        // SAFETY: the caller's promise on `out`.
        unsafe { write_out(out, c.client.units().len() as u32, "out") }
    })
}

/// Unit `index` of the daemon (`completed`/`exec_ns` are 0 on this path).
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_client_unit_info(
    client: HsClient,
    index: u32,
    out: *mut HsUnitInfo,
) -> HsStatus {
    guard(|| {
        let c = CLIENTS.get(client)?;
        let u = unit_of(&c, index)?;
        let info = HsUnitInfo {
            name: fill_name::<HS_NAME_MAX>(&u.name),
            kind: fill_name::<HS_NAME_MAX>(&u.kind),
            is_cpu: u.class == UnitClass::Cpu,
            emulated: u.emulated,
            slots: u.slots,
            relative_speed: u.relative_speed,
            completed: 0,
            exec_ns: 0.0,
        };
        // SAFETY: the caller's promise on `out`.
        unsafe { write_out(out, info, "out") }
    })
}

/// The index of the unit whose name is `name`, else of the first unit of
/// kind `name`; `HS_ERR_INVALID` if there is none.
///
/// # Safety
/// `name` is NULL or NUL-terminated; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_client_find_unit(
    client: HsClient,
    name: *const c_char,
    out: *mut u32,
) -> HsStatus {
    guard(|| {
        // SAFETY: the caller's promise on `name`.
        let name = unsafe { c_str(name, "name") }?;
        let c = CLIENTS.get(client)?;
        let units = c.client.units();
        let found = units
            .iter()
            .position(|u| u.name == name)
            .or_else(|| units.iter().position(|u| u.kind == name));
        let Some(i) = found else {
            let names: Vec<_> = units
                .iter()
                .map(|u| format!("{} ({})", u.name, u.kind))
                .collect();
            return err(
                HsStatus::HsErrInvalid,
                format!(
                    "no unit or kind named {name:?}; units: {}",
                    names.join(", ")
                ),
            );
        };
        // SAFETY: the caller's promise on `out`.
        unsafe { write_out(out, i as u32, "out") }
    })
}

pub(crate) fn view_of(c: &ClientObj, index: u32) -> Result<HsUnitView, (HsStatus, String)> {
    unit_of(c, index)?;
    let v = c.client.unit_view(index as usize).unwrap_or_default();
    Ok(HsUnitView {
        guaranteed: v.guaranteed,
        wait_ns: v.wait_ns,
        current_utilisation: v.current_utilisation,
        max_utilisation: v.max_utilisation,
        throttled: v.throttled,
        busy_fraction: v.busy_fraction,
        active_clients: v.active_clients,
        queued: v.queued,
        running: v.running,
        runnable_threads: v.runnable_threads,
    })
}

/// This client's view of unit `index` now: a read of the shared pages,
/// no message to the daemon.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_client_unit_view(
    client: HsClient,
    index: u32,
    out: *mut HsUnitView,
) -> HsStatus {
    guard(|| {
        let c = CLIENTS.get(client)?;
        let v = view_of(&c, index)?;
        // SAFETY: the caller's promise on `out`.
        unsafe { write_out(out, v, "out") }
    })
}

/// Asks the daemon's gate for unit `index` and blocks until it opens; run
/// the task, then `hs_client_task_completed`. The daemon charges this
/// client the time it holds the slot, under the unit's policy.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_client_request_dispatch(
    client: HsClient,
    index: u32,
    expected_ns: u64,
    out: *mut HsGrant,
) -> HsStatus {
    guard(|| {
        if out.is_null() {
            return err(HsStatus::HsErrNull, "out is NULL");
        }
        let c = CLIENTS.get(client)?;
        let u = unit_of(&c, index)?;
        let g = c
            .client
            .request_dispatch(u.id, expected_ns)
            .map_err(client_error)?;
        let grant = HsGrant {
            unit: index,
            task: g.task.0,
            waited_ns: g.waited_ns,
        };
        // SAFETY: checked non-NULL; the caller promises it is writable.
        unsafe { write_out(out, grant, "out") }
    })
}

/// A granted task finished after `ran_ns`: frees its slot at the daemon.
///
/// # Safety
/// `grant` is NULL or points to a grant from `hs_client_request_dispatch`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_client_task_completed(
    client: HsClient,
    grant: *const HsGrant,
    ran_ns: u64,
) -> HsStatus {
    guard(|| {
        if grant.is_null() {
            return err(HsStatus::HsErrNull, "grant is NULL");
        }
        // SAFETY: non-NULL; the caller promises it points to a grant.
        let g = unsafe { *grant };
        let c = CLIENTS.get(client)?;
        let u = unit_of(&c, g.unit)?;
        let grant = Grant {
            unit: u.id,
            task: TaskId(g.task),
            waited_ns: g.waited_ns,
        };
        c.client.task_completed(grant, ran_ns).map_err(client_error)
    })
}

/// Runs `exec_ns` of modelled work (plus copies of `bytes_in`/`bytes_out`)
/// on emulated unit `index`, blocking until the daemon reports it done.
/// The daemon queues it under the unit's policy with everyone else's.
///
/// # Safety
/// `out` is NULL or writable (NULL is allowed: the timings are dropped).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_client_run_device(
    client: HsClient,
    index: u32,
    exec_ns: u64,
    bytes_in: u64,
    bytes_out: u64,
    out: *mut HsDeviceDone,
) -> HsStatus {
    guard(|| {
        let c = CLIENTS.get(client)?;
        let u = unit_of(&c, index)?;
        if !u.emulated {
            return err(
                HsStatus::HsErrInvalid,
                format!("unit {} is not an emulated device", u.name),
            );
        }
        let id: UnitId = u.id;
        let d = c
            .client
            .run_device(id, exec_ns, bytes_in, bytes_out)
            .map_err(client_error)?;
        if !out.is_null() {
            let done = HsDeviceDone {
                waited_ns: d.waited_ns,
                ran_ns: d.ran_ns,
            };
            // SAFETY: non-NULL; the caller promises it is writable.
            unsafe { write_out(out, done, "out") }?;
        }
        Ok(())
    })
}
