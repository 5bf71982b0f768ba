//! `hetsched status` with more clients than one frame holds: the real
//! daemon answers in pages, the client library walks them, and the text
//! table summarises past a screenful.

use hetsched_core::ids::ClientId;
use hetsched_protocol::{
    ClientMsg, DaemonMsg, FRAME_HEADER_BYTES, Role, STATUS_PAGE_BYTES, encode_frame, encoded_len,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

mod common;
use common::TestDaemon;

/// Applications the test connects: with 64-character names their
/// report takes several pages.
const CLIENTS: usize = 1500;

/// One emulated GPU under FIFO: the report's size, not the policy, is what
/// this test is about.
const ONE_FIFO_GPU: &str = r#"
max_connections_per_uid = 2000
max_connections = 2000
default_policy = "fifo"
include_cpus = false
device_units = false
[[emulated]]
name = "gpu0"
class = "gpu"
speed = 8.0
copy_gbps = 12.0
"#;

/// Lets this process (and the daemon it starts, which inherits the limit)
/// hold `fds` descriptors. Raises the hard limit too where it is lower
/// and this process may (root, as in CI).
fn allow_descriptors(fds: u64) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    if now.current.is_none_or(|c| c >= fds) {
        return;
    }
    let maximum = match now.maximum {
        Some(h) if h < fds && rustix::process::geteuid().is_root() => Some(fds),
        other => other,
    };
    let current = maximum.map_or(fds, |h| h.min(fds));
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(current),
            maximum,
        },
    )
    .unwrap();
    assert!(
        current >= fds,
        "this test holds {fds} descriptors, but the limit is {current} (raise `ulimit -n`)"
    );
}

/// Client `i`'s name: 64 characters, the longest the daemon keeps. The
/// first has an escape sequence in it, which the table must not print.
fn name(i: usize) -> String {
    let tail = if i == 0 { "\x1b[2J" } else { "" };
    let name = format!("paged-{i:04}-{tail}");
    format!("{name}{}", "x".repeat(64 - name.chars().count()))
}

/// Connects application `i` and reads its Welcome (whose view descriptors
/// a plain read discards).
fn connect(socket: &std::path::Path, i: usize) -> UnixStream {
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let hello = encode_frame(&ClientMsg::Hello {
        name: name(i),
        role: Role::Application,
        requested: Default::default(),
    });
    s.write_all(&hello).unwrap();
    s
}

fn read_welcome(s: &mut UnixStream) {
    let mut header = [0u8; FRAME_HEADER_BYTES];
    s.read_exact(&mut header).unwrap();
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).unwrap();
    let msg = hetsched_protocol::decode_daemon(&payload).unwrap();
    assert!(matches!(msg, DaemonMsg::Welcome { .. }), "{msg:?}");
}

fn stdout_of(d: &TestDaemon, args: &[&str]) -> String {
    let out = d.cmd().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "hetsched {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn status_lists_every_one_of_1500_clients_in_pages_and_the_table_summarises_them() {
    allow_descriptors(4 * CLIENTS as u64 + 256);
    let d = TestDaemon::start("status-pages", ONE_FIFO_GPU);
    // The first gets the lowest id (so it is among the top clients of the
    // table, where its name must come escaped); then all other Hellos,
    // then their Welcomes.
    let mut conns = vec![connect(&d.socket, 0)];
    read_welcome(&mut conns[0]);
    conns.extend((1..CLIENTS).map(|i| connect(&d.socket, i)));
    conns.iter_mut().skip(1).for_each(read_welcome);

    // A walk of pages by client id, each within the page budget.
    let mut obs = d.observer().unwrap();
    let mut at = ClientId(0);
    let mut pages = Vec::new();
    loop {
        let page = obs.status_page(at, u32::MAX).unwrap();
        assert_eq!(page.clients_total as usize, CLIENTS);
        assert!(encoded_len(&DaemonMsg::Status(page.clone())) <= STATUS_PAGE_BYTES);
        let ids: Vec<u32> = page.report.clients.iter().map(|c| c.id.0).collect();
        assert!(
            !ids.is_empty() && ids.is_sorted() && ids[0] >= at.0,
            "{ids:?}"
        );
        pages.push(ids.len());
        match page.next_client {
            Some(next) => {
                assert_eq!(next.0, ids.last().unwrap() + 1);
                at = next;
            }
            None => break,
        }
    }
    assert!(pages.len() >= 3, "pages of {pages:?} clients");
    assert_eq!(pages.iter().sum::<usize>(), CLIENTS);
    // At most `max_clients` a page.
    let few = obs.status_page(ClientId(0), 7).unwrap();
    assert_eq!(few.report.clients.len(), 7);
    // The library's report puts them together, with the coordinator's
    // apps (paged by client id like the clients) once it has seen them all.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let whole = obs.status().unwrap();
        assert_eq!(whole.clients.len(), CLIENTS);
        let apps = whole.coordination.map_or(0, |c| c.apps.len());
        if apps == CLIENTS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the coordinator lists {apps} apps"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = obs.goodbye();
    // --json lists every client exactly once.
    let v: Value = serde_json::from_str(&stdout_of(&d, &["status", "--json"])).unwrap();
    let mut times: BTreeMap<String, usize> = BTreeMap::new();
    for c in v["clients"].as_array().unwrap() {
        *times
            .entry(c["name"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    let want: BTreeMap<String, usize> = (0..CLIENTS).map(|i| (name(i), 1)).collect();
    assert!(times == want, "{} names, some not once", times.len());
    let ids: BTreeSet<u64> = v["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_u64().unwrap())
        .collect();
    let apps: Vec<u64> = v["coordination"]["apps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["client"].as_u64().unwrap())
        .collect();
    // Each app once, in id order.
    assert_eq!(apps, ids.into_iter().collect::<Vec<u64>>());

    // The table: counts, the top clients and how many more.
    let text = stdout_of(&d, &["status"]);
    assert!(
        text.contains("… and 1490 more clients (hetsched status --all lists them)"),
        "{text}"
    );
    // Per unit: 1500 clients, all NORMAL (the default), none waiting.
    let counts = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cols| cols.len() == 8 && cols[0] == "gpu0" && cols[1] == "1500")
        .unwrap_or_else(|| panic!("no counts for gpu0: {text}"));
    assert_eq!(counts[1..], ["1500", "0", "1500", "0", "0", "0", "0.0"]);
    assert!(text.lines().count() < 80, "{text}");
    // Nobody uses anything: the first clients are the top ones, and the
    // escape in the first one's name comes escaped.
    assert!(text.contains("paged-0000-\\u{1b}[2J"), "{text}");
    assert!(!text.contains('\x1b'), "raw escape in the table");

    // --all lists every client by name.
    let all = stdout_of(&d, &["status", "--all"]);
    let listed: BTreeSet<&str> = all
        .lines()
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("paged-")))
        .collect();
    assert_eq!(listed.len(), CLIENTS);
    assert!(!all.contains("more clients"));
    drop(conns);
}
