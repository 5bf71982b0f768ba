//! The sandbox a kernel executor process puts itself in before it opens
//! its device ([`super::executor_main`]), so that every thread the driver
//! starts later inherits it:
//!
//! - **Landlock** (the `landlock` crate): it may read and execute the
//!   system's libraries and the driver's files (`/usr`, `/lib*`, `/opt`,
//!   the ICD and linker files of `/etc`, `/proc`, `/sys`), use the device
//!   nodes GPU drivers open, and write only its private kernel cache and
//!   its own threads' files (`/proc/<its pid>/task`: the CUDA driver names
//!   the threads it starts there, and `cuInit` fails with error 304,
//!   "OS call failed", where it cannot); it
//!   may neither bind nor connect TCP ports, nor reach abstract Unix
//!   sockets or signal processes outside its sandbox. Enforced as far as
//!   the running kernel's Landlock goes (6.12 and later: all of it).
//! - **seccomp** (the `seccompiler` crate, a BPF filter): a deny-list, not
//!   an allow-list. An OpenCL or CUDA driver makes threads, maps memory,
//!   loads libraries and may run its linker, and which calls that takes
//!   differs between drivers and versions; an allow-list that misses one
//!   would break kernels at random. Denied, with `EPERM`: debugging other
//!   processes (`ptrace`, `process_vm_*`), sockets other than Unix ones,
//!   namespaces, mounts, kernel modules, `bpf`, `perf_event_open`,
//!   `userfaultfd`, `io_uring`, keyrings, `kexec`, `reboot`, `swapon`, and
//!   changing its ids or capabilities.
//! - **limits**: no core dumps, files of at most 1 GiB.
//!
//! What the executor still can: run as its user (the client's own), read
//! what that user may read under the paths above, and use as much CPU and
//! memory as the daemon's limits leave it (a call's time is bounded by
//! `max_device_seconds`, a build's time and memory by `[kernels]`).

use std::path::Path;

/// Applies the sandbox to this (single-threaded) process, letting it
/// write `cache_dir` only. Says how far it is enforced.
pub(super) fn confine(cache_dir: &Path) -> Result<String, String> {
    limits()?;
    let landlock = landlock_rules(cache_dir, &[own_threads_dir()])?;
    seccomp()?;
    Ok(format!("landlock {landlock}, seccomp filter on"))
}

fn limits() -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let set = |r: Resource, v: u64, what: &str| {
        setrlimit(
            r,
            Rlimit {
                current: Some(v),
                maximum: Some(v),
            },
        )
        .map_err(|e| format!("limiting {what}: {e}"))
    };
    set(Resource::Core, 0, "core dumps")?;
    set(Resource::Fsize, 1 << 30, "file sizes")
}

/// Paths the driver reads (and may execute from): the ones that exist.
const READ: &[&str] = &[
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/bin",
    "/sbin",
    "/opt",
    "/etc/OpenCL",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nvidia",
    "/proc",
    "/sys",
];

/// Device nodes the executor may open read-write: the harmless ones and
/// the GPU drivers'.
fn device_nodes() -> Vec<std::path::PathBuf> {
    let mut out: Vec<std::path::PathBuf> = [
        "/dev/null",
        "/dev/zero",
        "/dev/urandom",
        "/dev/random",
        "/dev/dri",
    ]
    .iter()
    .map(Into::into)
    .collect();
    if let Ok(entries) = std::fs::read_dir("/dev") {
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("nvidia") || name == "kfd" {
                out.push(e.path());
            }
        }
    }
    out
}

/// This process's threads in procfs. Landlock binds a rule to the
/// directory's inode, so the rule is made by the process it confines
/// (`/proc/self` would name the same one; a parent's rule could not).
fn own_threads_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/proc/{}/task", std::process::id()))
}

/// The Landlock ruleset: read [`READ`], use [`device_nodes`], write
/// `cache_dir`, and write (not create) the files under each of `writable`.
fn landlock_rules(cache_dir: &Path, writable: &[std::path::PathBuf]) -> Result<String, String> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
        Scope, path_beneath_rules,
    };
    let abi = ABI::V6;
    let err = |e: landlock::RulesetError| format!("landlock: {e}");
    let existing = |paths: Vec<std::path::PathBuf>| -> Vec<std::path::PathBuf> {
        paths.into_iter().filter(|p| p.exists()).collect()
    };
    let read: Vec<std::path::PathBuf> = existing(READ.iter().map(Into::into).collect());
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?
        .handle_access(AccessNet::from_all(abi))
        .map_err(err)?
        .scope(Scope::from_all(abi))
        .map_err(err)?
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(&read, AccessFs::from_read(abi)))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            existing(device_nodes()),
            AccessFs::from_read(abi) | AccessFs::WriteFile | AccessFs::IoctlDev,
        ))
        .map_err(err)?
        .add_rules(path_beneath_rules([cache_dir], AccessFs::from_all(abi)))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            existing(writable.to_vec()),
            AccessFs::from_read(abi) | AccessFs::WriteFile | AccessFs::Truncate,
        ))
        .map_err(err)?
        .restrict_self()
        .map_err(err)?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => "fully enforced",
        RulesetStatus::PartiallyEnforced => "partly enforced (an older kernel)",
        RulesetStatus::NotEnforced => "not enforced (the kernel has no Landlock)",
    }
    .to_string())
}

/// The system calls the filter denies outright.
fn denied() -> Vec<i64> {
    let mut calls = vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_userfaultfd,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_setuid,
        libc::SYS_setgid,
        libc::SYS_setreuid,
        libc::SYS_setregid,
        libc::SYS_setresuid,
        libc::SYS_setresgid,
        libc::SYS_setgroups,
        libc::SYS_setfsuid,
        libc::SYS_setfsgid,
        libc::SYS_capset,
        libc::SYS_settimeofday,
        libc::SYS_clock_settime,
        libc::SYS_adjtimex,
        libc::SYS_sethostname,
        libc::SYS_setdomainname,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_fanotify_init,
        libc::SYS_lookup_dcookie,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fspick,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([libc::SYS_iopl, libc::SYS_ioperm, libc::SYS_uselib]);
    calls
}

fn seccomp() -> Result<(), String> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    use std::collections::BTreeMap;
    let err = |e: &dyn std::fmt::Display| format!("seccomp: {e}");
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| err(&e))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        denied().into_iter().map(|c| (c, Vec::new())).collect();
    // Sockets of any family but AF_UNIX (the driver's own helpers may use
    // Unix sockets; nothing it does needs the network).
    let not_unix = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Ne,
        libc::AF_UNIX as u64,
    )
    .map_err(|e| err(&e))?;
    rules.insert(
        libc::SYS_socket,
        vec![SeccompRule::new(vec![not_unix]).map_err(|e| err(&e))?],
    );
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| err(&e))?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| err(&e))?;
    seccompiler::apply_filter_all_threads(&program).map_err(|e| err(&e))
}

/// Limits the memory this process may add from now on to `bytes` (its
/// data segment: heap and private mappings), or lifts the limit
/// (`None`). Used around a build, so that a compiler that blows up fails
/// in this executor alone.
pub(super) fn limit_memory_growth(bytes: Option<u64>) -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let maximum = getrlimit(Resource::Data).maximum;
    let current = match bytes {
        None => maximum,
        Some(b) => {
            let used = data_bytes().unwrap_or(0);
            Some(used.saturating_add(b).min(maximum.unwrap_or(u64::MAX)))
        }
    };
    setrlimit(Resource::Data, Rlimit { current, maximum })
        .map_err(|e| format!("limiting the build's memory: {e}"))
}

/// Bytes of this process's data segment now (`/proc/self/statm`).
fn data_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(5)?.parse().ok()?;
    Some(pages * rustix::param::page_size() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each call is a system call number this architecture has, and the
    /// filter compiles.
    #[test]
    fn the_filter_compiles() {
        assert!(denied().len() > 40);
        let arch = seccompiler::TargetArch::try_from(std::env::consts::ARCH).unwrap();
        let rules = denied().into_iter().map(|c| (c, Vec::new())).collect();
        let filter = seccompiler::SeccompFilter::new(
            rules,
            seccompiler::SeccompAction::Allow,
            seccompiler::SeccompAction::Errno(1),
            arch,
        )
        .unwrap();
        let _: seccompiler::BpfProgram = filter.try_into().unwrap();
    }

    /// Where [`confined_child`] is told to run (by its parent test).
    const CHILD_ENV: &str = "HETSCHED_CONFINE_TEST_DIR";

    /// Runs in a child process started by
    /// [`the_sandbox_denies_what_the_docs_say`] (elsewhere it does
    /// nothing): confines itself, then tries what the sandbox forbids and
    /// what it allows, and exits non-zero on the first surprise.
    #[test]
    fn confined_child() {
        let Some(dir) = std::env::var_os(CHILD_ENV) else {
            return;
        };
        let dir = std::path::PathBuf::from(dir);
        let outside = dir.parent().unwrap().join("outside");
        let sandbox = confine(&dir.join("cache")).unwrap();
        // Its cache is writable; nothing else is, and files out of the
        // allowed paths cannot be read (where the kernel has Landlock).
        std::fs::write(dir.join("cache/kernel.so"), b"x").unwrap();
        if sandbox.contains("landlock fully enforced") {
            assert!(std::fs::write(&outside, b"x").is_err(), "wrote outside");
            assert!(
                std::fs::read_to_string(dir.join("secret")).is_err(),
                "read outside"
            );
        } else {
            eprintln!("this kernel's Landlock is partial or absent: {sandbox}");
            std::fs::write(&outside, b"x").unwrap();
        }
        assert!(
            std::fs::read("/etc/ld.so.cache").is_ok(),
            "the loader's cache"
        );
        // No network, no ptrace, no namespaces, no id changes.
        use rustix::net::{AddressFamily, SocketType, socket};
        assert_eq!(
            socket(AddressFamily::INET, SocketType::STREAM, None).unwrap_err(),
            rustix::io::Errno::PERM
        );
        assert!(socket(AddressFamily::UNIX, SocketType::STREAM, None).is_ok());
        // SAFETY: raw system calls with integer arguments only; each is
        // denied by the filter before the kernel looks at them.
        #[allow(unsafe_code)]
        let denied = unsafe {
            [
                libc::syscall(libc::SYS_ptrace, 16 /* PTRACE_ATTACH */, 1, 0, 0),
                libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER),
                libc::syscall(libc::SYS_setuid, 0),
                libc::syscall(libc::SYS_bpf, 0, 0, 0),
            ]
        };
        assert_eq!(denied, [-1; 4]);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EPERM)
        );
        // Threads still start (the driver needs them).
        std::thread::spawn(|| ()).join().unwrap();
        std::process::exit(0);
    }

    /// The sandbox, applied in a child process (it cannot be undone):
    /// writes only its cache, reads only the driver's paths, no network
    /// sockets, no ptrace, no namespaces, no id changes.
    #[test]
    fn the_sandbox_denies_what_the_docs_say() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("inner");
        std::fs::create_dir_all(inner.join("cache")).unwrap();
        std::fs::write(inner.join("secret"), b"s").unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "kernel_exec::confine::tests::confined_child"])
            .args(["--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, &inner)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the confined child failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let landlock = !String::from_utf8_lossy(&out.stderr).contains("Landlock is partial");
        assert_eq!(dir.path().join("outside").exists(), !landlock);
        assert!(inner.join("cache/kernel.so").exists());
    }

    /// Which part of the sandbox a CUDA child applies
    /// ([`cuda_child`]): `none`, `limits`, `landlock`, `seccomp` or `all`;
    /// with `build, ` before it, the child also builds a PTX kernel as an
    /// executor does (under the build's memory limit, unless the part
    /// ends in `no memory limit`).
    #[cfg(feature = "cuda")]
    const CUDA_PART_ENV: &str = "HETSCHED_CONFINE_CUDA_PART";

    /// Runs in a child process started by
    /// [`the_cuda_driver_opens_inside_the_sandbox`] (elsewhere it does
    /// nothing): applies one part of the sandbox, opens CUDA device 0 as
    /// an executor does (and builds a kernel, for a `build, ` part), and
    /// exits 0 where that worked. Unconfined, it also prints the files the
    /// driver holds open, to name what a part that breaks it must allow.
    #[cfg(feature = "cuda")]
    #[test]
    fn cuda_child() {
        let Some(part) = std::env::var(CUDA_PART_ENV).ok() else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let (build, sandbox) = match part.strip_prefix("build, ") {
            Some(rest) => (true, rest.trim_end_matches(", no memory limit")),
            None => (false, part.as_str()),
        };
        let applied = match sandbox {
            "none" => Ok(String::new()),
            "limits" => limits().map(|()| String::new()),
            "landlock" => landlock_rules(dir.path(), &[own_threads_dir()]),
            "landlock, /proc read-only" => landlock_rules(dir.path(), &[]),
            "seccomp" => seccomp().map(|()| String::new()),
            _ => confine(dir.path()),
        };
        if let Err(e) = applied {
            eprintln!("applying {part}: {e}");
            std::process::exit(2);
        }
        let api = crate::kernel_exec::apis::named("cuda").unwrap();
        let mut opened = match api.open_for_executor(0, 1 << 20) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("opening: {e}");
                std::process::exit(1);
            }
        };
        if part == "none" {
            let mut held: Vec<String> = std::fs::read_dir("/proc/self/fd")
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .map(|p| p.display().to_string())
                .collect();
            held.sort();
            held.dedup();
            println!("\nheld: {}", held.join(" "));
        }
        if build {
            if !part.ends_with("no memory limit") {
                limit_memory_growth(Some(2048 << 20)).unwrap();
            }
            let built = opened.backend.register(
                hetsched_core::ids::ClientId(1),
                hetsched_cuda::kernels::SCALE_PTX,
                hetsched_cuda::kernels::SCALE_PTX_DECLARATION,
            );
            if let Err(e) = built {
                eprintln!("building: {e}");
                std::process::exit(1);
            }
        }
        std::process::exit(0);
    }

    /// On a GPU: CUDA opens, and a kernel builds, inside the executor's
    /// sandbox. Each part of the sandbox is tried alone in a child too,
    /// so that a failure names the part that breaks the driver (and the
    /// files the driver held unconfined).
    #[cfg(feature = "cuda")]
    #[test]
    fn the_cuda_driver_opens_inside_the_sandbox() {
        let here = hetsched_cuda::probe().and_then(|n| {
            if n > 0 {
                Ok(())
            } else {
                Err("the CUDA driver reports no device".into())
            }
        });
        if !hetsched_platform::test_support::available("cuda", here) {
            return;
        }
        let parts = [
            "none",
            "limits",
            "landlock, /proc read-only",
            "landlock",
            "seccomp",
            "all",
            "build, none, no memory limit",
            "build, none",
            "build, all, no memory limit",
            "build, all",
        ];
        let report: Vec<(String, bool, String)> = parts
            .iter()
            .map(|part| {
                let mut child = std::process::Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", "kernel_exec::confine::tests::cuda_child"])
                    .args(["--nocapture", "--test-threads=1"])
                    .env(CUDA_PART_ENV, part)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
                let status = loop {
                    if let Some(s) = child.try_wait().unwrap() {
                        break Some(s);
                    }
                    if std::time::Instant::now() > deadline {
                        let _ = child.kill();
                        let _ = child.wait();
                        break None;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                };
                let out = child.wait_with_output().unwrap();
                let ok = status.is_some_and(|s| s.success());
                let said = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                let mut lines: Vec<&str> = said
                    .lines()
                    .filter(|l| l.contains("held: ") || !ok)
                    .filter(|l| !l.trim().is_empty() && !l.starts_with("running "))
                    .collect();
                if status.is_none() {
                    lines.push("still running after 20 s: killed");
                }
                (part.to_string(), ok, lines.join(" | "))
            })
            .collect();
        let table: Vec<String> = report
            .iter()
            .map(|(part, ok, said)| format!("{part}: {} {said}", if *ok { "ok" } else { "FAILED" }))
            .collect();
        eprintln!(
            "CUDA inside the sandbox, part by part:\n{}",
            table.join("\n")
        );
        assert!(
            report
                .iter()
                .all(|(part, ok, _)| *ok || part.contains("read-only")),
            "CUDA does not work inside the executor's sandbox:\n{}",
            table.join("\n")
        );
    }

    #[test]
    fn the_data_segment_is_read() {
        assert!(data_bytes().unwrap() > 0);
    }
}
