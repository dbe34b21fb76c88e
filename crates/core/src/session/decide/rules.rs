//! The decision rules of [`decide_in`], as ordered tables of small named rules. The
//! rules before the search look at the endpoints; the search finds the boundary (last pass,
//! first failure), or, when the target passed, the walk looks for the first step under memory
//! pressure (`--walk-on-pass`); the rules after it settle the boundary. In each table the
//! first rule that answers decides, and the order is the semantics.

use super::super::journal::{
    FlakyCount, Outcome, Phase, RunEntry, RunRole, SessionOptions, Strategy,
};
use super::super::journal::{RunSummary, Verdict, WalkOnPass, WorkflowJob};
use super::results::{
    anchor, conclusive, counts, first_result, pending_crash, role_for, stage_of, Decision,
};
use crate::analytics::walk::{describe, Cue};

/// What every rule reads: the job, the options and the current environment.
pub(super) struct Ctx<'a> {
    pub job: &'a WorkflowJob,
    pub options: &'a SessionOptions,
    /// The fingerprint id of the environment the next run is made in, when known.
    pub env: Option<&'a str>,
    /// The last step (the target).
    pub n: usize,
}

/// The next action and the phase it belongs to.
pub(super) type Next = (Phase, Decision);

/// The boundary found by the search: (last passing step, first failing step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Boundary {
    pub lo: usize,
    pub hi: usize,
}

/// What the search gives: the boundary, or the next run (or verdict) it needs first.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Searched {
    /// Both ends are known.
    Found(Boundary),
    /// The search goes on (or ends) with this.
    Ask(Next),
}

/// A rule before the search.
pub(super) type EndpointRule = fn(&Ctx) -> Option<Next>;
/// A rule once the boundary is known.
pub(super) type BoundaryRule = fn(&Ctx, Boundary) -> Option<Next>;

/// The rules tried before the search, in order.
pub(super) const BEFORE_SEARCH: &[(&str, EndpointRule)] = &[
    ("rejected", rejected),
    ("pending_crash", confirm_crash),
    ("minimal", minimal),
    ("target", target),
    ("walk", walk),
];

/// The rules tried once the boundary is known, in order; when none answers, the verdict is
/// [`first_failure`].
pub(super) const AFTER_SEARCH: &[(&str, BoundaryRule)] = &[
    ("anchor_ends", anchor_ends),
    ("repeat", repeat),
    ("controls", controls),
];

/// [`decide`](super::decide) in the environment `env` (the fingerprint id taken before the next run): a step
/// result made in `env` counts before one made elsewhere, and the boundary (last pass, first
/// failure) is re-anchored in `env` (`anchor` runs) before the search goes on and before the
/// verdict, so both ends of the verdict come from one environment.
///
/// The rules of [`BEFORE_SEARCH`] in order, then the search, then the rules of
/// [`AFTER_SEARCH`] in order; the first that answers decides, and with none the
/// verdict is the first failure.
pub(crate) fn decide_in(
    job: &WorkflowJob,
    options: &SessionOptions,
    env: Option<&str>,
) -> (Phase, Decision) {
    let ctx = Ctx {
        job,
        options,
        env,
        n: job.steps.len().saturating_sub(1),
    };
    if let Some(next) = BEFORE_SEARCH.iter().find_map(|(_, rule)| rule(&ctx)) {
        return next;
    }
    let boundary = match search(&ctx) {
        Searched::Found(boundary) => boundary,
        Searched::Ask(next) => return next,
    };
    AFTER_SEARCH
        .iter()
        .find_map(|(_, rule)| rule(&ctx, boundary))
        .unwrap_or_else(|| first_failure(&ctx, boundary))
}

fn could_not_reproduce(run_id: &str) -> Next {
    (
        Phase::Done,
        Decision::Finish(Verdict::CouldNotReproduce {
            run_id: run_id.to_string(),
        }),
    )
}

/// A rejection says nothing about the variant and will not change on a re-run.
fn rejected(c: &Ctx) -> Option<Next> {
    c.job.runs.iter().find_map(|r| match &r.outcome {
        Some(Outcome::Rejected { message }) if r.role != RunRole::Control => Some((
            Phase::Done,
            Decision::Finish(Verdict::Inconclusive {
                run_id: r.run_id.clone(),
                detail: format!(
                    "the server rejected step {} ({}): {message}",
                    r.step, r.increment
                ),
            }),
        )),
        _ => None,
    })
}

/// A crash decides nothing alone: re-run it before anything else (`--confirm-crashes`).
fn confirm_crash(c: &Ctx) -> Option<Next> {
    let r = pending_crash(c.job, c.options)?;
    let phase = match r.role {
        RunRole::Minimal => Phase::Minimal,
        RunRole::Target => Phase::Target,
        RunRole::Repeat => Phase::Repeat,
        _ => Phase::Search,
    };
    Some((
        phase,
        Decision::Confirm {
            step: r.step,
            crashed: r.run_id.clone(),
        },
    ))
}

/// Endpoint: the minimal variant must pass (and with no increment, that is the verdict).
fn minimal(c: &Ctx) -> Option<Next> {
    match first_result(c.job, 0, c.options, c.env) {
        None => Some((
            Phase::Minimal,
            Decision::Run {
                step: 0,
                role: RunRole::Minimal,
            },
        )),
        Some(r) if !r.passed => Some((
            Phase::Done,
            Decision::Finish(Verdict::MinimalFails {
                run_id: r.run.run_id.clone(),
                stage: stage_of(r.run),
            }),
        )),
        Some(r) if c.n == 0 => Some(could_not_reproduce(&r.pass_run.run_id)),
        Some(_) => None,
    }
}

/// Endpoint: the target must fail (unless assumed).
fn target(c: &Ctx) -> Option<Next> {
    if c.options.assume_fails {
        return None;
    }
    match first_result(c.job, c.n, c.options, c.env) {
        None => Some((
            Phase::Target,
            Decision::Run {
                step: c.n,
                role: RunRole::Target,
            },
        )),
        Some(r) if r.passed && !walks(c, r.pass_run) => {
            Some(could_not_reproduce(&r.pass_run.run_id))
        }
        Some(_) => None,
    }
}

/// Why the ladder is walked after the target passed with `summary` under `walk`, in words
/// (the cues of [`crate::analytics::walk`]); None when it is not (`never`, or `auto` without a
/// cue).
pub(super) fn walk_reason(walk: WalkOnPass, summary: Option<&RunSummary>) -> Option<String> {
    let cues: &[Cue] = summary.map_or(&[], |s| &s.walk_cues);
    let said = describe(cues);
    match walk {
        WalkOnPass::Never => None,
        WalkOnPass::Always if cues.is_empty() => Some("--walk-on-pass always".to_string()),
        WalkOnPass::Always => Some(format!("--walk-on-pass always ({said})")),
        WalkOnPass::Auto if cues.is_empty() => None,
        WalkOnPass::Auto => Some(said),
    }
}

/// Whether the passing target run `pass` makes the session walk the ladder (`--walk-on-pass`:
/// always, or auto with a cue recorded on it).
fn walks(c: &Ctx, pass: &RunEntry) -> bool {
    walk_reason(c.options.walk_on_pass, pass.summary.as_ref()).is_some()
}

/// The passing target's run when the session walks the ladder after it (not with
/// `--assume-fails`, whose search walks on its own).
pub(super) fn walked_target<'a>(c: &Ctx<'a>) -> Option<&'a RunEntry> {
    if c.options.assume_fails || c.n == 0 {
        return None;
    }
    let r = first_result(c.job, c.n, c.options, c.env).filter(|r| r.passed)?;
    walks(c, r.pass_run).then_some(r.pass_run)
}

/// Why the ladder is walked after the passing target, in words (the cue or option); None when
/// it is not.
pub(super) fn walked(c: &Ctx) -> Option<String> {
    let target = walked_target(c)?;
    walk_reason(c.options.walk_on_pass, target.summary.as_ref())
}

/// The walk after a passing target (`--walk-on-pass`): one step at a time from step 1, each
/// judged against the previous passing step (a binary jump would compare with a step far
/// below and hide the streaming), until the first step with memory pressure evidence (the
/// verdict stays "could not reproduce", with that step named). A failure on the way (with
/// `--strict`, a pass under memory pressure) hands over to the search and the boundary rules.
fn walk(c: &Ctx) -> Option<Next> {
    let target = walked_target(c)?;
    for k in 1..c.n {
        match first_result(c.job, k, c.options, c.env) {
            None => return Some(step_up(c, k)),
            Some(r) if !r.passed => return None,
            Some(r) if under_pressure(r.pass_run) => {
                return Some(could_not_reproduce(&target.run_id))
            }
            Some(_) => {}
        }
    }
    Some(could_not_reproduce(&target.run_id))
}

/// The steps the walk after a passing target may still run (every one up to the step before
/// the target, until the first with pressure or a failure); None when the session does not
/// walk (for the session ETA).
pub(super) fn walk_left(c: &Ctx) -> Option<Vec<usize>> {
    walked_target(c)?;
    let mut left = Vec::new();
    for k in 1..c.n {
        match first_result(c.job, k, c.options, c.env) {
            None => left.push(k),
            Some(r) if !r.passed || under_pressure(r.pass_run) => break,
            Some(_) => {}
        }
    }
    Some(left)
}

/// A passed run that carries memory pressure evidence.
fn under_pressure(r: &RunEntry) -> bool {
    r.summary
        .as_ref()
        .is_some_and(|s| !s.delivered.memory_pressure.is_empty())
}

/// The search for the boundary under the session's strategy: the boundary, or the next run
/// (or verdict) the search needs first.
pub(super) fn search(c: &Ctx) -> Searched {
    match c.options.strategy {
        Strategy::Linear => linear(c),
        Strategy::Binary => binary(c),
    }
}

/// Walks up from step 1 to the first failure.
fn linear(c: &Ctx) -> Searched {
    let mut k = 1;
    loop {
        match first_result(c.job, k, c.options, c.env) {
            None => return Searched::Ask(step_up(c, k)),
            Some(r) if r.passed => {
                if k == c.n {
                    return Searched::Ask(could_not_reproduce(&r.pass_run.run_id));
                }
                k += 1;
            }
            Some(_) => return Searched::Found(Boundary { lo: k - 1, hi: k }),
        }
    }
}

/// One step up the ladder to step `k`: first, the last pass (`k − 1`) must hold in this
/// environment (re-anchored after drift), then `k` runs.
fn step_up(c: &Ctx, k: usize) -> Next {
    if let Some(d) = anchor(c.job, k - 1, c.options, c.env) {
        return (Phase::Search, d);
    }
    (
        Phase::Search,
        Decision::Run {
            step: k,
            role: role_for(k, c.n),
        },
    )
}

/// Halves the interval between the last known pass and the first known failure.
fn binary(c: &Ctx) -> Searched {
    let n = c.n;
    let result = |k: usize| first_result(c.job, k, c.options, c.env).map(|r| r.passed);
    let hi = (1..=n).find(|&k| result(k) == Some(false)).unwrap_or(n);
    if hi == n {
        if let Some(r) = first_result(c.job, n, c.options, c.env).filter(|r| r.passed) {
            return Searched::Ask(could_not_reproduce(&r.pass_run.run_id));
        }
    }
    let lo = (0..hi)
        .rev()
        .find(|&k| result(k) == Some(true))
        .unwrap_or(0);
    if hi - lo > 1 {
        if let Some(d) = anchor(c.job, lo, c.options, c.env) {
            return Searched::Ask((Phase::Search, d));
        }
        let mid = lo + (hi - lo) / 2;
        return Searched::Ask((
            Phase::Search,
            Decision::Run {
                step: mid,
                role: role_for(mid, n),
            },
        ));
    }
    if result(hi).is_none() {
        // Only with --assume-fails: confirm the target fails.
        return Searched::Ask((
            Phase::Search,
            Decision::Run {
                step: hi,
                role: role_for(hi, n),
            },
        ));
    }
    Searched::Found(Boundary { lo, hi })
}

/// The verdict's two ends come from one environment (the current one).
fn anchor_ends(c: &Ctx, b: Boundary) -> Option<Next> {
    [b.lo, b.hi]
        .into_iter()
        .find_map(|step| anchor(c.job, step, c.options, c.env))
        .map(|d| (Phase::Search, d))
}

/// `--repeat`: re-run the first failing and the last passing step; any disagreement is flaky.
fn repeat(c: &Ctx, b: Boundary) -> Option<Next> {
    let options = c.options;
    if options.repeat == 0 {
        return None;
    }
    for step in [b.hi, b.lo] {
        let (p, f) = counts(c.job, step, options);
        if p + f < 1 + options.repeat {
            return Some((
                Phase::Repeat,
                Decision::Run {
                    step,
                    role: RunRole::Repeat,
                },
            ));
        }
    }
    let flaky: Vec<FlakyCount> = [b.lo, b.hi]
        .iter()
        .map(|&step| {
            let (passed, failed) = counts(c.job, step, options);
            FlakyCount {
                step,
                increment: c.job.steps[step].increment.clone(),
                passed,
                failed,
            }
        })
        .collect();
    let disagree = flaky[0].failed > 0 || flaky[1].passed > 0;
    disagree.then_some((
        Phase::Done,
        Decision::Finish(Verdict::Flaky { counts: flaky }),
    ))
}

/// `--controls`: minimal + each later increment alone.
fn controls(c: &Ctx, b: Boundary) -> Option<Next> {
    if !c.options.controls {
        return None;
    }
    let control = c
        .job
        .controls
        .iter()
        .filter(|ctl| ctl.step > b.hi)
        .find(|ctl| {
            !c.job
                .runs
                .iter()
                .any(|r| r.role == RunRole::Control && r.step == ctl.step && conclusive(r))
        })?;
    Some((
        Phase::Controls,
        Decision::Run {
            step: control.step,
            role: RunRole::Control,
        },
    ))
}

/// The verdict: the first failing step, with the last pass and the steps never run.
pub(super) fn first_failure(c: &Ctx, b: Boundary) -> Next {
    let Boundary { lo, hi } = b;
    let job = c.job;
    let fail = first_result(job, hi, c.options, c.env)
        .expect("the boundary's failing step has a result")
        .run;
    let pass = first_result(job, lo, c.options, c.env)
        .expect("the boundary's passing step has a result")
        .pass_run;
    let not_run: Vec<usize> = (1..c.n)
        .filter(|&k| {
            !job.runs
                .iter()
                .any(|r| r.step == k && r.role != RunRole::Control)
        })
        .collect();
    (
        Phase::Done,
        Decision::Finish(Verdict::FirstFailure {
            step: hi,
            increment: job.steps[hi].increment.clone(),
            run_id: fail.run_id.clone(),
            last_pass_step: lo,
            last_pass_run_id: pass.run_id.clone(),
            stage: stage_of(fail),
            not_run,
        }),
    )
}
