//! CPU topology from hwloc: PUs with their core, package and caches, and the
//! CPU kinds hwloc ranks by efficiency (most efficient, i.e. slowest, first).
//!
//! hwloc merges the kernel's views (sysfs capacity, cpufreq, cpuid hybrid
//! leaves, device tree) into one answer, which is why it is the first choice.
//! It is loaded at run time (`libhwloc.so.15`, the hwloc 2.x ABI), as
//! libOpenCL and libcuda are, so binaries and the Python wheel start on
//! machines without it and fall back to sysfs there. `HETSCHED_NO_HWLOC=1`
//! does not load it, as if it were absent.

// hwloc's C API through function pointers from dlopen, and the prefix of
// its `struct hwloc_obj` read through the pointers it returns. Each unsafe
// block says why it is sound next to it.
#![allow(unsafe_code)]

use crate::probed::{CacheSizes, RawKind, RawPu};
use libloading::Library;
use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_int, c_uint, c_ulong, c_void};
use std::sync::OnceLock;

/// What hwloc reported.
pub(crate) struct HwlocProbe {
    pub pus: Vec<RawPu>,
    /// Empty when hwloc has no CPU-kind information.
    pub kinds: Vec<RawKind>,
}

/// The soname of hwloc 2.x, whose ABI (and `struct hwloc_obj`) is the same
/// in every 2.x release.
const SONAME: &str = "libhwloc.so.15";

// `hwloc_obj_type_t`, the same in every 2.x release.
const OBJ_PACKAGE: c_int = 1;
const OBJ_CORE: c_int = 2;
const OBJ_PU: c_int = 3;
const OBJ_L1CACHE: c_int = 4;
const OBJ_L2CACHE: c_int = 5;
const OBJ_L3CACHE: c_int = 6;
/// `HWLOC_UNKNOWN_INDEX`: an object without an OS index.
const UNKNOWN_INDEX: c_uint = c_uint::MAX;

/// The first fields of hwloc 2.x's `struct hwloc_obj`, in its order; only
/// read through pointers hwloc gives out, never allocated here.
#[repr(C)]
struct Obj {
    ty: c_int,
    subtype: *mut c_char,
    os_index: c_uint,
    name: *mut c_char,
    total_memory: u64,
    /// `union hwloc_obj_attr_u *`: for caches its first member is
    /// `struct hwloc_cache_attr_s`, whose first field is the size in bytes.
    attr: *const u64,
    depth: c_int,
    logical_index: c_uint,
    next_cousin: *mut Obj,
    prev_cousin: *mut Obj,
    parent: *mut Obj,
}

/// `struct hwloc_info_s`.
#[repr(C)]
struct Info {
    name: *mut c_char,
    value: *mut c_char,
}

type Topo = c_void;
type Bitmap = c_void;

/// The functions used, copied out of the library, which stays loaded for
/// the life of the process (it is never closed, so they stay valid).
struct Api {
    _lib: Library,
    topology_init: unsafe extern "C" fn(*mut *mut Topo) -> c_int,
    topology_load: unsafe extern "C" fn(*mut Topo) -> c_int,
    topology_destroy: unsafe extern "C" fn(*mut Topo),
    get_type_depth: unsafe extern "C" fn(*mut Topo, c_int) -> c_int,
    get_nbobjs_by_depth: unsafe extern "C" fn(*mut Topo, c_int) -> c_uint,
    get_obj_by_depth: unsafe extern "C" fn(*mut Topo, c_int, c_uint) -> *mut Obj,
    bitmap_alloc: unsafe extern "C" fn() -> *mut Bitmap,
    bitmap_free: unsafe extern "C" fn(*mut Bitmap),
    bitmap_next: unsafe extern "C" fn(*const Bitmap, c_int) -> c_int,
    /// Absent before hwloc 2.4 (no CPU kinds then).
    cpukinds: Option<CpuKindsApi>,
    #[cfg(test)]
    test: TestApi,
}

struct CpuKindsApi {
    get_nr: unsafe extern "C" fn(*mut Topo, c_ulong) -> c_int,
    #[allow(clippy::type_complexity)]
    get_info: unsafe extern "C" fn(
        *mut Topo,
        c_uint,
        *mut Bitmap,
        *mut c_int,
        *mut c_uint,
        *mut *mut Info,
        c_ulong,
    ) -> c_int,
}

/// What the tests use to build synthetic machines.
#[cfg(test)]
struct TestApi {
    set_synthetic: unsafe extern "C" fn(*mut Topo, *const c_char) -> c_int,
    bitmap_set_range: unsafe extern "C" fn(*mut Bitmap, c_uint, c_int) -> c_int,
    cpukinds_register:
        unsafe extern "C" fn(*mut Topo, *mut Bitmap, c_int, c_uint, *mut Info, c_ulong) -> c_int,
}

/// Copies function `name` out of `lib` as a `T` (a function pointer type).
///
/// # Safety
/// `T` must be the function's C signature.
unsafe fn sym<T: Copy>(lib: &Library, name: &str) -> Result<T, String> {
    // SAFETY: the caller gives the symbol's true type; the value is a
    // function pointer, valid while `lib` is loaded (for good, see Api).
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("{SONAME} lacks {name}: {e}"))
}

impl Api {
    fn load() -> Result<Api, String> {
        if std::env::var_os("HETSCHED_NO_HWLOC").is_some_and(|v| !v.is_empty() && v != "0") {
            return Err("not loaded: HETSCHED_NO_HWLOC is set".into());
        }
        // SAFETY: loading hwloc runs its initialisers, which only set up
        // its own state (it is the system's hwloc library).
        let lib = unsafe { Library::new(SONAME) }.map_err(|e| format!("{SONAME}: {e}"))?;
        // SAFETY: each signature below is the one hwloc 2.x's headers
        // declare for that name (hwloc.h, hwloc/bitmap.h, hwloc/cpukinds.h).
        unsafe {
            let api_version: unsafe extern "C" fn() -> c_uint = sym(&lib, "hwloc_get_api_version")?;
            let v = api_version();
            if v >> 16 != 2 {
                return Err(format!("{SONAME} is hwloc API {v:#x}, not 2.x"));
            }
            let cpukinds = match (
                sym(&lib, "hwloc_cpukinds_get_nr"),
                sym(&lib, "hwloc_cpukinds_get_info"),
            ) {
                (Ok(get_nr), Ok(get_info)) => Some(CpuKindsApi { get_nr, get_info }),
                _ => None,
            };
            Ok(Api {
                topology_init: sym(&lib, "hwloc_topology_init")?,
                topology_load: sym(&lib, "hwloc_topology_load")?,
                topology_destroy: sym(&lib, "hwloc_topology_destroy")?,
                get_type_depth: sym(&lib, "hwloc_get_type_depth")?,
                get_nbobjs_by_depth: sym(&lib, "hwloc_get_nbobjs_by_depth")?,
                get_obj_by_depth: sym(&lib, "hwloc_get_obj_by_depth")?,
                bitmap_alloc: sym(&lib, "hwloc_bitmap_alloc")?,
                bitmap_free: sym(&lib, "hwloc_bitmap_free")?,
                bitmap_next: sym(&lib, "hwloc_bitmap_next")?,
                cpukinds,
                #[cfg(test)]
                test: TestApi {
                    set_synthetic: sym(&lib, "hwloc_topology_set_synthetic")?,
                    bitmap_set_range: sym(&lib, "hwloc_bitmap_set_range")?,
                    cpukinds_register: sym(&lib, "hwloc_cpukinds_register")?,
                },
                _lib: lib,
            })
        }
    }

    /// The process's hwloc, loaded on first use; `Err` says why there is none.
    fn get() -> Result<&'static Api, String> {
        static API: OnceLock<Result<Api, String>> = OnceLock::new();
        API.get_or_init(Api::load).as_ref().map_err(Clone::clone)
    }
}

/// A loaded hwloc topology (destroyed on drop).
pub(crate) struct Topology {
    api: &'static Api,
    topo: *mut Topo,
}

impl Drop for Topology {
    fn drop(&mut self) {
        // SAFETY: `topo` came from hwloc_topology_init and is destroyed once.
        unsafe { (self.api.topology_destroy)(self.topo) }
    }
}

impl Topology {
    /// `hwloc_topology_init`, then `configure` (before loading), then
    /// `hwloc_topology_load`.
    fn build(
        configure: impl FnOnce(&Api, *mut Topo) -> Result<(), String>,
    ) -> Result<Self, String> {
        let api = Api::get()?;
        let mut topo = std::ptr::null_mut();
        // SAFETY: init writes a new topology to `topo` (on success).
        if unsafe { (api.topology_init)(&mut topo) } != 0 || topo.is_null() {
            return Err("hwloc_topology_init failed".into());
        }
        let t = Topology { api, topo };
        configure(api, topo)?;
        // SAFETY: an initialised, not yet loaded topology.
        if unsafe { (api.topology_load)(topo) } != 0 {
            return Err(format!(
                "hwloc_topology_load failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(t)
    }

    /// This machine's topology.
    pub(crate) fn this_machine() -> Result<Self, String> {
        Topology::build(|_, _| Ok(()))
    }

    /// The objects of type `ty` (PUs, …) in logical order.
    fn objects(&self, ty: c_int) -> Vec<&Obj> {
        // SAFETY: a loaded topology; the depth and index are in range, and
        // the objects live as long as the topology (`&self`).
        unsafe {
            let depth = (self.api.get_type_depth)(self.topo, ty);
            if depth < 0 {
                return Vec::new();
            }
            let n = (self.api.get_nbobjs_by_depth)(self.topo, depth);
            (0..n)
                .filter_map(|i| (self.api.get_obj_by_depth)(self.topo, depth, i).as_ref())
                .collect()
        }
    }

    /// The CPU kinds: each one's efficiency, infos and PUs (OS indices).
    fn cpu_kinds(&self) -> Vec<(RawKind, Vec<usize>)> {
        let Some(k) = &self.api.cpukinds else {
            return Vec::new();
        };
        // SAFETY: a loaded topology; get_info fills the bitmap we allocated
        // (freed below) and points `infos` at `nr_infos` entries owned by
        // the topology, with NUL-terminated strings (or NULL).
        unsafe {
            let nr = (k.get_nr)(self.topo, 0);
            let mut kinds = Vec::new();
            for i in 0..c_uint::try_from(nr).unwrap_or(0) {
                let set = (self.api.bitmap_alloc)();
                if set.is_null() {
                    break;
                }
                let mut efficiency: c_int = -1;
                let mut nr_infos: c_uint = 0;
                let mut infos: *mut Info = std::ptr::null_mut();
                let got = (k.get_info)(
                    self.topo,
                    i,
                    set,
                    &mut efficiency,
                    &mut nr_infos,
                    &mut infos,
                    0,
                );
                if got == 0 {
                    let mut map = BTreeMap::new();
                    if !infos.is_null() {
                        for info in std::slice::from_raw_parts(infos, nr_infos as usize) {
                            if let (Some(n), Some(v)) = (c_str(info.name), c_str(info.value)) {
                                map.insert(n, v);
                            }
                        }
                    }
                    let mut pus = Vec::new();
                    let mut pu = (self.api.bitmap_next)(set, -1);
                    while pu >= 0 {
                        pus.push(pu as usize);
                        pu = (self.api.bitmap_next)(set, pu);
                    }
                    let kind = RawKind {
                        efficiency: usize::try_from(efficiency).ok(),
                        infos: map,
                    };
                    kinds.push((kind, pus));
                }
                (self.api.bitmap_free)(set);
            }
            kinds
        }
    }
}

/// A C string hwloc owns, copied; None for NULL.
///
/// # Safety
/// `p` is NULL or points to a NUL-terminated string.
unsafe fn c_str(p: *const c_char) -> Option<String> {
    // SAFETY: as the caller promises.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// The closest ancestor of `obj` of type `ty`.
fn ancestor(obj: &Obj, ty: c_int) -> Option<&Obj> {
    // SAFETY: parents are objects of the same topology (or NULL at the
    // root), alive as long as `obj` is.
    let mut up = unsafe { obj.parent.as_ref() };
    while let Some(o) = up {
        if o.ty == ty {
            return Some(o);
        }
        // SAFETY: as above.
        up = unsafe { o.parent.as_ref() };
    }
    None
}

fn cache_size(pu: &Obj, ty: c_int) -> Option<u64> {
    let cache = ancestor(pu, ty)?;
    // SAFETY: a cache object's attr points to its cache attributes, whose
    // first field is the size (hwloc_cache_attr_s); 0 means unknown.
    let size = unsafe { cache.attr.as_ref() }.copied()?;
    (size > 0).then_some(size)
}

/// Loads this machine's topology; `Err` says why hwloc gave none (absent,
/// failed), for the platform notes.
pub(crate) fn probe() -> Result<HwlocProbe, String> {
    let topology = Topology::this_machine().map_err(|e| format!("hwloc: {e}"))?;
    Ok(probe_topology(&topology))
}

/// Reads PUs and CPU kinds from a loaded topology (this machine's, or a
/// synthetic one in tests).
pub(crate) fn probe_topology(topology: &Topology) -> HwlocProbe {
    let kinds = topology.cpu_kinds();
    let pus = topology
        .objects(OBJ_PU)
        .into_iter()
        .filter(|pu| pu.os_index != UNKNOWN_INDEX)
        .map(|pu| {
            let os_index = pu.os_index as usize;
            RawPu {
                os_index,
                core: ancestor(pu, OBJ_CORE).map(|c| c.logical_index as usize),
                package: ancestor(pu, OBJ_PACKAGE).map(|p| p.logical_index as usize),
                caches: CacheSizes {
                    l1d: cache_size(pu, OBJ_L1CACHE),
                    l2: cache_size(pu, OBJ_L2CACHE),
                    l3: cache_size(pu, OBJ_L3CACHE),
                },
                hw_kind: kinds.iter().position(|(_, set)| set.contains(&os_index)),
            }
        })
        .collect();
    HwlocProbe {
        pus,
        kinds: kinds.into_iter().map(|(k, _)| k).collect(),
    }
}

/// A CPU kind to register in a synthetic machine: its PUs, its
/// efficiency and its infos.
#[cfg(test)]
pub(crate) type SyntheticKind<'a> = (std::ops::RangeInclusive<u32>, i32, &'a [(&'a str, &'a str)]);

/// A synthetic machine for tests: hwloc's synthetic description (such as
/// `"pack:1 core:4 pu:2"`), then CPU kinds registered.
#[cfg(test)]
pub(crate) fn synthetic(description: &str, kinds: &[SyntheticKind]) -> Result<Topology, String> {
    use std::ffi::CString;
    let desc = CString::new(description).map_err(|e| e.to_string())?;
    let topology = Topology::build(|api, topo| {
        // SAFETY: an initialised topology, a NUL-terminated description.
        match unsafe { (api.test.set_synthetic)(topo, desc.as_ptr()) } {
            0 => Ok(()),
            _ => Err(format!("hwloc refused synthetic topology {description:?}")),
        }
    })?;
    let api = topology.api;
    for (range, efficiency, infos) in kinds {
        let strings: Vec<(CString, CString)> = infos
            .iter()
            .map(|(n, v)| (CString::new(*n).unwrap(), CString::new(*v).unwrap()))
            .collect();
        let mut raw: Vec<Info> = strings
            .iter()
            .map(|(n, v)| Info {
                name: n.as_ptr().cast_mut(),
                value: v.as_ptr().cast_mut(),
            })
            .collect();
        // SAFETY: a loaded topology and a bitmap we allocate and free;
        // register copies the infos (their strings outlive the call).
        let ok = unsafe {
            let set = (api.bitmap_alloc)();
            (api.test.bitmap_set_range)(set, *range.start(), *range.end() as c_int);
            let r = (api.test.cpukinds_register)(
                topology.topo,
                set,
                *efficiency,
                raw.len() as c_uint,
                raw.as_mut_ptr(),
                0,
            );
            (api.bitmap_free)(set);
            r == 0
        };
        if !ok {
            return Err(format!("hwloc refused CPU kind {range:?}"));
        }
    }
    Ok(topology)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine through the loaded hwloc: every PU once, each in a core
    /// and a package (hwloc is installed wherever the tests run).
    #[test]
    fn this_machine_has_pus_in_cores() {
        let p = probe().expect("hwloc loads this machine's topology");
        assert!(!p.pus.is_empty());
        let mut seen: Vec<usize> = p.pus.iter().map(|pu| pu.os_index).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), p.pus.len(), "a PU listed twice");
        assert!(
            p.pus
                .iter()
                .all(|pu| pu.core.is_some() && pu.package.is_some())
        );
    }

    #[test]
    fn a_bad_synthetic_description_is_an_error() {
        assert!(synthetic("no such thing:7", &[]).is_err());
    }
}
