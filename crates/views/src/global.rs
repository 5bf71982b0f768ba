//! The global page: what every client may see about every unit and every
//! CPU kind (Rinnegan's Table 1, "Global" rows).

use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::AtomicU64;

use hetsched_core::view::UnitView;

use crate::error::ViewError;
use crate::layout::{Layout, PageKind, cpu_kind, global_unit, header};
use crate::page::{PageReader, PageWriter, load, load_f64, store, store_f64};

pub use crate::layout::NICE_LEVELS;

/// The lowest (most favoured) nice level; index 0 of the per-nice arrays.
pub const NICE_MIN: i32 = -20;

/// Index of the CUSTOM class in [`GlobalUnit::queued_by_class`].
pub const CLASS_CUSTOM: usize = 0;
/// Index of the NORMAL class in [`GlobalUnit::queued_by_class`].
pub const CLASS_NORMAL: usize = 1;
/// Index of the BACKGROUND class in [`GlobalUnit::queued_by_class`].
pub const CLASS_BACKGROUND: usize = 2;

/// One unit on the global page.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GlobalUnit {
    /// Utilisation, average task size, active clients, queue and running counts.
    pub view: UnitView,
    /// Requests waiting, by share class: CUSTOM, NORMAL, BACKGROUND
    /// ([`CLASS_CUSTOM`], [`CLASS_NORMAL`], [`CLASS_BACKGROUND`]).
    pub queued_by_class: [u32; 3],
    /// Time the unit has been busy since the daemon started, ns.
    pub busy_ns_total: u64,
}

/// One kind of CPU core on the global page: how CFS shares it out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuKindView {
    /// Runnable threads at each nice level, nice -20 first.
    pub threads_by_nice: [u32; NICE_LEVELS],
    /// Fraction of this kind's CPU time CFS gives each nice level, nice -20
    /// first; sums to 1 over the levels that have threads.
    pub time_ratio_by_nice: [f64; NICE_LEVELS],
    /// Cores of this kind no client holds exclusively (min-funding).
    pub exclusive_cores_free: u32,
}

impl Default for CpuKindView {
    fn default() -> Self {
        CpuKindView {
            threads_by_nice: [0; NICE_LEVELS],
            time_ratio_by_nice: [0.0; NICE_LEVELS],
            exclusive_cores_free: 0,
        }
    }
}

impl CpuKindView {
    /// Index of `nice` in the per-nice arrays; `None` outside -20..=19.
    pub fn nice_index(nice: i32) -> Option<usize> {
        usize::try_from(nice - NICE_MIN)
            .ok()
            .filter(|&i| i < NICE_LEVELS)
    }
}

/// Everything on the global page, read at one instant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GlobalSnapshot {
    /// The writer's clock at that publish, ns (0 before the first).
    pub published_at_ns: u64,
    /// The publish's sequence number (even; 0 before the first publish).
    pub seq: u64,
    pub units: Vec<GlobalUnit>,
    pub kinds: Vec<CpuKindView>,
}

/// The daemon's side of the global page.
#[derive(Debug)]
pub struct GlobalWriter {
    page: PageWriter,
}

impl GlobalWriter {
    /// Creates a sealed page for `n_units` units and `n_cpu_kinds` CPU kinds,
    /// all fields zero and `seq` 0 until the first publish.
    pub fn create(n_units: usize, n_cpu_kinds: usize) -> Result<Self, ViewError> {
        let page = PageWriter::create(PageKind::Global, n_units, n_cpu_kinds, |_, _| {})?;
        Ok(GlobalWriter { page })
    }

    /// The page's memfd, to send to clients (`SCM_RIGHTS`). Receivers can
    /// only map it read-only.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.page
            .fd()
            .expect("the global page keeps its descriptor: it is sent to every client")
    }

    pub fn n_units(&self) -> usize {
        self.page.layout().n_units
    }

    pub fn n_cpu_kinds(&self) -> usize {
        self.page.layout().n_cpu_kinds
    }

    /// Publishes every unit and CPU kind at once (one seqlock write).
    ///
    /// Fails, writing nothing, unless `units` and `kinds` have exactly the
    /// page's counts.
    pub fn publish(
        &mut self,
        now_ns: u64,
        units: &[GlobalUnit],
        kinds: &[CpuKindView],
    ) -> Result<(), ViewError> {
        check_len("units", units.len(), self.n_units())?;
        check_len("CPU kinds", kinds.len(), self.n_cpu_kinds())?;
        self.page.publish(now_ns, |layout, slots| {
            for (i, u) in units.iter().enumerate() {
                write_unit(slots, layout.unit_at(i), u);
            }
            for (k, v) in kinds.iter().enumerate() {
                write_cpu_kind(slots, layout.cpu_kind_at(k), v);
            }
        });
        Ok(())
    }

    /// Publishes whatever `f` sets (one seqlock write); what it does not set
    /// keeps its previous value. For agents that update part of the page.
    pub fn publish_with<R>(
        &mut self,
        now_ns: u64,
        f: impl FnOnce(&mut GlobalPublish<'_>) -> R,
    ) -> R {
        let mut result = None;
        self.page.publish(now_ns, |layout, slots| {
            result = Some(f(&mut GlobalPublish { layout, slots }));
        });
        result.expect("publish runs its closure once")
    }
}

/// Sets values inside one [`GlobalWriter::publish_with`].
#[derive(Debug)]
pub struct GlobalPublish<'a> {
    layout: &'a Layout,
    slots: &'a [AtomicU64],
}

impl GlobalPublish<'_> {
    pub fn set_unit(&mut self, i: usize, unit: &GlobalUnit) -> Result<(), ViewError> {
        check_index("unit", i, self.layout.n_units)?;
        write_unit(self.slots, self.layout.unit_at(i), unit);
        Ok(())
    }

    pub fn set_cpu_kind(&mut self, k: usize, kind: &CpuKindView) -> Result<(), ViewError> {
        check_index("CPU kind", k, self.layout.n_cpu_kinds)?;
        write_cpu_kind(self.slots, self.layout.cpu_kind_at(k), kind);
        Ok(())
    }
}

/// A client's read-only view of the global page. Lock-free; share it
/// between threads freely.
#[derive(Debug)]
pub struct GlobalReader {
    page: PageReader,
}

impl GlobalReader {
    /// Accepts the global page's fd as received from the daemon: checks it is
    /// a sealed memfd of the size its header declares, with the right magic,
    /// version and counts, and maps it read-only.
    pub fn from_fd(fd: OwnedFd) -> Result<Self, ViewError> {
        Ok(GlobalReader {
            page: PageReader::from_fd(PageKind::Global, fd)?,
        })
    }

    pub fn n_units(&self) -> usize {
        self.page.layout().n_units
    }

    pub fn n_cpu_kinds(&self) -> usize {
        self.page.layout().n_cpu_kinds
    }

    /// Unit `i` as last published; `None` when `i` is out of range or the
    /// writer stalled mid-publish (see [`GlobalReader::try_unit`]).
    #[inline]
    pub fn unit(&self, i: usize) -> Option<GlobalUnit> {
        self.try_unit(i).ok()
    }

    /// Unit `i` as last published, never torn.
    #[inline]
    pub fn try_unit(&self, i: usize) -> Result<GlobalUnit, ViewError> {
        check_index("unit", i, self.n_units())?;
        let at = self.page.layout().unit_at(i);
        self.page
            .read(|_, slots| read_unit(slots, at))
            .map(|(u, _)| u)
    }

    /// CPU kind `k` as last published; `None` when out of range or stalled.
    pub fn cpu_kind(&self, k: usize) -> Option<CpuKindView> {
        self.try_cpu_kind(k).ok()
    }

    pub fn try_cpu_kind(&self, k: usize) -> Result<CpuKindView, ViewError> {
        check_index("CPU kind", k, self.n_cpu_kinds())?;
        let at = self.page.layout().cpu_kind_at(k);
        self.page
            .read(|_, slots| read_cpu_kind(slots, at))
            .map(|(v, _)| v)
    }

    /// The sequence number of the last complete publish (0: none yet). Equal
    /// sequence numbers mean nothing changed in between.
    pub fn seq(&self) -> Result<u64, ViewError> {
        self.page.read(|_, _| ()).map(|((), seq)| seq)
    }

    /// The whole page at one instant; fails only if the writer stalled.
    pub fn snapshot(&self) -> Result<GlobalSnapshot, ViewError> {
        let mut s = GlobalSnapshot::default();
        self.snapshot_into(&mut s)?;
        Ok(s)
    }

    /// [`GlobalReader::snapshot`] into `out`, reusing its vectors.
    pub fn snapshot_into(&self, out: &mut GlobalSnapshot) -> Result<(), ViewError> {
        let ((), seq) = self.page.read(|layout, slots| {
            out.published_at_ns = load(slots, header::PUBLISHED_AT_NS);
            out.units.clear();
            out.units
                .extend((0..layout.n_units).map(|i| read_unit(slots, layout.unit_at(i))));
            out.kinds.clear();
            out.kinds.extend(
                (0..layout.n_cpu_kinds).map(|k| read_cpu_kind(slots, layout.cpu_kind_at(k))),
            );
        })?;
        out.seq = seq;
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn page(&self) -> &PageReader {
        &self.page
    }
}

pub(crate) fn check_len(what: &'static str, got: usize, expected: usize) -> Result<(), ViewError> {
    if got == expected {
        Ok(())
    } else {
        Err(ViewError::LengthMismatch {
            what,
            got,
            expected,
        })
    }
}

#[inline]
pub(crate) fn check_index(what: &'static str, index: usize, len: usize) -> Result<(), ViewError> {
    if index < len {
        Ok(())
    } else {
        Err(ViewError::OutOfRange { what, index, len })
    }
}

fn write_unit(slots: &[AtomicU64], at: usize, u: &GlobalUnit) {
    use global_unit::*;
    let r = &slots[at..at + SLOTS];
    store_f64(r, BUSY_FRACTION, u.view.busy_fraction);
    store_f64(r, AVG_TASK_NS, u.view.avg_task_ns);
    store(r, ACTIVE_CLIENTS, u.view.active_clients.into());
    store(r, QUEUED, u.view.queued.into());
    store(r, RUNNING, u.view.running.into());
    for (c, &q) in u.queued_by_class.iter().enumerate() {
        store(r, QUEUED_BY_CLASS + c, q.into());
    }
    store(r, BUSY_NS_TOTAL, u.busy_ns_total);
}

#[inline]
fn read_unit(slots: &[AtomicU64], at: usize) -> GlobalUnit {
    use global_unit::*;
    // One bounds check for the record; the field loads below index a
    // fixed-size array.
    let r: &[AtomicU64; SLOTS] = slots[at..at + SLOTS]
        .try_into()
        .expect("record slice has the record's length");
    // u32 fields hold zero-extended u32s; `as` keeps exactly those bits.
    GlobalUnit {
        view: UnitView {
            busy_fraction: load_f64(r, BUSY_FRACTION),
            avg_task_ns: load_f64(r, AVG_TASK_NS),
            active_clients: load(r, ACTIVE_CLIENTS) as u32,
            queued: load(r, QUEUED) as u32,
            running: load(r, RUNNING) as u32,
        },
        queued_by_class: [
            load(r, QUEUED_BY_CLASS) as u32,
            load(r, QUEUED_BY_CLASS + 1) as u32,
            load(r, QUEUED_BY_CLASS + 2) as u32,
        ],
        busy_ns_total: load(r, BUSY_NS_TOTAL),
    }
}

fn write_cpu_kind(slots: &[AtomicU64], at: usize, v: &CpuKindView) {
    use cpu_kind::*;
    let r = &slots[at..at + SLOTS];
    for n in 0..NICE_LEVELS {
        store(r, THREADS_BY_NICE + n, v.threads_by_nice[n].into());
        store_f64(r, TIME_RATIO_BY_NICE + n, v.time_ratio_by_nice[n]);
    }
    store(r, EXCLUSIVE_CORES_FREE, v.exclusive_cores_free.into());
}

fn read_cpu_kind(slots: &[AtomicU64], at: usize) -> CpuKindView {
    use cpu_kind::*;
    let r: &[AtomicU64; SLOTS] = slots[at..at + SLOTS]
        .try_into()
        .expect("record slice has the record's length");
    CpuKindView {
        threads_by_nice: std::array::from_fn(|n| load(r, THREADS_BY_NICE + n) as u32),
        time_ratio_by_nice: std::array::from_fn(|n| load_f64(r, TIME_RATIO_BY_NICE + n)),
        exclusive_cores_free: load(r, EXCLUSIVE_CORES_FREE) as u32,
    }
}
