//! A kernel executor process: the daemon starts one per served unit and
//! client user ([`super::sandbox`]), running as that user, to build and
//! run the kernels that user's clients register. Its standard input is
//! its socket to the daemon ([`super::wire`]). It confines itself
//! ([`super::confine`]), opens its device, then answers requests one at
//! a time until the daemon closes the socket (or kills it: a call past
//! `max_device_seconds`, a build past its limits).
//!
//! A client's data region comes with its first call on it; the executor
//! keeps it mapped for the client's next calls, until another comes. A kernel reading out of its buffers sees this process's
//! memory: its own user's clients' data at most, never the daemon's.

use super::KernelBackend;
use super::wire::{self, DeviceSpec, MAX_LOG_BYTES, Reply, Request, StartSpec};
use hetsched_core::ids::ClientId;
use hetsched_protocol::user_kernel::{UserCall, UserKernelId};
use hetsched_views::data_region::DataRegion;
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;
use std::sync::Arc;

/// The hidden subcommand the daemon runs its executors with
/// (`hetsched kernel-executor PARENT_PID FIRST_ID`).
pub const SUBCOMMAND: &str = "kernel-executor";

/// Runs an executor on the socket at standard input, for the daemon
/// `parent`, numbering its kernels from `first_id`.
pub fn main(parent: u32, first_id: u32) -> ExitCode {
    // Dies with the daemon (the thread that started it, which lives as
    // long as the daemon serves), and not after it.
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    if rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32) != Some(parent) {
        return ExitCode::FAILURE;
    }
    let socket = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => UnixStream::from(fd),
        Err(_) => return ExitCode::FAILURE,
    };
    match serve(&socket, first_id) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("hetsched kernel executor: {why}");
            ExitCode::FAILURE
        }
    }
}

fn reply(socket: &UnixStream, r: &Reply) -> Result<(), String> {
    wire::write_all(socket, &wire::encode(r)).map_err(|e| format!("answering: {e}"))
}

fn next_request(socket: &UnixStream) -> Result<Option<(Request, Vec<OwnedFd>)>, String> {
    match wire::recv(socket, None) {
        Ok((payload, fds)) => wire::decode_request(&payload)
            .map(|r| Some((r, fds)))
            .map_err(|e| format!("a malformed request: {e}")),
        Err(wire::RecvError::Closed) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

fn serve(socket: &UnixStream, first_id: u32) -> Result<(), String> {
    let Some((Request::Start(spec), _)) = next_request(socket)? else {
        return Err("the first request was not Start".into());
    };
    let mut executor = match start(&spec) {
        Ok((backend, ready)) => {
            reply(socket, &ready)?;
            Executor {
                backend,
                first_id,
                regions: HashMap::new(),
            }
        }
        Err(why) => {
            reply(socket, &Reply::Failed(why.clone()))?;
            return Err(why);
        }
    };
    while let Some((request, fds)) = next_request(socket)? {
        let answer = executor.handle(request, fds);
        reply(socket, &answer)?;
    }
    Ok(())
}

/// Confines this process, then opens the device.
fn start(spec: &StartSpec) -> Result<(Box<dyn KernelBackend>, Reply), String> {
    let sandbox = super::confine::confine(&spec.cache_dir)?;
    let (backend, device) = open(&spec.device, spec.max_kept_bytes)?;
    Ok((backend, Reply::Ready { device, sandbox }))
}

/// Opens `device` through its API; a device of an API this build lacks
/// is refused, saying so.
fn open(device: &DeviceSpec, max_kept: u64) -> Result<(Box<dyn KernelBackend>, String), String> {
    let api = super::apis::named(&device.api)
        .ok_or_else(|| format!("this hetsched was built without {}", device.api))?;
    let opened = api.open_for_executor(device.index, max_kept)?;
    Ok((opened.backend, opened.name))
}

struct Executor {
    backend: Box<dyn KernelBackend>,
    /// Added to the backend's numbers, so that the kernels of an executor
    /// started after another ended have numbers of their own.
    first_id: u32,
    /// Each client's region, mapped.
    regions: HashMap<ClientId, Arc<DataRegion>>,
}

fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(format!("the kernel backend panicked while {what}")))
}

impl Executor {
    fn handle(&mut self, request: Request, fds: Vec<OwnedFd>) -> Reply {
        let result = match request {
            Request::Start(_) => Err("already started".to_string()),
            Request::Register {
                client,
                source,
                entry,
                memory_bytes,
            } => return self.register(client, &source, &entry, memory_bytes),
            Request::Run { client, call } => self.run(client, call, fds).map(|()| Reply::Ran),
            Request::Forget { client } => {
                self.backend.forget_client(client);
                self.regions.remove(&client);
                Ok(Reply::Forgot)
            }
        };
        result.unwrap_or_else(Reply::Failed)
    }

    fn register(&mut self, client: ClientId, source: &str, entry: &str, memory: u64) -> Reply {
        if let Err(e) = super::confine::limit_memory_growth(Some(memory)) {
            return Reply::Failed(e);
        }
        let built = guarded("building it", || {
            self.backend.register(client, source, entry)
        });
        let _ = super::confine::limit_memory_growth(None);
        let id = |local: UserKernelId| {
            self.first_id
                .checked_add(local.0)
                .map(UserKernelId)
                .ok_or_else(|| "kernel numbers ran out; restart the daemon".to_string())
        };
        match built.and_then(|r| Ok((id(r.id)?, r))) {
            Ok((id, r)) => {
                let mut log = r.log;
                if log.len() > MAX_LOG_BYTES {
                    let mut cut = MAX_LOG_BYTES;
                    while !log.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    log.truncate(cut);
                }
                Reply::Registered {
                    id,
                    signature: r.signature,
                    log,
                    cached: r.cached,
                }
            }
            Err(mut why) => {
                if why.len() > MAX_LOG_BYTES {
                    let mut cut = MAX_LOG_BYTES;
                    while !why.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    why.truncate(cut);
                }
                Reply::Failed(why)
            }
        }
    }

    fn run(
        &mut self,
        client: ClientId,
        mut call: UserCall,
        fds: Vec<OwnedFd>,
    ) -> Result<(), String> {
        // A region comes with a client's first call on it; later calls
        // use the mapping kept.
        let region = match fds.into_iter().next() {
            Some(fd) => {
                let region = Arc::new(
                    DataRegion::from_fd(fd).map_err(|e| format!("mapping the region: {e}"))?,
                );
                self.regions.insert(client, Arc::clone(&region));
                region
            }
            None => self
                .regions
                .get(&client)
                .map(Arc::clone)
                .ok_or("a call came without its region")?,
        };
        call.kernel = call
            .kernel
            .0
            .checked_sub(self.first_id)
            .map(UserKernelId)
            .ok_or_else(|| format!("{} was built by an executor that has ended", call.kernel))?;
        guarded("running it", || {
            self.backend.run_user(client, &call, &region)
        })
    }
}
