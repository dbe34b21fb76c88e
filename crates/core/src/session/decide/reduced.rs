//! `--search-steps N`: search with few steps, confirm with all of them. Pure, like the rest of
//! the decision.
//!
//! 1. **Reduced search.** The usual decision runs over every run (reduced or not) with
//!    `--repeat` and `--controls` set aside; each run it asks for is made at the reduced step
//!    count, but the minimal variant's (step 0), which runs at its own steps: it is the cheapest
//!    variant, and its full-step pass is the verdict's last pass when the first increment
//!    already fails. With `--full-step-target` the target also runs at its own steps; with a
//!    prediction a probe is reduced only where it pays (`reduce_pays`), and never while the
//!    failure being narrowed down was seen only at full steps in a stage that can depend on
//!    the step count. It ends with a boundary (or an endpoint verdict) at reduced steps.
//! 2. **Full-step confirmation.** Only full-step runs count now, plus the reduced failures whose
//!    stage cannot depend on the step count (`step_independent`: load, condition, the first
//!    step, decode, post-processing). The reduced boundary's failing step, then its passing step,
//!    are run at full steps when they have no full-step result (the passing one always is: it is
//!    the workflow the user attaches). Then the usual strategy searches on at full steps between
//!    the last full pass and the first full failure until they are adjacent, so the verdict is
//!    the one a full-step search gives (assuming, as binary search does, that re-adding an
//!    increment never makes a failure go away).
//!
//! The walk after a passing target (`--walk-on-pass`) runs at full steps in the first part: it
//! judges memory pressure from the time per step and the steps slowing within a run.

use super::super::journal::WorkflowJob;
use super::super::journal::{Phase, RunEntry, RunRole, SessionOptions, Strategy, Verdict};
use super::results::{first_result, role_for, stage_of, Decision};
use super::rules::{self, Boundary, Ctx, Searched};
use crate::analytics::cost::StepCost;
use crate::vocab::Stage;

/// The stages whose failure shows at any step count, so a reduced-step failure there stands
/// for the full-step run (the field-guide rule: fewer steps lower no single step's peak).
pub const STEP_INDEPENDENT_STAGES: &[Stage] = &[
    Stage::Load,
    Stage::Condition,
    Stage::SampleFirst,
    Stage::Decode,
    Stage::Postprocess,
];

/// True when `r` is a reduced-step failure that counts as a full-step failure.
pub(crate) fn step_independent(r: &RunEntry) -> bool {
    r.failed() && stage_of(r).is_some_and(|s| STEP_INDEPENDENT_STAGES.contains(&s))
}

/// A reduced run must save at least this share of its own predicted full-step time: sampling
/// must be most of the run (a variant whose time is load and decode saves little at few steps).
pub(crate) const MIN_SAVING_SHARE: f64 = 0.4;

/// A reduced run must save at least this share of the largest predicted full-step run of the
/// ladder: a cheap variant saves little, while a reduced pass that misleads the search (a
/// failure that grows across steps) costs full-step runs of the size of the largest.
pub(crate) const MIN_SAVING_OF_LARGEST: f64 = 0.2;

/// Below this predicted time of the largest run (seconds) the prediction decides nothing: the
/// split of a run into setup, steps and post comes from the client's frame times, whose noise is
/// tens of milliseconds, and a session whose runs all take seconds has little to save.
pub(crate) const MIN_PREDICTED_SECONDS: f64 = 10.0;

/// Whether the predicted `costs` can decide where few steps pay (else every search run but the
/// minimal is reduced, as without a prediction): the largest predicted full run takes at least
/// [`MIN_PREDICTED_SECONDS`].
pub(crate) fn weighable(costs: &[StepCost]) -> bool {
    costs.iter().any(|c| c.full >= MIN_PREDICTED_SECONDS)
}

/// Whether running `step` at few steps pays, from the predicted `costs` of every ladder step;
/// `open` is the number of places the first failure can still be at, the probe's own among
/// them (the steps after the last pass up to the first failure, or past the target when none
/// failed yet), and `rerun` the share of the probe's full time a failure there would cost again
/// at full steps ([`failure_rerun`]). Three conditions, all needed:
///
/// * the saving (full − reduced) is at least [`MIN_SAVING_SHARE`] of the run's full time;
/// * it is at least [`MIN_SAVING_OF_LARGEST`] of the largest predicted full run;
/// * it outweighs the expected confirmation: the probe becomes the last pass (always re-run at
///   full steps) when the failure is at the next place, and the first failure (re-run at full
///   steps when its stage depends on the step count: `rerun`) when it is at its own — with
///   every place equally likely, a full re-run with probability (1 + `rerun`) / `open`.
pub(crate) fn reduce_pays(costs: &[StepCost], step: usize, open: usize, rerun: f64) -> bool {
    let Some(c) = costs.get(step) else {
        return false;
    };
    let largest = costs.iter().map(|c| c.full).fold(0.0, f64::max);
    let saving = c.full - c.reduced;
    let confirm = ((1.0 + rerun.clamp(0.0, 1.0)) / open.max(1) as f64).min(1.0);
    saving >= MIN_SAVING_SHARE * c.full
        && saving >= MIN_SAVING_OF_LARGEST * largest
        && saving > confirm * c.full
}

/// For a probe of the reduced search: the number of places the first failure can still be at
/// (from the last pass below the first failure, or the minimal variant, to the first failure,
/// or one past the target), and the share of the probe's full time a failure there would cost
/// again at full steps. That share comes from the failure the search is narrowing down, the
/// lowest failing run so far: a probe that fails most likely fails the same way, so none when
/// that run failed in a stage whose failure stands at few steps ([`STEP_INDEPENDENT_STAGES`]),
/// all of it when its stage can depend on the step count (a reduced failure there is re-run at
/// full steps), half when nothing has failed yet or the stage is unknown.
fn open_places(job: &WorkflowJob, options: &SessionOptions, env: Option<&str>) -> (usize, f64) {
    let n = job.steps.len().saturating_sub(1);
    let hi = lowest_failure(job, options, env);
    let lo = (0..hi.map_or(n + 1, |(k, _)| k))
        .rev()
        .find(|&k| first_result(job, k, options, env).is_some_and(|r| r.passed))
        .unwrap_or(0);
    let rerun = failure_rerun(hi.and_then(|(_, run)| stage_of(run)));
    (hi.map_or(n + 1, |(k, _)| k) - lo, rerun)
}

/// The failure the search is narrowing down: the lowest failing step so far and its run.
fn lowest_failure<'a>(
    job: &'a WorkflowJob,
    options: &SessionOptions,
    env: Option<&str>,
) -> Option<(usize, &'a RunEntry)> {
    (0..job.steps.len()).find_map(|k| {
        first_result(job, k, options, env)
            .filter(|r| !r.passed)
            .map(|r| (k, r.run))
    })
}

/// True when the failure the search is narrowing down ([`lowest_failure`]) was seen only at
/// full steps, in a stage that can depend on the step count (`sample_middle`, unknown, none):
/// a pass at few steps cannot tell "the failure is further up" from "this failure needs the
/// steps", and a misleading pass sends the search up the ladder, to be searched again at full
/// steps. So no probe is reduced until one fails that way at few steps.
fn narrowing_a_full_step_only_failure(
    job: &WorkflowJob,
    options: &SessionOptions,
    env: Option<&str>,
) -> bool {
    lowest_failure(job, options, env)
        .is_some_and(|(_, run)| !run.is_reduced() && failure_rerun(stage_of(run)) > 0.0)
}

/// The share of a probe's full time its failure would cost again at full steps when it fails
/// like a run that failed in `stage` (the failure the search is narrowing down): 0 when that
/// stage stands at few steps ([`STEP_INDEPENDENT_STAGES`]), 1 when it can depend on the step
/// count, ½ without a stage.
pub(crate) fn failure_rerun(stage: Option<Stage>) -> f64 {
    match stage {
        Some(s) if STEP_INDEPENDENT_STAGES.contains(&s) => 0.0,
        Some(_) => 1.0,
        None => 0.5,
    }
}

/// The next action, the phase, and the step cap of the run it asks for (None: full steps).
/// `costs`: the predicted time of each ladder step's run (None: no finished run to predict
/// from yet, every search run but the minimal one is reduced).
pub(super) fn decide(
    job: &WorkflowJob,
    options: &SessionOptions,
    env: Option<&str>,
    cap: u32,
    costs: Option<&[StepCost]>,
) -> (Phase, Decision, Option<u32>) {
    // 1. The search at reduced steps.
    let search_options = SessionOptions {
        repeat: 0,
        controls: false,
        ..options.clone()
    };
    let (phase, d) = rules::decide_in(job, &search_options, env);
    let reduced_ends = match d {
        // The minimal variant runs at its own steps from the start: the cheapest run of the
        // ladder, and the full-step last pass the verdict needs when the first increment fails.
        Decision::Run { step: 0, .. } | Decision::Confirm { step: 0, .. } => {
            return (phase, d, None)
        }
        // The walk after a passing target runs at full steps: its evidence is the time per
        // step against the previous pass and the steps slowing within the run (which needs
        // six timed steps), and the step it names is the run the report attaches.
        Decision::Run { .. } if walking(job, &search_options, env) => return (phase, d, None),
        // `--full-step-target`: the target runs at its own steps.
        Decision::Run {
            role: RunRole::Target,
            ..
        } if options.full_step_target => return (phase, d, None),
        // With a prediction, only where few steps pay; else (and a crash's re-run) reduced;
        // never while the failure narrowed down was seen only at full steps and may need them.
        Decision::Run { step, .. } => {
            let pays = !narrowing_a_full_step_only_failure(job, &search_options, env)
                && costs.filter(|c| weighable(c)).is_none_or(|c| {
                    let (open, rerun) = open_places(job, &search_options, env);
                    reduce_pays(c, step, open, rerun)
                });
            return (phase, d, pays.then_some(cap));
        }
        Decision::Confirm { .. } => return (phase, d, Some(cap)),
        Decision::Finish(Verdict::FirstFailure {
            step,
            last_pass_step,
            ..
        }) => [Some(step), Some(last_pass_step)],
        Decision::Finish(Verdict::MinimalFails { .. }) => [Some(0), None],
        Decision::Finish(Verdict::CouldNotReproduce { .. }) => {
            [None, job.steps.len().checked_sub(1)]
        }
        Decision::Finish(v) => return (phase, Decision::Finish(v), None),
    };
    // 2. The confirmation at full steps.
    let full = WorkflowJob {
        runs: job
            .runs
            .iter()
            .filter(|r| !r.is_reduced() || step_independent(r))
            .cloned()
            .collect(),
        ..job.clone()
    };
    let c = Ctx {
        job: &full,
        options,
        env,
        n: full.steps.len().saturating_sub(1),
    };
    let run = |step: usize| {
        (
            Phase::Search,
            Decision::Run {
                step,
                role: role_for(step, c.n),
            },
            None,
        )
    };
    for step in reduced_ends.into_iter().flatten() {
        if first_result(&full, step, options, env).is_none() {
            return run(step);
        }
    }
    let (p, d) = match full_search(&c) {
        Searched::Found(b) => rules::AFTER_SEARCH
            .iter()
            .find_map(|(_, rule)| rule(&c, b))
            .unwrap_or_else(|| rules::first_failure(&c, b)),
        Searched::Ask(next) => next,
    };
    (p, d, None)
}

/// Whether the session walks the ladder after a passing target (`--walk-on-pass`).
fn walking(job: &WorkflowJob, options: &SessionOptions, env: Option<&str>) -> bool {
    let c = Ctx {
        job,
        options,
        env,
        n: job.steps.len().saturating_sub(1),
    };
    rules::walked_target(&c).is_some()
}

/// The search at full steps from the full-step results known: the boundary, or the next run.
fn full_search(c: &Ctx) -> Searched {
    let result = |k: usize| first_result(c.job, k, c.options, c.env);
    let run = |step: usize| {
        (
            Phase::Search,
            Decision::Run {
                step,
                role: role_for(step, c.n),
            },
        )
    };
    let Some(hi) = (0..=c.n).find(|&k| result(k).is_some_and(|r| !r.passed)) else {
        return Searched::Ask(match result(c.n) {
            Some(r) => (
                Phase::Done,
                Decision::Finish(Verdict::CouldNotReproduce {
                    run_id: r.pass_run.run_id.clone(),
                }),
            ),
            None => run(c.n),
        });
    };
    if hi == 0 {
        let r = result(0).expect("a failure was found at step 0");
        return Searched::Ask((
            Phase::Done,
            Decision::Finish(Verdict::MinimalFails {
                run_id: r.run.run_id.clone(),
                stage: stage_of(r.run),
            }),
        ));
    }
    let Some(lo) = (0..hi).rev().find(|&k| result(k).is_some_and(|r| r.passed)) else {
        return Searched::Ask(run(0));
    };
    if hi - lo > 1 {
        let next = match c.options.strategy {
            Strategy::Linear => lo + 1,
            Strategy::Binary => lo + (hi - lo) / 2,
        };
        return Searched::Ask(run(next));
    }
    Searched::Found(Boundary { lo, hi })
}

#[cfg(test)]
#[path = "reduced_tests.rs"]
mod tests;
