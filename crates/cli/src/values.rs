//! Checked numbers for command-line options (clap `value_parser`s).
//!
//! `Duration::from_secs_f64` panics on NaN, infinities, negative numbers
//! and more seconds than a `u64` holds, and adding a huge duration to an
//! `Instant` panics too; `"nan".parse::<f64>()` succeeds. Options that
//! become durations go through these parsers, so `--seconds nan` is a
//! usage error naming the option instead of a panic.

/// The longest time an option may ask for: a year, in seconds.
pub const MAX_SECONDS: f64 = 365.0 * 86_400.0;

/// A finite number in `lo..=hi` (`lo` itself only if `lo_ok`), in `unit`.
fn in_range(s: &str, lo: f64, lo_ok: bool, hi: f64, unit: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number"))?;
    if !v.is_finite() {
        return Err(format!("{s} is not a finite number of {unit}"));
    }
    let above_lo = if lo_ok { v >= lo } else { v > lo };
    if !above_lo || v > hi {
        let open = if lo_ok { "" } else { " (exclusive)" };
        return Err(format!("{s} {unit} is outside {lo}{open}..={hi} {unit}"));
    }
    Ok(v)
}

/// A positive number of seconds, at most [`MAX_SECONDS`] (`--seconds`).
pub fn seconds(s: &str) -> Result<f64, String> {
    in_range(s, 0.0, false, MAX_SECONDS, "s")
}

/// A positive number of milliseconds, at most a year (`--exec-ms`).
pub fn positive_ms(s: &str) -> Result<f64, String> {
    in_range(s, 0.0, false, MAX_SECONDS * 1e3, "ms")
}

/// A positive number of microseconds, at most a year (`--kernel-us`,
/// `--spin-us`).
pub fn positive_us(s: &str) -> Result<f64, String> {
    in_range(s, 0.0, false, MAX_SECONDS * 1e6, "µs")
}

/// Milliseconds, zero or more, at most a year (`--think-ms`).
pub fn ms(s: &str) -> Result<f64, String> {
    in_range(s, 0.0, true, MAX_SECONDS * 1e3, "ms")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn durations_that_would_panic_are_refused() {
        for bad in [
            "nan", "NaN", "inf", "-inf", "infinity", "-1", "0", "1e300", "x", "",
        ] {
            let err = seconds(bad).unwrap_err();
            assert!(!err.is_empty(), "{bad}");
        }
        assert!(seconds("nan").unwrap_err().contains("not a finite number"));
        assert!(seconds("-2").unwrap_err().contains("outside 0 (exclusive)"));
        assert!(seconds("ten").unwrap_err().contains("not a number"));
        assert_eq!(seconds("0.25"), Ok(0.25));
        assert_eq!(seconds(" 3 "), Ok(3.0));
        // The largest accepted value still makes a deadline.
        let top = seconds(&MAX_SECONDS.to_string()).unwrap();
        let _ = Instant::now() + Duration::from_secs_f64(top);
    }

    #[test]
    fn milliseconds_are_checked_the_same_way() {
        assert_eq!(ms("0"), Ok(0.0));
        assert!(ms("-0.5").is_err());
        assert!(ms("nan").is_err());
        assert!(positive_ms("0").is_err());
        assert_eq!(positive_ms("5"), Ok(5.0));
        assert!(positive_ms("inf").is_err());
        let top = ms(&(MAX_SECONDS * 1e3).to_string()).unwrap();
        let _ = Duration::from_secs_f64(top / 1e3);
        assert!(ms(&(MAX_SECONDS * 2e3).to_string()).is_err());
    }
}
