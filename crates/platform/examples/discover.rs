//! Prints what discovery finds on this machine.
//!
//! `cargo run -p hetsched-platform --example discover [--json] [CONFIG.toml]`
//!
//! CONFIG.toml is a `PlatformConfig`: `include_cpus`, `calibration_cache`
//! and `[[emulated]]` units.

use hetsched_platform::{PlatformConfig, discover};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let config: PlatformConfig = match args.iter().find(|a| !a.starts_with("--")) {
        Some(path) => toml::from_str(&std::fs::read_to_string(path)?)?,
        None => PlatformConfig::default(),
    };
    let start = std::time::Instant::now();
    let platform = discover(&config)?;
    let took = start.elapsed();
    if json {
        println!("{}", serde_json::to_string_pretty(&platform)?);
    } else {
        print!("{platform}");
        println!("discovery took {:.0} ms", took.as_secs_f64() * 1e3);
    }
    Ok(())
}
