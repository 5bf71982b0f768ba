//! For tests that need something of the machine (root, the cgroup v1 `cpu`
//! controller, an OpenCL device, CPU performance counters): where it is
//! missing, the test says so on stderr and skips — unless the environment
//! variable [`REQUIRE_ENV`] names the need (CI names what its machines
//! have), and then the test fails. A run that was meant to exercise a
//! capability can therefore never pass by skipping it.

/// Comma-separated needs that must be met (`root,cgroup-v1,opencl`), or
/// `all`.
pub const REQUIRE_ENV: &str = "HETSCHED_TEST_REQUIRE";

/// Whether a test that needs `need` may go on: `Ok` when `available` is.
/// Otherwise a line saying why and `false`, or a panic when `need` is
/// required by [`REQUIRE_ENV`].
pub fn available(need: &str, available: Result<(), String>) -> bool {
    decide(
        need,
        available,
        &std::env::var(REQUIRE_ENV).unwrap_or_default(),
    )
}

/// [`available`], with [`REQUIRE_ENV`]'s value given.
fn decide(need: &str, available: Result<(), String>, required: &str) -> bool {
    let Err(why) = available else {
        return true;
    };
    if required
        .split(',')
        .map(str::trim)
        .any(|r| r == need || r == "all")
    {
        panic!("this test needs {need}, which {REQUIRE_ENV}={required:?} requires, but: {why}");
    }
    eprintln!("SKIPPED (needs {need}; {REQUIRE_ENV}={need} makes this a failure): {why}");
    false
}

/// `Ok` when this process runs as root.
pub fn root() -> Result<(), String> {
    if rustix::process::geteuid().is_root() {
        Ok(())
    } else {
        Err("not running as root".into())
    }
}

/// `Ok` when the cgroup v1 `cpu` controller is mounted where the daemon
/// and the balancer look for it, with CFS quota.
pub fn cgroup_v1_cpu() -> Result<(), String> {
    let dir = std::path::Path::new("/sys/fs/cgroup/cpu");
    if dir.join("cpu.shares").exists() && dir.join("cpu.cfs_quota_us").exists() {
        Ok(())
    } else {
        Err(format!("no cgroup v1 cpu controller at {}", dir.display()))
    }
}

/// [`root`] and [`cgroup_v1_cpu`], under the one need `cgroup-v1`.
pub fn root_and_cgroup_v1() -> bool {
    available("root", root()) && available("cgroup-v1", cgroup_v1_cpu())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_there_goes_on_and_what_is_not_required_skips() {
        assert!(decide("anything", Ok(()), "all"));
        assert!(!decide("opencl", Err("absent".into()), ""));
        assert!(!decide("opencl", Err("absent".into()), "root,cgroup-v1"));
    }

    #[test]
    #[should_panic(expected = "this test needs opencl")]
    fn a_required_need_that_is_missing_fails() {
        decide("opencl", Err("absent".into()), "root, opencl");
    }

    #[test]
    #[should_panic(expected = "this test needs root")]
    fn all_requires_every_need() {
        decide("root", Err("not root".into()), "all");
    }
}
