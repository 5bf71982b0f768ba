//! Processing units and the machine they form.

use crate::ids::{KindId, Ns, UnitId, ns_as_f64};
use serde::{Deserialize, Serialize};

/// What sort of processing unit this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnitClass {
    /// A set of CPU cores of one kind (big, little, an emulated slow core …).
    Cpu,
    /// A GPU.
    Gpu,
    /// A fixed-function or other accelerator.
    Accelerator,
    /// A unit hetsched emulates in software (speed, copy cost and capabilities from config).
    Emulated,
}

impl UnitClass {
    pub const ALL: [UnitClass; 4] = [Self::Cpu, Self::Gpu, Self::Accelerator, Self::Emulated];

    pub fn name(self) -> &'static str {
        match self {
            Self::Cpu => "cpu",
            Self::Gpu => "gpu",
            Self::Accelerator => "accelerator",
            Self::Emulated => "emulated",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// Capability bits: ISA features of a CPU kind or functions of an accelerator.
/// Kinship's functional asymmetry matches these against what a thread needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Capabilities(pub u64);

impl Capabilities {
    pub const AES: Capabilities = Capabilities(1 << 0);
    pub const AVX2: Capabilities = Capabilities(1 << 1);
    pub const AVX512: Capabilities = Capabilities(1 << 2);
    pub const SHA: Capabilities = Capabilities(1 << 3);
    pub const FMA: Capabilities = Capabilities(1 << 4);
    pub const FP64: Capabilities = Capabilities(1 << 5);

    const NAMES: [(&'static str, Capabilities); 6] = [
        ("aes", Self::AES),
        ("avx2", Self::AVX2),
        ("avx512", Self::AVX512),
        ("sha", Self::SHA),
        ("fma", Self::FMA),
        ("fp64", Self::FP64),
    ];

    pub fn empty() -> Self {
        Capabilities(0)
    }

    pub fn contains(self, other: Capabilities) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn union(self, other: Capabilities) -> Capabilities {
        Capabilities(self.0 | other.0)
    }

    /// Parses a capability name (`"aes"`, `"avx512"` …).
    pub fn parse_name(name: &str) -> Option<Capabilities> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| *c)
    }

    /// The names of the set bits, in a stable order.
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMES
            .iter()
            .filter(|(_, c)| self.contains(*c))
            .map(|(n, _)| *n)
            .collect()
    }
}

/// Cost of moving data over one direction of a link: `latency + bytes / bandwidth`.
/// Kept as nanoseconds per byte so the placement hot path multiplies
/// instead of dividing.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkCost {
    pub latency_ns: Ns,
    pub ns_per_byte: f64,
}

impl LinkCost {
    /// A link that costs nothing (coherent memory).
    pub const FREE: LinkCost = LinkCost {
        latency_ns: 0,
        ns_per_byte: 0.0,
    };

    /// A link with the given latency and bandwidth (bytes per second).
    pub fn new(latency_ns: Ns, bytes_per_s: f64) -> Self {
        LinkCost {
            latency_ns,
            ns_per_byte: 1e9 / bytes_per_s,
        }
    }

    pub fn bytes_per_s(&self) -> f64 {
        1e9 / self.ns_per_byte
    }

    /// Time to move `bytes` over this link, in nanoseconds (fractional).
    #[inline]
    pub fn time_ns(&self, bytes: u64) -> f64 {
        if bytes == 0 {
            return 0.0;
        }
        ns_as_f64(self.latency_ns) + bytes as f64 * self.ns_per_byte
    }
}

/// One schedulable processing unit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unit {
    pub id: UnitId,
    /// Human name, unique in the machine (`"cpu"`, `"gpu-b"`).
    pub name: String,
    pub kind: KindId,
    pub class: UnitClass,
    pub caps: Capabilities,
    /// Throughput relative to one reference CPU core (1.0), for generic work.
    pub relative_speed: f64,
    /// Whether the unit reads host memory coherently (no copies needed).
    pub coherent: bool,
    /// Host → unit copy cost (ignored when `coherent`).
    pub copy_in: LinkCost,
    /// Unit → host copy cost (ignored when `coherent`).
    pub copy_out: LinkCost,
    /// Fixed cost to launch one task on the unit.
    pub dispatch_ns: Ns,
    /// How many tasks the unit runs at once at full speed (cores, streams).
    pub slots: u32,
    /// Power drawn while busy and while idle, for the energy goal.
    pub busy_watts: f64,
    pub idle_watts: f64,
}

impl Unit {
    /// A unit with one slot, no power figures, no dispatch cost and the
    /// same link both ways; coherent units are CPUs (their link unused),
    /// the others GPUs. For tests and tools that care only about ids,
    /// kinds and copies; set other fields with struct update syntax.
    pub fn basic(id: UnitId, kind: KindId, coherent: bool, link: LinkCost) -> Unit {
        Unit {
            id,
            name: format!("u{}", id.0),
            kind,
            class: if coherent {
                UnitClass::Cpu
            } else {
                UnitClass::Gpu
            },
            caps: Capabilities::empty(),
            relative_speed: 1.0,
            coherent,
            copy_in: link,
            copy_out: link,
            dispatch_ns: 0,
            slots: 1,
            busy_watts: 0.0,
            idle_watts: 0.0,
        }
    }

    /// Time to bring `bytes` from host memory to this unit.
    #[inline]
    pub fn copy_in_ns(&self, bytes: u64) -> f64 {
        if self.coherent {
            0.0
        } else {
            self.copy_in.time_ns(bytes)
        }
    }

    /// Time to bring `bytes` from this unit back to host memory.
    #[inline]
    pub fn copy_out_ns(&self, bytes: u64) -> f64 {
        if self.coherent {
            0.0
        } else {
            self.copy_out.time_ns(bytes)
        }
    }
}

/// A kind of unit: the key of task models.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindInfo {
    pub id: KindId,
    pub name: String,
    pub class: UnitClass,
}

/// The set of units one monitor manages.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub units: Vec<Unit>,
    pub kinds: Vec<KindInfo>,
}

impl Machine {
    pub fn unit(&self, id: UnitId) -> &Unit {
        &self.units[id.index()]
    }

    pub fn unit_by_name(&self, name: &str) -> Option<&Unit> {
        self.units.iter().find(|u| u.name == name)
    }

    pub fn kind_by_name(&self, name: &str) -> Option<&KindInfo> {
        self.kinds.iter().find(|k| k.name == name)
    }

    /// Adds a kind if no kind of that name exists and returns its id.
    pub fn intern_kind(&mut self, name: &str, class: UnitClass) -> KindId {
        if let Some(k) = self.kind_by_name(name) {
            return k.id;
        }
        let id = KindId(self.kinds.len() as u16);
        self.kinds.push(KindInfo {
            id,
            name: name.to_string(),
            class,
        });
        id
    }
}
