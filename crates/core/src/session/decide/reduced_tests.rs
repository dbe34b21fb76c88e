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
    drive_with(n, options, None, model)
}

/// [`drive`] with each step's predicted run time.
fn drive_with(
    n: usize,
    options: &SessionOptions,
    costs: Option<&[StepCost]>,
    model: &Model,
) -> (Verdict, Vec<(usize, bool)>) {
    let mut j = job(n);
    let mut made = Vec::new();
    for _ in 0..100 {
        let (_, d, cap) = decide_steps_in(&j, options, None, costs);
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
                stage: result.err().map(Stage::from),
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

/// Predicted costs under which some steps are reduced and others not: even steps are mostly
/// sampling, odd ones mostly load; the cost grows along the ladder.
fn mixed_costs(n: usize) -> Vec<StepCost> {
    (0..=n)
        .map(|k| {
            let full = 10.0 * (k + 1) as f64;
            StepCost {
                full,
                reduced: if k % 2 == 0 { 0.2 * full } else { 0.9 * full },
            }
        })
        .collect()
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
                    for (strategy, costs) in [Strategy::Linear, Strategy::Binary]
                        .into_iter()
                        .flat_map(|s| [(s, None), (s, Some(mixed_costs(n)))])
                    {
                        let (want, _) = drive(n, &opts(strategy, None), &model);
                        let (got, made) =
                            drive_with(n, &opts(strategy, Some(2)), costs.as_deref(), &model);
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
                            "n={n} fail={fail} grow={grow} {kind} {strategy:?} {costs:?}: {made:?}"
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

fn cost(full: f64, reduced: f64) -> StepCost {
    StepCost { full, reduced }
}

#[test]
fn few_steps_pay_only_for_a_large_saving_on_a_run_that_is_not_cheap() {
    // Step 1 saves 80 % of 100 s, the largest run: it pays while a full re-run is unlikely.
    let costs = [
        cost(10.0, 8.0),
        cost(100.0, 20.0),
        cost(30.0, 25.0),
        cost(12.0, 2.0),
    ];
    assert!(reduce_pays(&costs, 1, 4, 0.5));
    // … but not when it is the only place left (1.5 / 2: a full re-run is likely).
    assert!(reduce_pays(&costs, 1, 2, 0.5) == (80.0 > 0.75 * 100.0));
    assert!(!reduce_pays(&[cost(100.0, 30.0)], 0, 2, 0.5));
    // A variant whose time is mostly load saves too small a share (5 of 30 s).
    assert!(!reduce_pays(&costs, 2, 8, 0.5));
    // A cheap variant (10 of 12 s saved, but the largest run is 100 s) is not worth it.
    assert!(!reduce_pays(&costs, 3, 8, 0.5));
    // No prediction for the step: it runs at full steps.
    assert!(!reduce_pays(&costs, 9, 8, 0.5));
}

#[test]
fn the_expected_confirmation_follows_the_stage_of_the_failure_being_narrowed_down() {
    // The failure's stage: one that stands at few steps costs no re-run, one that can depend
    // on the step count a whole one, none known half.
    for stage in ["load", "condition", "sample_first", "decode", "postprocess"] {
        assert_eq!(failure_rerun(Some(stage.into())), 0.0, "{stage}");
    }
    assert_eq!(failure_rerun(Some("sample_middle".into())), 1.0);
    assert_eq!(failure_rerun(None), 0.5);
    // The last place left (open = 2), saving 70 %: a re-run only when the probe passes (½)
    // pays; with the failure's re-run too (½ + ½) it does not.
    let costs = [cost(10.0, 8.0), cost(100.0, 30.0)];
    assert!(reduce_pays(&costs, 1, 2, 0.0));
    assert!(!reduce_pays(&costs, 1, 2, 0.5));
    assert!(!reduce_pays(&costs, 1, 2, 1.0));
    // Four places left, saving 45 %: (1 + 1) / 4 = 50 % is too much, (1 + 0) / 4 is not.
    let costs = [cost(10.0, 8.0), cost(100.0, 55.0)];
    assert!(reduce_pays(&costs, 1, 4, 0.0));
    assert!(!reduce_pays(&costs, 1, 4, 1.0));
    // Driven: a decode failure high up (it stands at few steps) — the last place left, step 4,
    // now runs at few steps too; a failure in the middle of sampling (re-run at full steps)
    // keeps it at full steps. The verdict is the full-step one either way.
    let costs = [
        cost(3.0, 2.0),
        cost(5.0, 3.0),
        cost(8.0, 6.0),
        cost(100.0, 30.0),
        cost(100.0, 30.0),
        cost(110.0, 35.0),
    ];
    let options = opts(Strategy::Linear, Some(4));
    let decode = |s: usize, _| if s >= 4 { Err("decode") } else { Ok(()) };
    let (v, made) = drive_with(5, &options, Some(&costs), &decode);
    assert_eq!(boundary(&v), (3, 4));
    assert!(
        made.contains(&(4, true)) && !made.contains(&(4, false)),
        "{made:?}"
    );
    let middle = |s: usize, _| if s >= 4 { Err("sample_middle") } else { Ok(()) };
    let (v, made) = drive_with(5, &options, Some(&costs), &middle);
    assert_eq!(boundary(&v), (3, 4));
    assert!(
        made.contains(&(4, false)) && !made.contains(&(4, true)),
        "{made:?}"
    );
}

#[test]
fn a_prediction_of_runs_of_a_few_seconds_decides_nothing() {
    assert!(weighable(&[cost(3.0, 2.0), cost(10.0, 9.0)]));
    let short = [cost(0.3, 0.2), cost(9.0, 8.0)];
    assert!(!weighable(&short));
    // So today's rule stands: every search run but the minimal is reduced.
    let model = |s: usize, _| if s >= 1 { Err("sample_first") } else { Ok(()) };
    let options = opts(Strategy::Linear, Some(4));
    let short: Vec<StepCost> = (0..=5).map(|_| cost(9.0, 1.0)).collect();
    assert_eq!(
        drive_with(5, &options, Some(&short), &model).1,
        drive(5, &options, &model).1
    );
}

#[test]
fn with_predictions_cheap_variants_run_at_full_steps_and_the_verdict_stays() {
    // Steps 0–2 are cheap and mostly load; 3–5 are large and mostly sampling.
    let costs = [
        cost(3.0, 2.0),
        cost(5.0, 3.0),
        cost(8.0, 6.0),
        cost(100.0, 25.0),
        cost(100.0, 25.0),
        cost(110.0, 30.0),
    ];
    let options = opts(Strategy::Linear, Some(4));
    // A failure at the second increment: the search runs everything at full steps, no
    // confirmation run is needed (the old rule ran steps 1, 2 and 5 reduced and 1 again).
    let model = |s: usize, _| if s >= 2 { Err("sample_middle") } else { Ok(()) };
    let (v, made) = drive_with(5, &options, Some(&costs), &model);
    assert_eq!(boundary(&v), (1, 2));
    assert_eq!(made, vec![(0, false), (5, true), (1, false), (2, false)]);
    let (_, old) = drive(5, &options, &model);
    assert!(old.len() > made.len(), "{old:?}");
    // A decode failure high up: the large variants are searched at few steps while a full
    // re-run is unlikely; so is step 4, the only place left, since a decode failure there
    // would stand at few steps (the target's failure was a decode one): only a pass is re-run.
    let model = |s: usize, _| if s >= 4 { Err("decode") } else { Ok(()) };
    let (v, made) = drive_with(5, &options, Some(&costs), &model);
    assert_eq!(boundary(&v), (3, 4));
    assert_eq!(
        made,
        vec![
            (0, false),
            (5, true),
            (1, false),
            (2, false),
            (3, true),
            (4, true),
            (3, false)
        ]
    );
}

#[test]
fn a_failure_seen_only_at_full_steps_is_narrowed_down_at_full_steps() {
    // The target saves too little at few steps and runs at full steps; the probes would save
    // 80 %. A failure that needs the steps (a cache that grows): at few steps every run passes.
    let costs = [
        cost(3.0, 2.0),
        cost(100.0, 20.0),
        cost(100.0, 20.0),
        cost(100.0, 20.0),
        cost(100.0, 20.0),
        cost(100.0, 90.0),
    ];
    let options = opts(Strategy::Binary, Some(4));
    let grows = |s: usize, reduced: bool| {
        if s >= 2 && !reduced {
            Err("sample_middle")
        } else {
            Ok(())
        }
    };
    let (v, made) = drive_with(5, &options, Some(&costs), &grows);
    assert_eq!(boundary(&v), (1, 2));
    // No probe is made at few steps once the target failed mid-sampling at full steps: a pass
    // there could not tell a failure further up from this one (before, probes 2 and 3 ran at
    // few steps, passed, and were searched again at full steps).
    assert_eq!(made, vec![(0, false), (5, false), (2, false), (1, false)]);
    // A failure that stands at few steps seen at full steps leaves the probes reduced.
    let decode = |s: usize, _| if s >= 2 { Err("decode") } else { Ok(()) };
    let (v, made) = drive_with(5, &options, Some(&costs), &decode);
    assert_eq!(boundary(&v), (1, 2));
    assert!(made.contains(&(2, true)), "{made:?}");
    // Once a reduced run failed mid-sampling, the failure shows at few steps: the rule's
    // expected confirmation decides again (here the 80 % saving pays with 4 places open).
    let planted = |s: usize, _| if s >= 3 { Err("sample_middle") } else { Ok(()) };
    let costs_target_reduced: Vec<StepCost> = (0..=5)
        .map(|k| {
            if k == 0 {
                cost(3.0, 2.0)
            } else {
                cost(100.0, 20.0)
            }
        })
        .collect();
    let (v, made) = drive_with(5, &options, Some(&costs_target_reduced), &planted);
    assert_eq!(boundary(&v), (2, 3));
    assert_eq!(made[1], (5, true), "{made:?}");
    assert!(made[2..].iter().any(|&(s, r)| r && s != 5), "{made:?}");
}
