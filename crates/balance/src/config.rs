//! `hetsched balance` configuration (TOML, `--config`).
//!
//! ```toml
//! epoch_ms = 60
//! policy = "kinship"              # linux-default | gts | smartbalance | kinship
//! objective = "ips-per-watt"      # or "throughput" (SmartBalance)
//! min_gain = 0.05                 # hysteresis: apply only predicted gains above 5 %
//! min_epochs_between_moves = 3    # … and move one thread at most every 3 epochs
//! state_file = "/run/hetsched/balance-state.json"  # journal of changed threads
//!
//! [[slow_cores]]                  # emulated little core (as for the daemon)
//! cpus = [1]
//! speed = 0.4
//! kind = "little"
//!
//! [[core_caps]]                   # functional asymmetry: no AES on CPU 1
//! cpus = [1]
//! without = ["aes"]
//!
//! [power.little]                  # p = watts_per_ipc·IPC + static_watts
//! watts_per_ipc = 0.6
//! static_watts = 0.1
//! sleep_watts = 0.01              # a core with no thread
//!
//! [[hints]]                       # Kinship hints by thread name prefix
//! comm = "aes"
//! category = "crypto"             # general | vector | crypto | float64
//! hint = "mostly-cpu"             # unknown | mostly-cpu | mostly-io | mostly-mem
//! ```

use hetsched_core::balance::{Category, Hint, PowerModel};
use hetsched_core::unit::Capabilities;
use hetsched_platform::SlowCoreConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The four policies, by the names the simulator and CLI use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyName {
    LinuxDefault,
    Gts,
    #[default]
    Smartbalance,
    Kinship,
}

impl PolicyName {
    pub const ALL: [PolicyName; 4] = [
        PolicyName::LinuxDefault,
        PolicyName::Gts,
        PolicyName::Smartbalance,
        PolicyName::Kinship,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PolicyName::LinuxDefault => "linux-default",
            PolicyName::Gts => "gts",
            PolicyName::Smartbalance => "smartbalance",
            PolicyName::Kinship => "kinship",
        }
    }

    pub fn parse(s: &str) -> Option<PolicyName> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ObjectiveName {
    #[default]
    IpsPerWatt,
    Throughput,
}

/// Per-CPU capability overrides.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreCapsConfig {
    pub cpus: Vec<usize>,
    #[serde(default)]
    pub without: Vec<String>,
    #[serde(default)]
    pub with: Vec<String>,
}

/// A hint for threads whose name (`comm`) starts with `comm`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HintConfig {
    pub comm: String,
    /// `general`, `vector`, `crypto` or `float64`.
    #[serde(default = "general")]
    pub category: String,
    /// `unknown`, `mostly-cpu`, `mostly-io` or `mostly-mem`.
    #[serde(default = "unknown")]
    pub hint: String,
}

fn general() -> String {
    "general".into()
}

fn unknown() -> String {
    "unknown".into()
}

impl HintConfig {
    pub fn category(&self) -> Category {
        Category::parse(&self.category).expect("validated")
    }

    pub fn hint(&self) -> Hint {
        Hint::parse(&self.hint).expect("validated")
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BalanceConfig {
    pub epoch_ms: u64,
    pub policy: PolicyName,
    pub objective: ObjectiveName,
    pub min_gain: f64,
    pub min_epochs_between_moves: u32,
    pub slow_cores: Vec<SlowCoreConfig>,
    pub core_caps: Vec<CoreCapsConfig>,
    pub power: BTreeMap<String, PowerModel>,
    pub hints: Vec<HintConfig>,
    /// Calibrated predictor (`hetsched balance calibrate` writes it);
    /// default: `$XDG_CACHE_HOME/hetsched/balance-model.json`.
    pub model: Option<PathBuf>,
    /// Where the balancer journals the threads it changed, for the
    /// restore after a crash; default: `/run/hetsched/balance-state.json`
    /// for root (see [`crate::journal::default_path`]).
    pub state_file: Option<PathBuf>,
}

impl Default for BalanceConfig {
    fn default() -> Self {
        BalanceConfig {
            epoch_ms: 60,
            policy: PolicyName::default(),
            objective: ObjectiveName::default(),
            min_gain: 0.05,
            min_epochs_between_moves: 3,
            slow_cores: Vec::new(),
            core_caps: Vec::new(),
            power: BTreeMap::new(),
            hints: Vec::new(),
            model: None,
            state_file: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("{0}: {1}")]
    Parse(PathBuf, String),
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

impl BalanceConfig {
    pub fn load(path: &Path) -> Result<BalanceConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read(path.into(), e))?;
        Self::parse(&text).map_err(|e| match e {
            ConfigError::Parse(_, m) => ConfigError::Parse(path.into(), m),
            other => other,
        })
    }

    /// Parses and checks a configuration. Unknown keys, capability names
    /// and impossible values are errors naming the field.
    pub fn parse(text: &str) -> Result<BalanceConfig, ConfigError> {
        let cfg: BalanceConfig =
            toml::from_str(text).map_err(|e| ConfigError::Parse(PathBuf::new(), e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.epoch_ms == 0 || self.epoch_ms > 60_000 {
            return Err(invalid(
                "epoch_ms",
                format!("is {}; it must be in 1..=60000", self.epoch_ms),
            ));
        }
        if !(0.0..1.0).contains(&self.min_gain) {
            return Err(invalid(
                "min_gain",
                format!("is {}; it must be in [0, 1)", self.min_gain),
            ));
        }
        for (i, c) in self.core_caps.iter().enumerate() {
            if c.cpus.is_empty() {
                return Err(invalid(format!("core_caps[{i}].cpus"), "is empty"));
            }
            for name in c.without.iter().chain(&c.with) {
                Capabilities::parse_name(name).ok_or_else(|| {
                    invalid(
                        format!("core_caps[{i}]"),
                        format!("unknown capability `{name}`"),
                    )
                })?;
            }
        }
        for (kind, p) in &self.power {
            let figures = [p.watts_per_ipc, p.static_watts, p.sleep_watts];
            if !figures.iter().all(|w| w.is_finite() && *w >= 0.0) {
                return Err(invalid(
                    format!("power.{kind}"),
                    "watts_per_ipc, static_watts and sleep_watts must be finite and ≥ 0",
                ));
            }
        }
        for (i, h) in self.hints.iter().enumerate() {
            if h.comm.is_empty() {
                return Err(invalid(format!("hints[{i}].comm"), "is empty"));
            }
            if Category::parse(&h.category).is_none() {
                return Err(invalid(
                    format!("hints[{i}].category"),
                    format!("unknown category `{}`", h.category),
                ));
            }
            if Hint::parse(&h.hint).is_none() {
                return Err(invalid(
                    format!("hints[{i}].hint"),
                    format!("unknown hint `{}`", h.hint),
                ));
            }
        }
        Ok(())
    }

    /// The hint for a thread named `comm`: the longest matching prefix.
    pub fn hint_for(&self, comm: &str) -> Option<&HintConfig> {
        self.hints
            .iter()
            .filter(|h| comm.starts_with(&h.comm))
            .max_by_key(|h| h.comm.len())
    }

    pub fn state_path(&self) -> PathBuf {
        self.state_file
            .clone()
            .unwrap_or_else(crate::journal::default_path)
    }

    pub fn model_path(&self) -> Option<PathBuf> {
        self.model.clone().or_else(|| {
            let base = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            Some(base.join("hetsched").join("balance-model.json"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let doc = include_str!("config.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("//! ```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| l.trim_start_matches("//!").trim_start_matches(' '))
            .collect::<Vec<_>>()
            .join("\n");
        let cfg = BalanceConfig::parse(&example).unwrap();
        assert_eq!(cfg.policy, PolicyName::Kinship);
        assert_eq!(cfg.core_caps[0].without, vec!["aes".to_string()]);
        assert_eq!(cfg.power["little"].watts_per_ipc, 0.6);
        assert_eq!(
            cfg.hint_for("aes-worker").unwrap().category(),
            Category::CRYPTO
        );
        assert!(cfg.hint_for("bash").is_none());
    }

    #[test]
    fn typos_and_impossible_values_name_the_field() {
        let err = |t: &str| BalanceConfig::parse(t).unwrap_err().to_string();
        assert!(
            err("epoch_msec = 5").contains("epoch_msec"),
            "{}",
            err("epoch_msec = 5")
        );
        assert!(err("epoch_ms = 0").contains("epoch_ms"));
        assert!(err("policy = \"fastest\"").contains("fastest"));
        assert!(err("min_gain = 1.5").contains("min_gain"));
        assert!(err("[[core_caps]]\ncpus = [1]\nwithout = [\"aes-ni\"]").contains("aes-ni"));
        let bad_power = "[power.big]\nwatts_per_ipc = -1\nstatic_watts = 0\nsleep_watts = 0";
        assert!(err(bad_power).contains("power.big"));
        assert!(err("[[hints]]\ncomm = \"x\"\ncategory = \"gpu\"").contains("gpu"));
    }
}
