//! Pegasus backend policies: work conservation and registration safety
//! under any sequence of events, proportional shares for the credit
//! policies, no starvation under AugC, first-come-first-serve under None.

use hetsched_core::backend_policy::{
    BackendPolicy, BackendScheduler, COSCHED_MAX_WAIT_NS, CpuSchedule, DomainConfig, DomainId,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

const TICK: u64 = 10_000_000;

#[derive(Clone, Debug)]
enum Op {
    Add(u32, u32, u32),
    Remove(u32),
    Update(u32, bool, bool),
    Cpu(Vec<(u32, u32)>),
    Next,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u32..8, 1u32..2048, 1u32..2048).prop_map(|(d, a, c)| Op::Add(d, a, c)),
        (0u32..8).prop_map(Op::Remove),
        (0u32..8, any::<bool>(), any::<bool>()).prop_map(|(d, r, c)| Op::Update(d, r, c)),
        proptest::collection::vec((0u32..8, 0u32..300), 0..4).prop_map(Op::Cpu),
        Just(Op::Next),
        Just(Op::Next),
    ]
}

fn policy() -> impl Strategy<Value = BackendPolicy> {
    proptest::sample::select(BackendPolicy::ALL.to_vec())
}

proptest! {
    // Each case simulates thousands of ticks: fewer cases keep the debug
    // test run short.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_ready_registered_domain_is_always_chosen_and_nothing_else(
        policy in policy(),
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let mut s = BackendScheduler::new(policy, TICK);
        // The model: registered domains and whether each is ready.
        let mut ready: BTreeMap<u32, bool> = BTreeMap::new();
        let mut now = 0;
        for op in ops {
            match op {
                Op::Add(d, a, c) => {
                    let cfg = DomainConfig { acc_credits: a, cpu_credits: c, slo: Some(0.2) };
                    s.add(DomainId(d), cfg).unwrap();
                    ready.entry(d).or_insert(false);
                }
                Op::Remove(d) => {
                    s.remove(DomainId(d));
                    ready.remove(&d);
                }
                Op::Update(d, r, c) => {
                    let res = s.update(DomainId(d), r, c, Some(now));
                    prop_assert_eq!(res.is_ok(), ready.contains_key(&d));
                    if let Some(x) = ready.get_mut(&d) {
                        *x = r;
                    }
                }
                Op::Cpu(hs) => s.set_cpu_schedule(CpuSchedule {
                    scheduled: hs.into_iter().map(|(d, c)| (DomainId(d), c)).collect(),
                }),
                Op::Next => {
                    now += TICK;
                    let any_ready = ready.values().any(|&r| r);
                    match s.next(now) {
                        Some(dec) => {
                            prop_assert!(ready.get(&dec.domain.0) == Some(&true), "{dec:?} {ready:?}");
                            prop_assert!(dec.ticks >= 1);
                            s.charge(dec.domain, u64::from(dec.ticks) * TICK);
                        }
                        None => prop_assert!(!any_ready, "idle with {ready:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn credit_policies_split_ticks_in_proportion(
        credits in proptest::collection::vec(1u32..8, 2..6),
        xc in any::<bool>(),
    ) {
        // Credits as multiples of 256, as Pegasus assigns them.
        let policy = if xc { BackendPolicy::Xc } else { BackendPolicy::AccC };
        let mut s = BackendScheduler::new(policy, TICK);
        for (i, &c) in credits.iter().enumerate() {
            let cfg = if xc {
                DomainConfig { acc_credits: 256, cpu_credits: c * 256, slo: None }
            } else {
                DomainConfig { acc_credits: c * 256, cpu_credits: 256, slo: None }
            };
            s.add(DomainId(i as u32), cfg).unwrap();
            s.update(DomainId(i as u32), true, true, Some(0)).unwrap();
        }
        let min = *credits.iter().min().unwrap();
        let mut ticks = vec![0u32; credits.len()];
        for _ in 0..credits.len() * 10 {
            let d = s.next(0).unwrap();
            ticks[d.domain.0 as usize] += d.ticks;
        }
        for (i, &c) in credits.iter().enumerate() {
            prop_assert_eq!(ticks[i], 10 * (c / min), "{:?} {:?}", credits, ticks);
            // What status shows is what was handed out.
            let st = s.domain_state(DomainId(i as u32)).unwrap();
            prop_assert_eq!(st.ticks_granted, u64::from(ticks[i]));
            prop_assert_eq!(st.slo_met, None);
        }
    }

    #[test]
    fn augc_serves_everyone_and_follows_credits_without_boosts(
        credits in proptest::collection::vec(1u32..5, 2..6),
        boosts in proptest::collection::vec(proptest::collection::vec((0u32..6, 0u32..300), 0..3), 50),
    ) {
        let mut s = BackendScheduler::new(BackendPolicy::AugC, TICK);
        for (i, &c) in credits.iter().enumerate() {
            s.add(DomainId(i as u32), DomainConfig { acc_credits: c * 256, ..Default::default() }).unwrap();
            s.update(DomainId(i as u32), true, true, Some(0)).unwrap();
        }
        let n = credits.len();
        let mut served = vec![0u32; n];
        // A changing CPU schedule boosts some domains every tick.
        for t in 0..3000usize {
            let hs = &boosts[t % boosts.len()];
            s.set_cpu_schedule(CpuSchedule {
                scheduled: hs.iter().map(|&(d, c)| (DomainId(d), c)).collect(),
            });
            let d = s.next(t as u64 * TICK).unwrap();
            served[d.domain.0 as usize] += d.ticks;
            s.charge(d.domain, u64::from(d.ticks) * TICK);
        }
        prop_assert!(served.iter().all(|&x| x > 0), "starved: {served:?}");
        // Without boosts, shares follow credits as AccC's do.
        let mut s = BackendScheduler::new(BackendPolicy::AugC, TICK);
        for (i, &c) in credits.iter().enumerate() {
            s.add(DomainId(i as u32), DomainConfig { acc_credits: c * 256, ..Default::default() }).unwrap();
            s.update(DomainId(i as u32), true, true, Some(0)).unwrap();
        }
        let mut plain = vec![0f64; n];
        for t in 0..3000u64 {
            let d = s.next(t * TICK).unwrap();
            plain[d.domain.0 as usize] += f64::from(d.ticks);
            s.charge(d.domain, u64::from(d.ticks) * TICK);
        }
        // Ticks per turn are X / X_min, rounded down, as in Algorithm 1.
        let min = *credits.iter().min().unwrap();
        let total_w: u32 = credits.iter().map(|c| c / min).sum();
        let total_ticks: f64 = plain.iter().sum();
        for i in 0..n {
            let want = f64::from(credits[i] / min) / f64::from(total_w);
            let got = plain[i] / total_ticks;
            prop_assert!((got - want).abs() < 0.03, "{credits:?}: {plain:?}");
        }
    }
}

#[test]
fn none_serves_the_oldest_call_first() {
    let mut s = BackendScheduler::new(BackendPolicy::None, TICK);
    for d in 0..3 {
        s.add(DomainId(d), DomainConfig::default()).unwrap();
    }
    s.update(DomainId(0), true, true, Some(300)).unwrap();
    s.update(DomainId(1), true, true, Some(100)).unwrap();
    s.update(DomainId(2), true, true, Some(200)).unwrap();
    assert_eq!(s.next(0).unwrap().domain, DomainId(1));
    s.update(DomainId(1), false, true, None).unwrap();
    assert_eq!(s.next(0).unwrap().domain, DomainId(2));
}

#[test]
fn cosched_follows_the_cpu_schedule_and_falls_back_to_credits() {
    let mut s = BackendScheduler::new(BackendPolicy::CoSched, TICK);
    for (d, c) in [(0, 1024), (1, 256), (2, 512)] {
        s.add(
            DomainId(d),
            DomainConfig {
                acc_credits: c,
                ..Default::default()
            },
        )
        .unwrap();
        s.update(DomainId(d), true, true, Some(0)).unwrap();
    }
    s.set_cpu_schedule(CpuSchedule {
        scheduled: vec![(DomainId(1), 100), (DomainId(2), 50)],
    });
    assert_eq!(
        s.next(0).unwrap().domain,
        DomainId(2),
        "highest credit among those scheduled"
    );
    s.set_cpu_schedule(CpuSchedule {
        scheduled: vec![(DomainId(7), 100)],
    });
    assert_eq!(
        s.next(0).unwrap().domain,
        DomainId(0),
        "nobody scheduled is ready: highest credit"
    );
}

#[test]
fn cosched_serves_a_domain_the_schedule_leaves_out_once_its_call_is_overdue() {
    let mut s = BackendScheduler::new(BackendPolicy::CoSched, TICK);
    for (d, c) in [(0, 1024), (1, 256)] {
        let cfg = DomainConfig {
            acc_credits: c,
            ..Default::default()
        };
        s.add(DomainId(d), cfg).unwrap();
        s.update(DomainId(d), true, true, Some(0)).unwrap();
    }
    s.set_cpu_schedule(CpuSchedule {
        scheduled: vec![(DomainId(0), 100)],
    });
    assert_eq!(s.next(COSCHED_MAX_WAIT_NS - 1).unwrap().domain, DomainId(0));
    // Domain 0's next call came as it was served.
    s.update(DomainId(0), true, true, Some(COSCHED_MAX_WAIT_NS - 1))
        .unwrap();
    assert_eq!(
        s.next(COSCHED_MAX_WAIT_NS).unwrap().domain,
        DomainId(1),
        "its call has waited ten ticks"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the CPU schedule says, every domain that always has a
    /// call queued is served at least every `COSCHED_MAX_WAIT_NS` plus
    /// one tick per other domain (the overdue are served oldest first).
    #[test]
    fn cosched_starves_nobody(
        credits in proptest::collection::vec(1u32..2048, 2..6),
        schedules in proptest::collection::vec(
            proptest::collection::vec((0u32..6, 1u32..300), 0..4), 1..400),
    ) {
        let n = credits.len() as u32;
        let mut s = BackendScheduler::new(BackendPolicy::CoSched, TICK);
        let mut last_served = vec![0u64; credits.len()];
        for (d, &c) in credits.iter().enumerate() {
            let cfg = DomainConfig { acc_credits: c, ..Default::default() };
            s.add(DomainId(d as u32), cfg).unwrap();
        }
        let bound = COSCHED_MAX_WAIT_NS + u64::from(n) * TICK;
        for (tick, hs) in schedules.into_iter().enumerate() {
            let now = tick as u64 * TICK;
            for (d, &since) in last_served.iter().enumerate() {
                s.update(DomainId(d as u32), true, true, Some(since)).unwrap();
            }
            s.set_cpu_schedule(CpuSchedule {
                scheduled: hs.into_iter().map(|(d, c)| (DomainId(d), c)).collect(),
            });
            let served = s.next(now).unwrap().domain.0 as usize;
            last_served[served] = now;
            for (d, &since) in last_served.iter().enumerate() {
                prop_assert!(now - since <= bound, "domain {} unserved since {} at {}", d, since, now);
            }
        }
    }
}

#[test]
fn slaf_compensates_a_domain_below_its_slo() {
    let mut s = BackendScheduler::new(BackendPolicy::Slaf, TICK);
    let slo = DomainConfig {
        acc_credits: 256,
        cpu_credits: 256,
        slo: Some(0.5),
    };
    s.add(DomainId(0), slo).unwrap();
    s.add(
        DomainId(1),
        DomainConfig {
            acc_credits: 1024,
            ..Default::default()
        },
    )
    .unwrap();
    for d in 0..2 {
        s.update(DomainId(d), true, true, Some(0)).unwrap();
    }
    fn run(s: &mut BackendScheduler, now: &mut u64, secs: u64) -> [u64; 2] {
        let mut served = [0u64; 2];
        let end = *now + secs * 1_000_000_000;
        while *now < end {
            let d = s.next(*now).unwrap();
            let ns = u64::from(d.ticks) * TICK;
            s.charge(d.domain, ns);
            served[d.domain.0 as usize] += ns;
            *now += ns;
        }
        served
    }
    let mut now = 0;
    // AccC alone gives domain 0 a fifth (256 of 1280): under its SLO of
    // a half. At the end of the first window SLAF sees the violation,
    // owes it ticks and pays them, one extra per turn.
    let first = run(&mut s, &mut now, 1);
    assert!(first[0] * 4 < first[0] + first[1] + first[1] / 10);
    let later = run(&mut s, &mut now, 3);
    assert!(s.slo_state().contains(&(DomainId(0), false)));
    // Status: the SLO domain's state, served time as charged; the other
    // has no SLO to meet.
    let st = s.domain_state(DomainId(0)).unwrap();
    assert_eq!(st.slo_met, Some(false));
    assert_eq!(st.served_ns, first[0] + later[0]);
    assert_eq!(st.config.slo, Some(0.5));
    assert_eq!(s.domain_state(DomainId(1)).unwrap().slo_met, None);
    assert!(s.domain_state(DomainId(7)).is_none());
    let share = later[0] as f64 / (later[0] + later[1]) as f64;
    assert!(share > 0.3, "compensated share {share}");
}

#[test]
fn impossible_settings_are_refused() {
    let mut s = BackendScheduler::new(BackendPolicy::AccC, TICK);
    let zero = DomainConfig {
        acc_credits: 0,
        ..Default::default()
    };
    assert!(s.add(DomainId(0), zero).is_err());
    let bad_slo = DomainConfig {
        slo: Some(1.5),
        ..Default::default()
    };
    assert!(s.add(DomainId(0), bad_slo).is_err());
    assert!(s.update(DomainId(9), true, true, None).is_err());
    assert_eq!(BackendPolicy::parse("augc"), Some(BackendPolicy::AugC));
    assert_eq!(BackendPolicy::parse("fifo"), None);
}

mod as_unit_policy {
    use hetsched_core::backend_policy::{BackendPolicy, TURN_ANTICIPATION_NS};
    use hetsched_core::ids::{ClientId, TaskId};
    use hetsched_core::policy::{
        ClientSettings, CreditPolicy, PolicyKind, Request, ShareClass, SharedDomain, UnitPolicy,
    };
    use proptest::prelude::*;
    use std::collections::{BTreeMap, VecDeque};

    /// Device time per client over `secs` simulated seconds of every
    /// client in `clients` keeping two calls of `call_ns` queued.
    fn busy_run(
        p: &mut CreditPolicy,
        clients: &[u32],
        call_ns: u64,
        secs: u64,
    ) -> BTreeMap<u32, u64> {
        let mut served: BTreeMap<u32, u64> = clients.iter().map(|&c| (c, 0)).collect();
        let mut queued: BTreeMap<u32, usize> = served.keys().map(|&c| (c, 0)).collect();
        let (mut now, mut task) = (0u64, 0u64);
        while now < secs * 1_000_000_000 {
            for &c in clients {
                while queued[&c] < 2 {
                    p.submit(
                        Request {
                            client: ClientId(c),
                            task: TaskId(task),
                            expected_ns: call_ns as f64,
                            submitted_at: now,
                        },
                        now,
                    );
                    *queued.get_mut(&c).unwrap() += 1;
                    task += 1;
                }
            }
            let r = p.pick_next(now).expect("work-conserving");
            *queued.get_mut(&r.client.0).unwrap() -= 1;
            now += call_ns;
            p.complete(r.client, call_ns, now);
            *served.get_mut(&r.client.0).unwrap() += call_ns;
        }
        served
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Two clients in one domain with credits `a` get, together, the
        /// device time and the ticks one client with credits `a` gets
        /// beside the same others, whatever the credits and call length.
        #[test]
        fn a_shared_domain_gets_what_one_client_with_its_credits_would(
            backend in proptest::sample::select(vec![
                BackendPolicy::Rr, BackendPolicy::AccC, BackendPolicy::Xc, BackendPolicy::Slaf,
            ]),
            a in 1u32..2048,
            others in proptest::collection::vec(1u32..2048, 1..3),
            call_us in 300u64..3000,
        ) {
            let normal = |shares| ClientSettings { class: ShareClass::Normal { shares }, priority: 0 };
            let call_ns = call_us * 1000;
            let other_ids: Vec<u32> = (10..10 + others.len() as u32).collect();
            // Two members of a shared domain with credits a.
            let mut shared = CreditPolicy::new(backend, 1);
            for c in [1, 2] {
                shared.set_client(ClientId(c), normal(7), 0).unwrap();
                shared.set_client_domain(ClientId(c), Some(SharedDomain { key: 0, credits: a }), 0);
            }
            // One client with credits a.
            let mut single = CreditPolicy::new(backend, 1);
            single.set_client(ClientId(1), normal(a), 0).unwrap();
            for p in [&mut shared, &mut single] {
                for (&c, &x) in other_ids.iter().zip(&others) {
                    p.set_client(ClientId(c), normal(x), 0).unwrap();
                }
            }
            let mut all = vec![1, 2];
            all.extend(&other_ids);
            let got = busy_run(&mut shared, &all, call_ns, 5);
            let mut solo = vec![1];
            solo.extend(&other_ids);
            let want = busy_run(&mut single, &solo, call_ns, 5);
            let total: u64 = want.values().sum();
            let part = |x: u64| x as f64 / total as f64;
            prop_assert!(
                (part(got[&1] + got[&2]) - part(want[&1])).abs() < 0.02,
                "shared {got:?} single {want:?}"
            );
            let ticks_shared = shared.backend_state(ClientId(1)).unwrap().ticks_granted;
            let ticks_single = single.backend_state(ClientId(1)).unwrap().ticks_granted;
            let turn = u64::from(a / others.iter().copied().chain([a]).min().unwrap()).max(1) + 2;
            prop_assert!(
                ticks_shared.abs_diff(ticks_single) <= 2 * turn,
                "ticks {ticks_shared} vs {ticks_single}"
            );
        }
    }

    /// Clients with one call at a time that queue the next `gap_ns` after
    /// the last completes (a tightly coupled loop), every call `call_ns`:
    /// device time per client over `secs`, the longest the unit stood
    /// idle while some client had a call queued, and the unit's idle time.
    fn tight_loop_run(
        p: &mut CreditPolicy,
        clients: &[u32],
        call_ns: u64,
        gap_ns: u64,
        secs: u64,
    ) -> (BTreeMap<u32, u64>, u64) {
        let mut served: BTreeMap<u32, u64> = clients.iter().map(|&c| (c, 0)).collect();
        // When each client's next call arrives (None: it is queued or running).
        let mut arrives: BTreeMap<u32, Option<u64>> =
            clients.iter().map(|&c| (c, Some(0))).collect();
        let (mut now, mut task, mut longest_idle) = (0u64, 0u64, 0u64);
        let mut idle_since: Option<u64> = None;
        let end = secs * 1_000_000_000;
        // Submits every call that arrives by `until`, at its own time.
        let submit_until = |p: &mut CreditPolicy,
                            arrives: &mut BTreeMap<u32, Option<u64>>,
                            task: &mut u64,
                            until: u64| {
            for (&c, at) in arrives.iter_mut() {
                if let Some(t) = at.filter(|&t| t <= until) {
                    p.submit(
                        Request {
                            client: ClientId(c),
                            task: TaskId(*task),
                            expected_ns: call_ns as f64,
                            submitted_at: t,
                        },
                        t,
                    );
                    *task += 1;
                    *at = None;
                }
            }
        };
        while now < end {
            submit_until(p, &mut arrives, &mut task, now);
            match p.pick_next(now) {
                Some(r) => {
                    if let Some(s) = idle_since.take() {
                        longest_idle = longest_idle.max(now - s);
                    }
                    // Others' calls arrive while this one runs.
                    submit_until(p, &mut arrives, &mut task, now + call_ns);
                    now += call_ns;
                    p.complete(r.client, call_ns, now);
                    *served.get_mut(&r.client.0).unwrap() += call_ns;
                    arrives.insert(r.client.0, Some(now + gap_ns));
                }
                None => {
                    // Idle: until the next arrival or the policy's retry.
                    if p.queued() > 0 {
                        idle_since.get_or_insert(now);
                    }
                    let next_arrival = arrives.values().flatten().copied().min();
                    let retry = p.retry_at(now);
                    now = match (next_arrival, retry) {
                        (Some(a), Some(b)) => a.min(b),
                        (a, b) => a.or(b).expect("something is pending"),
                    }
                    .max(now + 1);
                }
            }
        }
        (served, longest_idle)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// The work-conserving rule with tightly coupled clients: the unit
        /// never stands idle longer than the anticipation window while a
        /// call is queued, and since an owner whose next call comes within
        /// the window keeps its turn, AccC still splits device time by
        /// credits (with no window, every call ended the owner's turn and
        /// the split was even, whatever the credits).
        #[test]
        fn tight_loops_keep_their_turns_and_shares_without_idling_the_unit(
            // Multiples of the smallest, so Algorithm 1's whole ticks
            // (X / X_min) are the credit ratio.
            credits in proptest::collection::vec(proptest::sample::select(vec![1u32, 2, 4]), 2..5),
            call_us in 500u64..3000,
            gap_us in 0u64..(TURN_ANTICIPATION_NS / 2000),
        ) {
            let mut p = CreditPolicy::new(BackendPolicy::AccC, 1);
            let ids: Vec<u32> = (1..=credits.len() as u32).collect();
            for (&c, &x) in ids.iter().zip(&credits) {
                let s = ClientSettings { class: ShareClass::Normal { shares: x * 256 }, priority: 0 };
                p.set_client(ClientId(c), s, 0).unwrap();
            }
            let (served, longest_idle) = tight_loop_run(&mut p, &ids, call_us * 1000, gap_us * 1000, 20);
            prop_assert!(longest_idle <= TURN_ANTICIPATION_NS, "idle {longest_idle}");
            let total: u64 = served.values().sum();
            let all: u32 = credits.iter().sum();
            for (c, &x) in ids.iter().zip(&credits) {
                let want = f64::from(x) / f64::from(all);
                let got = served[c] as f64 / total as f64;
                prop_assert!((got - want).abs() < 0.05, "{served:?} credits {credits:?}");
            }
        }

        /// An owner whose loop does not come back within the window gives
        /// the unit up: the others' calls wait at most the window.
        #[test]
        fn an_owner_that_does_not_come_back_in_time_loses_its_turn(
            credits in proptest::collection::vec(1u32..=4, 2..5),
            call_us in 500u64..3000,
        ) {
            let mut p = CreditPolicy::new(BackendPolicy::AccC, 1);
            let ids: Vec<u32> = (1..=credits.len() as u32).collect();
            for (&c, &x) in ids.iter().zip(&credits) {
                let s = ClientSettings { class: ShareClass::Normal { shares: x * 256 }, priority: 0 };
                p.set_client(ClientId(c), s, 0).unwrap();
            }
            let gap = 3 * TURN_ANTICIPATION_NS;
            let (served, longest_idle) = tight_loop_run(&mut p, &ids, call_us * 1000, gap, 5);
            prop_assert!(longest_idle <= TURN_ANTICIPATION_NS, "idle {longest_idle}");
            prop_assert!(served.values().all(|&s| s > 0), "{served:?}");
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Submit(u32),
        Pick,
        Remove(u32),
        Settings(u32, u32),
        Domain(u32, Option<u32>, u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u32..5).prop_map(Op::Submit),
            3 => Just(Op::Pick),
            1 => (0u32..5).prop_map(Op::Remove),
            1 => (0u32..5, 1u32..2048).prop_map(|(c, s)| Op::Settings(c, s)),
            1 => (0u32..5, proptest::option::of(0u32..2), 1u32..2048)
                .prop_map(|(c, k, s)| Op::Domain(c, k, s)),
        ]
    }

    proptest! {
        /// Every Pegasus policy, driven as a unit policy: it hands out only
        /// calls that were submitted and not dropped, each client's in
        /// order, and holds a call back while the unit is free only for
        /// the owner's anticipation window: `retry_at` is at most the
        /// window away, and a pick then serves someone.
        #[test]
        fn serves_queued_calls_in_per_client_order_and_never_idles(
            kind in proptest::sample::select(
                PolicyKind::ALL.iter().copied().filter(|k| k.backend().is_some()).collect::<Vec<_>>()
            ),
            ops in proptest::collection::vec(op(), 1..300),
        ) {
            let mut p = kind.build(1);
            let mut model: BTreeMap<u32, VecDeque<u64>> = BTreeMap::new();
            let mut task = 0u64;
            let mut now = 0u64;
            for op in ops {
                now += 1_000_000;
                match op {
                    Op::Submit(c) => {
                        p.submit(Request {
                            client: ClientId(c),
                            task: TaskId(task),
                            expected_ns: 1e6,
                            submitted_at: now,
                        }, now);
                        model.entry(c).or_default().push_back(task);
                        task += 1;
                    }
                    Op::Pick => {
                        let queued: usize = model.values().map(VecDeque::len).sum();
                        match p.pick_next(now) {
                            Some(r) => {
                                let q = model.get_mut(&r.client.0).unwrap();
                                prop_assert_eq!(q.pop_front(), Some(r.task.0));
                                p.complete(r.client, 1_000_000, now + 1_000_000);
                            }
                            None if queued == 0 => {}
                            None => {
                                let at = p.retry_at(now);
                                prop_assert!(
                                    at.is_some_and(|t| t >= now && t <= now + TURN_ANTICIPATION_NS),
                                    "held back at {} until {:?}", now, at
                                );
                                now = at.unwrap();
                                let r = p.pick_next(now);
                                prop_assert!(r.is_some(), "still held back at {}", now);
                                let r = r.unwrap();
                                let q = model.get_mut(&r.client.0).unwrap();
                                prop_assert_eq!(q.pop_front(), Some(r.task.0));
                                p.complete(r.client, 1_000_000, now + 1_000_000);
                            }
                        }
                    }
                    Op::Remove(c) => {
                        let dropped = p.remove_client(ClientId(c), now);
                        let expect = model.remove(&c).map_or(0, |q| q.len());
                        prop_assert_eq!(dropped.len(), expect);
                    }
                    Op::Settings(c, s) => {
                        let settings = ClientSettings { class: ShareClass::Normal { shares: s }, priority: 0 };
                        prop_assert!(p.set_client(ClientId(c), settings, now).is_ok());
                    }
                    Op::Domain(c, key, credits) => {
                        let d = key.map(|key| SharedDomain { key, credits });
                        p.set_client_domain(ClientId(c), d, now);
                    }
                }
                prop_assert_eq!(p.queued(), model.values().map(VecDeque::len).sum::<usize>());
            }
        }
    }
}

// Accelerator selection (Pegasus §3.2): the chosen unit always fits,
// is never at its client cap, has the highest weight of those that fit,
// and ties go to the lowest unit id.
mod selection {
    use hetsched_core::backend_policy::selection::{
        AcceleratorProfile, DynamicProfile, Need, SelectionError, StaticProfile, fits, select,
        weight,
    };
    use hetsched_core::ids::UnitId;
    use hetsched_core::unit::UnitClass;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;

    fn profile() -> impl Strategy<Value = AcceleratorProfile> {
        (
            // Few distinct values, so equal weights (ties) come up often.
            proptest::sample::select(vec![1.0, 2.0, 4.0, 8.0]),
            1u32..3,
            1u64..8,
            proptest::sample::select(vec![4e9, 12e9]),
            1u32..4,
            0u64..8,
            0u32..5,
            proptest::sample::select(vec![UnitClass::Gpu, UnitClass::Accelerator]),
        )
            .prop_map(|(speed, streams, mem, bw, cap, alloc, clients, class)| {
                AcceleratorProfile {
                    unit: UnitId(0),
                    name: String::new(),
                    class,
                    fixed: StaticProfile {
                        speed,
                        streams,
                        memory_bytes: mem * 512 * MIB,
                        bandwidth_bytes_per_s: bw,
                        max_clients: cap,
                    },
                    load: DynamicProfile {
                        allocated_bytes: alloc.min(mem) * 512 * MIB,
                        clients: clients.min(cap),
                    },
                }
            })
    }

    fn units() -> impl Strategy<Value = Vec<AcceleratorProfile>> {
        proptest::collection::vec(profile(), 0..6).prop_map(|mut v| {
            // Distinct ids, not in listing order.
            let n = v.len() as u16;
            for (i, p) in v.iter_mut().enumerate() {
                p.unit = UnitId((i as u16 * 7 + 3) % n.max(1) + 10 * (i as u16 / n.max(1)));
                p.name = format!("u{}", p.unit.0);
            }
            v
        })
    }

    fn need() -> impl Strategy<Value = Need> {
        (
            0u64..10,
            proptest::option::of(proptest::sample::select(vec![
                UnitClass::Gpu,
                UnitClass::Accelerator,
            ])),
        )
            .prop_map(|(m, class)| Need {
                memory_bytes: m * 512 * MIB,
                class,
            })
    }

    proptest! {
        #[test]
        fn picks_the_heaviest_unit_that_fits(units in units(), need in need()) {
            match select(&units, &need) {
                Ok(id) => {
                    let chosen = units.iter().find(|p| p.unit == id).unwrap();
                    prop_assert!(fits(chosen, &need));
                    prop_assert!(chosen.free_bytes() >= need.memory_bytes);
                    prop_assert!(chosen.load.clients < chosen.fixed.max_clients);
                    prop_assert!(need.class.is_none_or(|c| c == chosen.class));
                    let w = weight(chosen);
                    for p in units.iter().filter(|p| fits(p, &need)) {
                        prop_assert!(weight(p) <= w, "{:?} outweighs {:?}", p, chosen);
                        if weight(p) == w {
                            prop_assert!(p.unit >= id, "tie not broken by id: {:?}", p);
                        }
                    }
                }
                Err(e) => {
                    prop_assert!(units.iter().all(|p| !fits(p, &need)), "{e}: but one fits");
                    match e {
                        SelectionError::NoAccelerator { .. } => prop_assert!(
                            units.iter().all(|p| need.class.is_some_and(|c| c != p.class))
                        ),
                        SelectionError::TooLarge { largest, .. } => {
                            prop_assert!(largest < need.memory_bytes)
                        }
                        SelectionError::Busy { blocked, .. } => prop_assert!(!blocked.is_empty()),
                    }
                }
            }
        }

        #[test]
        fn the_answer_does_not_depend_on_listing_order(units in units(), need in need()) {
            let mut reversed = units.clone();
            reversed.reverse();
            prop_assert_eq!(select(&units, &need), select(&reversed, &need));
        }

        #[test]
        fn a_client_more_never_raises_a_weight(p in profile()) {
            let mut more = p.clone();
            more.load.clients += 1;
            prop_assert!(weight(&more) <= weight(&p));
            prop_assert!(weight(&p).is_finite() && weight(&p) >= 0.0);
        }
    }
}
