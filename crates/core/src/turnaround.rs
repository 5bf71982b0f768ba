//! The placement formula, once: Rinnegan's turnaround of one task on one
//! unit,
//!
//! ```text
//! stretch    = wall time per ns of execution on the unit now (≥ 1)
//! turnaround = dispatch + copy + (ahead + exec) × stretch
//! rate       = slots / (exec × stretch)
//! ```
//!
//! where `exec × stretch` is `exec / utilisation` of [`ClientUnitView`],
//! and `ahead` is work of the caller's own, queued on the same lane before
//! the task, that the unit's view does not count yet: it waits its turn
//! among everyone else's work as the task will, so it is stretched alike.
//!
//! Every user computes its figure here: the runtime's and the simulator's
//! placer ([`crate::placement::predict`]), the C API's
//! `hs_client_predict_ns` and `hs_turnaround` (and through them the StarPU
//! policy), and `hetsched.ray`'s node rates through the Python module's
//! `turnaround`. They differ only in what they know of the unit's load
//! ([`UnitLoad`]), which becomes a view before the one formula runs.

use crate::view::ClientUnitView;

/// What the caller knows of how busy a unit is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnitLoad {
    /// This client's view of the unit, as the daemon publishes it (the
    /// runtime, the simulator, the C API on a device).
    View(ClientUnitView),
    /// A time-shared CPU kind: threads runnable on its cores, every
    /// process's (the C API on a CPU kind, `hetsched.ray`). There is no
    /// queue to wait in; the fair slice, `slots / runnable`, bounds the
    /// stretch.
    RunnableThreads(f64),
    /// Tasks queued and running on the unit, every client's, each taken to
    /// be as long as this one (`hetsched.ray` on a device, which sees the
    /// unit-wide counts of another node's daemon): they are a wait of
    /// `backlog × exec / slots`.
    Backlog(f64),
}

impl UnitLoad {
    /// The view a task of `exec_ns` can expect from a unit of `slots`
    /// lanes under this load.
    #[inline]
    pub fn view(self, exec_ns: f64, slots: u32) -> ClientUnitView {
        let slots = f64::from(slots.max(1));
        match self {
            UnitLoad::View(view) => view,
            UnitLoad::RunnableThreads(runnable) => ClientUnitView {
                guaranteed: slots / runnable.max(1.0),
                wait_ns: f64::INFINITY,
                ..ClientUnitView::OPEN
            },
            UnitLoad::Backlog(tasks) => ClientUnitView {
                wait_ns: tasks.max(0.0) * exec_ns.max(1.0) / slots,
                ..ClientUnitView::OPEN
            },
        }
    }
}

/// One task on one unit, as the formula takes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TurnaroundInput {
    /// The task's execution time on the unit alone, ns. Not finite or
    /// negative: the model knows nothing yet of the unit's kind.
    pub exec_ns: f64,
    /// Time to start the task on the unit, ns.
    pub dispatch_ns: f64,
    /// Time to move its input in and its output back, ns.
    pub copy_ns: f64,
    /// The caller's own work ahead of the task on the same lane that the
    /// load does not count, ns of execution (0 for none).
    pub ahead_ns: f64,
    /// Lanes of the unit that run tasks side by side (cores of a CPU kind,
    /// streams of a device); at least 1.
    pub slots: u32,
    pub load: UnitLoad,
}

/// The formula's figures for one task on one unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Turnaround {
    /// Wall time per ns of execution on the unit now: `1 / utilisation`.
    pub stretch: f64,
    /// The task's wall time on the unit, `exec × stretch`, ns.
    pub stretched_ns: f64,
    /// The caller's work ahead, stretched alike, ns.
    pub ahead_ns: f64,
    /// `dispatch + copy + ahead × stretch + exec × stretch`, ns.
    pub turnaround_ns: f64,
    /// Tasks like this one per second the unit finishes for the caller,
    /// its lanes working side by side: `slots / (exec × stretch)`.
    pub rate_per_s: f64,
}

/// The placement formula (see the module's header). `None` when
/// `exec_ns` is not a finite number ≥ 0: the task's length there is not
/// known yet, and the unit should be tried rather than predicted.
#[inline]
pub fn turnaround(input: &TurnaroundInput) -> Option<Turnaround> {
    let exec = input.exec_ns;
    if !(exec.is_finite() && exec >= 0.0) {
        return None;
    }
    let stretched_ns = input.load.view(exec, input.slots).stretched_ns(exec);
    // `stretched_ns` counts at least 1 ns of execution.
    let stretch = stretched_ns / exec.max(1.0);
    // Unknown work ahead (not finite) counts as none.
    let ahead = if input.ahead_ns.is_finite() {
        input.ahead_ns.max(0.0)
    } else {
        0.0
    };
    let ahead_ns = ahead * stretch;
    Some(Turnaround {
        stretch,
        stretched_ns,
        ahead_ns,
        turnaround_ns: input.dispatch_ns + input.copy_ns + ahead_ns + stretched_ns,
        rate_per_s: f64::from(input.slots.max(1)) * 1e9 / stretched_ns,
    })
}

/// The two figures placement reads of [`turnaround`] for a task with no
/// work of the caller's own ahead of it, under a view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ViewTurnaround {
    /// `exec × stretch`, ns (as [`Turnaround::stretched_ns`]).
    pub stretched_ns: f64,
    /// `dispatch + copy + exec × stretch`, ns (as [`Turnaround::turnaround_ns`]).
    pub turnaround_ns: f64,
}

/// Largest execution time [`view_turnaround`] computes itself: up to here
/// the stretched time, at most `max(exec, 1) × 10⁴`, cannot overflow.
const VIEW_FAST_EXEC_NS: f64 = 1e300;

/// [`turnaround`] with `ahead_ns = 0` and [`UnitLoad::View`]: the same
/// `stretched_ns` and `turnaround_ns`, bit for bit, without computing the
/// stretch and the rate, which cost a division each and which the placer,
/// running this for every unit of every decision, never reads.
///
/// Why it is the same number: [`turnaround`] adds `0 × stretch` for the
/// work ahead. `stretched_ns` is at least `max(exec, 1)`, so the stretch is
/// finite whenever `stretched_ns` is, and `0 × stretch` is then `+0`;
/// adding `+0` to `dispatch + copy` changes nothing but a `−0` into `+0`,
/// and either zero plus `stretched_ns` (≥ 1) is `stretched_ns`. Only an
/// infinite `stretched_ns` makes the term NaN, which takes an execution
/// time near `f64::MAX`: every time above [`VIEW_FAST_EXEC_NS`] takes the
/// full formula, as do the times it refuses (negative, NaN, infinite), so
/// that one range check on the input replaces checking the output.
#[inline(always)]
pub fn view_turnaround(
    exec_ns: f64,
    dispatch_ns: f64,
    copy_ns: f64,
    view: &ClientUnitView,
) -> Option<ViewTurnaround> {
    // Two comparisons, which NaN fails.
    if !(0.0..=VIEW_FAST_EXEC_NS).contains(&exec_ns) {
        return view_turnaround_by_formula(exec_ns, dispatch_ns, copy_ns, view);
    }
    let stretched_ns = view.stretched_ns(exec_ns);
    Some(ViewTurnaround {
        stretched_ns,
        turnaround_ns: dispatch_ns + copy_ns + stretched_ns,
    })
}

/// [`view_turnaround`] by the full formula: its rare cases (and `None`
/// for an execution time that is not a finite number ≥ 0), and its
/// reference in the tests.
#[cold]
pub fn view_turnaround_by_formula(
    exec_ns: f64,
    dispatch_ns: f64,
    copy_ns: f64,
    view: &ClientUnitView,
) -> Option<ViewTurnaround> {
    let t = turnaround(&TurnaroundInput {
        exec_ns,
        dispatch_ns,
        copy_ns,
        ahead_ns: 0.0,
        slots: 1,
        load: UnitLoad::View(*view),
    })?;
    Some(ViewTurnaround {
        stretched_ns: t.stretched_ns,
        turnaround_ns: t.turnaround_ns,
    })
}

#[cfg(test)]
mod tests;
