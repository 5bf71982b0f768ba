//! The daemon's configuration file (`/etc/hetsched/hetsched.toml` or
//! `--config`). Every key is optional; unknown keys are errors that name
//! the line, so a typo never silently falls back to a default.

use crate::domains::DomainSpec;
use hetsched_core::policy::PolicyKind;
use hetsched_platform::{EmulatedUnitConfig, SlowCoreConfig};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the daemon looks when no `--config` is given.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/hetsched/hetsched.toml";

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// Socket path; else `$HETSCHED_SOCKET` or the per-user default.
    pub socket: Option<PathBuf>,
    /// Where shares survive restarts; else `/var/lib/hetsched/state.json`
    /// for root, `$XDG_STATE_HOME/hetsched/state.json` otherwise.
    pub state_file: Option<PathBuf>,
    /// Members of this group may set CUSTOM shares and change others' settings.
    pub admin_group: Option<String>,
    /// Requests one client may have waiting or running at once
    /// (1..=4096, default 64).
    pub max_outstanding: u32,
    /// Largest frame accepted from a client, bytes (1024..=67108864, i.e.
    /// up to 64 MiB; default 256 KiB).
    pub max_frame_bytes: usize,
    /// Connections one user may hold at once (1..=65536, default 256).
    /// Root's and the daemon's own user's are not limited.
    pub max_connections_per_uid: u32,
    /// Connections all users but root and the daemon's own may hold at
    /// once (1..=1000000, default 4096).
    pub max_connections: u32,
    /// Longest device work one request may hold an emulated stream, s
    /// (a finite number in (0, 3600]; default 10); also how long a client
    /// may hold a device unit's slot it drives itself (a gate task, a
    /// lease) unless `[max_hold_ms]` says otherwise for that unit.
    pub max_device_seconds: f64,
    /// Agents' accounting and view publication period, ms (1..=1000,
    /// default 10).
    pub tick_ms: u64,
    /// How often the CPU agent counts runnable threads in /proc, ms
    /// (1..=60000, default 500).
    pub cpu_scan_ms: u64,
    /// How often the CPU agent reads which application clients have a
    /// runnable thread and hands that to the units' policies as the CPU
    /// schedule (Pegasus's `HS`, read by CoSched and AugC), ms (1..=60000,
    /// default 10: the CPU scheduler's tick, the period Pegasus's
    /// coordination thread runs at). It costs one `stat` read per thread
    /// of each application, about 27 µs for four single-threaded ones.
    pub cpu_schedule_ms: u64,
    /// How long a unit's free slot may wait for a client expected back
    /// soon while others wait, µs (0..=100000): the share policy's
    /// anticipation (default 500 µs) and the Pegasus policies' window for
    /// the owner's next call (default 1000 µs). 0 makes every policy
    /// strictly work-conserving. Unset keeps each policy's default.
    pub anticipation_us: Option<u64>,
    /// Length of the time-slice leases an intercepted program (or any
    /// client that asks for leases) gets on a device it drives itself, µs
    /// (100..=1000000, default 5000). BACKGROUND clients get a quarter.
    /// Longer leases cost fewer round trips; shorter ones bound how long
    /// a newcomer waits.
    pub lease_us: u64,
    /// Device-memory caps of intercepted programs by class
    /// (`[device_memory]`: `custom`, `normal`, `background`, each a size
    /// such as `"2G"`). A program started with `hetsched run
    /// --device-memory` gets the smaller of the two.
    pub device_memory: DeviceMemoryConfig,
    /// The CPU agent sets the nice level of every thread of each
    /// application from its class on the CPU units (BACKGROUND → 19,
    /// shares → the matching CFS weight), never above the thread's own
    /// priority. Needs root; nothing is restored when the daemon exits.
    pub cpu_nice_from_shares: bool,
    /// The CPU side of Pegasus's coordination: the CPU agent puts each
    /// application in a cgroup of its own (cgroup v1 `cpu.shares`, else
    /// v2 `cpu.weight`) weighed by its class on the CPU units, and XC
    /// gives accelerator ticks by the same CPU credits. Needs root and a
    /// writable cpu controller; without them the daemon says so and goes
    /// on without. Needs `include_cpus`.
    pub cpu_cgroups: bool,
    /// Proportional-fair coordination of the applications' placement
    /// (issue 10): `"pf"` (the default) solves the allocation from
    /// measured task times and publishes per-client unit fractions and a
    /// rate in the private views, for the applications with NORMAL shares
    /// (their weights) that follow them; `"pf-replay"` does the same but
    /// judges the candidate allocations by replaying them (the
    /// simulator's `hetsched-pf`; see docs/sim.md for why it is not yet the
    /// daemon's default); `"off"` leaves every application to place for
    /// itself.
    pub coordination: Coordination,
    /// The floor the coordinator asks for, × each app's native estimate
    /// (1.0..=2.0, default 1.05). The margin above 1 covers what its
    /// models do not see; on a machine whose CPUs also carry the devices'
    /// host work and other programs, a larger one trades some of the
    /// gain for the floor (docs/sim.md, "In the daemon and the runtime").
    pub coordination_floor: f64,
    /// `"pf-replay"`: the replay-judged pick runs in slices of about this
    /// many replayed events, one per tick, keeping the targets in force
    /// meanwhile (0..=100000000, default 80000, about 5 ms a slice at 128
    /// applications; 0: every pick whole, the coordination thread busy
    /// for all of it).
    pub coordination_slice_events: u64,
    /// Policy of every unit that is not a CPU kind, unless `policies` says otherwise.
    pub default_policy: PolicyKind,
    /// Policy per unit name (`gpu0 = "fifo"`).
    pub policies: BTreeMap<String, PolicyKind>,
    /// Discover the CPUs as units (off: emulated units only).
    pub include_cpus: bool,
    /// Where the CPU calibration (dispatch latency, memcpy bandwidth per
    /// kind) is kept, so that it is measured once per machine rather than
    /// at every start. Default: `/var/cache/hetsched/calibration.json` for
    /// root, `$XDG_CACHE_HOME/hetsched/calibration.json` otherwise; `""`
    /// measures afresh every time. A cache made on another CPU set is
    /// measured again.
    pub calibration_cache: Option<PathBuf>,
    /// Emulated devices (`[[emulated]]` tables). Their numbers are
    /// bounded too: `streams` 1..=64, `speed` in (0, 1e6], `copy_gbps`
    /// and `copy_out_gbps` in (0, 1e4], `copy_latency_us` and
    /// `dispatch_us` in [0, 1e6], `busy_watts` and `idle_watts` in
    /// [0, 1e5], `memory_mb` 1..=16777216 (16 TiB), `max_clients`
    /// 1..=1024 ([`check_emulated_bounds`]).
    pub emulated: Vec<EmulatedUnitConfig>,
    /// CPUs emulated as slower kinds (`[[slow_cores]]` tables; `speed` in
    /// (0, 1), the CPU numbers checked against the machine at start-up).
    pub slow_cores: Vec<SlowCoreConfig>,
    /// Every real OpenCL and CUDA device this build can drive is a unit
    /// with an agent (`opencl<N>`, `cuda<N>`): applications run their own
    /// kernels on it, each after the agent grants a slot under the unit's
    /// policy (the dispatch gate), so shares hold across processes and the
    /// views show the device's real load. Off: the devices are invisible
    /// to the daemon, and each runtime drives them as its own.
    pub device_units: bool,
    /// Serve every OpenCL device as a unit the daemon runs kernels on for
    /// its clients (kernel rings; Pegasus's backend with real work). Needs
    /// a build with the `opencl` feature.
    pub opencl_units: bool,
    /// Serve every CUDA device as a unit the daemon runs kernels on
    /// (`served-cuda<N>`, next to the OpenCL ones). Needs a build with the
    /// `cuda` feature; where CUDA is absent at run time the daemon says
    /// why and serves none.
    pub cuda_units: bool,
    /// While the daemon runs, it is the only user that may open the
    /// devices it serves (hetsched-daemon's `exclusive`): with a served CUDA device,
    /// `/dev/nvidia<N>`, `nvidiactl`, `nvidia-uvm` and `nvidia-uvm-tools`
    /// become the daemon's user's with mode 0600; with a served OpenCL
    /// device, so do the ICD loader's vendor files (`*.icd`), so other
    /// users' processes list no platform. The owners and modes before are
    /// put back when the daemon stops. Root and the daemon's own user still
    /// see the devices. Needs root, unless every file is already the
    /// daemon's user's. Off by default.
    pub exclusive_devices: bool,
    /// Largest data region one kernel ring may have, MiB (1..=1024,
    /// default 64).
    pub max_region_mb: u64,
    /// Accelerator selection binds: a client's calls on the units
    /// selection chooses among go only to the one it is associated with
    /// (`SelectAccelerator`, or its first call, which associates it there
    /// if the unit is under its `max_clients`). Off: associations are
    /// advisory.
    pub accelerator_binding: bool,
    /// Pegasus domains beyond single clients (`[[domains]]` tables): the
    /// clients of a cgroup (a container) share its accelerator credits
    /// and, with `cpu_cap`, a CPU ceiling ([`crate::domains`]). `credits`
    /// and each of `unit_credits` are 1..=1000000; `cpu_cap` is a
    /// positive number of cores, at most the machine's.
    pub domains: Vec<DomainSpec>,
    /// Users (names or uids) who may register kernels with the units the
    /// daemon serves (`RegisterKernel`), besides root. Default: none.
    pub kernel_users: Vec<String>,
    /// Groups (names or gids) whose members may register kernels, by
    /// primary or supplementary group. Default: none.
    pub kernel_groups: Vec<String>,
    /// What one client's registered kernels may cost (`[kernels]`).
    pub kernels: crate::kernel_config::KernelsConfig,
    /// Serve Prometheus metrics over HTTP at `http://ADDR/metrics`
    /// (`"127.0.0.1:9464"`; off by default). They name the clients and
    /// units. Only a loopback address is accepted unless
    /// `metrics_remote = true`.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Let `metrics_listen` be an address other hosts can reach (keep it
    /// behind a firewall: the metrics name clients and units). Off by
    /// default.
    pub metrics_remote: bool,
    /// Client names `/metrics` keeps series of their own for as soon as
    /// they connect, as it does for root's clients (at most 64 such names
    /// in all); other names get one once they are charged for something,
    /// while any of 256 is left.
    pub metrics_names: Vec<String>,
    /// Per unit name, how long a client may hold a slot of the unit it
    /// drives itself (a dispatch-gate task, an intercepted program's
    /// lease) before the daemon takes it back, charges it and tells the
    /// client (`WorkTooLong`), ms (1..=3600000). Units not named: device
    /// units `max_device_seconds`, CPU units no limit.
    pub max_hold_ms: BTreeMap<String, u64>,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            socket: None,
            state_file: None,
            admin_group: None,
            max_outstanding: 64,
            max_frame_bytes: hetsched_protocol::MAX_FRAME_BYTES,
            max_connections_per_uid: crate::admission::ConnectionLimits::default().per_uid,
            max_connections: crate::admission::ConnectionLimits::default().total,
            max_device_seconds: 10.0,
            tick_ms: 10,
            cpu_scan_ms: 500,
            cpu_schedule_ms: 10,
            anticipation_us: None,
            lease_us: 5_000,
            device_memory: DeviceMemoryConfig::default(),
            cpu_nice_from_shares: false,
            cpu_cgroups: false,
            coordination: Coordination::Pf,
            coordination_floor: hetsched_core::coordination::CoordinatorConfig::default()
                .floor_goal,
            coordination_slice_events: hetsched_core::coordination::DEFAULT_PICK_SLICE_EVENTS,
            default_policy: PolicyKind::Share,
            policies: BTreeMap::new(),
            include_cpus: true,
            calibration_cache: None,
            slow_cores: Vec::new(),
            emulated: Vec::new(),
            device_units: true,
            opencl_units: false,
            cuda_units: false,
            exclusive_devices: false,
            max_region_mb: crate::monitor::config::DEFAULT_MAX_REGION_MB,
            accelerator_binding: false,
            domains: Vec::new(),
            kernel_users: Vec::new(),
            kernel_groups: Vec::new(),
            kernels: crate::kernel_config::KernelsConfig::default(),
            metrics_listen: None,
            metrics_remote: false,
            metrics_names: Vec::new(),
            max_hold_ms: BTreeMap::new(),
        }
    }
}

/// Whether the daemon coordinates placement (`coordination = "..."`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Coordination {
    /// Applications place for themselves (Rinnegan).
    Off,
    /// Proportional-fair targets (`hetsched-pf`): the default, since it
    /// beats plain placement in the simulator and in `make demo`.
    #[default]
    Pf,
    /// The same, with candidates judged by replay
    /// ([`hetsched_core::coordination::solve_targets_replayed`]).
    #[serde(rename = "pf-replay")]
    PfReplay,
}

impl Coordination {
    /// Whether the daemon coordinates at all.
    pub fn is_on(self) -> bool {
        self != Coordination::Off
    }

    /// The policy a device configured `configured` runs under this mode.
    /// The replay-judged pick chooses each queue's order, so it runs a
    /// FIFO device short-first-capable, as the simulator's hetsched-pf does
    /// (docs/sim.md, "Short-first queues"); the order it picks per unit is
    /// arrival order wherever passing would cost someone the floor.
    pub fn device_policy(self, configured: PolicyKind) -> PolicyKind {
        match (self, configured) {
            (Coordination::PfReplay, PolicyKind::Fifo) => PolicyKind::ShortFirst,
            (_, kind) => kind,
        }
    }

    /// The coordinator's configuration for this mode, asking for
    /// `floor_goal` × native.
    pub fn coordinator_config(
        self,
        floor_goal: f64,
    ) -> hetsched_core::coordination::CoordinatorConfig {
        hetsched_core::coordination::CoordinatorConfig {
            replay: self == Coordination::PfReplay,
            floor_goal,
            ..Default::default()
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config {path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// A key that asks the daemon to serve one device API's devices, and the
/// build that has the API.
struct ServedApiKey {
    key: &'static str,
    label: &'static str,
    feature: &'static str,
}

/// The keys of [`DaemonConfig::serves`].
const SERVED_APIS: [ServedApiKey; 2] = [
    ServedApiKey {
        key: "opencl_units",
        label: "OpenCL",
        feature: "opencl",
    },
    ServedApiKey {
        key: "cuda_units",
        label: "CUDA",
        feature: "cuda",
    },
];

impl DaemonConfig {
    /// Whether the configuration key `key` (`opencl_units`, `cuda_units`:
    /// a device API's `config_key`) asks the daemon to serve that API's
    /// devices.
    pub fn serves(&self, key: &str) -> bool {
        match key {
            "opencl_units" => self.opencl_units,
            "cuda_units" => self.cuda_units,
            _ => false,
        }
    }

    /// Reads and checks a config file.
    pub fn load(path: &Path) -> Result<DaemonConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.into(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Refuses a `metrics_listen` other hosts can reach unless
    /// `metrics_remote` allows it (run again after `--metrics` sets it).
    pub fn check_metrics_listen(&self) -> Result<(), String> {
        match self.metrics_listen {
            Some(addr) if !addr.ip().is_loopback() && !self.metrics_remote => Err(format!(
                "metrics address {addr} is not a loopback address: the metrics name clients \
                 and units, so they are served on loopback only (127.0.0.1, ::1) unless \
                 metrics_remote = true"
            )),
            _ => Ok(()),
        }
    }

    /// The file at `--config`, else the default path if it exists, else defaults.
    pub fn load_or_default(path: Option<&Path>) -> Result<DaemonConfig, ConfigError> {
        match path {
            Some(p) => Self::load(p),
            None if Path::new(DEFAULT_CONFIG_PATH).exists() => {
                Self::load(Path::new(DEFAULT_CONFIG_PATH))
            }
            None => Ok(DaemonConfig::default()),
        }
    }

    pub fn parse(path: &Path, text: &str) -> Result<DaemonConfig, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            path: path.into(),
            message,
        };
        let cfg: DaemonConfig =
            toml::from_str(text).map_err(|e| invalid(e.to_string().trim_end().to_string()))?;
        for e in &cfg.emulated {
            e.validate().map_err(|err| invalid(err.to_string()))?;
            check_emulated_bounds(e).map_err(invalid)?;
        }
        check_bounds(&cfg).map_err(invalid)?;
        if cfg.cpu_cgroups && !cfg.include_cpus {
            return Err(invalid(
                "cpu_cgroups = true needs include_cpus = true: a client's CPU share comes from \
                 its class on the CPU units"
                    .into(),
            ));
        }
        for wanted in SERVED_APIS.iter().filter(|w| cfg.serves(w.key)) {
            let built = crate::kernel_exec::apis::all()
                .iter()
                .any(|a| a.config_key() == wanted.key);
            if !built {
                return Err(invalid(format!(
                    "{} = true, but this hetsched was built without {} \
                     (rebuild with `--features {}`)",
                    wanted.key, wanted.label, wanted.feature
                )));
            }
        }
        cfg.check_metrics_listen().map_err(invalid)?;
        crate::domains::validate(&cfg.domains, online_cpus()).map_err(invalid)?;
        check_domain_bounds(&cfg.domains).map_err(invalid)?;
        if !cfg.cpu_cgroups {
            if let Some(d) = cfg.domains.iter().find(|d| d.cpu_cap.is_some()) {
                return Err(invalid(format!(
                    "domain {:?}: cpu_cap needs cpu_cgroups = true (the ceiling is a CFS quota \
                     on the domain's cgroup)",
                    d.name
                )));
            }
        }
        Ok(cfg)
    }

    /// Unit names in `policies` that no unit has, for an error message.
    pub fn unknown_policy_units<'a>(&'a self, units: &[&str]) -> Vec<&'a str> {
        self.policies
            .keys()
            .filter(|k| !units.contains(&k.as_str()))
            .map(String::as_str)
            .collect()
    }

    pub fn state_path(&self) -> PathBuf {
        if let Some(p) = &self.state_file {
            return p.clone();
        }
        if rustix::process::getuid().is_root() {
            return PathBuf::from("/var/lib/hetsched/state.json");
        }
        let base = std::env::var_os("XDG_STATE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
            .unwrap_or_else(std::env::temp_dir);
        base.join("hetsched/state.json")
    }

    /// [`DaemonConfig::calibration_cache`], or its default; `None` when
    /// set to `""`.
    pub fn calibration_cache_path(&self) -> Option<PathBuf> {
        match &self.calibration_cache {
            Some(p) if p.as_os_str().is_empty() => None,
            Some(p) => Some(p.clone()),
            None if rustix::process::getuid().is_root() => {
                Some(PathBuf::from("/var/cache/hetsched/calibration.json"))
            }
            None => std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|base| base.join("hetsched/calibration.json")),
        }
    }

    pub fn socket_path(&self) -> PathBuf {
        self.socket
            .clone()
            .unwrap_or_else(hetsched_protocol::default_socket_path)
    }
}

/// `key = value` within `lo..=hi`, else an error naming all three. NaN
/// is within no range.
fn within<T: PartialOrd + std::fmt::Display>(
    key: &str,
    value: T,
    lo: T,
    hi: T,
) -> Result<(), String> {
    if value >= lo && value <= hi {
        Ok(())
    } else {
        Err(format!("{key} = {value} is outside {lo}..={hi}"))
    }
}

/// `key = value` a finite number in `(0, hi]`, else an error naming all three.
fn positive_up_to(key: &str, value: f64, hi: f64) -> Result<(), String> {
    if value > 0.0 && value <= hi {
        Ok(())
    } else {
        Err(format!(
            "{key} = {value} is outside (0, {hi}]: it must be a finite number above 0"
        ))
    }
}

/// Longest device work one request may ask for, s.
pub const MAX_DEVICE_SECONDS: f64 = 3600.0;
/// Most streams of one emulated unit (each is a slot its agent hands out).
pub const MAX_STREAMS: u32 = 64;
/// `[device_memory]`: caps by class, as sizes (`"2G"`, `"512M"`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeviceMemoryConfig {
    pub custom: Option<String>,
    pub normal: Option<String>,
    pub background: Option<String>,
}

impl DeviceMemoryConfig {
    /// The caps in bytes; an error names the key whose size is malformed.
    pub fn caps(&self) -> Result<crate::monitor::config::DeviceMemoryCaps, String> {
        let one = |key: &str, v: &Option<String>| -> Result<Option<u64>, String> {
            v.as_deref()
                .map(
                    |text| match hetsched_protocol::byte_size::parse_byte_size(text) {
                        Ok(0) => Err(format!("device_memory.{key} = \"{text}\" is zero")),
                        Ok(b) => Ok(b),
                        Err(e) => Err(format!("device_memory.{key}: {e}")),
                    },
                )
                .transpose()
        };
        Ok(crate::monitor::config::DeviceMemoryCaps {
            custom: one("custom", &self.custom)?,
            normal: one("normal", &self.normal)?,
            background: one("background", &self.background)?,
        })
    }
}

/// Most credits of one domain on one unit.
pub const MAX_DOMAIN_CREDITS: u32 = 1_000_000;

/// The daemon's own numeric keys within their documented ranges (the
/// [`DaemonConfig`] field docs give them), and the slow cores' speeds.
fn check_bounds(cfg: &DaemonConfig) -> Result<(), String> {
    within("max_outstanding", cfg.max_outstanding, 1, 4096)?;
    within("max_frame_bytes", cfg.max_frame_bytes, 1024, 64 << 20)?;
    within(
        "max_connections_per_uid",
        cfg.max_connections_per_uid,
        1,
        65536,
    )?;
    within("max_connections", cfg.max_connections, 1, 1_000_000)?;
    positive_up_to(
        "max_device_seconds",
        cfg.max_device_seconds,
        MAX_DEVICE_SECONDS,
    )?;
    within("tick_ms", cfg.tick_ms, 1, 1000)?;
    for (unit, &ms) in &cfg.max_hold_ms {
        within(
            &format!("max_hold_ms.{unit}"),
            ms,
            1,
            (MAX_DEVICE_SECONDS * 1000.0) as u64,
        )?;
    }
    within("cpu_scan_ms", cfg.cpu_scan_ms, 1, 60_000)?;
    within("cpu_schedule_ms", cfg.cpu_schedule_ms, 1, 60_000)?;
    if let Some(us) = cfg.anticipation_us {
        within("anticipation_us", us, 0, 100_000)?;
    }
    within("lease_us", cfg.lease_us, 100, 1_000_000)?;
    cfg.device_memory.caps()?;
    if !(1.0..=2.0).contains(&cfg.coordination_floor) {
        return Err(format!(
            "coordination_floor = {} is outside 1.0..=2.0 (× native: below 1 would let \
             the coordinator put apps below native on purpose)",
            cfg.coordination_floor
        ));
    }
    within(
        "coordination_slice_events",
        cfg.coordination_slice_events,
        0,
        100_000_000,
    )?;
    let max_region = hetsched_views::data_region::MAX_REGION_BYTES >> 20;
    within("max_region_mb", cfg.max_region_mb, 1, max_region)?;
    cfg.kernels.check()?;
    for (i, s) in cfg.slow_cores.iter().enumerate() {
        if !(s.speed > 0.0 && s.speed < 1.0) {
            return Err(format!(
                "slow_cores[{i}]: speed = {} is outside (0, 1): a fraction of a full core",
                s.speed
            ));
        }
    }
    Ok(())
}

/// The domains' credits within 1..=[`MAX_DOMAIN_CREDITS`] (after
/// [`crate::domains::validate`], which names a zero its own way).
fn check_domain_bounds(domains: &[DomainSpec]) -> Result<(), String> {
    for d in domains {
        let key = |k: &str| format!("domain {:?}: {k}", d.name);
        within(&key("credits"), d.credits, 1, MAX_DOMAIN_CREDITS)?;
        for (unit, c) in &d.unit_credits {
            within(
                &key(&format!("unit_credits.{unit}")),
                *c,
                1,
                MAX_DOMAIN_CREDITS,
            )?;
        }
    }
    Ok(())
}

/// The upper bounds of an `[[emulated]]` table's numbers, which
/// [`EmulatedUnitConfig::validate`] checks from below (the
/// [`DaemonConfig::emulated`] doc gives the ranges).
pub fn check_emulated_bounds(e: &EmulatedUnitConfig) -> Result<(), String> {
    let key = |k: &str| format!("emulated unit {:?}: {k}", e.name);
    within(&key("streams"), e.streams, 1, MAX_STREAMS)?;
    positive_up_to(&key("speed"), e.speed, 1e6)?;
    positive_up_to(&key("copy_gbps"), e.copy_gbps, 1e4)?;
    if let Some(out) = e.copy_out_gbps {
        positive_up_to(&key("copy_out_gbps"), out, 1e4)?;
    }
    within(&key("copy_latency_us"), e.copy_latency_us, 0.0, 1e6)?;
    within(&key("dispatch_us"), e.dispatch_us, 0.0, 1e6)?;
    within(&key("busy_watts"), e.busy_watts, 0.0, 1e5)?;
    within(&key("idle_watts"), e.idle_watts, 0.0, 1e5)?;
    within(&key("memory_mb"), e.memory_mb, 1, 16 << 20)?;
    within(&key("max_clients"), e.max_clients, 1, 1024)?;
    Ok(())
}

/// CPUs online (`/sys/devices/system/cpu/online`, e.g. `0-3,6`), else
/// what the standard library sees; what a CPU ceiling may not exceed.
pub fn online_cpus() -> u32 {
    let from_sys = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|t| {
            t.trim().split(',').try_fold(0u32, |n, part| {
                let count = match part.split_once('-') {
                    Some((a, b)) => b.parse::<u32>().ok()? + 1 - a.parse::<u32>().ok()?,
                    None => part.parse::<u32>().map(|_| 1).ok()?,
                };
                Some(n + count)
            })
        });
    from_sys
        .filter(|&n| n > 0)
        .or_else(|| {
            std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as u32)
        })
        .unwrap_or(1)
}

#[cfg(test)]
mod tests;
