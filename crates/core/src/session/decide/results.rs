//! What the decision reads from a workflow's runs: the conclusive result that stands for each
//! ladder step (crash confirmations, `--repeat` counts and the environment taken into account),
//! the anchor runs of an environment, and the [`Decision`] the rules give. Below the rules and
//! the reduced search, which both read it.

use super::super::journal::{CrashCheck, RunEntry, RunRole, SessionOptions, Verdict, WorkflowJob};

/// What to do next for one workflow.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Submit a run of `step` (for a control: the control variant of that step).
    Run {
        /// Ladder step.
        step: usize,
        /// Why.
        role: RunRole,
    },
    /// Re-run a crashed run of `step` to confirm the crash (`--confirm-crashes`).
    Confirm {
        /// Ladder step (for a control: the step of its increment).
        step: usize,
        /// The crashed run.
        crashed: String,
    },
    /// The workflow has its verdict.
    Finish(Verdict),
}

/// The recorded, conclusive result of a step.
#[derive(Debug, Clone, Copy)]
pub(super) struct StepResult<'a> {
    /// The run that stands for the step (a crash that was not reproduced: that crashed run).
    pub run: &'a RunEntry,
    /// The step passed (a crash not reproduced counts as passed).
    pub passed: bool,
    /// The run that shows the pass (the passing re-run when a crash was not reproduced).
    pub pass_run: &'a RunEntry,
}

/// Whether a conclusive run counts as passed, crash confirmation taken into account (every
/// crash here is settled: [`decide`](super::decide) confirms pending ones first).
pub(super) fn resolve<'a>(job: &'a WorkflowJob, r: &'a RunEntry, n: u32) -> StepResult<'a> {
    match job.crash_check(r, n) {
        CrashCheck::NotReproduced { by } => StepResult {
            run: r,
            passed: true,
            pass_run: job.runs.iter().find(|x| x.run_id == by).unwrap_or(r),
        },
        _ => StepResult {
            run: r,
            passed: r.passed(),
            pass_run: r,
        },
    }
}

/// The recorded, conclusive result of `step`: the first done run (not a control, repeat or
/// re-run) that passed or failed, in submission order, with its crash confirmation. A run made
/// in the current environment `env` (fingerprint id) comes before runs made in others.
pub(super) fn first_result<'a>(
    job: &'a WorkflowJob,
    step: usize,
    options: &SessionOptions,
    env: Option<&str>,
) -> Option<StepResult<'a>> {
    let counts = |r: &&RunEntry| {
        r.step == step
            && !matches!(
                r.role,
                RunRole::Control | RunRole::Repeat | RunRole::Confirm
            )
            && conclusive(r)
    };
    let here = env.and_then(|e| {
        job.runs
            .iter()
            .filter(counts)
            .find(|r| r.fingerprint.as_deref() == Some(e))
    });
    here.or_else(|| job.runs.iter().find(counts))
        .map(|r| resolve(job, r, options.confirm_crashes))
}

/// The run that stands for `step` in the journal's latest state, as the decision reads it:
/// the conclusive run [`decide`](super::decide) counts for the step (in the environment of the workflow's
/// last run, crash confirmations taken into account), so an interrupted or rejected run that
/// was re-run on `resume` never stands for its step. With no conclusive run yet: the step's
/// latest ladder run (its interruption, or the run still in flight). With `--search-steps`, a
/// full-step result stands before a reduced-step one (the confirmation decides). The report's
/// ladder uses it.
pub fn step_run<'a>(
    job: &'a WorkflowJob,
    step: usize,
    options: &SessionOptions,
) -> Option<&'a RunEntry> {
    let env = job.runs.iter().rev().find_map(|r| r.fingerprint.as_deref());
    let full_step = job
        .runs
        .iter()
        .any(|r| r.is_reduced())
        .then(|| WorkflowJob {
            runs: job
                .runs
                .iter()
                .filter(|r| !r.is_reduced())
                .cloned()
                .collect(),
            ..job.clone()
        });
    let full_id = full_step
        .as_ref()
        .and_then(|f| first_result(f, step, options, env).map(|r| r.run.run_id.clone()));
    full_id
        .and_then(|id| job.runs.iter().find(|r| r.run_id == id))
        .or_else(|| first_result(job, step, options, env).map(|r| r.run))
        .or_else(|| {
            job.runs.iter().rev().find(|r| {
                r.step == step
                    && matches!(
                        r.role,
                        RunRole::Minimal | RunRole::Target | RunRole::Search | RunRole::Anchor
                    )
            })
        })
}

/// `--on-drift reanchor`: when the result of `step` was made in another environment than the
/// current one, re-run it here (an `anchor` run).
pub(super) fn anchor(
    job: &WorkflowJob,
    step: usize,
    options: &SessionOptions,
    env: Option<&str>,
) -> Option<Decision> {
    let env = env?;
    let r = first_result(job, step, options, Some(env))?;
    let made_in = r.run.fingerprint.as_deref()?;
    (made_in != env).then_some(Decision::Run {
        step,
        role: RunRole::Anchor,
    })
}

pub(super) fn conclusive(r: &RunEntry) -> bool {
    r.passed() || r.failed()
}

/// All conclusive runs of `step` (not controls; a crash and its re-runs count once, as their
/// confirmation says): (passed, failed).
pub(super) fn counts(job: &WorkflowJob, step: usize, options: &SessionOptions) -> (u32, u32) {
    job.runs
        .iter()
        .filter(|r| {
            r.step == step
                && !matches!(r.role, RunRole::Control | RunRole::Confirm)
                && conclusive(r)
        })
        .fold((0, 0), |(p, f), r| {
            let passed = resolve(job, r, options.confirm_crashes).passed;
            (p + u32::from(passed), f + u32::from(!passed))
        })
}

/// The first crashed run (not a control) whose confirmation still needs a re-run.
pub(super) fn pending_crash<'a>(
    job: &'a WorkflowJob,
    options: &SessionOptions,
) -> Option<&'a RunEntry> {
    job.runs.iter().find(|r| {
        r.role != RunRole::Control
            && job.crash_check(r, options.confirm_crashes) == CrashCheck::Pending
    })
}

pub(super) fn stage_of(r: &RunEntry) -> Option<crate::vocab::Stage> {
    r.summary.as_ref().and_then(|s| s.stage)
}

pub(super) fn role_for(step: usize, n: usize) -> RunRole {
    if step == 0 {
        RunRole::Minimal
    } else if step == n {
        RunRole::Target
    } else {
        RunRole::Search
    }
}
