//! The one `unsafe` of the served OpenCL path: a client's data region as
//! host memory a CPU device may work on in place
//! ([`hetsched_opencl::HostMemory`]), so a call's buffers need no copy in
//! or out.
#![allow(unsafe_code)]

use hetsched_opencl::HostMemory;
use hetsched_views::data_region::DataRegion;
use std::ptr::NonNull;
use std::sync::Arc;

/// A data region, kept alive for as long as a device buffer uses it.
pub(super) struct RegionMemory(pub Arc<DataRegion>);

// SAFETY: `DataRegion::host_bytes` names the region's whole mapping, which
// stays mapped read-write for as long as the `DataRegion` lives (this
// value holds it), never moves, and cannot fault: the memfd behind it is
// sealed against shrinking. The range is the same on every call. Rust
// code reaches those bytes only through the region's atomic slots, never
// through references, so the device's (and the client's) writes are no
// data race in Rust's sense.
unsafe impl HostMemory for RegionMemory {
    fn host_bytes(&self) -> (NonNull<u8>, usize) {
        self.0.host_bytes()
    }
}
