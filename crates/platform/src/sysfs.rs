//! CPU facts from Linux sysfs (`/sys/devices/system/cpu`).
//!
//! Used twice: to add per-CPU capacity and maximum frequency to what hwloc
//! found (hwloc reports them per kind at best), and as the whole source when
//! hwloc cannot load a topology. Every file is optional: virtual machines and
//! containers routinely lack `cpu_capacity` and `cpufreq`. The root is a
//! parameter so tests can build a fake big.LITTLE tree.

use crate::probed::{CacheSizes, RawPu};
use std::fs;
use std::path::Path;

/// The real sysfs CPU directory.
pub const SYSFS_CPU_ROOT: &str = "/sys/devices/system/cpu";

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

fn read_u64(path: &Path) -> Option<u64> {
    read_trimmed(path)?.parse().ok()
}

/// `cpuN/cpu_capacity`: the kernel's relative compute capacity (max 1024).
pub fn capacity(root: &Path, cpu: usize) -> Option<u32> {
    read_u64(&root.join(format!("cpu{cpu}/cpu_capacity")))
        .and_then(|v| u32::try_from(v).ok())
        .filter(|&v| v > 0)
}

/// `cpuN/cpufreq/cpuinfo_max_freq`, in kHz.
pub fn max_freq_khz(root: &Path, cpu: usize) -> Option<u64> {
    read_u64(&root.join(format!("cpu{cpu}/cpufreq/cpuinfo_max_freq"))).filter(|&v| v > 0)
}

/// Parses a kernel CPU list such as `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// The online CPUs, from `online`.
pub fn online_cpus(root: &Path) -> Option<Vec<usize>> {
    parse_cpu_list(&read_trimmed(&root.join("online"))?).filter(|v| !v.is_empty())
}

/// Parses a sysfs cache size such as `32K`, `1024K` or `16M`.
fn parse_size(s: &str) -> Option<u64> {
    let (digits, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok().map(|v| v * mult)
}

/// Data (or unified) cache sizes seen by `cpu`, from `cpuN/cache/indexK`.
pub fn caches(root: &Path, cpu: usize) -> CacheSizes {
    let mut sizes = CacheSizes::default();
    let dir = root.join(format!("cpu{cpu}/cache"));
    let Ok(entries) = fs::read_dir(&dir) else {
        return sizes;
    };
    for entry in entries.flatten() {
        let p = entry.path();
        let (Some(level), Some(ty), Some(size)) = (
            read_u64(&p.join("level")),
            read_trimmed(&p.join("type")),
            read_trimmed(&p.join("size")).and_then(|s| parse_size(&s)),
        ) else {
            continue;
        };
        if ty == "Instruction" {
            continue;
        }
        match level {
            1 => sizes.l1d = Some(size),
            2 => sizes.l2 = Some(size),
            3 => sizes.l3 = Some(size),
            _ => {}
        }
    }
    sizes
}

fn topology_id(root: &Path, cpu: usize, file: &str) -> Option<usize> {
    read_trimmed(&root.join(format!("cpu{cpu}/topology/{file}")))?
        .parse()
        .ok()
}

/// PUs as sysfs sees them, for when hwloc is unavailable. Falls back to
/// `0..available_parallelism` when even `online` is missing.
pub(crate) fn probe_pus(root: &Path) -> (Vec<RawPu>, Option<String>) {
    let (cpus, note) = match online_cpus(root) {
        Some(c) => (c, None),
        None => {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            (
                (0..n).collect(),
                Some(format!(
                    "{}/online unreadable: assuming CPUs 0..{n} from available_parallelism",
                    root.display()
                )),
            )
        }
    };
    let pus = cpus
        .into_iter()
        .map(|cpu| RawPu {
            os_index: cpu,
            core: topology_id(root, cpu, "core_id"),
            package: topology_id(root, cpu, "physical_package_id"),
            caches: caches(root, cpu),
            hw_kind: None,
        })
        .collect();
    (pus, note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("0\n"), Some(vec![0]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("32K"), Some(32 << 10));
        assert_eq!(parse_size("16M"), Some(16 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("K"), None);
    }
}
