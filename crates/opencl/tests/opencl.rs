//! Runs against the machine's real OpenCL. Where there is none, each test
//! says so and passes: CI machines without an ICD still build and test the
//! crate (and `no_platform_is_an_error_not_a_panic` runs everywhere).

use std::process::Command;

use hetsched_opencl::kernels::{Aes128Ctr, HISTOGRAM_COUNTS_BYTES, Histogram};
use hetsched_opencl::reference;
use hetsched_opencl::{DeviceKind, KernelArg, OpenClDevice, OpenClError, Timing, devices};
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

fn device() -> Option<OpenClDevice> {
    match OpenClDevice::first() {
        Ok(device) => Some(device),
        Err(e) if e.is_unavailable() => {
            hetsched_platform::test_support::available("opencl", Err(e.to_string()));
            None
        }
        Err(e) => panic!("OpenCL is present but unusable: {e}"),
    }
}

fn random_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
    let mut data = vec![0_u8; len];
    rng.fill_bytes(&mut data);
    data
}

#[test]
fn device_handles_are_send() {
    fn assert_send<T: Send>() {}
    assert_send::<OpenClDevice>();
    assert_send::<hetsched_opencl::DeviceBuffer>();
    assert_send::<hetsched_opencl::Kernel>();
}

#[test]
fn raw_handles_are_the_devices_own_and_stable() {
    let Some(device) = device() else { return };
    let raw = device.raw_handles();
    assert!(!raw.device.is_null() && !raw.context.is_null() && !raw.queue.is_null());
    assert_eq!(raw, device.raw_handles());
    device.finish().expect("clFinish on an idle queue");
    // Another open of the same device has its own context and queue.
    let other = OpenClDevice::open(device.info().index).unwrap();
    let raw2 = other.raw_handles();
    assert_eq!(raw.device, raw2.device);
    assert_ne!(raw.context, raw2.context);
    assert_ne!(raw.queue, raw2.queue);
}

#[test]
fn lists_devices_with_plausible_properties() {
    let Some(first) = device() else { return };
    let all = devices().expect("devices() after a successful open");
    assert!(!all.is_empty());
    for (i, info) in all.iter().enumerate() {
        println!("{info}");
        assert_eq!(info.index, i);
        assert!(!info.name.is_empty() && !info.platform.is_empty());
        assert!(info.compute_units >= 1);
        assert!(info.global_mem_bytes > 0);
        assert!(info.max_alloc_bytes > 0 && info.max_alloc_bytes <= info.global_mem_bytes);
        assert!(info.max_work_group_size >= 1);
        assert!(info.version.starts_with("OpenCL "), "{}", info.version);
    }
    assert_eq!(first.info(), &all[0]);
    let last = OpenClDevice::open(all.len() - 1).unwrap();
    assert_eq!(last.info(), all.last().unwrap());
    match OpenClDevice::open(all.len()) {
        Err(OpenClError::NoSuchDevice { index, count }) => {
            assert_eq!((index, count), (all.len(), all.len()))
        }
        other => panic!("expected NoSuchDevice, got {other:?}"),
    }
    if all[0].platform == "Portable Computing Language" {
        assert_eq!(all[0].kind, DeviceKind::Cpu, "PoCL's device is the CPU");
    }
}

#[test]
fn histogram_matches_reference() {
    let Some(dev) = device() else { return };
    let histogram = Histogram::new(&dev).unwrap();
    let mut rng = StdRng::seed_from_u64(0x5eed);
    // Empty, below one work-group, around the group size of 256, odd sizes,
    // and large enough to use every group with many bytes per work-item.
    for len in [0, 1, 255, 256, 257, 1000, 4095, 65_539, (1 << 20) + 17] {
        let data = random_bytes(&mut rng, len);
        let (counts, timing) = histogram.run(&dev, &data).unwrap();
        assert_eq!(counts, reference::histogram(&data), "len {len}");
        assert_eq!(counts.iter().map(|&c| c as usize).sum::<usize>(), len);
        assert!(timing.exec.wall_ns > 0 && timing.exec.wall_ns >= timing.exec.device_ns / 2);
    }
    // All work-items hammering one bin is the worst case for the atomics.
    let same = vec![0xab_u8; 100_003];
    let (counts, _) = histogram.run(&dev, &same).unwrap();
    assert_eq!(counts[0xab], 100_003);
    assert_eq!(counts.iter().sum::<u32>(), 100_003);
}

#[test]
fn histogram_launch_adds_to_existing_counts_and_checks_sizes() {
    let Some(dev) = device() else { return };
    let histogram = Histogram::new(&dev).unwrap();
    let data: Vec<u8> = (0..10_000_u32).map(|i| (i % 251) as u8).collect();
    let (input, _) = dev.buffer_from(&data).unwrap();
    let (counts, _) = dev.buffer_from(&[0; HISTOGRAM_COUNTS_BYTES]).unwrap();
    // Only a prefix, twice: the kernel accumulates.
    histogram.launch(&dev, &input, 5000, &counts).unwrap();
    histogram.launch(&dev, &input, 5000, &counts).unwrap();
    let mut raw = [0_u8; HISTOGRAM_COUNTS_BYTES];
    dev.read(&counts, &mut raw).unwrap();
    let got: Vec<u32> = raw
        .chunks_exact(4)
        .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
        .collect();
    let want: Vec<u32> = reference::histogram(&data[..5000])
        .iter()
        .map(|c| 2 * c)
        .collect();
    assert_eq!(got, want);

    assert!(matches!(
        histogram.launch(&dev, &input, 10_001, &counts),
        Err(OpenClError::BadArgs { .. })
    ));
    let small = dev.buffer(16).unwrap();
    assert!(matches!(
        histogram.launch(&dev, &input, 10, &small),
        Err(OpenClError::BadArgs { .. })
    ));
}

#[test]
fn aes128_ctr_matches_reference() {
    let Some(dev) = device() else { return };
    let aes = Aes128Ctr::new(&dev).unwrap();
    let mut rng = StdRng::seed_from_u64(0xae5);
    let key: [u8; 16] = rng.random();
    let iv: [u8; 16] = rng.random();
    for len in [0, 1, 15, 16, 17, 1000, 4099, (1 << 20) + 5] {
        let data = random_bytes(&mut rng, len);
        let (got, timing) = aes.run(&dev, &key, &iv, &data).unwrap();
        let mut want = data.clone();
        reference::aes128_ctr(&key, &iv, &mut want);
        assert_eq!(got.len(), len);
        assert!(got == want, "len {len}: device and reference differ");
        if len >= 16 {
            assert_ne!(got, data, "len {len}: nothing was encrypted");
        }
        assert!(timing.total().wall_ns > 0);
    }
    // Counters that carry from the low 64 bits into the high ones, and wrap
    // the whole 128 bits, where the kernel's two-halves arithmetic could slip.
    let data = random_bytes(&mut rng, 16 * 40 + 3);
    for iv in [
        [[0x11; 8], [0xff; 8]].concat(),
        [0xff; 16].to_vec(),
        [[0; 8], 0xffff_ffff_ffff_fff0_u64.to_be_bytes()].concat(),
    ] {
        let iv: [u8; 16] = iv.try_into().unwrap();
        let (got, _) = aes.run(&dev, &key, &iv, &data).unwrap();
        let mut want = data.clone();
        reference::aes128_ctr(&key, &iv, &mut want);
        assert!(got == want, "iv {iv:02x?}: device and reference differ");
    }
}

#[test]
fn aes128_ctr_known_answer_on_device() {
    let Some(dev) = device() else { return };
    // NIST SP 800-38A F.5.1, first block.
    let key = 0x2b7e151628aed2a6abf7158809cf4f3c_u128.to_be_bytes();
    let iv = 0xf0f1f2f3f4f5f6f7f8f9fafbfcfdfeff_u128.to_be_bytes();
    let plain = 0x6bc1bee22e409f96e93d7e117393172a_u128.to_be_bytes();
    let (got, _) = Aes128Ctr::new(&dev)
        .unwrap()
        .run(&dev, &key, &iv, &plain)
        .unwrap();
    assert_eq!(got, 0x874d6191b620e3261bef6864990db6ce_u128.to_be_bytes());
}

#[test]
fn write_read_round_trip() {
    let Some(dev) = device() else { return };
    let mut rng = StdRng::seed_from_u64(7);
    for len in [1, 4096, (3 << 20) + 1] {
        let data = random_bytes(&mut rng, len);
        let buffer = dev.buffer(len).unwrap();
        assert_eq!(buffer.len(), len);
        let write = dev.write(&buffer, &data).unwrap();
        let mut back = vec![0_u8; len];
        let read = dev.read(&buffer, &mut back).unwrap();
        assert!(back == data, "len {len}: round trip changed the data");
        assert!(write.wall_ns > 0 && read.wall_ns > 0);
    }
    let empty = dev.buffer(0).unwrap();
    assert!(empty.is_empty());
    assert_eq!(dev.write(&empty, &[]).unwrap(), Timing::ZERO);
    assert_eq!(dev.read(&empty, &mut []).unwrap(), Timing::ZERO);
}

#[test]
fn size_mismatch_is_an_error_and_the_device_stays_usable() {
    let Some(dev) = device() else { return };
    let buffer = dev.buffer(100).unwrap();
    let mut short = [0_u8; 99];
    match dev.read(&buffer, &mut short) {
        Err(OpenClError::SizeMismatch {
            op: "read",
            buffer: 100,
            host: 99,
        }) => {}
        other => panic!("expected a read size mismatch, got {other:?}"),
    }
    match dev.write(&buffer, &[1; 101]) {
        Err(e @ OpenClError::SizeMismatch { op: "write", .. }) => {
            assert!(e.to_string().contains("101"), "{e}");
        }
        other => panic!("expected a write size mismatch, got {other:?}"),
    }
    dev.write(&buffer, &[3; 100]).unwrap();
    let mut back = [0_u8; 100];
    dev.read(&buffer, &mut back).unwrap();
    assert_eq!(back, [3; 100]);
}

#[test]
fn bad_source_gives_build_error_with_log() {
    let Some(dev) = device() else { return };
    let source = "__kernel void broken(__global uint *out) { out[0] = undeclared_thing; }";
    match dev.build(source, "broken") {
        Err(OpenClError::Build { log, device }) => {
            assert_eq!(device, dev.info().name);
            assert!(
                log.contains("undeclared_thing"),
                "log lacks the culprit:\n{log}"
            );
            assert!(log.to_lowercase().contains("error"), "log:\n{log}");
        }
        other => panic!("expected a build error, got {other:?}"),
    }
    // A failed build is not cached; the device still compiles good code.
    assert_eq!(dev.cached_programs(), 0);
    let good = "__kernel void fine(__global uint *out) { out[0] = 1; }";
    assert!(dev.build(good, "fine").is_ok());
    match dev.build(good, "missing") {
        Err(OpenClError::NoSuchKernel { name, available }) => {
            assert_eq!(name, "missing");
            assert!(available.contains("fine"), "{available}");
        }
        other => panic!("expected NoSuchKernel, got {other:?}"),
    }
}

#[test]
fn programs_are_cached_by_source() {
    let Some(dev) = device() else { return };
    let a = "__kernel void a(__global uint *x) { x[0] = 1; }";
    let b = "__kernel void b(__global uint *x) { x[0] = 2; }";
    dev.build(a, "a").unwrap();
    dev.build(a, "a").unwrap();
    assert_eq!(dev.cached_programs(), 1);
    dev.build(b, "b").unwrap();
    dev.build(a, "a").unwrap();
    assert_eq!(dev.cached_programs(), 2);
}

const SCALARS: &str = r"
__kernel void scalars(__global uint *out, uint a, int b, ulong c, float d,
                      __local uint *scratch) {
    scratch[get_local_id(0)] = a;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (get_global_id(0) == 0) {
        out[0] = scratch[0];
        out[1] = (uint)b;
        out[2] = (uint)c;
        out[3] = (uint)(c >> 32);
        out[4] = as_uint(d);
        out[5] = get_global_size(0);
    }
}";

#[test]
fn launch_passes_every_argument_kind() {
    let Some(dev) = device() else { return };
    let kernel = dev.build(SCALARS, "scalars").unwrap();
    assert_eq!(kernel.arg_count(), 6);
    let out = dev.buffer(6 * 4).unwrap();
    let c = 0x1234_5678_9abc_def0_u64;
    let timing = dev
        .launch(
            &kernel,
            8,
            Some(4),
            &[
                KernelArg::Buffer(&out),
                KernelArg::U32(0xdead_beef),
                KernelArg::I32(-5),
                KernelArg::U64(c),
                KernelArg::F32(1.5),
                KernelArg::Local(4 * 4),
            ],
        )
        .unwrap();
    assert!(timing.wall_ns > 0);
    let mut raw = [0_u8; 24];
    dev.read(&out, &mut raw).unwrap();
    let got: Vec<u32> = raw
        .chunks_exact(4)
        .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            0xdead_beef,
            (-5_i32) as u32,
            c as u32,
            (c >> 32) as u32,
            1.5_f32.to_bits(),
            8
        ]
    );
}

#[test]
fn launch_rejects_bad_arguments_before_opencl_sees_them() {
    let Some(dev) = device() else { return };
    let kernel = dev.build(SCALARS, "scalars").unwrap();
    let out = dev.buffer(24).unwrap();
    let good = [
        KernelArg::Buffer(&out),
        KernelArg::U32(1),
        KernelArg::I32(2),
        KernelArg::U64(3),
        KernelArg::F32(4.0),
        KernelArg::Local(16),
    ];
    let bad_args = |args: &[KernelArg<'_>]| match dev.launch(&kernel, 4, Some(4), args) {
        Err(OpenClError::BadArgs { reason, .. }) => reason,
        other => panic!("expected BadArgs, got {other:?}"),
    };
    assert!(bad_args(&good[..5]).contains("6 argument"));
    // A scalar where a buffer is expected would hand the driver a bogus pointer.
    let mut wrong = good;
    wrong[0] = KernelArg::U64(0x1000);
    assert!(bad_args(&wrong).contains("`out`"));
    let mut wrong = good;
    wrong[1] = KernelArg::I32(1);
    assert!(bad_args(&wrong).contains("uint"));
    let mut wrong = good;
    wrong[5] = KernelArg::Local(0);
    bad_args(&wrong);

    let bad_launch = |global, local| match dev.launch(&kernel, global, local, &good) {
        Err(OpenClError::BadLaunch { reason, .. }) => reason,
        other => panic!("expected BadLaunch, got {other:?}"),
    };
    bad_launch(0, None);
    assert!(bad_launch(10, Some(4)).contains("multiple"));
    bad_launch(4, Some(0));
    bad_launch(1 << 20, Some(kernel.max_work_group_size() * 2));
    // The driver may pick the local size.
    dev.launch(&kernel, 4, None, &good).unwrap();

    // Buffers and kernels stay with the device that made them.
    let other = OpenClDevice::first().unwrap();
    let foreign = other.buffer(24).unwrap();
    let mut mixed = good;
    mixed[0] = KernelArg::Buffer(&foreign);
    assert!(matches!(
        dev.launch(&kernel, 4, Some(4), &mixed),
        Err(OpenClError::WrongDevice { what: "buffer" })
    ));
    assert!(matches!(
        other.launch(&kernel, 4, Some(4), &[]),
        Err(OpenClError::WrongDevice { what: "kernel" })
    ));
    assert!(matches!(
        dev.write(&foreign, &[0; 24]),
        Err(OpenClError::WrongDevice { .. })
    ));
}

#[test]
fn unsupported_parameter_types_fail_at_build() {
    let Some(dev) = device() else { return };
    let source = "__kernel void vec(__global float *out, float4 v) { out[0] = v.x; }";
    match dev.build(source, "vec") {
        Err(OpenClError::UnsupportedParam {
            index, param, ty, ..
        }) => {
            assert_eq!((index, param.as_str(), ty.as_str()), (1, "v", "float4"));
        }
        other => panic!("expected UnsupportedParam, got {other:?}"),
    }
}

#[test]
fn calibration_gives_finite_positive_numbers() {
    let Some(dev) = device() else { return };
    let start = std::time::Instant::now();
    let cal = dev.calibrate().unwrap();
    println!(
        "{} calibrated in {:?}: {cal:#?}",
        dev.info().name,
        start.elapsed()
    );
    for (what, value) in [
        ("launch overhead", cal.launch_overhead_ns),
        ("copy-in latency", cal.copy_in_latency_ns),
        ("copy-out latency", cal.copy_out_latency_ns),
        ("copy-in bandwidth", cal.copy_in_bytes_per_s),
        ("copy-out bandwidth", cal.copy_out_bytes_per_s),
    ] {
        assert!(value.is_finite() && value > 0.0, "{what} = {value}");
    }
    assert!(cal.launch_device_ns.is_finite() && cal.launch_device_ns >= 0.0);
    // Loose sanity bounds: a launch or a 64-byte copy well under 100 ms,
    // bandwidth above 10 MB/s on anything that deserves the name.
    assert!(cal.launch_overhead_ns < 1e8 && cal.copy_in_latency_ns < 1e8);
    assert!(cal.copy_in_bytes_per_s > 1e7 && cal.copy_out_bytes_per_s > 1e7);
    assert_eq!(cal.options.large_bytes, 8 << 20);
}

/// Environment variable that turns `no_platform_is_an_error_not_a_panic`
/// into the child half of itself.
const CHILD: &str = "HETSCHED_OPENCL_TEST_CHILD";

#[test]
fn no_platform_is_an_error_not_a_panic() {
    if std::env::var_os(CHILD).is_some() {
        // Child: the ICD loader was pointed at an empty vendor directory.
        match devices() {
            Err(e @ OpenClError::NoPlatform(_)) => {
                let message = e.to_string();
                assert!(message.contains("pocl-opencl-icd"), "{message}");
                assert!(OpenClDevice::first().unwrap_err().is_unavailable());
                println!("child saw: {message}");
            }
            other => panic!("expected NoPlatform, got {other:?}"),
        }
        return;
    }
    // Runs the test again in a fresh process whose ICD loader (ocl-icd and
    // the Khronos loader both honour OCL_ICD_VENDORS) finds no platform; on a
    // machine without libOpenCL at all the child sees the same error.
    let empty = std::env::temp_dir().join(format!("hetsched-no-icd-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "no_platform_is_an_error_not_a_panic",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("OCL_ICD_VENDORS", &empty)
        .env_remove("OCL_ICD_FILENAMES")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&empty);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("child saw: no OpenCL platform"),
        "child failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Host memory for the in-place tests: bytes Rust touches only through
/// atomics, so the device may write them while they are shared.
struct HostWords(Box<[std::sync::atomic::AtomicU8]>);

// SAFETY: the boxed slice never moves or shrinks while the value lives,
// and Rust reads and writes it only through atomics.
#[allow(unsafe_code)]
unsafe impl hetsched_opencl::HostMemory for HostWords {
    fn host_bytes(&self) -> (std::ptr::NonNull<u8>, usize) {
        let ptr = std::ptr::NonNull::new(self.0.as_ptr().cast_mut().cast::<u8>())
            .expect("a boxed slice is never null");
        (ptr, self.0.len())
    }
}

/// A kernel on a device that shares host memory works on the host bytes
/// themselves: input read in place, output written in place and visible
/// after `sync_in_place`; a range outside the memory is refused.
#[test]
fn in_place_buffers_read_and_write_host_memory() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU8, Ordering};
    let Some(device) = device() else { return };
    if !device.shares_host_memory() {
        eprintln!(
            "skipping: {} does not work on host memory",
            device.info().name
        );
        return;
    }
    const N: usize = 4096;
    let mut rng = StdRng::seed_from_u64(7);
    let input = random_bytes(&mut rng, N);
    let words: Box<[AtomicU8]> = (0..2 * N)
        .map(|i| AtomicU8::new(if i < N { input[i] } else { 0 }))
        .collect();
    let host = Arc::new(HostWords(words));
    let source = "__kernel void xor_words(__global const uint *in, __global uint *out, \
                  uint key) { size_t i = get_global_id(0); out[i] = in[i] ^ key; }";
    let kernel = device.build(source, "xor_words").unwrap();
    let src = device.in_place_buffer(host.clone(), 0..N).unwrap();
    let dst = device.in_place_buffer(host.clone(), N..2 * N).unwrap();
    assert!(src.is_in_place() && dst.is_in_place());
    let key = 0x5a5a_5a5a_u32;
    device
        .launch(
            &kernel,
            N / 4,
            None,
            &[
                KernelArg::Buffer(&src),
                KernelArg::Buffer(&dst),
                KernelArg::U32(key),
            ],
        )
        .unwrap();
    device.sync_in_place(&dst).unwrap();
    eprintln!(
        "in-place writes visible without a map: {}",
        device.in_place_is_coherent()
    );
    let got: Vec<u8> = host.0[N..]
        .iter()
        .map(|b| b.load(Ordering::Relaxed))
        .collect();
    let want: Vec<u8> = input
        .chunks_exact(4)
        .flat_map(|w| (u32::from_ne_bytes(w.try_into().unwrap()) ^ key).to_ne_bytes())
        .collect();
    assert_eq!(got, want);
    let err = device.in_place_buffer(host.clone(), N..3 * N).unwrap_err();
    assert!(matches!(err, OpenClError::NotInPlace(_)), "{err}");
    assert!(err.to_string().contains("outside the 8192 bytes"), "{err}");
    // The memory outlives the buffers that use it, however they are dropped.
    drop(host);
    drop(src);
    drop(dst);
}
