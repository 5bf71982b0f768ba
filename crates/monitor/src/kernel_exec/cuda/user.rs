//! Kernels clients register with a served CUDA unit: a PTX module and a
//! declaration of the kernel's parameter kinds (`scale(const ptr, ptr,
//! f32)`, [`hetsched_protocol::ptx`]), loaded once per distinct (PTX,
//! declaration) and shared by every client that registers the same. Calls
//! run like OpenCL's registered kernels: the same packets and argument
//! blocks, and the same bookkeeping of kept and spare buffers
//! ([`super::super::user_store`]: zeroed buffers, `max_kept_bytes` per client,
//! buffers tied to a client and its region).
//!
//! A launch is 1-D: `local` threads per block (256 where the call leaves
//! it to the daemon), `ceil(global / block)` blocks, so the kernel sees at
//! least `global` threads and must guard the rest. Each call waits for the
//! device before it ends, so a kernel's fault fails its own call.
//! Registering cubin is not built: PTX only.

use super::super::user_device::{RegisteredKernels, UserDevice};
use super::super::user_store::{CallBuffer, DeviceBytes};
use hetsched_cuda::cudarc::driver::CudaSlice;
use hetsched_cuda::{CudaDevice, PtxArg, PtxKernel};
use hetsched_protocol::ptx::{KINDS, is_declaration, ptx_signature};
use hetsched_protocol::user_kernel::{KernelSignature, ParamKind, UserArg, UserCall};

/// Threads per block of a call whose `local` is 0.
pub const DEFAULT_BLOCK: u32 = 256;

impl DeviceBytes for CudaSlice<u8> {
    fn byte_len(&self) -> u64 {
        self.len() as u64
    }
}

/// Bytes of the kernel parameter a kind is passed as.
fn param_bytes(kind: ParamKind) -> usize {
    match kind {
        ParamKind::Buffer { .. } | ParamKind::U64 => 8,
        // A declaration has no `__local`; the rest are 4 bytes.
        ParamKind::Local | ParamKind::U32 | ParamKind::I32 | ParamKind::F32 => 4,
    }
}

/// What registering `entry` of PTX `source` gives before the device sees
/// it: the kernel's signature and its parameters' sizes, or why it is
/// refused (pure: the PTX is read here, the driver only loads it).
pub fn ptx_plan(source: &str, entry: &str) -> Result<(KernelSignature, Vec<usize>), String> {
    if !is_declaration(entry) {
        return Err(format!(
            "a CUDA unit needs the kernel's parameter kinds, which PTX does not tell (a \
             pointer is a plain .u64): register `{}(kind, ...)` with kinds {KINDS}",
            entry.chars().take(64).collect::<String>()
        ));
    }
    let signature = ptx_signature(source, entry)?;
    let sizes = signature
        .params
        .iter()
        .map(|p| param_bytes(p.kind))
        .collect();
    Ok((signature, sizes))
}

/// The launch argument of a scalar of `kind` whose bytes are `value`
/// (`UserPacket::bind` checked that 4-byte scalars fit).
fn scalar(kind: ParamKind, value: u64) -> PtxArg<'static> {
    let low = value as u32;
    match kind {
        ParamKind::I32 => PtxArg::I32(low as i32),
        ParamKind::F32 => PtxArg::F32(f32::from_bits(low)),
        ParamKind::U64 => PtxArg::U64(value),
        _ => PtxArg::U32(low),
    }
}

/// Threads per block of `call`.
fn block_of(call: &UserCall) -> Result<u32, String> {
    match call.local {
        None => Ok(DEFAULT_BLOCK),
        Some(l) => {
            u32::try_from(l).map_err(|_| format!("{l} threads per block: CUDA takes 1..=1024"))
        }
    }
}

/// The kernels clients registered on a CUDA device.
pub(super) type PtxKernels = RegisteredKernels<CudaDevice>;

impl UserDevice for CudaDevice {
    type Kernel = PtxKernel;
    type Buffer = CudaSlice<u8>;

    /// Loads the kernel `entry` declares from PTX `source`.
    fn build(&self, source: &str, entry: &str) -> Result<(PtxKernel, KernelSignature), String> {
        let (signature, sizes) = ptx_plan(source, entry)?;
        let kernel = self
            .load_ptx(source, &signature.entry, sizes)
            .map_err(|e| {
                format!(
                    "`{}`: the CUDA driver does not load this PTX: {e}",
                    signature.entry
                )
            })?;
        Ok((kernel, signature))
    }

    fn alloc(&self, len: u64) -> Result<CudaSlice<u8>, String> {
        self.zeros::<u8>(len as usize).map_err(|e| e.to_string())
    }

    fn upload(&self, buffer: &mut CudaSlice<u8>, bytes: &[u8]) -> Result<(), String> {
        self.upload_into(bytes, buffer).map_err(|e| e.to_string())
    }

    fn launch(
        &self,
        kernel: &PtxKernel,
        signature: &KernelSignature,
        call: &UserCall,
        buffers: &[CallBuffer<CudaSlice<u8>>],
    ) -> Result<(), String> {
        let mut next_buffer = buffers.iter();
        let args: Vec<PtxArg<'_>> = call
            .args
            .iter()
            .zip(&signature.params)
            .map(|(arg, param)| match arg {
                UserArg::Buffer { .. } => {
                    PtxArg::Buffer(&next_buffer.next().expect("one per buffer").buffer)
                }
                UserArg::Scalar(v) => scalar(param.kind, *v),
                // A PTX signature has no `__local` parameter.
                UserArg::Local(_) => PtxArg::U32(0),
            })
            .collect();
        self.launch_ptx(kernel, call.global, block_of(call)?, &args)
            .map_err(|e| format!("the launch failed: {e}"))
    }

    fn download(&self, buffer: &CudaSlice<u8>, out: &mut [u8]) -> Result<(), String> {
        CudaDevice::download(self, buffer, out).map_err(|e| e.to_string())
    }

    /// A fault shows when the device is waited for: it fails this call.
    fn finish(&self) -> Result<(), String> {
        self.take_times()
            .map(|_| ())
            .map_err(|e| format!("the kernel failed: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::user_store::{floats, write_floats};
    use super::*;
    use hetsched_core::ids::ClientId;
    use std::sync::Arc;

    /// The example PTX kernel (`scale`, guarded by `n`).
    pub(crate) const SCALE_PTX: &str = hetsched_cuda::kernels::SCALE_PTX;

    pub(crate) const SCALE_DECL: &str = hetsched_cuda::kernels::SCALE_PTX_DECLARATION;

    /// A CUDA device, or `None` after saying why not (a failure where
    /// `HETSCHED_TEST_REQUIRE=cuda`, as in `scripts/gpu-check.sh`).
    fn device() -> Option<CudaDevice> {
        let opened = hetsched_cuda::probe()
            .and_then(|n| {
                if n == 0 {
                    Err("the CUDA driver reports no device".into())
                } else {
                    Ok(())
                }
            })
            .and_then(|()| CudaDevice::open(0).map_err(|e| e.to_string()));
        match opened {
            Ok(d) => Some(d),
            Err(e) => {
                hetsched_platform::test_support::available("cuda", Err(e));
                None
            }
        }
    }

    /// `scale` over 100 floats (not a multiple of the block: the kernel
    /// guards by `n`), source bytes 0..400, result 512..912.
    fn scale_call(
        id: hetsched_protocol::user_kernel::UserKernelId,
        src: u64,
        dst: u64,
        factor: f32,
    ) -> UserCall {
        UserCall {
            kernel: id,
            global: 100,
            local: None,
            args: vec![
                UserArg::Buffer {
                    range: 0..400,
                    flags: src,
                },
                UserArg::Buffer {
                    range: 512..912,
                    flags: dst,
                },
                UserArg::Scalar(u64::from(factor.to_bits())),
                UserArg::Scalar(100),
            ],
        }
    }

    /// On a GPU: a registered PTX kernel runs with its buffers as their
    /// flags say (zeroed when not copied in, kept for its client), a
    /// failing launch fails only its call, and a PTX the driver refuses is
    /// refused by name.
    #[test]
    fn a_registered_ptx_kernel_runs_on_a_gpu() {
        use hetsched_protocol::user_kernel::flags::{COPY_IN, COPY_OUT, KEEP};
        let Some(dev) = device() else { return };
        let mut k = PtxKernels::new(1 << 20);
        let first = k
            .register(&dev, ClientId(1), SCALE_PTX, SCALE_DECL)
            .unwrap();
        assert!(!first.cached);
        assert!(
            k.register(&dev, ClientId(1), SCALE_PTX, SCALE_DECL)
                .unwrap()
                .cached
        );
        let id = first.id;
        let (daemon, client) = hetsched_views::data_region::pair(4096).unwrap();
        let daemon = Arc::new(daemon);
        let src: Vec<f32> = (0..100).map(|i| i as f32).collect();
        write_floats(&client, 0, &src);
        k.run(
            &dev,
            ClientId(1),
            &scale_call(id, COPY_IN, COPY_OUT, 2.0),
            &daemon,
        )
        .unwrap();
        let want: Vec<f32> = src.iter().map(|v| v * 2.0).collect();
        assert_eq!(floats(&client, 512, 100), want);
        // Not copied in: another client's call sees zeros.
        k.run(
            &dev,
            ClientId(2),
            &scale_call(id, 0, COPY_OUT, 3.0),
            &daemon,
        )
        .unwrap();
        assert_eq!(floats(&client, 512, 100), vec![0.0; 100]);
        // Kept: the device copy is used although the region changed.
        write_floats(&client, 0, &[1.0; 100]);
        k.run(
            &dev,
            ClientId(1),
            &scale_call(id, COPY_IN | KEEP, COPY_OUT, 1.0),
            &daemon,
        )
        .unwrap();
        write_floats(&client, 0, &[5.0; 100]);
        k.run(
            &dev,
            ClientId(1),
            &scale_call(id, KEEP, COPY_OUT, 3.0),
            &daemon,
        )
        .unwrap();
        assert_eq!(floats(&client, 512, 100), vec![3.0; 100]);
        // Too many threads per block: this call fails, the next one runs.
        let mut bad = scale_call(id, COPY_IN, COPY_OUT, 2.0);
        bad.global = 4096;
        bad.local = Some(2048);
        let err = k.run(&dev, ClientId(1), &bad, &daemon).unwrap_err();
        assert!(err.contains("`scale`") && err.contains("launch"), "{err}");
        k.run(
            &dev,
            ClientId(1),
            &scale_call(id, COPY_IN, COPY_OUT, 4.0),
            &daemon,
        )
        .unwrap();
        assert_eq!(floats(&client, 512, 100), vec![20.0; 100]);
        // PTX the driver refuses.
        let broken = ".version 7.0\n.target sm_52\n.address_size 64\n\
                      .visible .entry f(.param .u32 n)\n{ nonsense; }\n";
        let err = k.register(&dev, ClientId(1), broken, "f(u32)").unwrap_err();
        assert!(err.contains("does not load"), "{err}");
        k.forget(ClientId(1));
    }

    #[test]
    fn a_declared_ptx_kernel_is_planned_with_its_sizes() {
        let (sig, sizes) = ptx_plan(SCALE_PTX, SCALE_DECL).unwrap();
        assert_eq!(sig.entry, "scale");
        assert_eq!(sizes, [8, 8, 4, 4]);
        assert_eq!(sig.params[0].kind, ParamKind::Buffer { read_only: true });
        assert_eq!(sig.params[3].name, "scale_param_3");
    }

    #[test]
    fn a_cuda_unit_refuses_what_it_cannot_check() {
        let err = ptx_plan(SCALE_PTX, "scale").unwrap_err();
        assert!(
            err.contains("parameter kinds") && err.contains("const ptr"),
            "{err}"
        );
        let err = ptx_plan(SCALE_PTX, "scale(ptr, ptr, f32)").unwrap_err();
        assert!(
            err.contains("3 parameters") && err.contains("has 4"),
            "{err}"
        );
        let err = ptx_plan(SCALE_PTX, "scale(ptr, ptr, u64, u32)").unwrap_err();
        assert!(err.contains("parameter 2 `scale_param_2`"), "{err}");
        // OpenCL C is not PTX.
        let err = ptx_plan("__kernel void scale(__global float *x) {}", "scale(ptr)");
        assert!(err.unwrap_err().contains("defines no kernel"));
    }

    #[test]
    fn scalars_and_blocks_are_passed_as_declared() {
        assert!(matches!(scalar(ParamKind::U32, 7), PtxArg::U32(7)));
        assert!(matches!(
            scalar(ParamKind::I32, u64::from((-3i32) as u32)),
            PtxArg::I32(-3)
        ));
        assert!(matches!(
            scalar(ParamKind::F32, u64::from(2.5f32.to_bits())),
            PtxArg::F32(v) if v == 2.5
        ));
        assert!(matches!(scalar(ParamKind::U64, 1 << 40), PtxArg::U64(v) if v == 1 << 40));
        let mut call = UserCall {
            kernel: hetsched_protocol::user_kernel::UserKernelId(0),
            global: 1000,
            local: None,
            args: Vec::new(),
        };
        assert_eq!(block_of(&call), Ok(DEFAULT_BLOCK));
        call.local = Some(128);
        assert_eq!(block_of(&call), Ok(128));
        call.local = Some(1 << 33);
        assert!(block_of(&call).unwrap_err().contains("threads per block"));
    }
}
