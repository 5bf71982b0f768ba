//! OpenCL devices as served units (PoCL on this machine, any GPU's
//! OpenCL driver elsewhere): the built-in kernels, and the kernels clients
//! register ([`super::opencl_user`]).

use super::device_api::{DeviceApi, ExecutorDevice, ListedDevice, ServedDevice};
use super::opencl_user::UserKernels;
use super::wire::DeviceSpec;
use super::{KernelBackend, Registered};
use hetsched_core::ids::ClientId;
use hetsched_core::unit::UnitClass;
use hetsched_opencl::kernels::{Aes128Ctr, Histogram};
use hetsched_opencl::{DeviceInfo, DeviceKind, OpenClDevice};
use hetsched_protocol::kernel_call::Kernel;
use hetsched_protocol::user_kernel::UserCall;
use hetsched_views::data_region::DataRegion;
use std::sync::Arc;

/// A served OpenCL device as the daemon drives it: the built-in kernels.
/// Clients' registered kernels run in kernel executor processes
/// ([`OpenClUserBackend`]), never here.
pub struct OpenClBackend {
    device: OpenClDevice,
    histogram: Histogram,
    aes: Aes128Ctr,
}

impl OpenClBackend {
    /// Opens device `index` of [`hetsched_opencl::devices`] and builds
    /// every built-in kernel on it, so the first call does not pay for it.
    pub fn open(index: usize) -> Result<OpenClBackend, String> {
        let device = OpenClDevice::open(index).map_err(|e| e.to_string())?;
        let histogram = Histogram::new(&device).map_err(|e| e.to_string())?;
        let aes = Aes128Ctr::new(&device).map_err(|e| e.to_string())?;
        Ok(OpenClBackend {
            device,
            histogram,
            aes,
        })
    }

    pub fn info(&self) -> &DeviceInfo {
        self.device.info()
    }
}

/// An OpenCL device as a kernel executor process opens it
/// ([`super::executor_main`]): clients' registered kernels only.
pub struct OpenClUserBackend {
    device: OpenClDevice,
    user: UserKernels,
}

impl OpenClUserBackend {
    pub fn open(index: usize, max_kept_bytes: u64) -> Result<OpenClUserBackend, String> {
        let device = OpenClDevice::open(index).map_err(|e| e.to_string())?;
        Ok(OpenClUserBackend {
            device,
            user: UserKernels::new(max_kept_bytes),
        })
    }

    pub fn name(&self) -> String {
        self.device.info().name.trim().to_string()
    }
}

impl KernelBackend for OpenClUserBackend {
    fn kernels(&self) -> &[Kernel] {
        &[]
    }

    fn run(&mut self, kernel: Kernel, _: &[u8], _: &[u8]) -> Result<Vec<u8>, String> {
        Err(format!("a kernel executor runs no {kernel}"))
    }

    fn register(
        &mut self,
        client: ClientId,
        source: &str,
        entry: &str,
    ) -> Result<Registered, String> {
        self.user.register(&self.device, client, source, entry)
    }

    fn run_user(
        &mut self,
        client: ClientId,
        call: &UserCall,
        region: &Arc<DataRegion>,
    ) -> Result<(), String> {
        self.user.run(&self.device, client, call, region)
    }

    fn forget_client(&mut self, client: ClientId) {
        self.user.forget(client);
    }
}

impl KernelBackend for OpenClBackend {
    fn kernels(&self) -> &[Kernel] {
        &Kernel::ALL
    }

    fn device_spec(&self) -> Option<DeviceSpec> {
        Some(DeviceSpec {
            api: OpenClApi.name().into(),
            index: self.device.info().index,
        })
    }

    fn run(&mut self, kernel: Kernel, input: &[u8], aux: &[u8]) -> Result<Vec<u8>, String> {
        match kernel {
            Kernel::Histogram => {
                let (counts, _) = self
                    .histogram
                    .run(&self.device, input)
                    .map_err(|e| e.to_string())?;
                Ok(counts.iter().flat_map(|c| c.to_le_bytes()).collect())
            }
            Kernel::Aes128Ctr => {
                let (key, iv) = aux.split_at(16);
                let key: &[u8; 16] = key.try_into().map_err(|_| "a 16-byte key")?;
                let iv: &[u8; 16] = iv.try_into().map_err(|_| "a 16-byte counter block")?;
                let (out, _) = self
                    .aes
                    .run(&self.device, key, iv, input)
                    .map_err(|e| e.to_string())?;
                Ok(out)
            }
            Kernel::User(id) => Err(format!("{id} runs in a kernel executor process")),
        }
    }
}

/// Every OpenCL device that opens, with its backend; none (and the
/// reason) where OpenCL is absent.
pub fn open_all() -> Result<Vec<OpenClBackend>, String> {
    let infos = hetsched_opencl::devices().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for info in infos {
        match OpenClBackend::open(info.index) {
            Ok(b) => out.push(b),
            Err(e) => tracing::warn!("OpenCL device {} is not served: {e}", info.name.trim()),
        }
    }
    Ok(out)
}

/// OpenCL as a device API of the daemon (feature `opencl`): every device
/// of the ICD loader, `opencl_units` to serve them.
pub struct OpenClApi;

/// A GPU is a GPU; anything else OpenCL offers (a CPU device such as
/// PoCL's, an accelerator) is an accelerator.
fn class_of(info: &DeviceInfo) -> UnitClass {
    if info.kind == DeviceKind::Gpu {
        UnitClass::Gpu
    } else {
        UnitClass::Accelerator
    }
}

fn listed(info: &DeviceInfo) -> ListedDevice {
    ListedDevice {
        index: info.index,
        name: info.name.trim().to_string(),
        class: class_of(info),
    }
}

impl DeviceApi for OpenClApi {
    fn name(&self) -> &'static str {
        "opencl"
    }

    fn label(&self) -> &'static str {
        "OpenCL"
    }

    fn config_key(&self) -> &'static str {
        "opencl_units"
    }

    fn list(&self) -> Result<Vec<ListedDevice>, String> {
        let devices = hetsched_opencl::devices().map_err(|e| e.to_string())?;
        Ok(devices.iter().map(listed).collect())
    }

    /// Registered kernels run in executor processes, which open the
    /// device themselves: the served backend keeps nothing for clients.
    fn open_served(&self, _max_kept_bytes: u64) -> Result<Vec<ServedDevice>, String> {
        Ok(open_all()?
            .into_iter()
            .map(|backend| ServedDevice {
                listed: listed(backend.info()),
                backend: Box::new(backend),
            })
            .collect())
    }

    fn open_for_executor(
        &self,
        index: usize,
        max_kept_bytes: u64,
    ) -> Result<ExecutorDevice, String> {
        let backend = OpenClUserBackend::open(index, max_kept_bytes)?;
        Ok(ExecutorDevice {
            name: backend.name(),
            backend: Box::new(backend),
        })
    }
}
