//! Errors of discovery, configuration and calibration.
//!
//! Every variant names what was wrong and where, so that a daemon refusing to
//! start can print the error alone and the operator knows what to edit.

use std::path::PathBuf;
use thiserror::Error;

/// Why an emulated unit's configuration was refused.
#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    /// A field holds a value outside what the field allows.
    #[error("emulated unit `{unit}`: field `{field}` {reason}")]
    Invalid {
        /// The unit's name (or `#index` when the name itself is unusable).
        unit: String,
        field: &'static str,
        reason: String,
    },
    /// Two units (emulated or discovered CPU kinds) carry the same name.
    #[error("duplicate unit name `{name}`: unit names must be unique in the machine")]
    DuplicateName { name: String },
    /// One kind name is used with two different unit classes.
    #[error(
        "emulated unit `{unit}`: kind `{kind}` is already a {existing} kind and cannot also be {requested}"
    )]
    KindClassClash {
        unit: String,
        kind: String,
        existing: &'static str,
        requested: &'static str,
    },
}

/// Why discovery or calibration failed.
#[derive(Debug, Error)]
pub enum PlatformError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The machine would hold more units or kinds than the core ids can number.
    #[error("too many units ({0}); at most 65535 are supported")]
    TooManyUnits(usize),
    /// Calibration could not run (for example no thread could be started).
    #[error("calibration failed: {0}")]
    Calibration(String),
    /// Reading or writing the calibration cache failed.
    #[error("calibration cache `{path}`: {source}")]
    Cache {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
