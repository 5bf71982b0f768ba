//! Cross-policy properties and the share-tracking experiment.

use hetsched_core::ids::{ClientId, Ns, TaskId};
use hetsched_core::policy::{
    ClientSettings, FifoPolicy, MAX_CUSTOM_SHARES, PolicyError, PolicyKind, Request, ShareClass,
    SharePolicy, ShareWindow, UnitPolicy, short_first_key,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

const MS: Ns = 1_000_000;
const TICK_NS: Ns = 10 * MS;

fn request(client: u32, task: u64, expected_ns: f64, now: Ns) -> Request {
    Request {
        client: ClientId(client),
        task: TaskId(task),
        expected_ns,
        submitted_at: now,
    }
}

fn settings(class: ShareClass) -> ClientSettings {
    ClientSettings { class, priority: 0 }
}

/// Drives one single-slot policy with closed-loop clients (one task in flight
/// each, resubmitted on completion) and returns each client's fraction of
/// the busy time after `warm_up_ns`.
fn closed_loop_fractions(
    policy: &mut dyn UnitPolicy,
    task_ns: &[Ns],
    run_ns: Ns,
    warm_up_ns: Ns,
) -> Vec<f64> {
    let mut busy = vec![0u64; task_ns.len()];
    let mut next_task = 0u64;
    let mut next_tick = TICK_NS;
    for (c, &len) in task_ns.iter().enumerate() {
        policy.submit(request(c as u32, next_task, len as f64, 0), 0);
        next_task += 1;
    }
    let mut now = 0;
    while now < run_ns {
        let r = policy
            .pick_next(now)
            .expect("closed loop always has work queued");
        let c = r.client.0 as usize;
        let end = now + task_ns[c];
        while next_tick <= end {
            policy.tick(next_tick);
            next_tick += TICK_NS;
        }
        policy.complete(r.client, task_ns[c], end);
        if now >= warm_up_ns {
            busy[c] += task_ns[c];
        }
        policy.submit(request(r.client.0, next_task, task_ns[c] as f64, end), end);
        next_task += 1;
        now = end;
    }
    let total: u64 = busy.iter().sum();
    busy.iter().map(|&b| b as f64 / total as f64).collect()
}

#[test]
fn share_policy_tracks_custom_shares_with_mixed_task_sizes() {
    let shares = [25u32, 25, 25, 10, 10, 5];
    // Task lengths in units of 0.25 ms, from tiny to 20.75 ms.
    let units = [1.0, 3.3, 5.6, 20.0, 33.0, 83.0];
    for rotation in 0..units.len() {
        let task_ns: Vec<Ns> = (0..units.len())
            .map(|i| (units[(i + rotation) % units.len()] * 0.25 * MS as f64) as Ns)
            .collect();
        let mut p = SharePolicy::new(1, ShareWindow::default());
        for (c, &s) in shares.iter().enumerate() {
            p.set_client(
                ClientId(c as u32),
                settings(ShareClass::Custom { shares: s }),
                0,
            )
            .unwrap();
        }
        let got = closed_loop_fractions(&mut p, &task_ns, 20_000 * MS, 500 * MS);
        eprintln!("rotation {rotation}: {task_ns:?} -> {got:.4?}");
        for (c, (&s, &f)) in shares.iter().zip(&got).enumerate() {
            let want = f64::from(s) / 100.0;
            assert!(
                (f - want).abs() <= 0.03,
                "rotation {rotation}, client {c}: got {f:.4}, share {want:.2}"
            );
        }
    }
}

#[test]
fn fifo_does_not_track_shares_in_the_same_loop() {
    // The experiment above has teeth: plain FIFO hands the unit out in
    // proportion to task size, far from the shares.
    let units = [1.0, 3.3, 5.6, 20.0, 33.0, 83.0];
    let task_ns: Vec<Ns> = units.iter().map(|u| (u * 0.25 * MS as f64) as Ns).collect();
    let got = closed_loop_fractions(&mut FifoPolicy::new(1), &task_ns, 5_000 * MS, 500 * MS);
    let total: f64 = units.iter().sum();
    assert!((got[5] - 83.0 / total).abs() < 0.01, "{got:?}");
    assert!(got[5] - 0.05 > 0.3);
}

fn class_strategy() -> impl Strategy<Value = ShareClass> {
    prop_oneof![
        (0u32..=70).prop_map(|shares| ShareClass::Custom { shares }),
        (0u32..=30).prop_map(|shares| ShareClass::Normal { shares }),
        Just(ShareClass::Background),
    ]
}

fn custom_of(class: ShareClass) -> u64 {
    match class {
        ShareClass::Custom { shares } => u64::from(shares),
        _ => 0,
    }
}

/// Registers client `i` with `classes[i]`, or the default class where the
/// policy refuses it (CUSTOM over the limit); returns what each got.
fn register(p: &mut SharePolicy, classes: &[ShareClass]) -> BTreeMap<u32, ShareClass> {
    let mut class_of = BTreeMap::new();
    for (i, class) in classes.iter().enumerate() {
        let id = i as u32;
        let class = if p.set_client(ClientId(id), settings(*class), 0).is_ok() {
            *class
        } else {
            ShareClass::default()
        };
        class_of.insert(id, class);
    }
    class_of
}

/// What one random op did (see [`play`]).
enum Step {
    Submitted {
        client: u32,
        task: u64,
    },
    Picked(Option<Request>),
    /// A completion or a tick.
    Other,
}

/// Plays random ops on `p`: `(0, client, arg)` submits a call of `arg` ×
/// 0.1 ms for `client % clients`, `1` picks the next call and runs it for
/// `arg` × 0.2 ms, `2` completes one running call, anything else ticks;
/// every op first moves the clock on by `arg` × 0.1 ms. `check` sees each
/// op's step with the clock and the calls running after it.
fn play(
    p: &mut SharePolicy,
    clients: u32,
    ops: Vec<(u8, u32, u64)>,
    mut check: impl FnMut(&SharePolicy, Step, Ns, usize) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let mut running: Vec<(u32, Ns)> = Vec::new();
    let mut now: Ns = 0;
    for (task, (op, client, arg)) in ops.into_iter().enumerate() {
        let client = client % clients;
        now += arg * 100_000;
        let step = match op {
            0 => {
                p.submit(request(client, task as u64, arg as f64 * 1e5, now), now);
                Step::Submitted {
                    client,
                    task: task as u64,
                }
            }
            1 => {
                let picked = p.pick_next(now);
                if let Some(r) = picked {
                    running.push((r.client.0, arg * 200_000));
                }
                Step::Picked(picked)
            }
            2 => {
                if !running.is_empty() {
                    let (c, ran) = running.remove(arg as usize % running.len());
                    p.complete(ClientId(c), ran, now);
                }
                Step::Other
            }
            _ => {
                p.tick(now);
                Step::Other
            }
        };
        check(p, step, now, running.len())?;
    }
    Ok(())
}

fn registered(p: &SharePolicy) -> Vec<(ClientId, ClientSettings)> {
    p.ledger()
        .clients()
        .iter()
        .map(|c| (c.id(), c.settings()))
        .collect()
}

proptest! {
    /// Accepted CUSTOM shares never exceed the limit, every decision matches
    /// the rule, and a rejected call changes nothing.
    #[test]
    fn custom_shares_never_exceed_limit(
        calls in prop::collection::vec((0u32..8, class_strategy()), 1..60)
    ) {
        let mut p = SharePolicy::new(1, ShareWindow::default());
        let mut model: BTreeMap<u32, ShareClass> = BTreeMap::new();
        for (i, (client, class)) in calls.into_iter().enumerate() {
            let now = i as Ns * MS;
            let others: u64 = model
                .iter()
                .filter(|(c, _)| **c != client)
                .map(|(_, k)| custom_of(*k))
                .sum();
            let expected = match class {
                ShareClass::Custom { shares: 0 } | ShareClass::Normal { shares: 0 } => {
                    Err(PolicyError::ZeroShares)
                }
                ShareClass::Custom { shares } if others + u64::from(shares) > 100 => {
                    Err(PolicyError::CustomSharesExceeded {
                        requested_total: (others + u64::from(shares)) as u32,
                        available: (100 - others) as u32,
                    })
                }
                _ => Ok(()),
            };
            let before = registered(&p);
            let got = p.set_client(ClientId(client), settings(class), now);
            prop_assert_eq!(&got, &expected);
            if got.is_ok() {
                model.insert(client, class);
            } else {
                prop_assert_eq!(registered(&p), before);
            }
            prop_assert!(p.custom_shares() <= MAX_CUSTOM_SHARES);
            let model_total: u64 = model.values().map(|k| custom_of(*k)).sum();
            prop_assert_eq!(u64::from(p.custom_shares()), model_total);
        }
    }

    /// Entitlements of active clients sum to at most 1, and to exactly 1
    /// when any CUSTOM or NORMAL client is active.
    #[test]
    fn entitlements_sum_to_at_most_one(
        clients in prop::collection::vec((class_strategy(), any::<bool>()), 1..12),
        elapsed_ms in 0u64..300,
    ) {
        let mut p = SharePolicy::new(1, ShareWindow::default());
        let mut any_foreground_active = false;
        let mut active_count = 0;
        for (i, (class, busy)) in clients.iter().enumerate() {
            let id = ClientId(i as u32);
            if p.set_client(id, settings(*class), 0).is_err() {
                continue;
            }
            if *busy {
                // Finished one task at t=0: active for the activity window.
                p.submit(request(id.0, 0, 1e6, 0), 0);
                let r = p.pick_next(0).unwrap();
                p.complete(r.client, MS, 0);
            }
        }
        let now = elapsed_ms * MS;
        let window = ShareWindow::default().activity_window_ns;
        for (i, (class, busy)) in clients.iter().enumerate() {
            let id = ClientId(i as u32);
            if *busy && p.ledger().get(id).is_some() && now <= window {
                active_count += 1;
                any_foreground_active |= *class != ShareClass::Background;
            }
        }
        let e = p.entitlements(now);
        prop_assert_eq!(e.len(), active_count);
        let sum: f64 = e.iter().map(|(_, x)| *x).sum();
        prop_assert!(e.iter().all(|(_, x)| *x >= 0.0));
        prop_assert!(sum <= 1.0 + 1e-9, "sum {}", sum);
        if any_foreground_active {
            prop_assert!((sum - 1.0).abs() <= 1e-9, "sum {}", sum);
        }
    }

    /// Random submit / pick / complete / tick sequences: BACKGROUND work is
    /// never dispatched while CUSTOM or NORMAL work is queued, and without
    /// anticipation the share policy is work-conserving.
    #[test]
    fn background_never_picked_while_others_wait(
        classes in prop::collection::vec(class_strategy(), 2..8),
        ops in prop::collection::vec((0u8..4, 0u32..8, 1u64..30), 1..300),
    ) {
        let window = ShareWindow {
            anticipation_ns: 0,
            ..ShareWindow::default()
        };
        let mut p = SharePolicy::new(2, window);
        let class_of = register(&mut p, &classes);
        let mut queued: BTreeMap<u32, u32> = BTreeMap::new();
        play(&mut p, classes.len() as u32, ops, |p, step, now, running| {
            match step {
                Step::Submitted { client, .. } => *queued.entry(client).or_default() += 1,
                Step::Picked(picked) => {
                    let foreground_waiting = queued
                        .iter()
                        .any(|(c, n)| *n > 0 && class_of[c] != ShareClass::Background);
                    match picked {
                        Some(r) => {
                            let c = r.client.0;
                            prop_assert!(queued[&c] > 0);
                            if class_of[&c] == ShareClass::Background {
                                prop_assert!(!foreground_waiting);
                            }
                            *queued.get_mut(&c).unwrap() -= 1;
                        }
                        None => prop_assert!(queued.values().all(|n| *n == 0)),
                    }
                }
                Step::Other => {}
            }
            prop_assert_eq!(p.queued(), queued.values().sum::<u32>() as usize);
            prop_assert_eq!(p.unit_view(now).running as usize, running);
            prop_assert_eq!(p.retry_at(now), None);
            Ok(())
        })?;
    }

    /// With anticipation (the default), the policy holds a free slot with
    /// work queued only for a short while: never beyond the anticipation
    /// window, and BACKGROUND still never runs while others wait.
    #[test]
    fn anticipation_holds_a_slot_only_within_its_window(
        classes in prop::collection::vec(class_strategy(), 2..8),
        ops in prop::collection::vec((0u8..4, 0u32..8, 1u64..30), 1..300),
    ) {
        let window = ShareWindow::default();
        let mut p = SharePolicy::new(2, window);
        let class_of = register(&mut p, &classes);
        let mut queued: BTreeMap<u32, u32> = BTreeMap::new();
        play(&mut p, classes.len() as u32, ops, |p, step, now, _| {
            match step {
                Step::Submitted { client, .. } => *queued.entry(client).or_default() += 1,
                Step::Picked(Some(r)) => {
                    let c = r.client.0;
                    prop_assert!(queued[&c] > 0);
                    if class_of[&c] == ShareClass::Background {
                        prop_assert!(queued
                            .iter()
                            .all(|(c, n)| *n == 0 || class_of[c] == ShareClass::Background));
                    }
                    *queued.get_mut(&c).unwrap() -= 1;
                }
                Step::Picked(None) => {
                    if queued.values().any(|n| *n > 0) {
                        let retry = p.retry_at(now);
                        prop_assert!(
                            retry.is_some_and(|t| t > now && t <= now + window.anticipation_ns),
                            "held at {} until {:?}", now, retry
                        );
                    }
                }
                Step::Other => {}
            }
            if let Some(t) = p.retry_at(now) {
                prop_assert!(t <= now + window.anticipation_ns);
            }
            Ok(())
        })?;
    }

    /// Share policy under coordination: among the NORMAL clients the
    /// coordinator places, calls run in arrival order whatever their
    /// usage, CUSTOM and BACKGROUND clients mixed in; nothing is lost,
    /// and a free slot is held with calls queued only as anticipation
    /// holds it (for a client that just ran, within the window).
    #[test]
    fn pooled_normal_clients_dispatch_in_arrival_order(
        classes in prop::collection::vec(class_strategy(), 2..8),
        ops in prop::collection::vec((0u8..4, 0u32..8, 1u64..30), 1..300),
    ) {
        let window = ShareWindow::default();
        let mut p = SharePolicy::new(1, window);
        let class_of = register(&mut p, &classes);
        for id in class_of.keys() {
            p.set_coordinated(ClientId(*id), true);
        }
        let pooled = |c: u32| matches!(class_of[&c], ShareClass::Normal { .. });
        // Pooled calls queued, in arrival order, and all calls queued.
        let mut pool: Vec<u64> = Vec::new();
        let mut queued = 0usize;
        play(&mut p, classes.len() as u32, ops, |p, step, now, _| {
            match step {
                Step::Submitted { client, task } => {
                    if pooled(client) {
                        pool.push(task);
                    }
                    queued += 1;
                }
                Step::Picked(Some(r)) => {
                    if pooled(r.client.0) {
                        prop_assert_eq!(Some(r.task.0), pool.first().copied());
                        pool.remove(0);
                    }
                    queued -= 1;
                }
                Step::Picked(None) if queued > 0 => {
                    let retry = p.retry_at(now);
                    prop_assert!(
                        retry.is_some_and(|t| t > now && t <= now + window.anticipation_ns),
                        "{} queued, held at {} until {:?}", queued, now, retry
                    );
                }
                Step::Picked(None) => {}
                Step::Other => {}
            }
            prop_assert_eq!(p.queued(), queued);
            Ok(())
        })?;
    }

    /// FIFO: a client's expected wait grows with every task another client
    /// queues (each client's tasks have one size here, so the averages are
    /// fixed and only the outstanding counts change).
    #[test]
    fn fifo_wait_grows_with_others_outstanding(
        sizes in prop::array::uniform3(1u64..50),
        order in prop::collection::vec(0usize..3, 1..40),
    ) {
        let mut p = PolicyKind::Fifo.build(2);
        let mut last = p.client_view(ClientId(0), 0).wait_ns;
        prop_assert_eq!(last, 0.0);
        for (i, other) in order.into_iter().enumerate() {
            let expected = sizes[other] as f64 * 1e5;
            p.submit(request(1 + other as u32, i as u64, expected, 0), 0);
            let wait = p.client_view(ClientId(0), 0).wait_ns;
            prop_assert!(wait > last, "{} -> {}", last, wait);
            last = wait;
        }
    }

    /// Short-first loses nothing and dispatches in key order: a request is
    /// passed only by one submitted less than the stretch × the difference
    /// of their lengths after it (no starvation). Interleaved submits and
    /// picks, clients with one task size each.
    #[test]
    fn short_first_dispatches_in_key_order(
        sizes in prop::array::uniform4(1u64..100),
        ops in prop::collection::vec((0usize..5, 0u64..3 * MS), 1..80),
    ) {
        let mut p = PolicyKind::ShortFirst.build(1);
        let mut now: Ns = 0;
        // (key, task) of what is queued, in arrival order.
        let mut queued: Vec<(f64, u64)> = Vec::new();
        let mut picked = 0usize;
        let mut submitted = 0usize;
        for (task, (op, gap)) in ops.into_iter().enumerate() {
            now += gap;
            if op < 4 {
                let expected = sizes[op] as f64 * 1e5;
                p.submit(request(op as u32, task as u64, expected, now), now);
                queued.push((short_first_key(now as f64, expected), task as u64));
                submitted += 1;
            } else if let Some(r) = p.pick_next(now) {
                let (at, _) = queued
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.0.total_cmp(&b.1.0))
                    .expect("the model has it queued");
                prop_assert_eq!(r.task.0, queued.remove(at).1);
                picked += 1;
            } else {
                prop_assert!(queued.is_empty());
            }
        }
        prop_assert_eq!(p.queued(), submitted - picked);
        prop_assert_eq!(p.queued(), queued.len());
    }
}

/// Shares belong to the process: four connections of one process (one
/// account) get together what the one connection of another gets, at
/// equal shares; without accounts they would get four fifths.
#[test]
fn a_process_with_four_connections_gets_the_share_of_one_with_one() {
    let task_ns: Vec<Ns> = vec![2 * MS; 5];
    let run = |accounts: bool| {
        let mut p = SharePolicy::new(1, ShareWindow::default());
        for c in 0..5u32 {
            if accounts {
                p.set_client_account(ClientId(c), Some(if c < 4 { 100 } else { 200 }));
            }
            p.set_client(ClientId(c), settings(ShareClass::Normal { shares: 10 }), 0)
                .unwrap();
        }
        let got = closed_loop_fractions(&mut p, &task_ns, 5_000 * MS, 500 * MS);
        got[..4].iter().sum::<f64>()
    };
    let together = run(true);
    assert!(
        (together - 0.5).abs() <= 0.03,
        "four connections got {together:.3}"
    );
    let apart = run(false);
    assert!((apart - 0.8).abs() <= 0.03, "without accounts: {apart:.3}");
}

/// A process's CUSTOM shares count once against the unit's 100, however
/// many connections hold them.
#[test]
fn custom_shares_of_one_process_count_once() {
    let mut p = SharePolicy::new(1, ShareWindow::default());
    let custom = |shares| settings(ShareClass::Custom { shares });
    for c in 0..3u32 {
        p.set_client_account(ClientId(c), Some(7));
        p.set_client(ClientId(c), custom(60), 0).unwrap();
    }
    p.set_client_account(ClientId(9), Some(8));
    p.set_client(ClientId(9), custom(40), 0).unwrap();
    assert_eq!(
        p.set_client(ClientId(10), custom(1), 0),
        Err(PolicyError::CustomSharesExceeded {
            requested_total: 101,
            available: 0
        })
    );
}
