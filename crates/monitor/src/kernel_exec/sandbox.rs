//! The daemon's side of the kernel executor processes
//! ([`super::executor_main`]): registered kernels never run in the
//! daemon. Each served unit has one executor process per client user,
//! started on that user's first need, running as that user, confined
//! ([`super::confine`]), with a private kernel cache directory. The
//! unit's thread ([`super::run`]) asks it one thing at a time and waits
//! for the answer up to a deadline: `max_device_seconds` for a call,
//! `[kernels] compile_seconds` for a build.
//!
//! An executor that crashes, sends nonsense, or misses its deadline is
//! killed and reaped: the request fails with a clear error, the kernels
//! it built are gone (its clients are told which, to revoke them; they
//! register again), and the next need starts a fresh one. Other users'
//! executors, and the unit, go on. An executor whose last client left is
//! stopped.

use super::Registered;
use super::wire::{self, DeviceSpec, RecvError, Reply, Request, StartSpec};
use crate::kernel_config::KernelLimits;
use hetsched_core::ids::ClientId;
use hetsched_protocol::user_kernel::UserCall;
use hetsched_views::data_region::DataRegion;
use std::collections::{BTreeSet, HashMap};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How a daemon starts its kernel executors, and their limits.
#[derive(Clone, Debug)]
pub struct SandboxSpec {
    /// The program, run as `PROGRAM kernel-executor PARENT FIRST_ID`
    /// (the daemon's own binary); `None` where there is none (a monitor
    /// embedded in an application), and registering is refused.
    pub program: Option<PathBuf>,
    /// `max_device_seconds`: the longest a call may run.
    pub call_limit: Duration,
    pub limits: KernelLimits,
    /// Bytes a client may keep on a device between calls.
    pub max_kept_bytes: u64,
}

impl Default for SandboxSpec {
    fn default() -> Self {
        SandboxSpec {
            program: None,
            call_limit: Duration::from_secs(10),
            limits: KernelLimits::default(),
            max_kept_bytes: 64 << 20,
        }
    }
}

/// Whose a request is: the client and the user its executor runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub client: ClientId,
    pub uid: u32,
    pub gid: u32,
}

/// What a request to an executor came to: its result, and the clients
/// whose kernels on this unit are gone because their executor ended.
#[derive(Debug)]
pub struct Outcome<T> {
    pub result: Result<T, String>,
    pub lost: Vec<ClientId>,
}

impl<T> Outcome<T> {
    fn only(result: Result<T, String>) -> Outcome<T> {
        Outcome {
            result,
            lost: Vec::new(),
        }
    }
}

/// How long a new executor may take to confine itself and open its
/// device.
const START_LIMIT: Duration = Duration::from_secs(60);
/// How long an executor may take to drop a client that left.
const FORGET_LIMIT: Duration = Duration::from_secs(5);

/// Environment variables an executor keeps from the daemon's: what
/// drivers and the loader read. Everything else is left out.
fn kept_variable(name: &str) -> bool {
    [
        "PATH",
        "LD_LIBRARY_PATH",
        "LANG",
        "LC_ALL",
        "RUST_BACKTRACE",
    ]
    .contains(&name)
        || ["POCL_", "OCL_", "CUDA_", "NVIDIA_", "HSA_", "ROCR_", "GPU_"]
            .iter()
            .any(|p| name.starts_with(p))
}

/// One running executor process.
struct Process {
    child: Child,
    socket: UnixStream,
    /// Its private kernel cache; removed when it ends.
    _cache: tempfile::TempDir,
    /// Numbers it gives its kernels start here; the next one after it
    /// starts past the highest it gave.
    first_id: u32,
    next_id: u32,
    /// Its user's clients it serves (has built or run for).
    clients: BTreeSet<ClientId>,
    /// The region it holds mapped for each client (it was sent once).
    regions: HashMap<ClientId, Weak<DataRegion>>,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The executors of one served unit, by client user.
pub struct Sandboxes {
    unit: String,
    device: Option<DeviceSpec>,
    spec: SandboxSpec,
    running: HashMap<u32, Process>,
    /// Where each user's next executor starts numbering.
    next_first_id: HashMap<u32, u32>,
    /// The user of each client served.
    users: HashMap<ClientId, u32>,
}

impl Sandboxes {
    /// The executors of unit `unit`, whose device an executor opens as
    /// `device` (`None`: the unit runs no registered kernels).
    pub fn new(unit: String, device: Option<DeviceSpec>, spec: SandboxSpec) -> Sandboxes {
        Sandboxes {
            unit,
            device,
            spec,
            running: HashMap::new(),
            next_first_id: HashMap::new(),
            users: HashMap::new(),
        }
    }

    /// Builds `entry` of `source` for `owner`.
    pub fn register(&mut self, owner: Owner, source: &str, entry: &str) -> Outcome<Registered> {
        let request = Request::Register {
            client: owner.client,
            source: source.to_string(),
            entry: entry.to_string(),
            memory_bytes: self.spec.limits.compile_memory_bytes,
        };
        let limit = Duration::from_nanos(self.spec.limits.compile_ns);
        let what = format!("building `{entry}`");
        let out = self.ask(owner, &request, None, limit, &what);
        let mut lost = out.lost;
        let result = match out.result {
            Err(e) => Err(e),
            Ok((
                Reply::Registered {
                    id,
                    signature,
                    log,
                    cached,
                },
                first_id,
            )) if id.0 >= first_id => {
                if let Some(p) = self.running.get_mut(&owner.uid) {
                    p.next_id = p.next_id.max(id.0.saturating_add(1));
                }
                Ok(Registered {
                    id,
                    signature,
                    log,
                    cached,
                })
            }
            Ok((Reply::Failed(why), _)) => Err(why),
            Ok((other, _)) => {
                let (why, gone) = self.nonsense(owner.uid, &other, &what);
                lost = gone;
                Err(why)
            }
        };
        Outcome { result, lost }
    }

    /// Runs `owner`'s checked `call` on `region`.
    pub fn run(&mut self, owner: Owner, call: &UserCall, region: &Arc<DataRegion>) -> Outcome<()> {
        let request = Request::Run {
            client: owner.client,
            call: call.clone(),
        };
        let limit = self.spec.call_limit;
        let what = format!("running {}", call.kernel);
        let out = self.ask(owner, &request, Some(region), limit, &what);
        let mut lost = out.lost;
        let result = match out.result {
            Err(e) => Err(e),
            Ok((Reply::Ran, _)) => Ok(()),
            Ok((Reply::Failed(why), _)) => Err(why),
            Ok((other, _)) => {
                let (why, gone) = self.nonsense(owner.uid, &other, &what);
                lost = gone;
                Err(why)
            }
        };
        Outcome { result, lost }
    }

    /// The executor of `uid` answered `reply`, which makes no sense for
    /// `what` (a kernel scribbled over it, say): it ends.
    fn nonsense(&mut self, uid: u32, reply: &Reply, what: &str) -> (String, Vec<ClientId>) {
        let kind = match reply {
            Reply::Ready { .. } => "Ready",
            Reply::Registered { .. } => "Registered",
            Reply::Ran => "Ran",
            Reply::Forgot => "Forgot",
            Reply::Failed(_) => "Failed",
        };
        let why = format!(
            "the kernel executor of user {uid} on {} answered {kind} while {what}: it was \
             killed, and kernels this user registered on {} must be registered again",
            self.unit, self.unit
        );
        let lost = self.end(uid, &why);
        (why, lost)
    }

    /// `client` left: its executor drops what it kept for it, and ends
    /// if it was the last of its user's clients here. Returns the
    /// clients whose kernels are gone (an executor that did not answer).
    pub fn forget(&mut self, client: ClientId) -> Vec<ClientId> {
        let Some(uid) = self.users.remove(&client) else {
            return Vec::new();
        };
        let Some(p) = self.running.get_mut(&uid) else {
            return Vec::new();
        };
        p.clients.remove(&client);
        p.regions.remove(&client);
        if p.clients.is_empty() {
            self.end(uid, "its last client left");
            return Vec::new();
        }
        let frame = wire::encode(&Request::Forget { client });
        let answered = wire::send(&p.socket, &frame, &[]).is_ok()
            && matches!(
                wire::recv(&p.socket, Some(Instant::now() + FORGET_LIMIT))
                    .map(|(payload, _)| wire::decode_reply(&payload)),
                Ok(Ok(Reply::Forgot))
            );
        if answered {
            Vec::new()
        } else {
            self.end(uid, "it did not drop a client that left")
        }
    }

    /// Ends every executor (the daemon stops).
    pub fn stop(&mut self) {
        let uids: Vec<u32> = self.running.keys().copied().collect();
        for uid in uids {
            self.end(uid, "the daemon stops");
        }
    }

    /// Executors running now (for tests and status).
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Sends `request` (with `region`'s fd) to `owner`'s executor,
    /// starting one if needed, and waits `limit` for its reply. Gives the
    /// reply and the executor's first kernel number.
    fn ask(
        &mut self,
        owner: Owner,
        request: &Request,
        region: Option<&Arc<DataRegion>>,
        limit: Duration,
        what: &str,
    ) -> Outcome<(Reply, u32)> {
        if let Err(e) = self.ensure(owner) {
            return Outcome::only(Err(e));
        }
        let p = self.running.get_mut(&owner.uid).expect("ensured");
        p.clients.insert(owner.client);
        self.users.insert(owner.client, owner.uid);
        let first_id = p.first_id;
        let frame = wire::encode(request);
        // The region goes once per client and region: the executor keeps
        // its mapping for the calls after.
        let fds: Vec<_> = region
            .filter(|r| {
                let known = p.regions.get(&owner.client).and_then(Weak::upgrade);
                !known.is_some_and(|k| Arc::ptr_eq(&k, r))
            })
            .map(|r| r.fd())
            .into_iter()
            .collect();
        if let (Some(r), false) = (region, fds.is_empty()) {
            p.regions.insert(owner.client, Arc::downgrade(r));
        }
        let sent = wire::send(&p.socket, &frame, &fds);
        let got = match sent {
            Ok(()) => wire::recv(&p.socket, Some(Instant::now() + limit)),
            Err(e) => Err(RecvError::Io(e)),
        };
        // Descriptors the executor sent are closed unread.
        let reply =
            got.and_then(|(payload, _fds)| wire::decode_reply(&payload).map_err(RecvError::Bad));
        match reply {
            Ok(reply) => Outcome::only(Ok((reply, first_id))),
            Err(e) => {
                let why = self.failure(owner.uid, &e, limit, what);
                let lost = self.end(owner.uid, &why);
                Outcome {
                    result: Err(why),
                    lost,
                }
            }
        }
    }

    /// Why the executor of `uid` failed `what`, in words for the client.
    fn failure(&mut self, uid: u32, e: &RecvError, limit: Duration, what: &str) -> String {
        let unit = &self.unit;
        match e {
            RecvError::TimedOut => format!(
                "{what} took longer than its limit of {:.3} s: the kernel executor of user \
                 {uid} on {unit} was killed (kernels this user registered on {unit} must be \
                 registered again)",
                limit.as_secs_f64()
            ),
            _ => {
                let status = self.running.get_mut(&uid).and_then(|p| {
                    // It closed its socket: it is ending, or has ended.
                    let deadline = Instant::now() + Duration::from_secs(1);
                    loop {
                        match p.child.try_wait() {
                            Ok(Some(s)) => break Some(s),
                            Ok(None) if Instant::now() < deadline => {
                                std::thread::yield_now();
                            }
                            _ => break None,
                        }
                    }
                });
                let mut how = match status {
                    Some(s) => describe(s),
                    None => e.to_string(),
                };
                if what.starts_with("building") {
                    how.push_str(&format!(
                        "; a build that needs more than [kernels] compile_memory_mb ({} MiB) \
                         ends so",
                        self.spec.limits.compile_memory_bytes >> 20
                    ));
                }
                format!(
                    "the kernel executor of user {uid} on {unit} failed while {what} ({how}); \
                     it restarts on the next need, and kernels this user registered on {unit} \
                     must be registered again"
                )
            }
        }
    }

    /// Kills and reaps the executor of `uid`; gives its clients.
    fn end(&mut self, uid: u32, why: &str) -> Vec<ClientId> {
        let Some(p) = self.running.remove(&uid) else {
            return Vec::new();
        };
        let next = self.next_first_id.entry(uid).or_insert(0);
        *next = (*next).max(p.next_id);
        tracing::info!(
            "kernel executor of user {uid} on {} (pid {}) ends: {why}",
            self.unit,
            p.child.id()
        );
        let lost: Vec<ClientId> = p.clients.iter().copied().collect();
        for c in &lost {
            self.users.remove(c);
        }
        drop(p);
        lost
    }

    /// Starts `owner`'s executor, unless one runs.
    fn ensure(&mut self, owner: Owner) -> Result<(), String> {
        if self.running.contains_key(&owner.uid) {
            return Ok(());
        }
        let Some(device) = self.device.clone() else {
            return Err(format!(
                "{} runs only its built-in kernels; registering kernels is built for OpenCL \
                 units (OpenCL C) and CUDA units (PTX, in a build with the `cuda` feature)",
                self.unit
            ));
        };
        let Some(program) = self.spec.program.clone() else {
            return Err(format!(
                "{} has no kernel executor to run registered kernels in (only the daemon has)",
                self.unit
            ));
        };
        let first_id = self.next_first_id.get(&owner.uid).copied().unwrap_or(0);
        let p = spawn(&program, owner, first_id, &self.unit)
            .and_then(|mut p| {
                let start = StartSpec {
                    device,
                    max_kept_bytes: self.spec.max_kept_bytes,
                    cache_dir: p._cache.path().to_path_buf(),
                };
                let frame = wire::encode(&Request::Start(start));
                wire::send(&p.socket, &frame, &[]).map_err(|e| format!("starting it: {e}"))?;
                let got = wire::recv(&p.socket, Some(Instant::now() + START_LIMIT))
                    .map_err(|e| e.to_string())
                    .and_then(|(payload, _)| wire::decode_reply(&payload));
                match got {
                    Ok(Reply::Ready { device, sandbox }) => {
                        tracing::info!(
                            "kernel executor of user {} on {} (pid {}): {device}, {sandbox}",
                            owner.uid,
                            self.unit,
                            p.child.id()
                        );
                        Ok(p)
                    }
                    Ok(Reply::Failed(why)) => Err(why),
                    Ok(other) => Err(format!("it answered {other:?} to Start")),
                    Err(e) => {
                        let _ = p.child.kill();
                        match p.child.wait() {
                            Ok(s) if !s.success() => Err(format!("{e} ({})", describe(s))),
                            _ => Err(e),
                        }
                    }
                }
            })
            .map_err(|e| {
                format!(
                    "the kernel executor of user {} on {} did not start: {e}",
                    owner.uid, self.unit
                )
            })?;
        self.running.insert(owner.uid, p);
        Ok(())
    }
}

impl Drop for Sandboxes {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts `program` as `owner`'s user, with its socket as standard input
/// and a fresh cache directory of that user's.
fn spawn(program: &PathBuf, owner: Owner, first_id: u32, unit: &str) -> Result<Process, String> {
    let cache = tempfile::Builder::new()
        .prefix(&format!("hetsched-kernels-{unit}-{}-", owner.uid))
        .tempdir()
        .map_err(|e| format!("making its cache directory: {e}"))?;
    let root = rustix::process::geteuid().is_root();
    let as_other = root && owner.uid != 0;
    if as_other {
        rustix::fs::chown(
            cache.path(),
            Some(rustix::process::Uid::from_raw(owner.uid)),
            Some(rustix::process::Gid::from_raw(owner.gid)),
        )
        .map_err(|e| format!("giving its cache directory to user {}: {e}", owner.uid))?;
    }
    let (ours, theirs) = UnixStream::pair().map_err(|e| format!("a socket pair: {e}"))?;
    let mut cmd = Command::new(program);
    cmd.arg(super::executor_main::SUBCOMMAND)
        .arg(std::process::id().to_string())
        .arg(first_id.to_string())
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .current_dir(cache.path())
        .env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| k.to_str().is_some_and(kept_variable)))
        .env("POCL_CACHE_DIR", cache.path())
        .env("TMPDIR", cache.path())
        .env("HOME", cache.path())
        .env("XDG_CACHE_HOME", cache.path());
    if as_other {
        use std::os::unix::process::CommandExt;
        // std drops the supplementary groups before it changes ids.
        cmd.uid(owner.uid).gid(owner.gid);
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("running {}: {e}", program.display()))?;
    let _ = ours.as_fd();
    Ok(Process {
        child,
        socket: ours,
        _cache: cache,
        first_id,
        next_id: first_id,
        clients: BTreeSet::new(),
        regions: HashMap::new(),
    })
}

/// How a process ended, in words.
fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("it exited with status {c}"),
        (_, Some(s)) => {
            let name = match s {
                4 => " (SIGILL)",
                6 => " (SIGABRT)",
                7 => " (SIGBUS)",
                8 => " (SIGFPE)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                24 => " (SIGXCPU)",
                25 => " (SIGXFSZ)",
                31 => " (SIGSYS)",
                _ => "",
            };
            format!("it was killed by signal {s}{name}")
        }
        _ => status.to_string(),
    }
}
