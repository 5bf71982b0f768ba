use std::collections::HashMap;
use std::fmt;
use std::ops::Add;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{
    CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU, Device,
};
use opencl3::error_codes::{
    CL_BUILD_PROGRAM_FAILURE, CL_INVALID_KERNEL_NAME, CL_KERNEL_ARG_INFO_NOT_AVAILABLE, ClError,
    DLOPEN_FUNCTION_NOT_AVAILABLE, DLOPEN_RUNTIME_LOAD_FAILED,
};
use opencl3::event::Event;
use opencl3::kernel::{
    CL_KERNEL_ARG_ADDRESS_CONSTANT, CL_KERNEL_ARG_ADDRESS_GLOBAL, CL_KERNEL_ARG_ADDRESS_LOCAL,
    CL_KERNEL_ARG_ADDRESS_PRIVATE, CL_KERNEL_ARG_TYPE_CONST, Kernel as RawKernel,
};
use opencl3::memory::Buffer;
use opencl3::platform::{Platform, platform::get_platform_ids};
use opencl3::program::Program;

use crate::error::{INSTALL_HINT, OpenClError, Result};

mod ffi;

pub use ffi::HostMemory;

/// `CL_PLATFORM_NOT_FOUND_KHR`: what the ICD loader answers when no vendor
/// file names a platform.
const PLATFORM_NOT_FOUND_KHR: i32 = -1001;

/// `-cl-kernel-arg-info` makes the compiler keep parameter names and types,
/// which `launch` needs to check arguments before handing them to OpenCL.
const BUILD_OPTIONS: &str = "-cl-kernel-arg-info";

/// Tags buffers and kernels with the `OpenClDevice` that made them, so using
/// one with another device is an error instead of an OpenCL context mix-up.
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// The broad class of an OpenCL device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    Cpu,
    Gpu,
    Accelerator,
    Other,
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cpu => "cpu",
            Self::Gpu => "gpu",
            Self::Accelerator => "accelerator",
            Self::Other => "other",
        })
    }
}

/// What `devices()` reports about one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Position in `devices()`; the argument to `OpenClDevice::open`.
    pub index: usize,
    pub platform: String,
    pub name: String,
    pub vendor: String,
    pub kind: DeviceKind,
    /// The device's `CL_DEVICE_VERSION`, e.g. "OpenCL 3.0 PoCL …".
    pub version: String,
    pub compute_units: u32,
    pub global_mem_bytes: u64,
    /// Largest single buffer the device accepts.
    pub max_alloc_bytes: u64,
    pub max_work_group_size: usize,
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "#{} {} ({}, {}) on {}: {} compute units, {} MiB, work-group ≤ {}",
            self.index,
            self.name,
            self.kind,
            self.vendor,
            self.platform,
            self.compute_units,
            self.global_mem_bytes >> 20,
            self.max_work_group_size
        )
    }
}

/// Every device of every platform, in a stable order.
///
/// No OpenCL loader, or a loader without platforms, gives
/// [`OpenClError::NoPlatform`]; platforms without devices give
/// [`OpenClError::NoDevice`]. Neither panics, so callers can probe freely.
pub fn devices() -> Result<Vec<DeviceInfo>> {
    Ok(enumerate()?.into_iter().map(|(_, info)| info).collect())
}

/// Serialises platform and device discovery. PoCL 3.1 initialises its
/// devices lazily on the first query and crashes (strlen on a half-built
/// device name) when two threads make that first query at once; holding
/// this lock while enumerating keeps every query after initialisation.
static DISCOVERY: Mutex<()> = Mutex::new(());

fn enumerate() -> Result<Vec<(Device, DeviceInfo)>> {
    let _discovery = DISCOVERY.lock().unwrap_or_else(|e| e.into_inner());
    let platforms = match get_platform_ids() {
        Ok(ids) => ids,
        Err(DLOPEN_RUNTIME_LOAD_FAILED | DLOPEN_FUNCTION_NOT_AVAILABLE) => {
            return Err(OpenClError::NoPlatform(format!(
                "the OpenCL loader (libOpenCL.so.1) could not be loaded; {INSTALL_HINT}"
            )));
        }
        Err(PLATFORM_NOT_FOUND_KHR) => Vec::new(),
        Err(code) => return Err(OpenClError::api("clGetPlatformIDs")(code)),
    };
    if platforms.is_empty() {
        return Err(OpenClError::NoPlatform(format!(
            "the OpenCL loader found no platform (no driver registered in /etc/OpenCL/vendors); {INSTALL_HINT}"
        )));
    }
    let mut found = Vec::new();
    for id in &platforms {
        let platform = Platform::new(*id);
        let platform_name = platform
            .name()
            .map_err(OpenClError::api("clGetPlatformInfo"))?;
        let ids = platform
            .get_devices(CL_DEVICE_TYPE_ALL)
            .map_err(OpenClError::api("clGetDeviceIDs"))?;
        for id in ids {
            let device = Device::new(id);
            let info = describe(&device, found.len(), &platform_name)
                .map_err(OpenClError::api("clGetDeviceInfo"))?;
            found.push((device, info));
        }
    }
    if found.is_empty() {
        return Err(OpenClError::NoDevice(format!(
            "{} OpenCL platform(s) but none offers a device; {INSTALL_HINT}",
            platforms.len()
        )));
    }
    Ok(found)
}

fn describe(device: &Device, index: usize, platform: &str) -> Result<DeviceInfo, ClError> {
    let ty = device.dev_type()?;
    // A device may set several type bits (e.g. DEFAULT | GPU); the
    // hardware bits decide.
    let kind = if ty & CL_DEVICE_TYPE_GPU != 0 {
        DeviceKind::Gpu
    } else if ty & CL_DEVICE_TYPE_ACCELERATOR != 0 {
        DeviceKind::Accelerator
    } else if ty & CL_DEVICE_TYPE_CPU != 0 {
        DeviceKind::Cpu
    } else {
        DeviceKind::Other
    };
    Ok(DeviceInfo {
        index,
        platform: platform.trim().to_owned(),
        name: device.name()?.trim().to_owned(),
        vendor: device.vendor()?.trim().to_owned(),
        kind,
        version: device.version()?.trim().to_owned(),
        compute_units: device.max_compute_units()?,
        global_mem_bytes: device.global_mem_size()?,
        max_alloc_bytes: device.max_mem_alloc_size()?,
        max_work_group_size: device.max_work_group_size()?,
    })
}

/// Host-side and device-side duration of one command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timing {
    /// The device's own measure of execution (CL_PROFILING_COMMAND_START to
    /// _END): what the unit was busy for, without queueing or submission.
    pub device_ns: u64,
    /// From the call to its return on the host: what the caller waited.
    pub wall_ns: u64,
    /// Of that, the host time inside the enqueue call alone (a launch's
    /// `clEnqueueNDRangeKernel`, through any OpenCL layer loaded): what
    /// submitting the command cost. 0 for commands that do not say.
    pub submit_ns: u64,
}

impl Timing {
    pub const ZERO: Self = Self {
        device_ns: 0,
        wall_ns: 0,
        submit_ns: 0,
    };

    fn of(event: &Event, start: Instant) -> Result<Self> {
        let wall_ns = elapsed_ns(start);
        let begin = event
            .profiling_command_start()
            .map_err(OpenClError::api("clGetEventProfilingInfo"))?;
        let end = event
            .profiling_command_end()
            .map_err(OpenClError::api("clGetEventProfilingInfo"))?;
        Ok(Self {
            device_ns: end.saturating_sub(begin),
            wall_ns,
            submit_ns: 0,
        })
    }
}

impl Add for Timing {
    type Output = Self;
    fn add(self, other: Self) -> Self {
        Self {
            device_ns: self.device_ns + other.device_ns,
            wall_ns: self.wall_ns + other.wall_ns,
            submit_ns: self.submit_ns + other.submit_ns,
        }
    }
}

pub(crate) fn elapsed_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Memory on one device. Only the `OpenClDevice` that made it can use it.
pub struct DeviceBuffer {
    owner: u64,
    len: usize,
    raw: ffi::MemObject,
}

impl DeviceBuffer {
    /// Size in bytes, as asked for (an empty buffer is allowed).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// It works on host memory in place ([`OpenClDevice::in_place_buffer`]).
    pub fn is_in_place(&self) -> bool {
        self.raw.is_in_place()
    }

    pub(crate) fn raw(&self) -> &Buffer<u8> {
        self.raw.buffer()
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// One argument of a kernel launch, in parameter order.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg<'a> {
    /// For a `__global` or `__constant` pointer parameter.
    Buffer(&'a DeviceBuffer),
    /// For a `__local` pointer parameter: that many bytes of local memory.
    Local(usize),
    /// `uint`
    U32(u32),
    /// `int`
    I32(i32),
    /// `ulong`
    U64(u64),
    /// `float`
    F32(f32),
}

impl KernelArg<'_> {
    fn describe(&self) -> &'static str {
        match self {
            Self::Buffer(_) => "a buffer",
            Self::Local(_) => "local memory",
            Self::U32(_) => "uint",
            Self::I32(_) => "int",
            Self::U64(_) => "ulong",
            Self::F32(_) => "float",
        }
    }
}

/// What a kernel parameter accepts, from the compiler's argument info.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A `__global` or `__constant` pointer.
    Buffer,
    Local,
    U32,
    I32,
    U64,
    F32,
}

impl ParamKind {
    fn accepts(self, arg: &KernelArg<'_>) -> bool {
        matches!(
            (self, arg),
            (Self::Buffer, KernelArg::Buffer(_))
                | (Self::Local, KernelArg::Local(_))
                | (Self::U32, KernelArg::U32(_))
                | (Self::I32, KernelArg::I32(_))
                | (Self::U64, KernelArg::U64(_))
                | (Self::F32, KernelArg::F32(_))
        )
    }
}

/// One parameter of a compiled kernel, as the compiler reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    /// The type as written, e.g. `float*`, `uint`.
    pub ty: String,
    pub kind: ParamKind,
    /// A buffer the kernel cannot write: `__constant`, or a pointer to
    /// `const`.
    pub read_only: bool,
}

/// A compiled kernel, ready to `launch` on the device that built it.
///
/// Not `Sync`: OpenCL kernel arguments are state on the kernel object, so two
/// threads launching one kernel at once would race. Build one per thread.
pub struct Kernel {
    owner: u64,
    name: String,
    params: Vec<Param>,
    work_group_size: usize,
    raw: RawKernel,
}

impl Kernel {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many arguments `launch` expects.
    pub fn arg_count(&self) -> usize {
        self.params.len()
    }

    /// Its parameters, in order.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// Largest work-group this kernel can run with on its device.
    pub fn max_work_group_size(&self) -> usize {
        self.work_group_size
    }

    pub(crate) fn raw(&self) -> &RawKernel {
        &self.raw
    }

    fn bad_args(&self, reason: String) -> OpenClError {
        OpenClError::BadArgs {
            kernel: self.name.clone(),
            reason,
        }
    }

    fn bad_launch(&self, reason: String) -> OpenClError {
        OpenClError::BadLaunch {
            kernel: self.name.clone(),
            reason,
        }
    }

    /// Checks a launch against this kernel and `device`; the result is the
    /// only way to reach `ffi::launch`.
    fn validate<'a>(
        &'a self,
        device: &OpenClDevice,
        global: usize,
        local: Option<usize>,
        args: &'a [KernelArg<'a>],
    ) -> Result<ValidatedLaunch<'a>> {
        device.check_owner(self.owner, "kernel")?;
        if global == 0 {
            return Err(self.bad_launch("the global work size is 0".into()));
        }
        if let Some(local) = local {
            if local == 0 || local > self.work_group_size {
                return Err(self.bad_launch(format!(
                    "local work size {local} is outside 1..={} for this kernel on this device",
                    self.work_group_size
                )));
            }
            if global % local != 0 {
                return Err(self.bad_launch(format!(
                    "global work size {global} is not a multiple of local work size {local}"
                )));
            }
        }
        if args.len() != self.params.len() {
            return Err(self.bad_args(format!(
                "it takes {} argument(s), {} given",
                self.params.len(),
                args.len()
            )));
        }
        for (index, (param, arg)) in self.params.iter().zip(args).enumerate() {
            if !param.kind.accepts(arg) {
                return Err(self.bad_args(format!(
                    "parameter {index} `{}` is `{}` but {} was given",
                    param.name,
                    param.ty,
                    arg.describe()
                )));
            }
            match arg {
                KernelArg::Buffer(buffer) => device.check_owner(buffer.owner, "buffer")?,
                KernelArg::Local(0) => {
                    return Err(self.bad_args(format!(
                        "parameter {index} `{}` needs a non-zero amount of local memory",
                        param.name
                    )));
                }
                _ => {}
            }
        }
        Ok(ValidatedLaunch {
            kernel: self,
            global,
            local,
            args,
        })
    }
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.name)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

/// A launch whose arguments matched the kernel's parameters. Its fields are
/// private to the crate and only `Kernel::validate` builds one.
pub(crate) struct ValidatedLaunch<'a> {
    pub(crate) kernel: &'a Kernel,
    pub(crate) global: usize,
    pub(crate) local: Option<usize>,
    pub(crate) args: &'a [KernelArg<'a>],
}

/// The raw OpenCL handles of an [`OpenClDevice`]
/// ([`OpenClDevice::raw_handles`]): `cl_device_id`, `cl_context` and
/// `cl_command_queue` as plain pointers.
///
/// * The queue is in-order and was created with
///   `CL_QUEUE_PROFILING_ENABLE`; the device's own copies and launches go
///   to it too.
/// * The handles are borrowed: valid while the `OpenClDevice` lives (for a
///   task implementation, during the call it is given them), and never to
///   be released by the borrower (retain them to keep them longer).
/// * Commands enqueued on the queue must be finished (`clFinish`, or
///   [`OpenClDevice::finish`]) before the borrower returns: the device's
///   own calls assume an idle queue.
/// * Their time is not in [`OpenClDevice::device_ns_total`], which counts
///   only the commands issued through this type's methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawHandles {
    /// `cl_device_id`.
    pub device: *mut std::ffi::c_void,
    /// `cl_context`, holding just this device.
    pub context: *mut std::ffi::c_void,
    /// `cl_command_queue`: in-order, with profiling enabled.
    pub queue: *mut std::ffi::c_void,
}

/// One OpenCL device with its own context and an in-order, profiling command
/// queue. Everything is blocking: each call returns when the device is done,
/// which keeps ownership simple for the executor thread that holds it.
pub struct OpenClDevice {
    owner: u64,
    info: DeviceInfo,
    /// Device time of every command run through this handle, ns.
    device_ns: AtomicU64,
    device: Device,
    // Dropped before the context (field order), though OpenCL's own
    // reference counting would keep the context alive anyway.
    programs: Mutex<HashMap<String, Arc<Program>>>,
    /// Whether a kernel's writes to an in-place buffer are in host memory
    /// as soon as the kernel ends, without a map (probed once).
    in_place_coherent: std::sync::OnceLock<bool>,
    queue: CommandQueue,
    context: Context,
}

impl fmt::Debug for OpenClDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenClDevice")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl OpenClDevice {
    /// Opens device `index` of [`devices()`].
    pub fn open(index: usize) -> Result<Self> {
        let mut all = enumerate()?;
        let count = all.len();
        if index >= count {
            return Err(OpenClError::NoSuchDevice { index, count });
        }
        let (device, info) = all.swap_remove(index);
        let (context, queue) = ffi::context_and_queue(&device)?;
        Ok(Self {
            owner: NEXT_OWNER.fetch_add(1, Ordering::Relaxed),
            info,
            device_ns: AtomicU64::new(0),
            device,
            programs: Mutex::new(HashMap::new()),
            in_place_coherent: std::sync::OnceLock::new(),
            queue,
            context,
        })
    }

    /// The first device, whatever it is (PoCL's CPU device on a machine
    /// without a GPU driver).
    pub fn first() -> Result<Self> {
        Self::open(0)
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The raw OpenCL handles behind this device, for code that issues its
    /// own OpenCL calls (the C API's OpenCL implementations). See
    /// [`RawHandles`] for the rules; reading the values is safe, using
    /// them is the caller's business.
    pub fn raw_handles(&self) -> RawHandles {
        RawHandles {
            device: self.device.id(),
            context: self.context.get(),
            queue: self.queue.get(),
        }
    }

    /// Waits until every command on the queue is done (`clFinish`): for
    /// work issued on the raw queue ([`OpenClDevice::raw_handles`]); the
    /// device's own methods already return finished.
    pub fn finish(&self) -> Result<()> {
        self.queue.finish().map_err(OpenClError::api("clFinish"))
    }

    /// The device time of every copy and launch made through this handle
    /// so far, from the profiling events, ns. The difference across a
    /// piece of work is what the device spent on it, whatever the host
    /// thread did meanwhile.
    pub fn device_ns_total(&self) -> u64 {
        self.device_ns.load(Ordering::Relaxed)
    }

    /// The timing of a finished command, counted in the handle's total.
    fn timed(&self, event: &Event, start: Instant) -> Result<Timing> {
        let timing = Timing::of(event, start)?;
        self.device_ns
            .fetch_add(timing.device_ns, Ordering::Relaxed);
        Ok(timing)
    }

    fn check_owner(&self, owner: u64, what: &'static str) -> Result<()> {
        if owner == self.owner {
            Ok(())
        } else {
            Err(OpenClError::WrongDevice { what })
        }
    }

    /// How many distinct program sources have been compiled on this device.
    pub fn cached_programs(&self) -> usize {
        self.programs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Compiles `source` (once per distinct source on this device; later
    /// calls reuse the program) and returns its kernel `kernel_name`.
    ///
    /// A compile error comes back as [`OpenClError::Build`] with the
    /// compiler's log. The source is trusted: a kernel that indexes past its
    /// buffers can corrupt memory, on a CPU device the process's own.
    pub fn build(&self, source: &str, kernel_name: &str) -> Result<Kernel> {
        let program = self.program(source)?;
        if kernel_name.contains('\0') {
            return Err(OpenClError::NoSuchKernel {
                name: kernel_name.escape_debug().to_string(),
                available: program.kernel_names().to_owned(),
            });
        }
        let raw = RawKernel::create(&program, kernel_name).map_err(|e| {
            if e.0 == CL_INVALID_KERNEL_NAME {
                OpenClError::NoSuchKernel {
                    name: kernel_name.to_owned(),
                    available: program.kernel_names().replace(';', ", "),
                }
            } else {
                OpenClError::api("clCreateKernel")(e)
            }
        })?;
        let params = self.params(&raw, kernel_name)?;
        let work_group_size = raw
            .get_work_group_size(self.device.id())
            .map_err(OpenClError::api("clGetKernelWorkGroupInfo"))?;
        Ok(Kernel {
            owner: self.owner,
            name: kernel_name.to_owned(),
            params,
            work_group_size,
            raw,
        })
    }

    fn program(&self, source: &str) -> Result<Arc<Program>> {
        // Holding the lock through the compile keeps two threads from
        // compiling the same source twice; builds are rare, so the wait is
        // cheap.
        let mut programs = self.programs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(program) = programs.get(source) {
            return Ok(Arc::clone(program));
        }
        let mut program = Program::create_from_source(&self.context, source)
            .map_err(OpenClError::api("clCreateProgramWithSource"))?;
        if let Err(e) = program.build(&[self.device.id()], BUILD_OPTIONS) {
            let log = program.get_build_log(self.device.id()).unwrap_or_default();
            return Err(
                if e.0 == CL_BUILD_PROGRAM_FAILURE || !log.trim().is_empty() {
                    OpenClError::Build {
                        device: self.info.name.clone(),
                        log: log.trim().to_owned(),
                    }
                } else {
                    OpenClError::api("clBuildProgram")(e)
                },
            );
        }
        let program = Arc::new(program);
        programs.insert(source.to_owned(), Arc::clone(&program));
        Ok(program)
    }

    fn params(&self, raw: &RawKernel, kernel: &str) -> Result<Vec<Param>> {
        let count = raw
            .num_args()
            .map_err(OpenClError::api("clGetKernelInfo"))?;
        let info_err = |e: ClError| {
            if e.0 == CL_KERNEL_ARG_INFO_NOT_AVAILABLE {
                OpenClError::BadArgs {
                    kernel: kernel.to_owned(),
                    reason: "the driver does not report kernel parameter types, so arguments \
                             cannot be checked"
                        .into(),
                }
            } else {
                OpenClError::api("clGetKernelArgInfo")(e)
            }
        };
        let mut params = Vec::with_capacity(count as usize);
        for index in 0..count {
            let address = raw.get_arg_address_qualifier(index).map_err(info_err)?;
            let ty = raw.get_arg_type_name(index).map_err(info_err)?;
            let name = raw.get_arg_name(index).map_err(info_err)?;
            let ty = ty.trim().to_owned();
            let pointer = ty.ends_with('*');
            let qualifier = raw.get_arg_type_qualifier(index).map_err(info_err)?;
            let read_only = address == CL_KERNEL_ARG_ADDRESS_CONSTANT
                || qualifier & u64::from(CL_KERNEL_ARG_TYPE_CONST) != 0;
            let kind = match address {
                CL_KERNEL_ARG_ADDRESS_GLOBAL | CL_KERNEL_ARG_ADDRESS_CONSTANT if pointer => {
                    Some(ParamKind::Buffer)
                }
                CL_KERNEL_ARG_ADDRESS_LOCAL if pointer => Some(ParamKind::Local),
                CL_KERNEL_ARG_ADDRESS_PRIVATE => match ty.as_str() {
                    "uint" | "unsigned int" => Some(ParamKind::U32),
                    "int" => Some(ParamKind::I32),
                    "ulong" | "unsigned long" => Some(ParamKind::U64),
                    "float" => Some(ParamKind::F32),
                    _ => None,
                },
                _ => None,
            };
            let Some(kind) = kind else {
                return Err(OpenClError::UnsupportedParam {
                    kernel: kernel.to_owned(),
                    index: index as usize,
                    param: name,
                    ty,
                });
            };
            params.push(Param {
                name,
                ty,
                kind,
                read_only: pointer && read_only,
            });
        }
        Ok(params)
    }

    /// A buffer of `len` bytes on this device; its contents start undefined.
    pub fn buffer(&self, len: usize) -> Result<DeviceBuffer> {
        if len as u64 > self.info.max_alloc_bytes {
            return Err(OpenClError::TooLarge {
                device: self.info.name.clone(),
                bytes: len,
                max: self.info.max_alloc_bytes,
            });
        }
        // OpenCL refuses empty buffers; a one-byte allocation lets an empty
        // input flow through the same code as any other.
        let raw = ffi::create_mem(&self.context, len.max(1))?;
        Ok(DeviceBuffer {
            owner: self.owner,
            len,
            raw,
        })
    }

    /// Whether the device works on host memory (a CPU device), so that a
    /// buffer can use host memory in place instead of a copy.
    pub fn shares_host_memory(&self) -> bool {
        self.info.kind == DeviceKind::Cpu
    }

    /// A buffer over `range` of `host`, used in place: the device reads and
    /// writes those bytes themselves, with no copy in or out. Only on a
    /// device that [shares host memory](Self::shares_host_memory); after a
    /// launch that wrote it, [`OpenClDevice::sync_in_place`] makes the
    /// result the memory's own. An empty range gives an ordinary empty
    /// buffer.
    pub fn in_place_buffer(
        &self,
        host: Arc<dyn HostMemory>,
        range: std::ops::Range<usize>,
    ) -> Result<DeviceBuffer> {
        if !self.shares_host_memory() {
            return Err(OpenClError::NotInPlace(format!(
                "{} is a {} device, not one that works on host memory",
                self.info.name.trim(),
                self.info.kind
            )));
        }
        let (_, size) = host.host_bytes();
        if range.start > range.end || range.end > size {
            return Err(OpenClError::NotInPlace(format!(
                "bytes {}..{} are outside the {size} bytes given",
                range.start, range.end
            )));
        }
        if range.is_empty() {
            return self.buffer(0);
        }
        if range.len() as u64 > self.info.max_alloc_bytes {
            return Err(OpenClError::TooLarge {
                device: self.info.name.clone(),
                bytes: range.len(),
                max: self.info.max_alloc_bytes,
            });
        }
        let raw = ffi::create_in_place(&self.context, host, range.start, range.len())?;
        Ok(DeviceBuffer {
            owner: self.owner,
            len: range.len(),
            raw,
        })
    }

    /// Makes what a launch wrote into an in-place buffer visible in its
    /// host memory (OpenCL's rule for such buffers); nothing to do for
    /// other buffers.
    ///
    /// On a device where the probe ([`OpenClDevice::in_place_is_coherent`])
    /// saw a kernel's writes in host memory without a map, this is free;
    /// elsewhere it maps and unmaps the buffer (two commands, about 20 µs
    /// on PoCL).
    pub fn sync_in_place(&self, buffer: &DeviceBuffer) -> Result<()> {
        self.check_owner(buffer.owner, "buffer")?;
        if !buffer.is_in_place() || buffer.len == 0 || self.in_place_is_coherent() {
            return Ok(());
        }
        ffi::sync_in_place(&self.queue, buffer.raw(), buffer.len)
    }

    /// Whether a kernel's writes to an in-place buffer are in host memory as
    /// soon as the kernel has ended, with no map: true where the device
    /// really works on the host's memory (PoCL's CPU devices do). Probed
    /// once per device handle, at an unaligned offset, by a kernel that
    /// writes a pattern the host then looks for; a failing probe answers
    /// `false`, which only costs a map per call.
    pub fn in_place_is_coherent(&self) -> bool {
        *self
            .in_place_coherent
            .get_or_init(|| self.probe_coherence())
    }

    fn probe_coherence(&self) -> bool {
        use std::sync::atomic::AtomicU32;
        const WORDS: usize = 64;
        const SOURCE: &str = "__kernel void hetsched_probe(__global uint *p) \
                              { size_t i = get_global_id(0); p[i] = 0x5eed0000u + (uint)i; }";
        if !self.shares_host_memory() {
            return false;
        }
        let memory = Arc::new(ffi::ProbeMemory(
            (0..WORDS + 2).map(|_| AtomicU32::new(0)).collect(),
        ));
        let host: Arc<dyn HostMemory> = memory.clone();
        // Offset 4: not the allocation's alignment, as a region's ranges
        // often are not.
        let run = || -> Result<()> {
            let kernel = self.build(SOURCE, "hetsched_probe")?;
            let buffer = self.in_place_buffer(host, 4..4 + WORDS * 4)?;
            self.launch(&kernel, WORDS, None, &[KernelArg::Buffer(&buffer)])?;
            Ok(())
        };
        run().is_ok()
            && memory.0[1..=WORDS]
                .iter()
                .enumerate()
                .all(|(i, w)| w.load(Ordering::Acquire) == 0x5eed_0000 + i as u32)
    }

    /// A buffer holding a copy of `data`.
    pub fn buffer_from(&self, data: &[u8]) -> Result<(DeviceBuffer, Timing)> {
        let buffer = self.buffer(data.len())?;
        let timing = self.write(&buffer, data)?;
        Ok((buffer, timing))
    }

    /// Copies `data` (exactly the buffer's length) to the device; returns
    /// when the copy is complete.
    pub fn write(&self, buffer: &DeviceBuffer, data: &[u8]) -> Result<Timing> {
        self.check_owner(buffer.owner, "buffer")?;
        if data.len() != buffer.len {
            return Err(OpenClError::SizeMismatch {
                op: "write",
                buffer: buffer.len,
                host: data.len(),
            });
        }
        if data.is_empty() {
            return Ok(Timing::ZERO);
        }
        let start = Instant::now();
        let event = ffi::write(&self.queue, buffer.raw(), data)?;
        self.timed(&event, start)
    }

    /// Copies the buffer into `out` (exactly the buffer's length); returns
    /// when the data is there.
    pub fn read(&self, buffer: &DeviceBuffer, out: &mut [u8]) -> Result<Timing> {
        self.check_owner(buffer.owner, "buffer")?;
        if out.len() != buffer.len {
            return Err(OpenClError::SizeMismatch {
                op: "read",
                buffer: buffer.len,
                host: out.len(),
            });
        }
        if out.is_empty() {
            return Ok(Timing::ZERO);
        }
        let start = Instant::now();
        let event = ffi::read(&self.queue, buffer.raw(), out)?;
        self.timed(&event, start)
    }

    /// Runs `kernel` over `global_work_size` work-items (one dimension) in
    /// groups of `local` (or a size the driver picks) and waits for it.
    ///
    /// Arguments are checked against the kernel's declared parameters
    /// (count, buffer vs local vs scalar, scalar type) and must come from
    /// this device.
    pub fn launch(
        &self,
        kernel: &Kernel,
        global_work_size: usize,
        local: Option<usize>,
        args: &[KernelArg<'_>],
    ) -> Result<Timing> {
        let launch = kernel.validate(self, global_work_size, local, args)?;
        let start = Instant::now();
        let launched = ffi::launch(&self.queue, launch)?;
        Ok(Timing {
            submit_ns: launched.submit_ns,
            ..self.timed(&launched.event, start)?
        })
    }
}
