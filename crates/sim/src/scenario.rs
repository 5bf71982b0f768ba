//! Scenario files: a machine, a workload and the policies to compare, in TOML.
//!
//! Parsing is strict (unknown fields are errors) and every error names the
//! file, the line and the field, because a scenario with a typo that ran
//! anyway would report numbers for a machine nobody meant.

use crate::strategy::StrategyKind;
use hetsched_core::ids::{ClientId, Ns, UnitId};
use hetsched_core::placement::Goal;
use hetsched_core::policy::{ClientSettings, PolicyKind, ShareClass};
use hetsched_core::unit::{Capabilities, LinkCost, Machine, Unit, UnitClass};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;

/// The file as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Simulated seconds measured, after `warmup_s`.
    pub duration_s: f64,
    #[serde(default = "default_warmup_s")]
    pub warmup_s: f64,
    /// How often agents publish views (and tick policies).
    #[serde(default = "default_refresh_ms")]
    pub view_refresh_ms: f64,
    /// Relative spread of execution times around the model (uniform, same mean).
    #[serde(default = "default_noise")]
    pub noise: f64,
    /// Relative error of every prediction the placer makes (uniform in
    /// ±`model_error`, drawn per decision and unit kind; default 0).
    #[serde(default)]
    pub model_error: f64,
    /// Model errors at which `hetsched` and `hetsched-pf` run again, for
    /// the report's `prediction_error_sweep` (Rinnegan §4.6).
    #[serde(default)]
    pub model_error_sweep: Vec<f64>,
    /// Placement policies to compare; `native` is always run (it is the baseline).
    pub policies: Vec<String>,
    /// Seconds of the placement timeline to keep for the plot.
    #[serde(default = "default_timeline_s")]
    pub timeline_s: f64,
    pub units: Vec<UnitSpec>,
    pub apps: Vec<AppSpec>,
    #[serde(default)]
    pub jitter: Vec<JitterSpec>,
    /// Replayed events hetsched-pf's coordinator may spend per solve
    /// (`--replay-events` overrides it; default: the coordinator's).
    #[serde(default)]
    pub replay_events_per_solve: Option<u64>,
    /// hetsched-pf-fluid: the longest a warm re-solve may follow the last
    /// full pick, s (0: every re-solve is a full pick; default: the
    /// coordinator's).
    #[serde(default)]
    pub full_resolve_period_s: Option<f64>,
    /// hetsched-pf: replayed events per slice of a pick spread over
    /// coordinator periods, one slice per view refresh, as the daemon runs
    /// them (`--pick-slice-events` overrides it; default 0: every pick
    /// whole inside one refresh, at no simulated time).
    #[serde(default)]
    pub pick_slice_events: Option<u64>,
}

fn default_warmup_s() -> f64 {
    1.0
}
fn default_refresh_ms() -> f64 {
    10.0
}
fn default_noise() -> f64 {
    0.05
}
fn default_timeline_s() -> f64 {
    10.0
}
fn default_slots() -> u32 {
    1
}
fn default_one() -> u32 {
    1
}
fn default_out_ratio() -> f64 {
    1.0
}
fn default_fixed_fraction() -> f64 {
    0.1
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnitSpec {
    pub name: String,
    /// cpu | gpu | accelerator | emulated
    pub class: String,
    /// Unit kind for task models; defaults to the unit's name.
    pub kind: Option<String>,
    #[serde(default = "default_slots")]
    pub slots: u32,
    /// fifo | priority | share | time-share. Default: time-share for CPUs, fifo otherwise.
    pub policy: Option<String>,
    /// Default: true for CPUs, false otherwise.
    pub coherent: Option<bool>,
    #[serde(default)]
    pub dispatch_us: f64,
    pub copy: Option<CopySpec>,
    #[serde(default)]
    pub busy_watts: f64,
    #[serde(default)]
    pub idle_watts: f64,
    #[serde(default)]
    pub caps: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CopySpec {
    pub latency_us: f64,
    pub in_gb_s: f64,
    pub out_gb_s: f64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppSpec {
    pub name: String,
    /// Identical instances of this app, reported together.
    #[serde(default = "default_one")]
    pub copies: u32,
    /// Tasks each instance keeps in flight (closed loop).
    #[serde(default = "default_one")]
    pub in_flight: u32,
    /// Input bytes per task: fixed `kib`, or uniform in `[min_kib, max_kib]`.
    pub bytes: BytesSpec,
    /// Output bytes as a fraction of input bytes (copied back from non-coherent units).
    #[serde(default = "default_out_ratio")]
    pub out_ratio: f64,
    /// The task updates data that stays where it ran (e.g. a stencil grid).
    #[serde(default)]
    pub persistent_data: bool,
    /// Fraction of execution time that does not scale with bytes.
    #[serde(default = "default_fixed_fraction")]
    pub fixed_fraction: f64,
    /// Execution time at the mean input size on each unit that has an implementation.
    pub exec_ms: BTreeMap<String, f64>,
    /// normal | custom | background (default normal).
    pub class: Option<String>,
    /// Shares per unit for the class (units not listed get NORMAL defaults).
    #[serde(default)]
    pub shares: BTreeMap<String, u32>,
    #[serde(default)]
    pub priority: i32,
    /// latency | throughput | energy | deadline (default latency).
    pub goal: Option<String>,
    pub deadline_ms: Option<f64>,
    #[serde(default)]
    pub start_s: f64,
    pub stop_s: Option<f64>,
    /// Short-lived instances: run `tasks` tasks, exit, and a new one starts.
    pub short_lived: Option<ShortLivedSpec>,
    /// Start with the task model an earlier run persisted (no profiling).
    #[serde(default)]
    pub pretrained: bool,
    /// Tasks per second the app wants: the runtime's optimizer (Rinnegan
    /// §3.2) then spreads its calls, asks for CUSTOM shares and asks it to
    /// do less per task until it gets them.
    pub throughput_goal: Option<f64>,
    /// Fraction of a task's work the app sheds each time the optimizer
    /// asks it to (lower fidelity; 0, the default: it cannot).
    #[serde(default)]
    pub adapt_step: f64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BytesSpec {
    pub kib: Option<u64>,
    pub min_kib: Option<u64>,
    pub max_kib: Option<u64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShortLivedSpec {
    /// Instances alive at once.
    pub concurrent: u32,
    /// Tasks per instance before it exits.
    pub tasks: u32,
    /// Gap between an instance's exit and its successor's start.
    #[serde(default)]
    pub gap_ms: f64,
}

/// Time on a unit that hetsched does not schedule (another VM, an
/// administrator cap): the app gets a utilisation drawn uniformly from
/// `[min, max]`, redrawn every `period_ms`, and its view says so.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JitterSpec {
    pub unit: String,
    pub app: String,
    pub min_utilisation: f64,
    pub max_utilisation: f64,
    pub period_ms: f64,
}

/// A scenario error: which file, which line, which field, what is wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioError {
    pub file: String,
    pub line: Option<usize>,
    pub field: String,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: ", self.file, line)?,
            None => write!(f, "{}: ", self.file)?,
        }
        if !self.field.is_empty() {
            write!(f, "field `{}`: ", self.field)?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ScenarioError {}

/// One segment of a path into the TOML document.
#[derive(Clone, Debug)]
enum Seg {
    Key(String),
    Index(usize),
}

fn path_string(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// Finds the byte span of the deepest element of `path` present in the
/// document (so a missing field points at its table).
fn span_of(doc: &toml_edit::Document<&str>, path: &[Seg]) -> Option<Range<usize>> {
    walk_item(doc.as_item(), path)
}

fn walk_item(item: &toml_edit::Item, path: &[Seg]) -> Option<Range<usize>> {
    use toml_edit::Item;
    let here = item.span();
    let Some((seg, rest)) = path.split_first() else {
        return here;
    };
    let deeper = match (item, seg) {
        (Item::Table(t), _) => walk_table(t, path),
        (Item::ArrayOfTables(a), Seg::Index(i)) => a.get(*i).and_then(|t| walk_table(t, rest)),
        (Item::Value(v), _) => walk_value(v, path),
        _ => None,
    };
    deeper.or(here)
}

fn walk_table(table: &toml_edit::Table, path: &[Seg]) -> Option<Range<usize>> {
    let here = table.span();
    match path.split_first() {
        Some((Seg::Key(k), rest)) => table.get(k).and_then(|i| walk_item(i, rest)).or(here),
        _ => here,
    }
}

fn walk_value(value: &toml_edit::Value, path: &[Seg]) -> Option<Range<usize>> {
    use toml_edit::Value;
    let here = value.span();
    let deeper = match (value, path.split_first()) {
        (Value::InlineTable(t), Some((Seg::Key(k), rest))) => {
            t.get(k).and_then(|v| walk_value(v, rest))
        }
        (Value::Array(a), Some((Seg::Index(i), rest))) => {
            a.get(*i).and_then(|v| walk_value(v, rest))
        }
        _ => None,
    };
    deeper.or(here)
}

/// 1-based line of a byte offset. Counts bytes, so an offset inside a
/// multi-byte character cannot panic.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Collects semantic errors with their path; turned into lines at the end.
struct Checker<'a> {
    file: &'a str,
    text: &'a str,
}

impl Checker<'_> {
    fn error(&self, path: &[Seg], message: impl Into<String>) -> ScenarioError {
        let line = toml_edit::Document::parse(self.text)
            .ok()
            .and_then(|doc| span_of(&doc, path))
            .map(|s| line_of(self.text, s.start));
        ScenarioError {
            file: self.file.to_string(),
            line,
            field: path_string(path),
            message: message.into(),
        }
    }
}

fn key(k: &str) -> Seg {
    Seg::Key(k.to_string())
}

/// How an app's task size is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BytesDist {
    Fixed(u64),
    Uniform { min: u64, max: u64 },
}

impl BytesDist {
    /// Smallest and largest size drawn.
    pub fn range(&self) -> (u64, u64) {
        match *self {
            BytesDist::Fixed(b) => (b, b),
            BytesDist::Uniform { min, max } => (min, max),
        }
    }

    pub fn mean(&self) -> f64 {
        match *self {
            BytesDist::Fixed(b) => b as f64,
            BytesDist::Uniform { min, max } => (min as f64 + max as f64) / 2.0,
        }
    }
}

/// One app of a validated scenario.
#[derive(Clone, Debug)]
pub struct App {
    pub name: String,
    pub copies: u32,
    pub in_flight: u32,
    pub bytes: BytesDist,
    pub out_ratio: f64,
    pub persistent_data: bool,
    pub fixed_fraction: f64,
    /// Mean execution time per unit at the mean input size; `None` = no implementation.
    pub exec_ns: Vec<Option<f64>>,
    pub settings: Vec<ClientSettings>,
    pub goal: Goal,
    pub start_ns: Ns,
    pub stop_ns: Option<Ns>,
    pub short_lived: Option<ShortLived>,
    pub pretrained: bool,
    pub throughput_goal: Option<ThroughputGoal>,
}

/// An app's throughput goal and how it may adapt to it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThroughputGoal {
    pub tasks_per_s: f64,
    /// Fraction of a task's work shed per request to do less.
    pub adapt_step: f64,
}

#[derive(Clone, Copy, Debug)]
pub struct ShortLived {
    pub concurrent: u32,
    pub tasks: u32,
    pub gap_ns: Ns,
}

#[derive(Clone, Copy, Debug)]
pub struct Jitter {
    pub unit: UnitId,
    pub app: usize,
    pub min: f64,
    pub max: f64,
    pub period_ns: Ns,
}

/// A validated scenario, ready to simulate.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub machine: Machine,
    pub unit_policies: Vec<PolicyKind>,
    pub apps: Vec<App>,
    pub jitter: Vec<Jitter>,
    pub strategies: Vec<StrategyKind>,
    pub duration_ns: Ns,
    pub warmup_ns: Ns,
    pub refresh_ns: Ns,
    pub noise: f64,
    pub model_error: f64,
    pub model_error_sweep: Vec<f64>,
    pub timeline_ns: Ns,
    /// hetsched-pf's `replay_events_per_solve` (`None`: the coordinator's
    /// default): the file's, or `hetsched sim run --replay-events`.
    pub replay_events_per_solve: Option<u64>,
    /// hetsched-pf-fluid's `full_resolve_period_ns` (`None`: the
    /// coordinator's default).
    pub full_resolve_period_ns: Option<Ns>,
    /// hetsched-pf's `pick_slice_events` (`None`: 0, whole picks): the
    /// file's, or `hetsched sim run --pick-slice-events`.
    pub pick_slice_events: Option<u64>,
}

impl App {
    /// Execution time on `unit` for `bytes` of input (before noise).
    pub fn exec_ns(&self, unit: UnitId, bytes: u64) -> Option<f64> {
        let mean = self.exec_ns[unit.index()]?;
        Some(mean * self.size_scale(bytes))
    }

    /// A task of `bytes`' execution time over the mean size's, on any unit.
    fn size_scale(&self, bytes: u64) -> f64 {
        let scale = bytes as f64 / self.bytes.mean().max(1.0);
        self.fixed_fraction + (1.0 - self.fixed_fraction) * scale
    }

    /// The work a task of `bytes` carries, in tasks of the mean size: 1
    /// where every task has one size, else its execution time over the
    /// mean size's. The metrics rate apps in it, so that a window holding
    /// an app's smaller tasks does not read as a faster app.
    pub fn nominal_work(&self, bytes: u64) -> f64 {
        match self.bytes {
            BytesDist::Fixed(_) => 1.0,
            BytesDist::Uniform { .. } => self.size_scale(bytes),
        }
    }

    pub fn out_bytes(&self, bytes: u64) -> u64 {
        (bytes as f64 * self.out_ratio) as u64
    }

    /// The unit that runs this app's task fastest when it is alone.
    pub fn fastest_unit(&self) -> UnitId {
        let (i, _) = self
            .exec_ns
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.map(|e| (i, e)))
            .fold(
                (0, f64::INFINITY),
                |best, (i, e)| if e < best.1 { (i, e) } else { best },
            );
        UnitId(i as u16)
    }
}

fn ms_to_ns(ms: f64) -> Ns {
    (ms * 1e6).round() as Ns
}

/// Parses and validates a scenario. `file` is only used in error messages.
pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let raw: ScenarioFile = toml::from_str(text).map_err(|e| ScenarioError {
        file: file.to_string(),
        line: e.span().map(|s| line_of(text, s.start)),
        field: String::new(),
        message: e.message().to_string(),
    })?;
    validate(file, text, raw)
}

fn positive(c: &Checker, path: &[Seg], v: f64) -> Result<f64, ScenarioError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(c.error(path, format!("must be a positive number (got {v})")))
    }
}

fn non_negative(c: &Checker, path: &[Seg], v: f64) -> Result<f64, ScenarioError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(c.error(path, format!("must be zero or positive (got {v})")))
    }
}

fn validate(file: &str, text: &str, raw: ScenarioFile) -> Result<Scenario, ScenarioError> {
    let c = Checker { file, text };
    positive(&c, &[key("duration_s")], raw.duration_s)?;
    non_negative(&c, &[key("warmup_s")], raw.warmup_s)?;
    positive(&c, &[key("view_refresh_ms")], raw.view_refresh_ms)?;
    non_negative(&c, &[key("timeline_s")], raw.timeline_s)?;
    if !(0.0..1.0).contains(&raw.noise) {
        return Err(c.error(&[key("noise")], "must be in [0, 1)"));
    }
    if !(0.0..1.0).contains(&raw.model_error) {
        return Err(c.error(&[key("model_error")], "must be in [0, 1)"));
    }
    if let Some(i) = raw
        .model_error_sweep
        .iter()
        .position(|e| !(0.0..1.0).contains(e))
    {
        return Err(c.error(
            &[key("model_error_sweep"), Seg::Index(i)],
            "must be in [0, 1)",
        ));
    }
    if let Some(v) = raw.full_resolve_period_s {
        non_negative(&c, &[key("full_resolve_period_s")], v)?;
    }
    if raw.replay_events_per_solve == Some(0) {
        return Err(c.error(
            &[key("replay_events_per_solve")],
            "must be positive (0 would judge no optional candidate)",
        ));
    }
    if raw.units.is_empty() {
        return Err(c.error(&[key("units")], "a scenario needs at least one unit"));
    }
    if raw.units.len() > hetsched_core::placement::ImplSet::MAX_UNITS {
        return Err(c.error(&[key("units")], "at most 64 units"));
    }
    if raw.apps.is_empty() {
        return Err(c.error(&[key("apps")], "a scenario needs at least one app"));
    }

    let (machine, unit_policies) = build_machine(&c, &raw.units)?;
    let mut apps = Vec::with_capacity(raw.apps.len());
    for (i, spec) in raw.apps.iter().enumerate() {
        if raw.apps[..i].iter().any(|a| a.name == spec.name) {
            return Err(c.error(
                &[key("apps"), Seg::Index(i), key("name")],
                format!("duplicate app name `{}`", spec.name),
            ));
        }
        apps.push(build_app(&c, i, spec, &machine)?);
    }
    check_shares(&c, &machine, &apps, &unit_policies)?;

    let mut jitter = Vec::new();
    for (i, j) in raw.jitter.iter().enumerate() {
        let p = |k: &str| vec![key("jitter"), Seg::Index(i), key(k)];
        let unit = machine
            .unit_by_name(&j.unit)
            .ok_or_else(|| c.error(&p("unit"), format!("unknown unit `{}`", j.unit)))?
            .id;
        let app = apps
            .iter()
            .position(|a| a.name == j.app)
            .ok_or_else(|| c.error(&p("app"), format!("unknown app `{}`", j.app)))?;
        let min = positive(&c, &p("min_utilisation"), j.min_utilisation)?;
        let max = positive(&c, &p("max_utilisation"), j.max_utilisation)?;
        if min > max || max > 1.0 {
            return Err(c.error(
                &p("max_utilisation"),
                "need 0 < min_utilisation ≤ max_utilisation ≤ 1",
            ));
        }
        jitter.push(Jitter {
            unit,
            app,
            min,
            max,
            period_ns: ms_to_ns(positive(&c, &p("period_ms"), j.period_ms)?),
        });
    }

    let mut strategies = vec![StrategyKind::Native];
    for (i, name) in raw.policies.iter().enumerate() {
        let kind = StrategyKind::parse(name).ok_or_else(|| {
            c.error(
                &[key("policies"), Seg::Index(i)],
                format!(
                    "unknown policy `{name}`; known: {}",
                    StrategyKind::names().join(", ")
                ),
            )
        })?;
        if !strategies.contains(&kind) {
            strategies.push(kind);
        }
    }

    Ok(Scenario {
        name: raw.name,
        description: raw.description,
        machine,
        unit_policies,
        apps,
        jitter,
        strategies,
        duration_ns: ms_to_ns(raw.duration_s * 1e3),
        warmup_ns: ms_to_ns(raw.warmup_s * 1e3),
        refresh_ns: ms_to_ns(raw.view_refresh_ms).max(1),
        noise: raw.noise,
        model_error: raw.model_error,
        model_error_sweep: raw.model_error_sweep,
        timeline_ns: ms_to_ns(raw.timeline_s * 1e3),
        replay_events_per_solve: raw.replay_events_per_solve,
        full_resolve_period_ns: raw.full_resolve_period_s.map(|v| ms_to_ns(v * 1e3)),
        pick_slice_events: raw.pick_slice_events,
    })
}

fn build_machine(
    c: &Checker,
    specs: &[UnitSpec],
) -> Result<(Machine, Vec<PolicyKind>), ScenarioError> {
    let mut machine = Machine::default();
    let mut policies = Vec::new();
    for (i, u) in specs.iter().enumerate() {
        let p = |k: &str| vec![key("units"), Seg::Index(i), key(k)];
        if specs[..i].iter().any(|o| o.name == u.name) {
            return Err(c.error(&p("name"), format!("duplicate unit name `{}`", u.name)));
        }
        let class = UnitClass::parse(&u.class).ok_or_else(|| {
            c.error(
                &p("class"),
                format!(
                    "unknown unit class `{}`; known: cpu, gpu, accelerator, emulated",
                    u.class
                ),
            )
        })?;
        let policy = match &u.policy {
            Some(name) => PolicyKind::parse(name).ok_or_else(|| {
                c.error(
                    &p("policy"),
                    format!("unknown policy `{name}`; known: fifo, priority, share, time-share"),
                )
            })?,
            None if class == UnitClass::Cpu => PolicyKind::TimeShare,
            None => PolicyKind::Fifo,
        };
        if u.slots == 0 {
            return Err(c.error(&p("slots"), "a unit needs at least one slot"));
        }
        let coherent = u.coherent.unwrap_or(class == UnitClass::Cpu);
        let (copy_in, copy_out) = match (&u.copy, coherent) {
            (_, true) => (LinkCost::FREE, LinkCost::FREE),
            (None, false) => {
                return Err(c.error(
                    &p("copy"),
                    "a non-coherent unit needs `copy = { latency_us, in_gb_s, out_gb_s }`",
                ));
            }
            (Some(cs), false) => {
                let cp = |k: &str| vec![key("units"), Seg::Index(i), key("copy"), key(k)];
                let lat = ms_to_ns(non_negative(c, &cp("latency_us"), cs.latency_us)? / 1e3);
                (
                    LinkCost::new(lat, positive(c, &cp("in_gb_s"), cs.in_gb_s)? * 1e9),
                    LinkCost::new(lat, positive(c, &cp("out_gb_s"), cs.out_gb_s)? * 1e9),
                )
            }
        };
        let mut caps = Capabilities::empty();
        for (j, name) in u.caps.iter().enumerate() {
            let cap = Capabilities::parse_name(name).ok_or_else(|| {
                c.error(
                    &[key("units"), Seg::Index(i), key("caps"), Seg::Index(j)],
                    format!("unknown capability `{name}`"),
                )
            })?;
            caps = caps.union(cap);
        }
        let kind = machine.intern_kind(u.kind.as_deref().unwrap_or(&u.name), class);
        machine.units.push(Unit {
            id: UnitId(i as u16),
            name: u.name.clone(),
            kind,
            class,
            caps,
            relative_speed: 1.0,
            coherent,
            copy_in,
            copy_out,
            dispatch_ns: ms_to_ns(non_negative(c, &p("dispatch_us"), u.dispatch_us)? / 1e3),
            slots: u.slots,
            busy_watts: non_negative(c, &p("busy_watts"), u.busy_watts)?,
            idle_watts: non_negative(c, &p("idle_watts"), u.idle_watts)?,
        });
        policies.push(policy);
    }
    Ok((machine, policies))
}

fn build_app(
    c: &Checker,
    i: usize,
    spec: &AppSpec,
    machine: &Machine,
) -> Result<App, ScenarioError> {
    let p = |k: &str| vec![key("apps"), Seg::Index(i), key(k)];
    if spec.copies == 0 {
        return Err(c.error(&p("copies"), "must be at least 1"));
    }
    if spec.in_flight == 0 {
        return Err(c.error(&p("in_flight"), "must be at least 1"));
    }
    let bytes = match (spec.bytes.kib, spec.bytes.min_kib, spec.bytes.max_kib) {
        (Some(k), None, None) => BytesDist::Fixed(k * 1024),
        (None, Some(lo), Some(hi)) if lo <= hi => BytesDist::Uniform {
            min: lo * 1024,
            max: hi * 1024,
        },
        (None, Some(_), Some(_)) => {
            return Err(c.error(&p("bytes"), "min_kib must not exceed max_kib"));
        }
        _ => {
            return Err(c.error(
                &p("bytes"),
                "give either `kib` or both `min_kib` and `max_kib`",
            ));
        }
    };
    non_negative(c, &p("out_ratio"), spec.out_ratio)?;
    if !(0.0..=1.0).contains(&spec.fixed_fraction) {
        return Err(c.error(&p("fixed_fraction"), "must be in [0, 1]"));
    }
    let mut exec_ns = vec![None; machine.units.len()];
    for (unit_name, ms) in &spec.exec_ms {
        let path = vec![key("apps"), Seg::Index(i), key("exec_ms"), key(unit_name)];
        let unit = machine.unit_by_name(unit_name).ok_or_else(|| {
            let known: Vec<&str> = machine.units.iter().map(|u| u.name.as_str()).collect();
            c.error(
                &path,
                format!("unknown unit `{unit_name}`; units: {}", known.join(", ")),
            )
        })?;
        exec_ns[unit.id.index()] = Some(positive(c, &path, *ms)? * 1e6);
    }
    if exec_ns.iter().all(Option::is_none) {
        return Err(c.error(
            &p("exec_ms"),
            format!("app `{}` has no implementation for any unit", spec.name),
        ));
    }
    let class_name = spec.class.as_deref().unwrap_or("normal");
    let mut settings = vec![
        ClientSettings {
            priority: spec.priority,
            ..Default::default()
        };
        machine.units.len()
    ];
    for (unit_name, shares) in &spec.shares {
        let path = vec![key("apps"), Seg::Index(i), key("shares"), key(unit_name)];
        let unit = machine
            .unit_by_name(unit_name)
            .ok_or_else(|| c.error(&path, format!("unknown unit `{unit_name}`")))?;
        let class = match class_name {
            "custom" => ShareClass::Custom { shares: *shares },
            "normal" => ShareClass::Normal { shares: *shares },
            "background" => return Err(c.error(&path, "BACKGROUND apps take no shares")),
            other => {
                return Err(c.error(
                    &p("class"),
                    format!("unknown class `{other}`; known: normal, custom, background"),
                ));
            }
        };
        settings[unit.id.index()].class = class;
    }
    match class_name {
        "background" => settings
            .iter_mut()
            .for_each(|s| s.class = ShareClass::Background),
        "normal" | "custom" => {}
        other => {
            return Err(c.error(
                &p("class"),
                format!("unknown class `{other}`; known: normal, custom, background"),
            ));
        }
    }
    let goal = match spec.goal.as_deref().unwrap_or("latency") {
        "latency" => Goal::MinLatency,
        "throughput" => Goal::MaxThroughput,
        "energy" => Goal::MinEnergy,
        "deadline" => Goal::Deadline {
            deadline_ns: positive(
                c,
                &p("deadline_ms"),
                spec.deadline_ms
                    .ok_or_else(|| c.error(&p("goal"), "goal `deadline` needs `deadline_ms`"))?,
            )? * 1e6,
        },
        other => {
            return Err(c.error(
                &p("goal"),
                format!("unknown goal `{other}`; known: latency, throughput, energy, deadline"),
            ));
        }
    };
    let start_ns = ms_to_ns(non_negative(c, &p("start_s"), spec.start_s)? * 1e3);
    let stop_ns = match spec.stop_s {
        Some(s) if s * 1e9 <= start_ns as f64 => {
            return Err(c.error(&p("stop_s"), "must be after start_s"));
        }
        Some(s) => Some(ms_to_ns(positive(c, &p("stop_s"), s)? * 1e3)),
        None => None,
    };
    let short_lived = match &spec.short_lived {
        None => None,
        Some(s) => {
            let sp = |k: &str| vec![key("apps"), Seg::Index(i), key("short_lived"), key(k)];
            if s.concurrent == 0 {
                return Err(c.error(&sp("concurrent"), "must be at least 1"));
            }
            if s.tasks == 0 {
                return Err(c.error(&sp("tasks"), "must be at least 1"));
            }
            Some(ShortLived {
                concurrent: s.concurrent,
                tasks: s.tasks,
                gap_ns: ms_to_ns(non_negative(c, &sp("gap_ms"), s.gap_ms)?),
            })
        }
    };
    if !(0.0..0.9).contains(&spec.adapt_step) {
        return Err(c.error(&p("adapt_step"), "must be in [0, 0.9)"));
    }
    let throughput_goal = match spec.throughput_goal {
        Some(t) => Some(ThroughputGoal {
            tasks_per_s: positive(c, &p("throughput_goal"), t)?,
            adapt_step: spec.adapt_step,
        }),
        None if spec.adapt_step > 0.0 => {
            return Err(c.error(&p("adapt_step"), "needs a `throughput_goal` to adapt to"));
        }
        None => None,
    };
    Ok(App {
        name: spec.name.clone(),
        copies: spec.copies,
        in_flight: spec.in_flight,
        bytes,
        out_ratio: spec.out_ratio,
        persistent_data: spec.persistent_data,
        fixed_fraction: spec.fixed_fraction,
        exec_ns,
        settings,
        goal,
        start_ns,
        stop_ns,
        short_lived,
        pretrained: spec.pretrained,
        throughput_goal,
    })
}

/// Registers every app with each unit's real policy, so impossible share
/// settings fail here with the policy's own message.
fn check_shares(
    c: &Checker,
    machine: &Machine,
    apps: &[App],
    policies: &[PolicyKind],
) -> Result<(), ScenarioError> {
    for (unit, kind) in machine.units.iter().zip(policies) {
        let mut policy = kind.build(unit.slots);
        let mut client = 0u32;
        for (i, app) in apps.iter().enumerate() {
            for _ in 0..app.copies {
                if let Err(e) =
                    policy.set_client(ClientId(client), app.settings[unit.id.index()], 0)
                {
                    let path = vec![key("apps"), Seg::Index(i), key("shares"), key(&unit.name)];
                    return Err(c.error(&path, format!("on unit `{}`: {e}", unit.name)));
                }
                client += 1;
            }
        }
    }
    Ok(())
}
