//! Pegasus's accelerator selection (§3.2): before any of a domain's calls
//! are scheduled, the domain is *associated* with one accelerator, the one
//! of highest weight that can hold its memory. After that its calls go to
//! that unit's backend scheduler (the rest of [`crate::backend_policy`]).
//!
//! Each accelerator has a profile: static properties of the hardware
//! ([`StaticProfile`]: speed, streams, memory, copy bandwidth, how many
//! domains it takes at once) and dynamic ones ([`DynamicProfile`]: memory
//! the associated domains asked for, how many there are). [`weight`] turns
//! a profile into one number, and [`select`] picks the unit of highest
//! weight among those that fit. Pure: the daemon keeps the associations
//! and calls this with the profiles as they stand.

use crate::ids::UnitId;
use crate::unit::UnitClass;
use serde::{Deserialize, Serialize};

/// What an accelerator is, fixed while it runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StaticProfile {
    /// Throughput of one stream relative to one reference CPU core.
    pub speed: f64,
    /// Calls it runs at once at full speed.
    pub streams: u32,
    /// Device memory, bytes.
    pub memory_bytes: u64,
    /// Host → device copy bandwidth, bytes/s.
    pub bandwidth_bytes_per_s: f64,
    /// Most domains associated with it at once (Pegasus restricts how
    /// many domains share an accelerator, since a context switch there
    /// means swapping device memory over the interconnect).
    pub max_clients: u32,
}

/// What an accelerator carries now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicProfile {
    /// Memory the associated domains said they need, bytes.
    pub allocated_bytes: u64,
    /// Domains associated with it.
    pub clients: u32,
}

/// One accelerator as selection sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AcceleratorProfile {
    pub unit: UnitId,
    /// For error messages.
    pub name: String,
    pub class: UnitClass,
    pub fixed: StaticProfile,
    pub load: DynamicProfile,
}

impl AcceleratorProfile {
    /// Device memory not yet promised to an associated domain.
    pub fn free_bytes(&self) -> u64 {
        self.fixed
            .memory_bytes
            .saturating_sub(self.load.allocated_bytes)
    }

    fn at_cap(&self) -> bool {
        self.load.clients >= self.fixed.max_clients
    }
}

/// What a domain asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Need {
    /// Device memory it will allocate, bytes (0: none to speak of).
    pub memory_bytes: u64,
    /// Only units of this class (`None`: any accelerator).
    pub class: Option<UnitClass>,
}

/// The reference call [`weight`] rates a unit with: 1 ms of work on a
/// reference core, moving 1 MB to the device.
pub const REFERENCE_WORK_S: f64 = 1e-3;
/// Bytes copied in by the reference call.
pub const REFERENCE_BYTES: f64 = 1e6;

/// An accelerator's weight: the rate at which a domain joining it now
/// could expect its calls to be served, discounted as its memory fills.
///
/// ```text
/// rate     = 1 / (REFERENCE_WORK_S / speed + REFERENCE_BYTES / bandwidth)
/// share    = min(1, streams / (clients + 1))
/// headroom = 1/2 + 1/2 · free_memory / memory
/// weight   = rate · share · headroom          (reference calls per second)
/// ```
///
/// Why this form:
/// * `rate` combines compute speed and copy bandwidth the way they add up
///   in a call's time (work, then copy), so neither can make a unit look
///   fast on its own; the reference call is about what the emulated
///   devices' loads do per call.
/// * `share` is Pegasus's "the more an accelerator is used, the lower its
///   weight": with fair sharing (every backend policy is work-conserving
///   and gives every domain a turn) a newcomer gets `1 / (clients + 1)`
///   of a busy stream, or a whole stream while there are streams to spare.
/// * `headroom` counts memory already promised, the other dynamic part
///   of the profile: between units of similar rate, the one with more
///   memory left gets the domain, which leaves room for later big needs
///   and fewer device context swaps. It can at most halve the weight, so
///   a much faster unit is not passed over because it is fuller. Whether
///   the domain's own need fits is not part of the weight but a hard
///   condition in [`select`].
///
/// Always finite and ≥ 0 (a profile with a zero or non-finite figure
/// weighs 0, so it is chosen only when nothing else fits).
pub fn weight(p: &AcceleratorProfile) -> f64 {
    let f = &p.fixed;
    let call_s = REFERENCE_WORK_S / f.speed + REFERENCE_BYTES / f.bandwidth_bytes_per_s;
    let rate = 1.0 / call_s;
    let share = (f64::from(f.streams) / (f64::from(p.load.clients) + 1.0)).min(1.0);
    let headroom = if f.memory_bytes == 0 {
        0.5
    } else {
        0.5 + 0.5 * p.free_bytes() as f64 / f.memory_bytes as f64
    };
    let w = rate * share * headroom;
    if w.is_finite() && w > 0.0 { w } else { 0.0 }
}

/// Why a unit that could hold the need is not available now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Blocked {
    /// It has `max` domains associated already.
    AtCap { name: String, max: u32 },
    /// Other domains' memory leaves only `free` bytes.
    NoRoom { name: String, free: u64 },
}

impl std::fmt::Display for Blocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Blocked::AtCap { name, max } => write!(f, "{name} has its maximum of {max} clients"),
            Blocked::NoRoom { name, free } => write!(f, "{name} has {} free", Bytes(*free)),
        }
    }
}

/// Why no accelerator was selected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum SelectionError {
    /// There is no accelerator (of the class asked for) at all.
    #[error("{}", match .class {
        Some(c) => format!("there is no accelerator of class {}", c.name()),
        None => "there are no accelerators".to_string(),
    })]
    NoAccelerator { class: Option<UnitClass> },
    /// Even an empty unit would not hold the need: it never fits.
    #[error(
        "no accelerator has {} of memory: the largest, {largest_name}, has {}",
        Bytes(*need),
        Bytes(*largest)
    )]
    TooLarge {
        need: u64,
        largest: u64,
        largest_name: String,
    },
    /// Some units are large enough, but each is at its client cap or
    /// short of memory now; one may fit once a client leaves.
    #[error(
        "every accelerator large enough for {} is taken now ({}); try again when a client leaves",
        Bytes(*need),
        .blocked.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    Busy { need: u64, blocked: Vec<Blocked> },
}

/// Bytes for people: the largest binary unit that keeps a whole number
/// above 1, with one decimal.
struct Bytes(u64);

impl std::fmt::Display for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut v = self.0 as f64;
        let mut i = 0;
        while v >= 1024.0 && i + 1 < UNITS.len() {
            v /= 1024.0;
            i += 1;
        }
        if i == 0 {
            write!(f, "{} B", self.0)
        } else {
            write!(f, "{v:.1} {}", UNITS[i])
        }
    }
}

/// Whether `p` can take a domain with `need` now: its class, its free
/// memory and its client cap.
pub fn fits(p: &AcceleratorProfile, need: &Need) -> bool {
    need.class.is_none_or(|c| c == p.class) && p.free_bytes() >= need.memory_bytes && !p.at_cap()
}

/// The unit a domain with `need` is associated with: the highest
/// [`weight`] among those that [`fits`], the lowest unit id among equal
/// weights (so the same profiles always give the same answer).
pub fn select(profiles: &[AcceleratorProfile], need: &Need) -> Result<UnitId, SelectionError> {
    let mut of_class: Vec<&AcceleratorProfile> = profiles
        .iter()
        .filter(|p| need.class.is_none_or(|c| c == p.class))
        .collect();
    // In unit order, so an error lists the units the same way whatever
    // order the caller keeps them in.
    of_class.sort_by_key(|p| p.unit);
    let Some(largest) = of_class.iter().max_by(|a, b| {
        a.fixed
            .memory_bytes
            .cmp(&b.fixed.memory_bytes)
            .then(b.unit.cmp(&a.unit))
    }) else {
        return Err(SelectionError::NoAccelerator { class: need.class });
    };
    if largest.fixed.memory_bytes < need.memory_bytes {
        return Err(SelectionError::TooLarge {
            need: need.memory_bytes,
            largest: largest.fixed.memory_bytes,
            largest_name: largest.name.clone(),
        });
    }
    let best = of_class
        .iter()
        .filter(|p| fits(p, need))
        .map(|p| (weight(p), p.unit))
        // Highest weight; on a tie the lower id compares greater.
        .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
    match best {
        Some((_, unit)) => Ok(unit),
        None => Err(SelectionError::Busy {
            need: need.memory_bytes,
            blocked: of_class
                .iter()
                .filter(|p| p.fixed.memory_bytes >= need.memory_bytes)
                .map(|p| {
                    if p.at_cap() {
                        Blocked::AtCap {
                            name: p.name.clone(),
                            max: p.fixed.max_clients,
                        }
                    } else {
                        Blocked::NoRoom {
                            name: p.name.clone(),
                            free: p.free_bytes(),
                        }
                    }
                })
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn gpu(id: u16, speed: f64, memory_gib: u64) -> AcceleratorProfile {
        AcceleratorProfile {
            unit: UnitId(id),
            name: format!("gpu{id}"),
            class: UnitClass::Gpu,
            fixed: StaticProfile {
                speed,
                streams: 1,
                memory_bytes: memory_gib * GIB,
                bandwidth_bytes_per_s: 12e9,
                max_clients: 4,
            },
            load: DynamicProfile::default(),
        }
    }

    fn need(gib: u64) -> Need {
        Need {
            memory_bytes: gib * GIB,
            class: None,
        }
    }

    #[test]
    fn the_faster_unit_weighs_more_until_it_is_shared() {
        let fast = gpu(0, 8.0, 8);
        let mut slow = gpu(1, 4.0, 8);
        assert!(weight(&fast) > weight(&slow));
        assert_eq!(
            select(&[fast.clone(), slow.clone()], &need(1)),
            Ok(UnitId(0))
        );
        // One stream: two clients on the fast unit leave a newcomer a
        // third of it, less than the idle slow unit gives.
        let mut busy = fast.clone();
        busy.load.clients = 2;
        assert!(weight(&busy) < weight(&slow));
        assert_eq!(select(&[busy, slow.clone()], &need(1)), Ok(UnitId(1)));
        // Streams to spare: a second client costs a unit nothing.
        slow.fixed.streams = 2;
        let w0 = weight(&slow);
        slow.load.clients = 1;
        assert_eq!(weight(&slow), w0);
    }

    #[test]
    fn the_weight_follows_the_formula() {
        let mut p = gpu(0, 2.0, 4);
        p.fixed.bandwidth_bytes_per_s = 1e9;
        p.load.allocated_bytes = GIB;
        // 0.5 ms of work + 1 ms of copy = 1.5 ms per reference call.
        let rate = 1.0 / 1.5e-3;
        let headroom = 0.5 + 0.5 * 0.75;
        assert!((weight(&p) - rate * headroom).abs() < 1e-9);
        p.load.clients = 3;
        assert!((weight(&p) - rate * headroom / 4.0).abs() < 1e-9);
    }

    #[test]
    fn memory_headroom_decides_between_equal_units() {
        let mut a = gpu(0, 4.0, 8);
        let b = gpu(1, 4.0, 8);
        a.load.allocated_bytes = 2 * GIB;
        assert_eq!(select(&[a, b], &need(1)), Ok(UnitId(1)));
    }

    #[test]
    fn a_big_need_goes_to_the_unit_that_holds_it() {
        let fast_small = gpu(0, 8.0, 2);
        let slow_big = gpu(1, 4.0, 16);
        let both = [fast_small, slow_big];
        assert_eq!(select(&both, &need(1)), Ok(UnitId(0)));
        assert_eq!(select(&both, &need(4)), Ok(UnitId(1)));
    }

    #[test]
    fn ties_go_to_the_lowest_unit_id() {
        let units = [gpu(3, 4.0, 8), gpu(1, 4.0, 8), gpu(2, 4.0, 8)];
        assert_eq!(select(&units, &need(1)), Ok(UnitId(1)));
    }

    #[test]
    fn the_class_filters() {
        let mut acc = gpu(0, 16.0, 8);
        acc.class = UnitClass::Accelerator;
        let g = gpu(1, 1.0, 8);
        let want_gpu = Need {
            memory_bytes: 0,
            class: Some(UnitClass::Gpu),
        };
        assert_eq!(select(&[acc.clone(), g], &want_gpu), Ok(UnitId(1)));
        let e = select(&[acc], &want_gpu).unwrap_err();
        assert_eq!(
            e,
            SelectionError::NoAccelerator {
                class: Some(UnitClass::Gpu)
            }
        );
        assert_eq!(e.to_string(), "there is no accelerator of class gpu");
        assert!(matches!(
            select(&[], &need(0)),
            Err(SelectionError::NoAccelerator { class: None })
        ));
    }

    #[test]
    fn an_impossible_need_names_the_largest_unit() {
        let e = select(&[gpu(0, 8.0, 2), gpu(1, 4.0, 16)], &need(32)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no accelerator has 32.0 GiB of memory: the largest, gpu1, has 16.0 GiB"
        );
    }

    #[test]
    fn caps_and_allocations_block_with_a_reason() {
        let mut a = gpu(0, 8.0, 8);
        a.fixed.max_clients = 2;
        a.load.clients = 2;
        let mut b = gpu(1, 4.0, 8);
        b.load.allocated_bytes = 7 * GIB;
        b.load.clients = 1;
        let small = gpu(2, 4.0, 1);
        let e = select(&[a.clone(), b.clone(), small], &need(2)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "every accelerator large enough for 2.0 GiB is taken now (gpu0 has its maximum \
             of 2 clients, gpu1 has 1.0 GiB free); try again when a client leaves"
        );
        // A slot frees on the capped unit: it is chosen again.
        a.load.clients = 1;
        assert_eq!(select(&[a, b], &need(2)), Ok(UnitId(0)));
    }

    #[test]
    fn degenerate_profiles_weigh_zero_not_nan() {
        let mut p = gpu(0, 1.0, 0);
        p.fixed.bandwidth_bytes_per_s = 0.0;
        assert_eq!(weight(&p), 0.0);
        p.fixed.bandwidth_bytes_per_s = 1e9;
        p.fixed.streams = 0;
        assert_eq!(weight(&p), 0.0);
        // Still selectable for a need of nothing, when it is all there is.
        assert_eq!(select(&[p], &need(0)), Ok(UnitId(0)));
    }
}
