//! The device APIs this build drives: one line per API. A new API is a
//! [`DeviceApi`] in a file of its own beside this one, and a line here.

use super::device_api::DeviceApi;

/// Every device API of this build, in the order their units are numbered.
pub fn all() -> &'static [&'static dyn DeviceApi] {
    &[
        #[cfg(feature = "opencl")]
        &super::opencl::OpenClApi,
        #[cfg(feature = "cuda")]
        &super::cuda::CudaApi,
    ]
}

/// The API named `name`, if this build has it.
pub fn named(name: &str) -> Option<&'static dyn DeviceApi> {
    all().iter().copied().find(|a| a.name() == name)
}
