//! The few OpenCL types and constants the layer uses (OpenCL 3.0
//! headers' values).

use std::ffi::c_void;

pub type ClInt = i32;
pub type ClUint = u32;
pub type Handle = *mut c_void;

pub const CL_SUCCESS: ClInt = 0;
pub const CL_DEVICE_NOT_FOUND: ClInt = -1;
pub const CL_MEM_OBJECT_ALLOCATION_FAILURE: ClInt = -4;
pub const CL_INVALID_VALUE: ClInt = -30;

pub const CL_DEVICE_TYPE_ALL: u64 = 0xFFFF_FFFF;
pub const CL_CONTEXT_DEVICES: ClUint = 0x1081;
pub const CL_QUEUE_DEVICE: ClUint = 0x1091;
pub const CL_QUEUE_REFERENCE_COUNT: ClUint = 0x1092;
pub const CL_MEM_SIZE: ClUint = 0x1102;
pub const CL_MEM_ASSOCIATED_MEMOBJECT: ClUint = 0x1107;
pub const CL_EVENT_COMMAND_QUEUE: ClUint = 0x11D0;

pub const CL_LAYER_API_VERSION: ClUint = 0x4240;
pub const CL_LAYER_NAME: ClUint = 0x4241;
pub const CL_LAYER_API_VERSION_100: ClUint = 100;
