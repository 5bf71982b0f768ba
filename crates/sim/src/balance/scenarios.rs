//! The three thread-balance scenarios: machines and thread mixes.

use super::engine::Case;
use super::model::{Profile, SimKind, table2};
use hetsched_core::balance::{Category, Hint};
use hetsched_core::unit::Capabilities;

/// Platform power besides the cores of the SmartBalance SoCs (uncore,
/// interconnect, memory at light load), the same under every policy. It is
/// what keeps "everything on the Small core" from being the most efficient
/// allocation: a machine that does almost nothing still pays for its
/// memory. Half a watt is the order of a mobile SoC's idle power.
pub const SOC_BASE_WATTS: f64 = 0.5;

/// PARSEC-like and interactive (IMB) threads of SmartBalance §6: compute-
/// bound (x264, blackscholes, swaptions), memory-bound (streamcluster,
/// canneal) and interactive ones that sleep most of the time.
mod parsec {
    use super::Profile;
    pub const X264_CREW: Profile = Profile::new("x264-crew", 0.85, 3.0, 1.0);
    pub const X264_BOW: Profile = Profile::new("x264-bow", 0.75, 6.0, 0.9);
    pub const BODYTRACK: Profile = Profile::new("bodytrack", 0.7, 4.0, 0.8);
    pub const BLACKSCHOLES: Profile = Profile::new("blackscholes", 0.9, 0.5, 1.0);
    pub const STREAMCLUSTER: Profile = Profile::new("streamcluster", 0.5, 25.0, 1.0);
    pub const CANNEAL: Profile = Profile::new("canneal", 0.4, 35.0, 0.9);
    pub const SWAPTIONS: Profile = Profile::new("swaptions", 0.85, 1.0, 1.0);
    /// Interactive microbenchmarks: high/low throughput × high/low interactivity.
    pub const IMB_HTHI: Profile = Profile::new("imb-hthi", 0.8, 2.0, 0.5);
    pub const IMB_HTLI: Profile = Profile::new("imb-htli", 0.8, 2.0, 0.9);
    pub const IMB_LTHI: Profile = Profile::new("imb-lthi", 0.5, 8.0, 0.15);
    pub const IMB_LTLI: Profile = Profile::new("imb-ltli", 0.5, 8.0, 0.4);
}

/// A machine: name, kinds, and (kind, name) per core.
type Machine = (&'static str, Vec<SimKind>, Vec<(usize, String)>);

/// `smartbalance-mixes`: every mix with 2, 4 and 8 threads on the 4-type
/// quad (one Huge, Big, Medium and Small core) and on an octa-core
/// big.LITTLE (four Big, four Small: GTS's home ground, §6.1).
pub fn smartbalance_mixes() -> Vec<Case> {
    use parsec::*;
    let [huge, big, medium, small] = table2();
    let machines: [Machine; 2] = [
        (
            "quad",
            vec![huge, big.clone(), medium, small.clone()],
            (0..4)
                .map(|k| (k, format!("{}0", ["huge", "big", "medium", "small"][k])))
                .collect(),
        ),
        (
            "octa",
            vec![big, small],
            (0..8)
                .map(|c| {
                    if c < 4 {
                        (0, format!("big{c}"))
                    } else {
                        (1, format!("small{}", c - 4))
                    }
                })
                .collect(),
        ),
    ];
    let mixes: [(&str, [Profile; 2]); 6] = [
        ("mix1", [X264_CREW, X264_BOW]),
        ("mix2", [BODYTRACK, X264_CREW]),
        ("mix3", [STREAMCLUSTER, BLACKSCHOLES]),
        ("mix4", [CANNEAL, SWAPTIONS]),
        ("imb1", [IMB_HTHI, IMB_LTLI]),
        ("imb2", [IMB_HTLI, IMB_LTHI]),
    ];
    let mut cases = Vec::new();
    for (machine, kinds, cores) in &machines {
        for (mix, profiles) in &mixes {
            for threads in [2usize, 4, 8] {
                cases.push(Case {
                    label: format!("{machine}/{mix}/{threads}t"),
                    machine: machine.to_string(),
                    kinds: kinds.clone(),
                    cores: cores.clone(),
                    threads: (0..threads)
                        .map(|i| {
                            let p = profiles[i % 2].clone();
                            (format!("{}#{}", p.name, i / 2 + 1), p)
                        })
                        .collect(),
                    hints_given: false,
                    base_watts: SOC_BASE_WATTS,
                });
            }
        }
    }
    cases
}

fn server_kind(name: &'static str, ghz: f64, ipc: f64, watts: f64, caps: Capabilities) -> SimKind {
    SimKind {
        name,
        freq_hz: ghz * 1e9,
        peak_ipc: ipc,
        peak_watts: watts,
        caps,
        llc_mb: None,
    }
}

/// `kinship-usecase1` (Kinship §3.5, §5.5 on QuickIA): two Xeon and two
/// Atom cores shared by VM1 (ferret, Iozone) and VM2 (streamcluster,
/// freqmine, sort, Iozone), with hints: compute-bound work belongs on the
/// Xeons, IO- and memory-bound work loses little on the Atoms. IO-bound
/// threads are modelled by what their counters show: few instructions
/// between long stalls (a high miss rate) and little CPU demand, so a
/// faster core barely speeds them up.
pub fn kinship_usecase1() -> Vec<Case> {
    let xeon = server_kind("xeon", 3.0, 3.0, 25.0, Capabilities::empty());
    let atom = server_kind("atom", 1.6, 1.5, 4.0, Capabilities::empty());
    let cpu = Hint::MOSTLY_CPU;
    let io = Hint::MOSTLY_IO;
    let mem = Hint::MOSTLY_MEM;
    let threads = vec![
        (
            "vm1:ferret",
            Profile::new("ferret", 0.8, 2.0, 1.0).hinted(cpu),
        ),
        (
            "vm1:iozone",
            Profile::new("iozone", 0.4, 40.0, 0.2).hinted(io),
        ),
        (
            "vm2:streamcluster",
            Profile::new("streamcluster", 0.85, 1.5, 1.0).hinted(cpu),
        ),
        (
            "vm2:freqmine",
            Profile::new("freqmine", 0.5, 12.0, 0.9).hinted(mem),
        ),
        (
            "vm2:sort",
            Profile::new("sort", 0.4, 25.0, 0.6).hinted(io.union(mem)),
        ),
        (
            "vm2:iozone",
            Profile::new("iozone", 0.4, 40.0, 0.2).hinted(io),
        ),
    ];
    vec![Case {
        label: "quickia".into(),
        machine: "quickia".into(),
        kinds: vec![xeon, atom],
        cores: vec![
            (0, "xeon0".into()),
            (0, "xeon1".into()),
            (1, "atom0".into()),
            (1, "atom1".into()),
        ],
        threads: threads
            .into_iter()
            .map(|(n, p)| (n.to_string(), p))
            .collect(),
        hints_given: true,
        base_watts: SERVER_BASE_WATTS,
    }]
}

/// Platform power of the two-socket test machines besides the cores
/// (chipset, memory, disks at light load), the same under every policy.
/// Without it, "everything on the slowest cores" would look like the most
/// efficient way to run a server.
pub const SERVER_BASE_WATTS: f64 = 20.0;

/// Software AES (table-driven) against AES-NI: we take the software path
/// as 4× slower per byte, within the range published comparisons give.
pub const AES_EMULATION_SLOWDOWN: f64 = 4.0;

/// `kinship-usecase2` (Kinship §3.5 and SpeedAes of Table 1 on
/// SimulatedWM): two sockets of two cores, AES-NI only on socket 0, one core
/// per socket at half speed. VM1 runs AES-bench (small) and swaptions, VM2
/// AES-bench (large) and dedup; the AES threads are CRYPTO.
pub fn kinship_usecase2() -> Vec<Case> {
    let aes = Capabilities::AES;
    let none = Capabilities::empty();
    let kinds = vec![
        server_kind("fast-aes", 2.4, 3.0, 12.0, aes),
        server_kind("slow-aes", 1.2, 3.0, 6.0, aes),
        server_kind("fast", 2.4, 3.0, 12.0, none),
        server_kind("slow", 1.2, 3.0, 6.0, none),
    ];
    let crypto = |p: Profile| p.needs(Category::CRYPTO, AES_EMULATION_SLOWDOWN);
    let threads = vec![
        (
            "vm1:aes-small",
            crypto(Profile::new("aes-small", 0.9, 0.5, 0.5)),
        ),
        (
            "vm1:swaptions",
            Profile::new("swaptions", 0.85, 1.0, 1.0).hinted(Hint::MOSTLY_CPU),
        ),
        (
            "vm2:aes-large",
            crypto(Profile::new("aes-large", 0.9, 0.5, 1.0)).hinted(Hint::MOSTLY_CPU),
        ),
        (
            "vm2:dedup",
            Profile::new("dedup", 0.4, 30.0, 0.5).hinted(Hint::MOSTLY_IO),
        ),
    ];
    simulatedwm("simulatedwm", kinds, threads)
}

/// `kinship-cache` (Kinship §5, the Speedcache1 configuration on
/// SimulatedWM): two sockets of two cores, one core per socket at half
/// speed, the last-level cache resized to 12 MiB on socket 0 and 3 MiB on
/// socket 1. VM1 runs CacheBuster with a large working set (10 MiB: fits
/// only the big cache) and a CPU-bound spin loop, VM2 CacheBuster small
/// (2 MiB: fits either) and another spin loop. What each thread needs is
/// hinted, as in the paper's runs.
pub fn kinship_cache() -> Vec<Case> {
    let none = Capabilities::empty();
    let with_llc = |mut k: SimKind, mb: f64| {
        k.llc_mb = Some(mb);
        k
    };
    let kinds = vec![
        with_llc(server_kind("fast-12m", 2.4, 3.0, 12.0, none), 12.0),
        with_llc(server_kind("slow-12m", 1.2, 3.0, 6.0, none), 12.0),
        with_llc(server_kind("fast-3m", 2.4, 3.0, 12.0, none), 3.0),
        with_llc(server_kind("slow-3m", 1.2, 3.0, 6.0, none), 3.0),
    ];
    let buster = |name, mb| {
        Profile::new(name, 0.6, 20.0, 1.0)
            .working_set(mb)
            .hinted(Hint::MOSTLY_MEM)
    };
    let spin = |name| Profile::new(name, 0.9, 0.2, 1.0).hinted(Hint::MOSTLY_CPU);
    let threads = vec![
        ("vm1:cachebuster-large", buster("cachebuster-large", 10.0)),
        ("vm1:spin", spin("spin")),
        ("vm2:cachebuster-small", buster("cachebuster-small", 2.0)),
        ("vm2:spin", spin("spin")),
    ];
    simulatedwm("speedcache", kinds, threads)
}

/// SimulatedWM's two sockets of a fast and a slow core, with `kinds` in
/// that order (socket 0 fast, socket 0 slow, socket 1 fast, socket 1 slow)
/// and hinted threads, as one case named `label`.
fn simulatedwm(label: &str, kinds: Vec<SimKind>, threads: Vec<(&str, Profile)>) -> Vec<Case> {
    vec![Case {
        label: label.into(),
        machine: label.into(),
        kinds,
        cores: vec![
            (0, "s0-fast".into()),
            (1, "s0-slow".into()),
            (2, "s1-fast".into()),
            (3, "s1-slow".into()),
        ],
        threads: threads
            .into_iter()
            .map(|(n, p)| (n.to_string(), p))
            .collect(),
        hints_given: true,
        base_watts: SERVER_BASE_WATTS,
    }]
}
