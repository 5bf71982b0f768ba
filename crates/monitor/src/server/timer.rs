//! The timer thread: ends emulated device work on time, runs the agents'
//! 10 ms accounting, publishes both view pages (with the CPU agent's and
//! the coordinator's latest results), publishes the `/metrics` snapshot
//! once a second while it is served, drops stored settings of processes
//! that exited and records the descendants of processes with stored
//! settings (reading /proc with no lock held). It sleeps on
//! the doorbell until the earliest of those deadlines, or until another
//! thread says new work may have moved it.

use crate::coordination_results::CoordinationResults;
use crate::cpu_figures::CpuFigures;
use crate::outbox::Outbox;
use crate::page_rounds::PageRounds;
use crate::procfs;
use crate::server::OpenRing;
use crate::server::{Shared, State};
use hetsched_core::ids::{ClientId, Ns, TaskId, UnitId};
use hetsched_protocol::kernel_call::{KernelCall, Packet};
use hetsched_protocol::{DaemonMsg, ErrorCode, kernel_call};
use hetsched_views::GlobalUnit;
use hetsched_views::data_region::DataRegion;
use std::sync::Arc;
use std::time::Duration;

/// How often stored settings of exited processes are dropped, and the
/// live descendants of processes with stored settings get a copy of them
/// (`monitor::lineage`).
const STORE_GC_EVERY: Duration = Duration::from_secs(1);

/// How often call rings are polled while any exist but none has had a
/// call lately (Pegasus's pollers): a call waits at most this long before
/// its unit's policy sees it.
const RING_POLL_IDLE: Duration = Duration::from_micros(500);
/// How often they are polled while calls keep coming: a client that
/// pushes one call at a time would otherwise wait half the idle period
/// per call on average (measured: ~200 µs of a 4 KiB histogram's 320 µs
/// through the daemon, docs/PERFORMANCE.md).
const RING_POLL_BUSY: Duration = Duration::from_micros(50);
/// How long after the last call polling stays fast.
const RING_BUSY_FOR: Duration = Duration::from_millis(20);

pub(crate) fn run(shared: &Shared) {
    let tick = shared.setup.tick.as_nanos() as Ns;
    let gc_every = STORE_GC_EVERY.as_nanos() as Ns;
    let mut next_tick = shared.now() + tick;
    let mut next_gc = shared.now() + gc_every;
    let metrics_every = crate::metrics::PUBLISH_EVERY.as_nanos() as Ns;
    let mut next_metrics = shared.now() + metrics_every;
    let mut out = Outbox::default();
    let (poll_idle, poll_busy) = (
        RING_POLL_IDLE.as_nanos() as Ns,
        RING_POLL_BUSY.as_nanos() as Ns,
    );
    let busy_for = RING_BUSY_FOR.as_nanos() as Ns;
    let mut last_call: Option<Ns> = None;
    let mut shown = Shown::latest(shared);
    let mut state = shared.lock();
    loop {
        if shared.stop.is_stopped() {
            return;
        }
        // Parked before the rings are drained: a call pushed after this
        // look rings the bell, and the sleep below returns at once.
        let seen = shared.doorbell.park();
        let now = shared.now();
        let rings = drain_rings(&mut state, now, &mut out);
        if rings.calls > 0 {
            last_call = Some(now);
        }
        state.monitor.advance(now, &mut out);
        if now >= next_tick {
            state.monitor.tick(now, &mut out);
            publish(shared, &mut state, &mut shown, now);
            next_tick += tick;
            if next_tick <= now {
                next_tick = now + tick;
            }
        }
        if shared.metrics_on && now >= next_metrics {
            crate::metrics::publish(
                &shared.metrics,
                &shared.coordination,
                &mut state.monitor,
                now,
            );
            next_metrics = now + metrics_every;
        }
        if now >= next_gc {
            // Which stored processes are gone, and which processes live,
            // are read from /proc with the lock released.
            let stored = state.monitor.stored_processes();
            drop(state);
            let table = if stored.is_empty() {
                Vec::new()
            } else {
                procfs::process_table()
            };
            let gone: std::collections::BTreeSet<_> =
                stored.into_iter().filter(|k| !procfs::alive(*k)).collect();
            state = shared.lock();
            state.monitor.forget_processes(&gone);
            state.monitor.adopt_descendants(&table);
            shared.save_store(&mut state);
            next_gc = now + gc_every;
        }
        shared.deliver(&mut state, &mut out);
        let mut deadline = state
            .monitor
            .next_deadline(now)
            .map_or(next_tick, |d| d.min(next_tick))
            .min(next_gc);
        if shared.metrics_on {
            deadline = deadline.min(next_metrics);
        }
        if rings.open {
            let busy = last_call.is_some_and(|t| now.saturating_sub(t) < busy_for);
            deadline = deadline.min(now + if busy { poll_busy } else { poll_idle });
        }
        let wait = Duration::from_nanos(deadline.saturating_sub(shared.now()));
        if wait.is_zero() {
            shared.doorbell.unpark();
        } else {
            drop(state);
            shared.doorbell.sleep(seen, wait);
            state = shared.lock();
        }
    }
}

/// Moves calls from every client's rings into the units' policies, as if
/// each had come as `SubmitDevice`. A client with as many requests
/// outstanding as the daemon allows keeps the rest in its ring (back-
/// pressure: it cannot crowd out others, and the daemon's memory for it
/// stays bounded). A call the monitor refuses (too long, unknown unit)
/// is dropped with an `Error` naming it; a ring whose producer broke the
/// protocol is closed with `CallRingCorrupt`.
fn drain_rings(state: &mut State, now: Ns, out: &mut Outbox) -> RingsPolled {
    let mut polled = RingsPolled::default();
    let State {
        monitor,
        conns,
        ring_holders,
        ..
    } = state;
    // Only clients with rings: thousands of others cost nothing here.
    ring_holders.retain(|id| conns.get(id).is_some_and(|c| !c.rings.is_empty()));
    for &id in ring_holders.iter() {
        let Some(conn) = conns.get_mut(&id).filter(|c| !c.cut_off) else {
            continue;
        };
        conn.rings.retain_mut(|OpenRing { unit, ring, region }| {
            loop {
                let packet = match ring.peek() {
                    Ok(Some(p)) => p,
                    Ok(None) => return true,
                    Err(e) => {
                        // Its bookkeeping cannot be trusted any more: the ring
                        // goes, with what was queued in it.
                        out.push(
                            id,
                            DaemonMsg::Error {
                                code: ErrorCode::CallRingCorrupt,
                                message: format!(
                                    "call ring on unit {}: {e}; it is closed, open a new one",
                                    unit.0
                                ),
                                task: None,
                            },
                        );
                        return false;
                    }
                };
                let task = TaskId(packet.0[0]);
                let submitted = match region {
                    Some(region) => {
                        match checked_kernel_call(monitor, id, *unit, &packet.0, region) {
                            Ok(call) => {
                                monitor.submit_kernel(id, *unit, call, Arc::clone(region), now, out)
                            }
                            Err(e) => Err((
                                ErrorCode::BadKernelCall,
                                format!("kernel call {} refused: {e}", task.0),
                            )),
                        }
                    }
                    None => {
                        let [_, exec_ns, bytes_in, bytes_out, ..] = packet.0;
                        monitor
                            .submit_device(id, *unit, task, exec_ns, bytes_in, bytes_out, now, out)
                    }
                };
                match submitted {
                    Ok(()) => {}
                    Err((ErrorCode::TooManyOutstanding, _)) => return true,
                    Err((code, message)) => out.push(
                        id,
                        DaemonMsg::Error {
                            code,
                            message,
                            task: Some(task),
                        },
                    ),
                }
                let _ = ring.pop();
                polled.calls += 1;
            }
        });
        polled.open |= !conn.rings.is_empty();
    }
    polled
}

/// Decodes a kernel ring's packet against the client's `region`. For a
/// registered kernel, its argument block is copied out of the region once
/// and checked against the kernel's signature: what runs is that copy,
/// whatever the client writes to the region afterwards.
fn checked_kernel_call(
    monitor: &crate::monitor::Monitor,
    client: ClientId,
    unit: UnitId,
    words: &[u64; 7],
    region: &DataRegion,
) -> Result<KernelCall, String> {
    match kernel_call::decode_packet(words, region.size()).map_err(|e| e.to_string())? {
        Packet::Builtin(call) => Ok(call),
        Packet::User(packet) => {
            let signature = monitor
                .user_kernel_signature(client, unit, packet.kernel)
                .map_err(|e| e.to_string())?;
            let mut block = vec![0u8; (packet.args.end - packet.args.start) as usize];
            region
                .read(packet.args.start, &mut block)
                .map_err(|e| e.to_string())?;
            packet
                .bind(&signature, &block, region.size())
                .map_err(|e| e.to_string())
        }
    }
}

/// What one pass over the rings found.
#[derive(Debug, Default)]
struct RingsPolled {
    /// Some ring exists (so the timer keeps polling).
    open: bool,
    /// Calls taken out of rings (refused ones included).
    calls: u32,
}

/// The other threads' results the pages show now.
struct Shown {
    cpu: Arc<CpuFigures>,
    coordination: Arc<CoordinationResults>,
}

impl Shown {
    fn latest(shared: &Shared) -> Shown {
        Shown {
            cpu: shared.cpu_figures.get(),
            coordination: shared.coordination.get(),
        }
    }

    /// Moves to `latest`, having the pages of the clients whose hint or
    /// targets differ from what they show rewritten in the next round.
    fn update(&mut self, latest: Shown, pages: &mut PageRounds) {
        if !Arc::ptr_eq(&latest.cpu, &self.cpu) {
            pages.force_changed(&self.cpu.exclusive, &latest.cpu.exclusive);
        }
        if !Arc::ptr_eq(&latest.coordination, &self.coordination) {
            pages.force_changed(&self.coordination.targets, &latest.coordination.targets);
        }
        *self = latest;
    }
}

/// Publishes both pages of views.
fn publish(shared: &Shared, state: &mut State, shown: &mut Shown, now: Ns) {
    shown.update(Shown::latest(shared), &mut state.pages);
    let units: Vec<GlobalUnit> = state
        .monitor
        .unit_publications(now)
        .into_iter()
        .map(|p| GlobalUnit {
            view: p.view,
            queued_by_class: p.queued_by_class,
            busy_ns_total: p.busy_ns_total,
        })
        .collect();
    let _ = state.global.publish(now, &units, &shown.cpu.kinds);
    let zeros = vec![0u32; shared.cpu_unit_slots.len()];
    let (exclusive, targets) = (&shown.cpu.exclusive, &shown.coordination.targets);
    let State {
        monitor,
        pages,
        conns,
        ..
    } = state;
    for update in pages.round(monitor, now) {
        let id = update.client;
        if let Some(p) = conns.get_mut(&id).and_then(|c| c.private.as_mut()) {
            let excl = exclusive.get(&id).unwrap_or(&zeros);
            let _ = p.publish_with_targets(now, id.0, &update.views, excl, targets.get(&id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DaemonConfig;
    use crate::monitor::Monitor;
    use crate::privilege::Peer;
    use hetsched_protocol::Role;
    use hetsched_views::Targets;
    use std::collections::BTreeMap;

    /// A monitor over one emulated unit with `n` applications, their
    /// pages written once and settled (a round with nothing new).
    fn settled(n: u32) -> (Monitor, PageRounds, Vec<ClientId>) {
        let text =
            "include_cpus = false\n[[emulated]]\nname = \"gpu0\"\nspeed = 1.0\ncopy_gbps = 10.0\n";
        let cfg = DaemonConfig::parse(std::path::Path::new("t.toml"), text).unwrap();
        let (setup, _) = crate::launch::prepare(&cfg).unwrap();
        let mut m = Monitor::new(setup.units, setup.monitor, Default::default());
        let mut pages = PageRounds::default();
        let ids = (0..n)
            .map(|pid| {
                let peer = Peer {
                    pid: 100 + pid,
                    uid: 0,
                    gid: 0,
                    groups: vec![],
                    start_time: 1,
                    ancestors: vec![],
                };
                let (id, _) = m.hello(peer, "app".into(), Role::Application, Default::default(), 0);
                pages.joined(id, m.client_views(id, 0));
                id
            })
            .collect();
        assert!(pages.round(&mut m, 1_000).is_empty());
        (m, pages, ids)
    }

    fn rewritten(pages: &mut PageRounds, m: &mut Monitor) -> Vec<ClientId> {
        pages
            .round(m, 2_000)
            .into_iter()
            .map(|u| u.client)
            .collect()
    }

    #[test]
    fn new_results_rewrite_the_pages_of_the_clients_they_changed_only() {
        let (mut m, mut pages, ids) = settled(3);
        let mut shown = Shown {
            cpu: Arc::new(CpuFigures::unscanned(1)),
            coordination: Arc::default(),
        };
        // The same results again: nothing to rewrite.
        let same = Shown {
            cpu: Arc::clone(&shown.cpu),
            coordination: Arc::clone(&shown.coordination),
        };
        shown.update(same, &mut pages);
        assert!(rewritten(&mut pages, &mut m).is_empty());
        // A scan that gives the second client a core.
        let scanned = CpuFigures {
            exclusive: BTreeMap::from([(ids[1], vec![1])]),
            ..CpuFigures::unscanned(1)
        };
        let latest = Shown {
            cpu: Arc::new(scanned),
            coordination: Arc::clone(&shown.coordination),
        };
        shown.update(latest, &mut pages);
        assert_eq!(rewritten(&mut pages, &mut m), vec![ids[1]]);
        // A solve that gives the third client targets.
        let solved = CoordinationResults {
            targets: BTreeMap::from([(
                ids[2],
                Targets {
                    rate: 1.0,
                    fractions: vec![1.0],
                },
            )]),
            ..Default::default()
        };
        let latest = Shown {
            cpu: Arc::clone(&shown.cpu),
            coordination: Arc::new(solved),
        };
        shown.update(latest, &mut pages);
        assert_eq!(rewritten(&mut pages, &mut m), vec![ids[2]]);
    }
}
