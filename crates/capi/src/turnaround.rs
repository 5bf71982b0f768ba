//! The placement formula for C: `hs_turnaround` over inputs the caller
//! gives, the core's [`turnaround`] and nothing else. `hs_client_predict_ns`
//! and `hs_client_turnaround` (in [`crate::client`]) run the same function
//! over the daemon's view of a unit.

use crate::client::HsUnitView;
use crate::error::{HsResult, HsStatus, err, guard};
use crate::handles::write_out;
use hetsched_core::turnaround::{Turnaround, TurnaroundInput, UnitLoad, turnaround};
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
pub(crate) fn client_view(v: &HsUnitView) -> ClientUnitView {
    ClientUnitView {
        guaranteed: v.guaranteed,
        wait_ns: v.wait_ns,
        current_utilisation: v.current_utilisation,
        throttled: v.throttled,
        max_utilisation: v.max_utilisation,
    }
}

/// The core's formula over `input`, or the error C sees.
pub(crate) fn checked(input: &TurnaroundInput) -> HsResult<HsTurnaround> {
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
