//! Kernels clients register with a served OpenCL unit: built once per
//! distinct (source, entry) and shared by every client that registers the
//! same, and run with buffers copied between the client's data region and
//! the device as each argument's flags say.
//!
//! What the daemon enforces here, beyond the checks of
//! [`hetsched_protocol::user_kernel`] (every range inside the region):
//! - a device buffer that is not copied in starts zeroed, so no kernel
//!   reads what another client's call left in device memory (buffers are
//!   reused between calls of one client only, whose own data they hold);
//! - the buffers a client keeps on the device between calls add up to at
//!   most `max_kept_bytes` (`max_region_mb`), and go when it leaves;
//! - a kept buffer belongs to one client and one data region: a client
//!   that opens a new region starts with none.
//!
//! On a device that works on host memory (a CPU device such as PoCL's), a
//! buffer copied in or out, not kept, and overlapping no other buffer of
//! the call is the client's region itself, used in place
//! ([`OpenClDevice::in_place_buffer`]): no copy either way. Then whatever
//! the kernel writes to it lands in the region, also for a buffer only
//! copied in, and a buffer only copied out starts with the region's bytes
//! instead of zeros; both are the client's own. A buffer neither copied in
//! nor out is scratch space and still starts zeroed.

use super::Registered;
use super::region_memory::RegionMemory;
use hetsched_core::ids::ClientId;
use hetsched_opencl::{DeviceBuffer, HostMemory, Kernel, KernelArg, OpenClDevice, OpenClError};
use hetsched_protocol::user_kernel::{
    KernelSignature, MAX_PARAMS, ParamKind, ParamSpec, UserArg, UserCall, UserKernelId, flags,
};
use hetsched_views::data_region::DataRegion;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// Most distinct kernels one unit builds (each holds a compiled program).
const MAX_KERNELS: usize = 256;

struct Built {
    kernel: Kernel,
    signature: KernelSignature,
}

/// A buffer kept on the device: whose, for which region, which bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct KeptKey {
    client: ClientId,
    /// The region's address: with `Kept::region` it tells a kept buffer
    /// of a region that is gone from one of a new region at the same
    /// address.
    region: usize,
    offset: u64,
    len: u64,
}

struct Kept {
    buffer: DeviceBuffer,
    region: Weak<DataRegion>,
}

pub(super) struct UserKernels {
    built: Vec<Built>,
    by_source: HashMap<(String, String), UserKernelId>,
    kept: HashMap<KeptKey, Kept>,
    kept_bytes: HashMap<ClientId, u64>,
    max_kept_bytes: u64,
    /// Buffers of finished calls, per client, for its next calls (a
    /// buffer costs an allocation, and zeroing, to make): at most
    /// `max_kept_bytes` per client.
    spare: HashMap<ClientId, Vec<DeviceBuffer>>,
    scratch: Vec<u8>,
}

/// A call's device buffer: fresh for this call, or one it kept.
struct CallBuffer {
    key: KeptKey,
    buffer: DeviceBuffer,
    flags: u64,
    range: std::ops::Range<u64>,
    /// It was kept from an earlier call (`KEEP`).
    was_kept: bool,
    /// It was allocated for this call: its contents are anybody's.
    fresh: bool,
    /// It is the region's own bytes, used in place: nothing to copy, and
    /// it goes when the call ends.
    in_place: bool,
}

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

impl UserKernels {
    pub(super) fn new(max_kept_bytes: u64) -> UserKernels {
        UserKernels {
            built: Vec::new(),
            by_source: HashMap::new(),
            kept: HashMap::new(),
            kept_bytes: HashMap::new(),
            max_kept_bytes,
            spare: HashMap::new(),
            scratch: Vec::new(),
        }
    }

    /// Builds `entry` of `source` on `device`, or finds it built.
    pub(super) fn register(
        &mut self,
        device: &OpenClDevice,
        source: &str,
        entry: &str,
    ) -> Result<Registered, String> {
        let key = (source.to_string(), entry.to_string());
        if let Some(&id) = self.by_source.get(&key) {
            return Ok(Registered {
                id,
                signature: self.built[id.0 as usize].signature.clone(),
                log: String::new(),
                cached: true,
            });
        }
        if self.built.len() >= MAX_KERNELS {
            return Err(format!(
                "this unit holds {MAX_KERNELS} registered kernels already; it builds no more \
                 until the daemon restarts"
            ));
        }
        let kernel = device.build(source, entry).map_err(|e| match e {
            OpenClError::Build { device, log } => {
                format!("`{entry}` does not build on {device}; the compiler says:\n{log}")
            }
            other => other.to_string(),
        })?;
        let signature = signature_of(&kernel, entry)?;
        let id = UserKernelId(self.built.len() as u32);
        self.built.push(Built {
            kernel,
            signature: signature.clone(),
        });
        self.by_source.insert(key, id);
        Ok(Registered {
            id,
            signature,
            log: String::new(),
            cached: false,
        })
    }

    /// Runs `call` for `client`: buffers in, launch, buffers out.
    pub(super) fn run(
        &mut self,
        device: &OpenClDevice,
        client: ClientId,
        call: &UserCall,
        region: &Arc<DataRegion>,
    ) -> Result<(), String> {
        let index = call.kernel.0 as usize;
        let entry = match self.built.get(index) {
            Some(b) => b.signature.entry.clone(),
            None => return Err(format!("this unit has no {}", call.kernel)),
        };
        let mut buffers: Vec<CallBuffer> = Vec::new();
        let mut keeping = 0u64;
        let shares_host = device.shares_host_memory();
        let mut memory: Option<Arc<dyn HostMemory>> = None;
        for (i, arg) in call.args.iter().enumerate() {
            let UserArg::Buffer { range, flags } = arg else {
                continue;
            };
            let key = KeptKey {
                client,
                region: Arc::as_ptr(region) as usize,
                offset: range.start,
                len: range.end - range.start,
            };
            if flags & flags::KEEP != 0
                && !buffers
                    .iter()
                    .any(|b| b.key == key && b.flags & flags::KEEP != 0)
            {
                keeping += key.len;
            }
            let in_place = shares_host && in_place_candidate(&call.args, i);
            let got = if in_place {
                let host = memory
                    .get_or_insert_with(|| Arc::new(RegionMemory(Arc::clone(region))))
                    .clone();
                device
                    .in_place_buffer(host, range.start as usize..range.end as usize)
                    .map(|b| (b, false, false))
            } else if let Some(buffer) = self.take_kept(&key, region) {
                Ok((buffer, true, false))
            } else if let Some(buffer) = self.take_spare(client, key.len) {
                Ok((buffer, false, false))
            } else {
                device.buffer(key.len as usize).map(|b| (b, false, true))
            };
            let (buffer, was_kept, fresh) = match got {
                Ok(b) => b,
                Err(e) => {
                    self.put_back(buffers, region);
                    return Err(format!("`{entry}`: {e}"));
                }
            };
            buffers.push(CallBuffer {
                key,
                buffer,
                flags: *flags,
                range: range.clone(),
                was_kept,
                fresh,
                in_place,
            });
        }
        let held = self.kept_bytes.get(&client).copied().unwrap_or(0);
        if held + keeping > self.max_kept_bytes {
            self.put_back(buffers, region);
            return Err(format!(
                "`{entry}`: keeping {keeping} bytes on the device would take this client over \
                 its {} bytes (it keeps {held} more)",
                self.max_kept_bytes
            ));
        }
        let result = self
            .copy_in_and_launch(device, index, call, region, &buffers)
            .map_err(|e| format!("`{entry}`: {e}"));
        // Buffers marked KEEP stay, even after a failed launch (what they
        // hold is the client's own); the others are the client's spares.
        for b in buffers.into_iter().filter(|b| !b.in_place) {
            if b.flags & flags::KEEP != 0 {
                self.keep(b.key, b.buffer, region);
            } else {
                self.put_spare(client, b.buffer);
            }
        }
        result
    }

    /// A spare buffer of `len` bytes of `client`'s, if it has one.
    fn take_spare(&mut self, client: ClientId, len: u64) -> Option<DeviceBuffer> {
        let spares = self.spare.get_mut(&client)?;
        let i = spares.iter().position(|b| b.len() as u64 == len)?;
        Some(spares.swap_remove(i))
    }

    /// Keeps `buffer` for `client`'s next calls, if its spares have room
    /// (the oldest go first).
    fn put_spare(&mut self, client: ClientId, buffer: DeviceBuffer) {
        let spares = self.spare.entry(client).or_default();
        spares.push(buffer);
        let mut total: u64 = spares.iter().map(|b| b.len() as u64).sum();
        while total > self.max_kept_bytes {
            total -= spares.remove(0).len() as u64;
        }
    }

    /// Returns a call's kept buffers to the kept set, as they were.
    fn put_back(&mut self, buffers: Vec<CallBuffer>, region: &Arc<DataRegion>) {
        for b in buffers.into_iter().filter(|b| !b.in_place) {
            if b.was_kept {
                self.keep(b.key, b.buffer, region);
            } else {
                self.put_spare(b.key.client, b.buffer);
            }
        }
    }

    fn copy_in_and_launch(
        &mut self,
        device: &OpenClDevice,
        index: usize,
        call: &UserCall,
        region: &DataRegion,
        buffers: &[CallBuffer],
    ) -> Result<(), String> {
        for b in buffers.iter().filter(|b| !b.in_place) {
            let copy_in = b.flags & flags::COPY_IN != 0;
            if !b.fresh && !copy_in {
                // Its contents are this client's own, from an earlier call.
                continue;
            }
            self.scratch.resize(b.key.len as usize, 0);
            if copy_in {
                region
                    .read(b.range.start, &mut self.scratch)
                    .map_err(|e| e.to_string())?;
            } else {
                // Device memory is not cleared between users.
                self.scratch.fill(0);
            }
            device
                .write(&b.buffer, &self.scratch)
                .map_err(|e| e.to_string())?;
        }
        let built = &self.built[index];
        let mut next_buffer = buffers.iter();
        let args: Vec<KernelArg<'_>> = call
            .args
            .iter()
            .zip(&built.signature.params)
            .map(|(arg, param)| match arg {
                UserArg::Buffer { .. } => {
                    KernelArg::Buffer(&next_buffer.next().expect("one per buffer").buffer)
                }
                UserArg::Local(bytes) => KernelArg::Local(*bytes as usize),
                UserArg::Scalar(v) => scalar(param.kind, *v),
            })
            .collect();
        device
            .launch(
                &built.kernel,
                call.global as usize,
                call.local.map(|l| l as usize),
                &args,
            )
            .map_err(|e| format!("the launch failed: {e}"))?;
        for b in buffers.iter().filter(|b| b.in_place) {
            device.sync_in_place(&b.buffer).map_err(|e| e.to_string())?;
        }
        for b in buffers
            .iter()
            .filter(|b| !b.in_place && b.flags & flags::COPY_OUT != 0)
        {
            self.scratch.resize(b.key.len as usize, 0);
            device
                .read(&b.buffer, &mut self.scratch)
                .map_err(|e| e.to_string())?;
            region
                .write(b.range.start, &self.scratch)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Takes `key`'s kept buffer out of the set, if it is kept for this
    /// very region.
    fn take_kept(&mut self, key: &KeptKey, region: &Arc<DataRegion>) -> Option<DeviceBuffer> {
        let kept = self.kept.remove(key)?;
        self.account(key.client, -(key.len as i128));
        let same = kept
            .region
            .upgrade()
            .is_some_and(|r| Arc::ptr_eq(&r, region));
        same.then_some(kept.buffer)
    }

    /// Keeps `buffer` for `key` (a second buffer for the same key in one
    /// call is dropped: the first stays).
    fn keep(&mut self, key: KeptKey, buffer: DeviceBuffer, region: &Arc<DataRegion>) {
        if self.kept.contains_key(&key) {
            return;
        }
        self.account(key.client, key.len as i128);
        self.kept.insert(
            key,
            Kept {
                buffer,
                region: Arc::downgrade(region),
            },
        );
    }

    fn account(&mut self, client: ClientId, delta: i128) {
        let held = self.kept_bytes.entry(client).or_insert(0);
        *held = (i128::from(*held) + delta).max(0) as u64;
        if *held == 0 {
            self.kept_bytes.remove(&client);
        }
    }

    /// `client` left: its kept buffers go.
    pub(super) fn forget(&mut self, client: ClientId) {
        self.kept.retain(|k, _| k.client != client);
        self.kept_bytes.remove(&client);
        self.spare.remove(&client);
    }

    /// Bytes of `client`'s spare device buffers.
    #[cfg(test)]
    pub(super) fn spare_bytes(&self, client: ClientId) -> u64 {
        self.spare
            .get(&client)
            .map_or(0, |s| s.iter().map(|b| b.len() as u64).sum())
    }

    /// Bytes `client` keeps on the device.
    #[cfg(test)]
    pub(super) fn kept_bytes(&self, client: ClientId) -> u64 {
        self.kept_bytes.get(&client).copied().unwrap_or(0)
    }
}

/// On PoCL (`scripts/install-deps.sh` installs it): these fail, saying
/// so, where no OpenCL device exists.
#[cfg(test)]
mod tests {
    use super::*;
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
        let id = k.register(&dev, SCALE, "scale").unwrap().id;
        let (daemon, client) = hetsched_views::data_region::pair(4096).unwrap();
        Fixture {
            dev,
            k,
            id,
            daemon: Arc::new(daemon),
            client,
        }
    }

    fn floats(region: &DataRegion, at: u64, n: usize) -> Vec<f32> {
        let mut bytes = vec![0u8; n * 4];
        region.read(at, &mut bytes).unwrap();
        bytes
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    fn write_floats(region: &DataRegion, at: u64, v: &[f32]) {
        let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
        region.write(at, &bytes).unwrap();
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
        let first = k.register(&dev, SCALE, "scale").unwrap();
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
        let again = k.register(&dev, SCALE, "scale").unwrap();
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
                "__kernel void broken(__global int *x) { x[0] = y; }",
                "broken",
            )
            .unwrap_err();
        assert!(err.contains("does not build"), "{err}");
        assert!(
            err.contains('y'),
            "the compiler's log names the error: {err}"
        );
        let err = k.register(&dev, SCALE, "scal").unwrap_err();
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
