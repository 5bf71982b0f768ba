//! Real work on units the daemon serves itself (Pegasus's backend): each
//! such unit has one executor thread that owns the device. A client's call
//! reaches it only once the unit's policy picked the call, so the device
//! runs at most what the policy lets run, whatever the client does.
//!
//! A call's input is copied out of the client's data region before the
//! kernel runs and its output is copied in after, so a client that writes
//! its region while the call runs only spoils its own result. The time the
//! client is charged is the wall time its call held the unit, measured
//! here, never a figure the client gave.
//!
//! Besides the built-in kernels, a unit may run kernels clients register
//! ([`hetsched_protocol::user_kernel`]). Those never run in the daemon:
//! the unit's thread hands them to a kernel executor process of the
//! client's user ([`sandbox`]), which builds and runs them with the same
//! backend ([`KernelBackend::register`], [`KernelBackend::run_user`]) in a
//! confined process ([`executor_main`], [`confine`]). The built-in
//! kernels are the daemon's own code and stay on the thread.
//!
//! [`KernelBackend`] is what a device must do; the OpenCL one is
//! `opencl::OpenClBackend` (feature `opencl`), the CUDA one
//! `cuda::CudaBackend` (feature `cuda`). Each API opens its devices
//! through its [`device_api::DeviceApi`] (`OpenClApi`, `CudaApi`), one line
//! each in [`apis::all`], and runs registered kernels through one
//! skeleton (`user_device.rs`).

pub use crate::user_kernels::Registered;
use hetsched_core::ids::{ClientId, UnitId};
use hetsched_protocol::kernel_call::{Kernel, KernelCall};
use hetsched_protocol::user_kernel::UserCall;
use hetsched_views::data_region::DataRegion;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A device the daemon runs kernels on.
pub trait KernelBackend: Send {
    /// The kernels it runs.
    fn kernels(&self) -> &[Kernel];
    /// Runs `kernel` on `input` with its extra argument `aux`, returning
    /// exactly `kernel.out_len(input.len())` bytes, or why it could not.
    fn run(&mut self, kernel: Kernel, input: &[u8], aux: &[u8]) -> Result<Vec<u8>, String>;

    /// Builds `client`'s kernel `entry` of `source` (or finds it built
    /// already), or says why it cannot, with the compiler's log.
    fn register(
        &mut self,
        _client: ClientId,
        _source: &str,
        _entry: &str,
    ) -> Result<Registered, String> {
        Err(
            "this unit runs only its built-in kernels; registering kernels is built for \
             OpenCL units (OpenCL C) and CUDA units (PTX, in a build with the `cuda` feature)"
                .into(),
        )
    }

    /// Runs a checked call of a registered kernel against `region`.
    fn run_user(
        &mut self,
        _client: ClientId,
        call: &UserCall,
        _region: &Arc<DataRegion>,
    ) -> Result<(), String> {
        Err(format!("this unit does not run {}", call.kernel))
    }

    /// `client` left: drop what the backend keeps for it.
    fn forget_client(&mut self, _client: ClientId) {}

    /// The device as a kernel executor process opens it to run registered
    /// kernels; `None` for a unit that runs only built-in kernels.
    fn device_spec(&self) -> Option<wire::DeviceSpec> {
        None
    }
}

/// What an executor is asked to do.
#[derive(Debug)]
pub enum ExecJob {
    /// Run a call its unit's policy started.
    Call(KernelJob),
    /// Build a client's kernel (`RegisterKernel`).
    Register {
        owner: Owner,
        source: String,
        entry: String,
    },
    /// The client left.
    Forget(ClientId),
    /// The server stops: end after the jobs queued before this one.
    Stop,
}

/// A call the unit's policy started, on its way to the executor.
#[derive(Debug)]
pub struct KernelJob {
    pub client: ClientId,
    /// The client's user and group, for a registered kernel's call (its
    /// executor runs as them); `None` once the client left.
    pub user: Option<(u32, u32)>,
    pub call: KernelCall,
    /// The region the call was checked against (alive while the job is,
    /// even if the client left or replaced its ring).
    pub region: Arc<DataRegion>,
}

/// Runs one call against the client's region: input out, kernel, output
/// in. `input` is scratch space kept between calls, so a large input does
/// not cost fresh pages every time.
pub fn execute(
    backend: &mut dyn KernelBackend,
    call: &KernelCall,
    region: &DataRegion,
    input: &mut Vec<u8>,
) -> Result<(), String> {
    if let Some(user) = &call.user {
        return Err(format!(
            "{} needs the client's region handle (run it with run_user)",
            user.kernel
        ));
    }
    if !backend.kernels().contains(&call.kernel) {
        return Err(format!("this unit does not run {}", call.kernel));
    }
    input.resize(call.in_len() as usize, 0);
    region
        .read(call.input.start, input)
        .map_err(|e| e.to_string())?;
    let mut aux = vec![0u8; (call.aux.end - call.aux.start) as usize];
    region
        .read(call.aux.start, &mut aux)
        .map_err(|e| e.to_string())?;
    let output = backend.run(call.kernel, input, &aux)?;
    let want = call.output.end - call.output.start;
    if output.len() as u64 != want {
        return Err(format!(
            "{} returned {} bytes instead of {want}",
            call.kernel,
            output.len()
        ));
    }
    region
        .write(call.output.start, &output)
        .map_err(|e| e.to_string())
}

/// The backends of the served units, handed from the set-up to the server,
/// which takes them once to start their threads (a set-up is cloned; a
/// device is not).
#[derive(Clone, Default)]
pub struct Backends(Arc<Mutex<Vec<ServedBackend>>>);

/// A served unit and the device behind it.
pub type ServedBackend = (UnitId, Box<dyn KernelBackend>);

impl Backends {
    pub fn new(list: Vec<ServedBackend>) -> Backends {
        Backends(Arc::new(Mutex::new(list)))
    }

    /// Takes every backend out (the first caller gets them).
    pub fn take(&self) -> Vec<ServedBackend> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let units: Vec<UnitId> = self
            .0
            .lock()
            .map(|l| l.iter().map(|(u, _)| *u).collect())
            .unwrap_or_default();
        f.debug_tuple("Backends").field(&units).finish()
    }
}

/// Runs one built-in kernel's call and times it. A backend that panics
/// (a driver's binding, a bug) fails this call only: the executor lives
/// on, so the unit is not held for ever.
pub(crate) fn run_job(
    backend: &mut dyn KernelBackend,
    job: &KernelJob,
    input: &mut Vec<u8>,
) -> (u64, Result<(), String>) {
    let started = Instant::now();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        execute(backend, &job.call, &job.region, input)
    }))
    .unwrap_or_else(|_| Err("the kernel backend panicked".to_string()));
    (started.elapsed().as_nanos() as u64, result)
}

/// Runs a registered kernel's call in its user's executor process, and
/// times it (a call killed at its limit is charged up to the kill).
pub(crate) fn run_user_job(sandboxes: &mut Sandboxes, job: &KernelJob) -> (u64, Outcome<()>) {
    let started = Instant::now();
    let out = match (&job.call.user, job.user) {
        (Some(call), Some((uid, gid))) => {
            let owner = Owner {
                client: job.client,
                uid,
                gid,
            };
            sandboxes.run(owner, call, &job.region)
        }
        _ => Outcome {
            result: Err("its client left".to_string()),
            lost: Vec::new(),
        },
    };
    (started.elapsed().as_nanos() as u64, out)
}

pub mod apis;
pub mod confine;
pub mod device_api;
pub mod executor_main;
pub mod sandbox;
pub mod wire;

pub use sandbox::{Outcome, Owner, SandboxSpec, Sandboxes};

#[cfg(feature = "cuda")]
pub mod cuda;

#[cfg(feature = "opencl")]
pub mod opencl;
#[cfg(feature = "opencl")]
mod opencl_user;
#[cfg(feature = "opencl")]
mod region_memory;
#[cfg(feature = "devices")]
mod user_device;
#[cfg(any(feature = "devices", test))]
mod user_store;

#[cfg(test)]
mod tests {
    use super::*;
    use hetsched_core::ids::TaskId;
    use hetsched_protocol::kernel_call::decode;
    use hetsched_protocol::user_kernel::UserKernelId;

    /// A backend that counts bytes (for the histogram) and XORs with the
    /// key's first byte (for AES), in plain Rust.
    struct Plain;

    impl KernelBackend for Plain {
        fn kernels(&self) -> &[Kernel] {
            &Kernel::ALL
        }
        fn run(&mut self, kernel: Kernel, input: &[u8], aux: &[u8]) -> Result<Vec<u8>, String> {
            Ok(match kernel {
                Kernel::Histogram => {
                    let mut counts = [0u32; 256];
                    for &b in input {
                        counts[b as usize] += 1;
                    }
                    counts.iter().flat_map(|c| c.to_le_bytes()).collect()
                }
                Kernel::Aes128Ctr => input.iter().map(|b| b ^ aux[0]).collect(),
                Kernel::User(id) => return Err(format!("{id} is not built in")),
            })
        }
    }

    #[test]
    fn a_call_reads_its_input_and_writes_only_its_output() {
        let (daemon, client) = hetsched_views::data_region::pair(8192).unwrap();
        client.write(0, &[3u8; 100]).unwrap();
        client.write(4096, &[0xEE; 1024 + 16]).unwrap();
        let call = decode(&[1, 1, 0, 100, 4096, 1024, 0], 8192).unwrap();
        execute(&mut Plain, &call, &daemon, &mut Vec::new()).unwrap();
        let mut counts = [0u8; 1024];
        client.read(4096, &mut counts).unwrap();
        assert_eq!(&counts[12..16], &100u32.to_le_bytes());
        assert_eq!(counts.iter().map(|&b| u32::from(b)).sum::<u32>(), 100);
        let mut after = [0u8; 16];
        client.read(4096 + 1024, &mut after).unwrap();
        assert_eq!(after, [0xEE; 16], "bytes past the output are untouched");
    }

    #[test]
    fn an_in_place_call_sees_its_whole_input_first() {
        let (daemon, client) = hetsched_views::data_region::pair(4096).unwrap();
        client.write(0, &[0x0F; 64]).unwrap();
        client.write(1024, &[0xF0; 32]).unwrap();
        let call = decode(&[2, 2, 0, 64, 0, 64, 1024], 4096).unwrap();
        execute(&mut Plain, &call, &daemon, &mut Vec::new()).unwrap();
        let mut got = [0u8; 64];
        client.read(0, &mut got).unwrap();
        assert_eq!(got, [0xFF; 64]);
    }

    /// A unit that runs only built-in kernels (an emulated one, or a CUDA
    /// device in a build without `cuda`, which the config refuses to
    /// serve at all) refuses a registration, OpenCL C or PTX, saying what
    /// is built.
    #[test]
    fn a_backend_without_registered_kernels_says_why() {
        let err = Plain
            .register(ClientId(1), ".entry f()", "f()")
            .unwrap_err();
        assert!(err.contains("only its built-in kernels"), "{err}");
        assert!(
            err.contains("PTX") && err.contains("`cuda` feature"),
            "{err}"
        );
        let (daemon, _client) = hetsched_views::data_region::pair(4096).unwrap();
        let call = UserCall {
            kernel: UserKernelId(0),
            global: 1,
            local: None,
            args: Vec::new(),
        };
        let err = Plain
            .run_user(ClientId(1), &call, &Arc::new(daemon))
            .unwrap_err();
        assert!(err.contains("does not run user kernel 0"), "{err}");
    }

    /// A panicking backend fails the call it was running, and the next
    /// call on the same executor still runs.
    #[test]
    fn a_panicking_backend_fails_only_its_call() {
        struct Flaky(u32);
        impl KernelBackend for Flaky {
            fn kernels(&self) -> &[Kernel] {
                &Kernel::ALL
            }
            fn run(&mut self, k: Kernel, input: &[u8], aux: &[u8]) -> Result<Vec<u8>, String> {
                self.0 += 1;
                if self.0 == 1 {
                    panic!("driver fault");
                }
                Plain.run(k, input, aux)
            }
        }
        let (daemon, _client) = hetsched_views::data_region::pair(8192).unwrap();
        let job = KernelJob {
            client: ClientId(1),
            user: None,
            call: decode(&[1, 1, 0, 64, 4096, 1024, 0], 8192).unwrap(),
            region: Arc::new(daemon),
        };
        let mut backend = Flaky(0);
        let (_, first) = run_job(&mut backend, &job, &mut Vec::new());
        assert_eq!(first, Err("the kernel backend panicked".to_string()));
        let (_, second) = run_job(&mut backend, &job, &mut Vec::new());
        assert_eq!(second, Ok(()));
    }

    /// Registered kernels go to an executor process; where none can be
    /// started the call fails saying why, and nothing is lost.
    #[test]
    fn without_an_executor_program_registered_kernels_are_refused() {
        let owner = Owner {
            client: ClientId(1),
            uid: 0,
            gid: 0,
        };
        let mut none = Sandboxes::new("emu0".into(), None, SandboxSpec::default());
        let o = none.register(owner, "src", "f");
        assert!(o.result.unwrap_err().contains("only its built-in kernels"));
        let spec = wire::DeviceSpec {
            api: "opencl".into(),
            index: 0,
        };
        let mut embedded = Sandboxes::new("served0".into(), Some(spec), SandboxSpec::default());
        let o = embedded.register(owner, "src", "f");
        assert!(o.result.unwrap_err().contains("no kernel executor"));
        assert!(o.lost.is_empty());
        assert_eq!(embedded.running(), 0);
    }

    /// A backend that lies about its output size is caught before the
    /// region is written.
    #[test]
    fn a_short_output_is_an_error_and_writes_nothing() {
        struct Short;
        impl KernelBackend for Short {
            fn kernels(&self) -> &[Kernel] {
                &[Kernel::Histogram]
            }
            fn run(&mut self, _: Kernel, _: &[u8], _: &[u8]) -> Result<Vec<u8>, String> {
                Ok(vec![1; 10])
            }
        }
        let (daemon, client) = hetsched_views::data_region::pair(4096).unwrap();
        let call = decode(&[1, 1, 0, 8, 1024, 1024, 0], 4096).unwrap();
        let err = execute(&mut Short, &call, &daemon, &mut Vec::new()).unwrap_err();
        assert!(err.contains("10 bytes instead of 1024"), "{err}");
        let mut out = [9u8; 1024];
        client.read(1024, &mut out).unwrap();
        assert_eq!(out, [0u8; 1024]);
        let aes = KernelCall {
            task: TaskId(2),
            kernel: Kernel::Aes128Ctr,
            input: 0..16,
            output: 16..32,
            aux: 64..96,
            user: None,
        };
        let err = execute(&mut Short, &aes, &daemon, &mut Vec::new()).unwrap_err();
        assert!(err.contains("does not run aes128-ctr"), "{err}");
    }
}
