//! CUDA (feature `cuda`): the device layer, crate `hetsched-cuda`, under
//! its old path, and the runtime's CUDA backend ([`exec`]'s
//! `CudaBackend`, with [`crate::Task::cuda`]).

pub use hetsched_cuda::*;

pub(crate) mod exec;
