//! The placement formula for C, the core's [`turnaround`] and nothing
//! else: `hs_turnaround` over figures the caller gives, and
//! `hs_client_turnaround` and `hs_client_predict_ns` over a unit of the
//! daemon ([`crate::client`]) and this client's view of it.

use crate::client::{CLIENTS, ClientObj, HsClient, HsUnitView, unit_of, view_of};
use crate::error::{HsResult, HsStatus, err, guard};
use crate::handles::write_out;
use hetsched_core::turnaround::{Turnaround, TurnaroundInput, UnitLoad, turnaround};
use hetsched_core::unit::UnitClass;
use hetsched_core::view::ClientUnitView;

/// `HsTurnaroundInput::load`: the view in `view` (this client's, from
/// `hs_client_unit_view`).
pub const HS_LOAD_VIEW: u32 = 0;
/// `HsTurnaroundInput::load`: a time-shared CPU kind with `load_amount`
/// runnable threads on its cores.
pub const HS_LOAD_RUNNABLE_THREADS: u32 = 1;
/// `HsTurnaroundInput::load`: `load_amount` tasks queued and running on the
/// unit, each as long as this one.
pub const HS_LOAD_BACKLOG: u32 = 2;

/// One task on one unit, for `hs_turnaround`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsTurnaroundInput {
    /// The task's execution time on the unit alone, ns (finite, ≥ 0).
    pub exec_ns: f64,
    /// Time to start it on the unit, ns.
    pub dispatch_ns: f64,
    /// Time to move its data in and out, ns.
    pub copy_ns: f64,
    /// The caller's own work ahead of it on the same lane, ns of execution.
    pub ahead_ns: f64,
    /// Lanes of the unit that run side by side (0 counts as 1).
    pub slots: u32,
    /// What the load is: `HS_LOAD_VIEW`, `HS_LOAD_RUNNABLE_THREADS` or
    /// `HS_LOAD_BACKLOG`.
    pub load: u32,
    /// Runnable threads or tasks, by `load`.
    pub load_amount: f64,
    /// The view, when `load` is `HS_LOAD_VIEW` (its unit-wide fields are
    /// not read).
    pub view: HsUnitView,
}

/// The formula's figures (see `hs_turnaround`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HsTurnaround {
    /// Wall time per ns of execution on the unit now (≥ 1).
    pub stretch: f64,
    /// The task's wall time on the unit, `exec × stretch`, ns.
    pub stretched_ns: f64,
    /// The work ahead, stretched alike, ns.
    pub ahead_ns: f64,
    /// `dispatch + copy + ahead × stretch + exec × stretch`, ns.
    pub turnaround_ns: f64,
    /// Tasks like this one per second the unit finishes, its lanes side by
    /// side: `slots / (exec × stretch)`.
    pub rate_per_s: f64,
}

impl From<Turnaround> for HsTurnaround {
    fn from(t: Turnaround) -> Self {
        HsTurnaround {
            stretch: t.stretch,
            stretched_ns: t.stretched_ns,
            ahead_ns: t.ahead_ns,
            turnaround_ns: t.turnaround_ns,
            rate_per_s: t.rate_per_s,
        }
    }
}

/// The client's part of a C view, as the core takes it.
fn client_view(v: &HsUnitView) -> ClientUnitView {
    ClientUnitView {
        guaranteed: v.guaranteed,
        wait_ns: v.wait_ns,
        current_utilisation: v.current_utilisation,
        throttled: v.throttled,
        max_utilisation: v.max_utilisation,
    }
}

/// The core's formula over `input`, or the error C sees.
fn checked(input: &TurnaroundInput) -> HsResult<HsTurnaround> {
    // The one placement formula: hetsched_core::turnaround::turnaround.
    match turnaround(input) {
        Some(t) => Ok(t.into()),
        None => err(
            HsStatus::HsErrInvalid,
            format!("exec_ns must be finite and ≥ 0, got {}", input.exec_ns),
        ),
    }
}

fn core_input(i: &HsTurnaroundInput) -> HsResult<TurnaroundInput> {
    let load = match i.load {
        HS_LOAD_VIEW => UnitLoad::View(client_view(&i.view)),
        HS_LOAD_RUNNABLE_THREADS => UnitLoad::RunnableThreads(i.load_amount),
        HS_LOAD_BACKLOG => UnitLoad::Backlog(i.load_amount),
        other => {
            return err(
                HsStatus::HsErrInvalid,
                format!(
                    "load must be HS_LOAD_VIEW, HS_LOAD_RUNNABLE_THREADS or HS_LOAD_BACKLOG, got {other}"
                ),
            );
        }
    };
    Ok(TurnaroundInput {
        exec_ns: i.exec_ns,
        dispatch_ns: i.dispatch_ns,
        copy_ns: i.copy_ns,
        ahead_ns: i.ahead_ns,
        slots: i.slots,
        load,
    })
}

/// hetsched's placement formula over the caller's own figures:
/// `turnaround = dispatch + copy + (ahead + exec) × stretch`, the stretch
/// from the load (a client's view, runnable threads on a CPU kind, or a
/// backlog of tasks). The same function as `hs_client_predict_ns`, the
/// runtime's placer and `hetsched.ray`. `HS_ERR_INVALID` when `exec_ns`
/// is not finite and ≥ 0 (a kind never run: try it rather than predict).
///
/// # Safety
/// `input` is NULL or points to an `HsTurnaroundInput`; `out` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_turnaround(
    input: *const HsTurnaroundInput,
    out: *mut HsTurnaround,
) -> HsStatus {
    guard(|| {
        if input.is_null() {
            return err(HsStatus::HsErrNull, "input is NULL");
        }
        // SAFETY: non-NULL; the caller promises it points to an input.
        let input = unsafe { *input };
        let t = checked(&core_input(&input)?)?;
        // SAFETY: the caller's promise on `out`.
        unsafe { write_out(out, t, "out") }
    })
}

/// The core's placement formula ([`hetsched_core::turnaround::turnaround`])
/// for a task of `exec_ns` on unit `index`, from the unit's figures and this
/// client's view of it: on a CPU kind the load is its runnable threads
/// plus `extra_threads`, on any other unit the published view.
fn client_turnaround(
    c: &ClientObj,
    index: u32,
    exec_ns: f64,
    bytes_in: u64,
    bytes_out: u64,
    extra_threads: u32,
    ahead_ns: f64,
) -> HsResult<HsTurnaround> {
    let u = unit_of(c, index)?;
    let v = view_of(c, index)?;
    let load = if u.class == UnitClass::Cpu {
        UnitLoad::RunnableThreads(f64::from(v.runnable_threads) + f64::from(extra_threads))
    } else {
        UnitLoad::View(client_view(&v))
    };
    let copy_ns = if u.coherent {
        0.0
    } else {
        u.copy_in.time_ns(bytes_in) + u.copy_out.time_ns(bytes_out)
    };
    checked(&TurnaroundInput {
        exec_ns,
        dispatch_ns: u.dispatch_ns as f64,
        copy_ns,
        ahead_ns,
        slots: u.slots,
        load,
    })
}

/// The turnaround hetsched predicts for a task that executes `exec_ns` on
/// unit `index` alone and moves `bytes_in`/`bytes_out`:
/// `dispatch + copies + exec × stretch`, the stretch (`1 / utilisation`)
/// from this client's view; `hs_client_turnaround`'s `turnaround_ns` with
/// the work ahead spread over the unit's streams. On a CPU kind the
/// stretch is `runnable / cores` (at least 1), `extra_threads` being
/// runnable threads of the caller the page does not count yet; on a
/// device the published wait and share stretch exec, and `own_pending_ns`
/// (work the caller queued that the daemon has not seen, which runs
/// first, spread over the device's streams) adds to it, stretched alike.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_client_predict_ns(
    client: HsClient,
    index: u32,
    exec_ns: f64,
    bytes_in: u64,
    bytes_out: u64,
    extra_threads: u32,
    own_pending_ns: f64,
    out: *mut f64,
) -> HsStatus {
    guard(|| {
        let c = CLIENTS.get(client)?;
        let u = unit_of(&c, index)?;
        // Own pending work counts on devices only, spread over the streams.
        let ahead_ns = if u.class == UnitClass::Cpu {
            0.0
        } else {
            own_pending_ns / f64::from(u.slots.max(1))
        };
        let t = client_turnaround(
            &c,
            index,
            exec_ns,
            bytes_in,
            bytes_out,
            extra_threads,
            ahead_ns,
        )?;
        // SAFETY: the caller's promise on `out`.
        unsafe { write_out(out, t.turnaround_ns, "out") }
    })
}

/// hetsched's placement formula ([`hs_turnaround`](crate::turnaround::hs_turnaround))
/// for a task that executes `exec_ns` on unit `index` alone and moves
/// `bytes_in`/`bytes_out`, over this client's view of the unit now: on a
/// CPU kind the load is its runnable threads plus `extra_threads` (the
/// caller's, not counted yet), on any other unit the published view.
/// `ahead_ns` is the caller's own work queued before the task on the same
/// lane (a StarPU worker's queue), which the view does not count; it is
/// stretched alike. `HS_ERR_INVALID` when `exec_ns` is not finite and ≥ 0.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_client_turnaround(
    client: HsClient,
    index: u32,
    exec_ns: f64,
    bytes_in: u64,
    bytes_out: u64,
    extra_threads: u32,
    ahead_ns: f64,
    out: *mut HsTurnaround,
) -> HsStatus {
    guard(|| {
        let c = CLIENTS.get(client)?;
        let t = client_turnaround(
            &c,
            index,
            exec_ns,
            bytes_in,
            bytes_out,
            extra_threads,
            ahead_ns,
        )?;
        // SAFETY: the caller's promise on `out`.
        unsafe { write_out(out, t, "out") }
    })
}
