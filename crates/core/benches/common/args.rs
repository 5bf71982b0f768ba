//! The filter argument of the benches that print their own lines rather
//! than run under criterion.

/// Criterion's options that take a value: `cargo bench --benches -- …`
/// passes them to this bench too.
const VALUED_OPTIONS: [&str; 13] = [
    "--warm-up-time",
    "--measurement-time",
    "--sample-size",
    "--save-baseline",
    "--baseline",
    "--load-baseline",
    "--noise-threshold",
    "--confidence-level",
    "--significance-level",
    "--nresamples",
    "--output-format",
    "--plotting-backend",
    "--profile-time",
];

/// The first argument that is neither an option (`cargo bench` passes
/// `--bench`) nor an option's value.
pub fn filter(args: impl Iterator<Item = String>) -> Option<String> {
    let mut args = args;
    while let Some(a) = args.next() {
        if VALUED_OPTIONS.contains(&a.as_str()) {
            args.next();
        } else if !a.starts_with('-') {
            return Some(a);
        }
    }
    None
}
