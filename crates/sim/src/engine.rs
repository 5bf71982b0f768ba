//! The discrete-event engine: one run of one placement strategy on one
//! scenario. Deterministic for a given seed: events are ordered by
//! (time, sequence number), every random draw comes from a seeded ChaCha
//! stream owned by one app, and no hash map is iterated.

use crate::goals::{self, GoalState};
use crate::metrics::{CompletedTask, GoalStand, Metrics, ReportApp};
use crate::scenario::{App, BytesDist, Scenario};
use crate::strategy::{PfJudge, StrategyKind};
use hetsched_core::coordination::{
    AppDemand, Coordinator, CoordinatorConfig, DeficitFollower, Pacer, UnitSupply,
    coordination_weights,
};
use hetsched_core::ids::{ClientId, KindId, Ns, TaskId, UnitId};
use hetsched_core::optimizer::Action;
use hetsched_core::placement::{DataLocation, Goal, ImplSet, Placer, TaskRequest};
use hetsched_core::policy::{ClientSettings, Request, ShareClass, UnitPolicy};
use hetsched_core::task_model::{PerformanceModel, TaskModel};
use hetsched_core::view::{ClientUnitView, PlacedSincePublish};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Something that happens at an instant.
#[derive(Clone, Copy, Debug)]
enum Event {
    /// A client may issue tasks (closed loop: it has room in flight).
    Issue { client: usize },
    /// A task reaches its unit after dispatch and copy-in.
    Arrive { task: usize },
    /// A paced client may issue again.
    Paced { client: usize },
    /// A running task may have finished (stale when `epoch` moved on).
    Finish { unit: usize, epoch: u64 },
    /// A task's result is back on the host: its turnaround ends.
    Return { task: usize },
    /// A unit's policy asked to be called again for held-back work.
    Retry { unit: usize },
    /// Agents tick and publish their views.
    Tick,
    /// An app (or a short-lived successor instance) starts.
    Spawn { app: usize, instance_of: usize },
    /// A long-lived app stops issuing.
    Stop { app: usize },
    /// External load on a unit changes for one app.
    Jitter { index: usize },
    /// An app with a throughput goal: its optimizer's period ends.
    Optimize { client: usize },
}

#[derive(Debug)]
struct Scheduled {
    at: Ns,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    /// Reversed, so the max-heap pops the earliest event.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// One task in flight.
#[derive(Clone, Debug)]
struct Task {
    client: usize,
    unit: UnitId,
    bytes: u64,
    /// Work left at full speed (time-shared units) or the whole run time (queued units).
    remaining_ns: f64,
    /// Execution time at full speed, as the runtime would measure it.
    service_ns: f64,
    issued_at: Ns,
    /// When it started running (`None` while queued or on its way).
    started_at: Option<Ns>,
    /// When it ends on a queued unit.
    finish_at: Ns,
    predicted_ns: f64,
    expected_ns: f64,
}

struct UnitState {
    policy: Box<dyn UnitPolicy>,
    slots: u32,
    time_shared: bool,
    running: Vec<usize>,
    /// Bumped whenever running tasks' finish times change (time-shared units).
    epoch: u64,
    last_progress: Ns,
    retry_pending: bool,
}

/// Most unit kinds a scenario's model error is drawn for (kinds beyond
/// share the last factor).
const MISPREDICTED_KINDS: usize = 8;

/// A task model whose every prediction is off by a factor drawn per
/// decision and unit kind, uniform in `1 ± error` (Rinnegan §4.6: how much
/// placement suffers from a profiler that is wrong).
struct Mispredicting<'m> {
    model: &'m TaskModel,
    factors: [f64; MISPREDICTED_KINDS],
}

impl<'m> Mispredicting<'m> {
    fn draw(model: &'m TaskModel, error: f64, rng: &mut ChaCha8Rng) -> Self {
        let factors = std::array::from_fn(|_| 1.0 + error * (2.0 * rng.random::<f64>() - 1.0));
        Mispredicting { model, factors }
    }
}

impl PerformanceModel for Mispredicting<'_> {
    fn predict_ns(&self, kind: KindId, bytes: u64) -> Option<f64> {
        let factor = self.factors[(kind.0 as usize).min(MISPREDICTED_KINDS - 1)];
        self.model.predict_ns(kind, bytes).map(|ns| ns * factor)
    }

    /// The placer only predicts; measurements go to the real model.
    fn observe(&mut self, _kind: KindId, _bytes: u64, _actual_ns: f64) {}
}

/// A task placed on a unit since the views were last published.
#[derive(Clone, Copy, Debug)]
struct Placed {
    client: usize,
    task: usize,
    expected_ns: f64,
}

/// One application instance (a process).
struct Client {
    app: usize,
    report_app: usize,
    alive: bool,
    in_flight: u32,
    /// Tasks it may still issue (short-lived instances), `u64::MAX` otherwise.
    tasks_left: u64,
    data_at: DataLocation,
    placer: Option<Placer>,
    model: usize,
    rng: ChaCha8Rng,
    last_unit: Option<UnitId>,
    issued: u64,
    /// hetsched-pf: the target unit fractions last published to this
    /// client (as stale as its views), and how it follows them.
    pf_target: Option<Vec<f64>>,
    follower: DeficitFollower,
    /// hetsched-pf: the published rate and the client's pacing to it.
    pf_rate: Option<f64>,
    pacer: Pacer,
    /// An `Issue` the pacer asked for is already scheduled.
    pace_pending: bool,
    /// The size of its next task, drawn early for the pacer (the same
    /// draw, in the same order, as when the task is issued unpaced).
    next_bytes: Option<u64>,
    /// Its throughput goal and optimizer, if it has one.
    goal: Option<GoalState>,
}

/// hetsched-pf pacing: rate headroom over the published rate, and the
/// bucket size in tasks per task in flight.
const PACE_HEADROOM: f64 = 0.05;
const PACE_BURST: f64 = 2.0;

/// A task's size, drawn from the client's stream.
fn draw_bytes(dist: BytesDist, rng: &mut ChaCha8Rng) -> u64 {
    match dist {
        BytesDist::Fixed(b) => b,
        BytesDist::Uniform { min, max } => rng.random_range(min..=max),
    }
}

/// Runs `strategy` on `scenario` and returns what was measured.
pub fn run(
    scenario: &Scenario,
    strategy: StrategyKind,
    seed: u64,
    progress: &mut dyn FnMut(f64),
) -> Metrics {
    let mut engine = Engine::new(scenario, strategy, seed);
    engine.run(progress);
    engine.metrics
}

struct Engine<'s> {
    sc: &'s Scenario,
    strategy: StrategyKind,
    seed: u64,
    now: Ns,
    end: Ns,
    seq: u64,
    queue: BinaryHeap<Scheduled>,
    units: Vec<UnitState>,
    clients: Vec<Client>,
    tasks: Vec<Option<Task>>,
    free_tasks: Vec<usize>,
    models: Vec<TaskModel>,
    /// Published views, `[client * units + unit]`, refreshed every tick.
    views: Vec<ClientUnitView>,
    /// What a client that registered since the last refresh sees.
    newcomer_views: Vec<ClientUnitView>,
    /// Per unit, the tasks placed there since the last refresh and not
    /// finished yet: what hetsched's clients add to their views.
    placed_since: Vec<Vec<Placed>>,
    /// Current external utilisation cap per jitter entry.
    jitter_now: Vec<f64>,
    jitter_rng: ChaCha8Rng,
    /// Per app, the model its short-lived instances share.
    short_lived_models: Vec<Option<usize>>,
    /// Instances started per app (seeds each instance's random stream).
    spawn_count: Vec<u64>,
    /// hetsched-pf: the monitor's coordinator.
    coordinator: Option<Coordinator>,
    metrics: Metrics,
}

impl<'s> Engine<'s> {
    fn new(sc: &'s Scenario, strategy: StrategyKind, seed: u64) -> Self {
        let units: Vec<UnitState> = sc
            .machine
            .units
            .iter()
            .zip(&sc.unit_policies)
            .map(|(u, &kind)| (u, strategy.unit_policy(kind)))
            .map(|(u, kind)| UnitState {
                policy: {
                    // Arrival order until the coordinator chooses otherwise.
                    let mut policy = kind.build(u.slots);
                    if matches!(strategy, StrategyKind::HetschedPf(_)) {
                        policy.set_short_first(false);
                    }
                    policy
                },
                slots: u.slots,
                time_shared: kind == hetsched_core::policy::PolicyKind::TimeShare,
                running: Vec::new(),
                epoch: 0,
                last_progress: 0,
                retry_pending: false,
            })
            .collect();
        // What each unit offers the monitor, from the policies just built.
        let coordinator = match strategy {
            StrategyKind::HetschedPf(judge) => Some(judge),
            _ => None,
        }
        .map(|judge| {
            let supply = units
                .iter()
                .map(|u| UnitSupply {
                    slots: f64::from(u.slots),
                    time_shared: u.time_shared,
                    short_first: u.policy.kind() == hetsched_core::policy::PolicyKind::ShortFirst,
                    // The share policy gives each app its entitlement.
                    splits_by_weight: u.policy.kind() == hetsched_core::policy::PolicyKind::Share,
                })
                .collect();
            let defaults = CoordinatorConfig::default();
            let config = CoordinatorConfig {
                replay: judge == PfJudge::Replay,
                full_resolve_period_ns: sc
                    .full_resolve_period_ns
                    .unwrap_or(defaults.full_resolve_period_ns),
                replay_events_per_solve: sc
                    .replay_events_per_solve
                    .unwrap_or(defaults.replay_events_per_solve),
                // A simulated pick costs no simulated time; the daemon's
                // picks in slices do, so a scenario that models them says
                // so.
                pick_slice_events: sc.pick_slice_events.unwrap_or(0),
                ..defaults
            };
            Coordinator::new(config, supply)
        });
        let report_apps = ReportApp::for_scenario(sc);
        let metrics = Metrics::new(sc, report_apps, strategy.name());
        let mut engine = Engine {
            sc,
            strategy,
            seed,
            now: 0,
            end: sc.warmup_ns + sc.duration_ns,
            seq: 0,
            queue: BinaryHeap::new(),
            units,
            clients: Vec::new(),
            tasks: Vec::new(),
            free_tasks: Vec::new(),
            models: Vec::new(),
            views: Vec::new(),
            newcomer_views: vec![ClientUnitView::default(); sc.machine.units.len()],
            placed_since: vec![Vec::new(); sc.machine.units.len()],
            jitter_now: sc.jitter.iter().map(|j| (j.min + j.max) / 2.0).collect(),
            jitter_rng: ChaCha8Rng::seed_from_u64(seed ^ 0x6a17_7e55),
            short_lived_models: vec![None; sc.apps.len()],
            spawn_count: vec![0; sc.apps.len()],
            coordinator,
            metrics,
        };
        for (app, spec) in sc.apps.iter().enumerate() {
            let instances = match spec.short_lived {
                Some(s) => s.concurrent,
                None => spec.copies,
            };
            for k in 0..instances {
                engine.schedule(
                    spec.start_ns,
                    Event::Spawn {
                        app,
                        instance_of: k as usize,
                    },
                );
            }
            if let Some(stop) = spec.stop_ns {
                engine.schedule(stop, Event::Stop { app });
            }
        }
        for index in 0..sc.jitter.len() {
            engine.schedule(0, Event::Jitter { index });
        }
        engine.schedule(0, Event::Tick);
        engine
    }

    fn schedule(&mut self, at: Ns, event: Event) {
        self.seq += 1;
        self.queue.push(Scheduled {
            at,
            seq: self.seq,
            event,
        });
    }

    fn run(&mut self, progress: &mut dyn FnMut(f64)) {
        let step = (self.end / 100).max(1);
        let mut next_report = step;
        while let Some(Scheduled { at, event, .. }) = self.queue.pop() {
            if at > self.end {
                break;
            }
            self.now = at;
            if at >= next_report {
                progress(at as f64 / self.end as f64);
                next_report = at + step;
            }
            match event {
                Event::Issue { client } => self.issue(client),
                Event::Paced { client } => {
                    self.clients[client].pace_pending = false;
                    self.issue(client);
                }
                Event::Arrive { task } => self.arrive(task),
                Event::Finish { unit, epoch } => self.finish(unit, epoch),
                Event::Return { task } => self.task_returned(task),
                Event::Retry { unit } => {
                    self.units[unit].retry_pending = false;
                    self.dispatch(unit);
                }
                Event::Tick => self.tick(),
                Event::Spawn { app, instance_of } => self.spawn(app, instance_of),
                Event::Stop { app } => self.stop(app),
                Event::Jitter { index } => self.jitter(index),
                Event::Optimize { client } => self.optimize(client),
            }
        }
        self.now = self.end;
        for unit in 0..self.units.len() {
            self.progress_time_shared(unit);
        }
        for c in &self.clients {
            if let Some(error) = c.placer.as_ref().and_then(Placer::mean_error) {
                self.metrics.prediction_error(error);
            }
        }
        self.metrics.finish();
        progress(1.0);
    }

    // ---- clients -------------------------------------------------------

    fn spawn(&mut self, app: usize, instance_of: usize) {
        let spec = &self.sc.apps[app];
        let units = self.sc.machine.units.len();
        // Short-lived instances of one app share a persisted model; a
        // long-lived copy builds its own.
        let model = match (spec.short_lived, self.short_lived_models[app]) {
            (Some(_), Some(m)) => m,
            _ => {
                let mut model = TaskModel::new(&spec.name, self.sc.machine.kinds.len());
                if spec.pretrained {
                    // What a model persisted by an earlier run would hold.
                    let (lo, hi) = spec.bytes.range();
                    for unit in &self.sc.machine.units {
                        for bytes in [lo, hi] {
                            if let Some(ns) = spec.exec_ns(unit.id, bytes) {
                                model.observe(unit.kind, bytes, ns);
                            }
                        }
                    }
                }
                self.models.push(model);
                let m = self.models.len() - 1;
                if spec.short_lived.is_some() {
                    self.short_lived_models[app] = Some(m);
                }
                m
            }
        };
        let id = self.clients.len();
        let report_app = self.metrics.report_app_of(app, instance_of);
        self.spawn_count[app] += 1;
        let stream = self.seed
            ^ ((app as u64 + 1) << 40)
            ^ ((instance_of as u64 + 1) << 20)
            ^ self.spawn_count[app];
        self.clients.push(Client {
            app,
            report_app,
            alive: true,
            in_flight: 0,
            tasks_left: spec.short_lived.map_or(u64::MAX, |s| s.tasks as u64),
            data_at: DataLocation::Host,
            placer: self.strategy.placer(units),
            model,
            rng: ChaCha8Rng::seed_from_u64(stream),
            last_unit: None,
            issued: 0,
            pf_target: None,
            follower: DeficitFollower::new(),
            pf_rate: None,
            pacer: Pacer::new(),
            pace_pending: false,
            next_bytes: None,
            goal: spec
                .throughput_goal
                .map(|g| GoalState::new(g, self.strategy.runs_optimizer())),
        });
        for (u, state) in self.units.iter_mut().enumerate() {
            // Settings were validated when the scenario was parsed.
            let _ = state
                .policy
                .set_client(ClientId(id as u32), spec.settings[u], self.now);
        }
        self.views.extend_from_slice(&self.newcomer_views);
        if self.clients[id].goal.is_some() {
            self.schedule(self.now + goals::PERIOD_NS, Event::Optimize { client: id });
        }
        self.issue(id);
    }

    fn stop(&mut self, app: usize) {
        for c in self.clients.iter_mut().filter(|c| c.app == app) {
            c.alive = false;
        }
    }

    /// Retires a client whose last task returned.
    fn retire(&mut self, client: usize) {
        let app = self.clients[client].app;
        for u in 0..self.units.len() {
            self.units[u]
                .policy
                .remove_client(ClientId(client as u32), self.now);
        }
        if let Some(s) = self.sc.apps[app].short_lived
            && self.sc.apps[app].stop_ns.is_none_or(|stop| self.now < stop)
        {
            self.schedule(
                self.now + s.gap_ns,
                Event::Spawn {
                    app,
                    instance_of: 0,
                },
            );
        }
    }

    fn issue(&mut self, client: usize) {
        let app = self.clients[client].app;
        let spec = &self.sc.apps[app];
        while self.clients[client].alive
            && self.clients[client].tasks_left > 0
            && self.clients[client].in_flight < spec.in_flight
        {
            let c = &mut self.clients[client];
            if let Some(rate) = c.pf_rate {
                let burst = spec.in_flight as f64 * PACE_BURST;
                let bytes = *c
                    .next_bytes
                    .get_or_insert_with(|| draw_bytes(spec.bytes, &mut c.rng));
                let work = spec.nominal_work(bytes);
                let paced = rate * (1.0 + PACE_HEADROOM);
                if let Err(at) = c.pacer.take_work(self.now, paced, burst, work) {
                    if !c.pace_pending {
                        c.pace_pending = true;
                        self.schedule(at, Event::Paced { client });
                    }
                    break;
                }
            }
            self.issue_one(client, spec);
        }
    }

    fn issue_one(&mut self, client: usize, spec: &App) {
        let units = &self.sc.machine.units;
        let c = &mut self.clients[client];
        let bytes = match c.next_bytes.take() {
            Some(b) => b,
            None => draw_bytes(spec.bytes, &mut c.rng),
        };
        let noise = self.sc.noise * 3f64.sqrt() * (2.0 * c.rng.random::<f64>() - 1.0);
        let implemented = spec
            .exec_ns
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_some())
            .fold(ImplSet::default(), |s, (i, _)| s.with(UnitId(i as u16)));
        let (spreading, work_factor) = c
            .goal
            .as_ref()
            .map_or((false, 1.0), |g| (g.spreading, g.work_factor));
        let request = TaskRequest {
            bytes,
            out_bytes: spec.out_bytes(bytes),
            data_at: c.data_at,
            persistent: spec.persistent_data,
            implemented,
            // The optimizer's first rung: latencies overlap across units.
            goal: if spreading {
                Goal::MaxThroughput
            } else {
                spec.goal
            },
        };
        let (unit, predicted_ns) = self.place(client, &request);
        let c = &mut self.clients[client];
        let exec = spec
            .exec_ns(unit, bytes)
            .expect("placement picked an implemented unit");
        let service_ns = (exec * work_factor * (1.0 + noise)).max(1.0);
        let expected_ns = self.models[c.model]
            .predict_ns(units[unit.index()].kind, bytes)
            .unwrap_or(service_ns);
        let unit_spec = &units[unit.index()];
        let copy_in = hetsched_core::placement::copy_to_unit_ns(units, unit_spec, bytes, c.data_at);
        if spec.persistent_data {
            c.data_at = if unit_spec.coherent {
                DataLocation::Host
            } else {
                DataLocation::Unit(unit)
            };
        }
        c.in_flight += 1;
        c.tasks_left -= 1;
        c.issued += 1;
        let changed = c.last_unit.is_some_and(|u| u != unit);
        c.last_unit = Some(unit);
        let issued = c.issued;
        let report_app = c.report_app;
        self.metrics
            .issued(report_app, unit, changed, issued, self.now);
        let task = Task {
            client,
            unit,
            bytes,
            remaining_ns: service_ns,
            service_ns,
            issued_at: self.now,
            started_at: None,
            finish_at: 0,
            predicted_ns,
            expected_ns,
        };
        let id = match self.free_tasks.pop() {
            Some(i) => {
                self.tasks[i] = Some(task);
                i
            }
            None => {
                self.tasks.push(Some(task));
                self.tasks.len() - 1
            }
        };
        self.placed_since[unit.index()].push(Placed {
            client,
            task: id,
            expected_ns,
        });
        let delay = unit_spec.dispatch_ns as f64 + copy_in;
        self.schedule(self.now + delay.round() as Ns, Event::Arrive { task: id });
    }

    /// The strategy's choice of unit, and the turnaround it predicted (NaN if none).
    fn place(&mut self, client: usize, request: &TaskRequest) -> (UnitId, f64) {
        let units = &self.sc.machine.units;
        let spec = &self.sc.apps[self.clients[client].app];
        match self.strategy {
            StrategyKind::Native => (spec.fastest_unit(), f64::NAN),
            StrategyKind::StarpuEager => {
                let choices: Vec<UnitId> = units
                    .iter()
                    .map(|u| u.id)
                    .filter(|u| request.implemented.contains(*u))
                    .collect();
                let pick = self.clients[client].rng.random_range(0..choices.len());
                (choices[pick], f64::NAN)
            }
            StrategyKind::AsymAware => {
                let mut by_speed: Vec<UnitId> = units
                    .iter()
                    .map(|u| u.id)
                    .filter(|u| request.implemented.contains(*u))
                    .collect();
                by_speed.sort_by(|a, b| {
                    spec.exec_ns[a.index()]
                        .partial_cmp(&spec.exec_ns[b.index()])
                        .unwrap_or(Ordering::Equal)
                });
                let idle = by_speed.iter().copied().find(|u| {
                    let s = &self.units[u.index()];
                    (s.running.len() + s.policy.queued()) < s.slots as usize
                });
                let fallback = by_speed
                    .iter()
                    .copied()
                    .max_by_key(|u| units[u.index()].slots)
                    .unwrap_or(by_speed[0]);
                (idle.unwrap_or(fallback), f64::NAN)
            }
            StrategyKind::HetschedPf(_)
                if let Some(unit) = {
                    let c = &mut self.clients[client];
                    match c.pf_target.as_deref() {
                        Some(target) => c
                            .follower
                            .pick(target, |u| request.implemented.contains(UnitId(u as u16))),
                        None => None,
                    }
                } =>
            {
                (UnitId(unit as u16), f64::NAN)
            }
            StrategyKind::Hetsched(_)
            | StrategyKind::HetschedPf(_)
            | StrategyKind::CSched
            | StrategyKind::StarpuDmda => {
                // Every strategy's views are built per decision: hetsched's
                // from the last publish and the work placed since.
                let views: Cow<[ClientUnitView]> = match self.strategy {
                    StrategyKind::Hetsched(_) | StrategyKind::HetschedPf(_) => {
                        Cow::Owned(self.published_views(client))
                    }
                    StrategyKind::CSched => Cow::Owned(self.exact_views(client)),
                    _ => Cow::Owned(self.own_queue_views(client)),
                };
                let c = &mut self.clients[client];
                let placer = c.placer.as_mut().expect("placer strategies carry a placer");
                let model = &self.models[c.model];
                let decided = if self.sc.model_error > 0.0 {
                    let wrong = Mispredicting::draw(model, self.sc.model_error, &mut c.rng);
                    placer.decide(units, &views, &wrong, request)
                } else {
                    placer.decide(units, &views, model, request)
                };
                match decided {
                    Ok(d) => (d.unit, d.predicted_ns),
                    // Validation guarantees an implementation; fall back to the fastest.
                    Err(_) => (spec.fastest_unit(), f64::NAN),
                }
            }
        }
    }

    /// hetsched: the views published to `client` at the last refresh, with
    /// the work other clients placed on each unit since counted in.
    fn published_views(&self, client: usize) -> Vec<ClientUnitView> {
        let n = self.units.len();
        let published = &self.views[client * n..(client + 1) * n];
        if !self.strategy.counts_placed_since() {
            return published.to_vec();
        }
        published
            .iter()
            .zip(&self.placed_since)
            .zip(&self.units)
            .map(|((view, placed), unit)| {
                let mut others = PlacedSincePublish::default();
                for p in placed.iter().filter(|p| p.client != client) {
                    others.add(p.expected_ns);
                }
                view.brought_forward(others, unit.slots)
            })
            .collect()
    }

    /// c-sched: exact queue contents of every unit, right now.
    fn exact_views(&self, client: usize) -> Vec<ClientUnitView> {
        let mut views = Vec::with_capacity(self.units.len());
        for (u, state) in self.units.iter().enumerate() {
            let mut v = ClientUnitView::default();
            if state.time_shared {
                let n = self.tasks_at(u, |_| true) as f64;
                v.guaranteed = (state.slots as f64 / (n + 1.0)).min(1.0);
                v.wait_ns = f64::INFINITY;
            } else {
                v.wait_ns = self.backlog_ns(u, |_| true) / state.slots as f64;
            }
            v.max_utilisation = self.jitter_cap(client, u);
            views.push(v);
        }
        views
    }

    /// dmda: only the client's own tasks count.
    fn own_queue_views(&self, client: usize) -> Vec<ClientUnitView> {
        (0..self.units.len())
            .map(|u| ClientUnitView {
                wait_ns: self.backlog_ns(u, |t| t.client == client) / self.units[u].slots as f64,
                ..ClientUnitView::default()
            })
            .collect()
    }

    /// Expected work still ahead on a unit from tasks matching `filter`
    /// (queued, running, or on their way after dispatch).
    fn backlog_ns(&self, unit: usize, filter: impl Fn(&Task) -> bool) -> f64 {
        self.tasks
            .iter()
            .flatten()
            .filter(|t| t.unit.index() == unit && filter(t))
            .map(|t| match t.started_at {
                Some(start) => (t.expected_ns - (self.now - start) as f64).max(0.0),
                None => t.expected_ns,
            })
            .sum()
    }

    fn tasks_at(&self, unit: usize, filter: impl Fn(&Task) -> bool) -> usize {
        self.tasks
            .iter()
            .flatten()
            .filter(|t| t.unit.index() == unit && filter(t))
            .count()
    }

    fn jitter_cap(&self, client: usize, unit: usize) -> f64 {
        let app = self.clients[client].app;
        self.sc
            .jitter
            .iter()
            .zip(&self.jitter_now)
            .filter(|(j, _)| j.app == app && j.unit.index() == unit)
            .map(|(_, f)| *f)
            .fold(1.0, f64::min)
    }

    /// An optimizer period of `client` ends: measure, step, and ask the
    /// units for the CUSTOM shares it wants (or its starting class back).
    fn optimize(&mut self, client: usize) {
        let c = &mut self.clients[client];
        if !c.alive || c.tasks_left == 0 {
            return;
        }
        let (app, report_app) = (c.app, c.report_app);
        let Some(goal) = c.goal.as_mut() else {
            return;
        };
        let end = goal.period_end(goals::PERIOD_NS);
        let target = goal.target();
        let stand = GoalStand {
            shares: goal.shares(),
            work_factor: goal.work_factor,
        };
        self.metrics
            .goal_period(report_app, self.now, end.achieved, target, stand);
        if let Action::SetShares(shares) = end.action {
            let spec = &self.sc.apps[app];
            let mut refused = false;
            for (u, state) in self.units.iter_mut().enumerate() {
                if state.time_shared || spec.exec_ns[u].is_none() {
                    continue;
                }
                let settings = match shares {
                    Some(n) => ClientSettings {
                        class: ShareClass::Custom { shares: n },
                        ..spec.settings[u]
                    },
                    None => spec.settings[u],
                };
                refused |= state
                    .policy
                    .set_client(ClientId(client as u32), settings, self.now)
                    .is_err();
            }
            if refused && let Some(g) = self.clients[client].goal.as_mut() {
                g.shares_refused();
            }
        }
        self.schedule(self.now + goals::PERIOD_NS, Event::Optimize { client });
    }

    // ---- units ---------------------------------------------------------

    fn arrive(&mut self, task: usize) {
        let t = self.tasks[task].as_ref().expect("arriving task exists");
        let unit = t.unit.index();
        let request = Request {
            client: ClientId(t.client as u32),
            task: TaskId(task as u64),
            expected_ns: t.expected_ns,
            submitted_at: self.now,
        };
        self.units[unit].policy.submit(request, self.now);
        self.dispatch(unit);
    }

    /// Starts whatever the unit's policy lets run.
    fn dispatch(&mut self, unit: usize) {
        self.progress_time_shared(unit);
        let mut started = false;
        loop {
            let state = &self.units[unit];
            if !state.time_shared && state.running.len() >= state.slots as usize {
                break;
            }
            let Some(request) = self.units[unit].policy.pick_next(self.now) else {
                break;
            };
            let id = request.task.0 as usize;
            let cap = self.jitter_cap(request.client.0 as usize, unit);
            let now = self.now;
            let t = self.tasks[id].as_mut().expect("picked task exists");
            t.started_at = Some(now);
            // External load stretches the task as if the app got only `cap` of the unit.
            t.remaining_ns = t.service_ns / cap;
            t.finish_at = now + t.remaining_ns.round() as Ns;
            let at = t.finish_at;
            self.units[unit].running.push(id);
            started = true;
            if !self.units[unit].time_shared {
                let epoch = self.units[unit].epoch;
                self.schedule(at, Event::Finish { unit, epoch });
            }
        }
        if started && self.units[unit].time_shared {
            self.reschedule_time_shared(unit);
        }
        let state = &self.units[unit];
        if state.policy.queued() > 0 && !state.retry_pending {
            if let Some(at) = state.policy.retry_at(self.now) {
                self.units[unit].retry_pending = true;
                self.schedule(at.max(self.now + 1), Event::Retry { unit });
            }
        }
    }

    fn share_rate(&self, unit: usize) -> f64 {
        let s = &self.units[unit];
        (s.slots as f64 / s.running.len().max(1) as f64).min(1.0)
    }

    /// Advances the work of every task on a time-shared unit to `now`.
    fn progress_time_shared(&mut self, unit: usize) {
        let state = &self.units[unit];
        if !state.time_shared {
            return;
        }
        let elapsed = (self.now - state.last_progress) as f64;
        let rate = self.share_rate(unit);
        let start = self.units[unit].last_progress;
        for i in 0..self.units[unit].running.len() {
            let id = self.units[unit].running[i];
            let t = self.tasks[id].as_mut().expect("running task exists");
            t.remaining_ns -= elapsed * rate;
            let report_app = self.clients[t.client].report_app;
            self.metrics.busy(
                report_app,
                unit,
                start,
                self.now,
                rate / self.units[unit].slots as f64,
            );
        }
        self.units[unit].last_progress = self.now;
    }

    fn reschedule_time_shared(&mut self, unit: usize) {
        let rate = self.share_rate(unit);
        let next = self.units[unit]
            .running
            .iter()
            .map(|&id| self.tasks[id].as_ref().expect("running task").remaining_ns)
            .fold(f64::INFINITY, f64::min);
        self.units[unit].epoch += 1;
        if next.is_finite() {
            let at = self.now + (next.max(0.0) / rate).ceil() as Ns;
            let epoch = self.units[unit].epoch;
            self.schedule(at, Event::Finish { unit, epoch });
        }
    }

    fn finish(&mut self, unit: usize, epoch: u64) {
        if self.units[unit].time_shared {
            if epoch != self.units[unit].epoch {
                return;
            }
            self.progress_time_shared(unit);
            let done: Vec<usize> = self.units[unit]
                .running
                .iter()
                .copied()
                .filter(|&id| self.tasks[id].as_ref().expect("running task").remaining_ns <= 0.5)
                .collect();
            for id in done {
                self.complete(unit, id);
            }
            self.reschedule_time_shared(unit);
        } else {
            // Queued units: the earliest-started task that has run its time.
            let now = self.now;
            let done = self.units[unit]
                .running
                .iter()
                .copied()
                .find(|&id| self.tasks[id].as_ref().expect("running task").finish_at <= now);
            if let Some(id) = done {
                let t = self.tasks[id].as_ref().expect("running task");
                let report_app = self.clients[t.client].report_app;
                let start = t.started_at.unwrap_or(now);
                self.metrics.busy(
                    report_app,
                    unit,
                    start,
                    now,
                    1.0 / self.units[unit].slots as f64,
                );
                self.complete(unit, id);
            }
        }
        self.dispatch(unit);
    }

    fn complete(&mut self, unit: usize, id: usize) {
        self.units[unit].running.retain(|&r| r != id);
        self.placed_since[unit].retain(|p| p.task != id);
        let t = self.tasks[id].as_ref().expect("completing task");
        let client = t.client;
        let ran = self.now.saturating_sub(t.started_at.unwrap_or(self.now));
        self.units[unit]
            .policy
            .complete(ClientId(client as u32), ran, self.now);
        // The runtime measures the task's own execution (thread CPU time on
        // a shared CPU, kernel time on a device) and scales out the share of
        // the unit its view said it had, so the model stays a standalone
        // model and `exec / utilisation` does not count contention twice.
        let measured = if self.units[unit].time_shared {
            t.service_ns
        } else {
            ran as f64 * self.jitter_cap(client, unit)
        };
        let kind = self.sc.machine.units[unit].kind;
        let model = self.clients[client].model;
        self.models[model].observe(kind, t.bytes, measured);
        let unit_spec = &self.sc.machine.units[unit];
        let spec = &self.sc.apps[self.clients[client].app];
        let out = unit_spec.copy_out_ns(spec.out_bytes(t.bytes));
        self.schedule(self.now + out.round() as Ns, Event::Return { task: id });
    }

    fn task_returned(&mut self, id: usize) {
        let t = self.tasks[id].take().expect("returning task");
        self.free_tasks.push(id);
        let turnaround = (self.now - t.issued_at) as f64;
        let c = &mut self.clients[t.client];
        if let Some(placer) = c.placer.as_mut() {
            placer.observe(t.unit, t.predicted_ns, turnaround);
        }
        c.in_flight -= 1;
        if let Some(g) = c.goal.as_mut() {
            g.task_done();
        }
        let report_app = c.report_app;
        let spec = &self.sc.apps[c.app];
        let task = CompletedTask {
            issued_at: t.issued_at,
            started_at: t.started_at.unwrap_or(t.issued_at),
            unit: t.unit,
            work: spec.nominal_work(t.bytes),
        };
        self.metrics.completed(report_app, task, self.now);
        let c = &self.clients[t.client];
        if c.in_flight == 0 && (c.tasks_left == 0 || !c.alive) {
            self.retire(t.client);
        } else {
            self.schedule(self.now, Event::Issue { client: t.client });
        }
    }

    // ---- agents --------------------------------------------------------

    fn tick(&mut self) {
        for u in 0..self.units.len() {
            self.progress_time_shared(u);
            self.units[u].policy.tick(self.now);
        }
        for u in 0..self.units.len() {
            self.dispatch(u);
        }
        self.publish_views();
        self.coordinate();
        let next = self.now + self.sc.refresh_ns;
        self.schedule(next, Event::Tick);
    }

    fn publish_views(&mut self) {
        let n = self.units.len();
        // A client id that never registered: what a newcomer would be told.
        let newcomer = ClientId(u32::MAX);
        for placed in &mut self.placed_since {
            placed.clear();
        }

        for u in 0..n {
            self.newcomer_views[u] = self.units[u].policy.client_view(newcomer, self.now);
        }
        for c in 0..self.clients.len() {
            if !self.clients[c].alive && self.clients[c].in_flight == 0 {
                continue;
            }
            for u in 0..n {
                let mut v = self.units[u]
                    .policy
                    .client_view(ClientId(c as u32), self.now);
                v.max_utilisation = v.max_utilisation.min(self.jitter_cap(c, u));
                self.views[c * n + u] = v;
            }
        }
    }

    /// hetsched-pf: the monitor updates every client's measured demand,
    /// re-solves when apps came or went or models drifted, and publishes
    /// the targets with the views (clients see them until the next tick).
    fn coordinate(&mut self) {
        let Some(mut coordinator) = self.coordinator.take() else {
            return;
        };
        let units = &self.sc.machine.units;
        // Weights come from every present app's class and shares together
        // (a CUSTOM percentage weighs against the others), as the daemon
        // weighs them; an app with a priority, which the daemon leaves to
        // its agents, is coordinated here with weight 1.
        let present: Vec<usize> = (0..self.clients.len())
            .filter(|&c| self.clients[c].alive && self.clients[c].tasks_left > 0)
            .collect();
        let settings: Vec<&[ClientSettings]> = present
            .iter()
            .map(|&c| self.sc.apps[self.clients[c].app].settings.as_slice())
            .collect();
        let mut weight = vec![1.0; self.clients.len()];
        for (&c, w) in present.iter().zip(coordination_weights(&settings)) {
            weight[c] = w.unwrap_or(1.0);
        }
        for (c, client) in self.clients.iter().enumerate() {
            let id = ClientId(c as u32);
            if !client.alive || client.tasks_left == 0 {
                coordinator.remove_app(id);
                continue;
            }
            let spec = &self.sc.apps[client.app];
            let bytes = spec.bytes.mean() as u64;
            let model = &self.models[client.model];
            let exec_ns: Vec<Option<f64>> = units
                .iter()
                .map(|u| {
                    spec.exec_ns[u.id.index()]
                        .and_then(|_| model.predict_ns(u.kind, bytes))
                        .filter(|e| *e > 0.0)
                })
                .collect();
            // Still profiling: plain placement until every implemented unit is measured.
            let profiled = exec_ns
                .iter()
                .zip(&spec.exec_ns)
                .all(|(m, s)| m.is_some() || s.is_none());
            if !profiled {
                continue;
            }
            // What each unit's figure rests on: the executions its kind's
            // model learned from.
            let exec_samples = units
                .iter()
                .map(|u| model.kind(u.kind).map_or(0, |m| m.fit().samples()))
                .collect();
            let overhead_ns = units
                .iter()
                .map(|u| {
                    u.dispatch_ns as f64
                        + if spec.persistent_data {
                            0.0
                        } else {
                            u.copy_in_ns(bytes) + u.copy_out_ns(spec.out_bytes(bytes))
                        }
                })
                .collect();
            coordinator.set_app(
                id,
                AppDemand {
                    exec_ns,
                    overhead_ns,
                    in_flight: spec.in_flight as f64,
                    weight: weight[c],
                    // Native, in the simulator, is the app's fastest unit:
                    // the app knows it, as a real one knows its default device.
                    declared_native: Some(spec.fastest_unit().index()),
                    native_trusted: false,
                    native_in_flight: None,
                    exec_samples,
                },
            );
        }
        // The simulator's one look at the host's clock: how long the
        // coordinator takes for each update that computes (a whole solve,
        // or one slice of a pick), as the daemon would spend it.
        let slices = coordinator.slices();
        let started = std::time::Instant::now();
        let solved = coordinator.update(self.now);
        if coordinator.slices() != slices {
            let wall_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.metrics.solved(wall_ns);
        }
        // The largest move of any client's targets, for the convergence metric.
        let mut change: f64 = 0.0;
        for (c, client) in self.clients.iter_mut().enumerate() {
            let target = coordinator.target(ClientId(c as u32)).map(<[f64]>::to_vec);
            change = change.max(match (&client.pf_target, &target) {
                (Some(old), Some(new)) => crate::convergence::total_variation(old, new),
                (None, None) => 0.0,
                _ => 1.0,
            });
            client.pf_target = target;
            client.pf_rate = coordinator.rate(ClientId(c as u32));
        }
        if solved {
            // The units' agents take the queue order the solve chose, and
            // learn which clients the coordinator places (a share agent
            // pools them).
            for (u, unit) in self.units.iter_mut().enumerate() {
                unit.policy.set_short_first(coordinator.short_first(u));
                for c in 0..self.clients.len() {
                    let id = ClientId(c as u32);
                    unit.policy
                        .set_coordinated(id, coordinator.target(id).is_some());
                }
            }
            self.metrics.targets_published(self.now, change);
        } else {
            self.metrics.coordinated();
        }
        self.coordinator = Some(coordinator);
    }

    fn jitter(&mut self, index: usize) {
        let j = self.sc.jitter[index];
        self.jitter_now[index] = self.jitter_rng.random_range(j.min..=j.max);
        self.schedule(self.now + j.period_ns, Event::Jitter { index });
    }
}
