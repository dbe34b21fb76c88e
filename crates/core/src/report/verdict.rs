//! The verdict of one workflow: what the session found (first failure, minimal fails, could
//! not reproduce, flaky, preflight, inconclusive, incomplete or in progress), the first memory
//! fallback before it, and the sentence that says so.

use super::load::SessionData;
use super::model::{LadderRow, Verdict, VerdictKind};
use super::naming::{is_main, outcome_name, short, stop_reason};
use crate::session::journal::{
    CrashCheck, RunStatus, SessionState, Verdict as SessionVerdict, WorkflowJob,
};

fn progress_text(job: &WorkflowJob, steps_total: usize) -> String {
    let done = job
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Done)
        .count();
    let mut parts = vec![format!(
        "{done} run{} recorded on a ladder of steps 0–{steps_total}",
        if done == 1 { "" } else { "s" }
    )];
    if let Some(p) = job
        .runs
        .iter()
        .filter(|r| is_main(r.role) && r.passed())
        .max_by_key(|r| r.step)
    {
        parts.push(format!(
            "highest passing step so far: {} ({})",
            p.step, p.increment
        ));
    }
    if let Some(f) = job
        .runs
        .iter()
        .filter(|r| is_main(r.role) && r.failed())
        .min_by_key(|r| r.step)
    {
        parts.push(format!(
            "lowest failing step so far: {} ({})",
            f.step, f.increment
        ));
    }
    if let Some(r) = job.runs.iter().find(|r| r.status == RunStatus::InFlight) {
        parts.push(format!("step {} ({}) is running", r.step, r.increment));
    }
    parts.join("; ")
}

/// How often the crash of run `run_id` was seen, when its re-runs confirmed it.
fn reproduced(job: &WorkflowJob, run_id: &str, n: u32) -> Option<u32> {
    let run = job.runs.iter().find(|r| r.run_id == run_id)?;
    match job.crash_check(run, n) {
        CrashCheck::Confirmed { times, .. } => Some(times),
        _ => None,
    }
}

/// The verdict of `job`, read with its ladder rows.
pub(super) fn verdict(
    data: &SessionData,
    job: &WorkflowJob,
    steps_total: usize,
    ladder: &[LadderRow],
    increment_of: &dyn Fn(usize) -> String,
) -> Verdict {
    let row = |k: usize| ladder.iter().find(|r| r.step == k);
    let mut v = Verdict::in_progress(steps_total);
    match &job.verdict {
        Some(SessionVerdict::FirstFailure {
            step,
            increment,
            stage,
            run_id,
            ..
        }) => {
            v.reproduced = reproduced(job, run_id, data.session.options.confirm_crashes);
            v.kind = VerdictKind::FirstFailure;
            v.step = Some(*step);
            v.increment = Some(increment.clone());
            v.parts = job
                .steps
                .iter()
                .find(|s| s.index == *step)
                .map(|s| crate::ladder::named_parts(&s.changes))
                .unwrap_or_default();
            v.failure_kind = row(*step).and_then(|r| r.failure_kind);
            v.stage = stage.or_else(|| row(*step).and_then(|r| r.stage));
        }
        Some(SessionVerdict::MinimalFails { stage, run_id }) => {
            v.reproduced = reproduced(job, run_id, data.session.options.confirm_crashes);
            v.kind = VerdictKind::MinimalFails;
            v.step = Some(0);
            v.increment = Some(increment_of(0));
            v.failure_kind = row(0).and_then(|r| r.failure_kind);
            v.stage = stage.or_else(|| row(0).and_then(|r| r.stage));
        }
        Some(SessionVerdict::CouldNotReproduce { .. }) => {
            v.kind = VerdictKind::CouldNotReproduce;
            v.step = Some(steps_total);
            v.increment = Some(increment_of(steps_total));
            // A passing target whose ladder was walked (`--walk-on-pass`): why.
            v.walked = crate::session::decide::walked(job, &data.session.options);
        }
        Some(SessionVerdict::Flaky { counts }) => {
            v.kind = VerdictKind::Flaky;
            let mut sorted = counts.clone();
            sorted.sort_by_key(|c| std::cmp::Reverse(c.step));
            if let Some(top) = sorted.first() {
                v.step = Some(top.step);
                v.increment = Some(top.increment.clone());
            }
            v.reason = Some(
                sorted
                    .iter()
                    .map(|c| {
                        format!(
                            "step {} ({}) passed {} and failed {} of {} runs",
                            c.step,
                            c.increment,
                            c.passed,
                            c.failed,
                            c.passed + c.failed
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
            );
        }
        Some(SessionVerdict::PreflightFailed {
            unknown_nodes,
            missing_models,
            other,
        }) => {
            v.kind = VerdictKind::PreflightFailed;
            let mut parts = Vec::new();
            if !unknown_nodes.is_empty() {
                parts.push(format!(
                    "{} unknown node class{} ({})",
                    unknown_nodes.len(),
                    if unknown_nodes.len() == 1 { "" } else { "es" },
                    unknown_nodes.join(", ")
                ));
            }
            if !missing_models.is_empty() {
                parts.push(format!(
                    "{} missing model file{}",
                    missing_models.len(),
                    if missing_models.len() == 1 { "" } else { "s" }
                ));
            }
            parts.extend(other.iter().cloned());
            v.reason = Some(if parts.is_empty() {
                "the server or the workflow did not pass the checks".into()
            } else {
                parts.join("; ")
            });
        }
        Some(SessionVerdict::Inconclusive { run_id, detail }) => {
            v.kind = VerdictKind::Inconclusive;
            if let Some(r) = job.runs.iter().find(|r| &r.run_id == run_id) {
                v.step = Some(r.step);
                v.increment = Some(r.increment.clone());
            }
            v.reason = Some(format!("run {} {detail}", short(run_id)));
        }
        Some(SessionVerdict::Checked { run_id }) => {
            v.kind = VerdictKind::Check;
            if let Some(r) = job.runs.iter().find(|r| &r.run_id == run_id) {
                v.step = Some(r.step);
                v.increment = Some(r.increment.clone());
                v.reason = Some(if r.passed() {
                    "good".to_string()
                } else if r.failed() {
                    v.failure_kind = row(r.step).and_then(|row| row.failure_kind);
                    v.stage = r
                        .diagnosis
                        .as_ref()
                        .map(|d| d.stage)
                        .or_else(|| row(r.step).and_then(|row| row.stage));
                    "bad".to_string()
                } else {
                    // Rejected, or interrupted (Ctrl-C, another client).
                    format!(
                        "cannot test — the run was {}",
                        outcome_name(r).replace('_', " ")
                    )
                });
            }
        }
        Some(SessionVerdict::Incomplete { reason, detail }) => {
            v.kind = VerdictKind::Incomplete;
            v.reason = Some(format!(
                "{} ({detail}); {}",
                stop_reason(*reason),
                progress_text(job, steps_total)
            ));
        }
        None => {
            let stopped = match &data.session.state {
                SessionState::Stopped { reason, detail } => Some((*reason, detail.clone())),
                _ => None,
            };
            match stopped {
                Some((reason, detail)) => {
                    v.kind = VerdictKind::Incomplete;
                    v.reason = Some(format!(
                        "{} ({detail}); {}",
                        stop_reason(reason),
                        progress_text(job, steps_total)
                    ));
                }
                None => {
                    v.reason = Some(if job.runs.is_empty() {
                        "not started yet".to_string()
                    } else {
                        progress_text(job, steps_total)
                    });
                }
            }
        }
    }
    // The early warning: the first step that only survived through a memory fallback, when
    // it comes before the first failure (or nothing failed).
    let before = match v.kind {
        VerdictKind::FirstFailure => v.step,
        VerdictKind::CouldNotReproduce => Some(usize::MAX),
        _ => None,
    };
    if let Some(limit) = before {
        if let Some(r) = ladder
            .iter()
            .filter(|r| {
                r.step < limit && r.outcome == "passed" && !r.delivered.memory_fallbacks.is_empty()
            })
            .min_by_key(|r| r.step)
        {
            v.first_fallback_step = Some(r.step);
            v.first_fallback_increment = Some(r.increment.clone());
            v.first_fallbacks = r.delivered.memory_fallbacks.clone();
        }
        if let Some(r) = ladder
            .iter()
            .filter(|r| {
                r.step < limit && r.outcome == "passed" && !r.delivered.memory_pressure.is_empty()
            })
            .min_by_key(|r| r.step)
        {
            v.first_pressure_step = Some(r.step);
            v.first_pressure_increment = Some(r.increment.clone());
            v.first_pressure = r.delivered.memory_pressure.clone();
        }
    }
    v.summary = v.sentence(&|s: &str| s.to_string());
    v
}
