//! Which device each queue, context and allocation belongs to, numbered
//! as the daemon numbers its units (`opencl<N>`: every device of every
//! platform, platforms in the loader's order).

use crate::cl::*;
use crate::dispatch as d;
use crate::layer::next;
use hetsched_intercept::HandleMap;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};

type GetPlatformIds = unsafe extern "C" fn(ClUint, *mut Handle, *mut ClUint) -> ClInt;
type GetDeviceIds = unsafe extern "C" fn(Handle, u64, ClUint, *mut Handle, *mut ClUint) -> ClInt;
type GetInfo = unsafe extern "C" fn(Handle, ClUint, usize, *mut c_void, *mut usize) -> ClInt;

/// Every device's handle, in the daemon's order.
static DEVICES: OnceLock<Vec<usize>> = OnceLock::new();
/// Queue → device index. Read on every launch.
static QUEUES: HandleMap = HandleMap::new();
/// Allocation (cl_mem or SVM pointer) → where it was counted.
static ALLOCATIONS: Mutex<Option<HashMap<usize, Allocation>>> = Mutex::new(None);

#[derive(Clone, Copy, Debug)]
pub struct Allocation {
    pub device: usize,
    pub bytes: u64,
}

fn list(count: impl Fn(*mut Handle, ClUint, *mut ClUint) -> ClInt) -> Vec<Handle> {
    let mut n: ClUint = 0;
    if count(std::ptr::null_mut(), 0, &mut n) != CL_SUCCESS || n == 0 {
        return Vec::new();
    }
    let mut out = vec![std::ptr::null_mut(); n as usize];
    if count(out.as_mut_ptr(), n, std::ptr::null_mut()) != CL_SUCCESS {
        return Vec::new();
    }
    out
}

fn enumerate() -> Vec<usize> {
    let platforms = list(|out, n, ret| {
        next!(
            d::GET_PLATFORM_IDS,
            GetPlatformIds,
            CL_DEVICE_NOT_FOUND,
            (n, out, ret)
        )
    });
    let mut devices = Vec::new();
    for p in platforms {
        let ids = list(|out, n, ret| {
            next!(
                d::GET_DEVICE_IDS,
                GetDeviceIds,
                CL_DEVICE_NOT_FOUND,
                (p, CL_DEVICE_TYPE_ALL, n, out, ret)
            )
        });
        devices.extend(ids.into_iter().map(|h| h as usize));
    }
    devices
}

/// The daemon's index of `device`; `None` for a device it does not list
/// (a sub-device).
pub fn index_of(device: Handle) -> Option<usize> {
    DEVICES
        .get_or_init(enumerate)
        .iter()
        .position(|&h| h == device as usize)
}

/// One handle-valued info query.
fn info_handle(entry: usize, object: Handle, param: ClUint) -> Option<Handle> {
    let mut value: Handle = std::ptr::null_mut();
    let got = next!(
        entry,
        GetInfo,
        CL_INVALID_VALUE,
        (
            object,
            param,
            std::mem::size_of::<Handle>(),
            (&mut value as *mut Handle).cast(),
            std::ptr::null_mut(),
        )
    );
    (got == CL_SUCCESS && !value.is_null()).then_some(value)
}

/// One integer-valued info query (`cl_uint` or `size_t`, by `T`).
pub fn info_number<T: Copy + Default>(entry: usize, object: Handle, param: ClUint) -> Option<T> {
    let mut value = T::default();
    let got = next!(
        entry,
        GetInfo,
        CL_INVALID_VALUE,
        (
            object,
            param,
            std::mem::size_of::<T>(),
            (&mut value as *mut T).cast(),
            std::ptr::null_mut(),
        )
    );
    (got == CL_SUCCESS).then_some(value)
}

/// The first device of `context` (allocations are counted there; most
/// contexts have one device).
pub fn context_device(context: Handle) -> Option<usize> {
    index_of(info_handle(
        d::GET_CONTEXT_INFO,
        context,
        CL_CONTEXT_DEVICES,
    )?)
}

type QueueCall = unsafe extern "C" fn(Handle) -> ClInt;

/// The queue's reference count, `None` if the driver will not say.
fn queue_refs(queue: Handle) -> Option<ClUint> {
    info_number(d::GET_COMMAND_QUEUE_INFO, queue, CL_QUEUE_REFERENCE_COUNT)
}

/// Remembers a new queue's device, holding a reference of the layer's
/// own: the driver may keep a queue alive past the program's last
/// release (commands in flight), and a drain must never finish a queue
/// that is gone.
pub fn queue_created(queue: Handle, device: Handle) {
    let Some(index) = index_of(device) else {
        return;
    };
    QUEUES.with_write(|map| {
        if map.contains_key(&(queue as usize)) {
            return;
        }
        if next!(
            d::RETAIN_COMMAND_QUEUE,
            QueueCall,
            CL_INVALID_VALUE,
            (queue)
        ) == CL_SUCCESS
        {
            map.insert(queue as usize, index);
        }
    });
}

/// The device index of `queue`; asks the driver for a queue the layer did
/// not see created (made before the layer was loaded, or by a path it
/// does not cover).
#[inline]
pub fn queue_device(queue: Handle) -> Option<usize> {
    if let Some(known) = QUEUES.get(queue as usize) {
        return Some(known);
    }
    let device = info_handle(d::GET_COMMAND_QUEUE_INFO, queue, CL_QUEUE_DEVICE)?;
    queue_created(queue, device);
    index_of(device)
}

/// The program's release of `queue`; once only the layer's reference is
/// left, the layer lets go too and forgets the queue. Both happen under
/// the table's lock, so a drain never sees a queue in between.
pub fn release_queue(queue: Handle) -> ClInt {
    QUEUES.with_write(|map| {
        let result = next!(
            d::RELEASE_COMMAND_QUEUE,
            QueueCall,
            CL_INVALID_VALUE,
            (queue)
        );
        if result == CL_SUCCESS
            && map.contains_key(&(queue as usize))
            && queue_refs(queue) == Some(1)
        {
            map.remove(&(queue as usize));
            next!(
                d::RELEASE_COMMAND_QUEUE,
                QueueCall,
                CL_INVALID_VALUE,
                (queue)
            );
        }
        result
    })
}

/// Finishes every known queue of device `index` (the lease's drain).
/// Queues the program has let go of, which the driver kept alive for work
/// in flight, are finished and then released for good.
pub fn finish_queues(index: usize) {
    QUEUES.with_write(|map| {
        map.retain(|&queue, &mut dev| {
            if dev != index {
                return true;
            }
            let queue = queue as Handle;
            next!(d::FINISH, QueueCall, CL_SUCCESS, (queue));
            if queue_refs(queue) == Some(1) {
                next!(d::RELEASE_COMMAND_QUEUE, QueueCall, CL_SUCCESS, (queue));
                return false;
            }
            true
        });
    });
}

pub fn remember_allocation(key: usize, a: Allocation) {
    let mut m = ALLOCATIONS.lock().unwrap_or_else(|e| e.into_inner());
    m.get_or_insert_with(HashMap::new).insert(key, a);
}

pub fn forget_allocation(key: usize) -> Option<Allocation> {
    let mut m = ALLOCATIONS.lock().unwrap_or_else(|e| e.into_inner());
    m.as_mut()?.remove(&key)
}
