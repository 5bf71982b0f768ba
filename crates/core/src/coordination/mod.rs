//! Proportional-fair coordination of decentralised placement (`hetsched-pf`).
//!
//! Selfish placement (every app sends each task where *it* finishes
//! soonest) settles at an equilibrium that can be far below what the machine
//! could give everyone, and can leave an app below its native throughput.
//! This module closes that gap without a central dispatcher:
//!
//! * the monitor keeps a [`Coordinator`]: each app's *measured* task
//!   durations per unit (the monitor times tasks at completion, so a client
//!   that lies about its task times changes nothing), its copy/dispatch
//!   overhead and its tasks in flight. When the set of apps changes, or
//!   (at most once per `resolve_period_ns`) when a model moved by more than
//!   `model_change`, it solves the proportional-fair allocation subject to
//!   a floor (nobody below `floor_goal` × native, or the largest common floor
//!   when that is infeasible, [`crate::fairness::solve_no_loser_with_goal`])
//!   and publishes per-app *target fractions*: the share of the app's tasks
//!   each unit should run;
//! * each client follows its targets with a [`DeficitFollower`] (smooth
//!   weighted round robin: every unit accrues its target as credit on each
//!   task, the unit with most credit takes the task). The achieved mix
//!   tracks the target within one task at any time, with no randomness, and
//!   follows a new target at once. Apps the monitor has no target for yet
//!   (still profiling) use plain placement.
//!
//! Stale views only delay when a client sees new targets; targets change
//! only when apps come or go or models move, so a 10 ms delay costs a few
//! tasks in the old mix. Pure: no I/O, clocks or threads; `now` is passed in.
//!
//! The parts, each building on those before it: [`supply`] and [`demand`]
//! (what the units offer and the applications ask; [`native_split`], how
//! a unit that enforces entitlements splits its time natively), [`outside_load`] (the
//! CPU time other programs take from the supply), [`follow`] (the
//! client's side), [`pacing`] (which rate a client is told), [`limits`] (queueing constraints), [`replay`] (task
//! loops played out, to judge allocations), [`solve`] and
//! [`solve_targets_replayed`] (finding the allocation), [`slices`] (the
//! replay-judged pick spread over coordinator updates), [`warm`]
//! (re-solving from the last pick's shape), [`coordinator`]
//! (the monitor's side).
//!
//! Without hetsched-core's `solver` feature (the runtime and the C API
//! build it so) only what needs no solve is here: the client's side
//! ([`follow`], [`pacing`]), [`supply`], [`outside_load`], [`demand`] without `problem` and
//! `native_estimate_replayed`, and [`CoordinatorConfig`].

#[cfg(feature = "solver")]
use crate::fairness::{
    BARRIER_MIN_APPS, FairError, FairProblem, FairSolution, LinearLimit, NoLoserSolution, WarmFrom,
    solve_goal_from, solve_no_loser_weighted,
};
#[cfg(feature = "solver")]
use crate::ids::ClientId;
use crate::ids::Ns;
use serde::{Deserialize, Serialize};
#[cfg(feature = "solver")]
use std::collections::BTreeMap;

#[cfg(feature = "solver")]
mod replayed;
#[cfg(feature = "solver")]
pub use replayed::{
    INCUMBENT_MARGIN, JudgeBudget, Plan, REPLAY_FLOOR_CAP, REPLAY_FLOOR_TIE, ReplayedPick,
    SHORT_FIRST_MARGIN, solve_targets_replayed,
};

pub mod coordinator;
pub mod demand;
pub mod follow;
#[cfg(feature = "solver")]
pub mod limits;
pub mod native_split;
pub mod outside_load;
pub mod pacing;
#[cfg(feature = "solver")]
pub mod replay;
#[cfg(feature = "solver")]
pub mod slices;
#[cfg(feature = "solver")]
pub mod solve;
pub mod supply;
#[cfg(all(test, feature = "solver"))]
mod tests;
#[cfg(feature = "solver")]
pub mod warm;
pub mod weights;

pub use coordinator::*;
pub use demand::*;
pub use follow::*;
#[cfg(feature = "solver")]
pub use limits::*;
pub use outside_load::*;
pub use pacing::*;
#[cfg(feature = "solver")]
pub use slices::*;
#[cfg(feature = "solver")]
pub use solve::*;
pub use supply::*;
#[cfg(feature = "solver")]
pub use warm::*;
pub use weights::*;
