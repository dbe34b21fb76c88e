//! What the predictor reads from the journal: the finished runs with their measured parts
//! ([`observed`]) and the runs a workflow still needs (`runs_left`), which the driver hands
//! to [`crate::analytics::predict`] for the session's ETA and the deadline check.

use super::decide::reduced::step_independent;
use super::journal::{
    Outcome, RunRole, SessionFile, SessionOptions, Strategy, Verdict, WorkflowJob,
};
use crate::analytics::predict::Observed;

/// The session's runs that ended by themselves (passed or failed) with their parts measured.
pub fn observed(session: &SessionFile) -> Vec<Observed> {
    session
        .workflows
        .iter()
        .enumerate()
        .flat_map(|(workflow, job)| observed_job(workflow, job))
        .collect()
}

/// [`observed`] for one workflow's runs, `workflow` being its index in the session.
pub fn observed_job(workflow: usize, job: &WorkflowJob) -> Vec<Observed> {
    let mut out = Vec::new();
    for r in &job.runs {
        if !matches!(r.outcome, Some(Outcome::Passed | Outcome::Failed { .. })) {
            continue;
        }
        let Some(s) = &r.summary else { continue };
        let (Some(phases), Some(work)) = (s.phases, s.work) else {
            continue;
        };
        out.push(Observed {
            workflow,
            step: r.step,
            work,
            phases,
            cold: s.cold,
            passed: r.passed(),
        });
    }
    out
}

/// The runs a workflow still needs, as (ladder step, reduced step count, weight): weight 1 for
/// a run that will happen, a fraction for the expected share of a binary search's probes.
/// Counted: the endpoints not run yet, the search between the last pass and the first failure
/// (linear: every step left; binary: ⌈log2(k+1)⌉ probes over k steps), and with
/// `--search-steps` the confirmation runs at full steps: the last pass, and the first failure
/// unless its reduced failure is at a step-independent stage (the rule of
/// [`super::decide::reduced`]); the minimal variant always runs at its own steps; after a
/// passing target that the session walks (`--walk-on-pass`), every step of the walk not run
/// yet. Not counted: controls, `--repeat`, crash confirmations, re-anchoring after drift.
pub(crate) fn runs_left(job: &WorkflowJob, options: &SessionOptions) -> Vec<(usize, bool, f64)> {
    if job
        .verdict
        .as_ref()
        .is_some_and(|v| !matches!(v, Verdict::Incomplete { .. }))
    {
        return Vec::new();
    }
    let n = job.steps.len().saturating_sub(1);
    let reduced = options.search_steps.is_some();
    if let Some(walk) = super::decide::walk_left(job, options) {
        // The target passed and the ladder is walked (at full steps) until the first step under
        // memory pressure: at most every step not run yet; with --search-steps, then the
        // target at full steps when it ran reduced.
        let mut left: Vec<(usize, bool, f64)> = walk.into_iter().map(|s| (s, false, 1.0)).collect();
        let target_full = job
            .runs
            .iter()
            .any(|r| r.step == n && r.reduced.is_none() && r.role != RunRole::Control);
        if reduced && !target_full {
            left.push((n, false, 1.0));
        }
        return left;
    }
    let tried = |pass: bool| {
        job.runs
            .iter()
            .filter(|r| r.role != RunRole::Control)
            .filter(move |r| if pass { r.passed() } else { r.failed() })
            .map(|r| r.step)
    };
    let mut left = Vec::new();
    let hi = tried(false).min();
    let lo = tried(true).filter(|s| hi.is_none_or(|h| *s < h)).max();
    if lo.is_none() {
        // The minimal variant runs at its own steps even in a reduced search.
        left.push((0, false, 1.0));
    }
    if hi.is_none() && !options.assume_fails && n > 0 {
        left.push((n, reduced && !options.full_step_target, 1.0));
    }
    let (lo, hi) = (lo.unwrap_or(0), hi.unwrap_or(n));
    let unknown: Vec<usize> = (lo + 1..hi).collect();
    if !unknown.is_empty() {
        let k = unknown.len() as f64;
        let weight = match options.strategy {
            Strategy::Linear => 1.0,
            Strategy::Binary => (k + 1.0).log2().ceil() / k,
        };
        left.extend(unknown.iter().map(|s| (*s, reduced, weight)));
    }
    if reduced {
        // A step needs no confirmation when it ran at full steps, or (the first failure) when
        // its reduced failure is at a stage that cannot depend on the step count.
        let full_at = |s: usize| {
            job.runs.iter().any(|r| {
                r.step == s
                    && r.role != RunRole::Control
                    && (r.reduced.is_none() || (s == hi && step_independent(r)))
            })
        };
        if unknown.is_empty() {
            left.extend(
                [lo, hi]
                    .into_iter()
                    .filter(|s| !full_at(*s))
                    .map(|s| (s, false, 1.0)),
            );
        } else {
            // The boundary is still to be found: two full runs somewhere in the interval.
            let w = 2.0 / (unknown.len() as f64 + 1.0);
            left.extend((lo + 1..=hi).map(|s| (s, false, w)));
        }
    }
    left
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::journal::{RunEntry, RunSummary, StepInfo};

    fn job(n: usize, results: &[(usize, bool)]) -> WorkflowJob {
        WorkflowJob {
            name: "wf".into(),
            source: String::new(),
            source_file: None,
            target_sha256: String::new(),
            steps: (0..=n)
                .map(|i| StepInfo {
                    index: i,
                    increment: format!("i{i}"),
                    file: String::new(),
                    sha256: String::new(),
                    changes: vec![],
                })
                .collect(),
            controls: vec![],
            not_separable: vec![],
            kept: vec![],
            phase: crate::session::journal::Phase::Search,
            runs: results
                .iter()
                .map(|(step, pass)| RunEntry {
                    summary: Some(RunSummary::default()),
                    ..RunEntry::done(
                        format!("r{step}"),
                        *step,
                        if *pass {
                            Outcome::Passed
                        } else {
                            Outcome::Failed {
                                node_id: "3".into(),
                                node_type: "KSampler".into(),
                                exception_type: "E".into(),
                                exception_message: String::new(),
                            }
                        },
                    )
                })
                .collect(),
            verdict: None,
        }
    }

    #[test]
    fn runs_left_by_strategy() {
        let linear = SessionOptions {
            strategy: Strategy::Linear,
            ..SessionOptions::default()
        };
        let binary = SessionOptions {
            strategy: Strategy::Binary,
            ..SessionOptions::default()
        };
        // Nothing run: both endpoints, then the search over steps 1..=6.
        let fresh = job(7, &[]);
        let l = runs_left(&fresh, &linear);
        assert_eq!(l.len(), 8);
        assert_eq!(l.iter().map(|r| r.2).sum::<f64>(), 8.0);
        let b = runs_left(&fresh, &binary);
        // ⌈log2(7)⌉ = 3 probes spread over the six steps.
        assert!(
            (b.iter().map(|r| r.2).sum::<f64>() - 5.0).abs() < 1e-9,
            "{b:?}"
        );
        // Minimal passed, step 3 passed, step 5 failed: only step 4 is left.
        let mid = job(7, &[(0, true), (7, false), (3, true), (5, false)]);
        assert_eq!(runs_left(&mid, &linear), vec![(4, false, 1.0)]);
        assert_eq!(runs_left(&mid, &binary), vec![(4, false, 1.0)]);
        // With --search-steps: reduced probes, then the boundary confirmed at full steps.
        let reduced = SessionOptions {
            search_steps: Some(4),
            ..binary.clone()
        };
        let done = job(7, &[(0, true), (7, false), (4, true), (5, false)]);
        assert_eq!(runs_left(&done, &binary), vec![]);
        let mut confirming = done.clone();
        for r in &mut confirming.runs {
            r.reduced = Some(crate::session::journal::ReducedSteps {
                cap: 4,
                changes: vec![],
            });
        }
        confirming.runs[2].reduced = None; // step 4 already ran at full steps
        assert_eq!(runs_left(&confirming, &reduced), vec![(5, false, 1.0)]);
        // A reduced failure at a stage the step count cannot change (decode) stands for the
        // full-step run: only the last pass is confirmed. Not so for a middle step.
        let mut decode = confirming.clone();
        decode.runs[2].reduced = confirming.runs[0].reduced.clone();
        let stage = |s: &str| {
            Some(RunSummary {
                stage: Some(s.into()),
                ..RunSummary::default()
            })
        };
        decode.runs[3].summary = stage("decode");
        assert_eq!(runs_left(&decode, &reduced), vec![(4, false, 1.0)]);
        decode.runs[3].summary = stage("sample_middle");
        assert_eq!(
            runs_left(&decode, &reduced),
            vec![(4, false, 1.0), (5, false, 1.0)]
        );
        // The minimal variant runs at its own steps in a reduced search too.
        assert_eq!(runs_left(&fresh, &reduced)[0], (0, false, 1.0));
        // A workflow with its verdict has nothing left.
        let mut finished = done;
        finished.verdict = Some(Verdict::CouldNotReproduce {
            run_id: "r7".into(),
        });
        assert_eq!(runs_left(&finished, &linear), vec![]);
    }

    #[test]
    fn a_walk_after_a_passing_target_counts_its_steps_left() {
        let opts = SessionOptions::default();
        // The target passed with no cue: no step of the ladder is counted.
        let mut j = job(5, &[(0, true), (5, true)]);
        assert!(
            runs_left(&j, &opts).iter().all(|r| r.0 == 5),
            "{:?}",
            runs_left(&j, &opts)
        );
        // With a cue the walk may run every step before the target, at full steps.
        j.runs[1].summary.as_mut().unwrap().walk_cues =
            vec![crate::analytics::walk::Cue::MemoryPressure {
                evidence: vec!["steps slowed 2.0× within the run (node 3)".into()],
            }];
        let left: Vec<usize> = runs_left(&j, &opts).iter().map(|r| r.0).collect();
        assert_eq!(left, [1, 2, 3, 4]);
        // With --search-steps and a reduced target: then the target at full steps.
        j.runs[1].reduced = Some(crate::session::journal::ReducedSteps {
            cap: 4,
            changes: vec![],
        });
        let reduced = SessionOptions {
            search_steps: Some(4),
            ..SessionOptions::default()
        };
        assert_eq!(
            runs_left(&j, &reduced),
            vec![
                (1, false, 1.0),
                (2, false, 1.0),
                (3, false, 1.0),
                (4, false, 1.0),
                (5, false, 1.0)
            ]
        );
    }
}
