//! CUDA devices as served units (`cuda_units = true`, feature `cuda`):
//! the kernels of `hetsched-cuda` behind the same [`KernelBackend`] as the
//! OpenCL devices, so a client's calls reach an NVIDIA GPU only through
//! its kernel ring and the unit's policy.
//!
//! The byte layout is the protocol's (docs/protocol.md §8.4), whichever
//! device runs the call:
//! * histogram: the output is the 256 counts as little-endian `u32`s;
//! * AES-128-CTR: `aux` is the 16-byte key, then the 16-byte initial
//!   counter block, read as one big-endian 128-bit counter; the output is
//!   the input XOR the keystream. The CUDA kernel takes the raw key (it
//!   expands it itself) and the counter block as two big-endian 64-bit
//!   halves, which [`hetsched_cuda::kernels::aes128_ctr`] packs from these
//!   same bytes, so nothing is converted here; the tests below check the
//!   two references agree.
//!
//! Clients may also register their own kernels as PTX
//! ([`user`]).
//!
//! Every device command is timed by CUDA events; the daemon charges wall
//! time (as for OpenCL), so each call drains those timings, or they would
//! pile up for as long as the daemon runs.

use super::device_api::{DeviceApi, ExecutorDevice, ListedDevice, ServedDevice};
use super::{KernelBackend, Registered};
use hetsched_core::ids::ClientId;
use hetsched_core::unit::UnitClass;
use hetsched_cuda::{CudaDevice, CudaDeviceInfo, kernels};
use hetsched_platform::gpu;
use hetsched_protocol::kernel_call::{AES_AUX_BYTES, Kernel};
use hetsched_protocol::user_kernel::UserCall;
use hetsched_views::data_region::DataRegion;
use std::sync::Arc;
use user::PtxKernels;

mod user;

/// A served CUDA device: in the daemon, the built-in kernels; in a kernel
/// executor process ([`CudaBackend::open_for_user_kernels`]), clients'
/// registered kernels. The daemon never builds or runs a registered
/// kernel itself.
pub struct CudaBackend {
    device: CudaDevice,
    user: PtxKernels,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("device", self.device.info())
            .finish()
    }
}

/// The key and the initial counter block of an AES call's `aux`.
pub fn aes_args(aux: &[u8]) -> Result<([u8; 16], [u8; 16]), String> {
    if aux.len() as u64 != AES_AUX_BYTES {
        return Err(format!(
            "aes128-ctr wants {AES_AUX_BYTES} bytes of key and counter block, got {}",
            aux.len()
        ));
    }
    let (key, iv) = aux.split_at(16);
    let key = key.try_into().map_err(|_| "a 16-byte key")?;
    let iv = iv.try_into().map_err(|_| "a 16-byte counter block")?;
    Ok((key, iv))
}

/// The histogram's output bytes: 256 little-endian `u32` counts.
pub fn histogram_bytes(counts: &[u32; 256]) -> Vec<u8> {
    counts.iter().flat_map(|c| c.to_le_bytes()).collect()
}

/// What a backend for `kernel` answers on `input` and `aux`, computed on
/// the CPU with `hetsched-cuda`'s references (what the CUDA kernels equal
/// exactly).
pub fn reference_output(kernel: Kernel, input: &[u8], aux: &[u8]) -> Result<Vec<u8>, String> {
    match kernel {
        Kernel::Histogram => Ok(histogram_bytes(&hetsched_cuda::reference::histogram(input))),
        Kernel::Aes128Ctr => {
            let (key, iv) = aes_args(aux)?;
            let mut out = input.to_vec();
            hetsched_cuda::reference::aes128_ctr(&key, &iv, &mut out);
            Ok(out)
        }
        Kernel::User(id) => Err(format!("{id} has no CPU reference here")),
    }
}

impl CudaBackend {
    /// Opens device `ordinal` and builds both kernels with NVRTC, so the
    /// first call does not pay for it. A client may keep up to
    /// `max_kept_bytes` of buffers on the device between calls of its
    /// registered kernels.
    pub fn open(ordinal: usize, max_kept_bytes: u64) -> Result<CudaBackend, String> {
        let device = CudaDevice::open(ordinal).map_err(|e| e.to_string())?;
        for (source, name) in [
            (kernels::HISTOGRAM_SOURCE, "histogram256"),
            (kernels::AES128_CTR_SOURCE, "aes128_ctr"),
        ] {
            device
                .function(source, name)
                .map_err(|e| format!("building {name}: {e}"))?;
        }
        Ok(CudaBackend {
            device,
            user: PtxKernels::new(max_kept_bytes),
        })
    }

    pub fn info(&self) -> &CudaDeviceInfo {
        self.device.info()
    }

    /// Opens device `ordinal` for a kernel executor process
    /// ([`super::executor_main`]), which runs only registered kernels:
    /// the built-in ones are not built.
    pub fn open_for_user_kernels(
        ordinal: usize,
        max_kept_bytes: u64,
    ) -> Result<CudaBackend, String> {
        let device = CudaDevice::open(ordinal).map_err(|e| e.to_string())?;
        Ok(CudaBackend {
            device,
            user: PtxKernels::new(max_kept_bytes),
        })
    }

    fn run_on_device(&self, kernel: Kernel, input: &[u8], aux: &[u8]) -> Result<Vec<u8>, String> {
        match kernel {
            Kernel::Histogram => kernels::histogram(&self.device, input)
                .map(|c| histogram_bytes(&c))
                .map_err(|e| e.to_string()),
            Kernel::Aes128Ctr => {
                let (key, iv) = aes_args(aux)?;
                kernels::aes128_ctr(&self.device, &key, &iv, input).map_err(|e| e.to_string())
            }
            Kernel::User(id) => Err(format!("{id}: this unit runs only its built-in kernels")),
        }
    }
}

impl KernelBackend for CudaBackend {
    fn kernels(&self) -> &[Kernel] {
        &Kernel::ALL
    }

    fn device_spec(&self) -> Option<super::wire::DeviceSpec> {
        Some(super::wire::DeviceSpec {
            api: CudaApi.name().into(),
            index: self.device.info().ordinal,
        })
    }

    fn run(&mut self, kernel: Kernel, input: &[u8], aux: &[u8]) -> Result<Vec<u8>, String> {
        // cudarc panics where it should fail (a symbol an old driver
        // lacks); that must fail the call, not end the unit's thread.
        let out = gpu::guarded(kernel.name(), || self.run_on_device(kernel, input, aux));
        // Drain the events of this call's commands (a failed call's too).
        let _ = self.device.take_times();
        out
    }

    fn register(
        &mut self,
        client: ClientId,
        source: &str,
        entry: &str,
    ) -> Result<Registered, String> {
        let (user, device) = (&mut self.user, &self.device);
        gpu::guarded("loading the PTX", || {
            user.register(device, client, source, entry)
        })
    }

    fn run_user(
        &mut self,
        client: ClientId,
        call: &UserCall,
        region: &Arc<DataRegion>,
    ) -> Result<(), String> {
        let (user, device) = (&mut self.user, &self.device);
        let out = gpu::guarded("a registered kernel's call", || {
            user.run(device, client, call, region)
        });
        let _ = self.device.take_times();
        out
    }

    fn forget_client(&mut self, client: ClientId) {
        self.user.forget(client);
    }
}

/// Every CUDA device that opens, with its backend; none, and the reason,
/// where CUDA is absent or sees no device. A client may keep up to
/// `max_kept_bytes` on each.
pub fn open_all(max_kept_bytes: u64) -> Result<Vec<CudaBackend>, String> {
    let count = hetsched_cuda::probe()?;
    if count == 0 {
        return Err("the CUDA driver reports no device".into());
    }
    let mut out = Vec::new();
    for ordinal in 0..count {
        match CudaBackend::open(ordinal, max_kept_bytes) {
            Ok(b) => out.push(b),
            Err(e) => tracing::warn!("CUDA device {ordinal} is not served: {e}"),
        }
    }
    Ok(out)
}

/// CUDA as a device API of the daemon (feature `cuda`): every device the
/// driver reports, `cuda_units` to serve them, always of class GPU.
pub struct CudaApi;

fn listed(ordinal: usize, name: &str) -> ListedDevice {
    ListedDevice {
        index: ordinal,
        name: name.trim().to_string(),
        class: UnitClass::Gpu,
    }
}

impl DeviceApi for CudaApi {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn label(&self) -> &'static str {
        "CUDA"
    }

    fn config_key(&self) -> &'static str {
        "cuda_units"
    }

    fn list(&self) -> Result<Vec<ListedDevice>, String> {
        if let Some(why) = hetsched_cuda::switched_off() {
            return Err(why);
        }
        let names = hetsched_cuda::device_names()?;
        Ok(names
            .iter()
            .enumerate()
            .map(|(ordinal, name)| listed(ordinal, name))
            .collect())
    }

    fn open_served(&self, max_kept_bytes: u64) -> Result<Vec<ServedDevice>, String> {
        if let Some(why) = hetsched_cuda::switched_off() {
            return Err(why);
        }
        Ok(open_all(max_kept_bytes)?
            .into_iter()
            .map(|backend| ServedDevice {
                listed: listed(backend.info().ordinal, &backend.info().name),
                backend: Box::new(backend),
            })
            .collect())
    }

    fn open_for_executor(
        &self,
        index: usize,
        max_kept_bytes: u64,
    ) -> Result<ExecutorDevice, String> {
        let backend = CudaBackend::open_for_user_kernels(index, max_kept_bytes)?;
        Ok(ExecutorDevice {
            name: backend.info().name.trim().to_string(),
            backend: Box::new(backend),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_protocol::kernel_call::decode;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Reproducible bytes from a seeded ChaCha generator.
    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        use rand::{RngCore, SeedableRng};
        let mut out = vec![0u8; len];
        rand_chacha::ChaCha8Rng::seed_from_u64(seed).fill_bytes(&mut out);
        out
    }

    /// A backend that answers with the references: what `CudaBackend`
    /// answers on a GPU, so the layout around the kernels is checked here.
    struct Reference;

    impl KernelBackend for Reference {
        fn kernels(&self) -> &[Kernel] {
            &Kernel::ALL
        }
        fn run(&mut self, kernel: Kernel, input: &[u8], aux: &[u8]) -> Result<Vec<u8>, String> {
            reference_output(kernel, input, aux)
        }
    }

    /// The protocol's AES layout (key, then big-endian counter block) on
    /// NIST SP 800-38A F.5.1, through a client's region and a packet.
    #[test]
    fn aes_aux_is_key_then_big_endian_counter_block() {
        let (daemon, client) = hetsched_views::data_region::pair(4096).unwrap();
        let plain = hex(concat!(
            "6bc1bee22e409f96e93d7e117393172a",
            "ae2d8a571e03ac9c9eb76fac45af8e51",
            "30c81c46a35ce411e5fbc1191a0a52ef",
            "f69f2445df4f9b17ad2b417be66c3710"
        ));
        client.write(0, &plain).unwrap();
        let mut aux = hex("2b7e151628aed2a6abf7158809cf4f3c");
        aux.extend(hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff"));
        client.write(2048, &aux).unwrap();
        let call = decode(&[7, 2, 0, 64, 1024, 64, 2048], 4096).unwrap();
        super::super::execute(&mut Reference, &call, &daemon, &mut Vec::new()).unwrap();
        let mut got = vec![0u8; 64];
        client.read(1024, &mut got).unwrap();
        assert_eq!(
            got,
            hex(concat!(
                "874d6191b620e3261bef6864990db6ce",
                "9806f66b7970fdff8617187bb9fffdff",
                "5ae4df3edbd5d35e5b4f09020db03eab",
                "1e031dda2fbe03d1792170a0f3009cee"
            ))
        );
    }

    #[test]
    fn histogram_output_is_little_endian_counts() {
        let (daemon, client) = hetsched_views::data_region::pair(4096).unwrap();
        let mut data = vec![0x41u8; 300];
        data.extend([0xFF; 2]);
        client.write(0, &data).unwrap();
        let call = decode(&[1, 1, 0, data.len() as u64, 1024, 1024, 0], 4096).unwrap();
        super::super::execute(&mut Reference, &call, &daemon, &mut Vec::new()).unwrap();
        let mut out = vec![0u8; 1024];
        client.read(1024, &mut out).unwrap();
        assert_eq!(&out[4 * 0x41..4 * 0x41 + 4], &300u32.to_le_bytes());
        assert_eq!(&out[4 * 0xFF..4 * 0xFF + 4], &[2, 0, 0, 0]);
        let total: u32 = out
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .sum();
        assert_eq!(total as usize, data.len());
    }

    #[test]
    fn aes_args_refuse_a_short_aux() {
        let err = aes_args(&[0; 31]).unwrap_err();
        assert!(err.contains("32 bytes"), "{err}");
        let (key, iv) = aes_args(&(0..32).collect::<Vec<u8>>()).unwrap();
        assert_eq!(key[0], 0);
        assert_eq!(iv, std::array::from_fn(|i| 16 + i as u8));
    }

    /// The CUDA crate's reference (what the CUDA kernel equals) and the
    /// OpenCL crate's (what `hetsched load` and the OpenCL units check
    /// against) agree on the protocol's bytes: lengths around a block, a
    /// counter that carries across its 64-bit halves and one that wraps.
    #[cfg(feature = "opencl")]
    #[test]
    fn cuda_and_opencl_references_agree() {
        let counters = [
            [0u8; 16],
            [0xFF; 16],
            std::array::from_fn(|i| if i < 8 { 0 } else { 0xFF }),
            std::array::from_fn(|i| i as u8 * 17),
        ];
        for (n, iv) in counters.into_iter().enumerate() {
            for len in [0, 1, 15, 16, 17, 1000, 4096 + 5] {
                let key: [u8; 16] = bytes(16, n as u64 + 100).try_into().unwrap();
                let data = bytes(len, (n * 1000 + len) as u64);
                let mut aux = key.to_vec();
                aux.extend(iv);
                let ours = reference_output(Kernel::Aes128Ctr, &data, &aux).unwrap();
                let mut theirs = data.clone();
                hetsched_opencl::reference::aes128_ctr(&key, &iv, &mut theirs);
                assert_eq!(ours, theirs, "counter {iv:02x?}, {len} bytes");
                let ours = reference_output(Kernel::Histogram, &data, &[]).unwrap();
                let theirs = histogram_bytes(&hetsched_opencl::reference::histogram(&data));
                assert_eq!(ours, theirs);
            }
        }
    }

    /// On a GPU: the backend equals the references. Elsewhere it says why
    /// it skips, and `open_all` says why there is no device (no panic).
    #[test]
    fn the_backend_equals_the_references_on_a_gpu() {
        let mut backends = match open_all(1 << 20) {
            Ok(b) if !b.is_empty() => b,
            Ok(_) => {
                hetsched_platform::test_support::available(
                    "cuda",
                    Err("no CUDA device opened".into()),
                );
                return;
            }
            Err(e) => {
                assert!(!e.is_empty());
                hetsched_platform::test_support::available("cuda", Err(e));
                return;
            }
        };
        let backend = &mut backends[0];
        let aux = bytes(32, 7);
        for len in [1, 3, 16, 17, 4096, (1 << 20) + 5] {
            let data = bytes(len, len as u64);
            for kernel in Kernel::ALL {
                let got = backend.run(kernel, &data, &aux).unwrap();
                let want = reference_output(kernel, &data, &aux).unwrap();
                assert_eq!(got, want, "{kernel} on {len} bytes");
            }
        }
    }
}
