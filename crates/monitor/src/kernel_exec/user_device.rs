//! The skeleton every device's registered kernels share: a kernel is built
//! once per distinct (source, entry), and each call acquires its buffers,
//! copies in, launches, copies out and releases them, whatever the device.
//! A device says only how it does each step ([`UserDevice`]: OpenCL's in
//! [`super::opencl_user`], CUDA's in `cuda/user.rs`);
//! [`RegisteredKernels`] runs the steps in order over
//! [`super::user_store`]'s bookkeeping, which enforces what every device's
//! registered kernels guarantee.

use super::Registered;
use super::user_store::{BuiltKernels, CallBuffer, CallBuffers, DeviceBytes};
use hetsched_core::ids::ClientId;
use hetsched_protocol::user_kernel::{KernelSignature, UserCall};
use hetsched_views::data_region::DataRegion;
use std::ops::Range;
use std::sync::Arc;

/// What a device does for the kernels clients register on it.
pub(super) trait UserDevice {
    /// A built kernel.
    type Kernel;
    /// A device buffer.
    type Buffer: DeviceBytes;

    /// Refuses an `entry` this device cannot register before anything is
    /// looked up or built (a declaration where the device reads its
    /// parameters from the source).
    fn check_entry(&self, _entry: &str) -> Result<(), String> {
        Ok(())
    }

    /// Builds `entry` of `source`: the kernel and what its calls are
    /// checked against.
    fn build(&self, source: &str, entry: &str) -> Result<(Self::Kernel, KernelSignature), String>;

    /// A zeroed device buffer of `len` bytes.
    fn alloc(&self, len: u64) -> Result<Self::Buffer, String>;

    /// Buffer argument `i` of `call` (bytes `range` of `region`) as the
    /// region's own bytes, used in place, where the device can work on
    /// them; `None`: a device buffer, copied as its flags say.
    fn in_place(
        &self,
        _call: &UserCall,
        _region: &Arc<DataRegion>,
        _i: usize,
        _range: &Range<u64>,
    ) -> Option<Result<Self::Buffer, String>> {
        None
    }

    /// Copies `bytes` into `buffer`.
    fn upload(&self, buffer: &mut Self::Buffer, bytes: &[u8]) -> Result<(), String>;

    /// Launches `kernel` for `call`, its buffer arguments `buffers` in
    /// order, and makes what it wrote to buffers used in place visible.
    fn launch(
        &self,
        kernel: &Self::Kernel,
        signature: &KernelSignature,
        call: &UserCall,
        buffers: &[CallBuffer<Self::Buffer>],
    ) -> Result<(), String>;

    /// Copies `buffer` into `out`.
    fn download(&self, buffer: &Self::Buffer, out: &mut [u8]) -> Result<(), String>;

    /// After the outputs are read: what the device still owes the call
    /// (a fault that shows only when the device is waited for fails this
    /// call).
    fn finish(&self) -> Result<(), String> {
        Ok(())
    }
}

/// The kernels clients registered on one device, and their calls' buffers.
pub(super) struct RegisteredKernels<D: UserDevice> {
    built: BuiltKernels<D::Kernel>,
    buffers: CallBuffers<D::Buffer>,
}

impl<D: UserDevice> RegisteredKernels<D> {
    /// A client may keep up to `max_kept_bytes` on the device between
    /// calls.
    pub(super) fn new(max_kept_bytes: u64) -> RegisteredKernels<D> {
        RegisteredKernels {
            built: BuiltKernels::new(),
            buffers: CallBuffers::new(max_kept_bytes),
        }
    }

    /// Builds `entry` of `source` on `device` for `client`, or finds it
    /// built.
    pub(super) fn register(
        &mut self,
        device: &D,
        client: ClientId,
        source: &str,
        entry: &str,
    ) -> Result<Registered, String> {
        device.check_entry(entry)?;
        self.built
            .register(client, source, entry, || device.build(source, entry))
    }

    /// Runs `call` for `client`: buffers in, launch, buffers out.
    pub(super) fn run(
        &mut self,
        device: &D,
        client: ClientId,
        call: &UserCall,
        region: &Arc<DataRegion>,
    ) -> Result<(), String> {
        let entry = self.built.get(call.kernel)?.1.entry.clone();
        let in_place = |i: usize, range: &Range<u64>| device.in_place(call, region, i, range);
        let alloc = |len: u64| device.alloc(len);
        let mut buffers = self
            .buffers
            .acquire(client, call, region, in_place, alloc)
            .map_err(|e| format!("`{entry}`: {e}"))?;
        let result = self
            .copy_in_and_launch(device, call, region, &mut buffers)
            .map_err(|e| format!("`{entry}`: {e}"));
        self.buffers.release(client, buffers, region);
        result
    }

    fn copy_in_and_launch(
        &mut self,
        device: &D,
        call: &UserCall,
        region: &DataRegion,
        buffers: &mut [CallBuffer<D::Buffer>],
    ) -> Result<(), String> {
        self.buffers
            .copy_in(region, buffers, |b, bytes| device.upload(b, bytes))?;
        let (kernel, signature) = self.built.get(call.kernel)?;
        device.launch(kernel, signature, call, buffers)?;
        self.buffers
            .copy_out(region, buffers, |b, out| device.download(b, out))?;
        device.finish()
    }

    /// `client` left: its kept and spare buffers go, and the kernels only
    /// it registered.
    pub(super) fn forget(&mut self, client: ClientId) {
        self.buffers.forget(client);
        self.built.release(client);
    }

    /// Bytes of `client`'s spare device buffers (for OpenCL's tests).
    #[cfg(all(test, feature = "opencl"))]
    pub(super) fn spare_bytes(&self, client: ClientId) -> u64 {
        self.buffers.spare_bytes(client)
    }

    /// Bytes `client` keeps on the device (for OpenCL's tests).
    #[cfg(all(test, feature = "opencl"))]
    pub(super) fn kept_bytes(&self, client: ClientId) -> u64 {
        self.buffers.kept_bytes(client)
    }
}
