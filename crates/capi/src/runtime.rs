//! The runtime part of the C API: connect, tasks with per-unit
//! implementations, accelerate, wait, goals, status.

use crate::error::{HsResult, HsStatus, err, guard};
use crate::handles::{Table, c_str, fill_name, name_and_out, opt_c_str, write_out};
use hetsched_runtime::{
    Direction, Handle, Mode, MonitorMode, PerformanceGoal, Runtime, RuntimeError, RuntimeOptions,
    Task, TaskError,
};
use std::ffi::{c_char, c_void};
use std::sync::Mutex;
use std::time::Duration;

/// Longest unit name or kind `HsUnitInfo` carries (with the NUL).
pub const HS_NAME_MAX: usize = 64;

/// A runtime (`hs_runtime_connect`).
pub type HsRuntime = u64;
/// A task description (`hs_task_new`).
pub type HsTask = u64;
/// One accelerated call (`hs_accelerate`).
pub type HsCall = u64;

/// A task implementation on the CPU, or an emulated device's kernel:
/// works on `args` in place. `user` is what was given with it.
pub type HsKernelFn = Option<unsafe extern "C" fn(args: *mut c_void, user: *mut c_void)>;
/// An emulated device's execution time for `args`, in nanoseconds.
pub type HsCostFn = Option<unsafe extern "C" fn(args: *const c_void, user: *mut c_void) -> u64>;
/// Input and output bytes of one call on `args`.
pub type HsSizesFn = Option<
    unsafe extern "C" fn(
        args: *const c_void,
        user: *mut c_void,
        bytes_in: *mut u64,
        bytes_out: *mut u64,
    ),
>;
/// A goal's tracker: the application's current performance (higher is better).
pub type HsTrackerFn = Option<unsafe extern "C" fn(user: *mut c_void) -> f64>;
/// The optimizer's last rung: `direction` is `HS_REDUCE` (do less work per
/// unit of progress) or `HS_INCREASE`.
pub type HsAdjustFn = Option<
    unsafe extern "C" fn(direction: HsDirection, achieved: f64, target: f64, user: *mut c_void),
>;

/// Where the runtime's monitor lives (`HsRuntimeOptions::monitor`).
pub const HS_MONITOR_AUTO: u32 = 0;
pub const HS_MONITOR_DAEMON: u32 = 1;
pub const HS_MONITOR_EMBEDDED: u32 = 2;

/// `hs_accelerate` modes.
pub const HS_SYNC: u32 = 0;
pub const HS_ASYNC: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HsDirection {
    HsReduce = 0,
    HsIncrease = 1,
}

/// Options for `hs_runtime_connect_with`; start from `hs_runtime_options_default`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsRuntimeOptions {
    /// `HS_MONITOR_AUTO` (daemon if it answers, else embedded),
    /// `HS_MONITOR_DAEMON` or `HS_MONITOR_EMBEDDED`.
    pub monitor: u32,
    /// The daemon's socket; NULL: `$HETSCHED_SOCKET` or the default.
    pub socket: *const c_char,
    /// Config of an embedded monitor; NULL: `$HETSCHED_CONFIG`, then
    /// `/etc/hetsched/hetsched.toml`, else CPUs only.
    pub config: *const c_char,
    /// Where task models persist; NULL: `$XDG_CACHE_HOME/hetsched/models`.
    pub model_dir: *const c_char,
    /// Load models at start and save them when the runtime closes.
    pub persist_models: bool,
}

/// One unit the runtime can place on, with what it did so far.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsUnitInfo {
    pub name: [c_char; HS_NAME_MAX],
    pub kind: [c_char; HS_NAME_MAX],
    /// 1: a CPU kind; 0: a device.
    pub is_cpu: bool,
    /// The monitor serves this unit itself (an emulated device).
    pub emulated: bool,
    /// Tasks it runs at once (cores, streams).
    pub slots: u32,
    /// Speed relative to one reference CPU core.
    pub relative_speed: f64,
    /// Calls this runtime finished there.
    pub completed: u64,
    /// Their execution time, ns.
    pub exec_ns: f64,
}

/// Where the runtime stands (`hs_runtime_status`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsRuntimeStatus {
    /// The monitor is the system daemon (else an embedded one).
    pub monitor_is_daemon: bool,
    pub failovers: u32,
    /// Calls accepted and not finished.
    pub outstanding: u64,
    pub units: u32,
}

/// Where a finished call ran.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsRunInfo {
    /// Index of the unit (as `hs_runtime_unit_info` numbers them).
    pub unit: u32,
    /// From `hs_accelerate` to the result, ns.
    pub turnaround_ns: u64,
}

/// The optimizer's state (`hs_runtime_goal_status`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HsGoalStatus {
    pub target: f64,
    pub achieved: f64,
    pub spreading: bool,
    pub shares: u32,
    pub reductions: u32,
    pub periods: u64,
}

/// The C caller's argument pointer, moved to the worker that runs the call.
/// The caller promises (`hs_accelerate`) that it stays valid until the call
/// is waited for, and that nothing else touches it meanwhile.
#[derive(Clone, Copy)]
pub(crate) struct Args(pub(crate) *mut c_void);
// SAFETY: the pointer is only dereferenced by the C callbacks, which the
// caller registered as safe to run on worker threads (documented on
// `hs_accelerate`); Rust never reads through it.
unsafe impl Send for Args {}

/// A C `user` pointer handed back to callbacks on other threads.
#[derive(Clone, Copy)]
pub(crate) struct User(pub(crate) *mut c_void);
// SAFETY: as for `Args`: opaque to Rust, and the caller promises the
// callbacks may use it from any thread.
unsafe impl Send for User {}
// SAFETY: shared references only copy the pointer; see `Send` above.
unsafe impl Sync for User {}

type CTask = Task<Args, ()>;

pub(crate) struct TaskObj {
    task: Mutex<CTask>,
    name: String,
}

pub(crate) struct CallObj {
    handle: Mutex<Option<Handle<()>>>,
}

pub(crate) static RUNTIMES: Table<Runtime> = Table::new("runtime");
pub(crate) static TASKS: Table<TaskObj> = Table::new("task");
pub(crate) static CALLS: Table<CallObj> = Table::new("call");

fn runtime_error(e: RuntimeError) -> (HsStatus, String) {
    let status = match &e {
        RuntimeError::Environment(_) => HsStatus::HsErrInvalid,
        RuntimeError::Link(_) | RuntimeError::Threads(_) => HsStatus::HsErrConnect,
        RuntimeError::NoImplementation { .. } => HsStatus::HsErrNoImplementation,
        RuntimeError::Task(_) => HsStatus::HsErrTaskFailed,
    };
    (status, e.to_string())
}

fn task_error(e: TaskError) -> (HsStatus, String) {
    (HsStatus::HsErrTaskFailed, e.to_string())
}

/// Default options: monitor auto, default socket and config, models persisted.
#[unsafe(no_mangle)]
pub extern "C" fn hs_runtime_options_default() -> HsRuntimeOptions {
    HsRuntimeOptions {
        monitor: HS_MONITOR_AUTO,
        socket: std::ptr::null(),
        config: std::ptr::null(),
        model_dir: std::ptr::null(),
        persist_models: true,
    }
}

/// Connects a runtime named `name` with default options (the daemon if it
/// answers, else an embedded monitor) and writes its handle to `out`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_runtime_connect(name: *const c_char, out: *mut HsRuntime) -> HsStatus {
    let opts = hs_runtime_options_default();
    // SAFETY: forwarded; `opts` lives on this stack frame for the call.
    unsafe { hs_runtime_connect_with(name, &opts, out) }
}

/// Connects a runtime with explicit options.
///
/// # Safety
/// `name` and the strings in `opts` are NULL or NUL-terminated; `opts` is
/// NULL or points to an `HsRuntimeOptions`; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_runtime_connect_with(
    name: *const c_char,
    opts: *const HsRuntimeOptions,
    out: *mut HsRuntime,
) -> HsStatus {
    guard(|| {
        // The runtime's warnings reach stderr (RUST_LOG for more).
        hetsched_runtime::logging::init("warn");
        // SAFETY: the caller's promise on `name`.
        let name = unsafe { name_and_out(name, "name", out) }?;
        if opts.is_null() {
            return err(HsStatus::HsErrNull, "opts is NULL");
        }
        // SAFETY: non-NULL, and the caller promises it points to options.
        let o = unsafe { *opts };
        let mut ro = RuntimeOptions::new(name).map_err(|e| (HsStatus::HsErrInvalid, e))?;
        ro = ro.monitor(match o.monitor {
            HS_MONITOR_AUTO => MonitorMode::Auto,
            HS_MONITOR_DAEMON => MonitorMode::Daemon,
            HS_MONITOR_EMBEDDED => MonitorMode::Embedded,
            m => return err(HsStatus::HsErrInvalid, format!("unknown monitor mode {m}")),
        });
        // SAFETY: the caller's promise on the option strings.
        if let Some(s) = unsafe { opt_c_str(o.socket, "opts.socket") }? {
            ro = ro.socket(s);
        }
        // SAFETY: as above.
        if let Some(c) = unsafe { opt_c_str(o.config, "opts.config") }? {
            ro = ro.config(c);
        }
        // SAFETY: as above.
        if let Some(d) = unsafe { opt_c_str(o.model_dir, "opts.model_dir") }? {
            ro = ro.model_dir(d);
        }
        ro = ro.persist_models(o.persist_models);
        let rt = Runtime::with_options(ro).map_err(runtime_error)?;
        let id = RUNTIMES.insert(rt);
        // SAFETY: checked non-NULL above; the caller promises it is writable.
        unsafe { write_out(out, id, "out") }
    })
}

/// Closes a runtime: waits for every call accepted, stops its workers and
/// saves the task models. The handle is invalid afterwards.
#[unsafe(no_mangle)]
pub extern "C" fn hs_runtime_close(rt: HsRuntime) -> HsStatus {
    guard(|| {
        // The last reference drops here (or when a call in flight on
        // another thread returns), which waits and saves.
        drop(RUNTIMES.remove(rt)?);
        Ok(())
    })
}

/// Blocks until every call accepted so far has finished.
#[unsafe(no_mangle)]
pub extern "C" fn hs_runtime_wait_all(rt: HsRuntime) -> HsStatus {
    guard(|| {
        RUNTIMES.get(rt)?.wait_all();
        Ok(())
    })
}

/// The runtime's monitor, failovers, outstanding calls and unit count.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_runtime_status(rt: HsRuntime, out: *mut HsRuntimeStatus) -> HsStatus {
    guard(|| {
        let r = RUNTIMES.get(rt)?;
        let s = r.stats();
        let status = HsRuntimeStatus {
            monitor_is_daemon: s.monitor == "daemon",
            failovers: s.failovers,
            outstanding: s.outstanding,
            units: r.units().len() as u32,
        };
        // SAFETY: the caller's promise on `out`.
        unsafe { write_out(out, status, "out") }
    })
}

/// Unit `index` (0 ≤ index < `HsRuntimeStatus::units`) and its counters.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_runtime_unit_info(
    rt: HsRuntime,
    index: u32,
    out: *mut HsUnitInfo,
) -> HsStatus {
    guard(|| {
        let r = RUNTIMES.get(rt)?;
        let Some(u) = r.units().get(index as usize) else {
            return err(
                HsStatus::HsErrInvalid,
                format!("unit {index} out of range ({} units)", r.units().len()),
            );
        };
        let stats = r.stats();
        let st = stats.units.get(index as usize);
        let info = HsUnitInfo {
            name: fill_name(&u.name),
            kind: fill_name(&u.kind),
            is_cpu: u.class == hetsched_core::unit::UnitClass::Cpu,
            emulated: u.emulated,
            slots: u.slots,
            relative_speed: u.relative_speed,
            completed: st.map_or(0, |s| s.completed),
            exec_ns: st.map_or(0.0, |s| s.exec_ns),
        };
        // SAFETY: the caller's promise on `out`.
        unsafe { write_out(out, info, "out") }
    })
}

/// A new task with no implementation yet; `name` keys its model.
///
/// # Safety
/// `name` is NULL or NUL-terminated; `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_task_new(name: *const c_char, out: *mut HsTask) -> HsStatus {
    guard(|| {
        // SAFETY: the caller's promise on `name`.
        let name = unsafe { name_and_out(name, "task name", out) }?;
        let id = TASKS.insert(TaskObj {
            task: Mutex::new(Task::new(name)),
            name: name.to_string(),
        });
        // SAFETY: checked non-NULL; the caller promises it is writable.
        unsafe { write_out(out, id, "out") }
    })
}

pub(crate) fn edit_task(task: HsTask, f: impl FnOnce(CTask) -> CTask) -> HsResult<()> {
    let t = TASKS.get(task)?;
    let mut guard = t.task.lock().unwrap_or_else(|p| p.into_inner());
    let old = guard.clone();
    *guard = f(old);
    Ok(())
}

/// Sets the task's CPU implementation. It runs on the runtime's pinned CPU
/// workers, any thread, with `user` as given.
#[unsafe(no_mangle)]
pub extern "C" fn hs_task_set_cpu(task: HsTask, f: HsKernelFn, user: *mut c_void) -> HsStatus {
    guard(|| {
        let Some(f) = f else {
            return err(HsStatus::HsErrNull, "cpu function is NULL");
        };
        let user = User(user);
        edit_task(task, |t| {
            t.cpu(move |a: &Args| {
                let u = user;
                // SAFETY: the C caller registered `f` for its `args`/`user`
                // pair and promised both stay valid until the call is waited.
                unsafe { f(a.0, u.0) }
            })
        })
    })
}

/// Adds an implementation on emulated devices of unit kind `kind` (an
/// `[[emulated]]` kind of the monitor): the monitor holds a stream for
/// `cost(args)` ns, then `kernel(args)` computes the result on the host.
///
/// # Safety
/// `kind` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_task_add_emulated(
    task: HsTask,
    kind: *const c_char,
    cost: HsCostFn,
    kernel: HsKernelFn,
    user: *mut c_void,
) -> HsStatus {
    guard(|| {
        // SAFETY: the caller's promise on `kind`.
        let kind = unsafe { c_str(kind, "kind") }?.to_string();
        let (Some(cost), Some(kernel)) = (cost, kernel) else {
            return err(HsStatus::HsErrNull, "cost or kernel function is NULL");
        };
        let user = User(user);
        edit_task(task, |t| {
            t.emulated(
                kind,
                move |a: &Args| {
                    let u = user;
                    // SAFETY: as in `hs_task_set_cpu`.
                    Duration::from_nanos(unsafe { cost(a.0, u.0) })
                },
                move |a: &Args| {
                    let u = user;
                    // SAFETY: as in `hs_task_set_cpu`.
                    unsafe { kernel(a.0, u.0) }
                },
            )
        })
    })
}

/// Sets how many bytes a call reads and writes (the model's variable and
/// the copy cost to a device). Without it both are 0.
#[unsafe(no_mangle)]
pub extern "C" fn hs_task_set_sizes(task: HsTask, f: HsSizesFn, user: *mut c_void) -> HsStatus {
    guard(|| {
        let Some(f) = f else {
            return err(HsStatus::HsErrNull, "sizes function is NULL");
        };
        let user = User(user);
        edit_task(task, |t| {
            t.sizes(move |a: &Args| {
                let u = user;
                let (mut bytes_in, mut bytes_out) = (0u64, 0u64);
                // SAFETY: as in `hs_task_set_cpu`; the two out-pointers are
                // locals of this frame.
                unsafe { f(a.0, u.0, &mut bytes_in, &mut bytes_out) };
                (bytes_in, bytes_out)
            })
        })
    })
}

/// Frees a task description. Calls already accepted keep running.
#[unsafe(no_mangle)]
pub extern "C" fn hs_task_free(task: HsTask) -> HsStatus {
    guard(|| {
        drop(TASKS.remove(task)?);
        Ok(())
    })
}

/// Runs `task` on `args` where it is predicted to finish soonest.
/// `mode` is `HS_SYNC` (returns when it has run) or `HS_ASYNC` (returns at
/// once). Either way `*out` is a call handle to pass to `hs_call_wait`
/// (which frees it) or `hs_call_discard`.
///
/// # Safety
/// `args` is handed to the task's implementations on a worker thread: it
/// must stay valid, and untouched by the caller, until the call is waited
/// for. `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_accelerate(
    rt: HsRuntime,
    task: HsTask,
    args: *mut c_void,
    mode: u32,
    out: *mut HsCall,
) -> HsStatus {
    guard(|| {
        let mode = match mode {
            HS_SYNC => Mode::Sync,
            HS_ASYNC => Mode::Async,
            m => return err(HsStatus::HsErrInvalid, format!("unknown mode {m}")),
        };
        if out.is_null() {
            return err(HsStatus::HsErrNull, "out is NULL");
        }
        let r = RUNTIMES.get(rt)?;
        let t = TASKS.get(task)?;
        let task = t.task.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let handle = r
            .accelerate(&task, Args(args), mode)
            .map_err(runtime_error)?;
        let id = CALLS.insert(CallObj {
            handle: Mutex::new(Some(handle)),
        });
        // SAFETY: checked non-NULL; the caller promises it is writable.
        unsafe { write_out(out, id, "out") }
    })
}

/// Blocks until the call has run, frees the handle and returns
/// `HS_OK` or `HS_ERR_TASK_FAILED` (message: why). `info` may be NULL.
///
/// # Safety
/// `info` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_call_wait(call: HsCall, info: *mut HsRunInfo) -> HsStatus {
    guard(|| {
        let c = CALLS.remove(call)?;
        let handle = c.handle.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(handle) = handle else {
            return err(HsStatus::HsErrBadHandle, "call already waited for");
        };
        let ((), run) = handle.wait_with_info().map_err(task_error)?;
        if !info.is_null() {
            let ri = HsRunInfo {
                unit: u32::from(run.unit.0),
                turnaround_ns: run.turnaround.as_nanos().min(u128::from(u64::MAX)) as u64,
            };
            // SAFETY: non-NULL; the caller promises it is writable.
            unsafe { write_out(info, ri, "info") }?;
        }
        Ok(())
    })
}

/// `HS_OK` if the call has finished (a wait would not block),
/// `HS_ERR_NOT_READY` if not. The handle stays valid.
#[unsafe(no_mangle)]
pub extern "C" fn hs_call_is_done(call: HsCall) -> HsStatus {
    guard(|| {
        let c = CALLS.get(call)?;
        let done = c
            .handle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|h| h.is_done());
        if done {
            Ok(())
        } else {
            err(HsStatus::HsErrNotReady, "the call has not finished yet")
        }
    })
}

/// Frees a call handle without waiting; the call still runs (and
/// `hs_runtime_wait_all` / `hs_runtime_close` still wait for it).
#[unsafe(no_mangle)]
pub extern "C" fn hs_call_discard(call: HsCall) -> HsStatus {
    guard(|| {
        drop(CALLS.remove(call)?);
        Ok(())
    })
}

/// Starts the goal optimizer: every `period_ms` (0: 500 ms) it calls
/// `tracker(user)` and, below `target`, spreads calls, asks for shares,
/// then calls `on_adjust` (may be NULL). Replaces an earlier goal.
/// Both callbacks run on the optimizer's thread.
#[unsafe(no_mangle)]
pub extern "C" fn hs_runtime_set_goal(
    rt: HsRuntime,
    target: f64,
    tracker: HsTrackerFn,
    on_adjust: HsAdjustFn,
    user: *mut c_void,
    period_ms: u32,
) -> HsStatus {
    guard(|| {
        let Some(tracker) = tracker else {
            return err(HsStatus::HsErrNull, "tracker is NULL");
        };
        if !target.is_finite() || target <= 0.0 {
            return err(
                HsStatus::HsErrInvalid,
                format!("target must be a positive number, got {target}"),
            );
        }
        let r = RUNTIMES.get(rt)?;
        let user = User(user);
        let mut goal = PerformanceGoal::new(target, move || {
            let u = user;
            // SAFETY: the caller registered `tracker` with `user` for use
            // from the optimizer thread.
            unsafe { tracker(u.0) }
        });
        if let Some(adjust) = on_adjust {
            goal = goal.on_adjust(move |a| {
                let u = user;
                let d = match a.direction {
                    Direction::Reduce => HsDirection::HsReduce,
                    Direction::Increase => HsDirection::HsIncrease,
                };
                // SAFETY: as for the tracker.
                unsafe { adjust(d, a.achieved, a.target, u.0) }
            });
        }
        if period_ms > 0 {
            goal = goal.period(Duration::from_millis(u64::from(period_ms)));
        }
        r.set_goal(goal).map_err(runtime_error)
    })
}

/// Stops the optimizer and gives back what it took.
#[unsafe(no_mangle)]
pub extern "C" fn hs_runtime_clear_goal(rt: HsRuntime) -> HsStatus {
    guard(|| {
        RUNTIMES.get(rt)?.clear_goal();
        Ok(())
    })
}

/// The optimizer's state; `HS_ERR_NOT_READY` when no goal is set.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_runtime_goal_status(rt: HsRuntime, out: *mut HsGoalStatus) -> HsStatus {
    guard(|| {
        let Some(s) = RUNTIMES.get(rt)?.goal_status() else {
            return err(HsStatus::HsErrNotReady, "no goal is set");
        };
        let g = HsGoalStatus {
            target: s.target,
            achieved: s.achieved,
            spreading: s.spreading,
            shares: s.shares,
            reductions: s.reductions,
            periods: s.periods,
        };
        // SAFETY: the caller's promise on `out`.
        unsafe { write_out(out, g, "out") }
    })
}

/// Name of a task (for messages); `HS_ERR_BAD_HANDLE` for a bad handle.
///
/// # Safety
/// `buf` is NULL or writable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hs_task_name(task: HsTask, buf: *mut c_char, len: usize) -> HsStatus {
    guard(|| {
        let t = TASKS.get(task)?;
        if buf.is_null() {
            return err(HsStatus::HsErrNull, "buf is NULL");
        }
        if len == 0 {
            return err(HsStatus::HsErrInvalid, "len is 0");
        }
        let bytes = t.name.as_bytes();
        let n = bytes.len().min(len - 1);
        // SAFETY: `buf` is writable for `len` bytes (caller) and n + 1 ≤ len.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, n);
            buf.add(n).write(0);
        }
        Ok(())
    })
}
