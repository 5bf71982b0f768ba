//! Sizes as people write them: `2G`, `512M`, `1.5GiB`, `4096`. Used by
//! `hetsched run --device-memory`, the daemon's `[device_memory]` table
//! and the interposers' `HETSCHED_DEVICE_MEMORY`.

/// Parses a size in bytes. A plain number is bytes; the suffixes `K`,
/// `M`, `G` and `T` (optionally followed by `i`, `iB` or `B`, any case)
/// are powers of 1024, as device memory is counted. Fractions are allowed
/// with a suffix (`1.5G`).
pub fn parse_byte_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "ki" | "kib" | "kb" => 10,
        "m" | "mi" | "mib" | "mb" => 20,
        "g" | "gi" | "gib" | "gb" => 30,
        "t" | "ti" | "tib" | "tb" => 40,
        other => {
            return Err(format!(
                "`{text}`: unknown size suffix `{other}` (use K, M, G or T, powers of 1024)"
            ));
        }
    };
    if !number.contains('.') {
        // Whole numbers exactly (an f64 would round above 2^53).
        let whole: u64 = number
            .parse()
            .map_err(|_| format!("`{text}` is not a size (write e.g. 2G, 512M or 4096)"))?;
        return whole
            .checked_mul(1u64 << shift)
            .ok_or_else(|| format!("`{text}` is out of range"));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size (write e.g. 2G, 512M or 4096)"))?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes >= u64::MAX as f64 {
        return Err(format!("`{text}` is out of range"));
    }
    if shift == 0 && number.contains('.') {
        return Err(format!("`{text}`: a number of bytes has no fraction"));
    }
    Ok(bytes.round() as u64)
}

/// `bytes` the way [`parse_byte_size`] reads it back, in the largest unit
/// it divides evenly (`2G`, `1536M`, `100`).
pub fn format_byte_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_the_usual_spellings() {
        assert_eq!(parse_byte_size("4096"), Ok(4096));
        assert_eq!(parse_byte_size("2G"), Ok(2 << 30));
        assert_eq!(parse_byte_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_byte_size("1.5g"), Ok(3 << 29));
        assert_eq!(parse_byte_size(" 64k "), Ok(64 << 10));
    }

    #[test]
    fn refuses_what_is_not_a_size() {
        for bad in ["", "G", "2X", "-1", "1.5", "2 GB extra", "1e3"] {
            assert!(parse_byte_size(bad).is_err(), "{bad} was accepted");
        }
    }

    proptest! {
        #[test]
        fn formatted_sizes_read_back(bytes in any::<u64>().prop_map(|b| b >> 4)) {
            prop_assert_eq!(parse_byte_size(&format_byte_size(bytes)), Ok(bytes));
        }
    }
}
