//! Where the daemon listens and what a launched program asks for, as the
//! environment says.

use crate::message::{SettingsRequest, WireClass};
use std::path::PathBuf;

/// Socket path: `$HETSCHED_SOCKET`, else `/run/hetsched/hetsched.sock` for
/// root, else `$XDG_RUNTIME_DIR/hetsched.sock` (or `/tmp/hetsched-UID.sock`
/// when no runtime directory is set).
pub fn default_socket_path() -> PathBuf {
    if let Some(p) = std::env::var_os("HETSCHED_SOCKET").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let uid = rustix::process::getuid();
    if uid.is_root() {
        return PathBuf::from("/run/hetsched/hetsched.sock");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|p| !p.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("hetsched.sock"),
        None => PathBuf::from(format!("/tmp/hetsched-{}.sock", uid.as_raw())),
    }
}

/// Settings a program was started with (`hetsched run` sets these):
/// `HETSCHED_CLASS` (`custom`, `normal`, `background`), `HETSCHED_SHARES`,
/// `HETSCHED_PRIORITY`. Errors name the variable and the bad value.
pub fn requested_settings_from_env() -> Result<SettingsRequest, String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let shares = match var("HETSCHED_SHARES") {
        Some(v) => Some(
            v.trim()
                .parse::<u32>()
                .map_err(|_| format!("HETSCHED_SHARES={v:?} is not a whole number"))?,
        ),
        None => None,
    };
    let class = match var("HETSCHED_CLASS") {
        Some(v) => Some(parse_class(v.trim(), shares)?),
        None if shares.is_some() => {
            return Err("HETSCHED_SHARES is set but HETSCHED_CLASS is not".into());
        }
        None => None,
    };
    let priority = match var("HETSCHED_PRIORITY") {
        Some(v) => Some(
            v.trim()
                .parse::<i32>()
                .map_err(|_| format!("HETSCHED_PRIORITY={v:?} is not an integer"))?,
        ),
        None => None,
    };
    Ok(SettingsRequest { class, priority })
}

/// Parses a class name with its shares (`background` takes none).
pub fn parse_class(name: &str, shares: Option<u32>) -> Result<WireClass, String> {
    match (name.to_ascii_lowercase().as_str(), shares) {
        ("custom", Some(s)) => Ok(WireClass::Custom(s)),
        ("custom", None) => Err("class custom needs a number of shares".into()),
        ("normal", s) => Ok(WireClass::Normal(
            s.unwrap_or(hetsched_core::policy::DEFAULT_NORMAL_SHARES),
        )),
        ("background", None) => Ok(WireClass::Background),
        ("background", Some(_)) => Err("class background takes no shares".into()),
        (other, _) => Err(format!(
            "unknown class {other:?}: expected custom, normal or background"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_parse_with_clear_errors() {
        assert_eq!(parse_class("custom", Some(40)), Ok(WireClass::Custom(40)));
        assert_eq!(parse_class("Normal", None), Ok(WireClass::Normal(10)));
        assert_eq!(parse_class("background", None), Ok(WireClass::Background));
        assert!(parse_class("custom", None).unwrap_err().contains("shares"));
        assert!(parse_class("gold", None).unwrap_err().contains("gold"));
        assert!(
            parse_class("background", Some(3))
                .unwrap_err()
                .contains("no shares")
        );
    }
}
