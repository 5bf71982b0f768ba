//! The CPU side of Pegasus's coordination: each application client (a
//! *domain*) gets a cgroup of its own, whose CPU weight comes from its
//! CPU credits, so the kernel divides contended CPUs among applications
//! as the daemon's classes say, whatever their threads do.
//!
//! * **Credits.** A client's CPU credits are its shares on the CPU units
//!   ([`cpu_credits`]): NORMAL and CUSTOM shares count as given,
//!   BACKGROUND as 1. XC gives accelerator ticks by the same credits
//!   (the monitor feeds them to every unit's policy).
//! * **Weight.** cgroup v1 `cpu.shares` is the CFS weight of the whole
//!   group. The default class (`Normal(10)`) maps to 1024, the weight of
//!   a nice-0 thread, so a default client competes like any process;
//!   other shares scale from there ([`cpu_shares`]). BACKGROUND gets the
//!   kernel's minimum (2). cgroup v2 `cpu.weight` has 100 for a nice-0
//!   thread, so it is `cpu.shares × 100 / 1024` ([`v2_weight`]).
//! * **Layout.** The cgroups sit under a parent the daemon owns,
//!   `<root>/hetsched-cpu-<daemon pid>/pid-<pid>` (one per process: a
//!   thread is in one cgroup, so a process with several connections gets
//!   the largest weight any of them maps to). The parent's own weight is
//!   the sum of its children's, so the applications together weigh
//!   against processes outside it as they would on their own.
//! * **Threads.** Every CPU scan moves a client's threads that are still
//!   in the cgroup the process started in ("home") into its cgroup; new
//!   threads are caught within a scan. Threads someone else put in
//!   another cgroup (a slow-core throttle group, an administrator) are
//!   left where they are. When the client leaves, its threads go back
//!   home and its cgroup is removed. Parents of daemons that died are
//!   cleaned up when a daemon starts.
//! * **No cgroups.** Without root, or without a writable cpu controller
//!   (v1 at `/sys/fs/cgroup/cpu`, else v2 at `/sys/fs/cgroup`),
//!   [`CpuCgroups::open`] says why and the daemon goes on without them.
//!
//! What each client is owed (credits, weights, [`CgroupTarget`]) is
//! worked out by the monitor, in `hetsched_monitor::cpu_weights`
//! (re-exported here); this module is the host side that writes it.

pub use hetsched_monitor::cpu_weights::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

/// Where the cgroup v1 `cpu` controller is mounted.
pub const V1_ROOT: &str = "/sys/fs/cgroup/cpu";
/// Where a cgroup v2 hierarchy is mounted when it is the only one.
pub const V2_ROOT: &str = "/sys/fs/cgroup";

/// Which cgroup interface the daemon drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    /// v1 `cpu` controller: `cpu.shares`, threads through `tasks`.
    V1,
    /// v2 unified hierarchy: `cpu.weight`, processes through `cgroup.procs`.
    V2,
}

impl Hierarchy {
    fn weight_file(self) -> &'static str {
        match self {
            Hierarchy::V1 => "cpu.shares",
            Hierarchy::V2 => "cpu.weight",
        }
    }

    fn weight_value(self, shares: u64) -> u64 {
        match self {
            Hierarchy::V1 => shares.clamp(V1_MIN_SHARES, V1_MAX_SHARES),
            Hierarchy::V2 => v2_weight(shares),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Hierarchy::V1 => "cgroup v1 cpu.shares",
            Hierarchy::V2 => "cgroup v2 cpu.weight",
        }
    }

    /// Writes a CFS ceiling of `cap` cores (`None`: no ceiling) into `dir`:
    /// v1 `cpu.cfs_period_us` and `cpu.cfs_quota_us`, v2 `cpu.max`.
    fn write_cap(self, dir: &Path, cap: Option<f64>) -> io::Result<()> {
        let quota = cap.map(|c| quota_us(c, CFS_PERIOD_US));
        match self {
            Hierarchy::V1 => {
                // The period first: the kernel checks the quota against it.
                std::fs::write(dir.join("cpu.cfs_period_us"), CFS_PERIOD_US.to_string())?;
                let q = quota.map_or("-1".to_string(), |q| q.to_string());
                std::fs::write(dir.join("cpu.cfs_quota_us"), q)
            }
            Hierarchy::V2 => {
                let q = quota.map_or("max".to_string(), |q| q.to_string());
                std::fs::write(dir.join("cpu.max"), format!("{q} {CFS_PERIOD_US}"))
            }
        }
    }
}

/// A configured domain's shared cgroup.
#[derive(Clone, Debug)]
struct Group {
    dir: PathBuf,
    /// The weight last written (v1 scale; the sum of its members').
    shares: u64,
    /// The ceiling last written; `None` before the first write.
    cap: Option<Option<f64>>,
}

/// One client process's cgroup.
#[derive(Clone, Debug)]
struct Domain {
    dir: PathBuf,
    /// The cgroup (path below the root) the process was in at first
    /// sight; its threads go back there when it leaves.
    home: String,
    /// The `cpu.shares` value last written (v1 scale); for a member of a
    /// domain, the share it adds to the domain's cgroup.
    shares: u64,
    /// The configured domain whose cgroup (`dir`) it shares.
    group: Option<String>,
}

/// What one pass did, for logs and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupPass {
    /// Cgroups created for clients that were new.
    pub created: usize,
    /// Threads (v1) or processes (v2) moved into a client's cgroup.
    pub moved: usize,
    /// Cgroups of clients that left, removed.
    pub removed: usize,
    /// Writes that failed (most for threads that just exited).
    pub failed: usize,
}

/// The daemon's client cgroups.
#[derive(Debug)]
pub struct CpuCgroups {
    hierarchy: Hierarchy,
    root: PathBuf,
    parent: PathBuf,
    domains: BTreeMap<u32, Domain>,
    /// Configured domains with members, by name.
    groups: BTreeMap<String, Group>,
    /// `/proc`; the unit tests point it at a fake one, so that the cgroup
    /// side can be driven on plain directories.
    proc_root: PathBuf,
}

impl CpuCgroups {
    /// Finds a writable cpu controller (v1 first, as on this project's
    /// machines, else v2) and creates this daemon's parent cgroup in it,
    /// after removing parents that daemons which died left behind. The
    /// error says why there are none, for the log.
    pub fn open() -> Result<CpuCgroups, String> {
        if !rustix::process::geteuid().is_root() {
            return Err("the daemon is not root, and only root may create cgroups".into());
        }
        let daemon = std::process::id();
        let v1 = Path::new(V1_ROOT);
        if v1.join("cpu.shares").exists() {
            return Self::open_at(Hierarchy::V1, v1, daemon)
                .map_err(|e| format!("cannot create a cgroup under {V1_ROOT}: {e}"));
        }
        let v2 = Path::new(V2_ROOT);
        let controllers =
            std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
        if controllers.split_whitespace().any(|c| c == "cpu") {
            return Self::open_at(Hierarchy::V2, v2, daemon)
                .map_err(|e| format!("cannot create a cgroup under {V2_ROOT}: {e}"));
        }
        Err(format!(
            "no cgroup v1 cpu controller at {V1_ROOT} and no cgroup v2 hierarchy with the cpu \
             controller at {V2_ROOT}"
        ))
    }

    /// Sets up under `root` (a controller's mount point) for the daemon
    /// with pid `daemon`.
    pub fn open_at(hierarchy: Hierarchy, root: &Path, daemon: u32) -> io::Result<CpuCgroups> {
        let proc_root = PathBuf::from("/proc");
        sweep_stale(hierarchy, root, &proc_root);
        let parent = root.join(format!("{PARENT_PREFIX}{daemon}"));
        if hierarchy == Hierarchy::V2 {
            // v2 hands a controller to children only through each
            // ancestor's subtree_control; the root usually has cpu on.
            enable_cpu(root)?;
        }
        match std::fs::create_dir(&parent) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        if hierarchy == Hierarchy::V2 {
            enable_cpu(&parent)?;
        }
        let cg = CpuCgroups {
            hierarchy,
            root: root.to_path_buf(),
            parent,
            domains: BTreeMap::new(),
            groups: BTreeMap::new(),
            proc_root,
        };
        cg.write_parent_weight()?;
        Ok(cg)
    }

    /// For the log: which interface and where.
    pub fn describe(&self) -> String {
        format!(
            "client CPU shares through {} under {}",
            self.hierarchy.name(),
            self.parent.display()
        )
    }

    pub fn hierarchy(&self) -> Hierarchy {
        self.hierarchy
    }

    pub fn parent(&self) -> &Path {
        &self.parent
    }

    /// The cgroup of client process `pid`, once it has one.
    pub fn dir_of(&self, pid: u32) -> Option<&Path> {
        self.domains.get(&pid).map(|d| d.dir.as_path())
    }

    /// The shared cgroup of configured domain `name`, once it has members.
    pub fn domain_dir(&self, name: &str) -> Option<&Path> {
        self.groups.get(name).map(|g| g.dir.as_path())
    }

    /// Brings the cgroups in line with `targets` (client pid → what it
    /// should get): creates one cgroup per process, or one per configured
    /// domain shared by its members, writes weights and ceilings, moves
    /// threads in, and removes the cgroups of processes and domains no
    /// longer listed.
    pub fn apply(&mut self, targets: &BTreeMap<u32, CgroupTarget>) -> CgroupPass {
        let mut pass = CgroupPass::default();
        let group_of = |t: &CgroupTarget| t.domain.as_ref().map(|d| d.name.clone());
        // Processes that left, or whose domain changed, go first.
        let gone: Vec<u32> = self
            .domains
            .iter()
            .filter(|(p, d)| targets.get(p).is_none_or(|t| group_of(t) != d.group))
            .map(|(&p, _)| p)
            .collect();
        let mut parent_changed = !gone.is_empty();
        for pid in gone {
            let d = self.domains.remove(&pid).expect("listed");
            let released = match &d.group {
                None => self.release(&d),
                Some(_) => {
                    self.send_home(pid, &d);
                    Ok(())
                }
            };
            if released.is_ok() {
                pass.removed += 1;
            } else {
                pass.failed += 1;
            }
        }
        for (&pid, t) in targets {
            if !self.domains.contains_key(&pid) {
                let Some(home) = self.cgroup_of(pid, None) else {
                    continue; // the process is gone
                };
                let dir = match &t.domain {
                    Some(g) => match self.group_dir(&g.name, &mut pass) {
                        Some(dir) => dir,
                        None => continue,
                    },
                    None => {
                        let dir = self.parent.join(format!("pid-{pid}"));
                        match std::fs::create_dir(&dir) {
                            Ok(()) => pass.created += 1,
                            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                            Err(_) => {
                                pass.failed += 1;
                                continue;
                            }
                        }
                        dir
                    }
                };
                self.domains.insert(
                    pid,
                    Domain {
                        dir,
                        home,
                        shares: 0,
                        group: group_of(t),
                    },
                );
            }
            let d = self.domains.get_mut(&pid).expect("inserted above");
            if d.shares != t.shares {
                if d.group.is_some() {
                    // Written with the domain's sum below.
                    d.shares = t.shares;
                } else {
                    let value = self.hierarchy.weight_value(t.shares);
                    if std::fs::write(d.dir.join(self.hierarchy.weight_file()), value.to_string())
                        .is_ok()
                    {
                        d.shares = t.shares;
                        parent_changed = true;
                    } else {
                        pass.failed += 1;
                    }
                }
            }
            let d = self.domains[&pid].clone();
            self.move_in(pid, &d, &mut pass);
        }
        parent_changed |= self.update_groups(targets, &mut pass);
        if parent_changed && self.write_parent_weight().is_err() {
            pass.failed += 1;
        }
        pass
    }

    /// The shared cgroup of domain `name`, created on first use.
    fn group_dir(&mut self, name: &str, pass: &mut CgroupPass) -> Option<PathBuf> {
        if let Some(g) = self.groups.get(name) {
            return Some(g.dir.clone());
        }
        let dir = self.parent.join(format!("{DOMAIN_PREFIX}{name}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => pass.created += 1,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(_) => {
                pass.failed += 1;
                return None;
            }
        }
        self.groups.insert(
            name.to_string(),
            Group {
                dir: dir.clone(),
                shares: 0,
                cap: None,
            },
        );
        Some(dir)
    }

    /// Weighs each domain's cgroup by its members' shares together,
    /// writes its ceiling when it changed, and removes the cgroups of
    /// domains without members. Returns whether a weight changed.
    fn update_groups(
        &mut self,
        targets: &BTreeMap<u32, CgroupTarget>,
        pass: &mut CgroupPass,
    ) -> bool {
        let mut changed = false;
        let names: Vec<String> = self.groups.keys().cloned().collect();
        for name in names {
            let members: Vec<&Domain> = self
                .domains
                .values()
                .filter(|d| d.group.as_deref() == Some(name.as_str()))
                .collect();
            if members.is_empty() {
                let g = self.groups.remove(&name).expect("listed");
                evacuate(self.hierarchy, &g.dir, &self.root);
                if std::fs::remove_dir(&g.dir).is_ok() {
                    pass.removed += 1;
                } else {
                    pass.failed += 1;
                }
                changed = true;
                continue;
            }
            let shares: u64 = members.iter().map(|d| d.shares).sum();
            let cap = targets
                .values()
                .filter_map(|t| t.domain.as_ref())
                .find(|d| d.name == name)
                .and_then(|d| d.cpu_cap);
            let (h, g) = (self.hierarchy, self.groups.get_mut(&name).expect("listed"));
            if g.shares != shares {
                let value = h.weight_value(shares);
                if std::fs::write(g.dir.join(h.weight_file()), value.to_string()).is_ok() {
                    g.shares = shares;
                    changed = true;
                } else {
                    pass.failed += 1;
                }
            }
            if g.cap != Some(cap) {
                if h.write_cap(&g.dir, cap).is_ok() {
                    g.cap = Some(cap);
                } else {
                    pass.failed += 1;
                }
            }
        }
        changed
    }

    /// The parent weighs what its children weigh together (at least the
    /// minimum), so joining it costs the applications nothing against
    /// processes outside.
    fn write_parent_weight(&self) -> io::Result<()> {
        let total: u64 = self
            .domains
            .values()
            .filter(|d| d.group.is_none())
            .map(|d| d.shares)
            .chain(self.groups.values().map(|g| g.shares))
            .sum();
        let total = if total == 0 { 1024 } else { total };
        std::fs::write(
            self.parent.join(self.hierarchy.weight_file()),
            self.hierarchy.weight_value(total).to_string(),
        )
    }

    fn rel(&self, dir: &Path) -> String {
        let r = dir.strip_prefix(&self.root).unwrap_or(dir);
        format!("/{}", r.display())
    }

    /// The cgroup (path below the root) of thread `tid` of `pid`, or of
    /// the process's main thread.
    fn cgroup_of(&self, pid: u32, tid: Option<u32>) -> Option<String> {
        let file = match tid {
            Some(t) => self.proc_root.join(format!("{pid}/task/{t}/cgroup")),
            None => self.proc_root.join(format!("{pid}/cgroup")),
        };
        let text = std::fs::read_to_string(file).ok()?;
        cgroup_path(&text, self.hierarchy).map(str::to_string)
    }

    fn move_in(&self, pid: u32, d: &Domain, pass: &mut CgroupPass) {
        let mine = self.rel(&d.dir);
        match self.hierarchy {
            Hierarchy::V1 => {
                for tid in tids(&self.proc_root, pid) {
                    // Only threads still at home: one in any other cgroup
                    // was put there on purpose (a throttle group).
                    if self.cgroup_of(pid, Some(tid)).as_deref() != Some(d.home.as_str())
                        || mine == d.home
                    {
                        continue;
                    }
                    if std::fs::write(d.dir.join("tasks"), tid.to_string()).is_ok() {
                        pass.moved += 1;
                    } else {
                        pass.failed += 1;
                    }
                }
            }
            Hierarchy::V2 => {
                if self.cgroup_of(pid, None).as_deref() == Some(d.home.as_str()) {
                    if std::fs::write(d.dir.join("cgroup.procs"), pid.to_string()).is_ok() {
                        pass.moved += 1;
                    } else {
                        pass.failed += 1;
                    }
                }
            }
        }
    }

    /// The cgroup directory a process's home path names, or the root if
    /// it is gone.
    fn home_dir(&self, d: &Domain) -> PathBuf {
        let home = self.root.join(d.home.trim_start_matches('/'));
        if home.is_dir() {
            home
        } else {
            self.root.clone()
        }
    }

    /// Sends the threads of `pid` that are in its domain's shared cgroup
    /// home; the cgroup stays for the other members.
    fn send_home(&self, pid: u32, d: &Domain) {
        let home = self.home_dir(d);
        let mine = self.rel(&d.dir);
        match self.hierarchy {
            Hierarchy::V1 => {
                for tid in tids(&self.proc_root, pid) {
                    if self.cgroup_of(pid, Some(tid)).as_deref() == Some(mine.as_str()) {
                        let _ = std::fs::write(home.join("tasks"), tid.to_string());
                    }
                }
            }
            Hierarchy::V2 => {
                if self.cgroup_of(pid, None).as_deref() == Some(mine.as_str()) {
                    let _ = std::fs::write(home.join("cgroup.procs"), pid.to_string());
                }
            }
        }
    }

    /// Sends a domain's threads home (or to the root if home is gone) and
    /// removes its cgroup.
    fn release(&self, d: &Domain) -> io::Result<()> {
        evacuate(self.hierarchy, &d.dir, &self.home_dir(d));
        std::fs::remove_dir(&d.dir)
    }
}

impl Drop for CpuCgroups {
    fn drop(&mut self) {
        for (pid, d) in std::mem::take(&mut self.domains) {
            match d.group {
                None => {
                    let _ = self.release(&d);
                }
                Some(_) => self.send_home(pid, &d),
            }
        }
        for g in std::mem::take(&mut self.groups).into_values() {
            evacuate(self.hierarchy, &g.dir, &self.root);
            let _ = std::fs::remove_dir(&g.dir);
        }
        let _ = std::fs::remove_dir(&self.parent);
    }
}

/// The path of the cpu controller's cgroup in a `/proc/…/cgroup` text.
fn cgroup_path(text: &str, h: Hierarchy) -> Option<&str> {
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = match h {
            Hierarchy::V1 => controllers.split(',').any(|c| c == "cpu"),
            Hierarchy::V2 => id == "0" && controllers.is_empty(),
        };
        hit.then_some(path)
    })
}

fn tids(proc_root: &Path, pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(proc_root.join(format!("{pid}/task"))) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

fn enable_cpu(dir: &Path) -> io::Result<()> {
    let file = dir.join("cgroup.subtree_control");
    let on = std::fs::read_to_string(&file).unwrap_or_default();
    if on.split_whitespace().any(|c| c == "cpu") {
        return Ok(());
    }
    std::fs::write(file, "+cpu")
}

/// Moves everything in `dir` (threads in v1, processes in v2) to `to`.
fn evacuate(h: Hierarchy, dir: &Path, to: &Path) {
    let (file, ids) = match h {
        Hierarchy::V1 => ("tasks", "tasks"),
        Hierarchy::V2 => ("cgroup.procs", "cgroup.procs"),
    };
    let listed: BTreeSet<u32> = std::fs::read_to_string(dir.join(ids))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    for id in listed {
        let _ = std::fs::write(to.join(file), id.to_string());
    }
}

/// Removes the parents (and their client cgroups) of daemons that are no
/// longer running, moving what is still in them to the root.
fn sweep_stale(h: Hierarchy, root: &Path, proc_root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PARENT_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || proc_root.join(pid.to_string()).exists() {
            continue;
        }
        let parent = e.path();
        if let Ok(children) = std::fs::read_dir(&parent) {
            for c in children.flatten().filter(|c| c.path().is_dir()) {
                evacuate(h, &c.path(), root);
                let _ = std::fs::remove_dir(c.path());
            }
        }
        evacuate(h, &parent, root);
        let _ = std::fs::remove_dir(&parent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Targets of clients that are their own domains.
    fn plain<const N: usize>(pairs: [(u32, u64); N]) -> BTreeMap<u32, CgroupTarget> {
        pairs
            .into_iter()
            .map(|(pid, shares)| {
                (
                    pid,
                    CgroupTarget {
                        shares,
                        domain: None,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn the_cpu_controller_line_is_found() {
        let v1 = "12:pids:/\n4:cpu,cpuacct:/hetsched-cpu-7/pid-9\n0::/user.slice\n";
        assert_eq!(
            cgroup_path(v1, Hierarchy::V1),
            Some("/hetsched-cpu-7/pid-9")
        );
        assert_eq!(cgroup_path(v1, Hierarchy::V2), Some("/user.slice"));
        assert_eq!(cgroup_path("3:cpuset:/\n", Hierarchy::V1), None);
    }

    /// A fake `/proc` entry: threads `tids` of process `pid` in `cgroup`
    /// of the given hierarchy.
    fn fake_proc(base: &Path, pid: u32, tids: &[u32], h: Hierarchy, cgroup: &str) {
        let line = match h {
            Hierarchy::V1 => format!("2:cpu,cpuacct:{cgroup}\n0::/\n"),
            Hierarchy::V2 => format!("0::{cgroup}\n"),
        };
        let p = base.join(pid.to_string());
        std::fs::create_dir_all(&p).unwrap();
        // The process's own line is its main thread's: the first call's.
        if !p.join("cgroup").exists() {
            std::fs::write(p.join("cgroup"), &line).unwrap();
        }
        for t in tids {
            let t = p.join(format!("task/{t}"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("cgroup"), &line).unwrap();
        }
    }

    /// A scratch directory of its own per test (tests run in parallel),
    /// removed when dropped.
    fn scratch(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("hetsched-cgroups-{name}-"))
            .tempdir()
            .unwrap()
    }

    fn on_plain_dirs(h: Hierarchy) -> (tempfile::TempDir, CpuCgroups) {
        let tmp = scratch(&format!("{h:?}"));
        let root = tmp.path().join("cg");
        std::fs::create_dir_all(&root).unwrap();
        let mut cg = CpuCgroups::open_at(h, &root, 4242).unwrap();
        cg.proc_root = tmp.path().join("proc");
        (tmp, cg)
    }

    #[test]
    fn v1_weighs_moves_threads_in_and_cleans_up() {
        let (tmp, mut cg) = on_plain_dirs(Hierarchy::V1);
        let proc_root = tmp.path().join("proc");
        fake_proc(&proc_root, 100, &[100, 101], Hierarchy::V1, "/");
        fake_proc(&proc_root, 200, &[200], Hierarchy::V1, "/");
        // A thread of 200 in a throttle group stays there.
        fake_proc(&proc_root, 200, &[201], Hierarchy::V1, "/hetsched/slow-50");
        let pass = cg.apply(&plain([(100, 1024), (200, 3072)]));
        assert_eq!(
            (pass.created, pass.moved, pass.failed),
            (2, 3, 0),
            "{pass:?}"
        );
        let dir = cg.dir_of(200).unwrap().to_path_buf();
        assert_eq!(dir, cg.parent().join("pid-200"));
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(dir.join("cpu.shares")), "3072");
        // A plain file takes one write at a time; the last tid is there.
        assert_eq!(read(dir.join("tasks")), "200");
        assert_eq!(read(cg.parent().join("cpu.shares")), "4096");
        // The class changes: only the weight is written again.
        let pass = cg.apply(&plain([(100, 1024), (200, 2)]));
        assert_eq!(pass.created, 0);
        assert_eq!(read(dir.join("cpu.shares")), "2");
        assert_eq!(read(cg.parent().join("cpu.shares")), "1026");
        // 200 leaves: its threads go home (the root) and its group is
        // forgotten. (Removing it is for cgroupfs, where a group's control
        // files do not keep rmdir from working: the integration test in
        // crates/cli/tests/backend.rs checks that on the real thing.)
        let pass = cg.apply(&plain([(100, 1024)]));
        assert_eq!(pass.removed + pass.failed, 1, "{pass:?}");
        assert_eq!(read(tmp.path().join("cg/tasks")), "200");
        assert!(cg.dir_of(200).is_none());
        assert_eq!(read(cg.parent().join("cpu.shares")), "1024");
    }

    #[test]
    fn v2_writes_cpu_weight_and_moves_the_process() {
        let (tmp, mut cg) = on_plain_dirs(Hierarchy::V2);
        let proc_root = tmp.path().join("proc");
        fake_proc(&proc_root, 100, &[100, 101], Hierarchy::V2, "/user.slice");
        std::fs::create_dir_all(tmp.path().join("cg/user.slice")).unwrap();
        let pass = cg.apply(&plain([(100, 3072)]));
        assert_eq!((pass.created, pass.moved), (1, 1), "{pass:?}");
        let dir = cg.dir_of(100).unwrap().to_path_buf();
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(dir.join("cpu.weight")), "300");
        assert_eq!(read(dir.join("cgroup.procs")), "100");
        assert_eq!(read(cg.parent().join("cgroup.subtree_control")), "+cpu");
        // A process that is gone before its first pass gets nothing.
        let pass = cg.apply(&plain([(100, 3072), (999, 1024)]));
        assert_eq!(pass.created, 0);
        assert!(cg.dir_of(999).is_none());
        // Leaving: back to its home cgroup.
        cg.apply(&plain([]));
        assert_eq!(read(tmp.path().join("cg/user.slice/cgroup.procs")), "100");
    }

    /// Two processes of a configured domain share its cgroup, weighed by
    /// both and held to its ceiling; the cgroup goes with the last one.
    #[test]
    fn a_domain_shares_one_capped_cgroup() {
        let (tmp, mut cg) = on_plain_dirs(Hierarchy::V1);
        let proc_root = tmp.path().join("proc");
        for pid in [100, 200, 300] {
            fake_proc(&proc_root, pid, &[pid], Hierarchy::V1, "/docker/abc");
        }
        std::fs::create_dir_all(tmp.path().join("cg/docker/abc")).unwrap();
        let web = |shares| CgroupTarget {
            shares,
            domain: Some(DomainTarget {
                name: "web".into(),
                cpu_cap: Some(0.5),
            }),
        };
        let mut targets = BTreeMap::from([(100, web(1024)), (200, web(3072))]);
        targets.extend(plain([(300, 1024)]));
        let pass = cg.apply(&targets);
        assert_eq!(
            (pass.created, pass.moved, pass.failed),
            (2, 3, 0),
            "{pass:?}"
        );
        let dir = cg.domain_dir("web").unwrap().to_path_buf();
        assert_eq!(dir, cg.parent().join("domain-web"));
        assert_eq!(cg.dir_of(100), Some(dir.as_path()));
        assert_eq!(cg.dir_of(200), Some(dir.as_path()));
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap();
        assert_eq!(read(dir.join("cpu.shares")), "4096");
        assert_eq!(read(dir.join("cpu.cfs_period_us")), "100000");
        assert_eq!(read(dir.join("cpu.cfs_quota_us")), "50000");
        assert_eq!(read(cg.parent().join("cpu.shares")), "5120");
        // (A plain file does not move threads: say where 100 is now.)
        fake_proc(
            &proc_root,
            100,
            &[100],
            Hierarchy::V1,
            "/hetsched-cpu-4242/domain-web",
        );
        // The ceiling is lifted from the CLI.
        targets.insert(
            100,
            CgroupTarget {
                domain: Some(DomainTarget {
                    name: "web".into(),
                    cpu_cap: None,
                }),
                shares: 1024,
            },
        );
        targets.insert(
            200,
            CgroupTarget {
                domain: Some(DomainTarget {
                    name: "web".into(),
                    cpu_cap: None,
                }),
                shares: 3072,
            },
        );
        cg.apply(&targets);
        assert_eq!(read(dir.join("cpu.cfs_quota_us")), "-1");
        // One member leaves: it goes home, the cgroup stays for the other.
        targets.remove(&100);
        cg.apply(&targets);
        assert_eq!(read(tmp.path().join("cg/docker/abc/tasks")), "100");
        assert!(cg.domain_dir("web").is_some());
        assert_eq!(read(dir.join("cpu.shares")), "3072");
        // The last one leaves: the domain's cgroup is forgotten too.
        targets.remove(&200);
        let pass = cg.apply(&targets);
        assert_eq!(pass.removed + pass.failed, 2, "{pass:?}");
        assert!(cg.domain_dir("web").is_none());
        assert_eq!(read(cg.parent().join("cpu.shares")), "1024");
    }

    #[test]
    fn v2_ceilings_go_to_cpu_max() {
        let tmp = scratch("v2max");
        Hierarchy::V2.write_cap(tmp.path(), Some(1.5)).unwrap();
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("cpu.max")).unwrap(),
            "150000 100000"
        );
        Hierarchy::V2.write_cap(tmp.path(), None).unwrap();
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("cpu.max")).unwrap(),
            "max 100000"
        );
        assert_eq!(quota_us(0.001, CFS_PERIOD_US), 1000);
    }

    #[test]
    fn parents_of_dead_daemons_are_swept() {
        let tmp = scratch("sweep");
        let root = tmp.path().join("cg");
        // Pid numbers above the kernel's maximum never exist.
        let dead = root.join(format!("{PARENT_PREFIX}{}", u32::MAX >> 1));
        std::fs::create_dir_all(dead.join("pid-5")).unwrap();
        let live = root.join(format!("{PARENT_PREFIX}1"));
        std::fs::create_dir_all(&live).unwrap();
        let cg = CpuCgroups::open_at(Hierarchy::V1, &root, 4242).unwrap();
        assert!(!dead.exists());
        assert!(live.exists(), "pid 1 is alive");
        assert!(cg.parent().ends_with(format!("{PARENT_PREFIX}4242")));
    }
}
