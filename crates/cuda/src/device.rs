//! One CUDA device, driven from one thread at a time.
#![allow(unsafe_code)]

use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr,
    DriverError, LaunchArgs, LaunchConfig, PinnedHostSlice, PushKernelArg, ValidAsZeroBits, sys,
};
use hetsched_platform::gpu;
use std::any::{Any, TypeId};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// The driver, NVRTC or the device cannot be used here.
    #[error("CUDA unavailable: {0}")]
    Unavailable(String),
    #[error("{what}: {source}")]
    Driver {
        what: &'static str,
        source: DriverError,
    },
    #[error("NVRTC could not build {kernel}: {log}")]
    Compile { kernel: String, log: String },
    #[error("bad arguments for {kernel}: {reason}")]
    BadArgs {
        kernel: &'static str,
        reason: String,
    },
    /// A failure the task's own code reported (a C implementation's
    /// non-zero status, through the C API); the text says what failed.
    #[error("{0}")]
    Implementation(String),
}

pub(crate) fn drv<T>(what: &'static str, r: Result<T, DriverError>) -> Result<T, CudaError> {
    r.map_err(|source| CudaError::Driver { what, source })
}

/// Plain data that may be staged through pinned memory and copied to and
/// from the device as is.
pub trait Pod: DeviceRepr + ValidAsZeroBits + Copy + Default + Send + 'static {}
impl Pod for u8 {}
impl Pod for u32 {}
impl Pod for u64 {}
impl Pod for i32 {}
impl Pod for f32 {}
impl Pod for f64 {}

/// A kernel of a PTX module loaded at run time ([`CudaDevice::load_ptx`]),
/// with the size of each of its parameters as the caller read them from
/// the PTX: every launch is checked against them.
pub struct PtxKernel {
    name: String,
    function: CudaFunction,
    param_bytes: Vec<usize>,
}

impl PtxKernel {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bytes of each parameter, in order.
    pub fn param_bytes(&self) -> &[usize] {
        &self.param_bytes
    }
}

impl std::fmt::Debug for PtxKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PtxKernel")
            .field("name", &self.name)
            .field("param_bytes", &self.param_bytes)
            .finish()
    }
}

/// One argument of a [`PtxKernel`] launch: a device buffer (passed as its
/// 8-byte device address) or a scalar.
#[derive(Clone, Copy, Debug)]
pub enum PtxArg<'a> {
    Buffer(&'a CudaSlice<u8>),
    U32(u32),
    I32(i32),
    U64(u64),
    F32(f32),
}

impl PtxArg<'_> {
    /// Bytes of the kernel parameter it fills.
    pub fn bytes(&self) -> usize {
        match self {
            PtxArg::Buffer(_) | PtxArg::U64(_) => 8,
            PtxArg::U32(_) | PtxArg::I32(_) | PtxArg::F32(_) => 4,
        }
    }
}

/// Most threads of one block on any CUDA device.
pub const MAX_BLOCK: u32 = 1024;

/// The 1-D launch of `global` threads in blocks of `block`: `grid =
/// ceil(global / block)` blocks, so the kernel sees at least `global`
/// threads (it must guard the rest). Checks the sizes CUDA allows.
pub fn linear_launch(global: u64, block: u32) -> Result<LaunchConfig, String> {
    if block == 0 || block > MAX_BLOCK {
        return Err(format!(
            "{block} threads per block: CUDA takes 1..={MAX_BLOCK}"
        ));
    }
    if global == 0 {
        return Err("a launch of no threads".into());
    }
    let grid = global.div_ceil(u64::from(block));
    let grid = u32::try_from(grid)
        .ok()
        .filter(|g| *g <= i32::MAX as u32)
        .ok_or_else(|| format!("{grid} blocks: more than a CUDA grid holds"))?;
    Ok(LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    })
}

/// What the runtime and placement know about a device.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaDeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub sm_count: u32,
    pub compute_capability: (u32, u32),
    pub memory_bytes: u64,
}

/// Device time of the commands issued since the last
/// [`CudaDevice::take_times`], from CUDA events, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeviceTimes {
    pub kernel_ns: f64,
    pub copy_in_ns: f64,
    pub copy_out_ns: f64,
    pub kernels: u32,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Kernel,
    CopyIn,
    CopyOut,
}

/// The environment variable that, set to `0`, leaves CUDA devices out of
/// the runtime's units and the daemon's alike (to compare with a CPU-only
/// run, say). [`probe`] still answers: the driver is there.
pub const DISABLE_ENV: &str = "HETSCHED_CUDA";

/// Why CUDA devices are to be left out ([`DISABLE_ENV`]), if they are.
pub fn switched_off() -> Option<String> {
    std::env::var(DISABLE_ENV)
        .is_ok_and(|v| v == "0")
        .then(|| format!("disabled by {DISABLE_ENV}=0"))
}

/// How many CUDA devices this process can use, or why none.
pub fn probe() -> Result<usize, String> {
    gpu::cuda_driver_available()?;
    gpu::nvrtc_available()?;
    gpu::guarded("CUDA device count", || {
        cudarc::driver::result::init().map_err(|e| format!("cuInit: {e}"))?;
        let n = cudarc::driver::result::device::get_count()
            .map_err(|e| format!("cuDeviceGetCount: {e}"))?;
        Ok(usize::try_from(n).unwrap_or(0))
    })
}

/// The name of every CUDA device, by ordinal, without creating a context
/// on any (a daemon that only arbitrates a device must not take its
/// memory), or why there are none.
pub fn device_names() -> Result<Vec<String>, String> {
    let count = probe()?;
    gpu::guarded("CUDA device names", || {
        (0..count)
            .map(|ordinal| {
                let ordinal = i32::try_from(ordinal).map_err(|e| e.to_string())?;
                let dev = cudarc::driver::result::device::get(ordinal)
                    .map_err(|e| format!("cuDeviceGet: {e}"))?;
                cudarc::driver::result::device::get_name(dev)
                    .map_err(|e| format!("cuDeviceGetName: {e}"))
            })
            .collect()
    })
}

/// Event pairs kept for [`CudaDevice::take_times`]; past it the oldest
/// go. A user that never asks for its times (the daemon's CUDA unit, a
/// program that only runs kernels) kept two events per kernel and copy
/// for as long as it ran.
pub const MAX_PENDING_TIMES: usize = 1024;

/// Appends `item`, dropping the oldest while more than `max` are kept.
fn push_bounded<T>(queue: &mut VecDeque<T>, item: T, max: usize) {
    queue.push_back(item);
    while queue.len() > max.max(1) {
        queue.pop_front();
    }
}

/// One CUDA device: its primary context and one stream, so the commands a
/// call issues run in order and overlap with the host only where the call
/// lets them (it blocks when it reads a result back).
pub struct CudaDevice {
    info: CudaDeviceInfo,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Modules built from source, by source text; functions by name.
    modules: Mutex<HashMap<String, Arc<CudaModule>>>,
    /// Pinned staging buffers by element type (a `PinnedHostSlice<T>`),
    /// kept between calls: pinning memory costs far more than a copy.
    staging_in: Mutex<HashMap<TypeId, Box<dyn Any + Send>>>,
    staging_out: Mutex<HashMap<TypeId, Box<dyn Any + Send>>>,
    /// Event pairs not yet read by `take_times`, the newest
    /// [`MAX_PENDING_TIMES`] of them.
    pending: Mutex<VecDeque<(Stage, CudaEvent, CudaEvent)>>,
    /// Recorded after the last copy out of an upload staging buffer: the
    /// host waits for it before overwriting one (copies only see a plain
    /// slice of the pinned memory, so cudarc does not track them).
    staging_in_free: Mutex<Option<CudaEvent>>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDevice")
            .field("info", &self.info)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

const TIMING: Option<sys::CUevent_flags> = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);

impl CudaDevice {
    /// Opens device `ordinal`. Errs (never panics) where the driver or
    /// NVRTC is missing or the device cannot be used.
    pub fn open(ordinal: usize) -> Result<CudaDevice, CudaError> {
        probe().map_err(CudaError::Unavailable)?;
        gpu::guarded("opening the CUDA device", || {
            Self::open_inner(ordinal).map_err(|e| e.to_string())
        })
        .map_err(CudaError::Unavailable)
    }

    fn open_inner(ordinal: usize) -> Result<CudaDevice, CudaError> {
        use sys::CUdevice_attribute as A;
        let ctx = drv("cuDevicePrimaryCtxRetain", CudaContext::new(ordinal))?;
        let attr = |a| drv("cuDeviceGetAttribute", ctx.attribute(a)).map(|v| v.max(0) as u32);
        let info = CudaDeviceInfo {
            ordinal,
            name: drv("cuDeviceGetName", ctx.name())?,
            sm_count: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            compute_capability: (
                attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
            ),
            memory_bytes: drv("cuDeviceTotalMem", ctx.total_mem())? as u64,
        };
        // A stream of our own rather than the legacy default stream, which
        // synchronises with every other stream of the context.
        let stream = drv("cuStreamCreate", ctx.new_stream())?;
        Ok(CudaDevice {
            info,
            ctx,
            stream,
            modules: Mutex::new(HashMap::new()),
            staging_in: Mutex::new(HashMap::new()),
            staging_out: Mutex::new(HashMap::new()),
            pending: Mutex::new(VecDeque::new()),
            staging_in_free: Mutex::new(None),
        })
    }

    pub fn info(&self) -> &CudaDeviceInfo {
        &self.info
    }

    /// The stream every command of this device goes to.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Function `name` of CUDA C `source`, compiled with NVRTC for this
    /// device's architecture on first use and cached. Floating-point
    /// multiply-adds are not fused (`--fmad=false`) so kernels round like
    /// their CPU references.
    pub fn function(&self, source: &str, name: &str) -> Result<CudaFunction, CudaError> {
        let mut modules = lock(&self.modules);
        let module = match modules.get(source) {
            Some(m) => Arc::clone(m),
            None => {
                let m = self.build(source, name)?;
                modules.insert(source.to_string(), Arc::clone(&m));
                m
            }
        };
        drv("cuModuleGetFunction", module.load_function(name))
    }

    fn build(&self, source: &str, name: &str) -> Result<Arc<CudaModule>, CudaError> {
        use cudarc::nvrtc::{CompileError, CompileOptions, compile_ptx_with_opts};
        let (major, minor) = self.info.compute_capability;
        let opts = |arch: bool| CompileOptions {
            fmad: Some(false),
            options: if arch {
                vec![format!("--gpu-architecture=compute_{major}{minor}")]
            } else {
                Vec::new()
            },
            ..Default::default()
        };
        // An NVRTC older than the device does not know its architecture:
        // its default PTX target still runs (the driver JIT-compiles it).
        let ptx = compile_ptx_with_opts(source, opts(true))
            .or_else(|_| compile_ptx_with_opts(source, opts(false)))
            .map_err(|e| CudaError::Compile {
                kernel: name.to_string(),
                log: match e {
                    CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
                    other => other.to_string(),
                },
            })?;
        drv("cuModuleLoadData", self.ctx.load_module(ptx))
    }

    /// Loads PTX text (`cuModuleLoadData`: the driver compiles it for this
    /// device) and finds its kernel `name`, whose parameters take
    /// `param_bytes` bytes each, as read from the PTX's `.entry` (the
    /// driver API cannot tell them). A PTX the driver refuses is an error
    /// naming the driver's code; its JIT log is not collected.
    pub fn load_ptx(
        &self,
        ptx: &str,
        name: &str,
        param_bytes: Vec<usize>,
    ) -> Result<PtxKernel, CudaError> {
        let bad = |reason: String| CudaError::BadArgs {
            kernel: "load_ptx",
            reason,
        };
        // cudarc passes both as C strings (and panics on a NUL).
        if ptx.contains('\0') || name.contains('\0') {
            return Err(bad("the PTX or the kernel's name holds a NUL byte".into()));
        }
        if let Some(b) = param_bytes.iter().find(|b| ![4, 8].contains(*b)) {
            return Err(bad(format!(
                "a parameter of {b} bytes: kernels here take 4- and 8-byte parameters"
            )));
        }
        let module = drv(
            "cuModuleLoadData",
            self.ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx)),
        )?;
        let function = drv("cuModuleGetFunction", module.load_function(name))?;
        Ok(PtxKernel {
            name: name.to_string(),
            function,
            param_bytes,
        })
    }

    /// Launches `kernel` with `args` on a 1-D grid of at least `global`
    /// threads in blocks of `block` ([`linear_launch`]), timed like every
    /// launch. The arguments must be as many as the kernel's parameters,
    /// each of its parameter's size, or nothing is launched.
    ///
    /// What the kernel does is its author's: CUDA keeps it inside this
    /// context's memory, but a kernel that faults (an illegal address)
    /// leaves the context unusable, and every later command fails.
    pub fn launch_ptx(
        &self,
        kernel: &PtxKernel,
        global: u64,
        block: u32,
        args: &[PtxArg<'_>],
    ) -> Result<(), CudaError> {
        let bad = |reason: String| CudaError::BadArgs {
            kernel: "launch_ptx",
            reason,
        };
        if args.len() != kernel.param_bytes.len() {
            return Err(bad(format!(
                "`{}` takes {} arguments, not {}",
                kernel.name,
                kernel.param_bytes.len(),
                args.len()
            )));
        }
        for (i, (arg, want)) in args.iter().zip(&kernel.param_bytes).enumerate() {
            if arg.bytes() != *want {
                return Err(bad(format!(
                    "argument {i} of `{}` is {} bytes; its parameter takes {want}",
                    kernel.name,
                    arg.bytes()
                )));
            }
        }
        let cfg = linear_launch(global, block).map_err(bad)?;
        let mut builder = self.stream.launch_builder(&kernel.function);
        for arg in args {
            match arg {
                PtxArg::Buffer(b) => builder.arg(*b),
                PtxArg::U32(v) => builder.arg(v),
                PtxArg::I32(v) => builder.arg(v),
                PtxArg::U64(v) => builder.arg(v),
                PtxArg::F32(v) => builder.arg(v),
            };
        }
        // SAFETY: `launch`'s contract. The arguments are as many as the
        // kernel's parameters and each is exactly its parameter's size
        // (checked above against the sizes read from the PTX), so the
        // driver reads each parameter's bytes from a live value of that
        // size (`args` outlives the launch call, which copies them). What
        // the kernel computes from them is untrusted code on the device:
        // it can reach only device memory and memory mapped into the
        // context, that is this device's buffers and its pinned staging
        // memory; the host touches staging memory only after the stream
        // it runs on is synchronised (`download` and `take_times` wait
        // for it, and the daemon does after every call), so no host
        // access races a kernel's.
        unsafe { self.launch(&mut builder, cfg) }
    }

    /// A device buffer of `len` zeros.
    pub fn zeros<T: Pod>(&self, len: usize) -> Result<CudaSlice<T>, CudaError> {
        drv("cuMemAllocAsync", self.stream.alloc_zeros::<T>(len.max(1)))
    }

    /// Pinned host buffer of at least `len` `T`s from `pool`, grown as needed.
    fn staging<'a, T: Pod>(
        &self,
        pool: &'a mut HashMap<TypeId, Box<dyn Any + Send>>,
        len: usize,
    ) -> Result<&'a mut PinnedHostSlice<T>, CudaError> {
        let fits = pool
            .get(&TypeId::of::<T>())
            .and_then(|b| b.downcast_ref::<PinnedHostSlice<T>>())
            .is_some_and(|p| p.len() >= len);
        if !fits {
            // Grow by doubling so a series of growing inputs pins O(log n) times.
            let cap = len.max(1).next_power_of_two();
            // SAFETY: cuMemHostAlloc with no flags (not write-combined:
            // results are read back through it). The memory is not
            // initialised, but every element is written (by a host copy or
            // a device→host copy) before any element is read, and `T: Pod`
            // has no invalid bit patterns.
            let p = drv("cuMemHostAlloc", unsafe {
                self.ctx.alloc_pinned_with_flags::<T>(cap, 0)
            })?;
            pool.insert(TypeId::of::<T>(), Box::new(p));
        }
        Ok(pool
            .get_mut(&TypeId::of::<T>())
            .and_then(|b| b.downcast_mut::<PinnedHostSlice<T>>())
            .expect("staging buffer inserted above"))
    }

    fn record(&self) -> Result<CudaEvent, CudaError> {
        drv("cuEventRecord", self.stream.record_event(TIMING))
    }

    /// Copies `data` to a new device buffer: into pinned memory on the
    /// host, then an asynchronous copy on the stream (the call returns
    /// before the copy ends).
    pub fn upload<T: Pod>(&self, data: &[T]) -> Result<CudaSlice<T>, CudaError> {
        let mut dst = self.zeros::<T>(data.len())?;
        self.upload_into(data, &mut dst)?;
        Ok(dst)
    }

    /// Copies `data` into the start of `dst`, as [`CudaDevice::upload`].
    pub fn upload_into<T: Pod>(&self, data: &[T], dst: &mut CudaSlice<T>) -> Result<(), CudaError> {
        if data.is_empty() {
            return Ok(());
        }
        if data.len() > dst.len() {
            return Err(CudaError::BadArgs {
                kernel: "upload",
                reason: format!("{} elements into a buffer of {}", data.len(), dst.len()),
            });
        }
        let mut pool = lock(&self.staging_in);
        let mut free = lock(&self.staging_in_free);
        if let Some(e) = free.take() {
            drv("cuEventSynchronize", e.synchronize())?;
        }
        let pinned = self.staging::<T>(&mut pool, data.len())?;
        drv("pinned staging", pinned.as_mut_slice())?[..data.len()].copy_from_slice(data);
        let start = self.record()?;
        let src = &drv("pinned staging", pinned.as_slice())?[..data.len()];
        drv(
            "cuMemcpyHtoDAsync",
            self.stream
                .memcpy_htod(src, &mut dst.slice_mut(..data.len())),
        )?;
        let end = self.record()?;
        *free = Some(drv(
            "cuEventRecord",
            self.stream
                .record_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)),
        )?);
        push_bounded(
            &mut lock(&self.pending),
            (Stage::CopyIn, start, end),
            MAX_PENDING_TIMES,
        );
        Ok(())
    }

    /// Copies the first `out.len()` elements of `src` back into `out`:
    /// an asynchronous copy into pinned memory, then waiting for it (and
    /// so for everything issued before it on the stream).
    pub fn download<T: Pod>(&self, src: &CudaSlice<T>, out: &mut [T]) -> Result<(), CudaError> {
        if out.is_empty() {
            return Ok(());
        }
        if out.len() > src.len() {
            return Err(CudaError::BadArgs {
                kernel: "download",
                reason: format!("{} elements from a buffer of {}", out.len(), src.len()),
            });
        }
        let mut pool = lock(&self.staging_out);
        let pinned = self.staging::<T>(&mut pool, out.len())?;
        let start = self.record()?;
        let dst = &mut drv("pinned staging", pinned.as_mut_slice())?[..out.len()];
        drv(
            "cuMemcpyDtoHAsync",
            self.stream.memcpy_dtoh(&src.slice(..out.len()), dst),
        )?;
        let end = self.record()?;
        drv("cuStreamSynchronize", self.stream.synchronize())?;
        out.copy_from_slice(&drv("pinned staging", pinned.as_slice())?[..out.len()]);
        push_bounded(
            &mut lock(&self.pending),
            (Stage::CopyOut, start, end),
            MAX_PENDING_TIMES,
        );
        Ok(())
    }

    /// Launches a kernel whose arguments `args` holds, timing it with a
    /// pair of events.
    ///
    /// # Safety
    /// The arguments must match the kernel's parameters in number, order
    /// and type, and every buffer the kernel reaches through them must be
    /// large enough for the indices it computes from `cfg` and its scalar
    /// arguments (cudarc cannot check either).
    pub unsafe fn launch(
        &self,
        args: &mut LaunchArgs<'_>,
        cfg: LaunchConfig,
    ) -> Result<(), CudaError> {
        let start = self.record()?;
        // SAFETY: the caller's contract above.
        drv("cuLaunchKernel", unsafe { args.launch(cfg) })?;
        let end = self.record()?;
        push_bounded(
            &mut lock(&self.pending),
            (Stage::Kernel, start, end),
            MAX_PENDING_TIMES,
        );
        Ok(())
    }

    /// Waits for the stream and returns the device time of every kernel and
    /// copy issued since the last call (what the runtime's model learns),
    /// or of the newest [`MAX_PENDING_TIMES`] of them.
    pub fn take_times(&self) -> Result<DeviceTimes, CudaError> {
        drv("cuStreamSynchronize", self.stream.synchronize())?;
        let mut t = DeviceTimes::default();
        for (stage, start, end) in lock(&self.pending).drain(..) {
            let ns = f64::from(drv("cuEventElapsedTime", start.elapsed_ms(&end))?) * 1e6;
            match stage {
                Stage::Kernel => {
                    t.kernel_ns += ns;
                    t.kernels += 1;
                }
                Stage::CopyIn => t.copy_in_ns += ns,
                Stage::CopyOut => t.copy_out_ns += ns,
            }
        }
        Ok(t)
    }

    /// Grid of at most `per_sm` blocks per SM (enough to fill the device
    /// and hide memory latency) and no more blocks than `work` items need.
    pub fn grid_for(&self, work: u64, block: u32, per_sm: u32) -> u32 {
        let needed = work.div_ceil(u64::from(block.max(1))).max(1);
        let cap = u64::from(self.info.sm_count.max(1) * per_sm.max(1));
        needed.min(cap) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_nobody_reads_stay_bounded_keeping_the_newest() {
        let mut q = VecDeque::new();
        for i in 0..10 {
            push_bounded(&mut q, i, 4);
        }
        assert_eq!(q, [6, 7, 8, 9]);
        push_bounded(&mut q, 10, 0);
        assert_eq!(q, [10], "at least one is kept");
    }

    #[test]
    fn a_linear_launch_covers_global_in_whole_blocks() {
        let c = linear_launch(1000, 256).unwrap();
        assert_eq!((c.grid_dim, c.block_dim), ((4, 1, 1), (256, 1, 1)));
        assert_eq!(linear_launch(256, 256).unwrap().grid_dim.0, 1);
        assert_eq!(linear_launch(1, 1).unwrap().grid_dim.0, 1);
        assert_eq!(linear_launch(1 << 32, 1024).unwrap().grid_dim.0, 1 << 22);
        assert!(linear_launch(1 << 40, 1).unwrap_err().contains("blocks"));
        assert!(linear_launch(64, 0).unwrap_err().contains("1..=1024"));
        assert!(linear_launch(2048, 2048).unwrap_err().contains("1..=1024"));
        assert!(linear_launch(0, 256).is_err());
    }

    #[test]
    fn ptx_arguments_have_their_parameters_sizes() {
        assert_eq!(PtxArg::U32(1).bytes(), 4);
        assert_eq!(PtxArg::I32(-1).bytes(), 4);
        assert_eq!(PtxArg::F32(1.0).bytes(), 4);
        assert_eq!(PtxArg::U64(1).bytes(), 8);
    }
}
