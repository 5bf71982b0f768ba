//! Pegasus domains beyond single clients, with real processes: clients
//! put in one container cgroup share the domain's accelerator credits,
//! and a domain's `cpu_cap` holds its processes together to that many
//! cores. Both need root and the cgroup v1 `cpu` controller (to make the
//! test's "container"); without them they say so and pass.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{BIN, Reaped, TestDaemon, load_report, unit_s};

const V1: &str = "/sys/fs/cgroup/cpu";

/// Whether this machine lets the test make cgroups (root and cgroup v1);
/// says why not (`hetsched_platform::test_support`).
fn cgroups_usable() -> bool {
    hetsched_platform::test_support::root_and_cgroup_v1()
}

/// A cgroup standing in for a container, removed (its processes sent to
/// the root) when the test ends.
struct Container {
    dir: PathBuf,
    /// As `/proc/PID/cgroup` shows it.
    path: String,
}

impl Container {
    fn new(name: &str) -> Container {
        let path = format!("/hetsched-test-{name}-{}", std::process::id());
        let dir = Path::new(V1).join(path.trim_start_matches('/'));
        let _ = std::fs::create_dir(&dir);
        Container { dir, path }
    }

    /// `program args…` started inside the container (a shell moves itself
    /// in, then becomes the program), so it is there when it connects.
    fn spawn(&self, program: &Path, args: &[&str], envs: &[(&str, String)]) -> Child {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!(
                "echo $$ > {}/tasks && exec \"$0\" \"$@\"",
                self.dir.display()
            ))
            .arg(program)
            .args(args)
            .env_remove("HETSCHED_CLASS")
            .env_remove("HETSCHED_SHARES")
            .env_remove("HETSCHED_PRIORITY")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in envs {
            c.env(k, v);
        }
        c.spawn().unwrap()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let tasks = std::fs::read_to_string(self.dir.join("tasks")).unwrap_or_default();
        for t in tasks.split_whitespace() {
            let _ = std::fs::write(Path::new(V1).join("tasks"), t);
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Two `hetsched load` clients in a container whose domain has 512
/// credits (set with `hetsched domains set`, over the config's 128)
/// against one client with 512 credits of its own, under AccC: the
/// container is one domain, so the device splits about 50/50, not 67/33.
#[test]
fn clients_of_one_container_share_its_credits() {
    if !cgroups_usable() {
        return;
    }
    let web = Container::new("web");
    let config = format!(
        "{}\n[policies]\ngpu0 = \"accc\"\n[[domains]]\nname = \"web\"\ncgroup = \"{}\"\n\
         credits = 128\n",
        common::ONE_GPU.trim_end(),
        web.path
    );
    let d = TestDaemon::start("domains-share", &config);
    let cli = |args: &[&str]| {
        let out = d.cmd().args(args).output().unwrap();
        assert!(
            out.status.success(),
            "hetsched {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // Root sets the domain's credits; a typo in the name is refused.
    let set = cli(&["domains", "set", "web", "--credits", "512"]);
    assert!(set.contains("domain web: credits 512"), "{set}");
    let bad = d
        .cmd()
        .args(["domains", "set", "wbe", "--credits", "5"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("web"),
        "{bad:?}"
    );
    let load = [
        "load",
        "--json",
        "--unit",
        "gpu0",
        "--seconds",
        "3",
        "--exec-ms",
        "5",
    ];
    let env = [("HETSCHED_SOCKET", d.socket.display().to_string())];
    let inside: Vec<Child> = (0..2)
        .map(|_| web.spawn(Path::new(BIN), &load, &env))
        .collect();
    let alone = d.load(
        &["--class", "normal", "--shares", "512"],
        &["--unit", "gpu0", "--seconds", "3", "--exec-ms", "5"],
    );
    // Midway: both container clients are members, and status says so.
    wait_for("the three clients to be listed", || {
        let status: serde_json::Value = serde_json::from_str(&cli(&["status", "--json"])).unwrap();
        status["clients"].as_array().map_or(0, Vec::len) == 3
    });
    let listed = cli(&["domains"]);
    let row = listed.lines().find(|l| l.starts_with("web ")).unwrap();
    assert_eq!(
        row.matches('/').count(),
        3,
        "cgroup and two members: {listed}"
    );
    let status: serde_json::Value = serde_json::from_str(&cli(&["status", "--json"])).unwrap();
    let mut domains: Vec<String> = status["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["domain"].as_str().unwrap_or("-").to_string())
        .collect();
    domains.sort();
    assert_eq!(domains, ["-", "web", "web"], "{status}");
    assert_eq!(status["domains"][0]["credits"], 512);
    let table = cli(&["status"]);
    assert!(table.contains("DOMAIN"), "{table}");
    let got_inside: f64 = inside.into_iter().map(|c| unit_s(&load_report(c))).sum();
    let got_alone = unit_s(&load_report(alone));
    let total = got_inside + got_alone;
    let pct = 100.0 * got_inside / total;
    eprintln!(
        "two clients of a 512-credit container vs one 512-credit client: {pct:.1} % vs {:.1} % \
         of {total:.2} s (want 50 / 50; as three domains it would be 67 / 33)",
        100.0 - pct
    );
    assert!(total > 2.5, "device mostly idle: {total} s of 3");
    assert!(
        (pct - 50.0).abs() <= 5.0,
        "the container got {pct:.1} % of the device, want 50 %"
    );
}

const HOG_ENV: &str = "HETSCHED_TEST_DOMAIN_HOG_CPU";

/// Not a test: a client of the daemon (socket in the environment) that
/// spins on the CPU named in its environment until killed.
#[test]
#[ignore = "a child of a_capped_domain_is_held_to_its_ceiling, run by it"]
fn domain_hog_helper() {
    use hetsched_protocol::{Client, ClientOptions};
    let Some(cpu) = std::env::var(HOG_ENV).ok() else {
        return;
    };
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu.parse().unwrap());
    rustix::thread::sched_setaffinity(None, &set).unwrap();
    let _client = Client::connect(ClientOptions::application("domain-hog").unwrap()).unwrap();
    println!("ready");
    let mut x = 0u64;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

/// utime + stime of a process, clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Cores the processes used together over `secs`.
fn cores_used(pids: &[u32], secs: f64) -> f64 {
    let ticks = |pids: &[u32]| pids.iter().map(|&p| cpu_ticks(p)).sum::<u64>();
    let before = ticks(pids);
    std::thread::sleep(Duration::from_secs_f64(secs));
    // USER_HZ is 100 on Linux.
    (ticks(pids) - before) as f64 / 100.0 / secs
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Two spinning clients of a container, one per CPU, in a domain with
/// `cpu_cap = 0.5`: the daemon puts both in the domain's one cgroup with
/// a CFS quota of 50 ms per 100 ms, so together they get half a core on
/// an otherwise idle machine. `hetsched domains set --cpu-cap` moves the
/// ceiling, `none` lifts it, and the cgroup goes with the last member.
#[test]
fn a_capped_domain_is_held_to_its_ceiling() {
    if !cgroups_usable() {
        return;
    }
    let batch = Container::new("batch");
    let config = format!(
        "include_cpus = true\ncpu_cgroups = true\ncpu_scan_ms = 100\ncoordination = \"off\"\n{}\
         [[domains]]\nname = \"batch\"\ncgroup = \"{}\"\ncpu_cap = 0.5\n",
        common::ONE_GPU.replace("include_cpus = false", ""),
        batch.path
    );
    let d = TestDaemon::start("domains-cap", &config);
    let daemon_pid = d.child.as_ref().unwrap().id();
    let group = Path::new(V1).join(format!("hetsched-cpu-{daemon_pid}/domain-batch"));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let exe = std::env::current_exe().unwrap();
    let hogs: Vec<Reaped> = (0..2)
        .map(|i| {
            let env = [
                (HOG_ENV, (i % cpus).to_string()),
                ("HETSCHED_SOCKET", d.socket.display().to_string()),
            ];
            let args = [
                "--exact",
                "domain_hog_helper",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ];
            let mut child = batch.spawn(&exe, &args, &env);
            let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
            while !lines.next().unwrap().unwrap().ends_with("ready") {}
            Reaped(child)
        })
        .collect();
    let pids: Vec<u32> = hogs.iter().map(|h| h.0.id()).collect();
    let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
    wait_for("both hogs in the domain's capped cgroup", || {
        let tasks = read(group.join("tasks"));
        pids.iter().all(|p| tasks.contains(&p.to_string()))
            && read(group.join("cpu.cfs_quota_us")).trim() == "50000"
    });
    assert_eq!(read(group.join("cpu.cfs_period_us")).trim(), "100000");
    let got = cores_used(&pids, 3.0);
    eprintln!("domain with cpu_cap 0.5, two spinning clients on {cpus} CPUs: {got:.3} cores");
    assert!((got - 0.5).abs() <= 0.08, "{got:.3} cores, want 0.5");
    // The CLI moves the ceiling.
    let out = d
        .cmd()
        .args(["domains", "set", "batch", "--cpu-cap", "0.25"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    wait_for("the new quota", || {
        read(group.join("cpu.cfs_quota_us")).trim() == "25000"
    });
    let got = cores_used(&pids, 2.0);
    eprintln!("after domains set --cpu-cap 0.25: {got:.3} cores");
    assert!((got - 0.25).abs() <= 0.06, "{got:.3} cores, want 0.25");
    let out = d
        .cmd()
        .args(["domains", "set", "batch", "--cpu-cap", "none"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    wait_for("the ceiling lifted", || {
        read(group.join("cpu.cfs_quota_us")).trim() == "-1"
    });
    let got = cores_used(&pids, 1.0);
    eprintln!("without a ceiling: {got:.3} cores");
    // Other work on the machine may take a share too; above the last
    // ceiling is what shows the ceiling went.
    assert!(got > 0.35, "{got:.3} cores without a ceiling");
    // The members leave: the domain's cgroup goes with the last one.
    drop(hogs);
    wait_for("the domain's cgroup to go", || !group.exists());
    drop(d);
    let parent = Path::new(V1).join(format!("hetsched-cpu-{daemon_pid}"));
    if let Ok(children) = std::fs::read_dir(&parent) {
        for c in children.flatten().filter(|c| c.path().is_dir()) {
            let _ = std::fs::remove_dir(c.path());
        }
    }
    let _ = std::fs::remove_dir(&parent);
}

/// Mistakes in `[[domains]]` stop the daemon before it starts, naming
/// the key or the unit (no root needed).
#[test]
fn domain_mistakes_stop_the_daemon_with_a_reason() {
    let dir = std::env::temp_dir().join(format!("hetsched-it-domains-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let start = |domain: &str| {
        let config = dir.join("bad.toml");
        std::fs::write(
            &config,
            format!(
                "{}\n[[domains]]\nname = \"web\"\ncgroup = \"/docker/abc\"\n{domain}",
                common::ONE_GPU.trim_end()
            ),
        )
        .unwrap();
        common::refused_start(common::daemon_command(Some(&config), &dir.join("s.sock")))
    };
    let err = start("credit = 512\n");
    assert!(err.contains("credit"), "{err}");
    let err = start("unit_credits = { gpu7 = 64 }\n");
    assert!(err.contains("gpu7") && err.contains("gpu0"), "{err}");
    let err = start("cpu_cap = 0.5\n");
    assert!(err.contains("cpu_cgroups"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
