//! The reduced-step search and its full-step confirmation, driven to the verdict with a model
//! of which runs fail at which step count.

use super::super::decide_steps_in;
use super::super::tests::job;
use super::*;
use crate::session::journal::{run_dir_name, Outcome, ReducedSteps, RunStatus, RunSummary};

/// What a run of a step gives: passed, or failed in this stage.
type Model = dyn Fn(usize, bool) -> Result<(), &'static str>;

/// Drives the decision to its verdict; returns it and the runs made as (step, reduced).
fn drive(n: usize, options: &SessionOptions, model: &Model) -> (Verdict, Vec<(usize, bool)>) {
    let mut j = job(n);
    let mut made = Vec::new();
    for _ in 0..100 {
        let (_, d, cap) = decide_steps_in(&j, options, None);
        let (step, role) = match d {
            Decision::Finish(v) => return (v, made),
            Decision::Confirm { .. } => panic!("no crash here"),
            Decision::Run { step, role } => (step, role),
        };
        let reduced = cap.is_some();
        made.push((step, reduced));
        let id = format!("r{}", j.runs.len());
        let result = model(step, reduced);
        j.runs.push(RunEntry {
            run_id: id.clone(),
            step,
            increment: j.steps[step].increment.clone(),
            role,
            dir: run_dir_name(step, "x", &id),
            workflow_sha256: String::new(),
            status: RunStatus::Done,
            started_at: String::new(),
            finished_at: None,
            outcome: Some(match result {
                Ok(()) => Outcome::Passed,
                Err(_) => Outcome::Failed {
                    node_id: "3".into(),
                    node_type: "KSampler".into(),
                    exception_type: "torch.OutOfMemoryError".into(),
                    exception_message: "CUDA out of memory".into(),
                },
            }),
            summary: Some(RunSummary {
                stage: result.err().map(str::to_string),
                ..RunSummary::default()
            }),
            diagnosis: None,
            confirms: None,
            fingerprint: None,
            reduced: cap.map(|cap| ReducedSteps {
                cap,
                changes: vec![],
            }),
        });
    }
    panic!("no verdict in 100 runs: {made:?}");
}

fn boundary(v: &Verdict) -> (usize, usize) {
    match v {
        Verdict::FirstFailure {
            step,
            last_pass_step,
            ..
        } => (*last_pass_step, *step),
        other => panic!("{other:?}"),
    }
}

fn opts(strategy: Strategy, cap: Option<u32>) -> SessionOptions {
    SessionOptions {
        strategy,
        search_steps: cap,
        ..SessionOptions::default()
    }
}

#[test]
fn a_decode_failure_is_found_reduced_and_only_the_last_pass_is_rerun_at_full_steps() {
    let model = |s: usize, _reduced: bool| if s >= 3 { Err("decode") } else { Ok(()) };
    let (v, made) = drive(5, &opts(Strategy::Linear, Some(4)), &model);
    assert_eq!(boundary(&v), (2, 3));
    let full: Vec<usize> = made.iter().filter(|(_, r)| !r).map(|(s, _)| *s).collect();
    // The minimal variant runs at its own steps from the start.
    assert_eq!(full, vec![0, 2], "{made:?}");
    assert_eq!(made.iter().filter(|(_, r)| *r).count(), 4, "{made:?}");
}

#[test]
fn a_middle_step_failure_is_repeated_at_full_steps() {
    let model = |s: usize, _| if s >= 3 { Err("sample_middle") } else { Ok(()) };
    let (v, made) = drive(5, &opts(Strategy::Linear, Some(4)), &model);
    assert_eq!(boundary(&v), (2, 3));
    let full: Vec<usize> = made.iter().filter(|(_, r)| !r).map(|(s, _)| *s).collect();
    assert_eq!(full, vec![0, 3, 2], "{made:?}");
}

/// Every failure position and kind (one that shows at any step count, one that grows across
/// steps and shows only at full steps from `grow`, one that only shows at few steps): the
/// verdict equals the full-step search's, for both strategies.
#[test]
fn the_verdict_is_always_the_full_step_verdict() {
    for n in 1..=7usize {
        for fail in 0..=n + 1 {
            for grow in 0..=n + 1 {
                for kind in ["decode", "sample_middle", "few_only"] {
                    let model = move |s: usize, reduced: bool| -> Result<(), &'static str> {
                        match kind {
                            "few_only" if s >= fail && (reduced || s >= grow) => {
                                Err("sample_middle")
                            }
                            "few_only" => Ok(()),
                            _ if s >= fail => Err(kind),
                            _ if !reduced && s >= grow => Err("sample_middle"),
                            _ => Ok(()),
                        }
                    };
                    for strategy in [Strategy::Linear, Strategy::Binary] {
                        let (want, _) = drive(n, &opts(strategy, None), &model);
                        let (got, made) = drive(n, &opts(strategy, Some(2)), &model);
                        let key = |v: &Verdict| match v {
                            Verdict::FirstFailure {
                                step,
                                last_pass_step,
                                ..
                            } => format!("first {last_pass_step}-{step}"),
                            other => format!("{:?}", other.kind()),
                        };
                        assert_eq!(
                            key(&got),
                            key(&want),
                            "n={n} fail={fail} grow={grow} {kind} {strategy:?}: {made:?}"
                        );
                        if let Verdict::FirstFailure { last_pass_step, .. } = got {
                            assert!(
                                made.contains(&(last_pass_step, false)),
                                "the last pass is confirmed at full steps: {made:?}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn a_failure_in_the_first_increment_needs_no_confirmation_run() {
    // The minimal variant's full-step pass is the verdict's last pass already.
    let model = |s: usize, _| if s >= 1 { Err("sample_first") } else { Ok(()) };
    let (v, made) = drive(5, &opts(Strategy::Linear, Some(4)), &model);
    assert_eq!(boundary(&v), (0, 1));
    assert_eq!(made, vec![(0, false), (5, true), (1, true)]);
}

#[test]
fn full_keeps_every_run_at_the_workflows_own_steps() {
    let model = |s: usize, _| if s >= 2 { Err("decode") } else { Ok(()) };
    let (_, made) = drive(4, &opts(Strategy::Binary, None), &model);
    assert!(made.iter().all(|(_, r)| !r), "{made:?}");
}
