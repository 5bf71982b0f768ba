//! Package energy from RAPL through the Linux powercap interface, when the
//! machine exposes it (`/sys/class/powercap/intel-rapl:N/energy_uj`; AMD
//! Zen exposes the same files). Calibration fits each kind's power model
//! from it; the balancer reports measured package power beside the model.
//! Where it is absent (this VM) the per-kind model stands alone, and
//! everything says so.

use std::path::{Path, PathBuf};

pub const POWERCAP_ROOT: &str = "/sys/class/powercap";

/// The package-level RAPL domains of the machine.
#[derive(Clone, Debug)]
pub struct Rapl {
    domains: Vec<Domain>,
}

#[derive(Clone, Debug)]
struct Domain {
    energy: PathBuf,
    /// The counter wraps at this value, µJ.
    max_uj: u64,
}

/// A reading of every domain.
#[derive(Clone, Debug)]
pub struct EnergySample(Vec<u64>);

impl Rapl {
    /// The package domains under `root` (`intel-rapl:0`, `intel-rapl:1`,
    /// …; sub-domains such as `intel-rapl:0:0` are parts of a package and
    /// are skipped). `None` when there is none, or none is readable (the
    /// files are root-only on recent kernels).
    pub fn open(root: &Path) -> Option<Rapl> {
        let mut domains: Vec<Domain> = std::fs::read_dir(root)
            .ok()?
            .filter_map(|e| {
                let e = e.ok()?;
                let name = e.file_name().to_str()?.to_string();
                let idx = name.strip_prefix("intel-rapl:")?;
                if idx.contains(':') {
                    return None;
                }
                let dir = e.path();
                let energy = dir.join("energy_uj");
                read_u64(&energy)?;
                let max_uj = read_u64(&dir.join("max_energy_range_uj")).unwrap_or(u64::MAX);
                Some(Domain { energy, max_uj })
            })
            .collect();
        domains.sort_by(|a, b| a.energy.cmp(&b.energy));
        (!domains.is_empty()).then_some(Rapl { domains })
    }

    pub fn sample(&self) -> Option<EnergySample> {
        self.domains
            .iter()
            .map(|d| read_u64(&d.energy))
            .collect::<Option<Vec<_>>>()
            .map(EnergySample)
    }

    /// Joules used between two samples, all packages together, allowing
    /// for one wrap of each counter.
    pub fn joules(&self, before: &EnergySample, after: &EnergySample) -> f64 {
        self.domains
            .iter()
            .zip(before.0.iter().zip(&after.0))
            .map(|(d, (&b, &a))| {
                let uj = if a >= b {
                    a - b
                } else {
                    d.max_uj.saturating_sub(b) + a
                };
                uj as f64 * 1e-6
            })
            .sum()
    }
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(root: &Path, name: &str, uj: u64, max: u64) {
        let d = root.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("energy_uj"), uj.to_string()).unwrap();
        std::fs::write(d.join("max_energy_range_uj"), max.to_string()).unwrap();
    }

    #[test]
    fn packages_are_summed_and_a_wrap_is_counted_once() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Rapl::open(dir.path()).is_none(), "no domains, no RAPL");
        domain(dir.path(), "intel-rapl:0", 1_000_000, 10_000_000);
        domain(dir.path(), "intel-rapl:0:0", 5, 10_000_000); // a core sub-domain
        domain(dir.path(), "intel-rapl:1", 9_500_000, 10_000_000);
        let rapl = Rapl::open(dir.path()).unwrap();
        let before = rapl.sample().unwrap();
        domain(dir.path(), "intel-rapl:0", 3_000_000, 10_000_000);
        domain(dir.path(), "intel-rapl:1", 500_000, 10_000_000); // wrapped
        let after = rapl.sample().unwrap();
        assert!((rapl.joules(&before, &after) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn this_machine_either_has_readable_rapl_or_says_none() {
        // Either answer is fine; reading must not fail in between.
        if let Some(r) = Rapl::open(Path::new(POWERCAP_ROOT)) {
            let a = r.sample().unwrap();
            let b = r.sample().unwrap();
            assert!(r.joules(&a, &b) >= 0.0);
        }
    }
}
