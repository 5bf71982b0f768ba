//! Emulated units declared in configuration.
//!
//! An emulated unit stands for a device this machine lacks (a GPU, a crypto
//! engine): the daemon serves its tasks on CPU threads, stretched to the
//! configured speed and copy cost. Its configuration *is* its calibration, so
//! every number is checked here, once, with an error that names the unit and
//! the field, instead of surfacing later as a NaN in a placement decision.

use crate::error::ConfigError;
use hetsched_core::ids::{KindId, Ns, UnitId};
use hetsched_core::unit::{Capabilities, LinkCost, Unit, UnitClass};
use serde::{Deserialize, Serialize};

/// Default fixed cost to launch one task on an emulated unit, in µs.
pub const DEFAULT_DISPATCH_US: f64 = 10.0;
/// Default power of an emulated unit while busy, in watts.
pub const DEFAULT_BUSY_WATTS: f64 = 25.0;
/// Default power of an emulated unit while idle, in watts.
pub const DEFAULT_IDLE_WATTS: f64 = 2.5;

/// One emulated unit as written in the configuration file.
///
/// ```toml
/// [[emulated]]
/// name = "gpu0"
/// kind = "fake-gpu"
/// class = "gpu"
/// speed = 8.0
/// copy_latency_us = 15
/// copy_gbps = 12
/// caps = ["fp64", "aes"]
/// streams = 4
/// memory_mb = 8192   # device memory, for accelerator selection
/// max_clients = 4    # clients associated with it at once
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmulatedUnitConfig {
    /// Unique unit name: non-empty, lowercase letters, digits, `_` and `-`.
    pub name: String,
    /// Kind name; units of one kind share a task model. Defaults to `name`.
    #[serde(default)]
    pub kind: Option<String>,
    /// `gpu`, `accelerator` or `emulated` (the default).
    #[serde(default = "default_class")]
    pub class: String,
    /// Throughput of one stream relative to one reference CPU core.
    pub speed: f64,
    /// Fixed latency of one copy in either direction, in µs.
    #[serde(default)]
    pub copy_latency_us: f64,
    /// Host → device bandwidth in GB/s (10⁹ bytes/s); also device → host
    /// unless `copy_out_gbps` is given.
    pub copy_gbps: f64,
    /// Device → host bandwidth in GB/s, when it differs from `copy_gbps`.
    #[serde(default)]
    pub copy_out_gbps: Option<f64>,
    /// Capability names (`aes`, `avx2`, `avx512`, `sha`, `fma`, `fp64`).
    #[serde(default)]
    pub caps: Vec<String>,
    /// Tasks the unit runs at once at full speed.
    #[serde(default = "default_streams")]
    pub streams: u32,
    /// Fixed cost to launch one task, in µs.
    #[serde(default = "default_dispatch_us")]
    pub dispatch_us: f64,
    /// Power while busy, in watts.
    #[serde(default = "default_busy_watts")]
    pub busy_watts: f64,
    /// Power while idle, in watts.
    #[serde(default = "default_idle_watts")]
    pub idle_watts: f64,
    /// Device memory, MiB. Accelerator selection associates a client only
    /// with a unit whose memory not yet promised to others holds what the
    /// client says it needs.
    #[serde(default = "default_memory_mb")]
    pub memory_mb: u64,
    /// Most clients associated with the unit at once by accelerator
    /// selection (Pegasus caps the domains sharing an accelerator).
    #[serde(default = "default_max_clients")]
    pub max_clients: u32,
}

/// Default device memory of an emulated unit, MiB.
pub const DEFAULT_MEMORY_MB: u64 = 4096;
/// Default cap on clients associated with one emulated unit.
pub const DEFAULT_MAX_CLIENTS: u32 = 8;

fn default_memory_mb() -> u64 {
    DEFAULT_MEMORY_MB
}
fn default_max_clients() -> u32 {
    DEFAULT_MAX_CLIENTS
}

fn default_class() -> String {
    UnitClass::Emulated.name().to_string()
}
fn default_streams() -> u32 {
    1
}
fn default_dispatch_us() -> f64 {
    DEFAULT_DISPATCH_US
}
fn default_busy_watts() -> f64 {
    DEFAULT_BUSY_WATTS
}
fn default_idle_watts() -> f64 {
    DEFAULT_IDLE_WATTS
}

/// Classes an emulated unit may claim. `cpu` is left out: CPU units come from
/// discovery, and a configured one would double-count the cores serving it.
const ALLOWED_CLASSES: [UnitClass; 3] =
    [UnitClass::Gpu, UnitClass::Accelerator, UnitClass::Emulated];

/// Whether `s` is usable as a unit or kind name: it ends up in socket
/// messages, file names and command lines, so it is kept to a safe alphabet.
pub fn is_valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

impl EmulatedUnitConfig {
    /// A unit with the given name, kind and speed, default class and costs.
    pub fn new(name: &str, kind: &str, speed: f64, copy_gbps: f64) -> Self {
        EmulatedUnitConfig {
            name: name.to_string(),
            kind: Some(kind.to_string()),
            class: default_class(),
            speed,
            copy_latency_us: 0.0,
            copy_gbps,
            copy_out_gbps: None,
            caps: Vec::new(),
            streams: default_streams(),
            dispatch_us: DEFAULT_DISPATCH_US,
            busy_watts: DEFAULT_BUSY_WATTS,
            idle_watts: DEFAULT_IDLE_WATTS,
            memory_mb: DEFAULT_MEMORY_MB,
            max_clients: DEFAULT_MAX_CLIENTS,
        }
    }

    /// Device memory, bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_mb.saturating_mul(1 << 20)
    }

    /// The kind name: `kind` when given, otherwise the unit's name.
    pub fn kind_name(&self) -> &str {
        self.kind.as_deref().unwrap_or(&self.name)
    }

    fn invalid(&self, field: &'static str, reason: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            unit: self.name.clone(),
            field,
            reason: reason.into(),
        }
    }

    /// The unit class, refusing `cpu` and unknown names.
    pub fn unit_class(&self) -> Result<UnitClass, ConfigError> {
        UnitClass::parse(&self.class)
            .filter(|c| ALLOWED_CLASSES.contains(c))
            .ok_or_else(|| {
                let allowed: Vec<_> = ALLOWED_CLASSES.iter().map(|c| c.name()).collect();
                self.invalid(
                    "class",
                    format!(
                        "is `{}`; an emulated unit's class must be one of: {}",
                        self.class,
                        allowed.join(", ")
                    ),
                )
            })
    }

    /// The capability bits, refusing unknown names.
    pub fn capabilities(&self) -> Result<Capabilities, ConfigError> {
        self.caps
            .iter()
            .try_fold(Capabilities::empty(), |acc, name| {
                let cap = Capabilities::parse_name(name).ok_or_else(|| {
                    let valid = Capabilities(u64::MAX).names().join(", ");
                    self.invalid(
                        "caps",
                        format!("names unknown capability `{name}`; valid names are: {valid}"),
                    )
                })?;
                Ok(acc.union(cap))
            })
    }

    /// Checks every field; the first problem found is returned.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !is_valid_name(&self.name) {
            return Err(ConfigError::Invalid {
                unit: format!("{:?}", self.name),
                field: "name",
                reason: "must be non-empty and use only a-z, 0-9, `_` and `-`".to_string(),
            });
        }
        if !is_valid_name(self.kind_name()) {
            return Err(self.invalid(
                "kind",
                format!(
                    "is {:?}; must be non-empty and use only a-z, 0-9, `_` and `-`",
                    self.kind_name()
                ),
            ));
        }
        self.unit_class()?;
        self.capabilities()?;
        self.positive("speed", self.speed)?;
        self.non_negative("copy_latency_us", self.copy_latency_us)?;
        self.positive("copy_gbps", self.copy_gbps)?;
        if let Some(out) = self.copy_out_gbps {
            self.positive("copy_out_gbps", out)?;
        }
        if self.streams == 0 {
            return Err(self.invalid("streams", "is 0; a unit needs at least one stream"));
        }
        self.non_negative("dispatch_us", self.dispatch_us)?;
        self.non_negative("busy_watts", self.busy_watts)?;
        self.non_negative("idle_watts", self.idle_watts)?;
        if self.memory_mb == 0 {
            return Err(self.invalid("memory_mb", "is 0; a unit needs some device memory"));
        }
        if self.max_clients == 0 {
            return Err(self.invalid(
                "max_clients",
                "is 0; at least one client must be able to use the unit",
            ));
        }
        if self.idle_watts > self.busy_watts {
            return Err(self.invalid(
                "idle_watts",
                format!(
                    "is {} W, above busy_watts ({} W); a unit cannot draw more idle than busy",
                    self.idle_watts, self.busy_watts
                ),
            ));
        }
        Ok(())
    }

    fn positive(&self, field: &'static str, v: f64) -> Result<(), ConfigError> {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            Err(self.invalid(field, format!("is {v}; it must be a finite number > 0")))
        }
    }

    fn non_negative(&self, field: &'static str, v: f64) -> Result<(), ConfigError> {
        if v.is_finite() && v >= 0.0 {
            Ok(())
        } else {
            Err(self.invalid(field, format!("is {v}; it must be a finite number >= 0")))
        }
    }

    /// Validates and builds the core [`Unit`] with the given ids.
    pub fn to_unit(&self, id: UnitId, kind: KindId) -> Result<Unit, ConfigError> {
        self.validate()?;
        let latency = us_to_ns(self.copy_latency_us);
        let copy_in = LinkCost::new(latency, self.copy_gbps * 1e9);
        let copy_out = LinkCost::new(latency, self.copy_out_gbps.unwrap_or(self.copy_gbps) * 1e9);
        Ok(Unit {
            id,
            name: self.name.clone(),
            kind,
            class: self.unit_class()?,
            caps: self.capabilities()?,
            relative_speed: self.speed,
            coherent: false,
            copy_in,
            copy_out,
            dispatch_ns: us_to_ns(self.dispatch_us),
            slots: self.streams,
            busy_watts: self.busy_watts,
            idle_watts: self.idle_watts,
        })
    }
}

/// Microseconds (validated finite and ≥ 0) to whole nanoseconds; `as`
/// saturates absurdly large values instead of wrapping.
fn us_to_ns(us: f64) -> Ns {
    (us * 1e3).round() as Ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(is_valid_name("gpu-0_a"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("GPU"));
        assert!(!is_valid_name("gpu 0"));
    }

    #[test]
    fn defaults_fill_in() {
        let c: EmulatedUnitConfig =
            serde_json::from_str(r#"{"name":"acc","speed":2.0,"copy_gbps":4.0}"#).unwrap();
        let u = c.to_unit(UnitId(3), KindId(1)).unwrap();
        assert_eq!(c.kind_name(), "acc");
        assert_eq!(u.class, UnitClass::Emulated);
        assert_eq!(u.slots, 1);
        assert_eq!(u.dispatch_ns, 10_000);
        assert_eq!(u.copy_in, u.copy_out);
        assert!((u.copy_in.bytes_per_s() - 4e9).abs() < 1.0);
    }

    #[test]
    fn copy_out_overrides() {
        let mut c = EmulatedUnitConfig::new("g", "g", 1.0, 10.0);
        c.copy_out_gbps = Some(5.0);
        c.copy_latency_us = 2.5;
        let u = c.to_unit(UnitId(0), KindId(0)).unwrap();
        assert_eq!(u.copy_in.latency_ns, 2_500);
        assert!((u.copy_out.bytes_per_s() - 5e9).abs() < 1.0);
    }

    #[test]
    fn cpu_class_refused() {
        let mut c = EmulatedUnitConfig::new("g", "g", 1.0, 10.0);
        c.class = "cpu".into();
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("`class`") && e.contains("gpu, accelerator, emulated"),
            "{e}"
        );
    }

    #[test]
    fn memory_and_client_cap_default_and_are_checked() {
        let c: EmulatedUnitConfig =
            serde_json::from_str(r#"{"name":"acc","speed":2.0,"copy_gbps":4.0}"#).unwrap();
        assert_eq!((c.memory_mb, c.max_clients), (4096, 8));
        assert_eq!(c.memory_bytes(), 4096 << 20);
        let mut c = EmulatedUnitConfig::new("g", "g", 1.0, 10.0);
        c.memory_mb = 0;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("memory_mb"), "{e}");
        c.memory_mb = 1;
        c.max_clients = 0;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("max_clients"), "{e}");
    }

    #[test]
    fn idle_above_busy_refused() {
        let mut c = EmulatedUnitConfig::new("g", "g", 1.0, 10.0);
        c.idle_watts = 30.0;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("idle_watts"), "{e}");
    }
}
