//! The decision function of the bisection state machine: from a workflow's recorded runs (the
//! journal) to the next run or the verdict. Pure, so resuming is recomputing: completed runs
//! are never repeated because the decision sees them.

use super::journal::{Phase, SessionOptions, WorkflowJob};

pub mod reduced;
mod results;
mod rules;

use crate::analytics::cost::StepCost;
pub use results::{step_run, Decision};
pub(crate) use rules::decide_in;

/// The next action for `job` under `options`, and the phase it belongs to (no environment
/// known: results count wherever they were made).
pub fn decide(job: &WorkflowJob, options: &SessionOptions) -> (Phase, Decision) {
    decide_in(job, options, None)
}

/// The ladder steps the walk after a passing target (`--walk-on-pass`) may still run, in
/// order; None when the workflow is not walking (no environment known).
pub(crate) fn walk_left(job: &WorkflowJob, options: &SessionOptions) -> Option<Vec<usize>> {
    let ctx = rules::Ctx {
        job,
        options,
        env: None,
        n: job.steps.len().saturating_sub(1),
    };
    rules::walk_left(&ctx)
}

/// Why the ladder is walked after the passing target (`--walk-on-pass`), in words: the rules'
/// own test (`rules::walked`) with the cue or option it rests on; None when it is not.
pub(crate) fn walked(job: &WorkflowJob, options: &SessionOptions) -> Option<String> {
    let ctx = rules::Ctx {
        job,
        options,
        env: None,
        n: job.steps.len().saturating_sub(1),
    };
    rules::walked(&ctx)
}

/// [`decide`] with `--search-steps`: also the step cap of the run it asks for (None: the
/// variant's own steps). What the driver asks before every run (no environment known);
/// `costs`: each ladder step's predicted run time, when there is one ([`StepCost`]).
pub fn decide_steps(
    job: &WorkflowJob,
    options: &SessionOptions,
    costs: Option<&[StepCost]>,
) -> (Phase, Decision, Option<u32>) {
    decide_steps_in(job, options, None, costs)
}

/// [`decide_in`] with `--search-steps`: also the step cap of the run it asks for (None: the
/// variant's own steps). Without `--search-steps` that is [`decide_in`]; with it, see
/// [`reduced`].
pub(crate) fn decide_steps_in(
    job: &WorkflowJob,
    options: &SessionOptions,
    env: Option<&str>,
    costs: Option<&[StepCost]>,
) -> (Phase, Decision, Option<u32>) {
    match options.search_steps {
        None => {
            let (phase, d) = decide_in(job, options, env);
            (phase, d, None)
        }
        Some(cap) => reduced::decide(job, options, env, cap, costs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::journal::{
        run_dir_name, ControlVariant, Outcome, RunStatus, RunSummary, StepInfo, Strategy,
    };
    use crate::session::journal::{CrashCheck, RunEntry, RunRole, Verdict};
    use crate::vocab::Stage;

    /// A job of `n` increments with a control variant per increment (also used by the
    /// reduced-step tests in `decide/reduced_tests.rs`).
    pub(super) fn job(n: usize) -> WorkflowJob {
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
            source_file: None,
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
                stage: (!pass).then_some(Stage::SampleFirst),
                ..RunSummary::default()
            }),
            diagnosis: None,
            confirms: None,
            fingerprint: None,
            reduced: None,
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
                Decision::Confirm { .. } => panic!("no crash was recorded"),
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
                assert_eq!(stage.map(|s| s.as_str()), Some("sample_first"));
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

    /// What a simulated run does.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Sim {
        Pass,
        Oom,
        Crash,
    }

    /// Like [`simulate`] with crashes: `outcome(step, attempt at that step)`.
    fn simulate_crashes(
        n: usize,
        options: &SessionOptions,
        outcome: impl Fn(usize, usize) -> Sim,
    ) -> (Verdict, WorkflowJob) {
        let mut j = job(n);
        for _ in 0..100 {
            let (step, role, confirms) = match decide(&j, options).1 {
                Decision::Finish(v) => return (v, j),
                Decision::Run { step, role } => (step, role, None),
                Decision::Confirm { step, crashed } => (step, RunRole::Confirm, Some(crashed)),
            };
            let attempt = j.runs.iter().filter(|r| r.step == step).count();
            let sim = outcome(step, attempt);
            record(&mut j, step, role, sim == Sim::Pass);
            let last = j.runs.last_mut().unwrap();
            last.confirms = confirms;
            if sim == Sim::Crash {
                last.outcome = Some(Outcome::ServerLost {
                    detail: "connection refused".into(),
                });
            }
        }
        panic!("decide did not finish in 100 runs: {:?}", j.runs);
    }

    #[test]
    fn a_crash_that_does_not_repeat_counts_as_a_pass() {
        for strategy in [Strategy::Linear, Strategy::Binary] {
            let opts = SessionOptions {
                strategy,
                ..SessionOptions::default()
            };
            // Steps >= 3 fail with OOM; step 2 crashes once (another job killed the server).
            let (v, j) = simulate_crashes(5, &opts, |s, attempt| match (s, attempt) {
                (2, 0) => Sim::Crash,
                (s, _) if s >= 3 => Sim::Oom,
                _ => Sim::Pass,
            });
            let crash = j.runs.iter().find(|r| r.crashed()).unwrap();
            let confirm = j
                .runs
                .iter()
                .find(|r| r.role == RunRole::Confirm)
                .expect("the crash was re-run");
            assert_eq!(confirm.confirms.as_deref(), Some(crash.run_id.as_str()));
            assert_eq!(confirm.step, 2);
            match v {
                Verdict::FirstFailure {
                    step,
                    last_pass_step,
                    last_pass_run_id,
                    ..
                } => {
                    assert_eq!((step, last_pass_step), (3, 2), "{strategy:?}");
                    assert_eq!(last_pass_run_id, confirm.run_id);
                }
                other => panic!("{strategy:?}: {other:?}"),
            }
            assert!(matches!(
                j.crash_check(crash, 1),
                CrashCheck::NotReproduced { .. }
            ));
        }
    }

    #[test]
    fn a_crash_that_repeats_is_a_confirmed_failure() {
        for strategy in [Strategy::Linear, Strategy::Binary] {
            for n in [1u32, 2] {
                let opts = SessionOptions {
                    strategy,
                    confirm_crashes: n,
                    ..SessionOptions::default()
                };
                // Steps >= 2 take the server down every time.
                let (v, j) =
                    simulate_crashes(4, &opts, |s, _| if s >= 2 { Sim::Crash } else { Sim::Pass });
                let Verdict::FirstFailure { step, run_id, .. } = &v else {
                    panic!("{strategy:?} n={n}: {v:?}");
                };
                assert_eq!(*step, 2);
                let crash = j.runs.iter().find(|r| &r.run_id == run_id).unwrap();
                match j.crash_check(crash, n) {
                    CrashCheck::Confirmed { times, by } => {
                        assert_eq!(times, n + 1);
                        assert_eq!(by.len() as u32, n);
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        // An OOM on the re-run confirms at once, even when more re-runs were allowed.
        let opts = SessionOptions {
            confirm_crashes: 3,
            ..SessionOptions::default()
        };
        let (v, j) = simulate_crashes(2, &opts, |s, attempt| match (s, attempt) {
            (2, 0) => Sim::Crash,
            (2, _) => Sim::Oom,
            _ => Sim::Pass,
        });
        assert!(matches!(v, Verdict::FirstFailure { step: 2, .. }), "{v:?}");
        assert_eq!(
            j.runs.iter().filter(|r| r.role == RunRole::Confirm).count(),
            1
        );
    }

    #[test]
    fn without_confirmation_a_crash_decides_as_before() {
        let opts = SessionOptions {
            confirm_crashes: 0,
            ..SessionOptions::default()
        };
        // Step 1 crashes once, steps >= 2 run out of memory: the crash is the verdict.
        let (v, j) = simulate_crashes(3, &opts, |s, attempt| match (s, attempt) {
            (1, 0) => Sim::Crash,
            (s, _) if s >= 2 => Sim::Oom,
            _ => Sim::Pass,
        });
        assert!(!j.runs.iter().any(|r| r.role == RunRole::Confirm));
        assert!(matches!(v, Verdict::FirstFailure { step: 1, .. }), "{v:?}");
        // With the default, the same night finds step 2.
        let (v, _) = simulate_crashes(3, &SessionOptions::default(), |s, attempt| {
            match (s, attempt) {
                (1, 0) => Sim::Crash,
                (s, _) if s >= 2 => Sim::Oom,
                _ => Sim::Pass,
            }
        });
        assert!(matches!(v, Verdict::FirstFailure { step: 2, .. }), "{v:?}");
    }

    #[test]
    fn a_crash_of_the_minimal_variant_or_a_repeat_is_confirmed_too() {
        let opts = SessionOptions::default();
        let (v, j) = simulate_crashes(2, &opts, |s, attempt| match (s, attempt) {
            (0, 0) => Sim::Crash,
            (s, _) if s >= 1 => Sim::Oom,
            _ => Sim::Pass,
        });
        assert!(matches!(v, Verdict::FirstFailure { step: 1, .. }), "{v:?}");
        assert_eq!(j.runs[1].role, RunRole::Confirm);
        // A repeat that crashes once does not make the verdict flaky.
        let opts = SessionOptions {
            repeat: 1,
            ..SessionOptions::default()
        };
        let (v, j) = simulate_crashes(2, &opts, |s, attempt| match (s, attempt) {
            (0, 1) => Sim::Crash,
            (s, _) if s >= 1 => Sim::Oom,
            _ => Sim::Pass,
        });
        assert!(matches!(v, Verdict::FirstFailure { step: 1, .. }), "{v:?}");
        assert!(j
            .runs
            .iter()
            .any(|r| r.role == RunRole::Confirm && r.step == 0));
    }

    /// Drives `decide_in` where the environment is "a" for the first `switch` runs and "b"
    /// after; `pass(step, env)` says what a run does.
    fn simulate_drift(
        n: usize,
        options: &SessionOptions,
        switch: usize,
        pass: impl Fn(usize, &str) -> bool,
    ) -> (Verdict, WorkflowJob) {
        let mut j = job(n);
        for _ in 0..100 {
            let env = if j.runs.len() < switch { "a" } else { "b" };
            let (step, role) = match decide_in(&j, options, Some(env)).1 {
                Decision::Finish(v) => return (v, j),
                Decision::Run { step, role } => (step, role),
                Decision::Confirm { .. } => panic!("no crash here"),
            };
            record(&mut j, step, role, pass(step, env));
            j.runs.last_mut().unwrap().fingerprint = Some(env.to_string());
        }
        panic!("no verdict: {:?}", j.runs);
    }

    #[test]
    fn a_changed_environment_reanchors_the_last_pass_before_going_on() {
        for strategy in [Strategy::Linear, Strategy::Binary] {
            let opts = SessionOptions {
                strategy,
                ..SessionOptions::default()
            };
            // Same behaviour in both environments: one anchor run, same verdict.
            let (v, j) = simulate_drift(5, &opts, 3, |s, _| s < 3);
            let anchors: Vec<usize> = j
                .runs
                .iter()
                .filter(|r| r.role == RunRole::Anchor)
                .map(|r| r.step)
                .collect();
            assert_eq!(anchors.len(), 1, "{strategy:?}: {:?}", j.runs);
            let Verdict::FirstFailure {
                step,
                run_id,
                last_pass_run_id,
                ..
            } = &v
            else {
                panic!("{v:?}");
            };
            assert_eq!(*step, 3, "{strategy:?}");
            for id in [run_id, last_pass_run_id] {
                let r = j.runs.iter().find(|r| &r.run_id == id).unwrap();
                assert_eq!(r.fingerprint.as_deref(), Some("b"), "{strategy:?}");
            }
        }
        // In the new environment less fits: the re-anchored step fails, and the search walks
        // down until a pass in that environment brackets the failure.
        let opts = SessionOptions::default();
        let (v, j) = simulate_drift(5, &opts, 3, |s, env| if env == "a" { s < 4 } else { s < 1 });
        assert!(matches!(v, Verdict::FirstFailure { step: 1, .. }), "{v:?}");
        let Verdict::FirstFailure {
            last_pass_run_id, ..
        } = &v
        else {
            unreachable!()
        };
        let pass = j
            .runs
            .iter()
            .find(|r| &r.run_id == last_pass_run_id)
            .unwrap();
        assert_eq!((pass.step, pass.fingerprint.as_deref()), (0, Some("b")));
        // Without fingerprints nothing changes.
        let (v, j) = simulate(5, &opts, |s, _, _| s < 3);
        assert!(matches!(v, Verdict::FirstFailure { step: 3, .. }));
        assert!(!j.iter().any(|(_, r)| *r == RunRole::Anchor));
    }

    #[test]
    fn a_ladder_without_increments_runs_once() {
        let opts = SessionOptions::default();
        let (v, made) = simulate(0, &opts, |_, _, _| true);
        assert!(matches!(v, Verdict::CouldNotReproduce { .. }));
        assert_eq!(made.len(), 1);
    }

    fn before(name: &str) -> rules::EndpointRule {
        rules::BEFORE_SEARCH
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no rule {name}"))
            .1
    }

    fn after(name: &str) -> rules::BoundaryRule {
        rules::AFTER_SEARCH
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("no rule {name}"))
            .1
    }

    fn ctx<'a>(j: &'a WorkflowJob, options: &'a SessionOptions) -> rules::Ctx<'a> {
        rules::Ctx {
            job: j,
            options,
            env: None,
            n: j.steps.len() - 1,
        }
    }

    /// A job of `n` increments with the minimal variant passing and the target failing.
    fn bracketed(n: usize) -> WorkflowJob {
        let mut j = job(n);
        record(&mut j, 0, RunRole::Minimal, true);
        record(&mut j, n, RunRole::Target, false);
        j
    }

    #[test]
    fn the_rule_tables_are_in_the_documented_order() {
        let names: Vec<&str> = rules::BEFORE_SEARCH.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            ["rejected", "pending_crash", "minimal", "target", "walk"]
        );
        let names: Vec<&str> = rules::AFTER_SEARCH.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["anchor_ends", "repeat", "controls"]);
    }

    #[test]
    fn rule_rejected_fires_on_a_rejected_run_only() {
        let opts = SessionOptions::default();
        let mut j = bracketed(2);
        assert_eq!(before("rejected")(&ctx(&j, &opts)), None);
        j.runs[1].outcome = Some(Outcome::Rejected {
            message: "bad".into(),
        });
        assert!(matches!(
            before("rejected")(&ctx(&j, &opts)),
            Some((Phase::Done, Decision::Finish(Verdict::Inconclusive { .. })))
        ));
    }

    #[test]
    fn rule_pending_crash_re_runs_a_crash_in_its_phase() {
        let opts = SessionOptions::default();
        let mut j = bracketed(2);
        assert_eq!(before("pending_crash")(&ctx(&j, &opts)), None);
        j.runs[1].outcome = Some(Outcome::ServerLost {
            detail: "connection refused".into(),
        });
        assert_eq!(
            before("pending_crash")(&ctx(&j, &opts)),
            Some((
                Phase::Target,
                Decision::Confirm {
                    step: 2,
                    crashed: j.runs[1].run_id.clone()
                }
            ))
        );
    }

    #[test]
    fn rule_minimal_runs_then_judges_the_minimal_variant() {
        let opts = SessionOptions::default();
        let mut j = job(2);
        assert_eq!(
            before("minimal")(&ctx(&j, &opts)),
            Some((
                Phase::Minimal,
                Decision::Run {
                    step: 0,
                    role: RunRole::Minimal
                }
            ))
        );
        record(&mut j, 0, RunRole::Minimal, true);
        assert_eq!(before("minimal")(&ctx(&j, &opts)), None);
        j.runs[0].outcome = Some(Outcome::Failed {
            node_id: "3".into(),
            node_type: "KSampler".into(),
            exception_type: "torch.OutOfMemoryError".into(),
            exception_message: "CUDA out of memory".into(),
        });
        assert!(matches!(
            before("minimal")(&ctx(&j, &opts)),
            Some((Phase::Done, Decision::Finish(Verdict::MinimalFails { .. })))
        ));
    }

    #[test]
    fn rule_target_is_skipped_when_assumed() {
        let mut j = job(2);
        record(&mut j, 0, RunRole::Minimal, true);
        let opts = SessionOptions::default();
        assert_eq!(
            before("target")(&ctx(&j, &opts)),
            Some((
                Phase::Target,
                Decision::Run {
                    step: 2,
                    role: RunRole::Target
                }
            ))
        );
        let assumed = SessionOptions {
            assume_fails: true,
            ..SessionOptions::default()
        };
        assert_eq!(before("target")(&ctx(&j, &assumed)), None);
        record(&mut j, 2, RunRole::Target, true);
        assert!(matches!(
            before("target")(&ctx(&j, &opts)),
            Some((
                Phase::Done,
                Decision::Finish(Verdict::CouldNotReproduce { .. })
            ))
        ));
    }

    #[test]
    fn search_asks_for_the_next_step_then_gives_the_boundary() {
        for strategy in [Strategy::Linear, Strategy::Binary] {
            let opts = SessionOptions {
                strategy,
                ..SessionOptions::default()
            };
            let mut j = bracketed(2);
            assert_eq!(
                rules::search(&ctx(&j, &opts)),
                rules::Searched::Ask((
                    Phase::Search,
                    Decision::Run {
                        step: 1,
                        role: RunRole::Search
                    }
                )),
                "{strategy:?}"
            );
            record(&mut j, 1, RunRole::Search, true);
            assert_eq!(
                rules::search(&ctx(&j, &opts)),
                rules::Searched::Found(rules::Boundary { lo: 1, hi: 2 }),
                "{strategy:?}"
            );
        }
    }

    #[test]
    fn rule_anchor_ends_re_runs_an_end_made_elsewhere() {
        let opts = SessionOptions::default();
        let mut j = bracketed(1);
        for r in &mut j.runs {
            r.fingerprint = Some("a".into());
        }
        let b = rules::Boundary { lo: 0, hi: 1 };
        assert_eq!(after("anchor_ends")(&ctx(&j, &opts), b), None);
        let here = rules::Ctx {
            env: Some("b"),
            ..ctx(&j, &opts)
        };
        assert_eq!(
            after("anchor_ends")(&here, b),
            Some((
                Phase::Search,
                Decision::Run {
                    step: 0,
                    role: RunRole::Anchor
                }
            ))
        );
    }

    #[test]
    fn rule_repeat_re_runs_the_failing_end_first() {
        let j = bracketed(1);
        let b = rules::Boundary { lo: 0, hi: 1 };
        let opts = SessionOptions::default();
        assert_eq!(after("repeat")(&ctx(&j, &opts), b), None);
        let opts = SessionOptions {
            repeat: 1,
            ..SessionOptions::default()
        };
        assert_eq!(
            after("repeat")(&ctx(&j, &opts), b),
            Some((
                Phase::Repeat,
                Decision::Run {
                    step: 1,
                    role: RunRole::Repeat
                }
            ))
        );
    }

    #[test]
    fn rule_controls_runs_later_increments_alone() {
        let mut j = bracketed(3);
        record(&mut j, 1, RunRole::Search, false);
        let b = rules::Boundary { lo: 0, hi: 1 };
        let opts = SessionOptions::default();
        assert_eq!(after("controls")(&ctx(&j, &opts), b), None);
        let opts = SessionOptions {
            controls: true,
            ..SessionOptions::default()
        };
        assert_eq!(
            after("controls")(&ctx(&j, &opts), b),
            Some((
                Phase::Controls,
                Decision::Run {
                    step: 2,
                    role: RunRole::Control
                }
            ))
        );
    }

    #[test]
    fn first_failure_lists_the_steps_never_run() {
        let j = bracketed(3);
        let opts = SessionOptions::default();
        match rules::first_failure(&ctx(&j, &opts), rules::Boundary { lo: 0, hi: 3 }) {
            (
                Phase::Done,
                Decision::Finish(Verdict::FirstFailure {
                    step,
                    last_pass_step,
                    not_run,
                    ..
                }),
            ) => {
                assert_eq!((step, last_pass_step), (3, 0));
                assert_eq!(not_run, vec![1, 2]);
            }
            other => panic!("{other:?}"),
        }
    }

    /// What a run of a step does in the walk tests.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Run {
        Pass,
        /// Passes with memory pressure evidence (with --strict: outcome memory_pressure).
        Pressure,
        Oom,
    }

    /// The cues of each kind the driver records on a passing target (`analytics::walk`).
    fn every_cue() -> Vec<crate::analytics::walk::Cue> {
        use crate::analytics::walk::Cue;
        vec![
            Cue::MemoryPressure {
                evidence: vec!["steps slowed 2.0× within the run (node 3)".into()],
            },
            Cue::PartialLoad {
                class: Some("WAN21".into()),
                loaded_mb: 9178.0,
                offloaded_mb: Some(3390.0),
            },
            Cue::StagedOverCard {
                class: "WAN21".into(),
                staged_mb: 46000,
                vram_total_mib: 45056.0,
            },
            Cue::VramAtLimit {
                peak_mib: 44500.0,
                vram_total_mib: 45056.0,
                margin_mib: crate::analytics::walk::VRAM_LIMIT_MARGIN_MIB,
                source: "sampled every 500 ms".into(),
            },
        ]
    }

    /// Drives `decide_steps` to the end: `run(step)` says what a run does, `cues` are recorded
    /// on the target's run; returns the verdict, the runs made as (step, reduced) and the job.
    fn simulate_walk(
        n: usize,
        options: &SessionOptions,
        cues: &[crate::analytics::walk::Cue],
        run: impl Fn(usize) -> Run,
    ) -> (Verdict, Vec<(usize, bool)>, WorkflowJob) {
        let mut j = job(n);
        let mut made = Vec::new();
        for _ in 0..100 {
            let (step, role, cap) = match decide_steps(&j, options, None) {
                (_, Decision::Finish(v), _) => return (v, made, j),
                (_, Decision::Run { step, role }, cap) => (step, role, cap),
                (_, Decision::Confirm { .. }, _) => panic!("no crash was recorded"),
            };
            made.push((step, cap.is_some()));
            let what = run(step);
            record(&mut j, step, role, what != Run::Oom);
            let r = j.runs.last_mut().unwrap();
            if let Some(cap) = cap {
                r.reduced = Some(crate::session::journal::ReducedSteps {
                    cap,
                    changes: vec![],
                });
            }
            let summary = r.summary.as_mut().unwrap();
            if what == Run::Pressure {
                summary.delivered.memory_pressure = vec!["slowed 3.0× (…)".into()];
                if options.strict {
                    r.outcome = Some(Outcome::MemoryPressure {
                        evidence: summary.delivered.memory_pressure.clone(),
                    });
                    summary.stage = Some(Stage::SampleMiddle);
                }
            }
            if step == n && what != Run::Oom {
                summary.walk_cues = cues.to_vec();
            }
        }
        panic!("decide did not finish in 100 runs: {made:?}");
    }

    /// Steps from 3 on stream: pressure, never an OOM.
    fn streams_from_3(s: usize) -> Run {
        if s >= 3 {
            Run::Pressure
        } else {
            Run::Pass
        }
    }

    #[test]
    fn each_cue_on_a_passing_target_walks_to_the_first_pressure_and_stops_there() {
        let target_pass = |s: usize| if s == 5 { Run::Pass } else { streams_from_3(s) };
        for strategy in [Strategy::Linear, Strategy::Binary] {
            for cue in every_cue() {
                let opts = SessionOptions {
                    strategy,
                    ..SessionOptions::default()
                };
                let (v, made, j) = simulate_walk(5, &opts, std::slice::from_ref(&cue), target_pass);
                let steps: Vec<usize> = made.iter().map(|(s, _)| *s).collect();
                // One step at a time whatever the strategy, nothing above the first pressure.
                assert_eq!(steps, [0, 5, 1, 2, 3], "{strategy:?} {cue:?}");
                let Verdict::CouldNotReproduce { run_id } = &v else {
                    panic!("{v:?}");
                };
                assert_eq!(run_id, &j.runs[1].run_id, "the target's pass");
            }
        }
    }

    #[test]
    fn a_passing_target_without_a_cue_ends_after_two_runs_unless_always() {
        let opts = SessionOptions::default();
        let (v, made, _) = simulate_walk(4, &opts, &[], streams_from_3);
        assert!(matches!(v, Verdict::CouldNotReproduce { .. }), "{v:?}");
        assert_eq!(made, [(0, false), (4, false)]);
        let always = SessionOptions {
            walk_on_pass: crate::session::journal::WalkOnPass::Always,
            ..SessionOptions::default()
        };
        let (v, made, _) = simulate_walk(4, &always, &[], streams_from_3);
        assert!(matches!(v, Verdict::CouldNotReproduce { .. }), "{v:?}");
        assert_eq!(
            made,
            [(0, false), (4, false), (1, false), (2, false), (3, false)]
        );
        // Always, and no step under pressure: the walk goes to the step before the target.
        let (_, made, _) = simulate_walk(4, &always, &[], |_| Run::Pass);
        assert_eq!(made.len(), 5);
    }

    #[test]
    fn never_does_not_walk_even_with_every_cue() {
        let opts = SessionOptions {
            walk_on_pass: crate::session::journal::WalkOnPass::Never,
            ..SessionOptions::default()
        };
        let (v, made, _) = simulate_walk(4, &opts, &every_cue(), streams_from_3);
        assert!(matches!(v, Verdict::CouldNotReproduce { .. }), "{v:?}");
        assert_eq!(made.len(), 2);
        // A journal saved before the option does not walk on resume.
        let mut old = serde_json::to_value(SessionOptions::default()).unwrap();
        old.as_object_mut().unwrap().remove("walk_on_pass");
        let old: SessionOptions = serde_json::from_value(old).unwrap();
        assert_eq!(old.walk_on_pass, crate::session::journal::WalkOnPass::Never);
    }

    #[test]
    fn assume_fails_walks_as_before() {
        let opts = SessionOptions {
            assume_fails: true,
            ..SessionOptions::default()
        };
        // The search walks on to the target whatever the pressure (no early stop).
        let (v, made, _) = simulate_walk(4, &opts, &every_cue(), streams_from_3);
        assert!(matches!(v, Verdict::CouldNotReproduce { .. }), "{v:?}");
        let steps: Vec<usize> = made.iter().map(|(s, _)| *s).collect();
        assert_eq!(steps, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn strict_turns_the_walks_pressure_into_the_first_failure() {
        for strategy in [Strategy::Linear, Strategy::Binary] {
            let opts = SessionOptions {
                strategy,
                strict: true,
                ..SessionOptions::default()
            };
            // The target passes without pressure against the minimal, but with a cue.
            let run = |s: usize| if s == 5 { Run::Pass } else { streams_from_3(s) };
            let cue = every_cue().pop().unwrap();
            let (v, made, _) = simulate_walk(5, &opts, &[cue], run);
            let steps: Vec<usize> = made.iter().map(|(s, _)| *s).collect();
            assert_eq!(steps, [0, 5, 1, 2, 3], "{strategy:?}");
            match v {
                Verdict::FirstFailure {
                    step,
                    last_pass_step,
                    stage,
                    not_run,
                    ..
                } => {
                    assert_eq!((step, last_pass_step), (3, 2));
                    assert_eq!(stage.map(|s| s.as_str()), Some("sample_middle"));
                    assert_eq!(not_run, [4]);
                }
                other => panic!("{strategy:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn with_search_steps_the_walk_runs_at_full_steps() {
        let opts = SessionOptions {
            search_steps: Some(4),
            ..SessionOptions::default()
        };
        let run = |s: usize| if s == 5 { Run::Pass } else { streams_from_3(s) };
        let (v, made, _) = simulate_walk(5, &opts, &every_cue()[1..2], run);
        assert!(matches!(v, Verdict::CouldNotReproduce { .. }), "{v:?}");
        // The target ran reduced (its cue is a partial load, not a time): the walk is at full
        // steps, and the target is confirmed at full steps after it.
        assert_eq!(
            made,
            [
                (0, false),
                (5, true),
                (1, false),
                (2, false),
                (3, false),
                (5, false)
            ]
        );
    }

    #[test]
    fn rule_walk_fires_only_after_a_passing_target_that_walks() {
        let opts = SessionOptions::default();
        let mut j = job(3);
        record(&mut j, 0, RunRole::Minimal, true);
        assert_eq!(before("walk")(&ctx(&j, &opts)), None);
        record(&mut j, 3, RunRole::Target, true);
        // No cue: the target rule ends the workflow, the walk does not fire.
        assert_eq!(before("walk")(&ctx(&j, &opts)), None);
        assert!(matches!(
            before("target")(&ctx(&j, &opts)),
            Some((
                Phase::Done,
                Decision::Finish(Verdict::CouldNotReproduce { .. })
            ))
        ));
        j.runs[1].summary.as_mut().unwrap().walk_cues = every_cue();
        assert_eq!(before("target")(&ctx(&j, &opts)), None);
        assert_eq!(
            before("walk")(&ctx(&j, &opts)),
            Some((
                Phase::Search,
                Decision::Run {
                    step: 1,
                    role: RunRole::Search
                }
            ))
        );
        assert_eq!(walk_left(&j, &opts), Some(vec![1, 2]));
        // A failure on the way hands over to the search.
        record(&mut j, 1, RunRole::Search, false);
        assert_eq!(before("walk")(&ctx(&j, &opts)), None);
        assert_eq!(walk_left(&j, &opts), Some(vec![]));
    }

    #[test]
    fn the_reason_follows_the_option() {
        let mut s = RunSummary::default();
        assert_eq!(
            rules::walk_reason(crate::session::journal::WalkOnPass::Auto, Some(&s)),
            None
        );
        assert_eq!(
            rules::walk_reason(crate::session::journal::WalkOnPass::Never, Some(&s)),
            None
        );
        assert_eq!(
            rules::walk_reason(crate::session::journal::WalkOnPass::Always, None).as_deref(),
            Some("--walk-on-pass always")
        );
        s.walk_cues = vec![crate::analytics::walk::Cue::StagedOverCard {
            class: "Flux".into(),
            staged_mb: 22700,
            vram_total_mib: 12288.0,
        }];
        let cue = "Flux staged 22700 MB for dynamic VRAM loading, at or above the card's 12288 MiB";
        assert_eq!(
            rules::walk_reason(crate::session::journal::WalkOnPass::Auto, Some(&s)).as_deref(),
            Some(cue)
        );
        assert_eq!(
            rules::walk_reason(crate::session::journal::WalkOnPass::Never, Some(&s)),
            None
        );
        assert_eq!(
            rules::walk_reason(crate::session::journal::WalkOnPass::Always, Some(&s)),
            Some(format!("--walk-on-pass always ({cue})"))
        );
    }
}
