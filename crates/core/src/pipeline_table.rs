//! Pipelining tables (APC): stages of a streaming computation assigned to
//! units, and a step-by-step table of which unit runs which stage on which
//! chunk and which copies run alongside.
//!
//! The table is *software pipelined*: in steady state, while stage `s`
//! works on chunk `k`, stage `s + 1` works on chunk `k - 1` and the copy
//! that feeds it runs in the same step. Every chunk goes through the same
//! list of operations — an optional copy in, then for every stage its
//! compute and, when the next stage sits on another unit that does not
//! share memory, the copy between them, then an optional copy out — and a
//! chunk advances by at most one operation per step, which is what keeps
//! the table in dependency order. In each step, older chunks go first; a
//! unit runs at most one stage and a link carries at most one copy.
//!
//! [`Stepper`] builds the table one step at a time for however many chunks
//! have arrived (the runtime's controller uses it on a live stream);
//! [`plan`] builds the whole table for a known number of chunks.
//!
//! Entries carry a `stream` and a `graph` field, unused here, left for CUDA
//! streams and graphs.

use crate::ids::UnitId;
use crate::unit::Unit;
use crate::view::ClientUnitView;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fmt;

/// One stage as the planner sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageSpec {
    pub name: String,
    /// Predicted execution time of one chunk on each unit kind, indexed by
    /// `KindId`; `None` (or a missing entry) where the stage has no
    /// implementation.
    pub time_ns: Vec<Option<f64>>,
    /// Bytes one chunk brings into the stage.
    pub bytes_in: u64,
    /// Bytes one chunk leaves behind (the next stage's input).
    pub bytes_out: u64,
}

impl StageSpec {
    /// Time of one chunk on `unit`, if the stage runs there.
    pub fn time_on(&self, unit: &Unit) -> Option<f64> {
        self.time_ns
            .get(unit.kind.index())
            .copied()
            .flatten()
            .filter(|t| t.is_finite() && *t >= 0.0)
    }
}

/// Where a copy's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Place {
    Host,
    Unit(UnitId),
}

impl Place {
    fn label(self, units: &[Unit]) -> String {
        match self {
            Place::Host => "host".into(),
            Place::Unit(id) => units
                .iter()
                .find(|u| u.id == id)
                .map_or_else(|| format!("unit{}", id.0), |u| u.name.clone()),
        }
    }
}

/// A unit running one stage on one chunk during one step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComputeEntry {
    pub unit: UnitId,
    pub stage: usize,
    pub chunk: usize,
    /// Predicted time, ns.
    pub time_ns: f64,
    /// CUDA stream (later); `None` here.
    pub stream: Option<u32>,
    /// CUDA graph node (later); `None` here.
    pub graph: Option<u32>,
}

/// A copy running during one step, overlapped with the step's compute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CopyEntry {
    pub src: Place,
    pub dst: Place,
    pub bytes: u64,
    pub chunk: usize,
    /// The stage that needs these bytes; the number of stages for the
    /// final copy back to the host.
    pub for_stage: usize,
    /// Predicted time, ns.
    pub time_ns: f64,
    /// CUDA stream (later); `None` here.
    pub stream: Option<u32>,
}

/// One pipeline step: everything in it runs concurrently.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub index: usize,
    pub compute: Vec<ComputeEntry>,
    pub copies: Vec<CopyEntry>,
    /// The step's predicted length: its longest entry.
    pub duration_ns: f64,
}

impl Step {
    pub fn is_empty(&self) -> bool {
        self.compute.is_empty() && self.copies.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("a pipeline needs at least one stage")]
    NoStages,
    #[error("a pipeline needs at least one unit")]
    NoUnits,
    #[error("stage {stage} ({name}) has no implementation on any of the units")]
    NoImplementation { stage: usize, name: String },
    #[error("stage {stage} is assigned to unit {unit:?}, which it cannot run on")]
    BadAssignment { stage: usize, unit: UnitId },
}

/// One operation every chunk goes through, in order.
#[derive(Clone, Debug, PartialEq)]
enum Op {
    Compute {
        stage: usize,
        unit: usize,
        time_ns: f64,
    },
    Copy {
        src: Place,
        dst: Place,
        bytes: u64,
        for_stage: usize,
        time_ns: f64,
        link: usize,
    },
}

fn position(units: &[Unit], id: UnitId) -> Option<usize> {
    units.iter().position(|u| u.id == id)
}

/// The copy between `a` (or the host) and `b` (or the host), if one is needed.
fn copy_between(units: &[Unit], a: Option<usize>, b: Option<usize>, bytes: u64) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) if x == y => None,
        (Some(x), Some(y)) => {
            let (ux, uy) = (&units[x], &units[y]);
            (!ux.coherent || !uy.coherent).then(|| ux.copy_out_ns(bytes) + uy.copy_in_ns(bytes))
        }
        (None, Some(y)) => (!units[y].coherent).then(|| units[y].copy_in_ns(bytes)),
        (Some(x), None) => (!units[x].coherent).then(|| units[x].copy_out_ns(bytes)),
        (None, None) => None,
    }
}

fn place_of(units: &[Unit], p: Option<usize>) -> Place {
    p.map_or(Place::Host, |i| Place::Unit(units[i].id))
}

/// The operations of one chunk for an assignment (unit positions per stage).
fn ops_for(stages: &[StageSpec], units: &[Unit], at: &[usize]) -> Vec<Op> {
    ops_under(stages, units, at, None)
}

/// [`ops_for`] with each compute stretched by its unit's view (indexed like
/// `units`): the wall time the stage takes there given everyone else, as
/// placement predicts it (`exec / expected utilisation`). Copies are not
/// stretched: on a device they ride on the stage's submission, which waits
/// once.
fn ops_under(
    stages: &[StageSpec],
    units: &[Unit],
    at: &[usize],
    views: Option<&[ClientUnitView]>,
) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut links: Vec<(Place, Place)> = Vec::new();
    let mut copy = |ops: &mut Vec<Op>, a: Option<usize>, b: Option<usize>, bytes, for_stage| {
        if let Some(t) = copy_between(units, a, b, bytes) {
            let (src, dst) = (place_of(units, a), place_of(units, b));
            let link = links
                .iter()
                .position(|l| *l == (src, dst))
                .unwrap_or_else(|| {
                    links.push((src, dst));
                    links.len() - 1
                });
            ops.push(Op::Copy {
                src,
                dst,
                bytes,
                for_stage,
                time_ns: t,
                link,
            });
        }
    };
    let mut prev = None;
    for (s, stage) in stages.iter().enumerate() {
        copy(&mut ops, prev, Some(at[s]), stage.bytes_in, s);
        let exec = stage.time_on(&units[at[s]]).unwrap_or(0.0);
        let time_ns = match views.and_then(|v| v.get(at[s])) {
            Some(v) => v.stretched_ns(exec),
            None => exec,
        };
        ops.push(Op::Compute {
            stage: s,
            unit: at[s],
            time_ns,
        });
        prev = Some(at[s]);
    }
    if let Some(last) = stages.last() {
        copy(&mut ops, prev, None, last.bytes_out, stages.len());
    }
    ops
}

fn op_time(op: &Op) -> f64 {
    match op {
        Op::Compute { time_ns, .. } | Op::Copy { time_ns, .. } => *time_ns,
    }
}

/// Steady-state cost of an assignment: (bottleneck per chunk, total per chunk).
fn cost(
    stages: &[StageSpec],
    units: &[Unit],
    at: &[usize],
    views: Option<&[ClientUnitView]>,
) -> (f64, f64) {
    let ops = ops_under(stages, units, at, views);
    let mut unit_load = vec![0.0; units.len()];
    let mut link_load: Vec<f64> = Vec::new();
    let mut total = 0.0;
    for op in &ops {
        total += op_time(op);
        match op {
            Op::Compute { unit, time_ns, .. } => unit_load[*unit] += time_ns,
            Op::Copy { link, time_ns, .. } => {
                if link_load.len() <= *link {
                    link_load.resize(*link + 1, 0.0);
                }
                link_load[*link] += time_ns;
            }
        }
    }
    let bottleneck = unit_load
        .iter()
        .chain(&link_load)
        .copied()
        .fold(0.0, f64::max);
    (bottleneck, total)
}

/// Assigns every stage to a unit, minimising the steady-state bottleneck
/// (the busiest unit or link per chunk), then the total time of one chunk.
/// Exhaustive for small pipelines, greedy stage by stage beyond.
pub fn assign(stages: &[StageSpec], units: &[Unit]) -> Result<Vec<UnitId>, PlanError> {
    assign_inner(stages, units, None)
}

/// [`assign`] under contention: each unit's stage times stretched by its
/// view (`views[i]` for `units[i]`; a missing view is an idle unit), as
/// the monitor publishes them. The pipeline controller re-plans with this
/// between steps.
pub fn assign_under(
    stages: &[StageSpec],
    units: &[Unit],
    views: &[ClientUnitView],
) -> Result<Vec<UnitId>, PlanError> {
    assign_inner(stages, units, Some(views))
}

/// Predicted steady-state period of `assignment` (the busiest unit or link
/// per chunk, ns), with stage times stretched by `views` when given.
pub fn period_ns(
    stages: &[StageSpec],
    units: &[Unit],
    assignment: &[UnitId],
    views: Option<&[ClientUnitView]>,
) -> Result<f64, PlanError> {
    let at = positions(stages, units, assignment)?;
    Ok(cost(stages, units, &at, views).0)
}

/// Unit positions of an assignment, checked: every stage on a unit of
/// `units` where it has an implementation.
fn positions(
    stages: &[StageSpec],
    units: &[Unit],
    assignment: &[UnitId],
) -> Result<Vec<usize>, PlanError> {
    if stages.is_empty() {
        return Err(PlanError::NoStages);
    }
    if units.is_empty() {
        return Err(PlanError::NoUnits);
    }
    stages
        .iter()
        .enumerate()
        .map(|(s, st)| {
            let unit = assignment.get(s).copied().unwrap_or(UnitId(u16::MAX));
            position(units, unit)
                .filter(|&p| st.time_on(&units[p]).is_some())
                .ok_or(PlanError::BadAssignment { stage: s, unit })
        })
        .collect()
}

fn assign_inner(
    stages: &[StageSpec],
    units: &[Unit],
    views: Option<&[ClientUnitView]>,
) -> Result<Vec<UnitId>, PlanError> {
    if stages.is_empty() {
        return Err(PlanError::NoStages);
    }
    if units.is_empty() {
        return Err(PlanError::NoUnits);
    }
    let options: Vec<Vec<usize>> = stages
        .iter()
        .enumerate()
        .map(|(s, st)| {
            let o: Vec<usize> = (0..units.len())
                .filter(|&u| st.time_on(&units[u]).is_some())
                .collect();
            if o.is_empty() {
                Err(PlanError::NoImplementation {
                    stage: s,
                    name: st.name.clone(),
                })
            } else {
                Ok(o)
            }
        })
        .collect::<Result<_, _>>()?;
    let combos = options
        .iter()
        .try_fold(1usize, |acc, o| acc.checked_mul(o.len()))
        .unwrap_or(usize::MAX);
    let better =
        |a: (f64, f64), b: (f64, f64)| a.0 < b.0 - 1e-9 || (a.0 <= b.0 + 1e-9 && a.1 < b.1);
    let best: Vec<usize> = if combos <= 20_000 {
        let mut idx = vec![0usize; stages.len()];
        let mut at: Vec<usize> = options.iter().map(|o| o[0]).collect();
        let mut best = at.clone();
        let mut best_cost = cost(stages, units, &at, views);
        'outer: loop {
            // Next combination (odometer).
            let mut s = 0;
            loop {
                if s == stages.len() {
                    break 'outer;
                }
                idx[s] += 1;
                if idx[s] < options[s].len() {
                    at[s] = options[s][idx[s]];
                    break;
                }
                idx[s] = 0;
                at[s] = options[s][0];
                s += 1;
            }
            let c = cost(stages, units, &at, views);
            if better(c, best_cost) {
                best_cost = c;
                best.clone_from(&at);
            }
        }
        best
    } else {
        let mut at: Vec<usize> = Vec::with_capacity(stages.len());
        for (s, o) in options.iter().enumerate() {
            let mut pick = o[0];
            let mut pick_cost = (f64::INFINITY, f64::INFINITY);
            for &u in o {
                at.push(u);
                let c = cost(&stages[..=s], units, &at, views);
                at.pop();
                if better(c, pick_cost) {
                    pick_cost = c;
                    pick = u;
                }
            }
            at.push(pick);
        }
        at
    };
    Ok(best.into_iter().map(|u| units[u].id).collect())
}

fn link_count(ops: &[Op]) -> usize {
    ops.iter()
        .filter_map(|o| match o {
            Op::Copy { link, .. } => Some(*link + 1),
            Op::Compute { .. } => None,
        })
        .max()
        .unwrap_or(0)
}

/// Builds the pipelining table one step at a time.
#[derive(Clone, Debug)]
pub struct Stepper {
    ops: Vec<Op>,
    /// Unit position of each stage.
    at: Vec<usize>,
    units: Vec<UnitId>,
    links: usize,
    /// Next operation of each chunk started and not finished (`ops.len()`:
    /// done), from chunk `first_open` on.
    pos: VecDeque<usize>,
    /// Chunks before this one are all done.
    first_open: usize,
    max_in_flight: usize,
    step: usize,
    unit_busy: Vec<bool>,
    link_busy: Vec<bool>,
}

impl Stepper {
    /// A stepper for `assignment` (a unit per stage, from [`assign`] or
    /// the caller's own), keeping at most `max_in_flight` chunks started
    /// and not finished (at least 1).
    pub fn new(
        stages: &[StageSpec],
        units: &[Unit],
        assignment: &[UnitId],
        max_in_flight: usize,
    ) -> Result<Stepper, PlanError> {
        let at = positions(stages, units, assignment)?;
        let ops = ops_for(stages, units, &at);
        let links = link_count(&ops);
        Ok(Stepper {
            ops,
            at,
            units: units.iter().map(|u| u.id).collect(),
            links,
            pos: VecDeque::new(),
            first_open: 0,
            max_in_flight: max_in_flight.max(1),
            step: 0,
            unit_busy: vec![false; units.len()],
            link_busy: vec![false; links],
        })
    }

    /// Switches to another assignment between steps (same `stages` and
    /// `units` as at [`Stepper::new`]), keeping every chunk's progress: a
    /// chunk keeps the stages it has done and goes on with the first one
    /// it has not, under the new assignment. When that stage, or the one
    /// before it, moved, the chunk goes through the copy that feeds the
    /// stage under the new assignment (its data comes back through the
    /// host); a chunk with only its final copy left makes that copy from
    /// the new last unit. Chunk numbering, order and the in-flight bound
    /// are unchanged.
    pub fn reassign(
        &mut self,
        stages: &[StageSpec],
        units: &[Unit],
        assignment: &[UnitId],
    ) -> Result<(), PlanError> {
        let at = positions(stages, units, assignment)?;
        if self.units.len() != units.len() || self.units.iter().zip(units).any(|(a, b)| *a != b.id)
        {
            return Err(PlanError::BadAssignment {
                stage: 0,
                unit: assignment.first().copied().unwrap_or(UnitId(u16::MAX)),
            });
        }
        let ops = ops_for(stages, units, &at);
        let first_op_of = |s: usize| {
            ops.iter()
                .position(|o| match o {
                    Op::Compute { stage, .. } => *stage == s,
                    Op::Copy { for_stage, .. } => *for_stage == s,
                })
                .unwrap_or(ops.len())
        };
        let compute_of = |s: usize| {
            ops.iter()
                .position(|o| matches!(o, Op::Compute { stage, .. } if *stage == s))
                .unwrap_or(ops.len())
        };
        let n_old = self.ops.len();
        for p in &mut self.pos {
            if *p >= n_old {
                *p = ops.len();
                continue;
            }
            *p = match &self.ops[*p] {
                Op::Compute { stage, .. } => {
                    let s = *stage;
                    let same = at[s] == self.at[s] && (s == 0 || at[s - 1] == self.at[s - 1]);
                    if same { compute_of(s) } else { first_op_of(s) }
                }
                Op::Copy { for_stage, .. } => first_op_of(*for_stage),
            };
        }
        self.links = link_count(&ops);
        self.link_busy = vec![false; self.links];
        self.ops = ops;
        self.at = at;
        Ok(())
    }

    /// The assignment this stepper follows.
    pub fn assignment(&self) -> Vec<UnitId> {
        self.at.iter().map(|&p| self.units[p]).collect()
    }

    /// Operations each chunk goes through (computes and copies).
    pub fn ops_per_chunk(&self) -> usize {
        self.ops.len()
    }

    /// Chunks started and not finished.
    pub fn in_flight(&self) -> usize {
        self.pos.len()
    }

    /// Chunks finished (all chunks before this index are).
    pub fn finished(&self) -> usize {
        self.first_open
    }

    /// Chunks started so far.
    pub fn started(&self) -> usize {
        self.first_open + self.pos.len()
    }

    /// The next step, given that chunks `0..available` have arrived. An
    /// empty step means nothing can run until more chunks arrive.
    pub fn next_step(&mut self, available: usize) -> Step {
        let mut step = Step {
            index: self.step,
            ..Step::default()
        };
        self.fill(available, &mut step);
        if !step.is_empty() {
            self.step += 1;
        }
        step
    }

    /// [`Stepper::next_step`] into a reused step (no allocation once its
    /// vectors have grown).
    pub fn next_step_into(&mut self, available: usize, step: &mut Step) {
        step.index = self.step;
        step.compute.clear();
        step.copies.clear();
        step.duration_ns = 0.0;
        self.fill(available, step);
        if !step.is_empty() {
            self.step += 1;
        }
    }

    fn fill(&mut self, available: usize, step: &mut Step) {
        self.unit_busy.iter_mut().for_each(|b| *b = false);
        self.link_busy.iter_mut().for_each(|b| *b = false);
        // Admit new chunks while there is room.
        while self.started() < available && self.in_flight() < self.max_in_flight {
            self.pos.push_back(0);
        }
        let n_ops = self.ops.len();
        for i in 0..self.pos.len() {
            let k = self.first_open + i;
            let p = self.pos[i];
            if p >= n_ops {
                continue;
            }
            match &self.ops[p] {
                Op::Compute {
                    stage,
                    unit,
                    time_ns,
                } => {
                    if self.unit_busy[*unit] {
                        continue;
                    }
                    self.unit_busy[*unit] = true;
                    step.compute.push(ComputeEntry {
                        unit: self.units[*unit],
                        stage: *stage,
                        chunk: k,
                        time_ns: *time_ns,
                        stream: None,
                        graph: None,
                    });
                    step.duration_ns = step.duration_ns.max(*time_ns);
                }
                Op::Copy {
                    src,
                    dst,
                    bytes,
                    for_stage,
                    time_ns,
                    link,
                } => {
                    if self.link_busy[*link] {
                        continue;
                    }
                    self.link_busy[*link] = true;
                    step.copies.push(CopyEntry {
                        src: *src,
                        dst: *dst,
                        bytes: *bytes,
                        chunk: k,
                        for_stage: *for_stage,
                        time_ns: *time_ns,
                        stream: None,
                    });
                    step.duration_ns = step.duration_ns.max(*time_ns);
                }
            }
            self.pos[i] = p + 1;
        }
        while self.pos.front().is_some_and(|&p| p >= n_ops) {
            self.pos.pop_front();
            self.first_open += 1;
        }
    }

    /// Links (source, destination pairs) the copies use.
    pub fn links(&self) -> usize {
        self.links
    }
}

/// A whole pipelining table for a known number of chunks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PipelineTable {
    pub stage_names: Vec<String>,
    /// The unit of each stage.
    pub assignment: Vec<UnitId>,
    pub chunks: usize,
    pub max_in_flight: usize,
    pub steps: Vec<Step>,
    /// Sum of the steps' predicted lengths.
    pub makespan_ns: f64,
    /// The same work with nothing overlapped: every compute and copy of
    /// every chunk one after the other (the naive user-driven loop, minus
    /// its round trips).
    pub sequential_ns: f64,
    /// Unit names by id, for printing.
    pub unit_names: Vec<(UnitId, String)>,
}

/// Plans `chunks` chunks through `stages` on `units`: [`assign`], then
/// steps until every chunk is done.
pub fn plan(
    stages: &[StageSpec],
    units: &[Unit],
    chunks: usize,
    max_in_flight: usize,
) -> Result<PipelineTable, PlanError> {
    let assignment = assign(stages, units)?;
    plan_with(stages, units, &assignment, chunks, max_in_flight)
}

/// [`plan`] with a given assignment.
pub fn plan_with(
    stages: &[StageSpec],
    units: &[Unit],
    assignment: &[UnitId],
    chunks: usize,
    max_in_flight: usize,
) -> Result<PipelineTable, PlanError> {
    let mut stepper = Stepper::new(stages, units, assignment, max_in_flight)?;
    let per_chunk: f64 = stepper.ops.iter().map(op_time).sum();
    let mut steps = Vec::new();
    while stepper.finished() < chunks {
        let step = stepper.next_step(chunks);
        debug_assert!(!step.is_empty());
        if step.is_empty() {
            break;
        }
        steps.push(step);
    }
    Ok(PipelineTable {
        stage_names: stages.iter().map(|s| s.name.clone()).collect(),
        assignment: assignment.to_vec(),
        chunks,
        max_in_flight: stepper.max_in_flight,
        makespan_ns: steps.iter().map(|s| s.duration_ns).sum(),
        sequential_ns: per_chunk * chunks as f64,
        steps,
        unit_names: units.iter().map(|u| (u.id, u.name.clone())).collect(),
    })
}

impl PipelineTable {
    fn unit_name(&self, id: UnitId) -> String {
        self.unit_names
            .iter()
            .find(|(u, _)| *u == id)
            .map_or_else(|| format!("unit{}", id.0), |(_, n)| n.clone())
    }
}

impl fmt::Display for PipelineTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "pipelining table: {} stages, {} chunks, {} steps, predicted {:.1} us (sequential {:.1} us)",
            self.stage_names.len(),
            self.chunks,
            self.steps.len(),
            self.makespan_ns / 1e3,
            self.sequential_ns / 1e3
        )?;
        for (s, (name, unit)) in self.stage_names.iter().zip(&self.assignment).enumerate() {
            writeln!(f, "  stage {s} {name:<12} -> {}", self.unit_name(*unit))?;
        }
        let mut cols: Vec<UnitId> = Vec::new();
        for u in &self.assignment {
            if !cols.contains(u) {
                cols.push(*u);
            }
        }
        write!(f, "{:>5} | {:>9}", "step", "us")?;
        for c in &cols {
            write!(f, " | {:<16}", self.unit_name(*c))?;
        }
        writeln!(f, " | copies")?;
        for step in &self.steps {
            write!(f, "{:>5} | {:>9.2}", step.index, step.duration_ns / 1e3)?;
            for c in &cols {
                let cell = step
                    .compute
                    .iter()
                    .find(|e| e.unit == *c)
                    .map(|e| format!("{}#{}", self.stage_names[e.stage], e.chunk))
                    .unwrap_or_default();
                write!(f, " | {cell:<16}")?;
            }
            let copies: Vec<String> = step
                .copies
                .iter()
                .map(|c| {
                    let name = |p: Place| match p {
                        Place::Host => "host".to_string(),
                        Place::Unit(id) => self.unit_name(id),
                    };
                    format!("{}->{} {}B #{}", name(c.src), name(c.dst), c.bytes, c.chunk)
                })
                .collect();
            writeln!(f, " | {}", copies.join(", "))?;
        }
        Ok(())
    }
}

/// The label of a place among `units` (unit name, or `host`).
pub fn place_label(place: Place, units: &[Unit]) -> String {
    place.label(units)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::KindId;
    use crate::unit::LinkCost;

    fn unit(i: u16, kind: u16, coherent: bool) -> Unit {
        Unit::basic(UnitId(i), KindId(kind), coherent, LinkCost::new(1_000, 1e9))
    }

    fn stage(name: &str, times: &[Option<f64>]) -> StageSpec {
        StageSpec {
            name: name.into(),
            time_ns: times.to_vec(),
            bytes_in: 1000,
            bytes_out: 1000,
        }
    }

    #[test]
    fn three_stages_on_three_units_overlap_like_apc() {
        let units = [unit(0, 0, true), unit(1, 1, true), unit(2, 2, true)];
        // Each stage is fastest on its own unit.
        let stages = [
            stage("a", &[Some(10.0), Some(100.0), Some(100.0)]),
            stage("b", &[Some(100.0), Some(10.0), Some(100.0)]),
            stage("c", &[Some(100.0), Some(100.0), Some(10.0)]),
        ];
        let t = plan(&stages, &units, 5, 8).unwrap();
        assert_eq!(t.assignment, vec![UnitId(0), UnitId(1), UnitId(2)]);
        // Fill, 3 steady steps, drain: chunks + stages - 1 steps.
        assert_eq!(t.steps.len(), 5 + 3 - 1);
        // Steady state: stage s works on chunk step - s.
        let mid = &t.steps[2];
        for e in &mid.compute {
            assert_eq!(e.chunk + e.stage, 2);
        }
        assert!(t.makespan_ns < t.sequential_ns);
        let shown = t.to_string();
        assert!(shown.contains("a#0"), "{shown}");
    }

    #[test]
    fn device_stage_gets_copies_overlapped() {
        let units = [unit(0, 0, true), unit(1, 1, false)];
        let stages = [
            stage("cpu-only", &[Some(10.0), None]),
            stage("gpu", &[Some(1e6), Some(10.0)]),
        ];
        let t = plan(&stages, &units, 4, 8).unwrap();
        assert_eq!(t.assignment, vec![UnitId(0), UnitId(1)]);
        // Ops: compute, copy in, compute, copy out.
        let copies: usize = t.steps.iter().map(|s| s.copies.len()).sum();
        assert_eq!(copies, 8);
        // Some step runs a copy and a compute together.
        assert!(
            t.steps
                .iter()
                .any(|s| !s.copies.is_empty() && !s.compute.is_empty())
        );
    }

    #[test]
    fn shared_unit_alternates() {
        let units = [unit(0, 0, true)];
        let stages = [stage("a", &[Some(1.0)]), stage("b", &[Some(1.0)])];
        let t = plan(&stages, &units, 3, 4).unwrap();
        assert_eq!(t.steps.len(), 6);
        assert!(t.steps.iter().all(|s| s.compute.len() == 1));
        assert!((t.makespan_ns - t.sequential_ns).abs() < 1e-9);
    }

    #[test]
    fn errors() {
        let units = [unit(0, 0, true)];
        assert_eq!(plan(&[], &units, 1, 1), Err(PlanError::NoStages));
        assert_eq!(
            plan(&[stage("a", &[None])], &units, 1, 1),
            Err(PlanError::NoImplementation {
                stage: 0,
                name: "a".into()
            })
        );
        assert!(matches!(
            plan_with(&[stage("a", &[Some(1.0)])], &units, &[UnitId(7)], 1, 1),
            Err(PlanError::BadAssignment { .. })
        ));
    }

    #[test]
    fn stepper_waits_for_chunks_and_bounds_in_flight() {
        let units = [unit(0, 0, true), unit(1, 1, true)];
        let stages = [
            stage("a", &[Some(1.0), None]),
            stage("b", &[None, Some(5.0)]),
        ];
        let mut st = Stepper::new(&stages, &units, &[UnitId(0), UnitId(1)], 2).unwrap();
        assert!(st.next_step(0).is_empty());
        for _ in 0..10 {
            st.next_step(100);
            assert!(st.in_flight() <= 2);
        }
    }
}
