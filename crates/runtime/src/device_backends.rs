//! The device backends of a runtime: the built-in ones, one line each,
//! then those the program added ([`crate::RuntimeOptions::backend`]), in
//! the order their units are numbered.

use crate::device_backend::{DeviceBackend, OPENCL_API};
use crate::options::RuntimeOptions;

/// The backends this build has.
const BUILT_IN: &[&dyn DeviceBackend] = &[
    #[cfg(feature = "opencl")]
    &crate::opencl_exec::OpenClBackend,
    #[cfg(feature = "cuda")]
    &crate::cuda::exec::CudaBackend,
];

/// Every backend `opts` asks for (OpenCL's unless `opts.opencl` is off).
pub(crate) fn registered(opts: &RuntimeOptions) -> Vec<&dyn DeviceBackend> {
    BUILT_IN
        .iter()
        .copied()
        .filter(|b| opts.opencl || b.api() != OPENCL_API)
        .chain(opts.backends.0.iter().map(|b| &**b))
        .collect()
}
