use crate::device::OpenClDevice;
use crate::error::Result;

const EMPTY_KERNEL: &str = "__kernel void hetsched_empty(void) {}\n";

/// How much to measure. The defaults finish well under a second on PoCL.
#[derive(Clone, Debug, PartialEq)]
pub struct CalibrationOptions {
    /// Timed repetitions of each measurement, after one untimed warm-up.
    pub repeats: usize,
    /// Size of the copy timed for latency.
    pub small_bytes: usize,
    /// Size of the copy timed for bandwidth.
    pub large_bytes: usize,
}

impl Default for CalibrationOptions {
    fn default() -> Self {
        Self {
            repeats: 7,
            small_bytes: 64,
            large_bytes: 8 << 20,
        }
    }
}

/// What one task costs on this device before any work is done: the figures
/// hetsched's placement uses for dispatch and copy time. Medians throughout,
/// so one preempted run does not skew them.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// Host wall time to launch an empty kernel and see it complete.
    pub launch_overhead_ns: f64,
    /// The same launch as the device's profiler saw it.
    pub launch_device_ns: f64,
    /// Host wall time of a `small_bytes` host → device copy.
    pub copy_in_latency_ns: f64,
    /// Host wall time of a `small_bytes` device → host copy.
    pub copy_out_latency_ns: f64,
    /// `large_bytes` divided by the wall time of one host → device copy.
    pub copy_in_bytes_per_s: f64,
    /// `large_bytes` divided by the wall time of one device → host copy.
    pub copy_out_bytes_per_s: f64,
    pub options: CalibrationOptions,
}

impl OpenClDevice {
    /// Measures launch overhead and copy cost with the default options.
    pub fn calibrate(&self) -> Result<Calibration> {
        self.calibrate_with(&CalibrationOptions::default())
    }

    pub fn calibrate_with(&self, options: &CalibrationOptions) -> Result<Calibration> {
        let repeats = options.repeats.max(1);
        let small = options.small_bytes.max(1);
        let large = options.large_bytes.max(small);

        let kernel = self.build(EMPTY_KERNEL, "hetsched_empty")?;
        let mut launch_wall = Vec::with_capacity(repeats);
        let mut launch_device = Vec::with_capacity(repeats);
        for round in 0..=repeats {
            let timing = self.launch(&kernel, 1, Some(1), &[])?;
            // Round 0 warms up: PoCL finishes compiling for the work-group
            // size on the first launch.
            if round > 0 {
                launch_wall.push(timing.wall_ns as f64);
                launch_device.push(timing.device_ns as f64);
            }
        }

        let small_host = vec![0x5a_u8; small];
        let mut small_back = vec![0_u8; small];
        let small_buf = self.buffer(small)?;
        let mut copy_in = Vec::with_capacity(repeats);
        let mut copy_out = Vec::with_capacity(repeats);
        for round in 0..=repeats {
            let write = self.write(&small_buf, &small_host)?;
            let read = self.read(&small_buf, &mut small_back)?;
            if round > 0 {
                copy_in.push(write.wall_ns as f64);
                copy_out.push(read.wall_ns as f64);
            }
        }

        // Non-zero, varied bytes so no layer can shortcut the copy, and the
        // host pages are touched before timing starts.
        let large_host: Vec<u8> = (0..large).map(|i| (i * 7 + 3) as u8).collect();
        let mut large_back = vec![0_u8; large];
        let large_buf = self.buffer(large)?;
        let mut bw_in = Vec::with_capacity(repeats);
        let mut bw_out = Vec::with_capacity(repeats);
        for round in 0..=repeats {
            let write = self.write(&large_buf, &large_host)?;
            let read = self.read(&large_buf, &mut large_back)?;
            if round > 0 {
                bw_in.push(large as f64 * 1e9 / write.wall_ns.max(1) as f64);
                bw_out.push(large as f64 * 1e9 / read.wall_ns.max(1) as f64);
            }
        }

        Ok(Calibration {
            launch_overhead_ns: median(&mut launch_wall),
            launch_device_ns: median(&mut launch_device),
            copy_in_latency_ns: median(&mut copy_in),
            copy_out_latency_ns: median(&mut copy_out),
            copy_in_bytes_per_s: median(&mut bw_in),
            copy_out_bytes_per_s: median(&mut bw_out),
            options: CalibrationOptions {
                repeats,
                small_bytes: small,
                large_bytes: large,
            },
        })
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}
