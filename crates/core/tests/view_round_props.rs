//! A round of views (`UnitPolicy::client_views`, one pass over the ledger
//! for every client) gives each client what the direct definition gives
//! it: the others scanned one by one. Checked on random histories of
//! submits, dispatches and completions, for every policy whose round is
//! computed from sums.

use hetsched_core::ids::{ClientId, Ns, TaskId};
use hetsched_core::policy::{
    ClientLedger, ClientSettings, FifoPolicy, MAX_CUSTOM_SHARES, PriorityPolicy, Request,
    ShareClass, SharePolicy, ShareWindow, TimeSharePolicy, UnitPolicy,
};
use hetsched_core::view::ClientUnitView;
use proptest::prelude::*;

const MS: Ns = 1_000_000;
const CLIENTS: u32 = 6;

#[derive(Clone, Debug)]
enum Op {
    Submit { client: u32, expected_ms: f64 },
    Dispatch,
    Complete { nth: usize },
    Wait { ms: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..CLIENTS, 0.1f64..20.0).prop_map(|(client, expected_ms)| Op::Submit { client, expected_ms }),
        2 => Just(Op::Dispatch),
        2 => (0usize..8).prop_map(|nth| Op::Complete { nth }),
        1 => (0u64..400).prop_map(|ms| Op::Wait { ms }),
    ]
}

fn class() -> impl Strategy<Value = ShareClass> {
    prop_oneof![
        (0u32..=40).prop_map(|shares| ShareClass::Custom { shares }),
        (1u32..=30).prop_map(|shares| ShareClass::Normal { shares }),
        Just(ShareClass::Background),
    ]
}

/// Plays `ops` on `policy`; returns the instant it ends at.
fn play(policy: &mut dyn UnitPolicy, ops: &[Op]) -> Ns {
    let mut now = 0;
    let mut running: Vec<(ClientId, Ns)> = Vec::new();
    let mut task = 0;
    for op in ops {
        match *op {
            Op::Submit {
                client,
                expected_ms,
            } => {
                task += 1;
                policy.submit(
                    Request {
                        client: ClientId(client),
                        task: TaskId(task),
                        expected_ns: expected_ms * MS as f64,
                        submitted_at: now,
                    },
                    now,
                );
            }
            Op::Dispatch => {
                if let Some(r) = policy.pick_next(now) {
                    running.push((r.client, now));
                }
            }
            Op::Complete { nth } => {
                if !running.is_empty() {
                    let (client, since) = running.remove(nth % running.len());
                    policy.complete(client, now - since, now);
                }
            }
            Op::Wait { ms } => {
                now += ms * MS;
                policy.tick(now);
            }
        }
    }
    now + MS / 3
}

/// Every client, and one the policy never heard of.
fn everyone() -> Vec<ClientId> {
    (0..=CLIENTS).map(ClientId).collect()
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

fn assert_same(got: &ClientUnitView, want: &ClientUnitView, who: ClientId) {
    assert!(
        close(got.guaranteed, want.guaranteed)
            && close(got.wait_ns, want.wait_ns)
            && close(got.current_utilisation, want.current_utilisation)
            && got.throttled == want.throttled
            && close(got.max_utilisation, want.max_utilisation),
        "client {}: round gave {got:?}, direct {want:?}",
        who.0
    );
}

/// Entitlement of a client of `class` among the active clients' shares,
/// its own counted once whether it is active or not.
fn entitlement<Q>(ledger: &ClientLedger<Q>, me: ClientId, class: ShareClass, now: Ns) -> f64 {
    let (mut custom, mut normal) = (0u64, 0u64);
    let mut count = |c: ShareClass| match c {
        ShareClass::Custom { shares } => custom += u64::from(shares),
        ShareClass::Normal { shares } => normal += u64::from(shares),
        ShareClass::Background => {}
    };
    for c in ledger.active_others(me, now) {
        count(c.class());
    }
    count(class);
    let max = f64::from(MAX_CUSTOM_SHARES);
    let (per_custom, per_normal) = if normal > 0 {
        (
            1.0 / max,
            (max - custom as f64).max(0.0) / max / normal as f64,
        )
    } else if custom > 0 {
        (1.0 / custom as f64, 0.0)
    } else {
        (0.0, 0.0)
    };
    match class {
        ShareClass::Custom { shares } => f64::from(shares) * per_custom,
        ShareClass::Normal { shares } => f64::from(shares) * per_normal,
        ShareClass::Background => 0.0,
    }
}

/// The share policy's view, by its definition (module docs of `share`).
fn share_direct(p: &SharePolicy, client: ClientId, now: Ns) -> ClientUnitView {
    let ledger = p.ledger();
    let me = ledger.get(client);
    let class = me.map_or_else(ShareClass::default, |c| c.class());
    let usage = me.map_or(0.0, |c| ledger.usage_at(now).fraction(c));
    let slots = f64::from(ledger.slots());
    let foreground =
        |c: &hetsched_core::policy::ClientRecord<_>| c.class() != ShareClass::Background;
    if class == ShareClass::Background {
        let others_want = ledger.active_others(client, now).any(foreground);
        return ClientUnitView {
            guaranteed: 0.0,
            wait_ns: if others_want {
                f64::INFINITY
            } else {
                ledger.fifo_work_ahead_ns(client, now, |c| !foreground(c))
            },
            current_utilisation: usage.clamp(0.0, 1.0),
            throttled: ledger
                .clients()
                .iter()
                .any(|c| foreground(c) && c.queued() > 0),
            max_utilisation: 1.0,
        };
    }
    let ent = entitlement(ledger, client, class, now);
    let wait_ns = if usage <= ent {
        let avgs: Vec<f64> = ledger
            .active_others(client, now)
            .map(|c| ledger.avg_task_ns(c))
            .collect();
        if avgs.is_empty() {
            0.0
        } else {
            avgs.iter().sum::<f64>() / avgs.len() as f64 / 2.0 / slots
        }
    } else {
        ledger.fifo_work_ahead_ns(client, now, foreground)
    };
    ClientUnitView {
        guaranteed: ent,
        wait_ns,
        current_utilisation: usage.clamp(0.0, 1.0),
        throttled: usage > ent + p.window().throttle_slack,
        max_utilisation: 1.0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn share_round_matches_the_definition(
        classes in proptest::collection::vec(class(), CLIENTS as usize),
        slots in 1u32..4,
        ops in proptest::collection::vec(op(), 0..80),
    ) {
        let mut p = SharePolicy::new(slots, ShareWindow::default());
        for (i, &class) in classes.iter().enumerate() {
            // CUSTOM shares past the unit's total are refused: those stay NORMAL.
            let _ = p.set_client(ClientId(i as u32), ClientSettings { class, priority: 0 }, 0);
        }
        let now = play(&mut p, &ops);
        let round = p.client_views(&everyone(), now);
        for (&c, got) in everyone().iter().zip(&round) {
            assert_same(got, &share_direct(&p, c, now), c);
        }
    }

    #[test]
    fn fifo_round_matches_the_backlog_of_the_others(
        slots in 1u32..4,
        ops in proptest::collection::vec(op(), 0..80),
    ) {
        let mut p = FifoPolicy::new(slots);
        let now = play(&mut p, &ops);
        let round = p.client_views(&everyone(), now);
        for (&c, got) in everyone().iter().zip(&round) {
            let ledger = p.ledger();
            let want = ClientUnitView {
                guaranteed: 0.0,
                wait_ns: ledger.backlog_ahead_ns(c, now, |_| true),
                current_utilisation: ledger.get(c).map_or(0.0, |r| ledger.utilisation(r, now)),
                throttled: false,
                max_utilisation: 1.0,
            };
            assert_same(got, &want, c);
        }
    }

    #[test]
    fn time_share_round_counts_the_others_tasks(
        slots in 1u32..4,
        ops in proptest::collection::vec(op(), 0..80),
    ) {
        let mut p = TimeSharePolicy::new(slots);
        let now = play(&mut p, &ops);
        let round = p.client_views(&everyone(), now);
        for (&c, got) in everyone().iter().zip(&round) {
            let ledger = p.ledger();
            let others: u32 = ledger
                .clients()
                .iter()
                .filter(|r| r.id() != c)
                .map(|r| r.outstanding())
                .sum();
            let want = ClientUnitView {
                guaranteed: (f64::from(slots) / (f64::from(others) + 1.0)).min(1.0),
                wait_ns: f64::INFINITY,
                current_utilisation: ledger.get(c).map_or(0.0, |r| ledger.utilisation(r, now)),
                throttled: false,
                max_utilisation: 1.0,
            };
            assert_same(got, &want, c);
        }
    }

    #[test]
    fn priority_round_matches_the_definition(
        priorities in proptest::collection::vec(-3i32..3, CLIENTS as usize),
        slots in 1u32..4,
        ops in proptest::collection::vec(op(), 0..80),
    ) {
        let mut p = PriorityPolicy::new(slots);
        for (i, &priority) in priorities.iter().enumerate() {
            let settings = ClientSettings { class: ShareClass::default(), priority };
            p.set_client(ClientId(i as u32), settings, 0).unwrap();
        }
        let now = play(&mut p, &ops);
        let round = p.client_views(&everyone(), now);
        for (&c, got) in everyone().iter().zip(&round) {
            let ledger = p.ledger();
            let me = ledger.get(c);
            let mine = me.map_or(0, |r| r.settings().priority);
            let (mut ahead, mut blocking, mut n) = (0.0, 0.0, 0u32);
            for r in ledger.active_others(c, now) {
                let avg = ledger.avg_task_ns(r);
                if r.settings().priority >= mine {
                    ahead += avg * f64::from(r.outstanding());
                } else if r.running() > 0 {
                    blocking += avg;
                    n += 1;
                }
            }
            let residual = if n > 0 { blocking / f64::from(n) / 2.0 } else { 0.0 };
            let want = ClientUnitView {
                guaranteed: 0.0,
                wait_ns: (ahead + residual) / f64::from(slots),
                current_utilisation: me.map_or(0.0, |r| ledger.utilisation(r, now)),
                throttled: false,
                max_utilisation: 1.0,
            };
            assert_same(got, &want, c);
        }
    }
}
