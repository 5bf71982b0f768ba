//! The platform: discovered CPU kinds plus configured emulated units, as one
//! [`Machine`] for the policy layer, with the PU lists the executors pin to.

use crate::calibrate::{self, Calibration, CalibrationOptions, Fingerprint};
use crate::cpu::{self, CpuInfo, CpuKind, CpuTopology, SpeedBasis};
use crate::emulated::EmulatedUnitConfig;
use crate::error::{ConfigError, PlatformError};
use crate::slow_cores::SlowCoreConfig;
use hetsched_core::ids::{KindId, UnitId};
use hetsched_core::unit::{LinkCost, Machine, Unit, UnitClass};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Rough power model of one CPU core until the observation layer fits one:
/// busy watts per core at relative speed 1.0, and idle watts per core.
const CPU_BUSY_WATTS_PER_CORE: f64 = 5.0;
const CPU_IDLE_WATTS_PER_CORE: f64 = 0.5;

/// What to discover and where to keep the calibration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlatformConfig {
    /// Emulated units, added after the CPU units.
    pub emulated: Vec<EmulatedUnitConfig>,
    /// Whether to discover the CPUs (off for a machine of emulated units only).
    pub include_cpus: bool,
    /// JSON file holding the CPU calibration; measured afresh when `None`.
    pub calibration_cache: Option<PathBuf>,
    /// CPUs split off into emulated slow kinds (see [`crate::slow_cores`]).
    pub slow_cores: Vec<SlowCoreConfig>,
}

impl Default for PlatformConfig {
    fn default() -> Self {
        PlatformConfig {
            emulated: Vec::new(),
            include_cpus: true,
            calibration_cache: None,
            slow_cores: Vec::new(),
        }
    }
}

/// Where the CPU units' dispatch figures came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CalibrationOrigin {
    /// Not calibrated (no CPU units, or not yet).
    None,
    /// Measured by this process.
    Measured,
    /// Read from the cache file.
    Cache(PathBuf),
}

/// Everything discovery found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Platform {
    /// Units for the policy layer: CPU kinds first (ids 0..), emulated after.
    pub machine: Machine,
    /// Every PU, ascending by OS index (empty when CPUs are not included).
    pub cpus: Vec<CpuInfo>,
    /// CPU kinds, slowest first; kind `i` is unit `i` and kind id `i`.
    pub cpu_kinds: Vec<CpuKind>,
    /// What CPU speeds were derived from.
    pub speed_basis: SpeedBasis,
    /// The CPU calibration in force, if any.
    pub calibration: Option<Calibration>,
    pub calibration_origin: CalibrationOrigin,
    /// Warnings worth showing an operator (hwloc unavailable, cache unusable …).
    pub notes: Vec<String>,
    /// Where [`calibrate()`] writes its results.
    #[serde(skip)]
    pub calibration_cache: Option<PathBuf>,
}

fn unit_id(i: usize) -> Result<UnitId, PlatformError> {
    u16::try_from(i)
        .map(UnitId)
        .map_err(|_| PlatformError::TooManyUnits(i + 1))
}

impl Platform {
    /// Builds the platform from discovered CPUs and emulated unit configs,
    /// without calibrating. Fails on the first invalid or clashing unit.
    pub fn assemble(
        cpus: CpuTopology,
        emulated: &[EmulatedUnitConfig],
    ) -> Result<Platform, PlatformError> {
        for e in emulated {
            e.validate()?;
        }
        let mut machine = Machine::default();
        for k in &cpus.kinds {
            let kind = machine.intern_kind(&k.name, UnitClass::Cpu);
            let id = unit_id(machine.units.len())?;
            debug_assert_eq!((kind, id), (k.kind, k.unit));
            let slots = u32::try_from(k.os_indices.len()).unwrap_or(u32::MAX);
            machine.units.push(Unit {
                id,
                name: k.name.clone(),
                kind,
                class: UnitClass::Cpu,
                caps: k.caps,
                relative_speed: k.relative_speed,
                coherent: true,
                copy_in: LinkCost::FREE,
                copy_out: LinkCost::FREE,
                dispatch_ns: 0,
                slots,
                busy_watts: CPU_BUSY_WATTS_PER_CORE * k.relative_speed * f64::from(slots),
                idle_watts: CPU_IDLE_WATTS_PER_CORE * f64::from(slots),
            });
        }
        for e in emulated {
            if machine.unit_by_name(&e.name).is_some() {
                return Err(ConfigError::DuplicateName {
                    name: e.name.clone(),
                }
                .into());
            }
            let class = e.unit_class()?;
            if machine.kinds.len() >= usize::from(u16::MAX) {
                return Err(PlatformError::TooManyUnits(machine.units.len() + 1));
            }
            let kind = machine.intern_kind(e.kind_name(), class);
            let existing = machine.kinds[kind.index()].class;
            if existing != class {
                return Err(ConfigError::KindClassClash {
                    unit: e.name.clone(),
                    kind: e.kind_name().to_string(),
                    existing: existing.name(),
                    requested: class.name(),
                }
                .into());
            }
            let id = unit_id(machine.units.len())?;
            machine.units.push(e.to_unit(id, kind)?);
        }
        Ok(Platform {
            machine,
            cpus: cpus.cpus,
            cpu_kinds: cpus.kinds,
            speed_basis: cpus.speed_basis,
            calibration: None,
            calibration_origin: CalibrationOrigin::None,
            notes: cpus.notes,
            calibration_cache: None,
        })
    }

    /// OS indices of the PUs of CPU kind `kind` (`None` for non-CPU kinds).
    pub fn cpus_of_kind(&self, kind: KindId) -> Option<&[usize]> {
        self.cpu_kinds
            .iter()
            .find(|k| k.kind == kind)
            .map(|k| k.os_indices.as_slice())
    }

    /// Each CPU kind with the OS indices of its PUs, for pinning worker
    /// pools and balancer threads per kind.
    pub fn cpu_kind_units(&self) -> impl Iterator<Item = (KindId, &[usize])> {
        self.cpu_kinds
            .iter()
            .map(|k| (k.kind, k.os_indices.as_slice()))
    }

    /// The fingerprint a calibration of this platform's CPUs must carry.
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.cpu_kinds)
    }

    /// Puts a calibration in force: each CPU unit takes its kind's dispatch
    /// figure. Kinds the calibration lacks keep their current figure.
    pub fn apply_calibration(&mut self, cal: Calibration, origin: CalibrationOrigin) {
        for k in &self.cpu_kinds {
            if let Some(kc) = cal.kind(&k.name) {
                self.machine.units[k.unit.index()].dispatch_ns = kc.dispatch_ns;
            }
        }
        self.calibration = Some(cal);
        self.calibration_origin = origin;
    }
}

/// Discovers the CPUs (unless `include_cpus` is off), adds the emulated
/// units, and calibrates: from the cache when it fits this machine,
/// otherwise by measuring (and then refreshing the cache).
pub fn discover(config: &PlatformConfig) -> Result<Platform, PlatformError> {
    for e in &config.emulated {
        e.validate()?;
    }
    let cpus = if config.include_cpus {
        let mut topo = cpu::discover_cpus();
        crate::slow_cores::apply_slow_cores(&mut topo, &config.slow_cores)?;
        topo
    } else {
        CpuTopology {
            cpus: Vec::new(),
            kinds: Vec::new(),
            speed_basis: SpeedBasis::Unknown,
            notes: Vec::new(),
        }
    };
    let mut platform = Platform::assemble(cpus, &config.emulated)?;
    if let Ok(n) = std::thread::available_parallelism() {
        if config.include_cpus && n.get() < platform.cpus.len() {
            platform.notes.push(format!(
                "this process may run on {n} of {} PUs (affinity mask or cgroup limit)",
                platform.cpus.len()
            ));
        }
    }
    platform.calibration_cache = config.calibration_cache.clone();
    if platform.cpu_kinds.is_empty() {
        return Ok(platform);
    }
    if let Some(path) = &config.calibration_cache {
        match calibrate::read_cache(path) {
            Ok(Some(cal)) if cal.fits(&platform.fingerprint()) => {
                platform.apply_calibration(cal, CalibrationOrigin::Cache(path.clone()));
                return Ok(platform);
            }
            Ok(Some(_)) => platform.notes.push(format!(
                "calibration cache {} is for another CPU set; re-measured",
                path.display()
            )),
            Ok(None) => {}
            Err(e) => platform.notes.push(format!("{e}; re-measured")),
        }
    }
    calibrate(&mut platform)?;
    Ok(platform)
}

/// Measures the CPU kinds afresh with default options, puts the result in
/// force and writes it to the platform's cache file, if it has one.
pub fn calibrate(platform: &mut Platform) -> Result<(), PlatformError> {
    calibrate_with(platform, &CalibrationOptions::default())
}

/// [`calibrate()`] with explicit measuring options. A cache that cannot be
/// written is a note, not an error: the measured figures are still good.
pub fn calibrate_with(
    platform: &mut Platform,
    opts: &CalibrationOptions,
) -> Result<(), PlatformError> {
    if platform.cpu_kinds.is_empty() {
        return Ok(());
    }
    let cal = calibrate::measure(&platform.cpu_kinds, opts)?;
    for k in cal.kinds.iter().filter(|k| !k.pinned) {
        platform.notes.push(format!(
            "calibration of `{}` could not pin to PU {}; figures are for an unpinned thread",
            k.kind, k.pu
        ));
    }
    if let Some(path) = platform.calibration_cache.clone() {
        if let Err(e) = calibrate::write_cache(&path, &cal) {
            platform.notes.push(format!("{e}; calibration not cached"));
        }
    }
    platform.apply_calibration(cal, CalibrationOrigin::Measured);
    Ok(())
}
