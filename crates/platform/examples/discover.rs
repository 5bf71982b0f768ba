//! Prints what discovery finds on this machine.
//!
//! `cargo run -p hetsched-platform --example discover [--json] [CACHE.json]`

use hetsched_platform::{PlatformConfig, discover};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let config = PlatformConfig {
        calibration_cache: args.iter().find(|a| !a.starts_with("--")).map(Into::into),
        ..PlatformConfig::default()
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
