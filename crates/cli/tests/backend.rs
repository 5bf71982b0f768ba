//! Pegasus backend policies in the real daemon: four processes keep an
//! emulated device busy through the daemon with credits 256/512/1024/256
//! (Pegasus Fig. 5), and the device time each gets follows its credits.

use serde_json::Value;
use std::process::Child;

mod common;
use common::{TestDaemon, load_report as report, unit_s};

fn credits_split_the_device(policy: &str, ring: bool) {
    let config = format!(
        "{}\n[policies]\ngpu0 = \"{policy}\"\n",
        common::ONE_GPU.trim_end()
    );
    let d = TestDaemon::start(&format!("backend-{policy}-{ring}"), &config);
    let mut load = vec!["--unit", "gpu0", "--seconds", "3", "--exec-ms", "5"];
    if ring {
        load.push("--ring");
    }
    let children: Vec<(f64, Child)> = [256.0, 512.0, 1024.0, 256.0]
        .into_iter()
        .map(|c: f64| {
            let shares = format!("{c}");
            let class = ["--class", "normal", "--shares", shares.as_str()];
            (c, d.load(&class, &load))
        })
        .collect();
    // Midway, status shows each client's credits and the ticks it was given.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let status = d.observer().unwrap().status().unwrap();
    let mut ticks_by_credits: Vec<(u32, u64)> = status
        .clients
        .iter()
        .filter_map(|c| c.units.iter().find_map(|u| u.backend))
        .map(|b| {
            assert_eq!(b.policy.name(), policy, "{b:?}");
            (b.config.acc_credits, b.ticks_granted)
        })
        .collect();
    ticks_by_credits.sort();
    assert_eq!(
        ticks_by_credits.iter().map(|t| t.0).collect::<Vec<_>>(),
        vec![256, 256, 512, 1024],
        "{status:?}"
    );
    assert!(
        ticks_by_credits[3].1 > ticks_by_credits[0].1.max(ticks_by_credits[1].1),
        "the 1024-credit client got no more ticks than a 256 one: {ticks_by_credits:?}"
    );
    let got: Vec<(f64, Value)> = children
        .into_iter()
        .map(|(c, ch)| (c, report(ch)))
        .collect();
    let total: f64 = got.iter().map(|(_, v)| unit_s(v)).sum();
    assert!(
        total > 2.5,
        "device mostly idle under {policy}: {total} s of 3"
    );
    for (credits, v) in &got {
        let want = 100.0 * credits / 2048.0;
        let pct = 100.0 * unit_s(v) / total;
        eprintln!("{policy}: credits {credits}: {pct:.1} % (want {want:.1} %)");
        assert!(
            (pct - want).abs() <= 3.0,
            "{policy}: credits {credits} got {pct:.1} % of the device, want {want:.1} % ({got:?})"
        );
    }
}

#[test]
fn accc_gives_device_time_in_proportion_to_credits() {
    credits_split_the_device("accc", false);
}

#[test]
fn augc_without_a_cpu_schedule_follows_credits_too() {
    credits_split_the_device("augc", false);
}

/// Pegasus's real run: the four processes send their calls through call
/// rings served by the daemon's backend.
#[test]
fn calls_through_rings_follow_credits_under_accc() {
    credits_split_the_device("accc", true);
}

#[test]
fn a_flooding_ring_cannot_starve_others_and_a_lying_one_is_cut_short() {
    use hetsched_protocol::{Client, ClientOptions, ErrorCode};
    use std::time::{Duration, Instant};
    let config = format!(
        "{}\n[policies]\ngpu0 = \"rr\"\n",
        common::ONE_GPU.trim_end()
    );
    let d = TestDaemon::start("backend-flood", &config);
    let connect = |name: &str| {
        let opts = ClientOptions::application(name).unwrap().socket(&d.socket);
        Client::connect(opts).unwrap()
    };
    let unit = hetsched_core::ids::UnitId(0);
    // The flooder keeps its ring full: it pushes until the ring refuses,
    // then waits for its oldest call, and again.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let flooder = {
        let stop = stop.clone();
        let mut flood = connect("flood");
        std::thread::spawn(move || {
            let mut ring = flood.open_call_ring(unit).unwrap();
            let mut inflight = std::collections::VecDeque::new();
            while let Some(t) = flood.push_call(&mut ring, 2_000_000, 0, 0) {
                inflight.push_back(t);
            }
            ready_tx.send(inflight.len()).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = inflight.pop_front().unwrap();
                flood.wait_device(t).unwrap();
                while let Some(t) = flood.push_call(&mut ring, 2_000_000, 0, 0) {
                    inflight.push_back(t);
                }
            }
            flood // dropped by the test: leaving with calls queued
        })
    };
    assert_eq!(
        ready_rx.recv().unwrap(),
        256,
        "the ring holds what the daemon made it hold"
    );
    // A polite client still gets its calls through, about every other
    // turn under round robin.
    let mut polite = connect("polite");
    let mut ring = polite.open_call_ring(unit).unwrap();
    let start = Instant::now();
    let mut done = 0;
    while start.elapsed() < Duration::from_millis(600) {
        let task = polite.push_call(&mut ring, 2_000_000, 0, 0).unwrap();
        polite.wait_device(task).unwrap();
        done += 1;
    }
    assert!(
        done >= 40,
        "only {done} calls of 2 ms in 0.6 s beside a flooder"
    );
    // The daemon took no more of the flooder's calls than it lets anyone
    // have outstanding: the rest waits in the flooder's own ring.
    let mut observer = d.observer().unwrap();
    let status = observer.status().unwrap();
    let f = status.clients.iter().find(|c| c.name == "flood").unwrap();
    assert!(f.units[0].outstanding <= 64, "{:?}", f.units[0]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let flood = flooder.join().unwrap();
    // A client that lies about its ring (more calls than it holds) gets
    // it closed, with a reason.
    let mut liar = connect("liar");
    let liar_ring = liar.open_call_ring(unit).unwrap();
    liar_ring.publish_raw_tail(300);
    match liar.wait_device(hetsched_core::ids::TaskId(1)) {
        Err(hetsched_protocol::ClientError::Refused { code, message }) => {
            assert_eq!(code, ErrorCode::CallRingCorrupt, "{message}")
        }
        other => panic!("{other:?}"),
    }
    // The flooder leaves: everything it queued goes with it.
    drop(flood);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let s = observer.status().unwrap();
        if s.clients.iter().all(|c| c.name != "flood") && s.units[0].view.queued == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the flooder's calls outlived it: {:?}",
            s.units[0]
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn pegasus_scenarios_report_every_policy_against_none() {
    for name in ["pegasus-fig5", "pegasus-fig6", "pegasus-fwt"] {
        let out = std::process::Command::new(common::BIN)
            .args(["sim", "run", name, "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["scenario"], name);
        assert_eq!(v["baseline"], "none");
        let policies: Vec<&str> = v["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["policy"].as_str().unwrap())
            .collect();
        assert_eq!(
            policies,
            ["none", "rr", "accc", "xc", "slaf", "augc", "cosched"]
        );
        let none = &v["results"][0];
        assert_eq!(none["system_speedup"], 1.0);
        for app in none["apps"].as_object().unwrap().values() {
            assert_eq!(app["relative"], 1.0);
            assert!(app["latency_p99_ms"].as_f64().unwrap() > 0.0);
        }
    }
}

/// p99 wait of a latency-sensitive client (1 ms calls, one at a time,
/// 5 ms between them) beside three bulk clients (8 ms calls, two
/// outstanding) on one emulated device under `policy`.
fn light_p99_ms(policy: &str) -> f64 {
    let config = format!(
        "{}\n[policies]\ngpu0 = \"{policy}\"\n",
        common::ONE_GPU.trim_end()
    );
    let d = TestDaemon::start(&format!("latency-{policy}"), &config);
    let bulk = [
        "--unit",
        "gpu0",
        "--seconds",
        "2",
        "--exec-ms",
        "8",
        "--depth",
        "2",
    ];
    let heavy: Vec<Child> = (0..3).map(|_| d.load(&[], &bulk)).collect();
    let light = d.load(
        &[],
        &[
            "--unit",
            "gpu0",
            "--seconds",
            "2",
            "--exec-ms",
            "1",
            "--depth",
            "1",
            "--think-ms",
            "5",
        ],
    );
    let v = report(light);
    for h in heavy {
        report(h);
    }
    v["p99_wait_ns"].as_f64().unwrap() / 1e6
}

/// Pegasus's latency-sensitive real run: under FCFS the light client
/// waits behind every queued bulk call; under RR and AugC each bulk
/// client gets one tick per turn and a call that would overrun its tick
/// waits for the next turn.
#[test]
fn a_latency_sensitive_client_waits_less_under_rr_and_augc_than_fcfs() {
    let none = light_p99_ms("none");
    for policy in ["rr", "augc"] {
        let p = light_p99_ms(policy);
        eprintln!("light p99: none {none:.1} ms, {policy} {p:.1} ms");
        assert!(
            p < 0.75 * none,
            "{policy}: p99 {p:.1} ms vs none {none:.1} ms"
        );
    }
}
