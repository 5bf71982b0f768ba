//! `hetsched balance calibrate`: run microbenchmarks on every core kind,
//! fit SmartBalance's predictor `Θ` for every ordered pair of kinds, and
//! store the model.
//!
//! The kernels span the characterisation space of Eq. 8: integer and
//! floating-point chains (high IPC), unpredictable branches, pointer
//! chasing in working sets from L1 to DRAM size, and a streaming sum. Each
//! runs on a thread pinned to a CPU of the kind (inside the kind's
//! throttling cgroup for an emulated kind) for a fixed wall time while its
//! counters are read. Without an instruction counter nothing can be
//! fitted; calibration then measures each kind's work rate only, and says so.

use crate::counters::{Availability, ThreadCounters};
use crate::kernels::{KERNELS, Kernel, Runner};
use crate::machine::CoreMap;
use crate::power::{POWERCAP_ROOT, Rapl};
use hetsched_core::balance::PowerModel;
use hetsched_core::ips_model::{
    Features, IpsModel, KernelRun, N_FEATURES, PairModel, ThreadCounts, fit, fit_pairs,
};
use serde::{Deserialize, Serialize};
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

/// One kernel on one kind.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measurement {
    pub kernel: String,
    pub kind: usize,
    /// Units of work per second of wall time.
    pub work_per_s: f64,
    pub counts: ThreadCounts,
    pub wall_ns: u64,
    /// Package power above idle while it ran, W (RAPL only).
    pub watts: Option<f64>,
}

/// Everything calibration produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CalibrationReport {
    pub measurements: Vec<Measurement>,
    /// The fitted model; `None` without an instruction counter.
    pub model: Option<IpsModel>,
    /// Work rate of each kind relative to the fastest, per kernel mean.
    pub speed_ratio: Vec<f64>,
    /// Package power with nothing running, W (RAPL only).
    pub idle_watts: Option<f64>,
    /// Whether the model's power models were fitted from RAPL (otherwise
    /// they are the configured or default ones).
    pub power_fitted: bool,
    pub notes: Vec<String>,
}

/// Runs `kernel` for `dur` on a thread pinned to `cpu` (joined to
/// `throttle` when given), counting with `avail`'s events.
fn measure(
    kernel: Kernel,
    cpu: usize,
    throttle: Option<&std::path::Path>,
    avail: Option<&Availability>,
    rapl: Option<&Rapl>,
    dur: Duration,
) -> std::io::Result<(f64, ThreadCounts, u64, Option<f64>)> {
    let throttle = throttle.map(|p| p.to_path_buf());
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn(move || -> std::io::Result<(u64, u64)> {
        let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
        hetsched_platform::thread::pin_current(cpu);
        if let Some(dir) = &throttle {
            hetsched_platform::slow_cores::join_throttle(dir, tid)?;
        }
        let mut runner = Runner::new(kernel, 0x5eed ^ cpu as u64);
        // Warm the working set before counting starts.
        for _ in 0..16 {
            black_box(runner.step());
        }
        tid_tx.send(tid).expect("calibration waits for the worker");
        go_rx.recv().expect("calibration starts the worker");
        let start = Instant::now();
        let mut units = 0u64;
        while start.elapsed() < dur {
            black_box(runner.step());
            units += 1;
        }
        Ok((units, start.elapsed().as_nanos() as u64))
    });
    let tid = tid_rx
        .recv()
        .map_err(|_| std::io::Error::other("calibration worker failed to start"))?;
    let mut counters = match avail {
        Some(a) => Some(ThreadCounters::open(tid, a)?),
        None => None,
    };
    let energy_before = rapl.and_then(Rapl::sample);
    go_tx
        .send(())
        .map_err(|_| std::io::Error::other("calibration worker died"))?;
    // Read the counters before the thread exits and its counts freeze
    // together with anything the exit itself costs.
    let (units, wall_ns) = worker
        .join()
        .map_err(|_| std::io::Error::other("calibration kernel panicked"))??;
    let watts = match (rapl, energy_before, rapl.and_then(Rapl::sample)) {
        (Some(r), Some(a), Some(b)) => Some(r.joules(&a, &b) * 1e9 / wall_ns as f64),
        _ => None,
    };
    let counts = match counters.as_mut() {
        Some(c) => c.read_delta()?,
        None => ThreadCounts::default(),
    };
    Ok((units as f64 * 1e9 / wall_ns as f64, counts, wall_ns, watts))
}

/// Calibrates every kind of `map`: `dur` per kernel per kind. `progress`
/// is told each step (kernel, kind).
pub fn calibrate(
    map: &CoreMap,
    avail: Option<&Availability>,
    dur: Duration,
    mut progress: impl FnMut(&str, &str),
) -> std::io::Result<CalibrationReport> {
    let mut notes = Vec::new();
    let mut measurements = Vec::new();
    let rapl = Rapl::open(Path::new(POWERCAP_ROOT));
    let idle_watts = rapl.as_ref().and_then(|r| {
        let a = r.sample()?;
        std::thread::sleep(dur);
        let b = r.sample()?;
        Some(r.joules(&a, &b) / dur.as_secs_f64())
    });
    if rapl.is_none() {
        notes.push(
            "no readable RAPL (powercap) here: power models stay the configured or default ones"
                .into(),
        );
    }
    for (k, kind) in map.kinds.iter().enumerate() {
        let Some(core) = map.cores.iter().find(|c| c.kind == k) else {
            continue;
        };
        for kernel in KERNELS {
            progress(kernel.name, &kind.name);
            let (work_per_s, counts, wall_ns, watts) = measure(
                kernel,
                core.os_index,
                kind.throttle.as_deref(),
                avail,
                rapl.as_ref(),
                dur,
            )?;
            measurements.push(Measurement {
                kernel: kernel.name.into(),
                kind: k,
                work_per_s,
                counts,
                wall_ns,
                watts: watts.map(|w| (w - idle_watts.unwrap_or(0.0)).max(0.0)),
            });
        }
    }
    let speed_ratio = speed_ratios(map.kinds.len(), &measurements);
    let has_ipc = avail.is_some_and(Availability::has_ipc);
    let power_fitted = has_ipc && rapl.is_some();
    let model = if has_ipc {
        let mut model = fit_model(map, &measurements, &mut notes);
        if power_fitted {
            for (k, p) in model.power.iter_mut().enumerate() {
                match fit_power(&measurements, k, map.kinds[k].hz) {
                    Some(fitted) => *p = fitted,
                    None => notes.push(format!(
                        "{}: power could not be fitted; the configured model stays",
                        map.kinds[k].name
                    )),
                }
            }
        }
        Some(model)
    } else {
        notes.push(
            "no instruction/cycle counters on this machine: the predictor cannot be fitted; \
             the balancer scales throughput on other kinds by the configured kind speeds"
                .into(),
        );
        None
    };
    Ok(CalibrationReport {
        measurements,
        model,
        speed_ratio,
        idle_watts,
        power_fitted,
        notes,
    })
}

/// Eq. 9 for one kind from RAPL: package power above idle against the
/// effective IPC of each kernel run on the kind.
fn fit_power(m: &[Measurement], kind: usize, hz: f64) -> Option<PowerModel> {
    let samples: Vec<(Features, f64)> = m
        .iter()
        .filter(|x| x.kind == kind)
        .filter_map(|x| {
            let mut f = [None; N_FEATURES];
            f[0] = Some(1.0);
            f[1] = Some(effective_ipc(x, hz)?);
            Some((Features(f), x.watts?))
        })
        .collect();
    let p = fit(&samples, 0.0).ok()?;
    let coef = |feature| {
        p.used
            .iter()
            .position(|&u| u == feature)
            .map_or(0.0, |i| p.theta[i])
    };
    Some(PowerModel {
        watts_per_ipc: coef(1).max(0.0),
        static_watts: coef(0).max(0.0),
        // Measured above the idle package: an empty core adds nothing.
        sleep_watts: 0.0,
    })
}

/// Mean over kernels of each kind's work rate over the fastest kind's.
fn speed_ratios(n_kinds: usize, m: &[Measurement]) -> Vec<f64> {
    let rate = |kernel: &str, kind: usize| {
        m.iter()
            .find(|x| x.kernel == kernel && x.kind == kind)
            .map(|x| x.work_per_s)
    };
    (0..n_kinds)
        .map(|k| {
            let ratios: Vec<f64> = KERNELS
                .iter()
                .filter_map(|kern| {
                    let best = (0..n_kinds)
                        .filter_map(|j| rate(kern.name, j))
                        .fold(0.0, f64::max);
                    Some(rate(kern.name, k)? / best)
                })
                .collect();
            ratios.iter().sum::<f64>() / ratios.len().max(1) as f64
        })
        .collect()
}

/// Effective IPC on a kind: instructions over the cycles the kind
/// delivers in the wall time (for a throttled kind, fewer).
fn effective_ipc(m: &Measurement, hz: f64) -> Option<f64> {
    Some(m.counts.instructions? as f64 / (m.wall_ns as f64 * 1e-9 * hz))
}

fn fit_model(map: &CoreMap, m: &[Measurement], notes: &mut Vec<String>) -> IpsModel {
    let runs: Vec<KernelRun<'_>> = m
        .iter()
        .filter_map(|x| {
            Some(KernelRun {
                kernel: &x.kernel,
                kind: x.kind,
                counts: x.counts,
                ipc: effective_ipc(x, map.kinds[x.kind].hz)?,
            })
        })
        .collect();
    let fitted = fit_pairs(map.kinds.len(), &runs, 1e-3);
    for f in &fitted.failures {
        notes.push(format!(
            "{} → {}: {}",
            map.kinds[f.from].name, map.kinds[f.to].name, f.error
        ));
    }
    IpsModel {
        kinds: map.kinds.iter().map(|k| k.name.clone()).collect(),
        hz: map.kinds.iter().map(|k| k.hz).collect(),
        pairs: fitted.pairs,
        power: map.kinds.iter().map(|k| k.power).collect(),
    }
}

/// Mean leave-one-out prediction error over the fitted pairs, if any.
pub fn mean_prediction_error(model: &IpsModel) -> Option<f64> {
    let errs: Vec<f64> = model
        .pairs
        .iter()
        .flatten()
        .filter_map(|p| p.as_ref().and_then(|p: &PairModel| p.loo_error))
        .collect();
    (!errs.is_empty()).then(|| errs.iter().sum::<f64>() / errs.len() as f64)
}

/// Writes the model atomically (temporary file, then rename).
pub fn save_model(path: &std::path::Path, model: &IpsModel) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec_pretty(model).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(tmp, path)
}

/// Reads a stored model; a missing, unreadable or inconsistent one is
/// `Err` naming the file, for a warning (the balancer then falls back to
/// kind speeds).
pub fn load_model(path: &std::path::Path) -> Result<IpsModel, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_model(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Decodes and checks a model file's bytes.
pub fn parse_model(bytes: &[u8]) -> Result<IpsModel, String> {
    let model: IpsModel = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    model.validate().map_err(|e| e.to_string())?;
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BalanceConfig;

    #[test]
    fn a_model_round_trips_and_a_bad_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("model.json");
        let model: IpsModel = serde_json::from_str(include_str!(
            "../../../fuzz/corpus/balance_files/model.json"
        ))
        .unwrap();
        save_model(&path, &model).unwrap();
        assert_eq!(load_model(&path).unwrap(), model);
        std::fs::write(&path, b"{\"kinds\": [\"a\"]").unwrap();
        assert!(load_model(&path).unwrap_err().contains("model.json"));
        let mut bad = model;
        bad.pairs[0][1].as_mut().unwrap().used.push(99);
        bad.pairs[0][1].as_mut().unwrap().theta.push(1.0);
        let text = serde_json::to_vec(&bad).unwrap();
        assert!(parse_model(&text).unwrap_err().contains("feature"));
    }

    #[test]
    fn calibration_on_this_machine_measures_every_kind() {
        let map = CoreMap::from_topology(
            &hetsched_platform::cpu::discover_cpus(),
            &BalanceConfig::default(),
        )
        .unwrap();
        let avail = Availability::probe().ok();
        let mut steps = 0;
        let r = calibrate(&map, avail.as_ref(), Duration::from_millis(10), |_, _| {
            steps += 1
        })
        .unwrap();
        assert_eq!(steps, KERNELS.len() * map.kinds.len());
        assert!(r.measurements.iter().all(|m| m.work_per_s > 0.0));
        assert!((r.speed_ratio.iter().cloned().fold(0.0, f64::max) - 1.0).abs() < 1e-9);
        match avail {
            Some(a) if a.has_ipc() && map.kinds.len() > 1 => assert!(r.model.is_some()),
            _ => assert!(r.model.is_none() || map.kinds.len() == 1),
        }
    }
}
