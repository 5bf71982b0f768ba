//! Byte layout of the two pages (layout version [`LAYOUT_VERSION`]).
//!
//! A page is an array of little-endian 64-bit slots (`AtomicU64`), 8-byte
//! aligned (the mapping is page-aligned). Slot `i` is at byte offset `8 * i`.
//! Every value takes one whole slot:
//!
//! * `u32` / `u64` values are stored zero-extended;
//! * `f64` values are stored as their IEEE-754 bits (`f64::to_bits`), so
//!   infinities and NaNs round-trip exactly;
//! * `bool` is `0` or `1` (a reader takes any non-zero value as `true`).
//!
//! The file (memfd) is exactly `8 * total_slots` bytes; a reader rejects an
//! fd of any other size.
//!
//! # Header (both pages, slots 0..8)
//!
//! | slot | name | meaning |
//! |---:|---|---|
//! | 0 | `magic` | [`GLOBAL_MAGIC`] (`"HSGLOBAL"`) or [`PRIVATE_MAGIC`] (`"HSPRIVAT"`), ASCII as a little-endian `u64` |
//! | 1 | `version` | [`LAYOUT_VERSION`] |
//! | 2 | `n_units` | units on the page, `0..=`[`MAX_UNITS`] |
//! | 3 | `n_cpu_kinds` | CPU kinds on the page, `0..=`[`MAX_CPU_KINDS`] |
//! | 4 | `seq` | seqlock sequence: odd while a publish is in progress, `0` before the first publish, `+2` per publish |
//! | 5 | `published_at_ns` | writer's clock (ns, `CLOCK_MONOTONIC` in the daemon) at the last publish; under the seqlock |
//! | 6 | `client_id` | private page: the client the page belongs to; global page: `0`. Under the seqlock |
//! | 7 | reserved | `0` |
//!
//! Slots 0–3 and 7 are written once, before the fd is sealed and shared, and
//! never change. Everything from slot 5 on is written only inside a seqlock
//! publish.
//!
//! # Global page payload
//!
//! `n_units` unit records of [`global_unit::SLOTS`] = 9 slots from slot 8,
//! then `n_cpu_kinds` CPU-kind records of [`cpu_kind::SLOTS`] = 81 slots.
//! Unit `u` starts at slot `8 + 9u`; CPU kind `k` at `8 + 9·n_units + 81k`.
//! Total: `8 + 9·n_units + 81·n_cpu_kinds` slots.
//!
//! | unit slot | field | type |
//! |---:|---|---|
//! | +0 | `view.busy_fraction` | f64 |
//! | +1 | `view.avg_task_ns` | f64 |
//! | +2 | `view.active_clients` | u32 |
//! | +3 | `view.queued` | u32 |
//! | +4 | `view.running` | u32 |
//! | +5 | `queued_by_class[0]` (CUSTOM) | u32 |
//! | +6 | `queued_by_class[1]` (NORMAL) | u32 |
//! | +7 | `queued_by_class[2]` (BACKGROUND) | u32 |
//! | +8 | `busy_ns_total` | u64 |
//!
//! | CPU-kind slot | field | type |
//! |---:|---|---|
//! | +0 ..= +39 | `threads_by_nice[n + 20]` for nice `n` in `-20..=19` | u32 |
//! | +40 ..= +79 | `time_ratio_by_nice[n + 20]` | f64 |
//! | +80 | `exclusive_cores_free` | u32 |
//!
//! # Private page payload
//!
//! `n_units` unit records of [`private_unit::SLOTS`] = 6 slots from slot 8,
//! then one slot per CPU kind, then one tail slot. Unit `u` starts at slot
//! `8 + 6u`; CPU kind `k`'s slot is `8 + 6·n_units + k`; the tail is at
//! `8 + 6·n_units + n_cpu_kinds`. Total: `8 + 6·n_units + n_cpu_kinds + 1`
//! slots.
//!
//! | unit slot | field | type |
//! |---:|---|---|
//! | +0 | `guaranteed` | f64 |
//! | +1 | `wait_ns` | f64 (may be `+inf`) |
//! | +2 | `current_utilisation` | f64 |
//! | +3 | `throttled` | bool |
//! | +4 | `max_utilisation` | f64 |
//! | +5 | `target_fraction`: proportional-fair coordination, the fraction of this client's calls the unit should run; NaN when there is no target | f64 |
//!
//! | CPU-kind slot | field | type |
//! |---:|---|---|
//! | +0 | `exclusive_cores` (cores this client may use exclusively under min-funding) | u32 |
//!
//! | tail slot | field | type |
//! |---:|---|---|
//! | +0 | `target_rate`: calls per second the coordinated allocation gives this client (what it paces itself to); NaN when there are no targets | f64 |
//!
//! # Seqlock protocol
//!
//! Writer (one per page): store `seq + 1` (odd), release fence, store the
//! payload slots and `published_at_ns` (relaxed), store `seq + 2` (even) with
//! release ordering. Reader: load `seq` then acquire fence; if odd, retry;
//! load the wanted slots (relaxed); acquire fence; load `seq` again; if it
//! changed, retry. Readers only ever *load* (the mapping is read-only), with
//! relaxed loads and explicit fences.

use std::fmt;

/// Version of the layout above. Bumped on any change to slot meaning or order.
pub const LAYOUT_VERSION: u64 = 2;

/// `"HSGLOBAL"` as a little-endian `u64`.
pub const GLOBAL_MAGIC: u64 = u64::from_le_bytes(*b"HSGLOBAL");
/// `"HSPRIVAT"` as a little-endian `u64`.
pub const PRIVATE_MAGIC: u64 = u64::from_le_bytes(*b"HSPRIVAT");

/// Most units a page may declare (unit ids are `u16`; a machine has far fewer).
pub const MAX_UNITS: usize = 4096;
/// Most CPU kinds a page may declare.
pub const MAX_CPU_KINDS: usize = 64;

/// Nice levels CFS knows: -20..=19 (a CPU-kind record has slots for each).
pub const NICE_LEVELS: usize = 40;

/// Header slot indices.
pub mod header {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 1;
    pub const N_UNITS: usize = 2;
    pub const N_CPU_KINDS: usize = 3;
    pub const SEQ: usize = 4;
    pub const PUBLISHED_AT_NS: usize = 5;
    pub const CLIENT_ID: usize = 6;
    pub const RESERVED: usize = 7;
    /// Slots in the header; the payload starts here.
    pub const SLOTS: usize = 8;
}

/// Slot offsets inside one global-page unit record.
pub mod global_unit {
    pub const BUSY_FRACTION: usize = 0;
    pub const AVG_TASK_NS: usize = 1;
    pub const ACTIVE_CLIENTS: usize = 2;
    pub const QUEUED: usize = 3;
    pub const RUNNING: usize = 4;
    /// First of three: CUSTOM, NORMAL, BACKGROUND.
    pub const QUEUED_BY_CLASS: usize = 5;
    pub const BUSY_NS_TOTAL: usize = 8;
    pub const SLOTS: usize = 9;
}

/// Slot offsets inside one global-page CPU-kind record.
pub mod cpu_kind {
    use super::NICE_LEVELS;
    /// First of [`NICE_LEVELS`], nice -20 first.
    pub const THREADS_BY_NICE: usize = 0;
    /// First of [`NICE_LEVELS`], nice -20 first.
    pub const TIME_RATIO_BY_NICE: usize = NICE_LEVELS;
    pub const EXCLUSIVE_CORES_FREE: usize = 2 * NICE_LEVELS;
    pub const SLOTS: usize = 2 * NICE_LEVELS + 1;
}

/// Slot offsets inside one private-page unit record.
pub mod private_unit {
    pub const GUARANTEED: usize = 0;
    pub const WAIT_NS: usize = 1;
    pub const CURRENT_UTILISATION: usize = 2;
    pub const THROTTLED: usize = 3;
    pub const MAX_UTILISATION: usize = 4;
    pub const TARGET_FRACTION: usize = 5;
    pub const SLOTS: usize = 6;
}

/// Slot offsets in the private page's tail (after the CPU-kind records).
pub mod private_tail {
    pub const TARGET_RATE: usize = 0;
    pub const SLOTS: usize = 1;
}

/// Slot offsets inside one private-page CPU-kind record.
pub mod private_cpu_kind {
    pub const EXCLUSIVE_CORES: usize = 0;
    pub const SLOTS: usize = 1;
}

/// Which of the two pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageKind {
    Global,
    Private,
}

impl fmt::Display for PageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PageKind::Global => "global",
            PageKind::Private => "private",
        })
    }
}

impl PageKind {
    pub const fn magic(self) -> u64 {
        match self {
            PageKind::Global => GLOBAL_MAGIC,
            PageKind::Private => PRIVATE_MAGIC,
        }
    }

    const fn unit_slots(self) -> usize {
        match self {
            PageKind::Global => global_unit::SLOTS,
            PageKind::Private => private_unit::SLOTS,
        }
    }

    const fn tail_slots(self) -> usize {
        match self {
            PageKind::Global => 0,
            PageKind::Private => private_tail::SLOTS,
        }
    }

    const fn cpu_kind_slots(self) -> usize {
        match self {
            PageKind::Global => cpu_kind::SLOTS,
            PageKind::Private => private_cpu_kind::SLOTS,
        }
    }
}

/// Where things are on one page of given counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub kind: PageKind,
    pub n_units: usize,
    pub n_cpu_kinds: usize,
}

impl Layout {
    /// `None` when the counts exceed [`MAX_UNITS`] / [`MAX_CPU_KINDS`].
    pub fn new(kind: PageKind, n_units: usize, n_cpu_kinds: usize) -> Option<Self> {
        (n_units <= MAX_UNITS && n_cpu_kinds <= MAX_CPU_KINDS).then_some(Layout {
            kind,
            n_units,
            n_cpu_kinds,
        })
    }

    #[inline]
    pub fn unit_at(&self, i: usize) -> usize {
        header::SLOTS + i * self.kind.unit_slots()
    }

    #[inline]
    pub fn cpu_kind_at(&self, k: usize) -> usize {
        self.unit_at(self.n_units) + k * self.kind.cpu_kind_slots()
    }

    /// The private page's tail (its end on the global page, which has none).
    #[inline]
    pub fn tail_at(&self) -> usize {
        self.cpu_kind_at(self.n_cpu_kinds)
    }

    pub fn total_slots(&self) -> usize {
        self.tail_at() + self.kind.tail_slots()
    }

    pub fn bytes(&self) -> usize {
        self.total_slots() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_match_the_documented_table() {
        let g = Layout::new(PageKind::Global, 3, 2).unwrap();
        assert_eq!(g.unit_at(0), 8);
        assert_eq!(g.unit_at(2), 8 + 18);
        assert_eq!(g.cpu_kind_at(0), 8 + 27);
        assert_eq!(g.cpu_kind_at(1), 8 + 27 + 81);
        assert_eq!(g.total_slots(), 8 + 27 + 162);
        let p = Layout::new(PageKind::Private, 3, 2).unwrap();
        assert_eq!(p.cpu_kind_at(1), 8 + 18 + 1);
        assert_eq!(p.tail_at(), 8 + 18 + 2);
        assert_eq!(p.bytes(), (8 + 18 + 2 + 1) * 8);
        assert_eq!(&GLOBAL_MAGIC.to_le_bytes(), b"HSGLOBAL");
        assert!(Layout::new(PageKind::Global, MAX_UNITS + 1, 0).is_none());
    }
}
