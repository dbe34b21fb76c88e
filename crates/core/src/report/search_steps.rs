//! The report's account of a search at few steps (`--search-steps N`): which runs sampled
//! fewer steps than the workflow's own ("steps N of M"), and how the verdict's boundary was
//! confirmed at full steps — or where a full-step run disagreed and the search went on there.

use super::model::{Disagreement, ReducedRunRow, ReducedSteps, SearchStepsReport};
use super::naming::{is_main, outcome_name, short};
use crate::session::decide::reduced::step_independent;
use crate::session::journal::{self, RunEntry, Verdict, WorkflowJob};

/// A reduced run's steps: the cap and the workflow's own (the highest `steps` it lowered).
pub(super) fn reduced_steps(r: &journal::ReducedSteps) -> ReducedSteps {
    let of = r
        .changes
        .iter()
        .filter(|c| c.input.as_deref() == Some("steps"))
        .filter_map(|c| c.from.as_ref().and_then(|v| v.as_u64()))
        .max()
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(r.cap);
    ReducedSteps { steps: r.cap, of }
}

fn conclusive(r: &RunEntry) -> bool {
    is_main(r.role) && (r.passed() || r.failed())
}

fn word(r: &RunEntry) -> &'static str {
    if r.passed() {
        "passed"
    } else {
        "failed"
    }
}

/// The account for `job`, None when no run was reduced.
pub(super) fn search_steps(
    job: &WorkflowJob,
    increment_of: &dyn Fn(usize) -> String,
) -> Option<SearchStepsReport> {
    let reduced: Vec<&RunEntry> = job.runs.iter().filter(|r| r.is_reduced()).collect();
    let first = reduced.first()?.reduced.as_ref()?;
    let cap = first.cap;
    let of = reduced_steps(first).of;
    let full_runs = job.runs.iter().filter(|r| !r.is_reduced()).count();
    let rows: Vec<ReducedRunRow> = reduced
        .iter()
        .map(|r| ReducedRunRow {
            step: r.step,
            increment: r.increment.clone(),
            run_id: r.run_id.clone(),
            outcome: outcome_name(r),
            stage: r.summary.as_ref().and_then(|s| s.stage),
            steps: r
                .reduced
                .as_ref()
                .map(reduced_steps)
                .unwrap_or(ReducedSteps {
                    steps: cap,
                    of: cap,
                }),
        })
        .collect();
    let mut disagreements = Vec::new();
    for step in 0..job
        .steps
        .len()
        .max(job.runs.iter().map(|r| r.step + 1).max().unwrap_or(0))
    {
        let at = |reduced: bool| {
            job.runs
                .iter()
                .find(|r| r.step == step && conclusive(r) && r.is_reduced() == reduced)
        };
        if let (Some(few), Some(full)) = (at(true), at(false)) {
            if few.passed() != full.passed() {
                disagreements.push(Disagreement {
                    step,
                    increment: increment_of(step),
                    reduced: word(few).into(),
                    full: word(full).into(),
                });
            }
        }
    }
    let by_id = |id: &str| job.runs.iter().find(|r| r.run_id == id);
    let step_name = |step: usize| format!("step {step} ({})", increment_of(step));
    let failure = |r: &RunEntry| match (
        &r.reduced,
        r.summary.as_ref().and_then(|s| s.stage.map(|s| s.as_str())),
    ) {
        (Some(_), Some(stage)) if step_independent(r) => format!(
            "{} failed at {cap} steps in `{stage}`, a stage the step count cannot change, so \
             that failure stands for the full-step run (run `{}`)",
            step_name(r.step),
            short(&r.run_id)
        ),
        _ => format!(
            "{} failed at full steps (run `{}`)",
            step_name(r.step),
            short(&r.run_id)
        ),
    };
    let ends = match &job.verdict {
        Some(Verdict::FirstFailure {
            run_id,
            last_pass_run_id,
            ..
        }) => match (by_id(last_pass_run_id), by_id(run_id)) {
            (Some(pass), Some(fail)) => Some(format!(
                "{} passed at {} (run `{}`) and {}",
                step_name(pass.step),
                if pass.is_reduced() {
                    format!("{cap} steps")
                } else {
                    "full steps".to_string()
                },
                short(&pass.run_id),
                failure(fail)
            )),
            _ => None,
        },
        Some(Verdict::MinimalFails { run_id, .. }) => by_id(run_id).map(failure),
        Some(Verdict::CouldNotReproduce { run_id }) => by_id(run_id).map(|r| {
            format!(
                "the target passed at full steps (run `{}`)",
                short(&r.run_id)
            )
        }),
        _ => None,
    };
    let mut summary = format!(
        "The search sampled {cap} steps instead of the workflow's {of} (`--search-steps \
         {cap}`): {} run(s) at {cap} steps, {full_runs} at full steps.",
        rows.len()
    );
    if !disagreements.is_empty() {
        let said: Vec<String> = disagreements
            .iter()
            .map(|d| {
                format!(
                    "{} {} at full steps though it {} at {cap}",
                    step_name(d.step),
                    d.full,
                    d.reduced
                )
            })
            .collect();
        summary.push_str(&format!(
            " The confirmation disagreed — {} — so the search went on at full steps.",
            said.join("; ")
        ));
    }
    let confirmation = match &ends {
        Some(ends) => {
            summary.push_str(&format!(" Confirmed at full steps: {ends}."));
            if disagreements.is_empty() {
                "confirmed"
            } else {
                "searched_on"
            }
        }
        None => {
            summary.push_str(" No boundary has been confirmed at full steps yet.");
            "pending"
        }
    };
    Some(SearchStepsReport {
        cap,
        reduced_runs: rows,
        full_runs,
        disagreements,
        confirmation: confirmation.to_string(),
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::journal::{Outcome, RunRole, RunStatus, RunSummary};
    use crate::vocab::Stage;
    use crate::workflow::Change;
    use serde_json::json;

    fn run(step: usize, cap: Option<u32>, pass: bool, stage: &str) -> RunEntry {
        let id = format!("run-{step}-{}", cap.unwrap_or(0));
        RunEntry {
            run_id: id.clone(),
            step,
            increment: format!("inc{step}"),
            role: RunRole::Search,
            dir: id,
            workflow_sha256: String::new(),
            status: RunStatus::Done,
            started_at: String::new(),
            finished_at: None,
            outcome: Some(if pass {
                Outcome::Passed
            } else {
                Outcome::Failed {
                    node_id: "3".into(),
                    node_type: "KSampler".into(),
                    exception_type: "torch.OutOfMemoryError".into(),
                    exception_message: "CUDA out of memory".into(),
                }
            }),
            summary: Some(RunSummary {
                stage: (!pass).then(|| Stage::from(stage)),
                ..RunSummary::default()
            }),
            diagnosis: None,
            confirms: None,
            fingerprint: None,
            reduced: cap.map(|cap| journal::ReducedSteps {
                cap,
                changes: vec![Change {
                    node: "3".into(),
                    class_type: "KSampler".into(),
                    action: "set".into(),
                    input: Some("steps".into()),
                    from: Some(json!(25)),
                    to: Some(json!(cap)),
                }],
            }),
        }
    }

    fn job(runs: Vec<RunEntry>, verdict: Verdict) -> WorkflowJob {
        let mut j: WorkflowJob = serde_json::from_value(json!({
            "name": "wf", "source": "wf.json", "target_sha256": "t",
            "steps": [], "phase": "done", "runs": []
        }))
        .unwrap();
        j.runs = runs;
        j.verdict = Some(verdict);
        j
    }

    fn first_failure(fail: &RunEntry, pass: &RunEntry) -> Verdict {
        Verdict::FirstFailure {
            step: fail.step,
            increment: fail.increment.clone(),
            run_id: fail.run_id.clone(),
            last_pass_step: pass.step,
            last_pass_run_id: pass.run_id.clone(),
            stage: None,
            not_run: vec![],
        }
    }

    #[test]
    fn a_step_independent_failure_stands_and_the_last_pass_is_confirmed() {
        let runs = vec![
            run(0, Some(4), true, ""),
            run(2, Some(4), false, "sample_first"),
            run(1, Some(4), true, ""),
            run(1, None, true, ""),
        ];
        let v = first_failure(&runs[1], &runs[3]);
        let j = job(runs, v);
        let r = search_steps(&j, &|k| format!("inc{k}")).unwrap();
        assert_eq!((r.cap, r.reduced_runs.len(), r.full_runs), (4, 3, 1));
        assert_eq!(r.reduced_runs[0].steps, ReducedSteps { steps: 4, of: 25 });
        assert_eq!(r.confirmation, "confirmed");
        assert!(r.disagreements.is_empty());
        assert!(
            r.summary.contains("instead of the workflow's 25"),
            "{}",
            r.summary
        );
        assert!(
            r.summary.contains("step 1 (inc1) passed at full steps")
                && r.summary.contains("a stage the step count cannot change"),
            "{}",
            r.summary
        );
    }

    #[test]
    fn a_disagreement_is_named_and_the_search_went_on() {
        // Everything passed at 4 steps; at full steps step 1 fails, step 0 passes.
        let runs = vec![
            run(0, Some(4), true, ""),
            run(2, Some(4), true, ""),
            run(1, Some(4), true, ""),
            run(1, None, false, "sample_middle"),
            run(0, None, true, ""),
        ];
        let v = first_failure(&runs[3], &runs[4]);
        let j = job(runs, v);
        let r = search_steps(&j, &|k| format!("inc{k}")).unwrap();
        assert_eq!(r.confirmation, "searched_on");
        assert_eq!(
            r.disagreements,
            vec![Disagreement {
                step: 1,
                increment: "inc1".into(),
                reduced: "passed".into(),
                full: "failed".into()
            }]
        );
        assert!(
            r.summary
                .contains("step 1 (inc1) failed at full steps though it passed at 4"),
            "{}",
            r.summary
        );
    }

    #[test]
    fn no_reduced_run_no_account() {
        let runs = vec![run(0, None, true, ""), run(1, None, false, "decode")];
        let v = first_failure(&runs[1], &runs[0]);
        assert!(search_steps(&job(runs, v), &|k| format!("inc{k}")).is_none());
    }
}
