//! Queue creation and release (to know each queue's device), and the
//! waits after which a due lease goes back.

use crate::cl::*;
use crate::devices;
use crate::dispatch as d;
use crate::governed::governor;
use crate::layer::next;

unsafe extern "C" fn create_command_queue(
    context: Handle,
    device: Handle,
    properties: u64,
    err: *mut ClInt,
) -> Handle {
    type Next = unsafe extern "C" fn(Handle, Handle, u64, *mut ClInt) -> Handle;
    let q = next!(
        d::CREATE_COMMAND_QUEUE,
        Next,
        std::ptr::null_mut(),
        (context, device, properties, err)
    );
    if !q.is_null() {
        devices::queue_created(q, device);
    }
    q
}

unsafe extern "C" fn create_command_queue_with_properties(
    context: Handle,
    device: Handle,
    properties: *const u64,
    err: *mut ClInt,
) -> Handle {
    type Next = unsafe extern "C" fn(Handle, Handle, *const u64, *mut ClInt) -> Handle;
    let q = next!(
        d::CREATE_COMMAND_QUEUE_WITH_PROPERTIES,
        Next,
        std::ptr::null_mut(),
        (context, device, properties, err)
    );
    if !q.is_null() {
        devices::queue_created(q, device);
    }
    q
}

unsafe extern "C" fn release_command_queue(queue: Handle) -> ClInt {
    devices::release_queue(queue)
}

unsafe extern "C" fn finish(queue: Handle) -> ClInt {
    type Next = unsafe extern "C" fn(Handle) -> ClInt;
    let index = devices::queue_device(queue);
    if let Some(i) = index {
        governor().wait_begins(i);
    }
    let result = next!(d::FINISH, Next, CL_INVALID_VALUE, (queue));
    if let Some(i) = index {
        governor().synchronized(i, true);
    }
    result
}

unsafe extern "C" fn wait_for_events(count: ClUint, events: *const Handle) -> ClInt {
    type Next = unsafe extern "C" fn(ClUint, *const Handle) -> ClInt;
    let result = next!(d::WAIT_FOR_EVENTS, Next, CL_INVALID_VALUE, (count, events));
    // Which queue the events are on costs the driver a query: asked only
    // when some lease is due.
    if result == CL_SUCCESS && count > 0 && !events.is_null() && governor().any_lease_due() {
        // SAFETY: the driver accepted `count` events at `events`.
        let first = unsafe { *events };
        let queue = devices::info_number::<usize>(d::GET_EVENT_INFO, first, CL_EVENT_COMMAND_QUEUE);
        if let Some(i) = queue
            .filter(|&q| q != 0)
            .and_then(|q| devices::queue_device(q as Handle))
        {
            governor().synchronized(i, false);
        }
    }
    result
}

pub fn replacements() -> Vec<(usize, usize)> {
    vec![
        (
            d::CREATE_COMMAND_QUEUE,
            create_command_queue as *const () as usize,
        ),
        (
            d::CREATE_COMMAND_QUEUE_WITH_PROPERTIES,
            create_command_queue_with_properties as *const () as usize,
        ),
        (
            d::RELEASE_COMMAND_QUEUE,
            release_command_queue as *const () as usize,
        ),
        (d::FINISH, finish as *const () as usize),
        (d::WAIT_FOR_EVENTS, wait_for_events as *const () as usize),
    ]
}
