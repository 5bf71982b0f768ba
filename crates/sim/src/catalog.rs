//! The scenarios that ship with hetsched (from `scenarios/`, compiled in so
//! `hetsched sim` works from any directory), and loading by name or path.

use crate::scenario::{self, Scenario, ScenarioError};
use std::path::Path;

macro_rules! builtin {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../../scenarios/", $name, ".toml")))),*]
    };
}

/// Built-in scenarios: (name, TOML text).
pub const BUILTIN: &[(&str, &str)] = builtin!(
    "rinnegan-contention",
    "rinnegan-starpu",
    "rinnegan-shares",
    "rinnegan-short-lived",
    "rinnegan-ping-pong",
    "rinnegan-data-movement",
    "rinnegan-goals",
    "asym-fast-cores",
    "pf-arrivals",
    "random-8apps-4gpus-2kinds-seed1",
    "random-8apps-8gpus-2kinds-seed1",
    "random-32apps-4gpus-2kinds-seed1",
    "random-32apps-8gpus-2kinds-seed1",
    "random-128apps-4gpus-2kinds-seed1",
    "random-128apps-8gpus-2kinds-seed1",
);

/// Every built-in scenario's name: task placement (TOML), thread balance
/// and Pegasus's accelerator backend (`hetsched sim list` describes them).
pub fn all_names() -> Vec<&'static str> {
    BUILTIN
        .iter()
        .map(|(n, _)| *n)
        .chain(crate::balance::SCENARIOS.iter().map(|(n, _)| *n))
        .chain(crate::pegasus::SCENARIOS.iter().map(|(n, _)| *n))
        .collect()
}

/// Loads a built-in scenario by name, or a scenario file by path.
pub fn load(name_or_path: &str) -> Result<Scenario, ScenarioError> {
    if let Some((name, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
        return scenario::parse(&format!("scenarios/{name}.toml"), text);
    }
    let path = Path::new(name_or_path);
    match std::fs::read_to_string(path) {
        Ok(text) => scenario::parse(name_or_path, &text),
        Err(e) => Err(ScenarioError {
            file: name_or_path.to_string(),
            line: None,
            field: String::new(),
            message: format!(
                "not a built-in scenario ({}) and not a readable file: {e}",
                all_names().join(", ")
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_scenario_parses() {
        for (name, text) in BUILTIN {
            let sc = scenario::parse(name, text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(&sc.name, name, "file name and `name` field agree");
        }
    }

    #[test]
    fn an_unknown_name_lists_every_builtin_kind_of_scenario() {
        let e = load("no-such-scenario").unwrap_err().to_string();
        for name in all_names() {
            assert!(e.contains(name), "{name} missing from: {e}");
        }
        assert_eq!(
            all_names().len(),
            BUILTIN.len() + crate::balance::SCENARIOS.len() + crate::pegasus::SCENARIOS.len()
        );
    }
}
