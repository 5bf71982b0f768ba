//! Kernels clients register with a served OpenCL unit: built once per
//! distinct (source, entry) and shared by every client that registers the
//! same, and run with buffers copied between the client's data region and
//! the device as each argument's flags say. The bookkeeping of built
//! kernels and of kept and spare buffers, and what it guarantees (zeroed
//! buffers, `max_kept_bytes`, buffers tied to a client and its region),
//! is [`super::user_store`]'s, shared with CUDA units.
//!
//! On a device that works on host memory (a CPU device such as PoCL's), a
//! buffer copied in or out, not kept, and overlapping no other buffer of
//! the call is the client's region itself, used in place
//! ([`OpenClDevice::in_place_buffer`]): no copy either way. Then whatever
//! the kernel writes to it lands in the region, also for a buffer only
//! copied in, and a buffer only copied out starts with the region's bytes
//! instead of zeros; both are the client's own. A buffer neither copied in
//! nor out is scratch space and still starts zeroed.

use super::region_memory::RegionMemory;
use super::user_device::{RegisteredKernels, UserDevice};
use super::user_store::{CallBuffer, DeviceBytes};
use hetsched_opencl::{DeviceBuffer, HostMemory, Kernel, KernelArg, OpenClDevice, OpenClError};
use hetsched_protocol::user_kernel::{
    KernelSignature, MAX_PARAMS, ParamKind, ParamSpec, UserArg, UserCall, flags,
};
use hetsched_views::data_region::DataRegion;
use std::ops::Range;
use std::sync::Arc;

impl DeviceBytes for DeviceBuffer {
    fn byte_len(&self) -> u64 {
        self.len() as u64
    }
}

/// The kernels clients registered on an OpenCL device.
pub(super) type UserKernels = RegisteredKernels<OpenClDevice>;

/// Whether the buffer argument `i` of `args` can be the region's bytes
/// used in place on a device that shares host memory: copied in or out,
/// not kept, and overlapping no other buffer argument (two views of the
/// same bytes would see each other's writes, which copies do not).
fn in_place_candidate(args: &[UserArg], i: usize) -> bool {
    let UserArg::Buffer { range, flags } = &args[i] else {
        return false;
    };
    let moved = flags & (flags::COPY_IN | flags::COPY_OUT) != 0;
    moved
        && flags & flags::KEEP == 0
        && !range.is_empty()
        && args.iter().enumerate().all(|(j, other)| match other {
            UserArg::Buffer { range: r, .. } if j != i => {
                r.end <= range.start || range.end <= r.start
            }
            _ => true,
        })
}

fn signature_of(kernel: &Kernel, entry: &str) -> Result<KernelSignature, String> {
    if kernel.params().len() > MAX_PARAMS {
        return Err(format!(
            "`{entry}` has {} parameters; a served kernel may have at most {MAX_PARAMS}",
            kernel.params().len()
        ));
    }
    let params = kernel
        .params()
        .iter()
        .map(|p| ParamSpec {
            name: p.name.clone(),
            ty: p.ty.clone(),
            kind: match p.kind {
                hetsched_opencl::ParamKind::Buffer => ParamKind::Buffer {
                    read_only: p.read_only,
                },
                hetsched_opencl::ParamKind::Local => ParamKind::Local,
                hetsched_opencl::ParamKind::U32 => ParamKind::U32,
                hetsched_opencl::ParamKind::I32 => ParamKind::I32,
                hetsched_opencl::ParamKind::U64 => ParamKind::U64,
                hetsched_opencl::ParamKind::F32 => ParamKind::F32,
            },
        })
        .collect();
    Ok(KernelSignature {
        entry: entry.to_string(),
        params,
    })
}

fn scalar<'a>(kind: ParamKind, value: u64) -> KernelArg<'a> {
    // `UserPacket::bind` checked that 4-byte scalars fit.
    let low = value as u32;
    match kind {
        ParamKind::I32 => KernelArg::I32(low as i32),
        ParamKind::F32 => KernelArg::F32(f32::from_bits(low)),
        ParamKind::U64 => KernelArg::U64(value),
        _ => KernelArg::U32(low),
    }
}

impl UserDevice for OpenClDevice {
    type Kernel = Kernel;
    type Buffer = DeviceBuffer;

    fn check_entry(&self, entry: &str) -> Result<(), String> {
        if hetsched_protocol::ptx::is_declaration(entry) {
            return Err(format!(
                "an OpenCL unit reads the kernel's parameters from its source: register it by \
                 name alone, not `{}` (declarations are for CUDA units' PTX)",
                entry.chars().take(64).collect::<String>()
            ));
        }
        Ok(())
    }

    fn build(&self, source: &str, entry: &str) -> Result<(Kernel, KernelSignature), String> {
        let kernel = OpenClDevice::build(self, source, entry).map_err(|e| match e {
            OpenClError::Build { device, log } => {
                format!("`{entry}` does not build on {device}; the compiler says:\n{log}")
            }
            other => other.to_string(),
        })?;
        let signature = signature_of(&kernel, entry)?;
        Ok((kernel, signature))
    }

    fn alloc(&self, len: u64) -> Result<DeviceBuffer, String> {
        self.buffer(len as usize).map_err(|e| e.to_string())
    }

    /// On a device that shares host memory, a buffer copied in or out, not
    /// kept and overlapping no other is the region itself.
    fn in_place(
        &self,
        call: &UserCall,
        region: &Arc<DataRegion>,
        i: usize,
        range: &Range<u64>,
    ) -> Option<Result<DeviceBuffer, String>> {
        (self.shares_host_memory() && in_place_candidate(&call.args, i)).then(|| {
            let host: Arc<dyn HostMemory> = Arc::new(RegionMemory(Arc::clone(region)));
            self.in_place_buffer(host, range.start as usize..range.end as usize)
                .map_err(|e| e.to_string())
        })
    }

    fn upload(&self, buffer: &mut DeviceBuffer, bytes: &[u8]) -> Result<(), String> {
        self.write(buffer, bytes)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn launch(
        &self,
        kernel: &Kernel,
        signature: &KernelSignature,
        call: &UserCall,
        buffers: &[CallBuffer<DeviceBuffer>],
    ) -> Result<(), String> {
        let mut next_buffer = buffers.iter();
        let args: Vec<KernelArg<'_>> = call
            .args
            .iter()
            .zip(&signature.params)
            .map(|(arg, param)| match arg {
                UserArg::Buffer { .. } => {
                    KernelArg::Buffer(&next_buffer.next().expect("one per buffer").buffer)
                }
                UserArg::Local(bytes) => KernelArg::Local(*bytes as usize),
                UserArg::Scalar(v) => scalar(param.kind, *v),
            })
            .collect();
        OpenClDevice::launch(
            self,
            kernel,
            call.global as usize,
            call.local.map(|l| l as usize),
            &args,
        )
        .map_err(|e| format!("the launch failed: {e}"))?;
        for b in buffers.iter().filter(|b| b.in_place) {
            self.sync_in_place(&b.buffer).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn download(&self, buffer: &DeviceBuffer, out: &mut [u8]) -> Result<(), String> {
        self.read(buffer, out)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// On PoCL (`scripts/install-deps.sh` installs it): these fail, saying
/// so, where no OpenCL device exists.
#[cfg(test)]
mod tests {
    use super::super::user_store::{floats, write_floats};
    use super::*;
    use hetsched_core::ids::ClientId;
    use hetsched_protocol::user_kernel::UserKernelId;
    use hetsched_protocol::user_kernel::flags::{COPY_IN, COPY_OUT, KEEP};

    const SCALE: &str = "__kernel void scale(__global const float *src, __global float *dst, \
                         float factor) { size_t i = get_global_id(0); dst[i] = src[i] * factor; }";

    fn device() -> OpenClDevice {
        OpenClDevice::first().expect("these tests need an OpenCL device (PoCL)")
    }

    /// A device, the store (keeping up to `max_kept` bytes per client)
    /// with `scale` built, and a 4 KiB region's two sides.
    struct Fixture {
        dev: OpenClDevice,
        k: UserKernels,
        id: UserKernelId,
        daemon: Arc<DataRegion>,
        client: DataRegion,
    }

    fn fixture(max_kept: u64) -> Fixture {
        let dev = device();
        let mut k = UserKernels::new(max_kept);
        let id = k.register(&dev, ClientId(1), SCALE, "scale").unwrap().id;
        let (daemon, client) = hetsched_views::data_region::pair(4096).unwrap();
        Fixture {
            dev,
            k,
            id,
            daemon: Arc::new(daemon),
            client,
        }
    }

    fn scale_call(id: UserKernelId, src_flags: u64, factor: f32) -> UserCall {
        UserCall {
            kernel: id,
            global: 64,
            local: None,
            args: vec![
                UserArg::Buffer {
                    range: 0..256,
                    flags: src_flags,
                },
                UserArg::Buffer {
                    range: 256..512,
                    flags: COPY_OUT,
                },
                UserArg::Scalar(u64::from(factor.to_bits())),
            ],
        }
    }

    #[test]
    fn a_kernel_builds_once_and_says_what_it_takes() {
        let dev = device();
        let mut k = UserKernels::new(1 << 20);
        let first = k.register(&dev, ClientId(1), SCALE, "scale").unwrap();
        assert!(!first.cached);
        let names: Vec<_> = first.signature.params.iter().map(|p| &p.name).collect();
        assert_eq!(names, ["src", "dst", "factor"]);
        assert_eq!(
            first.signature.params[0].kind,
            ParamKind::Buffer { read_only: true }
        );
        assert_eq!(
            first.signature.params[1].kind,
            ParamKind::Buffer { read_only: false }
        );
        assert_eq!(first.signature.params[2].kind, ParamKind::F32);
        let again = k.register(&dev, ClientId(1), SCALE, "scale").unwrap();
        assert!(again.cached);
        assert_eq!(again.id, first.id);
    }

    #[test]
    fn a_source_that_does_not_compile_is_refused_with_the_log() {
        let dev = device();
        let mut k = UserKernels::new(1 << 20);
        let err = k
            .register(
                &dev,
                ClientId(1),
                "__kernel void broken(__global int *x) { x[0] = y; }",
                "broken",
            )
            .unwrap_err();
        assert!(err.contains("does not build"), "{err}");
        assert!(
            err.contains('y'),
            "the compiler's log names the error: {err}"
        );
        let err = k
            .register(&dev, ClientId(1), SCALE, "scale(const ptr, ptr, f32)")
            .unwrap_err();
        assert!(err.contains("by name alone"), "{err}");
        let err = k.register(&dev, ClientId(1), SCALE, "scal").unwrap_err();
        assert!(
            err.contains("scale"),
            "names what the program defines: {err}"
        );
    }

    #[test]
    fn buffers_go_in_and_out_as_their_flags_say() {
        let Fixture {
            dev,
            mut k,
            id,
            daemon,
            client,
        } = fixture(1 << 20);
        let src: Vec<f32> = (0..64).map(|i| i as f32).collect();
        write_floats(&client, 0, &src);
        k.run(&dev, ClientId(1), &scale_call(id, COPY_IN, 2.0), &daemon)
            .unwrap();
        let want: Vec<f32> = src.iter().map(|v| v * 2.0).collect();
        assert_eq!(floats(&client, 256, 64), want);
        // Not copied in: another client's kernel sees zeros, not what the
        // last call left on the device.
        k.run(&dev, ClientId(2), &scale_call(id, 0, 3.0), &daemon)
            .unwrap();
        assert_eq!(floats(&client, 256, 64), vec![0.0; 64]);
        assert_eq!(k.kept_bytes(ClientId(1)), 0);
    }

    #[test]
    fn a_kept_buffer_stays_on_the_device_for_its_client() {
        let Fixture {
            dev,
            mut k,
            id,
            daemon,
            client,
        } = fixture(1 << 20);
        write_floats(&client, 0, &[1.0; 64]);
        k.run(
            &dev,
            ClientId(1),
            &scale_call(id, COPY_IN | KEEP, 2.0),
            &daemon,
        )
        .unwrap();
        assert_eq!(k.kept_bytes(ClientId(1)), 256);
        // The region changes, but the call uses the kept device copy.
        write_floats(&client, 0, &[5.0; 64]);
        k.run(&dev, ClientId(1), &scale_call(id, KEEP, 3.0), &daemon)
            .unwrap();
        assert_eq!(floats(&client, 256, 64), vec![3.0; 64]);
        // Another client naming the same range gets its own (zeroed) buffer.
        k.run(&dev, ClientId(2), &scale_call(id, KEEP, 3.0), &daemon)
            .unwrap();
        assert_eq!(floats(&client, 256, 64), vec![0.0; 64]);
        // Named without KEEP, it is used one last time, then freed.
        k.run(&dev, ClientId(1), &scale_call(id, 0, 4.0), &daemon)
            .unwrap();
        assert_eq!(floats(&client, 256, 64), vec![4.0; 64]);
        assert_eq!(k.kept_bytes(ClientId(1)), 0);
        k.forget(ClientId(2));
        assert_eq!(k.kept_bytes(ClientId(2)), 0);
    }

    #[test]
    fn keeping_more_than_allowed_fails_the_call_and_keeps_what_was_kept() {
        let Fixture {
            dev,
            mut k,
            id,
            daemon,
            client,
        } = fixture(300);
        write_floats(&client, 0, &[1.0; 64]);
        k.run(
            &dev,
            ClientId(1),
            &scale_call(id, COPY_IN | KEEP, 1.0),
            &daemon,
        )
        .unwrap();
        let mut call = scale_call(id, KEEP, 1.0);
        call.args[1] = UserArg::Buffer {
            range: 256..512,
            flags: COPY_OUT | KEEP,
        };
        let err = k.run(&dev, ClientId(1), &call, &daemon).unwrap_err();
        assert!(err.contains("300 bytes"), "{err}");
        assert_eq!(
            k.kept_bytes(ClientId(1)),
            256,
            "the kept buffer is still there"
        );
        // And still holds the client's data.
        write_floats(&client, 0, &[9.0; 64]);
        k.run(&dev, ClientId(1), &scale_call(id, KEEP, 2.0), &daemon)
            .unwrap();
        assert_eq!(floats(&client, 256, 64), vec![2.0; 64]);
    }

    #[test]
    fn a_launch_that_fails_fails_only_its_call() {
        let Fixture {
            dev,
            mut k,
            id,
            daemon,
            client,
        } = fixture(1 << 20);
        write_floats(&client, 0, &[1.0; 64]);
        let mut bad = scale_call(id, COPY_IN, 2.0);
        bad.local = Some(1 << 20);
        bad.global = 1 << 20;
        let err = k.run(&dev, ClientId(1), &bad, &daemon).unwrap_err();
        assert!(err.contains("`scale`") && err.contains("launch"), "{err}");
        k.run(&dev, ClientId(1), &scale_call(id, COPY_IN, 2.0), &daemon)
            .unwrap();
        assert_eq!(floats(&client, 256, 64), vec![2.0; 64]);
    }

    /// On a device that shares host memory, buffers copied in or out use
    /// the region in place: the result is the same, and no device buffer
    /// is made for them (none is left over as a spare). A scratch buffer
    /// (neither in nor out) is still a zeroed device buffer.
    #[test]
    fn moved_buffers_are_used_in_place_on_a_host_memory_device() {
        let Fixture {
            dev,
            mut k,
            id,
            daemon,
            client,
        } = fixture(1 << 20);
        if !dev.shares_host_memory() {
            eprintln!("skipping: the OpenCL device does not work on host memory");
            return;
        }
        let src: Vec<f32> = (0..64).map(|i| i as f32).collect();
        write_floats(&client, 0, &src);
        k.run(&dev, ClientId(1), &scale_call(id, COPY_IN, 2.0), &daemon)
            .unwrap();
        let want: Vec<f32> = src.iter().map(|v| v * 2.0).collect();
        assert_eq!(floats(&client, 256, 64), want);
        assert_eq!(k.spare_bytes(ClientId(1)), 0, "no device copy was made");
        k.run(&dev, ClientId(1), &scale_call(id, 0, 2.0), &daemon)
            .unwrap();
        assert_eq!(floats(&client, 256, 64), vec![0.0; 64]);
        assert_eq!(k.spare_bytes(ClientId(1)), 256, "the scratch buffer");
    }

    /// Buffers that overlap in the region are copies, as on any device: the
    /// kernel reads the whole input as it was, whatever it writes.
    #[test]
    fn overlapping_buffers_see_the_input_as_it_was() {
        let Fixture {
            dev,
            mut k,
            id,
            daemon,
            client,
        } = fixture(1 << 20);
        let src: Vec<f32> = (0..64).map(|i| i as f32 + 1.0).collect();
        write_floats(&client, 0, &src);
        let mut call = scale_call(id, COPY_IN, 2.0);
        call.args[1] = UserArg::Buffer {
            range: 128..384,
            flags: COPY_OUT,
        };
        k.run(&dev, ClientId(1), &call, &daemon).unwrap();
        let want: Vec<f32> = src.iter().map(|v| v * 2.0).collect();
        assert_eq!(floats(&client, 128, 64), want);
    }
}
