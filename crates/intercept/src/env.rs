//! What `hetsched run` hands an intercepted program through its
//! environment.

use hetsched_protocol::byte_size::parse_byte_size;

/// The device-memory cap `hetsched run --device-memory` sets, as a size
/// (`2G`).
pub const DEVICE_MEMORY_ENV: &str = "HETSCHED_DEVICE_MEMORY";

/// The interposer's settings from the environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterceptEnv {
    /// Cap on the device memory the program holds per device, bytes.
    pub device_memory_limit: Option<u64>,
}

impl InterceptEnv {
    /// Reads the process environment; a malformed value is reported and
    /// ignored (an interposer must never stop the program).
    pub fn from_process() -> InterceptEnv {
        Self::parse(std::env::var(DEVICE_MEMORY_ENV).ok().as_deref()).unwrap_or_else(|e| {
            crate::notice::once("env", || format!("{e}; no device-memory cap"));
            InterceptEnv::default()
        })
    }

    /// Parses `HETSCHED_DEVICE_MEMORY`'s value.
    pub fn parse(device_memory: Option<&str>) -> Result<InterceptEnv, String> {
        let device_memory_limit = match device_memory.map(str::trim) {
            None | Some("") => None,
            Some(v) => match parse_byte_size(v) {
                Ok(0) => return Err(format!("{DEVICE_MEMORY_ENV}={v} is zero")),
                Ok(b) => Some(b),
                Err(e) => return Err(format!("{DEVICE_MEMORY_ENV}: {e}")),
            },
        };
        Ok(InterceptEnv {
            device_memory_limit,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_parse_and_bad_ones_are_refused() {
        assert_eq!(InterceptEnv::parse(None).unwrap().device_memory_limit, None);
        assert_eq!(
            InterceptEnv::parse(Some("2G")).unwrap().device_memory_limit,
            Some(2 << 30)
        );
        assert!(InterceptEnv::parse(Some("0")).is_err());
        assert!(InterceptEnv::parse(Some("lots")).is_err());
    }
}
