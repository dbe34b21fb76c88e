//! The decision function of the bisection state machine: from a workflow's recorded runs (the
//! journal) to the next run or the verdict. Pure, so resuming is recomputing: completed runs
//! are never repeated because the decision sees them.

use super::journal::{
    FlakyCount, Phase, RunEntry, RunRole, SessionOptions, Strategy, Verdict, WorkflowJob,
};

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
    /// The workflow has its verdict.
    Finish(Verdict),
}

/// The recorded, conclusive result of `step`: the first done run (not a control) that passed
/// or failed, in submission order.
fn first_result(job: &WorkflowJob, step: usize) -> Option<&RunEntry> {
    job.runs.iter().find(|r| {
        r.step == step && r.role != RunRole::Control && r.role != RunRole::Repeat && conclusive(r)
    })
}

fn conclusive(r: &RunEntry) -> bool {
    r.passed() || r.failed()
}

/// All conclusive runs of `step` (not controls): (passed, failed).
fn counts(job: &WorkflowJob, step: usize) -> (u32, u32) {
    job.runs
        .iter()
        .filter(|r| r.step == step && r.role != RunRole::Control)
        .fold((0, 0), |(p, f), r| {
            (p + u32::from(r.passed()), f + u32::from(r.failed()))
        })
}

fn stage_of(r: &RunEntry) -> Option<String> {
    r.summary.as_ref().and_then(|s| s.stage.clone())
}

fn role_for(step: usize, n: usize) -> RunRole {
    if step == 0 {
        RunRole::Minimal
    } else if step == n {
        RunRole::Target
    } else {
        RunRole::Search
    }
}

/// The next action for `job` under `options`, and the phase it belongs to.
pub fn decide(job: &WorkflowJob, options: &SessionOptions) -> (Phase, Decision) {
    let n = job.steps.len().saturating_sub(1);
    // A rejection says nothing about the variant and will not change on a re-run.
    if let Some(r) = job.runs.iter().find(|r| {
        r.role != RunRole::Control
            && matches!(r.outcome, Some(super::journal::Outcome::Rejected { .. }))
    }) {
        let message = match &r.outcome {
            Some(super::journal::Outcome::Rejected { message }) => message.clone(),
            _ => String::new(),
        };
        return (
            Phase::Done,
            Decision::Finish(Verdict::Inconclusive {
                run_id: r.run_id.clone(),
                detail: format!(
                    "the server rejected step {} ({}): {message}",
                    r.step, r.increment
                ),
            }),
        );
    }

    // Endpoint: the minimal variant must pass.
    match first_result(job, 0) {
        None => {
            return (
                Phase::Minimal,
                Decision::Run {
                    step: 0,
                    role: RunRole::Minimal,
                },
            )
        }
        Some(r) if r.failed() => {
            let verdict = Verdict::MinimalFails {
                run_id: r.run_id.clone(),
                stage: stage_of(r),
            };
            return (Phase::Done, Decision::Finish(verdict));
        }
        Some(r) if n == 0 => {
            return (
                Phase::Done,
                Decision::Finish(Verdict::CouldNotReproduce {
                    run_id: r.run_id.clone(),
                }),
            )
        }
        Some(_) => {}
    }

    // Endpoint: the target must fail (unless assumed).
    if !options.assume_fails {
        match first_result(job, n) {
            None => {
                return (
                    Phase::Target,
                    Decision::Run {
                        step: n,
                        role: RunRole::Target,
                    },
                )
            }
            Some(r) if r.passed() => {
                return (
                    Phase::Done,
                    Decision::Finish(Verdict::CouldNotReproduce {
                        run_id: r.run_id.clone(),
                    }),
                )
            }
            Some(_) => {}
        }
    }

    // Search for the boundary: (last passing step, first failing step).
    let (lo, hi) = match options.strategy {
        Strategy::Linear => {
            let mut k = 1;
            loop {
                match first_result(job, k) {
                    None => {
                        return (
                            Phase::Search,
                            Decision::Run {
                                step: k,
                                role: role_for(k, n),
                            },
                        )
                    }
                    Some(r) if r.passed() => {
                        if k == n {
                            return (
                                Phase::Done,
                                Decision::Finish(Verdict::CouldNotReproduce {
                                    run_id: r.run_id.clone(),
                                }),
                            );
                        }
                        k += 1;
                    }
                    Some(_) => break (k - 1, k),
                }
            }
        }
        Strategy::Binary => {
            let result = |k: usize| first_result(job, k).map(|r| r.passed());
            let hi = (1..=n).find(|&k| result(k) == Some(false)).unwrap_or(n);
            if hi == n {
                if let Some(r) = first_result(job, n).filter(|r| r.passed()) {
                    return (
                        Phase::Done,
                        Decision::Finish(Verdict::CouldNotReproduce {
                            run_id: r.run_id.clone(),
                        }),
                    );
                }
            }
            let lo = (0..hi)
                .rev()
                .find(|&k| result(k) == Some(true))
                .unwrap_or(0);
            if hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                return (
                    Phase::Search,
                    Decision::Run {
                        step: mid,
                        role: role_for(mid, n),
                    },
                );
            }
            if result(hi).is_none() {
                // Only with --assume-fails: confirm the target fails.
                return (
                    Phase::Search,
                    Decision::Run {
                        step: hi,
                        role: role_for(hi, n),
                    },
                );
            }
            (lo, hi)
        }
    };

    // --repeat: re-run the first failing and the last passing step.
    if options.repeat > 0 {
        for step in [hi, lo] {
            let (p, f) = counts(job, step);
            if p + f < 1 + options.repeat {
                return (
                    Phase::Repeat,
                    Decision::Run {
                        step,
                        role: RunRole::Repeat,
                    },
                );
            }
        }
        let flaky: Vec<FlakyCount> = [lo, hi]
            .iter()
            .map(|&step| {
                let (passed, failed) = counts(job, step);
                FlakyCount {
                    step,
                    increment: job.steps[step].increment.clone(),
                    passed,
                    failed,
                }
            })
            .collect();
        let disagree = flaky[0].failed > 0 || flaky[1].passed > 0;
        if disagree {
            return (
                Phase::Done,
                Decision::Finish(Verdict::Flaky { counts: flaky }),
            );
        }
    }

    // --controls: minimal + each later increment alone.
    if options.controls {
        for control in job.controls.iter().filter(|c| c.step > hi) {
            let done = job
                .runs
                .iter()
                .any(|r| r.role == RunRole::Control && r.step == control.step && conclusive(r));
            if !done {
                return (
                    Phase::Controls,
                    Decision::Run {
                        step: control.step,
                        role: RunRole::Control,
                    },
                );
            }
        }
    }

    let fail = first_result(job, hi).expect("the boundary's failing step has a result");
    let pass = first_result(job, lo).expect("the boundary's passing step has a result");
    let not_run: Vec<usize> = (1..n)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::journal::{
        run_dir_name, ControlVariant, Outcome, RunStatus, RunSummary, StepInfo,
    };

    fn job(n: usize) -> WorkflowJob {
        let names = [
            "minimal",
            "resolution",
            "frames",
            "lora",
            "cache",
            "postprocess",
        ];
        WorkflowJob {
            name: "wf".into(),
            source: "wf.json".into(),
            target_sha256: "t".into(),
            steps: (0..=n)
                .map(|i| StepInfo {
                    index: i,
                    increment: names.get(i).copied().unwrap_or("extra").to_string(),
                    file: format!("workflows/wf/{i:02}.json"),
                    sha256: format!("h{i}"),
                    changes: vec![],
                })
                .collect(),
            controls: (1..=n)
                .map(|i| ControlVariant {
                    step: i,
                    increment: names.get(i).copied().unwrap_or("extra").to_string(),
                    file: format!("workflows/wf/control-{i:02}.json"),
                    sha256: format!("c{i}"),
                })
                .collect(),
            not_separable: vec![],
            kept: vec![],
            phase: Phase::Pending,
            runs: vec![],
            verdict: None,
        }
    }

    fn record(job: &mut WorkflowJob, step: usize, role: RunRole, pass: bool) {
        let id = format!("r{}", job.runs.len());
        job.runs.push(RunEntry {
            run_id: id.clone(),
            step,
            increment: job.steps[step].increment.clone(),
            role,
            dir: run_dir_name(step, "x", &id),
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
                stage: (!pass).then(|| "sample_first".to_string()),
                ..RunSummary::default()
            }),
            diagnosis: None,
        });
    }

    /// Drives `decide` to the end with a model where steps `>= first_fail` fail; returns the
    /// verdict and the runs made.
    fn simulate(
        n: usize,
        options: &SessionOptions,
        outcome: impl Fn(usize, RunRole, usize) -> bool,
    ) -> (Verdict, Vec<(usize, RunRole)>) {
        let mut j = job(n);
        let mut made = Vec::new();
        for _ in 0..100 {
            match decide(&j, options).1 {
                Decision::Finish(v) => return (v, made),
                Decision::Run { step, role } => {
                    let attempt = made.iter().filter(|(s, _)| *s == step).count();
                    made.push((step, role));
                    let pass = outcome(step, role, attempt);
                    record(&mut j, step, role, pass);
                }
            }
        }
        panic!("decide did not finish in 100 runs: {made:?}");
    }

    #[test]
    fn linear_finds_the_first_failure_in_ladder_order() {
        let opts = SessionOptions::default();
        let (v, made) = simulate(5, &opts, |s, _, _| s < 3);
        assert_eq!(
            made,
            vec![
                (0, RunRole::Minimal),
                (5, RunRole::Target),
                (1, RunRole::Search),
                (2, RunRole::Search),
                (3, RunRole::Search)
            ]
        );
        match v {
            Verdict::FirstFailure {
                step,
                increment,
                last_pass_step,
                stage,
                not_run,
                ..
            } => {
                assert_eq!((step, last_pass_step), (3, 2));
                assert_eq!(increment, "lora");
                assert_eq!(stage.as_deref(), Some("sample_first"));
                assert_eq!(not_run, vec![4]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn minimal_fails_and_target_passes_are_endpoint_verdicts() {
        let opts = SessionOptions::default();
        let (v, made) = simulate(4, &opts, |_, _, _| false);
        assert!(matches!(v, Verdict::MinimalFails { .. }), "{v:?}");
        assert_eq!(made.len(), 1);
        let (v, made) = simulate(4, &opts, |_, _, _| true);
        assert!(matches!(v, Verdict::CouldNotReproduce { .. }), "{v:?}");
        assert_eq!(made, vec![(0, RunRole::Minimal), (4, RunRole::Target)]);
    }

    #[test]
    fn assume_fails_skips_the_target_run_and_still_detects_a_pass() {
        let opts = SessionOptions {
            assume_fails: true,
            ..SessionOptions::default()
        };
        let (v, made) = simulate(3, &opts, |s, _, _| s < 2);
        assert!(matches!(v, Verdict::FirstFailure { step: 2, .. }), "{v:?}");
        assert!(!made.contains(&(3, RunRole::Target)));
        let (v, made) = simulate(3, &opts, |_, _, _| true);
        assert!(matches!(v, Verdict::CouldNotReproduce { .. }), "{v:?}");
        assert_eq!(made.last(), Some(&(3, RunRole::Target)));
    }

    #[test]
    fn binary_respects_the_run_bound_for_every_boundary() {
        for n in 1..=20usize {
            let bound = ((n + 1) as f64).log2().ceil() as usize + 2;
            for first_fail in 1..=n {
                for assume_fails in [false, true] {
                    let opts = SessionOptions {
                        strategy: Strategy::Binary,
                        assume_fails,
                        ..SessionOptions::default()
                    };
                    let (v, made) = simulate(n, &opts, |s, _, _| s < first_fail);
                    assert!(
                        made.len() <= bound,
                        "n={n} fail={first_fail} runs={} bound={bound}",
                        made.len()
                    );
                    match v {
                        Verdict::FirstFailure { step, not_run, .. } => {
                            assert_eq!(step, first_fail);
                            for k in &not_run {
                                assert!(!made.iter().any(|(s, _)| s == k));
                            }
                        }
                        other => panic!("n={n} fail={first_fail}: {other:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn repeat_disagreement_is_flaky_with_counts() {
        let opts = SessionOptions {
            repeat: 2,
            ..SessionOptions::default()
        };
        // Step 2 fails the first time, passes on its second attempt.
        let (v, made) = simulate(3, &opts, |s, _, attempt| s < 2 || (s == 2 && attempt == 1));
        match v {
            Verdict::Flaky { counts } => {
                assert_eq!(counts.len(), 2);
                assert_eq!(
                    (counts[0].step, counts[0].passed, counts[0].failed),
                    (1, 3, 0)
                );
                assert_eq!(
                    (counts[1].step, counts[1].passed, counts[1].failed),
                    (2, 1, 2)
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            made.iter().filter(|(_, r)| *r == RunRole::Repeat).count(),
            4
        );
        // Consistent repeats keep the first-failure verdict.
        let (v, _) = simulate(3, &opts, |s, _, _| s < 2);
        assert!(matches!(v, Verdict::FirstFailure { step: 2, .. }), "{v:?}");
    }

    #[test]
    fn controls_run_each_later_increment_alone_after_the_boundary() {
        let opts = SessionOptions {
            controls: true,
            ..SessionOptions::default()
        };
        let (v, made) = simulate(5, &opts, |s, role, _| role == RunRole::Control || s < 2);
        assert!(matches!(v, Verdict::FirstFailure { step: 2, .. }), "{v:?}");
        let controls: Vec<usize> = made
            .iter()
            .filter(|(_, r)| *r == RunRole::Control)
            .map(|(s, _)| *s)
            .collect();
        assert_eq!(controls, vec![3, 4, 5]);
    }

    #[test]
    fn a_rejection_is_inconclusive_and_an_interruption_is_rerun() {
        let opts = SessionOptions::default();
        let mut j = job(2);
        record(&mut j, 0, RunRole::Minimal, true);
        j.runs.push(RunEntry {
            outcome: Some(Outcome::Interrupted),
            ..j.runs[0].clone()
        });
        j.runs[1].step = 2;
        j.runs[1].run_id = "int".into();
        assert_eq!(
            decide(&j, &opts).1,
            Decision::Run {
                step: 2,
                role: RunRole::Target
            }
        );
        j.runs[1].outcome = Some(Outcome::Rejected {
            message: "bad".into(),
        });
        assert!(matches!(
            decide(&j, &opts).1,
            Decision::Finish(Verdict::Inconclusive { .. })
        ));
    }

    #[test]
    fn a_ladder_without_increments_runs_once() {
        let opts = SessionOptions::default();
        let (v, made) = simulate(0, &opts, |_, _, _| true);
        assert!(matches!(v, Verdict::CouldNotReproduce { .. }));
        assert_eq!(made.len(), 1);
    }
}
