//! hetsched's OpenCL layer: loaded by the ICD loader itself when
//! `OPENCL_LAYERS` names it (ocl-icd ≥ 2.3 and the Khronos loader both
//! do), so no symbol tricks are needed. `hetsched run` sets it up.
//!
//! The loader calls [`layer::clInitLayer`] with the next layer's (or the
//! driver's) dispatch table; the layer answers with a copy in which the
//! calls it governs are its own:
//! - queue creation and release, to know each queue's device (the unit
//!   `opencl<N>`, `N` the device's index over every platform, as the
//!   daemon numbers them);
//! - kernel launches, copies, fills and migrations, which wait for a live
//!   lease on the queue's device ([`hetsched_intercept::Governor`]);
//! - `clFinish` and `clWaitForEvents`, after which a due lease goes back;
//! - buffer, image and SVM allocations and their releases, counted per
//!   device against the program's cap (`CL_MEM_OBJECT_ALLOCATION_FAILURE`
//!   past it).
//!
//! Everything else goes straight to the driver.

// This crate is an FFI boundary: every entry point is called by the ICD
// loader with raw OpenCL handles, and calls the next layer through
// function pointers from its dispatch table. The unsafe code is kept to
// calling those pointers with the arguments the program gave.
#![allow(unsafe_code)]

mod cl;
mod devices;
pub mod dispatch;
mod governed;
mod hooks;
pub mod layer;

/// The file name of this library, for `hetsched run`.
pub const LIBRARY_FILE: &str = "libhetsched_opencl_layer.so";
