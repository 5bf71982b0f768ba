//! What every device's registered kernels share, whatever the device
//! (OpenCL's [`super::opencl_user`], CUDA's `cuda/user.rs`): the
//! kernels a unit built, once per distinct (source, entry), and the device
//! buffers of calls, kept and spare, generic over the device's buffer.
//!
//! What is enforced here, beyond the checks of
//! [`hetsched_protocol::user_kernel`] (every range inside the region):
//! - a device buffer that is not copied in starts zeroed, so no kernel
//!   reads what another client's call left in device memory (buffers are
//!   reused between calls of one client only, whose own data they hold);
//! - the buffers a client keeps on the device between calls add up to at
//!   most `max_kept_bytes` (`max_region_mb`), and go when it leaves; its
//!   spare buffers (of finished calls, for its next ones) too;
//! - a kept buffer belongs to one client and one data region: a client
//!   that opens a new region starts with none;
//! - a call that fails (a buffer the device cannot make, a failed launch)
//!   fails alone: what was kept stays kept.

use super::Registered;
use hetsched_core::ids::ClientId;
use hetsched_protocol::user_kernel::{KernelSignature, UserArg, UserCall, UserKernelId, flags};
use hetsched_views::data_region::DataRegion;
use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::{Arc, Weak};

/// Most distinct kernels one executor holds built at once (each holds a
/// compiled program). An executor serves one user on one unit, and a
/// kernel goes when the last client that registered it leaves, so only
/// that user's clients, registered at once, can reach it.
pub(super) const MAX_KERNELS: usize = 256;

struct Built<K> {
    kernel: K,
    signature: KernelSignature,
    source: (String, String),
    /// The clients that registered it.
    clients: BTreeSet<ClientId>,
}

/// The kernels an executor built, each with what its calls are checked
/// against, numbered from 0 and never reusing a number.
pub(super) struct BuiltKernels<K> {
    built: HashMap<UserKernelId, Built<K>>,
    by_source: HashMap<(String, String), UserKernelId>,
    next: u32,
}

impl<K> BuiltKernels<K> {
    pub(super) fn new() -> BuiltKernels<K> {
        BuiltKernels {
            built: HashMap::new(),
            by_source: HashMap::new(),
            next: 0,
        }
    }

    /// `entry` of `source` for `client`: found built, or built now by
    /// `build`, which gives the device's kernel and its signature.
    pub(super) fn register(
        &mut self,
        client: ClientId,
        source: &str,
        entry: &str,
        build: impl FnOnce() -> Result<(K, KernelSignature), String>,
    ) -> Result<Registered, String> {
        let key = (source.to_string(), entry.to_string());
        if let Some(&id) = self.by_source.get(&key) {
            let b = self.built.get_mut(&id).expect("indexed kernels are built");
            b.clients.insert(client);
            return Ok(Registered {
                id,
                signature: b.signature.clone(),
                log: String::new(),
                cached: true,
            });
        }
        if self.built.len() >= MAX_KERNELS {
            return Err(format!(
                "this user's clients hold {MAX_KERNELS} registered kernels on this unit already; \
                 a kernel is freed when the last client that registered it leaves"
            ));
        }
        let (kernel, signature) = build()?;
        let id = UserKernelId(self.next);
        self.next = self
            .next
            .checked_add(1)
            .ok_or("this executor has numbered every kernel it can")?;
        self.built.insert(
            id,
            Built {
                kernel,
                signature: signature.clone(),
                source: key.clone(),
                clients: BTreeSet::from([client]),
            },
        );
        self.by_source.insert(key, id);
        Ok(Registered {
            id,
            signature,
            log: String::new(),
            cached: false,
        })
    }

    /// Kernel `id` and its signature, or why there is none.
    pub(super) fn get(&self, id: UserKernelId) -> Result<(&K, &KernelSignature), String> {
        self.built
            .get(&id)
            .map(|b| (&b.kernel, &b.signature))
            .ok_or_else(|| format!("this unit has no {id}"))
    }

    /// `client` left: the kernels no other client registered go.
    pub(super) fn release(&mut self, client: ClientId) {
        let by_source = &mut self.by_source;
        self.built.retain(|_, b| {
            b.clients.remove(&client);
            let keep = !b.clients.is_empty();
            if !keep {
                by_source.remove(&b.source);
            }
            keep
        });
    }

    /// Kernels held built.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.built.len()
    }
}

/// A device buffer, as far as the bookkeeping needs to know it.
pub(super) trait DeviceBytes {
    /// Its size in bytes.
    fn byte_len(&self) -> u64;
}

/// A buffer kept on the device: whose, for which region, which bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct KeptKey {
    pub(super) client: ClientId,
    /// The region's address: with `Kept::region` it tells a kept buffer
    /// of a region that is gone from one of a new region at the same
    /// address.
    region: usize,
    offset: u64,
    pub(super) len: u64,
}

struct Kept<B> {
    buffer: B,
    region: Weak<DataRegion>,
}

/// A call's device buffer: fresh for this call, a spare, one it kept, or
/// the region's own bytes.
pub(super) struct CallBuffer<B> {
    pub(super) key: KeptKey,
    pub(super) buffer: B,
    pub(super) flags: u64,
    pub(super) range: Range<u64>,
    /// It was kept from an earlier call (`KEEP`).
    was_kept: bool,
    /// It was allocated for this call: its contents are anybody's.
    fresh: bool,
    /// It is the region's own bytes, used in place: nothing to copy, and
    /// it goes when the call ends.
    pub(super) in_place: bool,
}

/// Device buffers of registered kernels' calls, kept and spare, per
/// client.
pub(super) struct CallBuffers<B> {
    kept: HashMap<KeptKey, Kept<B>>,
    kept_bytes: HashMap<ClientId, u64>,
    max_kept_bytes: u64,
    /// Buffers of finished calls, per client, for its next calls (a
    /// buffer costs an allocation, and zeroing, to make): at most
    /// `max_kept_bytes` per client.
    spare: HashMap<ClientId, Vec<B>>,
    scratch: Vec<u8>,
}

impl<B: DeviceBytes> CallBuffers<B> {
    pub(super) fn new(max_kept_bytes: u64) -> CallBuffers<B> {
        CallBuffers {
            kept: HashMap::new(),
            kept_bytes: HashMap::new(),
            max_kept_bytes,
            spare: HashMap::new(),
            scratch: Vec::new(),
        }
    }

    /// A device buffer for every buffer argument of `client`'s `call`, in
    /// order: the region's bytes where `in_place` gives them (argument
    /// index and range), else the one it kept for this range and region,
    /// else a spare of its size, else a fresh one from `alloc`. Fails,
    /// keeping what was kept, where a buffer cannot be made or the call
    /// would keep more than the client may.
    pub(super) fn acquire(
        &mut self,
        client: ClientId,
        call: &UserCall,
        region: &Arc<DataRegion>,
        mut in_place: impl FnMut(usize, &Range<u64>) -> Option<Result<B, String>>,
        mut alloc: impl FnMut(u64) -> Result<B, String>,
    ) -> Result<Vec<CallBuffer<B>>, String> {
        let mut buffers: Vec<CallBuffer<B>> = Vec::new();
        let mut keeping = 0u64;
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
            let got = if let Some(host) = in_place(i, range) {
                host.map(|b| (b, false, false, true))
            } else if let Some(buffer) = self.take_kept(&key, region) {
                Ok((buffer, true, false, false))
            } else if let Some(buffer) = self.take_spare(client, key.len) {
                Ok((buffer, false, false, false))
            } else {
                alloc(key.len).map(|b| (b, false, true, false))
            };
            let (buffer, was_kept, fresh, in_place) = match got {
                Ok(b) => b,
                Err(e) => {
                    self.put_back(buffers, region);
                    return Err(e);
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
                "keeping {keeping} bytes on the device would take this client over its {} \
                 bytes (it keeps {held} more)",
                self.max_kept_bytes
            ));
        }
        Ok(buffers)
    }

    /// Before the launch: copies the region's bytes into every buffer
    /// copied in, and zeros into every fresh one that is not, with
    /// `write` (buffers used in place need neither).
    pub(super) fn copy_in(
        &mut self,
        region: &DataRegion,
        buffers: &mut [CallBuffer<B>],
        mut write: impl FnMut(&mut B, &[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        for b in buffers.iter_mut().filter(|b| !b.in_place) {
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
            write(&mut b.buffer, &self.scratch)?;
        }
        Ok(())
    }

    /// After the launch: copies every buffer copied out (and not used in
    /// place) back into the region, reading it with `read`.
    pub(super) fn copy_out(
        &mut self,
        region: &DataRegion,
        buffers: &[CallBuffer<B>],
        mut read: impl FnMut(&B, &mut [u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        for b in buffers
            .iter()
            .filter(|b| !b.in_place && b.flags & flags::COPY_OUT != 0)
        {
            self.scratch.resize(b.key.len as usize, 0);
            read(&b.buffer, &mut self.scratch)?;
            region
                .write(b.range.start, &self.scratch)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The call ended, well or not: buffers marked `KEEP` stay (what they
    /// hold is the client's own, even after a failed launch); the others
    /// become the client's spares; those used in place go.
    pub(super) fn release(
        &mut self,
        client: ClientId,
        buffers: Vec<CallBuffer<B>>,
        region: &Arc<DataRegion>,
    ) {
        for b in buffers.into_iter().filter(|b| !b.in_place) {
            if b.flags & flags::KEEP != 0 {
                self.keep(b.key, b.buffer, region);
            } else {
                self.put_spare(client, b.buffer);
            }
        }
    }

    /// A spare buffer of `len` bytes of `client`'s, if it has one.
    fn take_spare(&mut self, client: ClientId, len: u64) -> Option<B> {
        let spares = self.spare.get_mut(&client)?;
        let i = spares.iter().position(|b| b.byte_len() == len)?;
        Some(spares.swap_remove(i))
    }

    /// Keeps `buffer` for `client`'s next calls, if its spares have room
    /// (the oldest go first).
    fn put_spare(&mut self, client: ClientId, buffer: B) {
        let spares = self.spare.entry(client).or_default();
        spares.push(buffer);
        let mut total: u64 = spares.iter().map(DeviceBytes::byte_len).sum();
        while total > self.max_kept_bytes {
            total -= spares.remove(0).byte_len();
        }
    }

    /// Returns a call's kept buffers to the kept set, as they were.
    fn put_back(&mut self, buffers: Vec<CallBuffer<B>>, region: &Arc<DataRegion>) {
        for b in buffers.into_iter().filter(|b| !b.in_place) {
            if b.was_kept {
                self.keep(b.key, b.buffer, region);
            } else {
                self.put_spare(b.key.client, b.buffer);
            }
        }
    }

    /// Takes `key`'s kept buffer out of the set, if it is kept for this
    /// very region.
    fn take_kept(&mut self, key: &KeptKey, region: &Arc<DataRegion>) -> Option<B> {
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
    fn keep(&mut self, key: KeptKey, buffer: B, region: &Arc<DataRegion>) {
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

    /// `client` left: its kept and spare buffers go.
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
            .map_or(0, |s| s.iter().map(DeviceBytes::byte_len).sum())
    }

    /// Bytes `client` keeps on the device.
    #[cfg(test)]
    pub(super) fn kept_bytes(&self, client: ClientId) -> u64 {
        self.kept_bytes.get(&client).copied().unwrap_or(0)
    }
}

/// `n` little-endian `f32`s of `region` at `at` (for the backends' tests).
#[cfg(test)]
pub(super) fn floats(region: &DataRegion, at: u64, n: usize) -> Vec<f32> {
    let mut bytes = vec![0u8; n * 4];
    region.read(at, &mut bytes).unwrap();
    bytes
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Writes `v` as little-endian `f32`s into `region` at `at`.
#[cfg(test)]
pub(super) fn write_floats(region: &DataRegion, at: u64, v: &[f32]) {
    let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
    region.write(at, &bytes).unwrap();
}

/// The bookkeeping on a device made of host vectors: what the OpenCL and
/// CUDA backends rely on, checked without a device. The "kernel" of these
/// tests is `scale` (`dst[i] = src[i] * factor` over `f32`s).
#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_protocol::user_kernel::flags::{COPY_IN, COPY_OUT, KEEP};

    impl DeviceBytes for Vec<u8> {
        fn byte_len(&self) -> u64 {
            self.len() as u64
        }
    }

    /// Fresh device memory holds what an earlier user left: never zeros.
    fn alloc(len: u64) -> Result<Vec<u8>, String> {
        Ok(vec![0xA5; len as usize])
    }

    struct Fixture {
        buffers: CallBuffers<Vec<u8>>,
        daemon: Arc<DataRegion>,
        client: DataRegion,
    }

    fn fixture(max_kept: u64) -> Fixture {
        let (daemon, client) = hetsched_views::data_region::pair(4096).unwrap();
        Fixture {
            buffers: CallBuffers::new(max_kept),
            daemon: Arc::new(daemon),
            client,
        }
    }

    fn scale_call(src_flags: u64, dst_flags: u64, factor: f32) -> UserCall {
        UserCall {
            kernel: UserKernelId(0),
            global: 64,
            local: None,
            args: vec![
                UserArg::Buffer {
                    range: 0..256,
                    flags: src_flags,
                },
                UserArg::Buffer {
                    range: 256..512,
                    flags: dst_flags,
                },
                UserArg::Scalar(u64::from(factor.to_bits())),
            ],
        }
    }

    /// Runs `call` as a backend does: acquire, copy in, launch, copy out,
    /// release.
    fn run(f: &mut Fixture, client: ClientId, call: &UserCall) -> Result<(), String> {
        let mut bufs = f
            .buffers
            .acquire(client, call, &f.daemon, |_, _| None, alloc)?;
        let result = f
            .buffers
            .copy_in(&f.daemon, &mut bufs, |b, bytes| {
                b.copy_from_slice(bytes);
                Ok(())
            })
            .and_then(|()| {
                let UserArg::Scalar(bits) = call.args[2] else {
                    unreachable!()
                };
                let factor = f32::from_bits(bits as u32);
                if factor.is_nan() {
                    return Err("the launch failed".to_string());
                }
                let src = bufs[0].buffer.clone();
                for (d, s) in bufs[1].buffer.chunks_mut(4).zip(src.chunks(4)) {
                    let v = f32::from_le_bytes(s.try_into().unwrap()) * factor;
                    d.copy_from_slice(&v.to_le_bytes());
                }
                f.buffers.copy_out(&f.daemon, &bufs, |b, out| {
                    out.copy_from_slice(b);
                    Ok(())
                })
            });
        f.buffers.release(client, bufs, &f.daemon);
        result
    }

    #[test]
    fn buffers_go_in_and_out_and_start_zeroed() {
        let mut f = fixture(1 << 20);
        let src: Vec<f32> = (0..64).map(|i| i as f32).collect();
        write_floats(&f.client, 0, &src);
        run(&mut f, ClientId(1), &scale_call(COPY_IN, COPY_OUT, 2.0)).unwrap();
        let want: Vec<f32> = src.iter().map(|v| v * 2.0).collect();
        assert_eq!(floats(&f.client, 256, 64), want);
        assert_eq!(f.buffers.spare_bytes(ClientId(1)), 512, "both are spares");
        // Another client, not copying in: zeros, not the device's garbage
        // and not client 1's spares.
        run(&mut f, ClientId(2), &scale_call(0, COPY_OUT, 3.0)).unwrap();
        assert_eq!(floats(&f.client, 256, 64), vec![0.0; 64]);
        // Client 1 again, not copying in: its spares are reused, holding
        // its own data (the source it copied in last time).
        run(&mut f, ClientId(1), &scale_call(0, COPY_OUT, 1.0)).unwrap();
        assert_eq!(floats(&f.client, 256, 64), src, "its own spare, reused");
        f.buffers.forget(ClientId(1));
        assert_eq!(f.buffers.spare_bytes(ClientId(1)), 0);
    }

    #[test]
    fn a_kept_buffer_stays_for_its_client_and_region() {
        let mut f = fixture(1 << 20);
        write_floats(&f.client, 0, &[1.0; 64]);
        run(
            &mut f,
            ClientId(1),
            &scale_call(COPY_IN | KEEP, COPY_OUT, 2.0),
        )
        .unwrap();
        assert_eq!(f.buffers.kept_bytes(ClientId(1)), 256);
        // The region changes, but the call uses the kept device copy.
        write_floats(&f.client, 0, &[5.0; 64]);
        run(&mut f, ClientId(1), &scale_call(KEEP, COPY_OUT, 3.0)).unwrap();
        assert_eq!(floats(&f.client, 256, 64), vec![3.0; 64]);
        // Another client naming the same range gets its own zeroed buffer.
        run(&mut f, ClientId(2), &scale_call(KEEP, COPY_OUT, 3.0)).unwrap();
        assert_eq!(floats(&f.client, 256, 64), vec![0.0; 64]);
        // Named without KEEP, it is used one last time, then freed.
        run(&mut f, ClientId(1), &scale_call(0, COPY_OUT, 4.0)).unwrap();
        assert_eq!(floats(&f.client, 256, 64), vec![4.0; 64]);
        assert_eq!(f.buffers.kept_bytes(ClientId(1)), 0);
        f.buffers.forget(ClientId(2));
        assert_eq!(f.buffers.kept_bytes(ClientId(2)), 0);
    }

    #[test]
    fn a_new_region_starts_with_nothing_kept() {
        let mut f = fixture(1 << 20);
        write_floats(&f.client, 0, &[1.0; 64]);
        run(
            &mut f,
            ClientId(1),
            &scale_call(COPY_IN | KEEP, COPY_OUT | KEEP, 2.0),
        )
        .unwrap();
        // Both kept, so the client has no spare.
        assert_eq!(f.buffers.spare_bytes(ClientId(1)), 0);
        let (daemon, client) = hetsched_views::data_region::pair(4096).unwrap();
        f.daemon = Arc::new(daemon);
        f.client = client;
        run(&mut f, ClientId(1), &scale_call(KEEP, COPY_OUT, 2.0)).unwrap();
        assert_eq!(
            floats(&f.client, 256, 64),
            vec![0.0; 64],
            "the old region's kept buffer is not this region's"
        );
    }

    #[test]
    fn keeping_more_than_allowed_fails_the_call_and_keeps_what_was_kept() {
        let mut f = fixture(300);
        write_floats(&f.client, 0, &[1.0; 64]);
        run(
            &mut f,
            ClientId(1),
            &scale_call(COPY_IN | KEEP, COPY_OUT, 1.0),
        )
        .unwrap();
        let err = run(&mut f, ClientId(1), &scale_call(KEEP, COPY_OUT | KEEP, 1.0)).unwrap_err();
        assert!(err.contains("300 bytes"), "{err}");
        assert_eq!(f.buffers.kept_bytes(ClientId(1)), 256);
        write_floats(&f.client, 0, &[9.0; 64]);
        run(&mut f, ClientId(1), &scale_call(KEEP, COPY_OUT, 2.0)).unwrap();
        assert_eq!(floats(&f.client, 256, 64), vec![2.0; 64], "its data too");
        // Spares are bounded by the same figure.
        assert!(f.buffers.spare_bytes(ClientId(1)) <= 300);
    }

    #[test]
    fn a_failed_launch_fails_only_its_call() {
        let mut f = fixture(1 << 20);
        write_floats(&f.client, 0, &[1.0; 64]);
        run(
            &mut f,
            ClientId(1),
            &scale_call(COPY_IN | KEEP, COPY_OUT, 2.0),
        )
        .unwrap();
        let err = run(&mut f, ClientId(1), &scale_call(KEEP, COPY_OUT, f32::NAN)).unwrap_err();
        assert!(err.contains("launch"), "{err}");
        assert_eq!(f.buffers.kept_bytes(ClientId(1)), 256, "still kept");
        run(&mut f, ClientId(1), &scale_call(KEEP, COPY_OUT, 3.0)).unwrap();
        assert_eq!(floats(&f.client, 256, 64), vec![3.0; 64]);
    }

    #[test]
    fn a_buffer_that_cannot_be_made_returns_the_kept_ones() {
        let mut f = fixture(1 << 20);
        write_floats(&f.client, 0, &[1.0; 64]);
        run(
            &mut f,
            ClientId(1),
            &scale_call(COPY_IN | KEEP, COPY_OUT, 2.0),
        )
        .unwrap();
        let mut call = scale_call(KEEP, COPY_OUT | KEEP, 2.0);
        call.args[1] = UserArg::Buffer {
            range: 256..768,
            flags: COPY_OUT | KEEP,
        };
        let err = f
            .buffers
            .acquire(
                ClientId(1),
                &call,
                &f.daemon,
                |_, _| None,
                |_| Err("out of device memory".to_string()),
            )
            .map(|_| ())
            .unwrap_err();
        assert!(err.contains("out of device memory"), "{err}");
        // The kept one was not dropped (no spare is 512 bytes, so
        // allocating was tried, and failed).
        assert_eq!(f.buffers.kept_bytes(ClientId(1)), 256);
    }

    #[test]
    fn in_place_buffers_are_neither_copied_nor_kept() {
        let mut f = fixture(1 << 20);
        let call = scale_call(COPY_IN, COPY_OUT, 2.0);
        let mut bufs = f
            .buffers
            .acquire(
                ClientId(1),
                &call,
                &f.daemon,
                |i, _| (i == 1).then(|| Ok(vec![7u8; 256])),
                alloc,
            )
            .unwrap();
        assert!(bufs[1].in_place && !bufs[0].in_place);
        let mut written = 0;
        f.buffers
            .copy_in(&f.daemon, &mut bufs, |_, _| {
                written += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!(written, 1, "only the copied buffer is written");
        f.buffers.release(ClientId(1), bufs, &f.daemon);
        assert_eq!(f.buffers.spare_bytes(ClientId(1)), 256);
    }

    #[test]
    fn an_executor_builds_a_kernel_once_and_frees_it_with_its_last_client() {
        let mut k: BuiltKernels<u32> = BuiltKernels::new();
        let sig = |e: &str| KernelSignature {
            entry: e.into(),
            params: Vec::new(),
        };
        let (a, b) = (ClientId(1), ClientId(2));
        let first = k.register(a, "src", "a", || Ok((1, sig("a")))).unwrap();
        assert!(!first.cached);
        let again = k.register(b, "src", "a", || panic!("built twice")).unwrap();
        assert!(again.cached && again.id == first.id);
        let err = k
            .register(a, "src", "b", || Err("no b".into()))
            .unwrap_err();
        assert_eq!(err, "no b");
        for i in 1..MAX_KERNELS {
            k.register(a, &format!("s{i}"), "a", || Ok((0, sig("a"))))
                .unwrap();
        }
        let err = k
            .register(b, "one more", "a", || Ok((0, sig("a"))))
            .unwrap_err();
        assert!(err.contains("256 registered kernels"), "{err}");
        assert!(k.get(UserKernelId(3)).is_ok());
        assert!(
            k.get(UserKernelId(999))
                .unwrap_err()
                .contains("no user kernel 999")
        );
        // a leaves: only the kernel b registered too stays, and the
        // freed room is b's to use; numbers are not reused.
        k.release(a);
        assert_eq!(k.len(), 1);
        assert!(k.get(first.id).is_ok());
        let fresh = k
            .register(b, "one more", "a", || Ok((0, sig("a"))))
            .unwrap();
        assert_eq!(fresh.id, UserKernelId(MAX_KERNELS as u32));
        k.release(b);
        assert_eq!(k.len(), 0);
    }
}
