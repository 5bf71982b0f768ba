//! Properties of pipelining tables: every (stage, chunk) exactly once, in
//! dependency order, copies between the computes they connect, no unit
//! running two things in a step, and never longer than the sequential
//! schedule of the same assignment.

use hetsched_core::ids::{KindId, UnitId};
use hetsched_core::pipeline_table::{Place, StageSpec, plan};
use hetsched_core::unit::{LinkCost, Unit};
use proptest::prelude::*;
use std::collections::HashMap;

fn unit(i: u16, kind: u16, coherent: bool, gbps: f64) -> Unit {
    Unit::basic(
        UnitId(i),
        KindId(kind),
        coherent,
        LinkCost::new(500, gbps * 1e9),
    )
}

fn arb_case() -> impl Strategy<Value = (Vec<Unit>, Vec<StageSpec>, usize, usize)> {
    (1usize..5, 1usize..6, 1usize..12, 1usize..8).prop_flat_map(
        |(n_units, n_stages, chunks, mif)| {
            let units = proptest::collection::vec((any::<bool>(), 0.5..20.0f64), n_units);
            let stages = proptest::collection::vec(
                (
                    proptest::collection::vec(
                        proptest::option::weighted(0.7, 1.0..1e5f64),
                        n_units,
                    ),
                    0u64..1 << 20,
                    0u64..1 << 20,
                ),
                n_stages,
            );
            (units, stages).prop_map(move |(u, s)| {
                let units: Vec<Unit> = u
                    .iter()
                    .enumerate()
                    .map(|(i, (coh, gbps))| unit(i as u16, i as u16, *coh || i == 0, *gbps))
                    .collect();
                let stages = s
                    .into_iter()
                    .enumerate()
                    .map(|(i, (mut times, bi, bo))| {
                        // Every stage runs somewhere: unit 0 always implements it.
                        if times[0].is_none() {
                            times[0] = Some(1e4);
                        }
                        StageSpec {
                            name: format!("s{i}"),
                            time_ns: times,
                            bytes_in: bi,
                            bytes_out: bo,
                        }
                    })
                    .collect();
                (units, stages, chunks, mif)
            })
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn table_is_valid((units, stages, chunks, mif) in arb_case()) {
        let t = plan(&stages, &units, chunks, mif).unwrap();
        let n = stages.len();
        // (stage, chunk) -> step
        let mut at: HashMap<(usize, usize), usize> = HashMap::new();
        // (for_stage, chunk) -> step of the copy feeding it
        let mut copy_at: HashMap<(usize, usize), usize> = HashMap::new();
        for (i, step) in t.steps.iter().enumerate() {
            prop_assert_eq!(step.index, i);
            let mut busy = Vec::new();
            for e in &step.compute {
                prop_assert!(!busy.contains(&e.unit), "unit {:?} twice in step {}", e.unit, i);
                busy.push(e.unit);
                prop_assert_eq!(e.unit, t.assignment[e.stage]);
                prop_assert!(at.insert((e.stage, e.chunk), i).is_none(), "duplicate");
            }
            let mut links = Vec::new();
            for c in &step.copies {
                prop_assert!(!links.contains(&(c.src, c.dst)));
                links.push((c.src, c.dst));
                prop_assert!(copy_at.insert((c.for_stage, c.chunk), i).is_none());
            }
            let longest = step
                .compute
                .iter()
                .map(|e| e.time_ns)
                .chain(step.copies.iter().map(|c| c.time_ns))
                .fold(0.0, f64::max);
            prop_assert!((step.duration_ns - longest).abs() < 1e-6);
        }
        prop_assert_eq!(at.len(), n * chunks);
        for k in 0..chunks {
            for s in 0..n {
                let here = at[&(s, k)];
                if s > 0 {
                    prop_assert!(at[&(s - 1, k)] < here, "stage {} chunk {} before its input", s, k);
                }
                if let Some(&c) = copy_at.get(&(s, k)) {
                    prop_assert!(c < here);
                    if s > 0 {
                        prop_assert!(at[&(s - 1, k)] < c);
                    }
                }
            }
            if let Some(&c) = copy_at.get(&(n, k)) {
                prop_assert!(at[&(n - 1, k)] < c);
            }
        }
        // Copies only where a non-coherent unit is on either side.
        for step in &t.steps {
            for c in &step.copies {
                let coherent = |p: Place| match p {
                    Place::Host => true,
                    Place::Unit(id) => units[id.index()].coherent,
                };
                prop_assert!(!(coherent(c.src) && coherent(c.dst)));
            }
        }
        prop_assert!(t.makespan_ns <= t.sequential_ns * (1.0 + 1e-9) + 1e-6);
        // In flight never exceeds the bound.
        for step in &t.steps {
            let chunks_here: std::collections::BTreeSet<usize> =
                step.compute.iter().map(|e| e.chunk).chain(step.copies.iter().map(|c| c.chunk)).collect();
            if let (Some(lo), Some(hi)) = (chunks_here.first(), chunks_here.last()) {
                prop_assert!(hi - lo < t.max_in_flight.max(1));
            }
        }
    }
}
