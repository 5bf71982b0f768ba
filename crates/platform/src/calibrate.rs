//! Calibration of CPU kinds: dispatch overhead and memory-copy bandwidth.
//!
//! Placement charges every task `dispatch + copy + exec`, so the dispatch
//! term must be this machine's, not a guess. It is measured the way the
//! runtime's CPU executor dispatches: hand a closure to a worker thread
//! pinned to a PU of the kind and wait for its answer. Emulated units are
//! not measured — their configured numbers are their calibration.
//!
//! Results are cached as JSON, keyed by a [`Fingerprint`] of the CPU set, so
//! a daemon restart does not re-measure; the cache is written atomically
//! (temporary file + rename) so a crash never leaves half a file.

use crate::cpu::CpuKind;
use crate::error::PlatformError;
use hetsched_core::ids::Ns;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::mpsc;
use std::time::Instant;

/// Bumped when the cache format or the measuring method changes.
pub const CALIBRATION_VERSION: u32 = 1;

/// Identifies the CPU set a calibration belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// `model name` from `/proc/cpuinfo` (`unknown` when absent).
    pub cpu_model: String,
    /// Number of PUs discovered.
    pub pus: usize,
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: String,
    /// Each CPU kind as `name:PU count`, in kind order.
    pub kinds: Vec<String>,
}

impl Fingerprint {
    /// The fingerprint of this machine for the given CPU kinds.
    pub fn of(kinds: &[CpuKind]) -> Fingerprint {
        let cpu_model = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".to_string());
        let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".to_string());
        Fingerprint {
            cpu_model,
            pus: kinds.iter().map(|k| k.os_indices.len()).sum(),
            kernel,
            kinds: kinds
                .iter()
                .map(|k| format!("{}:{}", k.name, k.os_indices.len()))
                .collect(),
        }
    }
}

/// Measured figures of one CPU kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindCalibration {
    /// The CPU kind's name.
    pub kind: String,
    /// OS index of the PU the worker ran on.
    pub pu: usize,
    /// Whether pinning to `pu` succeeded (if not, figures are for any PU).
    pub pinned: bool,
    /// Median round trip to hand a closure to the worker and get its answer.
    pub dispatch_ns: Ns,
    /// 99th percentile of the same round trips.
    pub dispatch_p99_ns: Ns,
    /// Median memcpy bandwidth on that PU, bytes per second.
    pub memcpy_bytes_per_s: f64,
}

/// A calibration of every CPU kind, as stored in the cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub version: u32,
    pub fingerprint: Fingerprint,
    pub kinds: Vec<KindCalibration>,
}

impl Calibration {
    /// The figures for the kind named `name`.
    pub fn kind(&self, name: &str) -> Option<&KindCalibration> {
        self.kinds.iter().find(|k| k.kind == name)
    }

    /// Whether this calibration fits `kinds` on this machine.
    pub fn fits(&self, fingerprint: &Fingerprint) -> bool {
        self.version == CALIBRATION_VERSION && self.fingerprint == *fingerprint
    }
}

/// How hard to measure. The defaults keep a full calibration well under a
/// second per kind.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrationOptions {
    /// Round trips timed for the dispatch figure (after a short warm-up).
    pub round_trips: usize,
    /// Size of the buffer copied for the bandwidth figure.
    pub copy_bytes: usize,
    /// Copies timed; the median is kept.
    pub copy_repeats: usize,
}

impl Default for CalibrationOptions {
    fn default() -> Self {
        CalibrationOptions {
            round_trips: 1000,
            copy_bytes: 64 << 20,
            copy_repeats: 5,
        }
    }
}

type Job = Box<dyn FnOnce() -> u64 + Send>;

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

/// Measures one CPU kind on its first PU.
pub fn measure_kind(
    kind: &CpuKind,
    opts: &CalibrationOptions,
) -> Result<KindCalibration, PlatformError> {
    let pu = *kind
        .os_indices
        .first()
        .ok_or_else(|| PlatformError::Calibration(format!("CPU kind `{}` has no PU", kind.name)))?;
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let (done_tx, done_rx) = mpsc::channel::<u64>();
    let (pin_tx, pin_rx) = mpsc::channel::<bool>();
    let worker = std::thread::Builder::new()
        .name(format!("calibrate-{}", kind.name))
        .spawn(move || {
            let pinned = crate::thread::pin_current(pu);
            let _ = pin_tx.send(pinned);
            for job in job_rx {
                if done_tx.send(job()).is_err() {
                    break;
                }
            }
        })
        .map_err(|e| PlatformError::Calibration(format!("cannot start worker thread: {e}")))?;
    let lost = || PlatformError::Calibration("calibration worker stopped".to_string());
    let pinned = pin_rx.recv().map_err(|_| lost())?;

    let round_trip = |job: Job| -> Result<u64, PlatformError> {
        job_tx.send(job).map_err(|_| lost())?;
        done_rx.recv().map_err(|_| lost())
    };
    let warmup = (opts.round_trips / 10).max(1);
    let mut trips = Vec::with_capacity(opts.round_trips.max(1));
    for i in 0..warmup + opts.round_trips.max(1) {
        let start = Instant::now();
        let answer = round_trip(Box::new(move || std::hint::black_box(i as u64 + 1)))?;
        let took = start.elapsed().as_nanos() as u64;
        debug_assert_eq!(answer, i as u64 + 1);
        if i >= warmup {
            trips.push(took);
        }
    }
    let dispatch_ns = median(&mut trips);
    let dispatch_p99_ns = percentile(&trips, 0.99);

    // The copy runs on the pinned worker so the bandwidth is that PU's.
    let (bytes, repeats) = (opts.copy_bytes.max(4096), opts.copy_repeats.max(1));
    let copy_ns = round_trip(Box::new(move || {
        let src = vec![0x5au8; bytes];
        let mut dst = vec![0u8; bytes];
        dst.copy_from_slice(&src); // touch every page before timing
        let mut times: Vec<u64> = (0..repeats)
            .map(|_| {
                let start = Instant::now();
                dst.copy_from_slice(std::hint::black_box(&src));
                std::hint::black_box(&mut dst);
                start.elapsed().as_nanos().max(1) as u64
            })
            .collect();
        median(&mut times)
    }))?;
    drop(job_tx);
    let _ = worker.join();
    Ok(KindCalibration {
        kind: kind.name.clone(),
        pu,
        pinned,
        dispatch_ns,
        dispatch_p99_ns,
        memcpy_bytes_per_s: bytes as f64 * 1e9 / copy_ns as f64,
    })
}

/// Measures every CPU kind, one after the other (so they do not disturb
/// each other's figures).
pub fn measure(kinds: &[CpuKind], opts: &CalibrationOptions) -> Result<Calibration, PlatformError> {
    Ok(Calibration {
        version: CALIBRATION_VERSION,
        fingerprint: Fingerprint::of(kinds),
        kinds: kinds
            .iter()
            .map(|k| measure_kind(k, opts))
            .collect::<Result<_, _>>()?,
    })
}

/// Reads a cached calibration. `Ok(None)` when the file does not exist;
/// an error when it exists but cannot be read or parsed.
pub fn read_cache(path: &Path) -> Result<Option<Calibration>, PlatformError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(PlatformError::Cache {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| PlatformError::Cache {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })
}

/// Writes the calibration to `path` atomically: a temporary file in the
/// same directory, flushed, then renamed over the old one. The temporary
/// file is always a new one (`O_EXCL`), never reached through a link
/// (`O_NOFOLLOW`); the daemon checks the directory itself before it starts.
pub fn write_cache(path: &Path, cal: &Calibration) -> Result<(), PlatformError> {
    let err = |source| PlatformError::Cache {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(err)?;
    }
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let json = serde_json::to_string_pretty(cal)
        .map_err(|e| err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
    let result = (|| {
        use std::os::unix::fs::OpenOptionsExt;
        match fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&tmp)?;
        f.write_all(json.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_percentile() {
        let mut v = vec![5, 1, 3, 2, 4];
        assert_eq!(median(&mut v), 3);
        assert_eq!(percentile(&v, 0.99), 5);
        assert_eq!(percentile(&v, 0.0), 1);
    }
}
