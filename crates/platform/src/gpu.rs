//! NVIDIA GPUs (feature `cuda`): discovery and calibration.
//!
//! Discovery asks two libraries, both opened at run time so that a binary
//! built with this module starts on machines without an NVIDIA driver:
//!
//! * **NVML** (`libnvidia-ml.so.1`, through `nvml-wrapper`): name, memory,
//!   PCI address and PCIe link (generation and width, current and maximum);
//! * **the CUDA driver** (`libcuda.so`, through `cudarc`): the CUDA ordinal,
//!   SM count and compute capability, which NVML does not report.
//!
//! The two are matched by PCI address, since CUDA numbers devices fastest
//! first by default while NVML numbers them by bus order. Either alone still
//! yields a GPU with the fields it knows; neither yields none, with notes
//! saying why.
//!
//! [`calibrate`] measures, on one device, what placement charges a call
//! before its kernel runs: the launch round trip and the latency and
//! bandwidth of pinned host↔device copies.
//!
//! `unsafe` is allowed in this module only: the CUDA driver's attribute
//! queries, pinned host allocation and kernel launches are `unsafe fn` in
//! cudarc. Each block states why it is sound.
#![allow(unsafe_code)]

use cudarc::driver::{
    CudaContext, CudaStream, LaunchConfig, PushKernelArg, result as cu, sys as cusys,
};
use hetsched_core::unit::LinkCost;
use serde::{Deserialize, Serialize};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Instant;

/// A PCIe link as NVML reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcieLink {
    /// Current generation (it drops when the GPU idles to save power).
    pub generation: u32,
    /// Current width in lanes.
    pub width: u32,
    pub max_generation: Option<u32>,
    pub max_width: Option<u32>,
}

/// Which library described a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuSource {
    /// NVML and the CUDA driver, matched by PCI address.
    NvmlAndCuda,
    /// NVML only (no usable CUDA driver: the GPU cannot run work here).
    Nvml,
    /// CUDA device attributes only (NVML did not load).
    Cuda,
}

/// One NVIDIA GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// The unit name the runtime gives it (`cuda<ordinal>`, or
    /// `nvml<index>` for a GPU CUDA cannot drive).
    pub name: String,
    /// Always `"gpu"`: what `hetsched units` lists it as.
    pub class: String,
    /// The CUDA device ordinal, when the CUDA driver is usable.
    pub cuda_ordinal: Option<usize>,
    /// The product name (e.g. "NVIDIA H100 80GB HBM3").
    pub model: String,
    pub uuid: Option<String>,
    /// Streaming multiprocessors (from CUDA).
    pub sm_count: Option<u32>,
    /// Compute capability (major, minor).
    pub compute_capability: Option<(u32, u32)>,
    /// Device memory, bytes.
    pub memory_bytes: u64,
    /// PCI address, `domain:bus:device.function` in lower-case hex.
    pub pci_bus_id: Option<String>,
    pub pcie: Option<PcieLink>,
    pub source: GpuSource,
}

/// What discovery found, and why anything is missing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuDiscovery {
    pub gpus: Vec<GpuInfo>,
    pub notes: Vec<String>,
}

/// A GPU as the CUDA driver describes it.
#[derive(Clone, Debug, PartialEq)]
struct CudaAttrs {
    ordinal: usize,
    name: String,
    sm_count: u32,
    compute_capability: (u32, u32),
    memory_bytes: u64,
    pci: (u32, u32, u32),
}

/// A GPU as NVML describes it.
#[derive(Clone, Debug, PartialEq)]
struct NvmlAttrs {
    index: u32,
    name: String,
    uuid: Option<String>,
    memory_bytes: u64,
    pci: Option<(u32, u32, u32)>,
    pcie: Option<PcieLink>,
}

fn pci_string((domain, bus, device): (u32, u32, u32)) -> String {
    format!("{domain:08x}:{bus:02x}:{device:02x}.0")
}

/// Runs `f`, turning a panic into an error: cudarc panics (rather than
/// failing) when a library or one of its symbols cannot be loaded, and a
/// machine with an old or broken driver must still start without its GPUs.
pub fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic without a message".into());
            Err(format!("{what} failed: {msg}"))
        }
    }
}

/// Whether the CUDA driver library can be loaded, and if not, why.
pub fn cuda_driver_available() -> Result<(), String> {
    // SAFETY: `is_culib_present` only tries to dlopen the library names
    // cudarc knows and closes them again; it runs no library code besides
    // the loader's.
    if unsafe { cusys::is_culib_present() } {
        Ok(())
    } else {
        Err("the CUDA driver library (libcuda.so) is not installed".into())
    }
}

/// Whether NVRTC (needed to build kernels at run time) can be loaded.
pub fn nvrtc_available() -> Result<(), String> {
    // SAFETY: as for `cuda_driver_available`: only dlopen/dlclose.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err("NVRTC (libnvrtc.so) is not installed or not on the library path".into())
    }
}

/// Every device the CUDA driver can see.
fn cuda_devices() -> Result<Vec<CudaAttrs>, String> {
    cuda_driver_available()?;
    guarded("CUDA device query", || {
        cu::init().map_err(|e| format!("cuInit: {e}"))?;
        let count = cu::device::get_count().map_err(|e| format!("cuDeviceGetCount: {e}"))?;
        let mut out = Vec::new();
        for ordinal in 0..count.max(0) {
            let dev = cu::device::get(ordinal).map_err(|e| format!("cuDeviceGet: {e}"))?;
            let attr = |a: cusys::CUdevice_attribute| -> Result<u32, String> {
                // SAFETY: `dev` came from cuDeviceGet after a successful
                // cuInit, which is all cuDeviceGetAttribute requires.
                let v = unsafe { cu::device::get_attribute(dev, a) }
                    .map_err(|e| format!("cuDeviceGetAttribute({a:?}): {e}"))?;
                Ok(u32::try_from(v).unwrap_or(0))
            };
            use cusys::CUdevice_attribute as A;
            // SAFETY: as above, a valid device after cuInit.
            let memory_bytes = unsafe { cu::device::total_mem(dev) }
                .map_err(|e| format!("cuDeviceTotalMem: {e}"))?;
            out.push(CudaAttrs {
                ordinal: ordinal as usize,
                name: cu::device::get_name(dev).map_err(|e| format!("cuDeviceGetName: {e}"))?,
                sm_count: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
                compute_capability: (
                    attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                    attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
                ),
                memory_bytes: memory_bytes as u64,
                pci: (
                    attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
                    attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
                    attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?,
                ),
            });
        }
        Ok(out)
    })
}

/// Every device NVML can see.
fn nvml_devices() -> Result<Vec<NvmlAttrs>, String> {
    use nvml_wrapper::Nvml;
    let nvml = Nvml::init().map_err(|e| format!("NVML did not load: {e}"))?;
    let count = nvml
        .device_count()
        .map_err(|e| format!("nvmlDeviceGetCount: {e}"))?;
    let mut out = Vec::new();
    for index in 0..count {
        let dev = nvml
            .device_by_index(index)
            .map_err(|e| format!("nvmlDeviceGetHandleByIndex({index}): {e}"))?;
        let memory_bytes = dev.memory_info().map(|m| m.total).unwrap_or(0);
        let pci = dev.pci_info().ok().map(|p| (p.domain, p.bus, p.device));
        // A link query fails on GPUs without PCIe (SXM boards report it,
        // some virtualised ones do not): the GPU is still listed.
        let pcie = match (dev.current_pcie_link_gen(), dev.current_pcie_link_width()) {
            (Ok(generation), Ok(width)) => Some(PcieLink {
                generation,
                width,
                max_generation: dev.max_pcie_link_gen().ok(),
                max_width: dev.max_pcie_link_width().ok(),
            }),
            _ => None,
        };
        out.push(NvmlAttrs {
            index,
            name: dev.name().unwrap_or_else(|_| "NVIDIA GPU".into()),
            uuid: dev.uuid().ok(),
            memory_bytes,
            pci,
            pcie,
        });
    }
    Ok(out)
}

/// One [`GpuInfo`] per physical GPU: CUDA devices first, in CUDA order
/// (the order the runtime opens them in), completed by the NVML device at
/// the same PCI address; then NVML devices CUDA does not see.
fn merge(cuda: &[CudaAttrs], nvml: &[NvmlAttrs]) -> Vec<GpuInfo> {
    let mut used = vec![false; nvml.len()];
    let mut out = Vec::new();
    for c in cuda {
        let matched = nvml
            .iter()
            .position(|n| n.pci == Some(c.pci))
            .filter(|&i| !used[i]);
        if let Some(i) = matched {
            used[i] = true;
        }
        let n = matched.map(|i| &nvml[i]);
        out.push(GpuInfo {
            name: format!("cuda{}", c.ordinal),
            class: "gpu".into(),
            cuda_ordinal: Some(c.ordinal),
            model: n.map_or_else(|| c.name.clone(), |n| n.name.clone()),
            uuid: n.and_then(|n| n.uuid.clone()),
            sm_count: Some(c.sm_count),
            compute_capability: Some(c.compute_capability),
            memory_bytes: c.memory_bytes,
            pci_bus_id: Some(pci_string(c.pci)),
            pcie: n.and_then(|n| n.pcie),
            source: if n.is_some() {
                GpuSource::NvmlAndCuda
            } else {
                GpuSource::Cuda
            },
        });
    }
    for (n, _) in nvml.iter().zip(&used).filter(|(_, used)| !**used) {
        out.push(GpuInfo {
            name: format!("nvml{}", n.index),
            class: "gpu".into(),
            cuda_ordinal: None,
            model: n.name.clone(),
            uuid: n.uuid.clone(),
            sm_count: None,
            compute_capability: None,
            memory_bytes: n.memory_bytes,
            pci_bus_id: n.pci.map(pci_string),
            pcie: n.pcie,
            source: GpuSource::Nvml,
        });
    }
    out
}

/// Finds the machine's NVIDIA GPUs. Never fails: what could not be asked
/// is said in [`GpuDiscovery::notes`].
pub fn discover() -> GpuDiscovery {
    let mut notes = Vec::new();
    let cuda = cuda_devices().unwrap_or_else(|e| {
        notes.push(format!("no CUDA devices: {e}"));
        Vec::new()
    });
    let nvml = nvml_devices().unwrap_or_else(|e| {
        notes.push(format!("no NVML devices: {e}"));
        Vec::new()
    });
    let gpus = merge(&cuda, &nvml);
    if gpus.iter().any(|g| g.cuda_ordinal.is_none()) {
        notes.push(
            "a GPU NVML lists is not usable through CUDA here (driver library missing or \
             CUDA_VISIBLE_DEVICES hides it)"
                .into(),
        );
    }
    GpuDiscovery { gpus, notes }
}

impl GpuDiscovery {
    /// Lines for `hetsched units`' table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        for g in &self.gpus {
            let sms = g.sm_count.map_or("?".into(), |n| n.to_string());
            let cc = g
                .compute_capability
                .map_or("?".into(), |(a, b)| format!("{a}.{b}"));
            let link = g
                .pcie
                .map_or("?".into(), |l| format!("gen{} x{}", l.generation, l.width));
            s.push_str(&format!(
                "{:<10} gpu  {}  {} SMs  cc {}  {:.1} GiB  PCIe {}  ({:?})\n",
                g.name,
                g.model,
                sms,
                cc,
                g.memory_bytes as f64 / (1u64 << 30) as f64,
                link,
                g.source
            ));
        }
        s
    }
}

/// How long [`calibrate`] measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuCalibrationOptions {
    /// Launch round trips timed (the median is kept).
    pub launches: u32,
    /// Small copies timed per direction (the median is kept).
    pub small_copies: u32,
    /// Bytes of the large copy that measures bandwidth.
    pub large_bytes: usize,
    /// Large copies per direction (the fastest is kept).
    pub large_copies: u32,
}

impl Default for GpuCalibrationOptions {
    fn default() -> Self {
        GpuCalibrationOptions {
            launches: 200,
            small_copies: 100,
            large_bytes: 64 << 20,
            large_copies: 5,
        }
    }
}

impl GpuCalibrationOptions {
    /// A short run (tens of ms) for runtime start-up.
    pub fn quick() -> Self {
        GpuCalibrationOptions {
            launches: 50,
            small_copies: 30,
            large_bytes: 16 << 20,
            large_copies: 3,
        }
    }
}

/// Launch and copy costs of one GPU, measured.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuCalibration {
    pub cuda_ordinal: usize,
    /// Host time to launch an empty kernel and wait for it (median), ns:
    /// what one call pays before any work, the unit's dispatch cost.
    pub launch_round_trip_ns: f64,
    /// Host time per launch when launches are queued back to back, ns.
    pub launch_queued_ns: f64,
    /// Pinned host → device copies: latency (median of small copies) and
    /// bandwidth (fastest large copy, event-timed).
    pub copy_in: LinkCost,
    /// Device → pinned host copies, as `copy_in`.
    pub copy_out: LinkCost,
}

const EMPTY_KERNEL: &str = "extern \"C\" __global__ void hetsched_empty(int x) { (void)x; }";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn dr<T>(what: &str, r: Result<T, cudarc::driver::DriverError>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// Measures device `ordinal`'s launch and copy costs (see
/// [`GpuCalibration`]). Needs the CUDA driver and NVRTC; errs (never
/// panics) where they are missing.
pub fn calibrate(ordinal: usize, opts: &GpuCalibrationOptions) -> Result<GpuCalibration, String> {
    cuda_driver_available()?;
    nvrtc_available()?;
    guarded("GPU calibration", || calibrate_inner(ordinal, opts))
}

fn calibrate_inner(ordinal: usize, opts: &GpuCalibrationOptions) -> Result<GpuCalibration, String> {
    let ctx = dr("cuCtx", CudaContext::new(ordinal))?;
    let stream = dr("cuStreamCreate", ctx.new_stream())?;
    let ptx = cudarc::nvrtc::compile_ptx(EMPTY_KERNEL).map_err(|e| format!("NVRTC: {e}"))?;
    let module = dr("cuModuleLoadData", ctx.load_module(ptx))?;
    let func = dr(
        "cuModuleGetFunction",
        module.load_function("hetsched_empty"),
    )?;
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    let arg = 0_i32;
    let launch = |stream: &Arc<CudaStream>| -> Result<(), String> {
        // SAFETY: `hetsched_empty` takes one `int`, which is what is
        // passed; it touches no memory.
        dr("cuLaunchKernel", unsafe {
            stream.launch_builder(&func).arg(&arg).launch(cfg)
        })
        .map(|_| ())
    };
    // Warm-up: the first launches load the module onto the device.
    for _ in 0..10 {
        launch(&stream)?;
    }
    dr("cuStreamSynchronize", stream.synchronize())?;

    let mut round_trips = Vec::new();
    for _ in 0..opts.launches.max(1) {
        let t = Instant::now();
        launch(&stream)?;
        dr("cuStreamSynchronize", stream.synchronize())?;
        round_trips.push(t.elapsed().as_nanos() as f64);
    }
    let n = opts.launches.max(1);
    let t = Instant::now();
    for _ in 0..n {
        launch(&stream)?;
    }
    let queued = t.elapsed().as_nanos() as f64 / f64::from(n);
    dr("cuStreamSynchronize", stream.synchronize())?;

    let large = opts.large_bytes.max(1 << 20);
    // SAFETY: the pinned buffer is only read after being written by the
    // device→host copy below or filled here; u8 has no invalid values, and
    // cuMemHostAlloc returns mapped, zero-filled pages on Linux.
    let mut host = dr("cuMemHostAlloc", unsafe {
        ctx.alloc_pinned_with_flags::<u8>(large, 0)
    })?;
    dr("pinned slice", host.as_mut_slice())?.fill(0x5a);
    let mut dev = dr("cuMemAlloc", stream.alloc_zeros::<u8>(large))?;

    let small = 8;
    let mut lat_in = Vec::new();
    let mut lat_out = Vec::new();
    for _ in 0..opts.small_copies.max(1) {
        let t = Instant::now();
        dr(
            "cuMemcpyHtoDAsync",
            stream.memcpy_htod(
                &dr("pinned slice", host.as_slice())?[..small],
                &mut dev.slice_mut(..small),
            ),
        )?;
        dr("cuStreamSynchronize", stream.synchronize())?;
        lat_in.push(t.elapsed().as_nanos() as f64);
        let t = Instant::now();
        dr(
            "cuMemcpyDtoHAsync",
            stream.memcpy_dtoh(
                &dev.slice(..small),
                &mut dr("pinned slice", host.as_mut_slice())?[..small],
            ),
        )?;
        dr("cuStreamSynchronize", stream.synchronize())?;
        lat_out.push(t.elapsed().as_nanos() as f64);
    }

    let timing = Some(cusys::CUevent_flags::CU_EVENT_DEFAULT);
    let mut best_in = f64::INFINITY;
    let mut best_out = f64::INFINITY;
    for _ in 0..opts.large_copies.max(1) {
        let a = dr("cuEventRecord", stream.record_event(timing))?;
        dr("cuMemcpyHtoDAsync", stream.memcpy_htod(&host, &mut dev))?;
        let b = dr("cuEventRecord", stream.record_event(timing))?;
        dr("cuMemcpyDtoHAsync", stream.memcpy_dtoh(&dev, &mut host))?;
        let c = dr("cuEventRecord", stream.record_event(timing))?;
        dr("cuEventSynchronize", c.synchronize())?;
        best_in = best_in.min(f64::from(dr("cuEventElapsedTime", a.elapsed_ms(&b))?) * 1e6);
        best_out = best_out.min(f64::from(dr("cuEventElapsedTime", b.elapsed_ms(&c))?) * 1e6);
    }
    let link = |latency: f64, best_ns: f64| {
        // Bandwidth from the large copy net of its fixed part, so that
        // `latency + bytes × ns_per_byte` reproduces both measurements.
        let ns_per_byte = ((best_ns - latency).max(best_ns * 0.5)) / large as f64;
        LinkCost {
            latency_ns: latency.round() as u64,
            ns_per_byte,
        }
    };
    let lat_in = median(lat_in);
    let lat_out = median(lat_out);
    Ok(GpuCalibration {
        cuda_ordinal: ordinal,
        launch_round_trip_ns: median(round_trips),
        launch_queued_ns: queued,
        copy_in: link(lat_in, best_in),
        copy_out: link(lat_out, best_out),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cuda(ordinal: usize, pci: (u32, u32, u32)) -> CudaAttrs {
        CudaAttrs {
            ordinal,
            name: format!("cuda name {ordinal}"),
            sm_count: 132,
            compute_capability: (9, 0),
            memory_bytes: 80 << 30,
            pci,
        }
    }

    fn nvml(index: u32, pci: (u32, u32, u32)) -> NvmlAttrs {
        NvmlAttrs {
            index,
            name: format!("NVIDIA H100 #{index}"),
            uuid: Some(format!("GPU-{index}")),
            memory_bytes: 81559 << 20,
            pci: Some(pci),
            pcie: Some(PcieLink {
                generation: 5,
                width: 16,
                max_generation: Some(5),
                max_width: Some(16),
            }),
        }
    }

    #[test]
    fn merge_matches_by_pci_address_not_by_index() {
        // CUDA orders fastest first, NVML by bus: the two lists disagree.
        let c = [cuda(0, (0, 0x9a, 0)), cuda(1, (0, 0x1b, 0))];
        let n = [nvml(0, (0, 0x1b, 0)), nvml(1, (0, 0x9a, 0))];
        let gpus = merge(&c, &n);
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].name, "cuda0");
        assert_eq!(gpus[0].model, "NVIDIA H100 #1");
        assert_eq!(gpus[0].pci_bus_id.as_deref(), Some("00000000:9a:00.0"));
        assert_eq!(gpus[1].uuid.as_deref(), Some("GPU-0"));
        assert!(gpus.iter().all(|g| g.source == GpuSource::NvmlAndCuda));
        assert_eq!(gpus[0].sm_count, Some(132));
        assert_eq!(gpus[0].pcie.map(|l| l.width), Some(16));
    }

    #[test]
    fn merge_keeps_what_either_library_alone_knows() {
        let only_cuda = merge(&[cuda(0, (0, 3, 0))], &[]);
        assert_eq!(only_cuda[0].source, GpuSource::Cuda);
        assert_eq!(only_cuda[0].model, "cuda name 0");
        assert_eq!(only_cuda[0].pcie, None);

        // A GPU hidden from CUDA (CUDA_VISIBLE_DEVICES) is still listed,
        // without an ordinal.
        let hidden = merge(
            &[cuda(0, (0, 3, 0))],
            &[nvml(0, (0, 3, 0)), nvml(1, (0, 4, 0))],
        );
        assert_eq!(hidden.len(), 2);
        assert_eq!(hidden[1].name, "nvml1");
        assert_eq!(hidden[1].cuda_ordinal, None);
        assert_eq!(hidden[1].source, GpuSource::Nvml);
        assert!(merge(&[], &[]).is_empty());
    }

    #[test]
    fn discovery_never_panics_and_explains_absence() {
        let d = discover();
        if d.gpus.is_empty() {
            // Where neither library loads, both say so.
            assert!(d.notes.len() >= 2, "notes: {:?}", d.notes);
        } else {
            assert!(
                d.gpus
                    .iter()
                    .all(|g| g.class == "gpu" && g.memory_bytes > 0)
            );
        }
    }

    #[test]
    fn calibration_errs_cleanly_without_a_driver() {
        match calibrate(0, &GpuCalibrationOptions::quick()) {
            Ok(c) => {
                // A GPU is here: the figures must be physical.
                assert!(c.launch_round_trip_ns > 0.0 && c.launch_round_trip_ns < 1e7);
                assert!(c.copy_in.ns_per_byte > 0.0 && c.copy_out.ns_per_byte > 0.0);
            }
            Err(e) => {
                eprintln!("skipping GPU calibration: no CUDA device ({e})");
                assert!(!e.is_empty());
            }
        }
    }
}
